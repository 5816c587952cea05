#!/usr/bin/env bash
# make demo: two mock upstreams, a local Postgres for records, and the gateway,
# all on 127.0.0.1 only.
#
# Ctrl-C (or SIGTERM/SIGHUP to this script) stops everything the script
# started, in order: the gateway gets SIGTERM and drains (its records are
# flushed), then the mocks stop, then the local Postgres if this script
# started it; then the script exits 0. A second Ctrl-C while the gateway
# drains is passed on to it, which skips its shutdown delay. If the gateway
# stops by itself, the rest is stopped too and its exit code is the script's.
set -euo pipefail
cd "$(dirname "$0")/.."

# Job control puts each child in its own process group, so the terminal's
# Ctrl-C reaches only this script (and make), and the children are stopped in
# the order above rather than all at once: a mock that died first would fail
# the requests the gateway is still draining.
set -m

mocks=()
gateway=""
pg_dir=./data/pg
pg_started=false

# running tells whether a child we started is still alive.
running() { [[ -n $1 ]] && kill -0 "$1" 2>/dev/null; }

# stop_and_wait sends SIGTERM to pid and waits for it to end. A signal to the
# script meanwhile interrupts wait, hence the loop.
stop_and_wait() {
  local pid=$1
  running "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  while running "$pid"; do
    wait "$pid" 2>/dev/null || true
  done
}

stopped=false
stop_all() {
  local status=$?
  $stopped && return
  stopped=true
  # A further Ctrl-C while stopping goes to the gateway as its second signal.
  trap 'if running "$gateway"; then kill -TERM "$gateway" 2>/dev/null || true; fi' INT TERM HUP
  if running "$gateway"; then
    echo >&2
    echo "demo: stopping the gateway (it drains first)" >&2
  fi
  stop_and_wait "$gateway"
  for p in "${mocks[@]}"; do stop_and_wait "$p"; done
  if $pg_started; then
    echo "demo: stopping the local Postgres" >&2
    bash scripts/pg-local.sh stop "$pg_dir" || status=1
  fi
  exit "$status"
}
trap stop_all EXIT
# A stop request is a normal end: exit 0 runs stop_all through the EXIT trap.
trap 'exit 0' INT TERM HUP

# The primary also hangs on 30% of the requests it does not fail (a stream
# gets its headers, then nothing): examples/demo.yaml's first_byte and
# health block turn that into failover, then a cooldown.
bin/mockupstream -addr 127.0.0.1:9001 -identity primary -chunk-interval 50ms -hang-rate 0.3 &
mocks+=($!)
bin/mockupstream -addr 127.0.0.1:9002 -identity backup -chunk-interval 50ms &
mocks+=($!)

if [[ -z ${GATEWAY_DATABASE_URL:-} ]]; then
  # Stop Postgres at the end only if this script is the one starting it.
  pg_pid=$(head -n 1 "$pg_dir/postmaster.pid" 2>/dev/null || true)
  if [[ -z $pg_pid ]] || ! kill -0 "$pg_pid" 2>/dev/null; then
    pg_started=true
  fi
  GATEWAY_DATABASE_URL=$(bash scripts/pg-local.sh start "$pg_dir" 25432 | tail -n 1)
  export GATEWAY_DATABASE_URL
fi
export GATEWAY_LISTEN_ADDR="${GATEWAY_LISTEN_ADDR:-127.0.0.1:8080}"
export GATEWAY_CONFIG="${GATEWAY_CONFIG:-examples/demo.yaml}"
export GATEWAY_ADMIN_TOKEN="${GATEWAY_ADMIN_TOKEN:-demo-admin-token}"
export PRIMARY_API_KEY="${PRIMARY_API_KEY:-sk-demo-primary}"
export BACKUP_API_KEY="${BACKUP_API_KEY:-sk-demo-backup}"
export GATEWAY_SPOOL_DIR="${GATEWAY_SPOOL_DIR:-./data/spool}"
url="http://${GATEWAY_LISTEN_ADDR}"

cat <<MSG

  Gateway on ${url} (the primary mock fails 30% of requests and hangs on 30% of
  the rest; the backup answers then, and two failures in a row cool the primary)

  Operator console: ${url}/console/  (sign in with the admin token ${GATEWAY_ADMIN_TOKEN})

  Try (run it a few times, and look at the X-Request-Id):

    curl -si ${url}/v1/chat/completions -H 'Content-Type: application/json' \\
      -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":true}'

  Then read that request's candidate timeline:

    curl -s -H 'Authorization: Bearer ${GATEWAY_ADMIN_TOKEN}' ${url}/admin/requests/<X-Request-Id>

  and the health of every provider key (cooling, probing, healthy):

    curl -s -H 'Authorization: Bearer ${GATEWAY_ADMIN_TOKEN}' ${url}/admin/health

  Ctrl-C stops the gateway (after a drain), the mocks and the local Postgres.

MSG
bin/gateway serve &
gateway=$!
# Returns when the gateway ends by itself (its status becomes the script's,
# through set -e and the EXIT trap) or when a signal runs the trap above.
wait "$gateway"
