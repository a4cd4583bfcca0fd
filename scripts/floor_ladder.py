#!/usr/bin/env python3
"""Summarize scripts/floor_ladder.sh: per workload, the median ns per task over the rounds of
each floor configuration ("floor-*"), of dagrt ("dagrt-*") and of each peer, and for the floor
and dagrt the median of the per-round ratios to that round's best peer.

Usage: floor_ladder.py LADDER_JSONL [--json]
"""
import collections
import json
import statistics as st
import sys

FLOORS = ["floor-bare", "floor-slot", "floor-locks", "floor-hop", "floor-all"]


def ours(who):
    return who.startswith(("floor-", "dagrt-"))


def summarize(lines):
    # fig[(workload, who)][round] = ns per task (median of that run's reps)
    fig = collections.defaultdict(dict)
    for j in lines:
        fig[(j["workload"], j["who"])][j["pair"]] = j["ns_per_task_median"]
    rows = []
    for w in sorted({w for w, _ in fig}):
        runs = {who: v for (ww, who), v in fig.items() if ww == w}
        peers = {who: v for who, v in runs.items() if not ours(who)}
        if not peers:
            continue
        row = {"workload": w, "ns_median": {}, "ratio_median": {}}
        for who, v in sorted(runs.items()):
            row["ns_median"][who] = st.median(v.values())
            ratios = []
            for r, x in v.items():
                here = [p[r] for p in peers.values() if r in p]
                if ours(who) and here:
                    ratios.append(x / min(here))
            if ratios:
                row["ratio_median"][who] = st.median(ratios)
        rows.append(row)
    return rows


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        rows = summarize(json.loads(x) for x in f if x.strip())
    if "--json" in sys.argv:
        print(json.dumps(rows, indent=1))
        return
    whos = [w for w in FLOORS if any(w in r["ns_median"] for r in rows)]
    whos += sorted({w for r in rows for w in r["ns_median"] if w not in FLOORS},
                   key=lambda w: (not w.startswith("dagrt-"), w))
    print("ns per task, median over rounds (2 lanes / 2 threads); below: / best peer of each round")
    print(f"{'':4}" + "".join(f"{w.removeprefix('floor-'):>12}" for w in whos))
    for r in rows:
        print(f"{r['workload']:4}" + "".join(
            f"{r['ns_median'][w]:>12.0f}" if w in r["ns_median"] else " " * 12 for w in whos))
        print(f"{'':4}" + "".join(
            f"{r['ratio_median'][w]:>12.2f}" if w in r["ratio_median"] else " " * 12 for w in whos))


if __name__ == "__main__":
    main()
