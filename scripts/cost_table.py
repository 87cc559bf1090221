#!/usr/bin/env python3
"""The cost model's measured error on this machine (docs/COST.md, "Measured error"): every zoo model's
inference at batch 1 and 32 and its training step at batch 32, each run through
`kiln explain --measure --json` ROUNDS times; a kernel's measured time is its fastest run over the
rounds, the step's likewise. Prints the markdown table: predicted and measured kernels, the error
of their sums, the step's error and the per-kernel error (sum of |predicted - measured| over the
sum measured, before the kernels' errors cancel).

    scripts/cost_table.py [--kiln build/bin/kiln] [--rounds 3] [--compare OTHER_KILN]

--compare adds the predictions of another kiln binary (`kiln explain --json`, no measuring) against
the same measurements: a change to the model judged on the same runs. The cached machine profile
(`kiln profile`) is used by both; measure it at a quiet moment first.
"""
import argparse
import json
import subprocess
import sys

MODELS = ["tiny_mlp", "mnist_mlp", "digits_mlp", "simplenet", "cnn", "lstm", "transformer"]
CONFIGS = [("inference, batch 1", ["--batch", "1"]), ("inference, batch 32", ["--batch", "32"]),
           ("training step, batch 32", ["--batch", "32", "--train"])]


def explain(kiln, model, args, measure):
    cmd = [kiln, "explain", model, *args, "--json"] + (["--measure"] if measure else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", default="build/bin/kiln")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compare", help="another kiln binary whose predictions are set against the same runs")
    o = ap.parse_args()

    measured = {}  # (model, config) -> (report of the first round, {kernel: fastest µs}, fastest step µs)
    for r in range(o.rounds):
        for model in MODELS:
            for name, args in CONFIGS:
                rep = explain(o.kiln, model, args, True)
                key = (model, name)
                first, kernels, step = measured.get(key, (rep, {}, float("inf")))
                for k in rep["kernels"]:
                    kernels[k["name"]] = min(kernels.get(k["name"], float("inf")), k["measured_us"])
                measured[key] = (first, kernels, min(step, rep["measured_step_us"]))
        print(f"cost_table: round {r + 1} of {o.rounds} done", file=sys.stderr)

    def row(rep, kernels, step):
        pred = sum(k["cpu_us"] for k in rep["kernels"])
        meas = sum(kernels[k["name"]] for k in rep["kernels"])
        per = sum(abs(k["cpu_us"] - kernels[k["name"]]) for k in rep["kernels"])
        return pred, meas, pred / meas - 1, rep["cpu_step_us"] / step - 1, per / meas

    head = "| model | graph | kernels | predicted µs | measured µs | error | step error | per kernel |"
    if o.compare:
        head += " before: error | step error | per kernel |"
    print(head)
    print("|---|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|---:|" if o.compare else ""))
    for model in MODELS:
        for name, args in CONFIGS:
            rep, kernels, step = measured[(model, name)]
            pred, meas, err, stepErr, per = row(rep, kernels, step)
            line = (f"| {model} | {name} | {len(rep['kernels'])} | {pred:.1f} | {meas:.1f} | {err:+.0%} | "
                    f"{stepErr:+.0%} | {per:.0%} |")
            if o.compare:
                old = explain(o.compare, model, args, False)
                if [k["name"] for k in old["kernels"]] != [k["name"] for k in rep["kernels"]]:
                    line += " (other kernels) | | |"
                else:
                    _, _, e, s, p = row(old, kernels, step)
                    line += f" {e:+.0%} | {s:+.0%} | {p:.0%} |"
            print(line.replace("%", " %"))


if __name__ == "__main__":
    main()
