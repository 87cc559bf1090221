#!/usr/bin/env bash
# The main job: set up, build, then show kiln on this machine —
#   1. the devices kiln can compile for;
#   2. the cnn trained on Fashion-MNIST for one epoch on the best device (--target auto: the cost
#      model picks, the first steps check it), with a progress bar, its test accuracy, a loss curve;
#   3. both sides of the CPU-vs-GPU question: `kiln explain` and `kiln bench` for tiny_mlp (tiny:
#      launch and transfer costs decide) and simplenet (big matrices: throughput decides), with
#      SVG plots of throughput against batch size (on a machine without a GPU: the CPU side);
#   4. the trained model as a C library (`kiln aot`), its accuracy measured from plain C.
# EPOCHS (default 1) can be set in the environment. A few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
kiln=build/bin/kiln
work=build/main-job
mkdir -p "$work"
EPOCHS=${EPOCHS:-1}

echo "== 1. devices =="
$kiln devices

echo
echo "== 2. kiln train cnn on Fashion-MNIST ($EPOCHS epoch(s), the best device) =="
$kiln train cnn --data fashion-mnist --epochs "$EPOCHS" --batch 64 --optimizer adam --lr 1e-3 --target auto \
  --save "$work/cnn.safetensors" --loss-curve "$work/cnn-loss.svg"

echo
echo "== 3. is the GPU worth it? tiny_mlp (64-32-1) and simplenet (1000-512-256-2) =="
gpu=()
if $kiln devices 2>/dev/null | grep -q "no CUDA device"; then
  echo "(no GPU here: the GPU side is predicted from an NVIDIA H200 that \`kiln profile\` measured on 2026-11-26,"
  echo " cost/profiles/h200.json; the CPU side is measured on this machine)"
  gpu=(--gpu-profile cost/profiles/h200.json)
fi
$kiln explain tiny_mlp --batch 64 --train --optimizer sgd "${gpu[@]}"
$kiln bench tiny_mlp --batch 1,64,1024,16384 --train --optimizer sgd --plot "$work/tiny_mlp-bench.svg" "${gpu[@]}"
$kiln explain simplenet --batch 1024 --train --optimizer adam "${gpu[@]}"
$kiln bench simplenet --batch 1,64,1024,10000 --plot "$work/simplenet-bench.svg" "${gpu[@]}"

echo
echo "== 4. mnist_mlp as a C library: kiln aot -> libmnist.so + mnist.h, used from plain C =="
$kiln train mnist_mlp --data fashion-mnist --epochs 1 --batch 32 --save "$work/mnist_mlp.safetensors" > /dev/null
$kiln aot mnist_mlp --batch 100 --name mnist --weights "$work/mnist_mlp.safetensors" -o "$work/aot"
readelf -d "$work/aot/libmnist.so" 2>/dev/null | grep NEEDED || true
build/bin/aot_infer "$work/aot/mnist.safetensors"

echo
echo "plots: $work/cnn-loss.svg $work/tiny_mlp-bench.svg $work/simplenet-bench.svg (open them in a browser)"
