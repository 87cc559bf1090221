#!/bin/sh
# Builds and runs the AOT runtime's standalone test three ways: ASan+UBSan, -O2, TSan.
#   run.sh [OUT_DIR]   (binaries go to OUT_DIR, default $TMPDIR/kiln-aotrt; ctest: aot.runtime.c)
set -e
OUT=${1:-${TMPDIR:-/tmp}/kiln-aotrt}
mkdir -p "$OUT"
cd "$(dirname "$0")"
CC=${CC:-cc}
FLAGS="-std=c11 -Wall -Wextra -Werror"
echo "== $CC -O1 -fsanitize=address,undefined"
$CC $FLAGS -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -o "$OUT"/aotrt_test runtime_test.c -lm -lpthread
"$OUT"/aotrt_test
echo "== $CC -O2"
$CC $FLAGS -O2 -o "$OUT"/aotrt_test_o2 runtime_test.c -lm -lpthread
"$OUT"/aotrt_test_o2
echo "== $CC -O1 -fsanitize=thread"
$CC $FLAGS -O1 -g -fsanitize=thread -DSTRESS_RUNS=5000 -o "$OUT"/aotrt_test_tsan runtime_test.c -lm -lpthread
TSAN_OPTIONS="halt_on_error=1" "$OUT"/aotrt_test_tsan
