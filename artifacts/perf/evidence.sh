#!/usr/bin/env bash
# Where the time of one Slack event and of 100 decisions at once goes, on a
# throwaway Postgres (loopback only, default durability, data on disk):
#
#   artifacts/perf/evidence.sh BIN_DIR OUT_DIR
#
# BIN_DIR holds opsgate and opsgate-bench built from the tree under test
# (go build -o BIN_DIR/ ./cmd/opsgate ./cmd/opsgate-bench). For each of
# the two loads (EVENTS signed app_mention events, 16 clients; then
# DECISION_ROUNDS (5) rounds of 100 runs pending at once, decided
# concurrently; the units are decisions) it writes into OUT_DIR:
#   <load>.stats     commits, WAL records/syncs and statements per event
#                    (pg_stat_database, pg_stat_wal, pg_stat_statements
#                    deltas), and the CPU seconds of the server, Postgres
#                    and the bench client;
#   <load>.top       pg_stat_statements, top 15 by total time;
#   <load>.waits     pg_stat_activity samples every 0.1s during the load
#                    (wait_event_type/wait_event of the active backends),
#                    counted;
#   <load>.pprof     a CPU profile of the server during the load, and
#   <load>.pprof.top its top functions (go tool pprof -top);
#   plans.log        auto_explain plans (ANALYZE, BUFFERS) of statements
#                    slower than 50 ms under the load.
# Only one of these (or any load) should run at a time; it starts and stops
# its own Postgres cluster and server.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
EVENTS=${EVENTS:-10000}
PGPORT=${PGPORT:-55591}
LISTEN=${LISTEN:-127.0.0.1:18491}
FAKE=${FAKE:-127.0.0.1:18499}
DEBUG=${DEBUG:-127.0.0.1:18493}
PROFILE_SECONDS=${PROFILE_SECONDS:-10}
work=$(mktemp -d /var/tmp/opsgate-evidence.XXXXXX)
chmod 755 "$work"
server_pid=
sampler_pid=
# shellcheck source=../../cmd/opsgate-bench/pgcluster.sh
source "$root/cmd/opsgate-bench/pgcluster.sh"

cleanup() {
	[[ -n $sampler_pid ]] && { kill "$sampler_pid" 2>/dev/null || true; wait "$sampler_pid" 2>/dev/null || true; }
	if [[ -n $server_pid ]]; then
		kill -TERM "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	grep -h 'duration:' -A60 "$work/pg/log" >"$out/plans.log" 2>/dev/null || true
	pg_stop "$work/pg"
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

pg_start "$work/pg" "$PGPORT" "shared_preload_libraries = 'pg_stat_statements,auto_explain'" \
	"pg_stat_statements.max = 1000" "track_io_timing = on" "track_wal_io_timing = on" \
	"auto_explain.log_min_duration = '50ms'" "auto_explain.log_analyze = on" "auto_explain.log_buffers = on" \
	"auto_explain.log_timing = off" "auto_explain.log_nested_statements = on"
db=evidence
psql -q -h 127.0.0.1 -p "$PGPORT" -U postgres -c "CREATE DATABASE $db" postgres
psql -q -h 127.0.0.1 -p "$PGPORT" -U postgres -c "CREATE EXTENSION pg_stat_statements" "$db"
q() { psql -h 127.0.0.1 -p "$PGPORT" -U postgres -At -F ' ' -c "$1" "$db"; }

export OPSGATE_BENCH_TOKEN BENCH_LISTEN=$LISTEN BENCH_SLACK=true BENCH_SLACK_API_URL=http://$FAKE/api/ \
	SLACK_SIGNING_SECRET=benchsecret BENCH_STORE_DRIVER=postgres BENCH_DATA_DIR=$work/data \
	BENCH_STORE_DSN="postgres://postgres@127.0.0.1:$PGPORT/$db?sslmode=disable"
OPSGATE_BENCH_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
mkdir -p "$BENCH_DATA_DIR"
"$bin/opsgate" migrate --config "$root/cmd/opsgate-bench/bench.yaml" >/dev/null
"$bin/opsgate" serve --config "$root/cmd/opsgate-bench/bench.yaml" --log-level warn --debug-listen "$DEBUG" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 300); do curl -fsS "http://$LISTEN/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
postmaster=$(head -n1 "$work/pg/postmaster.pid")

# cpu PID...: user+system CPU seconds of the processes (and their reaped children).
cpu() {
	local t=0 p
	for p in "$@"; do
		[[ -r /proc/$p/stat ]] || continue
		t=$((t + $(awk '{print $14+$15+$16+$17}' "/proc/$p/stat")))
	done
	awk -v t="$t" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", t/hz}'
}
pgcpu() { cpu "$postmaster" $(pgrep -P "$postmaster" | tr '\n' ' '); }

snapshot() {
	q "SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = '$db'"
	q "SELECT wal_records, wal_write, wal_sync, round(wal_sync_time) FROM pg_stat_wal"
	q "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '$db')"
	echo "$(cpu "$server_pid") $(pgcpu)"
}

sample_waits() {
	for _ in $(seq 3000); do
		[[ -f $work/stop-sampler ]] && break
		q "SELECT coalesce(wait_event_type, 'CPU'), coalesce(wait_event, '-'), left(regexp_replace(query, '\s+', ' ', 'g'), 50)
			FROM pg_stat_activity WHERE datname = '$db' AND state = 'active' AND pid <> pg_backend_pid()"
		sleep 0.1
	done
}

# measure NAME UNITS CMD...: the load CMD (UNITS events or decisions) with
# the stats around it, the wait sampler and a CPU profile beside it.
measure() {
	local name=$1 units=$2
	shift 2
	q "SELECT pg_stat_statements_reset()" >/dev/null
	q "SELECT pg_stat_reset()" >/dev/null
	rm -f "$work/stop-sampler"
	local before after client
	before=$(snapshot | tr '\n' ' ')
	sample_waits >"$work/$name.waits.raw" &
	sampler_pid=$!
	(sleep "${PROFILE_DELAY:-2}" && curl -fsS "http://$DEBUG/debug/pprof/profile?seconds=$PROFILE_SECONDS" -o "$out/$name.pprof") &
	local prof=$!
	echo "--- $name (load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$out/summary.txt"
	/usr/bin/time -f '%U %S' -o "$work/client.time" "$@" | tee -a "$out/summary.txt"
	wait "$prof" || true
	touch "$work/stop-sampler"
	wait "$sampler_pid" || true
	sampler_pid=
	after=$(snapshot | tr '\n' ' ')
	client=$(awk '{print $1+$2}' "$work/client.time")
	read -r c0 r0 w0 ww0 ws0 wst0 s0 cs0 cp0 <<<"$before"
	read -r c1 r1 w1 ww1 ws1 wst1 s1 cs1 cp1 <<<"$after"
	{
		echo "units ($name): $units"
		awk -v u="$units" -v c=$((c1 - c0)) -v w=$((w1 - w0)) -v ww=$((ww1 - ww0)) -v ws=$((ws1 - ws0)) -v wst=$((wst1 - wst0)) -v s=$((s1 - s0)) \
			-v cs="$cs0" -v cs1="$cs1" -v cp="$cp0" -v cp1="$cp1" -v cl="$client" 'BEGIN {
			printf "commits: %d (%.2f per unit)\n", c, c/u
			printf "WAL records: %d (%.1f per unit); WAL writes %d, WAL syncs %d (%.2f per unit), sync time %d ms\n", w, w/u, ww, ws, ws/u, wst
			printf "statements: %d (%.2f per unit)\n", s, s/u
			printf "CPU seconds: server %.2f (%.2f ms/unit), postgres %.2f (%.2f ms/unit), bench client %.2f (%.2f ms/unit)\n", cs1-cs, (cs1-cs)*1000/u, cp1-cp, (cp1-cp)*1000/u, cl, cl*1000/u
		}'
	} | tee -a "$out/summary.txt" >"$out/$name.stats"
	q "SELECT calls, round(total_exec_time) AS total_ms, round(mean_exec_time::numeric, 3) AS mean_ms,
		round(calls::numeric / $units, 2) AS per_unit, rows, left(regexp_replace(query, '\s+', ' ', 'g'), 160)
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '$db')
		ORDER BY total_exec_time DESC LIMIT 15" >"$out/$name.top"
	sort "$work/$name.waits.raw" | awk '{print $1, $2}' | sort | uniq -c | sort -rn >"$out/$name.waits"
	sort "$work/$name.waits.raw" | uniq -c | sort -rn | head -30 >"$out/$name.waits.detail"
	go tool pprof -top -nodecount=40 "$bin/opsgate" "$out/$name.pprof" >"$out/$name.pprof.top" 2>/dev/null || true
	go tool pprof -top -cum -nodecount=40 "$bin/opsgate" "$out/$name.pprof" >"$out/$name.pprof.cum" 2>/dev/null || true
}

measure slack "$EVENTS" "$bin/opsgate-bench" slack --server "http://$LISTEN" --fake-listen "$FAKE" --events "$EVENTS" --concurrency 16
# DECISION_ROUNDS rounds of 100 runs pending, decided at once (each round
# also starts and suspends its 100 runs), so the profile covers them.
decisions() {
	for _ in $(seq "$DECISION_ROUNDS"); do
		"$bin/opsgate-bench" --server "http://$LISTEN" --token "$OPSGATE_BENCH_TOKEN" --messages 0 --runs 100 --e2e-runs 0
	done
}
export bin LISTEN DECISION_ROUNDS=${DECISION_ROUNDS:-5}
export -f decisions
PROFILE_DELAY=0 measure decisions $((100 * DECISION_ROUNDS)) bash -c decisions
kill -TERM "$server_pid"
wait "$server_pid" || true
server_pid=
