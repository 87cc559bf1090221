#!/usr/bin/env bash
# Installs the build into a fresh prefix, builds examples/embed against it with find_package(kiln)
# and runs it (train a DSL model, export it as a C library, compare). Usage: embed.sh BUILD SOURCE WORK
set -euo pipefail
build=$1 source=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/lib/cmake/kiln/kilnConfig.cmake"
test -x "$work/prefix/bin/kiln"
test -f "$work/prefix/include/kiln/frontend/Kiln.h"
launcher=()
if command -v ccache > /dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$source/examples/embed" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" > "$work/configure.log"
cmake --build "$work/build" > "$work/build.log"
"$work/build/embed" "$work/aot"
"$work/prefix/bin/kiln" --version
rm -rf "$work/prefix"  # a few hundred MB of static libraries with debug information
