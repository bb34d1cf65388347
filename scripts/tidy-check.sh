#!/usr/bin/env bash
# Fail when `go mod tidy` would change any module's go.mod or go.sum.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
for m in "$@"; do
  [ -f "$m/go.mod" ] || continue
  tmp=$(mktemp -d)
  cp "$m/go.mod" "$tmp/"; [ -f "$m/go.sum" ] && cp "$m/go.sum" "$tmp/"
  (cd "$m" && go mod tidy >/dev/null 2>&1) || { echo "go mod tidy failed in $m"; fail=1; }
  if ! cmp -s "$m/go.mod" "$tmp/go.mod" || { [ -f "$m/go.sum" ] && ! cmp -s "$m/go.sum" "$tmp/go.sum"; }; then
    echo "go mod tidy changes $m (run make tidy)"; fail=1
    cp "$tmp/go.mod" "$m/go.mod"; [ -f "$tmp/go.sum" ] && cp "$tmp/go.sum" "$m/go.sum"
  fi
  rm -rf "$tmp"
done
[ $fail = 0 ] && echo "go.mod files tidy"
exit $fail
