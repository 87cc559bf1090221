#!/usr/bin/env python3
"""Turns the JSON lines of kiln's CPU benchmark (scripts/bench.sh) into a markdown table.

    python3 bench/report.py RESULTS.jsonl... [--threads 2] [--all]

Each input line is {"workload": ..., "impl": ..., "ms": ...} (other fields are kept as notes);
lines that are not JSON objects are ignored, so raw program output can be fed in. A workload
measured in several rounds gets the median of its rounds. Per workload the table shows kiln's
time, the fastest anchor (any impl other than "kiln") and the ratio kiln / anchor (below 1: kiln
is faster), then GFLOP/s and the fraction of the measured FMA peak (peak/fma/tN, the best round)
where the FLOPs are known. bf16 GEMMs are workloads of their own (gemm/LAYOUT/MxNxK/tT/bf16: bf16
operands, f32 accumulation), so an f32 row is never compared with a bf16 anchor; their "% peak"
is against the measured bf16 peak (peak/bf16dot/tN, vdpbf16ps, or peak/amx/tN, tdpbf16ps: the
higher) where the CPU has one and it is above the f32 FMA peak, else against the f32 FMA peak
(kiln's bf16 products convert to f32 where vdpbf16ps is the slower: an Emerald Rapids VM's runs at
half the FMAs' flops).

FLOPs count the matrix products and convolutions only (bias, activations, loss and optimizer
are a few percent at most and are left out): a forward layer is 2·B·in·out (a convolution
2·B·Cout·Hout·Wout·Cin·kh·kw); a training step adds the weight gradient of every layer and the
input gradient of every layer but the first, whose input is data. A GEMM workload
gemm/LAYOUT/MxNxK/tT is 2·M·N·K on T threads; training and inference workloads run on --threads.

    python3 bench/report.py --gpu KILN.jsonl TORCH.jsonl

The GPU benchmark (issue 6; scripts/gpu-check): kiln_bench_gpu's lines (impl kiln-cuda, kiln-cpu,
cublaslt) and bench/torch_gpu_anchor.py's (torch-eager, torch-compile*) as one table per workload,
issue 6's targets with their measured values, compile times side by side, the cuBLASLt GEMMs, and
every failed or skipped measurement.
"""
import argparse
import json
import re
import statistics
import sys

# Layers of the zoo models (frontend/Zoo.cpp) as forward FLOPs per sample, first layer first.
# Linear(in, out): 2·in·out. Conv2d(cin, cout, k) on an Hout×Wout output: 2·cout·Hout·Wout·cin·k·k.
LAYER_FLOPS = {
    "tiny_mlp": [2 * 64 * 32, 2 * 32 * 1],
    "mnist_mlp": [2 * 784 * 128, 2 * 128 * 10],
    "digits_mlp": [2 * 64 * 32, 2 * 32 * 10],
    "simplenet": [2 * 1000 * 512, 2 * 512 * 256, 2 * 256 * 2],
    "cnn": [2 * 32 * 28 * 28 * 1 * 9, 2 * 64 * 14 * 14 * 32 * 9, 2 * 64 * 7 * 7 * 10],
}


def workload_flops(workload):
    """FLOPs of one run of the workload, or None where the name does not say."""
    parts = workload.split("/")
    if parts[0] == "gemm" and len(parts) >= 3:
        m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", parts[2])
        return 2.0 * int(m[1]) * int(m[2]) * int(m[3]) if m else None
    if parts[0] in ("train", "infer") and len(parts) >= 3 and parts[1] in LAYER_FLOPS:
        m = re.fullmatch(r"b(\d+)", parts[2])
        if not m:
            return None
        layers, batch = LAYER_FLOPS[parts[1]], int(m[1])
        if parts[0] == "infer":
            return float(batch * sum(layers))
        return float(batch * (3 * sum(layers) - layers[0]))  # forward + dW (all) + dX (not the first)
    return None


def workload_threads(workload, default):
    m = re.search(r"/t(\d+)(?:/|$)", workload)
    return int(m[1]) if m else default


def read_records(paths):
    for path in paths:
        with (sys.stdin if path == "-" else open(path)) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(rec, dict) and "workload" in rec and "impl" in rec:
                    # Older anchor logs put oneDNN's bf16 matmul beside the f32 ones, under the f32
                    # workload's name: it is the bf16 workload's anchor (gemm/…/tT/bf16).
                    if rec["impl"].endswith("-bf16") and not rec["workload"].endswith("/bf16"):
                        rec = dict(rec, workload=rec["workload"] + "/bf16", impl=rec["impl"][:-len("-bf16")])
                    yield rec


def fmt_ms(ms):
    if ms is None:
        return "–"
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def fmt(x, spec, suffix=""):
    return "–" if x is None else format(x, spec) + suffix


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", default=["-"])
    ap.add_argument("--threads", type=int, default=2, help="threads of the train/ and infer/ workloads")
    ap.add_argument("--all", action="store_true", help="also list every implementation's median")
    ap.add_argument("--gpu", nargs=2, metavar=("KILN", "TORCH"),
                    help="the GPU benchmark's report from kiln_bench_gpu's and torch_gpu_anchor.py's JSON lines")
    ap.add_argument("--chain-ab", nargs=2, metavar=("CHAINED", "SEPARATE"),
                    help="kiln_bench_gpu's kiln-cuda lines with launch chains against those without (KILN_CUDA_CHAIN=0)")
    args = ap.parse_args()
    if args.chain_ab:
        import report_gpu
        return report_gpu.chain_ab(args.chain_ab[0], args.chain_ab[1])
    if args.gpu:
        import report_gpu
        return report_gpu.report(args.gpu[0], args.gpu[1])

    times, order, peaks, bf16_peaks, skipped, notes, memory = {}, [], {}, {}, {}, [], []
    for rec in read_records(args.files):
        w, impl = rec["workload"], rec["impl"]
        if w.startswith("env/"):
            notes.append(rec)
        elif w.startswith("mem/"):
            memory.append(rec)
        elif "skipped" in rec:
            skipped.setdefault((impl, rec["skipped"]), []).append(w)
        elif w.startswith("peak/"):
            kind = bf16_peaks if w.startswith(("peak/bf16dot/", "peak/amx/")) else peaks
            kind[workload_threads(w, 1)] = max(kind.get(workload_threads(w, 1), 0.0), rec["gflops"])
        elif "ms" in rec:
            if w not in times:
                times[w] = {}
                order.append(w)
            times[w].setdefault(impl, []).append(rec["ms"])

    def peak_for(w):
        t = workload_threads(w, args.threads)
        if w.endswith("/bf16") and t in bf16_peaks:
            return max(bf16_peaks[t], peaks.get(t, 0.0))
        return peaks.get(t)

    category = {"train": 0, "infer": 1, "gemm": 2}
    order.sort(key=lambda w: category.get(w.split("/")[0], 3))  # stable: each program's order within
    print("| workload | kiln ms | best anchor | anchor ms | kiln / anchor | kiln GFLOP/s | anchor GFLOP/s "
          "| kiln % peak | anchor % peak |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for w in order:
        med = {impl: statistics.median(v) for impl, v in times[w].items()}
        kiln = med.get("kiln")
        anchors = {impl: ms for impl, ms in med.items() if impl != "kiln"}
        best = min(anchors, key=anchors.get) if anchors else None
        anchor = anchors.get(best)
        flops, peak = workload_flops(w), peak_for(w)

        def gflops(ms):
            return flops / (ms * 1e6) if flops and ms else None

        def pct(ms):
            g = gflops(ms)
            return 100.0 * g / peak if g and peak else None

        ratio = kiln / anchor if kiln and anchor else None
        print(f"| {w} | {fmt_ms(kiln)} | {best or '–'} | {fmt_ms(anchor)} | {fmt(ratio, '.2f')} "
              f"| {fmt(gflops(kiln), '.1f')} | {fmt(gflops(anchor), '.1f')} | {fmt(pct(kiln), '.0f', ' %')} "
              f"| {fmt(pct(anchor), '.0f', ' %')} |")

    if peaks:
        print()
        print("Measured FP32 FMA peak: " + ", ".join(f"{g:.1f} GFLOP/s on {t} thread{'s' if t > 1 else ''}"
                                                    for t, g in sorted(peaks.items())) + ".")
        if bf16_peaks:
            print("Measured bf16 peak (the bf16 rows' % peak where above the FMA peak): " +
                  ", ".join(f"{g:.1f} GFLOP/s on {t} thread{'s' if t > 1 else ''}" for t, g in sorted(bf16_peaks.items())) +
                  ".")
        # Sanity checks: a disturbed peak run overstates every percentage above.
        if 1 in peaks and 2 in peaks and peaks[2] < 1.6 * peaks[1]:
            print(f"\n**Warning:** the 2-thread peak is {peaks[2] / peaks[1]:.2f}× the 1-thread one, not ~2×: "
                  "the other core was busy during the run, so the 2-thread figures are not trustworthy.")
        over = [w for w in order if not w.endswith("/bf16")  # bf16 units may pass the f32 FMA peak
                for ms in [min(statistics.median(v) for v in times[w].values())]
                if workload_flops(w) and peak_for(w) and workload_flops(w) / (ms * 1e6) > 1.02 * peak_for(w)]
        if over:
            print(f"\n**Warning:** {len(over)} workloads ran faster than the measured peak (e.g. {over[0]}): "
                  "the peak run was disturbed, so the % of peak figures are overstated.")
    peaks_rss = {}
    for rec in memory:
        extra = ", ".join(f"{k} {v}" for k, v in rec.items() if k not in ("workload", "impl"))
        print(f"\nMemory, {rec['workload']} ({rec['impl']}): {extra}.")
        peaks_rss.setdefault(rec["workload"], {})["kiln" if rec["impl"] == "kiln" else "anchor"] = rec["peak_rss_mib"]
    for w, p in peaks_rss.items():
        if "kiln" in p and "anchor" in p:
            print(f"\nPeak resident set, {w}: kiln {p['kiln']} MiB against {p['anchor']} MiB "
                  f"(kiln / anchor {p['kiln'] / p['anchor']:.2f}).")
    if args.all:
        print("\n| workload | implementation | median ms | rounds |")
        print("|---|---|---:|---:|")
        for w in order:
            for impl, v in sorted(times[w].items(), key=lambda kv: statistics.median(kv[1])):
                print(f"| {w} | {impl} | {fmt_ms(statistics.median(v))} | {len(v)} |")
    for (impl, why), ws in sorted(skipped.items()):
        print(f"\nNot measured: {impl} on {len(set(ws))} workloads ({why}).")
    seen = set()
    for rec in notes:
        text = json.dumps({k: v for k, v in rec.items() if k != "workload"})
        if text not in seen:
            seen.add(text)
            print(f"\nEnvironment ({rec['workload'][4:]}): `{text}`")


if __name__ == "__main__":
    sys.exit(main())
