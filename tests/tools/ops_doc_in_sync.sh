#!/usr/bin/env bash
# ops_doc_in_sync.sh KILN IR.md — docs/IR.md's op reference must be exactly `kiln ops --markdown`
# (the op table in ir/Ops.def); regenerate the section with that command when this fails.
set -euo pipefail
kiln=$1 doc=$2
generated=$("$kiln" ops --markdown)
if ! grep -qF -- "$generated" <(cat "$doc") 2>/dev/null; then
  tmp=$(mktemp)
  "$kiln" ops --markdown > "$tmp"
  # Show where they differ: the doc's section from the first table to the next '## '.
  sed -n '/^### Elementwise unary/,/^## /p' "$doc" | sed '$d' | diff -u - <(sed '1d' "$tmp") || true
  rm -f "$tmp"
  echo "docs/IR.md's op reference is out of date: replace it with the output of 'kiln ops --markdown'"
  exit 1
fi
