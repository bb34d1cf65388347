#!/usr/bin/env bash
# Where the proto files' repeated runs come from (docs/decisions.md, "Code
# shape"): dupcount.sh's figure for the tree as it is, then for scratch
# copies in which the proto files' rpc lines, or their message and field
# declaration lines, are each replaced by a line no other line matches.
# The drop is the share of those lines. Last, a copy in which the leading
# (topic, partition, lifecycle_epoch) and (transactional_id, producer_id,
# epoch) triples of the messages that start with one are one field each, as
# shared common/v1 messages would make them. The copies are temporary;
# nothing in the tree changes.
set -euo pipefail
src=${1:-/work/main}
count() { # DIR: total runs (listed pairs' runs + unlisted pairs), proto runs
	(cd "$1" && duplicates --seconds 600 --most 200) | awk '
		function runs(line) { n = 1; if (match(line, /\(\+[0-9]+ more runs?\)/)) { s = substr(line, RSTART + 2, RLENGTH); sub(/ .*/, "", s); n += s }; return n }
		/^D[0-9]+ / { r = runs($0); total += r; split($2, a, ":"); split($4, b, ":"); if (a[1] ~ /proto$/ || b[1] ~ /proto$/) proto += r }
		/^\(\+[0-9]+ more pairs\)/ { gsub(/[^0-9]/, "", $0); total += $0 }
		END { printf "runs %d, in proto files %d\n", total, proto }'
}
copy() { # DIR
	(cd "$src" && git ls-files -co --exclude-standard | grep -v '\.pb\.go$' | while read -r f; do [ -f "$f" ] && mkdir -p "$1/$(dirname "$f")" && cp "$f" "$1/$f"; done)
}
mask() { # DIR REGEX: replace matching proto lines by lines of unique shape
	python3 - "$1" "$2" <<'PY'
import glob, random, re, sys
root, pat = sys.argv[1], re.compile(sys.argv[2])
rnd = random.Random(1)
for f in glob.glob(root + '/proto/strata/*/v1/*.proto'):
    lines = open(f).read().split('\n')
    for i, l in enumerate(lines):
        if pat.match(l.strip()):
            r = rnd.getrandbits(24)
            lines[i] = 'm' + ''.join('.m' if (r >> k) & 1 else '(m' for k in range(24)) + ')' * bin(r).count('1')
    open(f, 'w').write('\n'.join(lines))
PY
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
copy "$tmp/asis"
echo "as is:                        $(count "$tmp/asis")"
cp -r "$tmp/asis" "$tmp/rpc"
mask "$tmp/rpc" '^rpc '
echo "rpc lines masked:             $(count "$tmp/rpc")"
cp -r "$tmp/asis" "$tmp/msg"
mask "$tmp/msg" '^((repeated |optional )?[\w.]+ \w+ = \d+;|message |oneof |enum )'
echo "message/field lines masked:   $(count "$tmp/msg")"
cp -r "$tmp/asis" "$tmp/shared"
python3 - "$tmp/shared" <<'PY'
import glob, re, sys
triples = {('string topic', 'int32 partition', 'uint64 lifecycle_epoch'): 'PartitionRef partition_ref',
           ('string transactional_id', 'string producer_id', 'int64 epoch'): 'ProducerSession session'}
field = re.compile(r'^((?:repeated |optional )?[\w.]+ \w+) = \d+;')
for f in glob.glob(sys.argv[1] + '/proto/strata/*/v1/*.proto'):
    lines, out, i = open(f).read().split('\n'), [], 0
    while i < len(lines):
        out.append(lines[i])
        if re.match(r'^message \w+ \{$', lines[i].strip()):
            # the message's first three fields, comments between them skipped
            j, fields = i + 1, []
            while j < len(lines) and len(fields) < 3:
                t = lines[j].strip()
                m = field.match(t)
                if m:
                    fields.append((j, m.group(1)))
                elif not t.startswith('//'):
                    break
                j += 1
            key = tuple(name for _, name in fields)
            if key in triples:
                out.extend(lines[i + 1:fields[0][0]])
                out.append('  strata.common.v1.' + triples[key] + ' = 1;')
                i = fields[2][0] + 1
                continue
        i += 1
    open(f, 'w').write('\n'.join(out))
PY
echo "shared triples (simulated):   $(count "$tmp/shared")"
