#!/usr/bin/env bash
# Installs the anchors of kiln's CPU benchmark (scripts/bench.sh) from Debian's packages: PyTorch,
# oneDNN, OpenBLAS and tcmalloc. Only the benchmark needs them -- the build, the tests and CI never
# do. Idempotent: a no-op (well under a second) when all are present. Run as root (or with sudo).
#
# OpenBLAS is the OpenMP build (libopenblas-openmp-dev), not the default pthread one: PyTorch and
# oneDNN run their threads on OpenMP (libgomp), so with it all three share one pool of threads
# that torch.set_num_threads / omp_set_num_threads sizes, instead of OpenBLAS's own pthreads
# competing with OpenMP's for the same cores. bench.sh puts its directory first on the library
# path, so the system's libblas.so.3 alternative does not decide what PyTorch calls.
set -euo pipefail

PACKAGES=(
  python3-torch                                  # the eager / TorchScript anchor (1.13.1 on Debian 12)
  libdnnl-dev                                    # oneDNN 2.6: dnnl_sgemm and the matmul primitive
  libopenblas-openmp-dev libopenblas-dev         # cblas_sgemm, and PyTorch's libblas.so.3
  libtcmalloc-minimal4                           # preloaded into PyTorch, as a tuned setup does
  cmake ninja-build g++                          # to build bench/anchors.cpp (OpenMP comes with g++)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  echo "bench-setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
