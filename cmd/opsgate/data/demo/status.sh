#!/bin/sh
# Demo tool for the opsgate quickstart: prints a made-up status for a service.
# No network access; the output is deterministic so tests can assert on it.
set -eu

if [ "$#" -ne 1 ]; then
	echo "usage: status.sh <service>" >&2
	exit 2
fi
service=$1
case $service in
	'' | *[!a-z0-9-]*)
		echo "status.sh: invalid service name: $service (want [a-z0-9-]+)" >&2
		exit 2
		;;
esac

echo "service:  $service"
echo "status:   healthy"
echo "replicas: 3/3 ready"
echo "version:  1.0.0"
echo "run:      ${OPSGATE_RUN_ID:-none}"
