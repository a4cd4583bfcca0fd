#!/usr/bin/env bash
# Tight pairs: dagrt's workload bench on 2 lanes and the two fastest peers (TBB flow graph and
# OpenMP, 2 threads) run back to back, a few seconds apart, PAIRS times, alternating which goes
# first; then, per workload, the median of the per-pair ratios dagrt / best peer.
#
# Why: this machine's host has slow and fast phases lasting seconds to minutes (a pinned ALU
# loop runs 3-4x slower in a slow one). A round of scripts/bench.sh runs dagrt's whole bench
# and then every peer at 1 and 2 threads, minutes apart, so a round's ratio can compare a fast
# phase with a slow one. A pair here spans about 4 s, and a ratio of two figures taken in one
# phase does not depend on which phase it was.
#
# Usage: scripts/bench_pairs.sh OUT_DIR [BENCH_EXE]
#   OUT_DIR: where pairs.jsonl (raw: one JSON object per measurement, tagged with its pair) and
#   pairs.txt (the table) go. BENCH_EXE: the workloads bench executable (default: OUT_DIR's
#   workloads-bench, as scripts/bench.sh leaves it, else built with cargo).
# Env: PAIRS (default 10); PEERS_DIR (default /work/shared/bench/peers); PEERS_BUILD (default
#   target/peers-build: the peer binaries run.sh builds; run.sh is run once if they are missing);
#   FLOOR (default 1): each pair also runs benches/floor.rs on 1 and 2 lanes (the bare
#   mechanism's cost, not dagrt: see that file), reported as floor / best peer of each pair.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ $# -ge 1 ] || { sed -n 2,17p "$0" >&2; exit 2; }
out=$1
mkdir -p "$out"
exe=${2:-$out/workloads-bench}
if [ ! -x "$exe" ]; then
    exe=$("$root/scripts/build_bench.sh" "$out/pairs-build.log")
fi
floor_exe=
if [ "${FLOOR:-1}" = 1 ]; then
    floor_exe=$("$root/scripts/build_bench.sh" "$out/pairs-floor-build.log" floor)
fi
pb=$("$root/scripts/build_peers.sh" "$out/pairs-peers-build.log")

# One peer's lines, as JSON objects of the pair.
peer() {
    "$pb/$1_bench" "$1-t2" 2 | python3 "$root/scripts/tag_lines.py" "$2" ''
}
dagrt() {
    "$exe" --lanes 2 --kinds sub,next,next1 --reps 5 2> /dev/null |
        python3 "$root/scripts/tag_lines.py" "$1" 'dagrt-{lane_kind}'
}
floor() {
    [ -n "$floor_exe" ] || return 0
    "$floor_exe" --lanes 1,2 --reps 5 2> /dev/null |
        python3 "$root/scripts/tag_lines.py" "$1" 'floor-l{lanes}'
}

: > "$out/pairs.jsonl"
for p in $(seq "${PAIRS:-10}"); do
    echo "== pair $p" >&2
    if [ $((p % 2)) = 1 ]; then
        dagrt "$p" >> "$out/pairs.jsonl"
        peer tbb "$p" >> "$out/pairs.jsonl"
        peer omp "$p" >> "$out/pairs.jsonl"
        floor "$p" >> "$out/pairs.jsonl"
    else
        floor "$p" >> "$out/pairs.jsonl"
        peer omp "$p" >> "$out/pairs.jsonl"
        peer tbb "$p" >> "$out/pairs.jsonl"
        dagrt "$p" >> "$out/pairs.jsonl"
    fi
done
python3 "$root/scripts/bench_pairs.py" "$out/pairs.jsonl" | tee "$out/pairs.txt"
