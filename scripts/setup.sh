#!/usr/bin/env bash
# Installs everything kiln needs from Debian's packages. Idempotent: a no-op (about a second) when all
# packages are present. Run as root (or with sudo available). CUDA is detected, never installed.
set -euo pipefail

PACKAGES=(
  cmake ninja-build ccache pkg-config
  g++ clang-19 lld-19 libclang-rt-19-dev
  llvm-19-dev llvm-19-tools libzstd-dev libedit-dev zlib1g-dev
  libfmt-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
  dataset-fashion-mnist
  python3-torch python3-numpy   # the oracle of tests/interop (PyTorch parity of the zoo models)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The sklearn CSV data sets (digits, iris, breast cancer) ship inside python3-sklearn; take only the
# CSV files out of the .deb so none of its Python dependencies are installed.
DATA_DIR="${KILN_DATA_DIR:-/usr/local/share/kiln/datasets}"
if [ ! -f "$DATA_DIR/sklearn/digits.csv.gz" ]; then
  echo "setup: extracting sklearn CSV data sets into $DATA_DIR/sklearn"
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download python3-sklearn >/dev/null 2>&1 || { $SUDO apt-get update -qq && apt-get download python3-sklearn >/dev/null; })
  dpkg-deb -x "$tmp"/python3-sklearn_*.deb "$tmp/x"
  src=$(dirname "$(find "$tmp/x" -name 'digits.csv.gz' | head -n1)")
  $SUDO mkdir -p "$DATA_DIR/sklearn"
  $SUDO cp "$src"/*.csv* "$DATA_DIR/sklearn/"
  rm -rf "$tmp"
fi

if [ -x /usr/local/cuda/bin/nvcc ] || [ -f /usr/local/cuda/include/nvrtc.h ]; then
  echo "setup: CUDA found in /usr/local/cuda"
else
  echo "setup: no CUDA toolkit in /usr/local/cuda (CUDA backend disabled)"
fi
