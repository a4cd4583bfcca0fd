#!/usr/bin/env bash
# Measure the spin bound (DESIGN §6: "measure the spin bound; do not guess it"): run the
# workload bench (benches/workloads.rs) under several DAGRT_SPIN_US values, interleaved over
# ROUNDS rounds, and print one JSON line per measurement plus a table of medians.
#
# Usage: scripts/spin_bound.sh            (env: ROUNDS=3, SPINS="0 20 50 200 1000 5000",
#                                          WORKLOADS=W1,W2, LANES=2, KINDS=sub, REPS=5)
# W2 (a chain) is bound by the lane -> scheduler -> lane handoff, so it shows what parking
# too early costs (a ~50 us wake-up per task); W1 shows what spinning costs the threads that
# have work on a 2-core machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ROUNDS=${ROUNDS:-3}
SPINS=${SPINS:-"0 20 50 200 1000 5000"}
WORKLOADS=${WORKLOADS:-W1,W2}
LANES=${LANES:-2}
KINDS=${KINDS:-sub}
REPS=${REPS:-5}
out=${OUT:-$root/target/bench-results/spin-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"

cargo bench --bench workloads --no-run > "$out/build.log" 2>&1 || {
    tail -30 "$out/build.log" >&2
    exit 1
}
exe=$(sed -n 's/.*Executable benches\/workloads.rs (\(.*\))$/\1/p' "$out/build.log" | tail -1)
[ -x "$exe" ] || { echo "bench executable not found in $out/build.log" >&2; exit 1; }

for r in $(seq 1 "$ROUNDS"); do
    for s in $SPINS; do
        DAGRT_SPIN_US=$s "$exe" --workloads "$WORKLOADS" --lanes "$LANES" --kinds "$KINDS" \
            --reps "$REPS" 2>> "$out/bench.log" |
            python3 -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    d["spin_us"] = int(sys.argv[1])
    d["round"] = int(sys.argv[2])
    print(json.dumps(d))' "$s" "$r"
    done
done | tee "$out/spin.jsonl"

python3 - "$out/spin.jsonl" <<'PY' | tee "$out/table.txt"
import collections, json, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    d = json.loads(line)
    runs[(d["workload"], d["spin_us"])].append(d["ns_per_task_median"])
spins = sorted({s for _, s in runs})
wls = sorted({w for w, _ in runs})
print("ns per task (median over rounds of the median of reps) by DAGRT_SPIN_US")
print("spin_us " + " ".join(f"{w:>8}" for w in wls))
for s in spins:
    print(f"{s:>7} " + " ".join(f"{statistics.median(runs[(w, s)]):>8.0f}" for w in wls))
PY
echo "results: $out" >&2
