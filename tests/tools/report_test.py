#!/usr/bin/env python3
"""bench/report.py on known records: the CPU table's rows, anchors and ratios.

    python3 report_test.py PATH/TO/bench/report.py

An f32 GEMM row is compared with the fastest f32 anchor only; oneDNN's bf16 matmul is the anchor of
the bf16 row (gemm/…/tT/bf16), both as anchors.cpp writes it now and as older logs wrote it (impl
onednn-matmul-bf16 under the f32 workload's name); kiln's bf16 GEMM is that row's kiln figure. A
bf16 row's "% peak" is against the higher measured bf16 peak (vdpbf16ps or AMX tiles).
"""
import subprocess
import sys

RECORDS = """\
{"workload": "peak/fma/t1", "impl": "fma-avx512", "ms": 100, "gflops": 100.0}
{"workload": "peak/fma/t2", "impl": "fma-avx512", "ms": 100, "gflops": 200.0}
{"workload": "peak/bf16dot/t2", "impl": "vdpbf16ps", "ms": 100, "gflops": 400.0}
{"workload": "peak/amx/t2", "impl": "tdpbf16ps", "ms": 100, "gflops": 500.0}
{"workload": "gemm/NN/100x100x100/t1", "impl": "kiln", "ms": 0.04}
{"workload": "gemm/NN/100x100x100/t1", "impl": "onednn-sgemm", "ms": 0.05}
{"workload": "gemm/NN/100x100x100/t1", "impl": "onednn-matmul-bf16", "ms": 0.01}
{"workload": "gemm/NN/100x100x100/t2", "impl": "kiln", "ms": 0.03}
{"workload": "gemm/NN/100x100x100/t2", "impl": "openblas", "ms": 0.02}
{"workload": "gemm/NN/100x100x100/t2/bf16", "impl": "onednn-matmul", "ms": 0.004}
{"workload": "gemm/NN/100x100x100/t2/bf16", "impl": "kiln", "ms": 0.008}
not json: ignored
"""


def rows(text):
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 9 and cells[0].startswith("gemm/"):
            out[cells[0]] = cells
    return out


def main():
    report = sys.argv[1]
    run = subprocess.run([sys.executable, report, "-"], input=RECORDS, capture_output=True, text=True)
    if run.returncode != 0:
        print(run.stdout, run.stderr)
        return 1
    table = rows(run.stdout)
    failures = []

    def expect(workload, column, value):
        names = ["workload", "kiln ms", "best anchor", "anchor ms", "ratio", "kiln GFLOP/s", "anchor GFLOP/s",
                 "kiln % peak", "anchor % peak"]
        got = table.get(workload, [None] * 9)[names.index(column)]
        if got != value:
            failures.append(f"{workload} {column}: {got!r}, expected {value!r}")

    # f32 against f32: the old log's bf16 matmul (0.01 ms) is not this row's anchor.
    expect("gemm/NN/100x100x100/t1", "best anchor", "onednn-sgemm")
    expect("gemm/NN/100x100x100/t1", "ratio", "0.80")
    expect("gemm/NN/100x100x100/t1", "kiln GFLOP/s", "50.0")
    expect("gemm/NN/100x100x100/t1", "kiln % peak", "50 %")
    # The old record became the bf16 row of one thread, without a kiln figure.
    expect("gemm/NN/100x100x100/t1/bf16", "best anchor", "onednn-matmul")
    expect("gemm/NN/100x100x100/t1/bf16", "anchor ms", "0.01")
    expect("gemm/NN/100x100x100/t1/bf16", "kiln ms", "–")
    # Two threads: the peak of two threads, for the bf16 row too.
    expect("gemm/NN/100x100x100/t2", "best anchor", "openblas")
    expect("gemm/NN/100x100x100/t2", "kiln % peak", "33 %")
    expect("gemm/NN/100x100x100/t2/bf16", "ratio", "2.00")
    expect("gemm/NN/100x100x100/t2/bf16", "kiln % peak", "50 %")  # 250 GFLOP/s of the tiles' 500
    # bf16 units may pass the f32 FMA peak: no warning about a disturbed peak run for those.
    if "faster than the measured peak" in run.stdout:
        failures.append("warned about the peak for a bf16 row")
    for f in failures:
        print("FAIL:", f)
    if failures:
        print(run.stdout)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
