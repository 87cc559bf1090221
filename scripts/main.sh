#!/usr/bin/env bash
# The main job: set up, build, export the mnist_mlp zoo model to .kir, check it, and run it through
# the reference interpreter on Fashion-MNIST test images, printing the IR and the predictions.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
kiln=build/bin/kiln
work=build/main-job
mkdir -p "$work"
N=${N:-16}

echo "== kiln export mnist_mlp (batch $N) =="
$kiln export mnist_mlp --batch "$N" -o "$work/mnist_mlp.kir"
cat "$work/mnist_mlp.kir"

echo "== kiln check =="
$kiln check "$work/mnist_mlp.kir"

echo "== decomposed into primitives (kiln opt --passes=decompose) =="
$kiln opt --passes=decompose "$work/mnist_mlp.kir"

echo "== $N Fashion-MNIST test images =="
$kiln dataset fashion-mnist --split test --limit "$N" --flatten -o "$work/fmnist-test.safetensors"

echo "== predictions of the untrained model (reference interpreter; training arrives with autodiff) =="
$kiln run "$work/mnist_mlp.kir" --inputs "$work/fmnist-test.safetensors" --out "$work/outputs.safetensors" \
  --print --argmax logits
