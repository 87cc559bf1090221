#!/bin/sh
# Builds and runs the AOT runtime's standalone tests — runtime_test.c (programs: runs, training,
# arguments, the thread pool) and runtime_files_test.c (weights files) — with ASan+UBSan and -O2
# (the -O2 binaries also with every buffer between guard pages), and the programs' test with TSan too.
#   run.sh [OUT_DIR]   (binaries go to OUT_DIR, default $TMPDIR/kiln-aotrt; ctest: aot.runtime.c)
set -e
OUT=${1:-${TMPDIR:-/tmp}/kiln-aotrt}
mkdir -p "$OUT"
cd "$(dirname "$0")"
CC=${CC:-cc}
FLAGS="-std=c11 -Wall -Wextra -Werror"
for t in runtime_test runtime_files_test; do
  echo "== $t: $CC -O1 -fsanitize=address,undefined"
  $CC $FLAGS -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -o "$OUT/$t" $t.c -lm -lpthread
  "$OUT/$t"
  echo "== $t: $CC -O2"
  $CC $FLAGS -O2 -o "$OUT/${t}_o2" $t.c -lm -lpthread
  "$OUT/${t}_o2"
  echo "== $t: $CC -O2, KILN_GUARD_PAGES=1"
  KILN_GUARD_PAGES=1 "$OUT/${t}_o2"
done
echo "== runtime_test: $CC -O1 -fsanitize=thread"
$CC $FLAGS -O1 -g -fsanitize=thread -DSTRESS_RUNS=5000 -o "$OUT"/runtime_test_tsan runtime_test.c -lm -lpthread
TSAN_OPTIONS="halt_on_error=1" "$OUT"/runtime_test_tsan
