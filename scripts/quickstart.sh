#!/usr/bin/env bash
# `npm start`: the main job on the embedded store. Creates a pool and a host in ./var/blockspeaker (once), assigns
# two addresses to the host and shows its blocks and routes. Run it again to see the same host keep its block.
set -euo pipefail
cd "$(dirname "$0")/.."
STORE=${BLOCKSPEAKER_STORE:-./var/blockspeaker}
bs() { node bin/blockspeaker.js ipam --store "$STORE" "$@"; }
if ! bs pool list | grep -q '"pods-v4"'; then
  bs pool add --name pods-v4 --cidr 10.244.0.0/16 --block-size 26 >/dev/null
  bs host set --name node-a --os linux --label rack=r1 >/dev/null
  echo "created pool pods-v4 (10.244.0.0/16, /26 blocks) and host node-a in $STORE"
fi
echo "assign:  $(bs assign --host node-a --num4 2 --handle "demo-$(date +%s%N)")"
echo "blocks:  $(bs blocks --host node-a)"
echo "routes:  $(bs routes --host node-a)"
