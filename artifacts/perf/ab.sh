#!/usr/bin/env bash
# Interleaved A/B of two builds on one loaded machine: the ratios between A
# and B, measured side by side, are what count (absolute rates move with
# the other jobs on the box; the load average is printed beside each run).
#
#   artifacts/perf/ab.sh A_DIR B_DIR            # REPS=3 EVENTS=5000 STORES="postgres sqlite"
#
# A_DIR and B_DIR each hold opsgate and opsgate-bench (go build -o DIR/
# ./cmd/opsgate ./cmd/opsgate-bench). Each repeat runs, for A then B (then
# B then A in the next repeat, so neither always goes first), on each
# store, fresh: the Slack full path (EVENTS signed app_mention events, 16
# clients), 100 decisions at once and one every 10 ms; then the Postgres
# 3-row transaction ceiling. One throwaway Postgres at default durability
# (fsync and synchronous_commit on, data on disk), loopback only; it and
# every server are stopped on exit.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
A=$(cd "$1" && pwd)
B=$(cd "$2" && pwd)
REPS=${REPS:-3}
EVENTS=${EVENTS:-5000}
STORES=${STORES:-postgres sqlite}
PGPORT=${PGPORT:-55592}
export BENCH_LISTEN=${LISTEN:-127.0.0.1:18591}
FAKE=${FAKE:-127.0.0.1:18599}
work=$(mktemp -d /var/tmp/opsgate-ab.XXXXXX)
chmod 755 "$work"
server_pid=
# shellcheck source=../../cmd/opsgate-bench/pgcluster.sh
source "$root/cmd/opsgate-bench/pgcluster.sh"

cleanup() {
	if [[ -n $server_pid ]]; then
		kill -TERM "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	pg_stop "$work/pg"
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

pg_start "$work/pg" "$PGPORT"

export OPSGATE_BENCH_TOKEN BENCH_SLACK=true BENCH_SLACK_API_URL=http://$FAKE/api/ SLACK_SIGNING_SECRET=benchsecret
OPSGATE_BENCH_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
n=0

# one NAME BIN STORE REP: a fresh store, BIN's server, the three loads.
one() {
	local name=$1 bin=$2 store=$3 rep=$4
	n=$((n + 1))
	export BENCH_STORE_DRIVER=$store BENCH_DATA_DIR=$work/data-$n
	mkdir -p "$BENCH_DATA_DIR"
	if [[ $store == postgres ]]; then
		psql -q -h 127.0.0.1 -p "$PGPORT" -U postgres -c "CREATE DATABASE ab_$n" postgres
		export BENCH_STORE_DSN="postgres://postgres@127.0.0.1:$PGPORT/ab_$n?sslmode=disable"
	else
		export BENCH_STORE_DSN=$BENCH_DATA_DIR/opsgate.db
	fi
	"$bin/opsgate" migrate --config "$root/cmd/opsgate-bench/bench.yaml" >/dev/null
	"$bin/opsgate" serve --config "$root/cmd/opsgate-bench/bench.yaml" --log-level warn >"$work/server-$n.log" 2>&1 &
	server_pid=$!
	for _ in $(seq 300); do curl -fsS "http://$BENCH_LISTEN/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
	echo "--- $name $store rep $rep (load $(cut -d' ' -f1-3 /proc/loadavg))"
	"$bin/opsgate-bench" slack --server "http://$BENCH_LISTEN" --fake-listen "$FAKE" --events "$EVENTS" --concurrency 16 | grep -E '^(acked|full path):'
	"$bin/opsgate-bench" --server "http://$BENCH_LISTEN" --token "$OPSGATE_BENCH_TOKEN" --messages 0 --runs 100 --e2e-runs 0 | grep '^decision:'
	"$bin/opsgate-bench" --server "http://$BENCH_LISTEN" --token "$OPSGATE_BENCH_TOKEN" --messages 0 --runs 100 --e2e-runs 0 \
		--decide-every 10ms | grep '^decision:'
	kill -TERM "$server_pid"
	wait "$server_pid" || true
	server_pid=
	if [[ $store == postgres ]]; then
		psql -q -h 127.0.0.1 -p "$PGPORT" -U postgres -c "DROP DATABASE ab_$n" postgres
	fi
	rm -rf "$BENCH_DATA_DIR"
}

uptime
for rep in $(seq "$REPS"); do
	order="A B"
	((rep % 2 == 0)) && order="B A"
	for x in $order; do
		bin=$A
		[[ $x == B ]] && bin=$B
		for store in $STORES; do one "$x" "$bin" "$store" "$rep"; done
	done
	psql -q -h 127.0.0.1 -p "$PGPORT" -U postgres -c "CREATE DATABASE ceiling_$rep" postgres
	echo "--- ceiling rep $rep (load $(cut -d' ' -f1-3 /proc/loadavg))"
	"$A/opsgate-bench" ceiling --dsn "postgres://postgres@127.0.0.1:$PGPORT/ceiling_$rep?sslmode=disable" --txs 10000 --clients 16
done
uptime
