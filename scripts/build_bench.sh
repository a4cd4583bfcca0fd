#!/bin/bash
# Build a bench (release; default the workloads bench) and print its executable's path.
#   scripts/build_bench.sh LOG [NAME]    cargo's output goes to LOG; on failure its tail goes
#                                        to stderr. NAME: workloads (default) or floor
set -euo pipefail
[ $# -ge 1 ] && [ $# -le 2 ] || { sed -n 2,4p "$0" >&2; exit 2; }
name=${2:-workloads}
cd "$(dirname "$0")/.."
cargo bench --bench "$name" --no-run > "$1" 2>&1 || {
    tail -30 "$1" >&2
    exit 1
}
exe=$(sed -n "s/.*Executable benches\/$name.rs (\(.*\))\$/\1/p" "$1" | tail -1)
[ -x "$exe" ] || { echo "bench executable not found in $1" >&2; exit 1; }
realpath "$exe"
