#!/bin/sh
# Build opsgate and opsgate-bench, start a server with bench.yaml on SQLite
# (and on Postgres when OPSGATE_TEST_POSTGRES_DSN names an admin DSN),
# run the bench against it, stop the server. Extra arguments go to
# opsgate-bench (e.g. --messages 1000 --runs 50).
#
#   cmd/opsgate-bench/run.sh [opsgate-bench flags]
#
# BENCH_PORT picks the loopback port (default 18080).
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/opsgate-bench.XXXXXX")
server_pid=
pg_db=

cleanup() {
	if [ -n "$server_pid" ]; then
		kill -TERM "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	if [ -n "$pg_db" ]; then
		psql "$OPSGATE_TEST_POSTGRES_DSN" -qc "DROP DATABASE IF EXISTS $pg_db WITH (FORCE)" >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "building into $work"
(cd "$root" && go build -o "$work/opsgate" ./cmd/opsgate && go build -o "$work/opsgate-bench" ./cmd/opsgate-bench)

OPSGATE_BENCH_TOKEN=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
BENCH_LISTEN="127.0.0.1:${BENCH_PORT:-18080}"
export OPSGATE_BENCH_TOKEN BENCH_LISTEN

# bench_on DRIVER DSN [bench flags]: one server, one bench, then stop.
bench_on() {
	driver=$1 dsn=$2
	shift 2
	BENCH_STORE_DRIVER=$driver BENCH_STORE_DSN=$dsn BENCH_DATA_DIR="$work/data-$driver"
	export BENCH_STORE_DRIVER BENCH_STORE_DSN BENCH_DATA_DIR
	echo "== $driver: starting opsgate on $BENCH_LISTEN (log: $work/server-$driver.log)"
	"$work/opsgate" serve --config "$root/cmd/opsgate-bench/bench.yaml" --log-level warn >"$work/server-$driver.log" 2>&1 &
	server_pid=$!
	i=0
	until curl -fsS "http://$BENCH_LISTEN/readyz" >/dev/null 2>&1; do
		i=$((i + 1))
		if [ "$i" -gt 300 ] || ! kill -0 "$server_pid" 2>/dev/null; then
			echo "opsgate did not become ready:" >&2
			cat "$work/server-$driver.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	"$work/opsgate-bench" --server "http://$BENCH_LISTEN" --token "$OPSGATE_BENCH_TOKEN" "$@"
	kill -TERM "$server_pid"
	wait "$server_pid" || true
	server_pid=
}

bench_on sqlite "$work/data-sqlite/opsgate.db" "$@"

if [ -n "${OPSGATE_TEST_POSTGRES_DSN:-}" ]; then
	# A fresh database per bench, so earlier runs do not skew the figures.
	pg_db="opsgate_bench_$$"
	psql "$OPSGATE_TEST_POSTGRES_DSN" -qc "CREATE DATABASE $pg_db" >/dev/null
	# Same server and credentials, the fresh database (URL-form DSNs only).
	pg_dsn=$(printf '%s\n' "$OPSGATE_TEST_POSTGRES_DSN" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\\1/$pg_db#")
	bench_on postgres "$pg_dsn" "$@"
else
	echo "== postgres: skipped (set OPSGATE_TEST_POSTGRES_DSN to an admin DSN to bench Postgres too)"
fi
