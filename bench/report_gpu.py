"""The GPU benchmark's markdown report (bench/report.py --gpu KILN.jsonl TORCH.jsonl).

Inputs: kiln_bench_gpu's JSON lines (impl kiln-cuda, kiln-cpu, cublaslt; bench/KilnBenchGpu.cpp says
what each field measures) and bench/torch_gpu_anchor.py's (torch-eager, torch-compile,
torch-compile-ro, torch-compile-max-autotune). A workload measured several times gets the median of
its times. kiln's time is the wall time of one synchronous Program::run (inputs uploaded, the step
replayed as a CUDA graph, outputs downloaded), and again with the inputs kept on the device
(Program::keepInputs: nothing moves in); PyTorch's is the CUDA-event time per step of
back-to-back steps on data already on the GPU, so the "kept" ratios are the like-for-like ones. "kiln / X" below
1: kiln is faster.
"""
import os
import statistics

from report import fmt_ms, read_records

TORCH_COMPILE = ("torch-compile", "torch-compile-ro", "torch-compile-max-autotune")


def fmt(x, spec="{:.2f}", none="–"):
    return none if x is None else spec.format(x)


def ratio(a, b):
    return a / b if a and b else None


def times(x):
    return "–" if x is None else f"{x:.2f}×"


class Results:
    """Records by (workload, impl): `ms` medians, the last record's other fields, failures."""

    def __init__(self, paths):
        self.times, self.fields, self.order, self.failures, self.env = {}, {}, [], [], []
        for rec in read_records(paths):
            w, impl = rec["workload"], rec["impl"]
            if w.startswith("env/"):
                self.env.append(rec)
            elif "error" in rec or "skipped" in rec:
                self.failures.append(rec)
            elif "ms" in rec:
                if w not in self.order:
                    self.order.append(w)
                self.times.setdefault((w, impl), []).append(rec["ms"])
                self.fields[(w, impl)] = rec

    def ms(self, workload, impl):
        v = self.times.get((workload, impl))
        return statistics.median(v) if v else None

    def field(self, workload, impl, key):
        return self.fields.get((workload, impl), {}).get(key)

    def best(self, workload, impls):
        """(impl, ms) of the fastest of `impls` measured on `workload`, or (None, None)."""
        found = [(self.ms(workload, i), i) for i in impls if self.ms(workload, i) is not None]
        return (min(found)[1], min(found)[0]) if found else (None, None)

    def workloads(self, prefix):
        return [w for w in self.order if w.startswith(prefix)]


def step_ms(r, w):
    """kiln's device time of a run without moving its inputs: measured with the inputs kept on the
    device (kept_device_ms), else estimated as the device time less one upload of the inputs."""
    kept = r.field(w, "kiln-cuda", "kept_device_ms")
    if kept is not None:
        return kept
    device, h2d = r.field(w, "kiln-cuda", "device_ms"), r.field(w, "kiln-cuda", "h2d_ms")
    return device - h2d if device is not None and h2d is not None else None


def like_ms(r, w):
    """kiln's wall time comparable with the anchors' (their data stays on the device): with the
    inputs kept on the device where measured, else the wall time with inputs uploaded."""
    kept = r.field(w, "kiln-cuda", "kept_ms")
    return kept if kept is not None else r.ms(w, "kiln-cuda")


def main_table(r):
    print("| workload | kiln cuda ms | device ms | inputs kept ms | kept device ms | kiln cpu ms | torch eager ms "
          "| best torch.compile ms | which | kiln / compile | kept / compile | kept / eager | kiln cuda / kiln cpu |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for w in r.workloads("train/") + r.workloads("infer/"):
        kiln, cpu, eager = r.ms(w, "kiln-cuda"), r.ms(w, "kiln-cpu"), r.ms(w, "torch-eager")
        kept = r.field(w, "kiln-cuda", "kept_ms")
        which, compiled = r.best(w, TORCH_COMPILE)
        print(f"| {w} | {fmt_ms(kiln)} | {fmt_ms(r.field(w, 'kiln-cuda', 'device_ms'))} | {fmt_ms(kept)} "
              f"| {fmt_ms(step_ms(r, w))} | {fmt_ms(cpu)} | {fmt_ms(eager)} | {fmt_ms(compiled)} | {which or '–'} "
              f"| {fmt(ratio(kiln, compiled))} | {fmt(ratio(kept, compiled))} | {fmt(ratio(kept, eager))} "
              f"| {fmt(ratio(kiln, cpu))} |")


def target_rows(r):
    """(target, measured, met) for each of issue 6's targets, None where a figure is missing."""
    rows = []
    for model, w in (("mnist_mlp", "train/mnist_mlp/b100/adam"), ("tiny_mlp", "train/tiny_mlp/b64/sgd")):
        kiln, device, kept = r.ms(w, "kiln-cuda"), r.field(w, "kiln-cuda", "device_ms"), like_ms(r, w)
        rows.append((f"{model} train step ≤ 20 µs", f"{fmt(kept and kept * 1e3, '{:.1f}')} µs wall with the inputs "
                     f"kept, {fmt(kiln and kiln * 1e3, '{:.1f}')} uploading them, "
                     f"{fmt(device and device * 1e3, '{:.1f}')} µs device", kept is not None and kept <= 0.020))
        rows.append(faster_row(r, w, f"{model} ≥ 1.5× faster than torch.compile's best", 1.5))
    w, g = "train/simplenet/b10000/adam", "gemms/train/simplenet/b10000/adam"
    device, gemms, step = r.field(w, "kiln-cuda", "device_ms"), r.ms(g, "cublaslt"), step_ms(r, w)
    rows.append(("simplenet train step within 1.1× of its cuBLASLt GEMMs alone",
                 f"{times(ratio(step, gemms))} device time with the inputs kept ({fmt_ms(step)} / {fmt_ms(gemms)} ms), "
                 f"{times(ratio(device, gemms))} uploading them",
                 ratio(step, gemms) is not None and ratio(step, gemms) <= 1.1))
    f32, bf16 = like_ms(r, w), like_ms(r, w + "/bf16")
    rows.append(("simplenet train step: bf16 ≥ 2× f32",
                 f"{times(ratio(f32, bf16))} wall with the inputs kept, "
                 f"{times(ratio(r.ms(w, 'kiln-cuda'), r.ms(w + '/bf16', 'kiln-cuda')))} uploading them",
                 ratio(f32, bf16) is not None and ratio(f32, bf16) >= 2))
    rows.append(faster_row(r, "train/cnn/b64/adam", "cnn train step ≥ 1.2× faster than torch.compile's best", 1.2))
    return rows


def faster_row(r, w, target, factor):
    """(target, measured, met) for "kiln's step `factor`× faster than torch.compile's best", judged on
    the wall time with the inputs kept on the device (as the anchors keep theirs), the time uploading
    them beside it."""
    which, compiled = r.best(w, TORCH_COMPILE)
    kept, uploading = ratio(compiled, like_ms(r, w)), ratio(compiled, r.ms(w, "kiln-cuda"))
    return (target, f"{times(kept)} with the inputs kept, {times(uploading)} uploading them "
            f"({which or 'no torch.compile figure'})", kept is not None and kept >= factor)


def targets(r):
    print("\n### Issue 6's targets\n")
    print("Met or not on kiln's wall time with the inputs kept on the device (Program::keepInputs; the anchors' "
          "data is on the device too), device time for the GEMM floor; the figures uploading the inputs every run "
          "beside them.\n")
    print("| target | measured | met |")
    print("|---|---|---|")
    for target, measured, met in target_rows(r):
        print(f"| {target} | {measured} | {'yes' if met else 'no'} |")


def compile_times(r):
    print("\n### Compile times (ms)\n")
    print("kiln: pipeline + NVRTC + module load for the first compile of the workload in the process (cold; "
          "the NVRTC part beside it) and for a second compile of the same graph (cached). torch.compile: the wall "
          "time of the first step, compilation included.\n")
    print("| workload | kiln cold | of which NVRTC | kiln cached | kiln cpu (LLVM) | torch.compile | reduce-overhead "
          "| max-autotune |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for w in r.workloads("train/") + r.workloads("infer/"):
        k = lambda key: r.field(w, "kiln-cuda", key)  # noqa: E731
        t = lambda impl: r.field(w, impl, "compile_ms")  # noqa: E731
        print(f"| {w} | {fmt(k('compile_ms'), '{:.0f}')} | {fmt(k('nvrtc_ms'), '{:.0f}')} "
              f"| {fmt(k('cached_compile_ms'), '{:.1f}')} | {fmt(r.field(w, 'kiln-cpu', 'compile_ms'), '{:.0f}')} "
              f"| {fmt(t('torch-compile'), '{:.0f}')} | {fmt(t('torch-compile-ro'), '{:.0f}')} "
              f"| {fmt(t('torch-compile-max-autotune'), '{:.0f}')} |")
    startup = r.ms("startup/cuda", "kiln-cuda")
    if startup is not None:
        print(f"\nkiln's first CUDA program of the process (driver context, NVRTC start) took {startup:.0f} ms, "
              "outside the figures above.")


def gemms(r):
    rows = r.workloads("gemm/") + r.workloads("gemms/")
    if not rows:
        return
    print("\n### cuBLASLt alone\n")
    print("| product | ms | TFLOP/s |")
    print("|---|---:|---:|")
    for w in rows:
        ms, flops = r.ms(w, "cublaslt"), None
        parts = w.split("/")
        if parts[0] == "gemm" and len(parts) >= 3:
            m, n, k = (int(x) for x in parts[2].split("x"))
            flops = 2.0 * m * n * k
        print(f"| {w} | {fmt_ms(ms)} | {fmt(flops and ms and flops / (ms * 1e9), '{:.1f}')} |")


def failures(r):
    if not r.failures:
        return
    print("\n### Not measured\n")
    for rec in r.failures:
        why = rec.get("error") or rec.get("skipped")
        print(f"- {rec['workload']} ({rec['impl']}): {str(why)[:300]}")


def report(kiln_path, torch_path):
    missing = [p for p in (kiln_path, torch_path) if not os.path.exists(p)]
    for p in missing:
        print(f"**No results file {p}** (its benchmark did not run or did not start).  ")
    r = Results([p for p in (kiln_path, torch_path) if p not in missing])
    for rec in r.env:
        print(f"Environment ({rec['workload'][4:]}, {rec['impl']}): "
              + ", ".join(f"{k} {v}" for k, v in rec.items() if k not in ("workload", "impl")) + ".  ")
    print()
    main_table(r)
    targets(r)
    compile_times(r)
    gemms(r)
    failures(r)
    return 0


def chain_ab(chained_path, separate_path):
    """kiln-cuda with launch chains (KILN_CUDA_CHAIN=1, the default) against the same run without
    them (KILN_CUDA_CHAIN=0): one row per workload of both files."""
    def cuda_records(path):
        out = {}
        for rec in read_records([path]):
            if rec.get("impl") == "kiln-cuda" and "ms" in rec:
                out.setdefault(rec["workload"], rec)
        return out
    a, b = cuda_records(chained_path), cuda_records(separate_path)
    print("| workload | launches | chains | kept ms | kept device ms | ms | device ms | kept: separate / chained |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for w in a:
        if w not in b:
            continue
        x, y = a[w], b[w]
        def pair(key):
            return f"{fmt_ms(y.get(key))} → {fmt_ms(x.get(key))}"
        print(f"| {w} | {y.get('launches', '–')} → {x.get('launches', '–')} | {x.get('chains', '–')} | "
              f"{pair('kept_ms')} | {pair('kept_device_ms')} | {pair('ms')} | {pair('device_ms')} | "
              f"{times(ratio(y.get('kept_ms'), x.get('kept_ms')))} |")
    return 0

