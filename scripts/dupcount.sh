#!/usr/bin/env bash
# Counts duplicates' repeated runs outside generated code: copies the
# tracked tree without *.pb.go into a temp dir and sums 1 + "(+N more runs)"
# per listed pair plus the pairs cut off by --most.
set -euo pipefail
src=${1:-/work/main}
tmp=$(mktemp -d)
(cd "$src" && git ls-files -co --exclude-standard | grep -v '\.pb\.go$' | while read -r f; do [ -f "$f" ] && mkdir -p "$tmp/$(dirname "$f")" && cp "$f" "$tmp/$f"; done)
out=$(cd "$tmp" && duplicates --seconds 600 --most 200)
rm -rf "$tmp"
echo "$out" | head -1
echo "$out" | awk '/^D[0-9]+ /{pairs++; runs++; if (match($0, /\(\+[0-9]+ more runs?\)/)) {s=substr($0,RSTART+2,RLENGTH); sub(/ .*/,"",s); runs+=s}} /^\(\+[0-9]+ more pairs\)/{gsub(/[^0-9]/,"",$0); extra=$0} END {print "listed pairs", pairs, "runs in listed pairs", runs, "unlisted pairs", extra+0}'
echo "$out" | tail -2
