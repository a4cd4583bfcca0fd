#!/usr/bin/env bash
# Interleaved A/B of two builds of the workloads bench: the way to tell a +-10% change from
# this machine's noise (two separate runs drift more than that).
#
# Usage: scripts/ab_bench.sh A_EXE B_EXE ROUNDS [BENCH ARGS...]
#   A_EXE, B_EXE: copies of the bench executable (`cargo bench --bench workloads --no-run`
#   prints its path) built from the two versions; ROUNDS: A, B, A, B, ... pairs;
#   BENCH ARGS: e.g. --workloads W1,W2 --lanes 2 --kinds sub --reps 5
# Prints, per (workload, lanes, kind): the median of the per-run medians and the minimum over
# all reps, for A and B, and B/A.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,10p "$0" >&2; exit 2; }
a=$1 b=$2 rounds=$3
shift 3
for _ in $(seq "$rounds"); do
    "$a" "$@" 2>/dev/null | sed 's/^/A /'
    "$b" "$@" 2>/dev/null | sed 's/^/B /'
done | python3 -c '
import sys, json, statistics as st, collections
med = collections.defaultdict(list); mins = collections.defaultdict(list)
for line in sys.stdin:
    which, j = line.split(" ", 1)
    j = json.loads(j)
    k = (j["workload"], j["lanes"], j["lane_kind"])
    med[(k, which)].append(j["ns_per_task_median"])
    mins[(k, which)].extend(x / j["tasks"] for x in j["samples_ns"])
for k in sorted({k for k, _ in med}):
    if (k, "A") not in med or (k, "B") not in med:
        continue
    a, b = st.median(med[(k, "A")]), st.median(med[(k, "B")])
    am, bm = min(mins[(k, "A")]), min(mins[(k, "B")])
    print("%s lanes=%d %-5s median A %5.0f B %5.0f B/A %.2f | min A %5.0f B %5.0f B/A %.2f"
          % (k[0], k[1], k[2], a, b, b / a, am, bm, bm / am))
'
