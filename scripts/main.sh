#!/usr/bin/env bash
# The main job: set up, build, and train mnist_mlp on Fashion-MNIST with the whole training step
# (forward, generated backward, Adam update) as one graph, JIT-compiled by the LLVM CPU backend;
# classify test images with the trained weights; then compile the model ahead of time to a C
# library and measure its test accuracy from plain C. EPOCHS (default 2) and N (images shown, 16)
# can be set in the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
kiln=build/bin/kiln
work=build/main-job
mkdir -p "$work"
N=${N:-16}
EPOCHS=${EPOCHS:-2}

echo "== the forward model: kiln export mnist_mlp =="
$kiln export mnist_mlp --batch 32 -o "$work/mnist_mlp.kir"
cat "$work/mnist_mlp.kir"

echo "== the whole training step as one graph: kiln export mnist_mlp --train --optimizer adam =="
$kiln export mnist_mlp --batch 32 --train --optimizer adam -o "$work/mnist_mlp_step.kir"
$kiln check "$work/mnist_mlp_step.kir"
echo "(forward, backward and Adam update: $(grep -c ' = ' "$work/mnist_mlp_step.kir") statements in $work/mnist_mlp_step.kir)"
grep -E '^  (update|output)' "$work/mnist_mlp_step.kir"

echo "== training on Fashion-MNIST (60000 images, $EPOCHS epochs, LLVM CPU backend) =="
$kiln train mnist_mlp --data fashion-mnist --epochs "$EPOCHS" --batch 32 --optimizer adam --lr 1e-3 \
  --save "$work/mnist_mlp.safetensors"

echo "== predictions of the trained model on $N test images =="
$kiln export mnist_mlp --batch "$N" -o "$work/mnist_mlp_b$N.kir" 2>/dev/null
$kiln dataset fashion-mnist --split test --limit "$N" --flatten -o "$work/fmnist-test.safetensors"
$kiln run "$work/mnist_mlp_b$N.kir" --inputs "$work/fmnist-test.safetensors" --weights "$work/mnist_mlp.safetensors" \
  --argmax logits

echo "== the model as a C library: kiln aot mnist_mlp -> libmnist.so + mnist.h, used from plain C =="
$kiln aot mnist_mlp --batch 100 --name mnist --weights "$work/mnist_mlp.safetensors" -o "$work/aot"
readelf -d "$work/aot/libmnist.so" 2>/dev/null | grep NEEDED || true
build/examples/aot_infer "$work/aot/mnist.safetensors"
