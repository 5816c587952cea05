#!/usr/bin/env bash
# make run: the gateway alone, with a local Postgres unless one is configured.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${GATEWAY_DATABASE_URL:-}" ] && [ -z "${DATABASE_URL:-}" ]; then
  GATEWAY_DATABASE_URL=$(bash scripts/pg-local.sh start ./data/pg 25432 | tail -n 1)
  export GATEWAY_DATABASE_URL
fi
exec bin/gateway serve
