#!/usr/bin/env bash
# Compose stack test (make compose-test): bring the full stack up from the
# strata:dev image, wait until every service is healthy, run a smoke through a
# published gateway port with the strata CLI (topic create, produce, group
# consume, group status), run the black-box suite's produce/read/commit
# scenario through both gateways (`go test -run '^TestScenarioExternal$'
# github.com/strataio/strata/strata/e2e/blackbox` with STRATA_E2E_GATEWAYS: produce/read/commit,
# a 249-byte topic written, deleted and recreated, CLUSTER_STATUS and
# `strata cluster status`),
# follow one PUBLISH and one CREATE trace across
# gateway, partitiond and metad through our OTLP receiver (`strata trace-sink`,
# profile trace-test), kill -9 the partitiond leading partition 0 and check
# that every partition (replication factor 3) takes acks=all publishes again
# within seconds, kill -9 one coordinatord and check groups keep working,
# restart both and check every acknowledged record is still readable, then
# restart that partitiond once more and read from it at once.
# Always tears down (down -v). Bounded: every step has its own timeout and
# the whole run is capped by TEST_DEADLINE (default 360 s).
#
# Env: IMAGE (strata:dev, must exist: `make image`), COMPOSE (docker-compose),
# PROJECT (strata-ct), STRATA (the CLI, default .bin/strata), RECORDS (300).
set -euo pipefail

cd "$(dirname "$0")/../.."
IMAGE=${IMAGE:-strata:dev}
COMPOSE=${COMPOSE:-docker-compose}
PROJECT=${PROJECT:-strata-ct}
STRATA=${STRATA:-$PWD/.bin/strata}
RECORDS=${RECORDS:-300}
TEST_DEADLINE=${TEST_DEADLINE:-360}
FILE=deploy/compose/docker-compose.yml
WORK=$(mktemp -d)
T0=$SECONDS

log() { printf '[compose-test %3ds] %s\n' $((SECONDS - T0)) "$*"; }
die() { log "FAIL: $*"; exit 1; }
# dc SECONDS ARGS...: a compose command bounded in time.
# The trace-test profile adds the trace-sink service (our OTLP receiver).
dc() { local t=$1; shift; STRATA_IMAGE=$IMAGE timeout "$t" $COMPOSE -p "$PROJECT" -f "$FILE" --profile trace-test "$@"; }

# Keep the caller's stdout/stderr: a signal trap can fire while a redirected
# command runs, and cleanup's output must not land in that command's log.
exec 3>&1 4>&2
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  exec 1>&3 2>&4
  [[ -n ${WATCHDOG:-} ]] && kill "$WATCHDOG" 2>/dev/null || true
  if ((rc != 0)); then
    log "failed (exit $rc); last logs:"
    { dc 30 ps; dc 30 logs --no-color --tail 25; } 2>&1 | cut -c1-300 || true
  fi
  log "tearing down"
  # Nodes flush their last spans when they stop: stop them while trace-sink
  # still runs, or each one's exporter retries until its stop grace period
  # (20 s) ends in SIGKILL (`down` stops unrelated services in parallel).
  local svcs
  svcs=$(dc 30 config --services 2>/dev/null | grep -vx trace-sink) &&
    dc 120 stop $svcs >/dev/null 2>&1 || true
  dc 120 down -v --remove-orphans >/dev/null 2>&1 ||
    log "WARNING: down failed; run: $COMPOSE -p $PROJECT -f $FILE down -v"
  rm -rf "$WORK"
  log "total $((SECONDS - T0))s, exit $rc"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Whole-run bound: the watchdog interrupts the script, whose trap tears down.
# Its sleep is killed with it, so no stray process outlives the test.
(
  sleep "$TEST_DEADLINE" &
  sp=$!
  trap 'kill $sp 2>/dev/null; exit 0' TERM
  wait $sp
  echo "[compose-test] deadline ${TEST_DEADLINE}s exceeded" >&4
  kill -TERM $$
) &
WATCHDOG=$!

command -v docker >/dev/null || die "docker not found"
docker image inspect "$IMAGE" >/dev/null 2>&1 || die "image $IMAGE missing: run make image"
[[ -x $STRATA ]] || die "$STRATA missing: run make build"

# Host ports on 127.0.0.1: a free block, so the test does not collide with a
# developer stack on 9000 or with other tests on this machine. The block lies
# below the kernel's ephemeral range (32768+ here), where outgoing
# connections could hold a port at any moment.
port_used() {
  if command -v ss >/dev/null; then
    ss -Htan "( sport = :$1 )" 2>/dev/null | grep -q . && return 0
  fi
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
pick_base() {
  local base p ok
  for _ in $(seq 1 50); do
    base=$((20000 + (RANDOM % 120) * 100))
    ok=1
    for p in $base $((base + 1)) $((base + 80)) $((base + 81)) $((base + 90)) $((base + 91)); do
      port_used "$p" && { ok=0; break; }
    done
    ((ok)) && { echo "$base"; return 0; }
  done
  return 1
}
BASE=$(pick_base) || die "no free port block"
export STRATA_GATEWAY1_CLIENT_PORT=$BASE STRATA_GATEWAY2_CLIENT_PORT=$((BASE + 1))
export STRATA_GATEWAY1_HEALTH_PORT=$((BASE + 80)) STRATA_GATEWAY2_HEALTH_PORT=$((BASE + 81))
export STRATA_GATEWAY1_METRICS_PORT=$((BASE + 90)) STRATA_GATEWAY2_METRICS_PORT=$((BASE + 91))
# Every node exports its spans over OTLP/gRPC to the trace-sink service,
# which prints them as JSON lines (checked below).
export OTEL_EXPORTER_OTLP_ENDPOINT=http://trace-sink:4317
unset OTEL_TRACES_EXPORTER OTEL_SDK_DISABLED OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
GW1=127.0.0.1:$STRATA_GATEWAY1_CLIENT_PORT
GW2=127.0.0.1:$STRATA_GATEWAY2_CLIENT_PORT
# The stack runs with client authentication (enable_sasl) and the documented
# development principal; the CLI and the scenario suite (framework.Dial)
# authenticate from these.
export STRATA_PRINCIPAL=admin STRATA_TOKEN=strata-dev-admin
cli() { timeout 60 "$STRATA" "$@"; }

# A stale project from an interrupted run would reuse old volumes.
dc 120 down -v --remove-orphans >/dev/null 2>&1 || true

log "compose up (project $PROJECT, gateways $GW1 $GW2)"
t_up=$SECONDS
dc 240 up -d >"$WORK/up.log" 2>&1 ||
  { cat "$WORK/up.log"; die "compose up failed"; }
timeout 200 bash deploy/compose/wait-healthy.sh "$PROJECT" 180 || die "stack not healthy"
UP_SECS=$((SECONDS - t_up))
log "all services healthy ${UP_SECS}s after compose up"

# Published surface: only the gateways, only on loopback.
published=$(docker ps --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Names}} {{.Ports}}' | grep -- '->' || true)
while read -r name ports; do
  [[ -z $name ]] && continue
  [[ $name == *gateway* ]] || die "$name publishes ports: $ports"
  for p in ${ports//,/ }; do
    [[ $p == *'->'* && $p != 127.0.0.1:* ]] && die "$name publishes beyond loopback: $p"
  done
done <<<"$published"
timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$STRATA_GATEWAY1_HEALTH_PORT" || die "gateway-1 health port not published"

# --- smoke through gateway-1 --------------------------------------------------
out=$(STRATA_PRINCIPAL= STRATA_TOKEN= cli topic list --addr "$GW1" 2>&1) && die "topic list without credentials accepted"
grep -q authentication_required <<<"$out" || die "no credentials: want authentication_required, got: $out"
out=$(STRATA_TOKEN=wrong cli topic list --addr "$GW1" 2>&1) && die "topic list with a wrong token accepted"
grep -q authentication_failed <<<"$out" || die "wrong token: want authentication_failed, got: $out"
cli topic create ct --partitions 3 --addr "$GW1" >/dev/null || die "topic create"
# (Output captured before grep: grep -q closing the pipe early would make
# the CLI fail with EPIPE under pipefail.)
out=$(cli topic list --addr "$GW2") || die "topic list via gateway-2"
grep -qx ct <<<"$out" || die "gateway-2 does not list topic ct: $out"
out=$(cli topic create ct-rf --partitions 1 --replication-factor 4 --addr "$GW1" 2>&1) && die "RF 4 on 3 partitiond accepted"
grep -q invalid_replication_factor <<<"$out" || die "RF 4: want invalid_replication_factor, got: $out"

seq 1 "$RECORDS" | sed 's/^/rec-/' >"$WORK/sent"
cli produce ct --acks all --addr "$GW1" <"$WORK/sent" >/dev/null || die "produce"
log "produced $RECORDS records (acks=all)"

values() { sed -E 's/^partition=[0-9]+ offset=[0-9]+ //' | sort; }
cli consume ct --group ct-g --addr "$GW1" >"$WORK/group1" || die "group consume"
diff <(sort "$WORK/sent") <(values <"$WORK/group1") >/dev/null || die "group consume: records differ from sent"
cli consume ct --group ct-g --addr "$GW2" >"$WORK/group2" || die "second group consume"
[[ ! -s $WORK/group2 ]] || die "second group consume re-read $(wc -l <"$WORK/group2") records: commits lost"
out=$(cli group status ct-g --addr "$GW2") || die "group status"
grep -q 'group ct-g topic ct' <<<"$out" || die "group status: $out"
log "smoke ok: auth refusals, create, produce, group consume + commit, group status, RF error"

# --- the shared scenario (strata/e2e/blackbox) through both gateways ---------
# The same test body the in-process all-in-one and the process cluster run
# (strata/e2e/framework's External runner reads STRATA_E2E_GATEWAYS).
log "scenario suite through $GW1,$GW2"
STRATA_E2E_GATEWAYS="$GW1,$GW2" timeout 240 go test -count=1 -timeout 200s -run '^TestScenarioExternal$' \
  github.com/strataio/strata/strata/e2e/blackbox >"$WORK/scenario.log" 2>&1 || { cat "$WORK/scenario.log"; die "scenario suite failed"; }
grep -q '^ok' "$WORK/scenario.log" || { cat "$WORK/scenario.log"; die "scenario suite did not run"; }
log "scenario suite ok"
out=$(cli cluster status --addr "$GW1") || die "cluster status"
log "strata cluster status ($(wc -l <<<"$out") lines):"
printf '%s\n' "$out"

# --- one trace across roles ---------------------------------------------------
# Every node exports its spans over OTLP/gRPC to trace-sink (`strata
# trace-sink`), which prints one JSON line per span on stdout:
# {"trace_id","span_id","parent_span_id","service","name"}; the service is
# the node's OTel service.name, strata-<binary>. `docker logs` returns them.
# cid SERVICE: its container id (plain docker: a compose call costs ~1 s).
cid() { docker ps -aq --filter "label=com.docker.compose.project=$PROJECT" --filter "label=com.docker.compose.service=$1" | head -1; }
SINK=$(cid trace-sink)
[[ -n $SINK ]] || die "no trace-sink container (profile trace-test)"
# spans: the sink's span lines as "trace_id service name" (awk fields: a
# span name "publish <topic>" is matched by its first word).
spans() {
  docker logs "$SINK" 2>/dev/null |
    sed -nE 's/^\{"trace_id":"([0-9a-f]{32})","span_id":"[0-9a-f]*","parent_span_id":"[0-9a-f]*","service":"([^"]*)","name":"([^"]*)"\}$/\1 \2 \3/p' || true
}
# joined SERVICE ROOT_PREFIX CHILD_SERVICE CHILD_NAME: trace ids in which
# SERVICE has a span named ROOT_PREFIX* and CHILD_SERVICE a span named
# CHILD_NAME, in the order the root spans arrived.
joined() {
  awk -v s="$1" -v n="$2" -v cs="$3" -v cn="$4" '
    $2 == s && index($3, n) == 1 && !($1 in root) { root[$1] = 1; order[++k] = $1 }
    $2 == cs && $3 == cn { child[$1] = 1 }
    END { for (i = 1; i <= k; i++) if (order[i] in child) print order[i] }' "$WORK/spans"
}
# count SERVICE NAME_PREFIX: traces with a span of SERVICE named NAME_PREFIX*.
count() { awk -v s="$1" -v n="$2" '$2 == s && index($3, n) == 1 { t[$1] = 1 } END { print length(t) }' "$WORK/spans"; }
# Spans leave each node in batches (every 5 s): poll, bounded (~30 s).
# Any PUBLISH/CREATE trace joined with its server span will do: some of the
# scenario suite's PUBLISHes fail in the gateway on purpose and never reach
# a partitiond.
pub= create=
for _ in $(seq 1 30); do
  spans >"$WORK/spans"
  pub=$(joined strata-gateway publish strata-partitiond strata.partition.v1.PartitionService/Append | tail -1)
  create=$(joined strata-gateway CREATE strata-metad strata.meta.v1.MetadataService/CreateTopic | head -1)
  [[ -n $pub && -n $create ]] && break
  sleep 1
done
n_spans=$(wc -l <"$WORK/spans")
(($(count strata-gateway publish) > 0)) || die "trace-sink received no strata-gateway PUBLISH span ($n_spans spans)"
(($(count strata-gateway CREATE) > 0)) || die "trace-sink received no strata-gateway CREATE span ($n_spans spans)"
[[ -n $pub ]] || die "no PUBLISH trace has a strata-partitiond Append server span ($(count strata-gateway publish) PUBLISH traces)"
[[ -n $create ]] || die "no CREATE trace has a strata-metad CreateTopic server span ($(count strata-gateway CREATE) CREATE traces)"
log "traces via trace-sink ($n_spans spans): PUBLISH $pub = strata-gateway + strata-partitiond" \
  "(no metad by design: the gateway routes from its Watch-fed metadata cache);" \
  "CREATE $create = strata-gateway + strata-metad"

# --- kill -9 the partitiond leading partition 0 ---------------------------------
# Every partition has three replicas (min ISR 2): when the leader of
# partition 0 dies, metad elects an in-sync replica once its lease (4 s)
# runs out, and every partition takes acks=all publishes again within a few
# seconds. Nothing acknowledged is lost.
# leader_of P: the node id leading ct/P, from CLUSTER_STATUS (`--output
# json` prints it as indented JSON, one field per line).
leader_of() {
  cli cluster status --output json --addr "$GW1" 2>/dev/null | awk -v want="$1" '
    /"leader":/ { v = $2; gsub(/[",]/, "", v); leader = v }
    /"partition":/ { v = $2; gsub(/[",]/, "", v); part = v }
    /"topic":/ { v = $2; gsub(/[",]/, "", v); topic = v }
    /^ *},?$/ { if (topic == "ct" && part == want) { print leader; exit }; leader = ""; part = ""; topic = "" }'
}
victim=$(leader_of 0)
[[ $victim == partitiond-[123] ]] || die "cannot find the leader of partition 0 (got '$victim')"
log "kill -9 $victim (leader of partition 0)"
dc 30 kill -s SIGKILL "$victim" >/dev/null 2>&1 || die "kill $victim"
t=$SECONDS
back=("" "" "") # seconds until partition p took an acks=all publish
nback=0
while ((nback < 3)); do
  ((SECONDS - t <= 30)) || die "30 s after the kill only $nback of 3 partitions accept acks=all publishes: ${back[*]}"
  for p in 0 1 2; do
    [[ -n ${back[$p]} ]] && continue
    if echo "after-kill-$p" | timeout 15 "$STRATA" produce ct --partition "$p" --acks all --addr "$GW1" >/dev/null 2>"$WORK/kill.err"; then
      back[$p]=$((SECONDS - t))
      nback=$((nback + 1))
    fi
  done
  if ((nback < 3)); then sleep 0.5; fi
done
printf 'after-kill-%s\n' 0 1 2 >>"$WORK/sent"
RECORDS=$((RECORDS + 3))
log "acks=all accepted on every partition after the kill: p0 ${back[0]}s, p1 ${back[1]}s, p2 ${back[2]}s (last error: $(head -c 160 "$WORK/kill.err"))"
new_leader=$(leader_of 0)
[[ -n $new_leader && $new_leader != "$victim" ]] || die "partition 0 still led by '$new_leader' after the kill"

t_restart=$SECONDS
dc 60 start "$victim" >/dev/null 2>&1 || die "restart $victim"
timeout 100 bash deploy/compose/wait-healthy.sh "$PROJECT" 90 || die "not healthy after restart"
log "$victim restarted, healthy in $((SECONDS - t_restart))s; partition 0 now led by $new_leader"

# Every acknowledged record is there, at its offset, after the kill -9.
cli consume ct --from earliest --addr "$GW2" >"$WORK/after" || die "consume after restart"
diff <(sort "$WORK/sent") <(values <"$WORK/after") >/dev/null ||
  die "after restart: $(wc -l <"$WORK/after") records, want $RECORDS identical to sent"
# The cluster accepts writes to partition 0 again.
echo "after-restart" | cli produce ct --partition 0 --acks all --addr "$GW1" >/dev/null || die "produce to partition 0 after restart"
log "after restart: all $RECORDS acknowledged records readable; partition 0 writable"

# --- kill -9 one coordinatord: groups keep working on the other ---------------
dc 30 kill -s SIGKILL coordinatord-1 >/dev/null 2>&1 || die "kill coordinatord-1"
log "kill -9 coordinatord-1"
# Groups owned by coordinatord-1 move to coordinatord-2 once its metad lease
# (10 s) expires; a group command meanwhile may wait or fail retryably, but
# within the bound of cli (60 s) a new group must read everything.
t=$SECONDS
for attempt in 1 2 3; do
  cli consume ct --group ct-g-down --addr "$GW1" >"$WORK/groupdown.$attempt" 2>"$WORK/groupdown.err" && break
  log "group consume attempt $attempt with coordinatord-1 down: $(head -c 200 "$WORK/groupdown.err")"
  ((attempt == 3)) && die "group consume with coordinatord-1 down failed 3 times"
  sleep 3
done
n=$(cat "$WORK"/groupdown.* | wc -l)
((n >= RECORDS + 1)) || die "with coordinatord-1 down: new group read $n records, want $((RECORDS + 1))"
log "with coordinatord-1 down: new group read $n records in $((SECONDS - t))s"
t_restart=$SECONDS
dc 60 start coordinatord-1 >/dev/null 2>&1 || die "restart coordinatord-1"
timeout 100 bash deploy/compose/wait-healthy.sh "$PROJECT" 90 || die "not healthy after coordinatord-1 restart"
log "coordinatord-1 restarted, healthy in $((SECONDS - t_restart))s"
cli consume ct --group ct-g --addr "$GW1" >"$WORK/group4" || die "group consume after coordinatord restart"
[[ $(wc -l <"$WORK/group4") -eq 4 ]] || die "group ct-g after restarts read $(wc -l <"$WORK/group4") records, want only the 4 new ones"
log "group ct-g resumed from its committed offsets (read the 4 new records)"

# --- restart a partitiond and read from it at once ----------------------------
# While a container is down Docker's DNS answers NXDOMAIN for its name; a
# gateway connection must not keep that answer (or a long reconnect backoff)
# once the node is back: CONSUME on it right after it is healthy must work
# through both gateways, first try.
t_restart=$SECONDS
dc 60 restart "$victim" >/dev/null 2>&1 || die "restart $victim"
timeout 100 bash deploy/compose/wait-healthy.sh "$PROJECT" 90 || die "not healthy after restarting $victim"
for gw in "$GW1" "$GW2"; do
  out=$(cli consume ct --partition 0 --from earliest --timeout 10s --addr "$gw" 2>&1) ||
    die "consume partition 0 via $gw right after $victim restarted: $out"
  grep -q '^partition=0 ' <<<"$out" || die "partition 0 via $gw after restart: no records"
done
log "$victim restarted (healthy in $((SECONDS - t_restart))s); partition 0 read at once via both gateways"

log "PASS (compose up -> healthy ${UP_SECS}s)"
