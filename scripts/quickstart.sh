#!/usr/bin/env bash
# `npm start`: a single-node demo of the daemon on the embedded store (fixtures/demo/node.yaml, state in ./var).
# Starts `blockspeaker run`, assigns two pod addresses through its control socket (as the CNI plugin would), shows
# what it holds and announces, then keeps running until Ctrl-C. Run it again: node-a keeps its block.
set -euo pipefail
cd "$(dirname "$0")/.."
CONF=fixtures/demo/node.yaml
SOCK=./var/blockspeaker.sock
mkdir -p var/run
bs() { node bin/blockspeaker.js "$@"; }

bs run -c "$CONF" --run-dir ./var/run 2>>var/blockspeaker.log &
PID=$!
stop() { kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; echo "daemon stopped"; }
trap stop EXIT
trap 'exit 0' INT TERM

for _ in $(seq 1 100); do
  bs show --socket "$SOCK" status >/dev/null 2>&1 && break
  if ! kill -0 "$PID" 2>/dev/null; then echo "the daemon did not start; last log lines:" >&2; tail -5 var/blockspeaker.log >&2; exit 1; fi
  sleep 0.2
done

echo "== blockspeaker run -c $CONF  (pid $PID, log: var/blockspeaker.log)"
bs show --socket "$SOCK" status
echo; echo "== two pod addresses through the control socket (handles demo-pod-1, demo-pod-2)"
bs ipam --socket "$SOCK" assign --handle demo-pod-1
bs ipam --socket "$SOCK" assign --handle demo-pod-2
sleep 0.2
echo; echo "== show ipam"; bs show --socket "$SOCK" ipam
echo; echo "== show route"; bs show --socket "$SOCK" route
cat <<TXT

Query it while it runs (from another terminal, in $(pwd)):
  curl -s http://127.0.0.1:9179/status          # also /peers /routes /ipam/pools /ipam/blocks /dataplane /readyz /metrics
  node bin/blockspeaker.js show --socket $SOCK ipam      # or: peers, route [for ADDR], status; add --json
  node bin/blockspeaker.js ipam --socket $SOCK assign --handle my-pod
  node bin/blockspeaker.js ipam --socket $SOCK release --handle my-pod

Ctrl-C stops the daemon.
TXT
wait "$PID"
