#!/usr/bin/env bash
# bench-one.sh SIZE: one publish run against a fresh all-in-one (make build first), printing the server's CPU
# per record. A fresh `strata run` on a new data directory under ${TMPDIR:-/tmp} (loopback ports 19000,
# 19080, 19100), then `strata bench produce` of SIZE-byte records in batches of 1,000, 4 connections x 4 in
# flight, acks=1, 8 s. Used for the page-cache finding in docs/performance.md ("where we stand, 2026-11-29").
set -uo pipefail
size=${1:?usage: bench-one.sh SIZE}
bin=$(cd "$(dirname "$0")/.." && pwd)/.bin/strata
dir=$(mktemp -d "${TMPDIR:-/tmp}/strata-bench-one.XXXX")
"$bin" run --data-dir "$dir/data" --ops-host 127.0.0.1 --health-check-port 19080 --exporter-port 19100 \
  --gateway.client-listen 127.0.0.1:19000 >"$dir/server.log" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT
for _ in $(seq 100); do curl -s 127.0.0.1:19080/ready | grep -q ready && break; sleep 0.2; done
sleep 2 # the partition server registers after the gateway is ready
c0=$(awk '{print $14+$15}' /proc/$pid/stat)
"$bin" bench produce --addr 127.0.0.1:19000 --topic bench --partitions 4 --record-size "$size" --batch 1000 \
  --conns 4 --inflight 4 --acks 1 --duration 8s --json >"$dir/bench.json" || { cat "$dir/bench.json"; exit 1; }
c1=$(awk '{print $14+$15}' /proc/$pid/stat)
python3 - "$dir/bench.json" $((c1 - c0)) "$(getconf CLK_TCK)" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["produce"]
cpu = int(sys.argv[2]) / int(sys.argv[3])
print(f"records {p['records']}  {p['mb_per_sec']:.1f} MB/s  server CPU {cpu * 1e6 / max(1, p['records']):.2f} µs/record")
PY
echo "data kept in $dir (remove it when done)"
