#!/usr/bin/env python3
"""PyTorch anchor of kiln's GPU benchmark (issue 6): the zoo models' training steps and inference on
the GPU, eager and under torch.compile, beside bin/kiln_bench_gpu (scripts/gpu-check runs both).

    python3 bench/torch_gpu_anchor.py [--json FILE] [--filter REGEX] [--budget S] [--modes LIST]

Prints one JSON line per workload and implementation on stdout (and into FILE):

    {"workload": "train/mnist_mlp/b100/adam", "impl": "torch-compile", "ms": 0.21, "sync_ms": 0.25,
     "runs": 4000, "compile_ms": 9100.0, "variant": "..."}

The workloads and their names are kiln_bench_gpu's; the models are bench/torch_anchor.py's (the zoo
rewritten with torch.nn). A training step is zero_grad + forward + loss + backward + optimizer step on
data already on the GPU; "/bf16" workloads run forward and loss under torch.autocast(bfloat16) with
f32 master weights, as kiln's amp policy does. f32 is full f32 (TF32 off for matmuls and cuDNN, as in
kiln unless the user opts in); cudnn.benchmark is on.

Implementations ("impl"), each the best of its variants ("variant" names the one):
  torch-eager                 eager; Adam with foreach or fused=True
  torch-compile               torch.compile(forward + loss) and torch.compile(optimizer.step)
  torch-compile-ro            forward + loss with mode="reduce-overhead" (CUDA graphs)
  torch-compile-max-autotune  forward + loss with mode="max-autotune" (autotuned GEMMs, CUDA graphs)
(the optimizer step is compiled in the default mode throughout, as PyTorch's recipe does).
"ms" is the median time per step from CUDA events around back-to-back steps (each sample lasts at
least 2 ms) after warm-up; "sync_ms" the median wall time of one step followed by
torch.cuda.synchronize() (what a loop that reads the loss every step sees); "compile_ms" the wall
time of the first step, compilation included. Each impl runs over every workload before the next
one starts, cheapest compile first (eager, reduce-overhead, default, max-autotune). A variant that
fails prints an "error" line; once --budget seconds have passed, compiled variants not yet run
print a "skipped" line (eager ones still run). torch._dynamo is reset between variants so no cache or recompile limit carries over.
"""
import argparse
import json
import re
import statistics
import sys
import time
import traceback

import torch
import torch.nn as nn

from torch_anchor import MODELS, WithLoss, make_data, make_optimizer

# (model, batch, optimizer, precision) training steps and (model, batch, precision) inference, in
# the order they run: the workloads issue 6's targets name first, so a short budget still covers them.
TRAIN = [("tiny_mlp", 64, "sgd", "f32"), ("mnist_mlp", 100, "adam", "f32"), ("cnn", 64, "adam", "f32"),
         ("simplenet", 10000, "adam", "f32"), ("simplenet", 10000, "adam", "bf16"), ("cnn", 64, "adam", "bf16")]
INFER = [("tiny_mlp", 1, "f32"), ("tiny_mlp", 64, "f32"), ("mnist_mlp", 1, "f32"), ("mnist_mlp", 100, "f32"),
         ("cnn", 1, "f32"), ("cnn", 64, "f32"), ("simplenet", 1, "f32"), ("simplenet", 10000, "f32"),
         ("simplenet", 10000, "bf16")]

# impl -> torch.compile mode (None: eager).
MODES = {"torch-eager": None, "torch-compile": "default", "torch-compile-ro": "reduce-overhead",
         "torch-compile-max-autotune": "max-autotune"}
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")
# The order the impls run in, each over every workload: by compile time (eager none, reduce-overhead
# 1-2 s, default 5-11 s, max-autotune 18-45 s per training workload on the H200).
IMPL_ORDER = ["torch-eager", "torch-compile-ro", "torch-compile", "torch-compile-max-autotune"]


class Autocast(nn.Module):
    """Runs the wrapped module under torch.autocast(bfloat16): kiln's bf16 amp policy."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *args):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return self.inner(*args)


class Output:
    """JSON lines to stdout and, when given, a file (flushed line by line: a crash keeps them)."""

    def __init__(self, path):
        self.file = open(path, "w") if path else None

    def emit(self, **record):
        line = json.dumps(record)
        print(line, flush=True)
        if self.file:
            self.file.write(line + "\n")
            self.file.flush()


def workload_name(name, batch, opt=None, precision="f32"):
    base = f"train/{name}/b{batch}/{opt}" if opt else f"infer/{name}/b{batch}"
    return base if precision == "f32" else f"{base}/{precision}"


def gpu_data(name, batch):
    x, y = make_data(name, batch, torch.Generator().manual_seed(1))
    return x.cuda(), y.cuda()


def time_cuda(fn, budget_s, cuda_graphs):
    """(events ms per step, sync ms per step, steps timed) after a warm-up."""
    def call():
        if cuda_graphs:
            torch.compiler.cudagraph_mark_step_begin()
        fn()

    for _ in range(5):  # CUDA-graph trees record on the second or third call
        call()
    torch.cuda.synchronize()
    sync = []
    for _ in range(20):
        t0 = time.perf_counter()
        call()
        torch.cuda.synchronize()
        sync.append((time.perf_counter() - t0) * 1e3)
    per_sample = max(1, min(1000, int(2.0 / max(statistics.median(sync), 1e-3))))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples, began = [], time.perf_counter()
    while len(samples) < 7 or (time.perf_counter() - began < budget_s and len(samples) < 200):
        start.record()
        for _ in range(per_sample):
            call()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / per_sample)
    return statistics.median(samples), statistics.median(sync), 20 + len(samples) * per_sample


def first_call_ms(fn, cuda_graphs):
    """Wall time of the first call (compilation included)."""
    t0 = time.perf_counter()
    if cuda_graphs:
        torch.compiler.cudagraph_mark_step_begin()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def train_variants(name, batch, opt_kind, precision, mode):
    """(variant, step function) pairs of one training workload for one mode."""
    def build(fused):
        torch.manual_seed(0)
        model = MODELS[name][0]().cuda()
        loss_fn = WithLoss(model, MODELS[name][2])
        if precision == "bf16":
            loss_fn = Autocast(loss_fn)
        opt = make_optimizer(opt_kind, model.parameters(), foreach=not fused, fused=fused)
        return loss_fn, opt

    x, y = gpu_data(name, batch)
    configs = [False, True] if opt_kind == "adam" and mode is None else [False]
    for fused in configs:
        loss_fn, opt = build(fused)
        opt_step = opt.step
        if mode is not None:
            loss_fn = torch.compile(loss_fn, mode=mode)
            # The optimizer as PyTorch's compiled-optimizer recipe has it: default mode (its
            # in-place parameter updates keep CUDA graphs out anyway).
            opt_step = torch.compile(opt.step)

        def step(loss_fn=loss_fn, opt=opt, opt_step=opt_step):
            opt.zero_grad(set_to_none=True)
            loss_fn(x, y).backward()
            opt_step()

        what = "eager" if mode is None else f"compile(forward+loss, mode={mode}) + compile(optimizer.step)"
        yield what + (", fused Adam" if fused else ", foreach") + ", zero_grad(set_to_none)", step


def infer_variants(name, batch, precision, mode):
    torch.manual_seed(0)
    model = MODELS[name][0]().cuda().eval()
    if precision == "bf16":
        model = Autocast(model)
    x, _ = gpu_data(name, batch)
    fn = model if mode is None else torch.compile(model, mode=mode)

    def run():
        with torch.inference_mode():
            fn(x)

    yield ("eager" if mode is None else f"compile(model, mode={mode})") + ", inference_mode", run


def bench(out, workload, impl, mode, variants, args, deadline):
    """Runs every variant of one (workload, impl) and emits the fastest, or the failure."""
    if mode is not None and time.perf_counter() > deadline:
        out.emit(workload=workload, impl=impl, skipped=f"--budget of {args.budget:g} s spent")
        return
    best, errors = None, []
    try:
        for variant, fn in variants:
            torch._dynamo.reset()
            try:
                graphs = mode in CUDA_GRAPH_MODES
                compile_ms = first_call_ms(fn, graphs)
                ms, sync_ms, runs = time_cuda(fn, args.seconds, graphs)
                if best is None or ms < best["ms"]:
                    best = dict(ms=round(ms, 5), sync_ms=round(sync_ms, 5), runs=runs, compile_ms=round(compile_ms, 1),
                                variant=variant)
            except Exception as e:  # a variant that fails (max-autotune, say) leaves the others
                errors.append(f"{variant}: {type(e).__name__}: {e}")
                traceback.print_exc(file=sys.stderr)
    except Exception as e:  # building the model or its data
        errors.append(f"{type(e).__name__}: {e}")
        traceback.print_exc(file=sys.stderr)
    finally:
        torch._dynamo.reset()
        torch.cuda.empty_cache()
    if best:
        out.emit(workload=workload, impl=impl, **best, **({"errors": errors} if errors else {}))
    else:
        out.emit(workload=workload, impl=impl, error="; ".join(errors)[:2000] or "no variant ran")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="also write the JSON lines to this file")
    ap.add_argument("--filter", default="", help="run only workloads whose name matches this regex")
    ap.add_argument("--budget", type=float, default=240,
                    help="seconds after which compiled variants are skipped (eager ones still run)")
    ap.add_argument("--seconds", type=float, default=0.5, help="seconds of timed steps per variant")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated impls to run")
    args = ap.parse_args()
    out = Output(args.json)
    if not torch.cuda.is_available():
        out.emit(workload="env/torch-gpu", impl="torch", error="no CUDA device visible to PyTorch", torch=torch.__version__)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    props = torch.cuda.get_device_properties(0)
    try:
        import triton
        triton_version = triton.__version__
    except Exception:  # the anchor runs without Triton too (eager only)
        triton_version = None
    out.emit(workload="env/torch-gpu", impl="torch", torch=torch.__version__, cuda=torch.version.cuda,
             cudnn=torch.backends.cudnn.version(), triton=triton_version, device=props.name,
             sms=props.multi_processor_count, tf32=False)
    impls = [m for m in args.modes.split(",") if m]
    unknown = [m for m in impls if m not in MODES]
    if unknown:
        ap.error(f"unknown modes {unknown}; known: {list(MODES)}")
    pattern = re.compile(args.filter)
    deadline = time.perf_counter() + args.budget
    workloads = [(workload_name(n, b, o, p), lambda mode, n=n, b=b, o=o, p=p: train_variants(n, b, o, p, mode))
                 for n, b, o, p in TRAIN]
    workloads += [(workload_name(n, b, None, p), lambda mode, n=n, b=b, p=p: infer_variants(n, b, p, mode))
                  for n, b, p in INFER]
    workloads = [(w, variants) for w, variants in workloads if pattern.search(w)]
    # One impl over every workload before the next, cheapest compile first: a budget that runs out
    # leaves whole columns of the slow modes (max-autotune: 18-45 s per workload on an H200) rather
    # than whole workloads without any compiled figure.
    for impl in sorted(impls, key=IMPL_ORDER.index):
        for workload, variants in workloads:
            bench(out, workload, impl, MODES[impl], variants(MODES[impl]), args, deadline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
