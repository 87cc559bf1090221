#!/usr/bin/env bash
# cli_test.sh KILN EXPECTED_EXIT REGEX ARGS... — runs kiln, checks the exit code and that the
# combined output matches REGEX (extended grep, may be empty).
kiln=$1 expected=$2 regex=$3
shift 3
out=$("$kiln" "$@" 2>&1)
code=$?
if [ "$code" != "$expected" ]; then
  printf 'expected exit %s, got %s from: kiln %s\n%s\n' "$expected" "$code" "$*" "$out"
  exit 1
fi
if [ -n "$regex" ] && ! grep -Eq -- "$regex" <<<"$out"; then
  printf 'output of kiln %s does not match /%s/:\n%s\n' "$*" "$regex" "$out"
  exit 1
fi
exit 0
