#!/usr/bin/env bash
# Tears down one e2e run: its probe containers (label mailplane.e2e=PROJECT),
# then the compose project, as each compose file in build/ declares it, with
# its networks and volumes. Safe to run twice
# and on a run that never started; the e2e test calls it when it ends, and
# `make e2e` calls it again on any exit, in case the test was killed.
#
#   build/e2e/down.sh PROJECT
set -uo pipefail
project=${1:?usage: $0 PROJECT}
here=$(cd "$(dirname "$0")" && pwd)

probes=$(docker ps -aq --filter "label=mailplane.e2e=$project")
if [ -n "$probes" ]; then
  docker rm -f $probes >/dev/null
fi
if command -v docker-compose >/dev/null; then
  compose=(docker-compose)
else
  compose=(docker compose)
fi
for file in docker-compose.yml docker-compose.postgres.yml; do
  # The secrets' paths only need to parse: down reads no secret.
  MAILPLANE_SECRETS=/nonexistent "${compose[@]}" -p "$project" -f "$here/../$file" --profile admin \
    down --volumes --remove-orphans --timeout 10 >/dev/null 2>&1
done
