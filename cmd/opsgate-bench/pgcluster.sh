# Sourced by the bench scripts (issue-figures.sh, report.sh, and
# artifacts/perf's evidence.sh and ab.sh): a throwaway Postgres cluster on
# loopback at default durability (fsync and synchronous_commit on, data on
# disk). Needs the postgresql server binaries (Debian's package) and, as
# root, the postgres user to own the cluster.
#
#   pg_start DIR PORT [CONF_LINE...]   initdb DIR, listen on 127.0.0.1:PORT, start
#   pg_stop DIR                        stop it (immediately), if it runs

pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -t/ -k5,5n | tail -n1)

as_pg() { if [[ $EUID -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }

pg_start() {
	local dir=$1 port=$2 line
	shift 2
	mkdir -p "$dir"
	if [[ $EUID -eq 0 ]]; then chown postgres "$dir"; fi
	(cd / && as_pg "$pgbin/initdb" -D "$dir" -A trust -U postgres >/dev/null)
	{
		echo "listen_addresses = '127.0.0.1'"
		echo "port = $port"
		echo "unix_socket_directories = '$dir'"
		echo "max_connections = 200"
		echo "shared_buffers = 256MB"
		for line in "$@"; do echo "$line"; done
	} >>"$dir/postgresql.conf"
	(cd / && as_pg "$pgbin/pg_ctl" -D "$dir" -l "$dir/log" -w start >/dev/null)
}

pg_stop() {
	if [[ -f $1/postmaster.pid ]]; then
		(cd / && as_pg "$pgbin/pg_ctl" -D "$1" -m immediate stop >/dev/null 2>&1) || true
	fi
}
