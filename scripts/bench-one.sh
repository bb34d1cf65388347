#!/usr/bin/env bash
# bench-one.sh SIZE [consume]: one run against a fresh all-in-one (make build first), printing the server's
# CPU per record. A fresh `strata run` on a new data directory under ${TMPDIR:-/tmp} (loopback ports 19000,
# 19080, 19100), then either `strata bench produce` of SIZE-byte records in batches of 1,000, 4 connections x
# 4 in flight, acks=1, 8 s; or, with `consume`, 1M such records published first and then `strata bench
# consume` of all of them from offset 0 (CPU counted for the consume only). Used for the page-cache findings
# in docs/performance.md. Extra environment (e.g. STRATA_PARTITIOND_SEGMENT_CACHE_WINDOW=0) reaches the server.
set -uo pipefail
size=${1:?usage: bench-one.sh SIZE [consume]}
mode=${2:-produce}
bin=$(cd "$(dirname "$0")/.." && pwd)/.bin/strata
dir=$(mktemp -d "${TMPDIR:-/tmp}/strata-bench-one.XXXX")
"$bin" run --data-dir "$dir/data" --ops-host 127.0.0.1 --health-check-port 19080 --exporter-port 19100 \
  --gateway.client-listen 127.0.0.1:19000 >"$dir/server.log" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
for _ in $(seq 100); do curl -s 127.0.0.1:19080/ready | grep -q ready && break; sleep 0.2; done
sleep 2 # the partition server registers after the gateway is ready
bench() { "$bin" bench "$@" --addr 127.0.0.1:19000 --topic bench --record-size "$size" --conns 4 --inflight 4 --json; }
if [ "$mode" = consume ]; then
  bench produce --partitions 4 --batch 1000 --acks 1 --count 1000000 --duration 0 >"$dir/prep.json" || { cat "$dir/prep.json"; exit 1; }
fi
c0=$(awk '{print $14+$15}' /proc/$pid/stat)
if [ "$mode" = consume ]; then
  bench consume --count 1000000 --duration 5m >"$dir/bench.json" || { cat "$dir/bench.json"; exit 1; }
else
  bench produce --partitions 4 --batch 1000 --acks 1 --duration 8s >"$dir/bench.json" || { cat "$dir/bench.json"; exit 1; }
fi
c1=$(awk '{print $14+$15}' /proc/$pid/stat)
python3 - "$dir/bench.json" "$mode" $((c1 - c0)) "$(getconf CLK_TCK)" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))[sys.argv[2]]
cpu = int(sys.argv[3]) / int(sys.argv[4])
print(f"{sys.argv[2]}: records {p['records']}  {p['mb_per_sec']:.1f} MB/s  server CPU {cpu * 1e6 / max(1, p['records']):.2f} µs/record")
PY
echo "data kept in $dir (remove it when done)"
