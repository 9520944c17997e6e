#!/usr/bin/env bash
# The approval-latency report README "Performance" summarises: builds opsgate
# and opsgate-bench, starts a throwaway Postgres at default durability (fsync
# and synchronous_commit on, data on disk) on loopback, and runs
# `opsgate-bench report` over SQLite and that Postgres, which writes
# report.svg, report.json and report.md into OUT. Extra arguments go to
# `opsgate-bench report` (e.g. --pending 0,10000 --samples 50).
#
#   cmd/opsgate-bench/report.sh OUT [report flags]
#
# PGPORT picks the throwaway cluster's loopback port (default 55493). Needs the
# postgresql server binaries (Debian's package) and, as root, the postgres
# user to own the cluster.
set -euo pipefail

[[ $# -ge 1 ]] || { echo "usage: $0 OUT [opsgate-bench report flags]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(realpath -m "$1")
shift
PGPORT=${PGPORT:-55493}
work=$(mktemp -d /var/tmp/opsgate-report.XXXXXX)
chmod 755 "$work"
# shellcheck source=pgcluster.sh
source "$root/cmd/opsgate-bench/pgcluster.sh"

cleanup() {
	pg_stop "$work/pg"
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "building into $work"
(cd "$root" && go build -o "$work/opsgate" ./cmd/opsgate && go build -o "$work/opsgate-bench" ./cmd/opsgate-bench)

pg_start "$work/pg" "$PGPORT"

"$work/opsgate-bench" report --out "$out" --opsgate "$work/opsgate" \
	--postgres "postgres://postgres@127.0.0.1:$PGPORT/postgres?sslmode=disable" "$@"
