#!/usr/bin/env bash
# Roles import only libs and proto (and third-party code), never each other.
# The strata module is the composition root and may import every role.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=github.com/strataio/strata
roles=(metad partitiond coordinatord gateway)
fail=0
for r in "${roles[@]}"; do
  deps=$(cd "$r" && go list -deps -test -f '{{.ImportPath}}' ./... 2>/dev/null || true)
  for other in "${roles[@]}" strata; do
    [ "$other" = "$r" ] && continue
    if grep -qE "^$prefix/$other(/|$)" <<<"$deps"; then
      echo "boundary violation: $r imports $prefix/$other"; fail=1
    fi
  done
done
for lib in libs proto; do
  deps=$(cd "$lib" && go list -deps -test -f '{{.ImportPath}}' ./... 2>/dev/null || true)
  if grep -qE "^$prefix/(metad|partitiond|coordinatord|gateway|strata)(/|$)" <<<"$deps"; then
    echo "boundary violation: $lib imports a role or the strata module"; fail=1
  fi
done
[ $fail = 0 ] && echo "import boundaries ok"
exit $fail
