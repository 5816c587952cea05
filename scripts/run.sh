#!/usr/bin/env bash
# make run: the gateway alone, with a local Postgres unless one is configured.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${GATEWAY_DATABASE_URL:-}" ] && [ -z "${DATABASE_URL:-}" ]; then
  GATEWAY_DATABASE_URL=$(bash scripts/pg-local.sh start ./data/pg 25432 | tail -n 1)
  export GATEWAY_DATABASE_URL
fi
# A development run answers on loopback only unless told otherwise: with no
# clients in the routes file the API is open to anyone who can reach it.
export GATEWAY_LISTEN_ADDR="${GATEWAY_LISTEN_ADDR:-127.0.0.1:8080}"
exec bin/gateway serve
