#!/usr/bin/env bash
# make run: the gateway alone, with a local Postgres unless one is configured.
#
# The routes file ($GATEWAY_CONFIG, default gateway.yaml) is checked first, so
# nothing is started without one. A local Postgres this script starts is
# stopped when the gateway ends (Ctrl-C drains the gateway first); one that
# was already running keeps running.
set -euo pipefail
cd "$(dirname "$0")/.."

config=${GATEWAY_CONFIG:-gateway.yaml}
if [[ ! -e $config ]]; then
  cat >&2 <<MSG
run: no routes file at $config (GATEWAY_CONFIG, default gateway.yaml). To run with
your own OpenAI key:

  cp examples/openai.yaml gateway.yaml
  export OPENAI_API_KEY=sk-...
  make run

or set GATEWAY_CONFIG to a routes file (gateway check-config FILE checks one).
MSG
  exit 1
fi

pg_dir=./data/pg
pg_started=false
stop_pg() {
  local status=$?
  if $pg_started; then
    echo "run: stopping the local Postgres in $pg_dir" >&2
    bash scripts/pg-local.sh stop "$pg_dir" || status=1
  fi
  exit "$status"
}
trap stop_pg EXIT

if [[ -z ${GATEWAY_DATABASE_URL:-} && -z ${DATABASE_URL:-} ]]; then
  # Stop Postgres at the end only if this script is the one starting it.
  pg_pid=$(head -n 1 "$pg_dir/postmaster.pid" 2>/dev/null || true)
  if [[ -z $pg_pid ]] || ! kill -0 "$pg_pid" 2>/dev/null; then
    pg_started=true
  fi
  GATEWAY_DATABASE_URL=$(bash scripts/pg-local.sh start "$pg_dir" 25432 | tail -n 1)
  export GATEWAY_DATABASE_URL
fi
# A development run answers on loopback only unless told otherwise: with no
# clients in the routes file the API is open to anyone who can reach it.
export GATEWAY_LISTEN_ADDR="${GATEWAY_LISTEN_ADDR:-127.0.0.1:8080}"

bin/gateway serve &
gateway=$!
# Ctrl-C reaches the gateway from the terminal (it drains); the script only
# waits for it. SIGTERM or SIGHUP to the script is passed on.
trap '' INT
trap 'kill -TERM "$gateway" 2>/dev/null || true' TERM HUP
status=0
while :; do
  set +e
  wait "$gateway"
  status=$?
  set -e
  kill -0 "$gateway" 2>/dev/null || break
done
exit "$status"
