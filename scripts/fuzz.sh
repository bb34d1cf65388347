#!/usr/bin/env bash
# Run every Fuzz target of every workspace module for a bounded time each.
# Usage: scripts/fuzz.sh [duration]   (default 20s). Crashers land in the
# package's testdata/fuzz directory; commit them as regression seeds.
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-20s}
for pkg in $(go list -m -f '{{.Path}}/...' | xargs go list 2>/dev/null); do
  targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
  for f in $targets; do
    echo "== $pkg $f ($t)"
    go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" "$pkg"
  done
done
