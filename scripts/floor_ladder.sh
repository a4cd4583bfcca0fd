#!/usr/bin/env bash
# The floor's ladder: benches/floor.rs bare and with each of dagrt's costs added back
# (--slot-bytes 576, --locks 3, --hop 1), then the seeds' two of them together (the locks and
# the hop: per-slot fanout_mu and the one dispatcher, without dagrt's slot size), then all
# three; dagrt's workloads bench and the two fastest peers (TBB flow graph, OpenMP), all on
# 2 lanes / 2 threads, back to back in each round; then per workload the medians over the
# rounds and the median of the per-round ratios to that round's best peer
# (scripts/floor_ladder.py). What each way dagrt is built costs on this machine, next to what
# dagrt costs and what the issue's targets allow.
#
# Usage: scripts/floor_ladder.sh OUT_DIR [ROUNDS]   (default 10 rounds, about 20 s each)
#   OUT_DIR gets ladder.jsonl (one JSON object per measurement, tagged with its round) and
#   ladder.txt (the table).
# Env: PEERS_DIR, PEERS_BUILD as for scripts/build_peers.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { sed -n 2,13p "$0" >&2; exit 2; }
out=$1
rounds=${2:-10}
mkdir -p "$out"
floor_exe=$("$root/scripts/build_bench.sh" "$out/floor-build.log" floor)
exe=$("$root/scripts/build_bench.sh" "$out/workloads-build.log")
pb=$("$root/scripts/build_peers.sh" "$out/peers-build.log")
tag() { python3 "$root/scripts/tag_lines.py" "$@"; }
: > "$out/ladder.jsonl"
for r in $(seq "$rounds"); do
    echo "== round $r" >&2
    for cfg in "bare:" "slot:--slot-bytes 576" "locks:--locks 3" "hop:--hop 1" \
        "seed:--locks 3 --hop 1" "all:--slot-bytes 576 --locks 3 --hop 1"; do
        # shellcheck disable=SC2086 # the options are words
        "$floor_exe" --lanes 2 ${cfg#*:} 2> /dev/null | tag "$r" "floor-${cfg%%:*}"
    done >> "$out/ladder.jsonl"
    "$exe" --kinds sub --lanes 2 --reps 5 2> /dev/null | tag "$r" 'dagrt-{lane_kind}' \
        >> "$out/ladder.jsonl"
    for p in tbb omp; do
        "$pb/${p}_bench" "$p-t2" 2 | tag "$r" '' >> "$out/ladder.jsonl"
    done
done
python3 "$root/scripts/floor_ladder.py" "$out/ladder.jsonl" | tee "$out/ladder.txt"
