#!/usr/bin/env bash
# The performance figures README "Performance" reports, in one run: the full
# path over signed Slack events (acked/s, replies/s, RSS) and the decision →
# tool-started latencies (100 at once, one every 10 ms), on SQLite and on a
# throwaway Postgres at default durability (fsync and synchronous_commit on,
# data on disk), REPS times each, each on a fresh store, then the same with a
# preloaded store (PRELOAD_FINISHED finished runs, PRELOAD_PENDING pending
# approvals) when PRELOAD=1. Each repeat also measures, interleaved with the
# stores: the Postgres server's 3-row transaction ceiling (opsgate-bench
# ceiling) and the non-durable Chat SDK bot (peer/chatsdk, when node is
# installed; its packages are installed with npm ci) under the same Slack
# load. SUSTAIN=1 ends with the sustained mode on Postgres: half the median
# ceiling for SUSTAIN_FOR (5m), p99 and RSS every minute.
#
#   cmd/opsgate-bench/issue-figures.sh            # REPS=3 PRELOAD=0 STORES="postgres sqlite" SUSTAIN=0
#
# Everything listens on loopback. Run it on an otherwise idle machine: the figures
# are CPU-bound. Needs the postgresql server binaries (Debian's package) and, as
# root, the postgres user to own the throwaway cluster.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
REPS=${REPS:-3}
PRELOAD=${PRELOAD:-0}
PRELOAD_FINISHED=${PRELOAD_FINISHED:-1000000}
PRELOAD_PENDING=${PRELOAD_PENDING:-100000}
STORES=${STORES:-postgres sqlite}
EVENTS=${EVENTS:-10000}
PGPORT=${PGPORT:-55492}
SUSTAIN=${SUSTAIN:-0}
SUSTAIN_FOR=${SUSTAIN_FOR:-5m}
PEER_LISTEN=${PEER_LISTEN:-127.0.0.1:18191}
work=$(mktemp -d /var/tmp/opsgate-figures.XXXXXX)
chmod 755 "$work"
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -t/ -k5,5n | tail -n1)
server_pid=
peer_pid=

as_pg() { if [[ $EUID -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }

cleanup() {
	if [[ -n $peer_pid ]]; then
		kill -TERM "$peer_pid" 2>/dev/null || true
		wait "$peer_pid" 2>/dev/null || true
	fi
	if [[ -n $server_pid ]]; then
		kill -TERM "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	if [[ -f $work/pg/postmaster.pid ]]; then
		(cd / && as_pg "$pgbin/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1) || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "building into $work"
(cd "$root" && go build -o "$work/opsgate" ./cmd/opsgate && go build -o "$work/opsgate-bench" ./cmd/opsgate-bench)

if [[ " $STORES " == *" postgres "* ]]; then
	mkdir -p "$work/pg" && [[ $EUID -eq 0 ]] && chown postgres "$work/pg"
	(cd / && as_pg "$pgbin/initdb" -D "$work/pg" -A trust -U postgres >/dev/null)
	cat >>"$work/pg/postgresql.conf" <<-EOF
		listen_addresses = '127.0.0.1'
		port = $PGPORT
		unix_socket_directories = '$work/pg'
		max_connections = 200
		shared_buffers = 256MB
	EOF
	(cd / && as_pg "$pgbin/pg_ctl" -D "$work/pg" -l "$work/pg/log" -w start >/dev/null)
fi

export OPSGATE_BENCH_TOKEN BENCH_LISTEN=127.0.0.1:18091 BENCH_SLACK=true \
	BENCH_SLACK_API_URL=http://127.0.0.1:18099/api/ SLACK_SIGNING_SECRET=benchsecret
OPSGATE_BENCH_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')

# busy ADDR fails when something already answers at ADDR: a figure must come
# from the process this run started, not from a leftover of an earlier one.
busy() {
	if curl -fsS "http://$1/readyz" >/dev/null 2>&1; then
		echo "something already listens on $1; stop it first" >&2
		exit 1
	fi
}

# one STORE REP: a fresh store, one server, the Slack run and the two decision runs.
one() {
	local store=$1 rep=$2
	export BENCH_STORE_DRIVER=$store BENCH_DATA_DIR=$work/data-$store-$rep
	mkdir -p "$BENCH_DATA_DIR"
	if [[ $store == postgres ]]; then
		local db="bench_${rep}_$RANDOM"
		psql -q -h 127.0.0.1 -p "$PGPORT" -U postgres -c "CREATE DATABASE $db" postgres
		export BENCH_STORE_DSN="postgres://postgres@127.0.0.1:$PGPORT/$db?sslmode=disable"
	else
		export BENCH_STORE_DSN=$BENCH_DATA_DIR/opsgate.db
	fi
	"$work/opsgate" migrate --config "$root/cmd/opsgate-bench/bench.yaml" >/dev/null
	if [[ $PRELOAD == 1 ]]; then
		"$work/opsgate-bench" preload --driver "$store" --dsn "$BENCH_STORE_DSN" \
			--finished "$PRELOAD_FINISHED" --pending "$PRELOAD_PENDING" | tail -n1
	fi
	busy "$BENCH_LISTEN"
	"$work/opsgate" serve --config "$root/cmd/opsgate-bench/bench.yaml" --log-level warn >"$work/server.log" 2>&1 &
	server_pid=$!
	for _ in $(seq 300); do curl -fsS "http://$BENCH_LISTEN/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
	echo "--- $store rep $rep (preload=$PRELOAD, load $(cut -d' ' -f1-3 /proc/loadavg))"
	if [[ -n ${BENCH_SUSTAIN_RATE:-} ]]; then
		"$work/opsgate-bench" slack --server "http://$BENCH_LISTEN" --rate "$BENCH_SUSTAIN_RATE" --duration "$SUSTAIN_FOR" \
			--interval 1m --concurrency 64 | grep -E '^(interval|acked|full path|rss):'
		kill -TERM "$server_pid"
		wait "$server_pid" || true
		server_pid=
		return
	fi
	"$work/opsgate-bench" slack --server "http://$BENCH_LISTEN" --events "$EVENTS" --concurrency 16 | grep -E '^(acked|full path|rss):'
	"$work/opsgate-bench" --server "http://$BENCH_LISTEN" --token "$OPSGATE_BENCH_TOKEN" --messages 0 --runs 100 --e2e-runs 0 | grep '^decision:'
	"$work/opsgate-bench" --server "http://$BENCH_LISTEN" --token "$OPSGATE_BENCH_TOKEN" --messages 0 --runs 100 --e2e-runs 0 \
		--decide-every 10ms | grep '^decision:'
	kill -TERM "$server_pid"
	wait "$server_pid" || true
	server_pid=
}

# peer REP: the Chat SDK bot under the same Slack load as opsgate.
peer() {
	busy "$PEER_LISTEN"
	(cd "$root/cmd/opsgate-bench/peer/chatsdk" &&
		PEER_LISTEN=$PEER_LISTEN SLACK_API_URL=$BENCH_SLACK_API_URL exec node bot.mjs >"$work/peer.log" 2>&1) &
	peer_pid=$!
	for _ in $(seq 600); do curl -fsS "http://$PEER_LISTEN/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
	echo "--- chatsdk rep $1 (load $(cut -d' ' -f1-3 /proc/loadavg))"
	"$work/opsgate-bench" slack --server "http://$PEER_LISTEN" --events "$EVENTS" --concurrency 16 | grep -E '^(acked|full path|rss):'
	kill -TERM "$peer_pid" 2>/dev/null || true
	wait "$peer_pid" || true
	peer_pid=
}

# ceiling REP: the Postgres server's own 3-row transactions, on a fresh database.
ceiling() {
	local db="ceiling_${1}_$RANDOM"
	psql -q -h 127.0.0.1 -p "$PGPORT" -U postgres -c "CREATE DATABASE $db" postgres
	echo "--- ceiling rep $1 (load $(cut -d' ' -f1-3 /proc/loadavg))"
	"$work/opsgate-bench" ceiling --dsn "postgres://postgres@127.0.0.1:$PGPORT/$db?sslmode=disable" --txs "$EVENTS" --clients 16 |
		tee -a "$work/ceilings"
}

use_peer=0
if command -v node >/dev/null && (cd "$root/cmd/opsgate-bench/peer/chatsdk" && npm ci --no-audit --no-fund >/dev/null 2>&1); then
	use_peer=1
else
	echo "== chatsdk: skipped (needs node and npm ci in cmd/opsgate-bench/peer/chatsdk)"
fi

uptime
for rep in $(seq "$REPS"); do
	for store in $STORES; do one "$store" "$rep"; done
	if [[ $use_peer == 1 ]]; then peer "$rep"; fi
	if [[ " $STORES " == *" postgres "* ]]; then ceiling "$rep"; fi
done
if [[ $SUSTAIN == 1 && " $STORES " == *" postgres "* ]]; then
	# Half the median ceiling, as events a second.
	rate=$(sed -E 's/.* ([0-9]+) tx\/s.*/\1/' "$work/ceilings" | sort -n | awk '{a[NR]=$1} END {print int(a[int((NR+1)/2)]/2)}')
	echo "--- sustained: $rate events/s for $SUSTAIN_FOR on postgres (load $(cut -d' ' -f1-3 /proc/loadavg))"
	BENCH_SUSTAIN_RATE=$rate one postgres sustained
fi
uptime
