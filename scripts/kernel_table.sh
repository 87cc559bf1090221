#!/usr/bin/env bash
# Prints docs/KERNELS.md's table: for every zoo model's inference graph and SGD/Adam training step,
# the kernels and arena bytes without fusion (decompose,canonicalize,plan: every node a kernel) and
# with the default pipeline. Usage: scripts/kernel_table.sh [path/to/kiln] (default build/bin/kiln).
set -euo pipefail
cd "$(dirname "$0")/.."
KILN=${1:-build/bin/kiln}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "kernels N" and "arena A of S" from `kiln opt --summary`.
figures() {
  "$KILN" opt "$1" --passes="$2" --summary -o /dev/null 2>"$tmp/summary" >/dev/null
  local kernels arena sum
  kernels=$(sed -n 's/^kernels: *\([0-9]*\).*/\1/p' "$tmp/summary")
  arena=$(sed -n 's/^arena: *\([0-9]*\) bytes for \([0-9]*\).*/\1/p' "$tmp/summary")
  sum=$(sed -n 's/^arena: *\([0-9]*\) bytes for \([0-9]*\).*/\2/p' "$tmp/summary")
  echo "$kernels | $arena / $sum"
}

echo "| model | graph | nodes | unfused kernels | unfused arena / sum (bytes) | fused kernels | fused arena / sum (bytes) |"
echo "|---|---|---|---|---|"
for model in $("$KILN" models | awk '{print $1}'); do
  for graph in inference sgd adam; do
    case $graph in
      inference) "$KILN" export "$model" --no-loss -o "$tmp/g.kir" 2>/dev/null ;;
      *) "$KILN" export "$model" --train --optimizer "$graph" -o "$tmp/g.kir" 2>/dev/null ;;
    esac
    nodes=$("$KILN" opt "$tmp/g.kir" --passes=decompose,canonicalize --summary -o /dev/null 2>&1 >/dev/null |
      sed -n 's/^graph @[^:]*: \([0-9]*\) nodes.*/\1/p')
    echo "| $model | $graph | $nodes | $(figures "$tmp/g.kir" decompose,canonicalize,plan) |" \
      "$(figures "$tmp/g.kir" decompose,canonicalize,amp,fuse,plan) |"
  done
done
