#!/usr/bin/env bash
# make demo: two mock upstreams, a local Postgres for records, and the gateway.
# Ctrl-C stops everything this script started.
set -euo pipefail
cd "$(dirname "$0")/.."

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

bin/mockupstream -addr 127.0.0.1:9001 -identity primary -chunk-interval 50ms &
pids+=($!)
bin/mockupstream -addr 127.0.0.1:9002 -identity backup -chunk-interval 50ms &
pids+=($!)

if [ -z "${GATEWAY_DATABASE_URL:-}" ]; then
  GATEWAY_DATABASE_URL=$(bash scripts/pg-local.sh start ./data/pg 25432 | tail -n 1)
  export GATEWAY_DATABASE_URL
fi
export GATEWAY_CONFIG="${GATEWAY_CONFIG:-examples/demo.yaml}"
export GATEWAY_ADMIN_TOKEN="${GATEWAY_ADMIN_TOKEN:-demo-admin-token}"
export PRIMARY_API_KEY="${PRIMARY_API_KEY:-sk-demo-primary}"
export BACKUP_API_KEY="${BACKUP_API_KEY:-sk-demo-backup}"
export GATEWAY_SPOOL_DIR="${GATEWAY_SPOOL_DIR:-./data/spool}"

cat <<MSG

  Gateway on http://127.0.0.1:8080 (primary mock fails 30% of requests; the backup answers then)
  Try (run it a few times, and look at the X-Request-Id):

    curl -si http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' \\
      -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":true}'

  Then read that request's candidate timeline:

    curl -s -H 'Authorization: Bearer ${GATEWAY_ADMIN_TOKEN}' http://127.0.0.1:8080/admin/requests/<X-Request-Id>

MSG
bin/gateway serve &
pids+=($!)
wait "${pids[-1]}"
