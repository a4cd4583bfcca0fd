#!/bin/bash
# Build the workloads bench (release) and print its executable's path.
#   scripts/build_bench.sh LOG    cargo's output goes to LOG; on failure its tail goes to stderr
set -euo pipefail
[ $# -eq 1 ] || { sed -n 2,3p "$0" >&2; exit 2; }
cd "$(dirname "$0")/.."
cargo bench --bench workloads --no-run > "$1" 2>&1 || {
    tail -30 "$1" >&2
    exit 1
}
exe=$(sed -n 's/.*Executable benches\/workloads.rs (\(.*\))$/\1/p' "$1" | tail -1)
[ -x "$exe" ] || { echo "bench executable not found in $1" >&2; exit 1; }
realpath "$exe"
