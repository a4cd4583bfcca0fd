#!/usr/bin/env bash
# Make sure the TBB and OpenMP peer benches are built, and print the directory that holds them.
#   scripts/build_peers.sh LOG    run.sh's output goes to LOG when it has to build them
# Env: PEERS_DIR (default /work/shared/bench/peers); PEERS_BUILD (default target/peers-build).
set -euo pipefail
[ $# -eq 1 ] || { sed -n 2,4p "$0" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
PEERS_DIR=${PEERS_DIR:-/work/shared/bench/peers}
pb=${PEERS_BUILD:-$root/target/peers-build}
if [ ! -x "$pb/tbb_bench" ] || [ ! -x "$pb/omp_bench" ]; then
    echo "== building the peers (run.sh, once)" >&2
    mkdir -p "$pb"
    PY=0 PEERS_BUILD=$pb "$PEERS_DIR/run.sh" > "$1" 2>&1
fi
echo "$pb"
