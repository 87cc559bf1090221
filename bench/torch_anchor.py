#!/usr/bin/env python3
"""PyTorch anchor of kiln's CPU benchmark (issue 5): the zoo models' training steps and inference.

    /usr/bin/python3 bench/torch_anchor.py [--threads 2] [--filter REGEX] [--budget S] [--peak-rss]

Prints one JSON line per workload and implementation on stdout:

    {"workload": "train/simplenet/b10000/adam", "impl": "torch-eager", "ms": 212.3, "runs": 7, "variant": "..."}

"ms" is the median over "runs" timed repetitions after a warm-up; "variant" names the fastest of
the configurations tried for that implementation (the best is what a careful user would pick).
torch-eager is plain eager mode; torch-jit is torch.jit.trace of the forward and loss (training)
or of the model, frozen (inference). A training step is forward + loss + backward + optimizer
step on data already in memory; inference is the forward under torch.inference_mode().

With --peak-rss it also runs one simplenet training process alone and prints its peak resident
set (VmHWM) and its resident set after importing torch, before any tensor exists.

Run it tuned (scripts/bench.sh does): OMP_WAIT_POLICY=PASSIVE and libtcmalloc_minimal preloaded.
The models mirror frontend/Zoo.cpp: same layers, shapes, activations, biases and losses.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


# --- the zoo models (frontend/Zoo.cpp) ---

class TinyMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(64, 32), nn.Linear(32, 1)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class MnistMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(784, 128), nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class SimpleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(1000, 512), nn.Linear(512, 256), nn.Linear(256, 2)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, stride=1, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, stride=1, padding=1)
        self.fc = nn.Linear(64 * 7 * 7, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return self.fc(torch.flatten(h, 1))


# name: (module class, input shape without the batch, loss, number of classes or None for a
# regression target of shape [B, 1]). tiny_mlp is a regression model with mse_loss in the zoo;
# the others are classifiers with cross_entropy; both use the mean reduction.
MODELS = {
    "tiny_mlp": (TinyMlp, (64,), "mse", None),
    "mnist_mlp": (MnistMlp, (784,), "cross_entropy", 10),
    "simplenet": (SimpleNet, (1000,), "cross_entropy", 2),
    "cnn": (Cnn, (1, 28, 28), "cross_entropy", 10),
}

# (model, batch, optimizer) for training steps; (model, batch) for inference. Issue 5's list.
TRAIN = [("simplenet", 10000, "adam"), ("mnist_mlp", 100, "adam"), ("tiny_mlp", 64, "sgd"),
         ("tiny_mlp", 1024, "sgd"), ("cnn", 64, "adam")]
# Training steps also timed with bf16 contractions (workload …/bf16): torch.autocast("cpu",
# bfloat16) around forward and loss, as kiln's --precision bf16 casts the contractions' operands.
TRAIN_BF16 = [("simplenet", 10000, "adam")]
INFER = [("mnist_mlp", 1), ("mnist_mlp", 100), ("simplenet", 1), ("simplenet", 10000),
         ("tiny_mlp", 1), ("tiny_mlp", 64), ("tiny_mlp", 1024), ("cnn", 1), ("cnn", 64)]


class WithLoss(nn.Module):
    """forward(x, y) = loss(model(x), y): the unit torch.jit.trace sees in a training step."""

    def __init__(self, model, loss):
        super().__init__()
        self.model, self.loss = model, loss

    def forward(self, x, y):
        out = self.model(x)
        return F.mse_loss(out, y) if self.loss == "mse" else F.cross_entropy(out, y)


def make_data(name, batch, gen):
    _, shape, loss, classes = MODELS[name]
    x = torch.randn((batch,) + shape, generator=gen)
    y = torch.randn(batch, 1, generator=gen) if loss == "mse" else torch.randint(classes, (batch,), generator=gen)
    return x, y


def make_optimizer(kind, params, foreach, fused=False):
    """The benchmark's optimizers (Adam lr 1e-3, SGD lr 1e-2). fused: Adam's single fused kernel
    (CUDA only; bench/torch_gpu_anchor.py)."""
    if kind == "adam":
        if fused:
            return torch.optim.Adam(params, lr=1e-3, fused=True)
        return torch.optim.Adam(params, lr=1e-3, foreach=foreach)
    return torch.optim.SGD(params, lr=1e-2, foreach=foreach)


def time_it(fn, budget_s, warmup=3, min_runs=5, max_runs=1000):
    """Median milliseconds of fn() over timed runs after `warmup` untimed ones (three: the JIT's
    profiling executor optimizes on the second call); runs until the budget is spent, at least
    min_runs and at most max_runs times, so big workloads get few repetitions and small ones many."""
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < max_runs and (len(times) < min_runs or time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, len(times)


def bench_train(name, batch, opt_kind, jit, budget, bf16=False):
    """Best (ms, runs, variant) of the configurations of one training workload (bf16: under
    autocast to bfloat16, eager only)."""
    best = None
    for foreach in (False, True):
        torch.manual_seed(0)
        gen = torch.Generator().manual_seed(1)
        model = MODELS[name][0]()
        x, y = make_data(name, batch, gen)
        step_fn = WithLoss(model, MODELS[name][2])
        if jit:
            step_fn = torch.jit.trace(step_fn, (x, y))
        opt = make_optimizer(opt_kind, model.parameters(), foreach)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = step_fn(x, y)
            loss.backward()
            opt.step()

        ms, runs = time_it(step, budget)
        variant = ("trace(forward+loss)" if jit else "eager") + (", foreach" if foreach else "") + ", zero_grad(set_to_none)"
        if bf16:
            variant += ", autocast(bfloat16)"
        if best is None or ms < best[0]:
            best = (ms, runs, variant)
    return best


def bench_infer(name, batch, jit, budget):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    model = MODELS[name][0]().eval()
    x, _ = make_data(name, batch, gen)
    candidates = []
    if jit:
        with torch.no_grad():
            frozen = torch.jit.freeze(torch.jit.trace(model, x))
        candidates.append(("trace+freeze", frozen))
        with torch.no_grad():
            candidates.append(("trace+optimize_for_inference", torch.jit.optimize_for_inference(torch.jit.trace(model, x))))
    else:
        candidates.append(("eager", model))
    best = None
    for variant, fn in candidates:
        def run():
            with torch.inference_mode():
                fn(x)

        ms, runs = time_it(run, budget)
        if best is None or ms < best[0]:
            best = (ms, runs, variant + ", inference_mode")
    return best


def emit(**record):
    print(json.dumps(record), flush=True)


def loaded_blas():
    """The BLAS library this process mapped (PyTorch's nn.Linear calls it): which one the
    dynamic loader picked decides the anchor's speed, so the output names it."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "blas" in line.rsplit("/", 1)[-1]}
    return sorted(paths)


def rss_child(threads):
    """Runs simplenet's training step a few times and prints the resident-set figures (MiB)."""
    def status(field):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024  # kB -> MiB
        return None

    torch.set_num_threads(threads)
    base = status("VmRSS")
    gen = torch.Generator().manual_seed(1)
    model = SimpleNet()
    x, y = make_data("simplenet", 10000, gen)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(5):
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
    print(json.dumps({"peak_rss_mib": round(status("VmHWM"), 1), "baseline_rss_mib": round(base, 1)}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--filter", default="", help="run only workloads whose name matches this regex")
    ap.add_argument("--budget", type=float, default=1.0, help="seconds of timed runs per configuration")
    ap.add_argument("--peak-rss", action="store_true", help="also measure simplenet training's peak RSS")
    ap.add_argument("--rss-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_child:
        return rss_child(args.threads)

    torch.set_num_threads(args.threads)
    torch.ones(2, 2) @ torch.ones(2, 2)  # maps the BLAS library
    emit(workload="env/torch", impl="torch", torch=torch.__version__, threads=torch.get_num_threads(),
         blas=loaded_blas(), omp_wait_policy=os.environ.get("OMP_WAIT_POLICY", "(default)"),
         ld_preload=os.environ.get("LD_PRELOAD", ""),
         openblas_coretype=os.environ.get("OPENBLAS_CORETYPE", "(detected)"))
    pattern = re.compile(args.filter)
    for name, batch, opt in TRAIN:
        workload = f"train/{name}/b{batch}/{opt}"
        if not pattern.search(workload):
            continue
        for jit in (False, True):
            ms, runs, variant = bench_train(name, batch, opt, jit, args.budget)
            emit(workload=workload, impl="torch-jit" if jit else "torch-eager", ms=round(ms, 4), runs=runs,
                 variant=variant, threads=args.threads)
    for name, batch, opt in TRAIN_BF16:
        workload = f"train/{name}/b{batch}/{opt}/bf16"
        if not pattern.search(workload):
            continue
        ms, runs, variant = bench_train(name, batch, opt, False, args.budget, bf16=True)
        emit(workload=workload, impl="torch-eager", ms=round(ms, 4), runs=runs, variant=variant, threads=args.threads)
    for name, batch in INFER:
        workload = f"infer/{name}/b{batch}"
        if not pattern.search(workload):
            continue
        for jit in (False, True):
            ms, runs, variant = bench_infer(name, batch, jit, args.budget)
            emit(workload=workload, impl="torch-jit" if jit else "torch-eager", ms=round(ms, 4), runs=runs,
                 variant=variant, threads=args.threads)
    if args.peak_rss:
        # A fresh process, so the peak is that of this workload alone.
        out = subprocess.run([sys.executable, __file__, "--rss-child", "--threads", str(args.threads)],
                             check=True, capture_output=True, text=True, env=os.environ).stdout
        emit(workload="mem/train/simplenet/b10000/adam", impl="torch-eager", **json.loads(out.strip().splitlines()[-1]))


if __name__ == "__main__":
    main()
