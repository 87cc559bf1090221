#!/usr/bin/env bash
# kiln's CPU benchmark (issue 5): kiln and its anchors side by side, in the same run, as ratios.
#
#   scripts/bench.sh            # ROUNDS=2; about 5-7 minutes on 2 cores
#   ROUNDS=1 scripts/bench.sh   # quicker, noisier
#
# Installs the anchors (scripts/bench-setup.sh), builds build/bin/kiln_anchors (and kiln_bench when
# the build defines it), then runs ROUNDS rounds of kiln_bench, the PyTorch anchor and the GEMM
# anchors, alternating their order from round to round so that a drifting clock or a neighbour's
# load falls on all of them alike. Every program prints JSON lines ({"workload", "impl", "ms", ...});
# they land in $OUT_DIR and bench/report.py turns them into a markdown table (also written to
# $OUT_DIR/report.md). Environment: BUILD_DIR (default build), OUT_DIR (default
# $BUILD_DIR/bench-results), ROUNDS, THREADS (train/infer threads, default 2), KILN_BENCH_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
OUT_DIR=${OUT_DIR:-$BUILD_DIR/bench-results}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-2}
PYTHON=/usr/bin/python3  # Debian's python3-torch lives there, not in a pyenv or venv interpreter

bash scripts/setup.sh >/dev/null   # kiln's own build dependencies
bash scripts/bench-setup.sh

# The anchors are an optional target of the main build (bench/CMakeLists.txt); configure again
# if an earlier configure ran before their packages were installed.
if [ ! -f "$BUILD_DIR/build.ninja" ] || ! ninja -C "$BUILD_DIR" -t targets all | grep -q '^kiln_anchors:'; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
targets=(kiln_anchors)
if ninja -C "$BUILD_DIR" -t targets all | grep -q '^kiln_bench:'; then targets+=(kiln_bench); fi
ninja -C "$BUILD_DIR" -j"$(nproc)" "${targets[@]}" >/dev/null

KILN_BENCH=""
for p in "$BUILD_DIR/bin/kiln_bench" "$BUILD_DIR/bench/kiln_bench"; do
  if [ -x "$p" ]; then KILN_BENCH=$p; break; fi
done

# One OpenMP pool for PyTorch, oneDNN and OpenBLAS: the OpenMP build of OpenBLAS, whatever the
# system's libblas.so.3 alternative says (see bench-setup.sh).
BLAS_DIR=/usr/lib/x86_64-linux-gnu/openblas-openmp
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4

# OpenBLAS picks its kernels by CPU model, and a model newer than its release (Debian's 0.3.21 on an
# Emerald Rapids Xeon) falls back to Prescott's SSE3 kernels: PyTorch's f32 matmuls then run at a
# sixth of their speed. A careful user names the core instead, as here: the newest one this build
# has for the CPU's vector ISA. OPENBLAS_CORETYPE set by the caller is kept.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  core=$(LD_LIBRARY_PATH=$BLAS_DIR "$PYTHON" -c 'import ctypes
lib = ctypes.CDLL("libopenblas.so.0")
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())' 2>/dev/null || true)
  flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
  if [ "$core" = Prescott ] || [ "$core" = Nehalem ] || [ "$core" = Sandybridge ]; then
    if [[ $flags == *" avx512_bf16"* ]]; then export OPENBLAS_CORETYPE=Cooperlake
    elif [[ $flags == *" avx512f"* ]]; then export OPENBLAS_CORETYPE=SkylakeX
    elif [[ $flags == *" avx2"* ]]; then export OPENBLAS_CORETYPE=Haswell
    fi
  fi
  if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
    echo "bench: OpenBLAS took $core kernels on this CPU; OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE"
  fi
fi

run_kiln() {
  if [ -z "$KILN_BENCH" ]; then return; fi
  # shellcheck disable=SC2086  # KILN_BENCH_ARGS is a list of words
  "$KILN_BENCH" ${KILN_BENCH_ARGS:-} >"$OUT_DIR/round$1-kiln.jsonl" || echo "bench: kiln_bench failed (round $1)" >&2
  # The first round also records training simplenet's peak resident set, in a fresh process as
  # PyTorch's (torch_anchor.py --peak-rss).
  if [ "$1" = 1 ]; then
    "$KILN_BENCH" --peak-rss >>"$OUT_DIR/round$1-kiln.jsonl" || echo "bench: kiln_bench --peak-rss failed" >&2
  fi
}
run_torch() {
  local extra=()
  if [ "$1" = 1 ]; then extra=(--peak-rss); fi
  # Tuned as a careful user would run it: idle OpenMP threads sleep instead of spinning against
  # the other threads of the same 2 cores, and tcmalloc avoids per-step page faults on big tensors.
  OMP_WAIT_POLICY=PASSIVE LD_PRELOAD=$TCMALLOC LD_LIBRARY_PATH=$BLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    "$PYTHON" bench/torch_anchor.py --threads "$THREADS" "${extra[@]}" >"$OUT_DIR/round$1-torch.jsonl" \
    || echo "bench: torch_anchor.py failed (round $1)" >&2
}
run_anchors() {
  LD_LIBRARY_PATH=$BLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    "$BUILD_DIR/bin/kiln_anchors" >"$OUT_DIR/round$1-anchors.jsonl" || echo "bench: kiln_anchors failed (round $1)" >&2
}

rm -f "$OUT_DIR"/round*.jsonl
mkdir -p "$OUT_DIR"
start=$(date +%s)
echo "bench: $ROUNDS rounds; kiln_bench: ${KILN_BENCH:-(not built; anchors only)}; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
  if ((r % 2)); then order=(kiln torch anchors); else order=(anchors torch kiln); fi
  for prog in "${order[@]}"; do
    echo "bench: round $r/$ROUNDS: $prog"
    "run_$prog" "$r"
  done
done

{
  echo "CPU benchmark, $(date -u +%Y-%m-%d) on $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores;"
  echo "$ROUNDS rounds in $(($(date +%s) - start)) s; load average at the end $(cut -d' ' -f1-3 /proc/loadavg)."
  echo "Command: \`scripts/bench.sh\` (ROUNDS=$ROUNDS). Times are medians; ratio below 1: kiln is faster."
  echo
  "$PYTHON" bench/report.py --threads "$THREADS" "$OUT_DIR"/round*.jsonl
} | tee "$OUT_DIR/report.md"
