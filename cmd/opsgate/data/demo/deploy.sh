#!/bin/sh
# Demo tool for the opsgate quickstart: pretends to deploy a service.
# No network access. --dry-run says what would happen; the real mode prints
# its steps and the run id / idempotency key opsgate passed in, so the
# at-most-once machinery can be observed end to end.
set -eu

usage() {
	echo "usage: deploy.sh [--dry-run] <service> <version> [env]" >&2
	exit 2
}

dry_run=false
if [ "${1:-}" = "--dry-run" ]; then
	dry_run=true
	shift
fi
if [ "$#" -lt 2 ] || [ "$#" -gt 3 ]; then
	usage
fi
service=$1
version=$2
env=${3:-staging}

case $service in
	'' | *[!a-z0-9-]*)
		echo "deploy.sh: invalid service name: $service (want [a-z0-9-]+)" >&2
		exit 2
		;;
esac
case $version in
	'' | *[!A-Za-z0-9.+_-]*)
		echo "deploy.sh: invalid version: $version" >&2
		exit 2
		;;
esac
case $env in
	'' | *[!a-z0-9-]*)
		echo "deploy.sh: invalid environment: $env" >&2
		exit 2
		;;
esac

if [ "$dry_run" = true ]; then
	echo "dry run: would deploy $service version $version to $env"
	echo "  1. pull image $service:$version"
	echo "  2. roll out 3 replicas in $env (max surge 1)"
	echo "  3. wait for health checks"
	echo "nothing was changed"
	exit 0
fi

echo "deploying $service version $version to $env"
echo "run id:          ${OPSGATE_RUN_ID:-unset}"
echo "idempotency key: ${OPSGATE_IDEMPOTENCY_KEY:-unset}"
echo "step 1/3: pulled image $service:$version"
echo "step 2/3: rolled out 3/3 replicas in $env"
echo "step 3/3: health checks passed"
echo "deployed $service $version to $env"
