#!/usr/bin/env python3
"""Summarize scripts/bench_pairs.sh: per workload, dagrt's lane kind with the lowest median over
all pairs, and the median (and quartiles) of the per-pair ratios dagrt / best peer of that pair.

Usage: bench_pairs.py PAIRS_JSONL [--json]
"""
import collections
import json
import statistics as st
import sys


def quartiles(xs):
    xs = sorted(xs)
    if len(xs) < 2:
        return xs[0], xs[0]
    q = st.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def summarize(lines):
    # fig[(workload, who)][pair] = ns per task (median of that run's reps)
    fig = collections.defaultdict(dict)
    for j in lines:
        fig[(j["workload"], j["who"])][j["pair"]] = j["ns_per_task_median"]
    rows = []
    for w in sorted({w for w, _ in fig}):
        kinds = {who: v for (ww, who), v in fig.items() if ww == w and who.startswith("dagrt-")}
        peers = {who: v for (ww, who), v in fig.items() if ww == w and not who.startswith("dagrt-")}
        if not kinds or not peers:
            continue
        kind = min(kinds, key=lambda k: st.median(kinds[k].values()))
        ratios, best_peers = [], collections.Counter()
        for p, d in sorted(kinds[kind].items()):
            here = {who: v[p] for who, v in peers.items() if p in v}
            if not here:
                continue
            best = min(here, key=here.get)
            best_peers[best] += 1
            ratios.append(d / here[best])
        if not ratios:
            continue
        lo, hi = quartiles(ratios)
        rows.append({
            "workload": w,
            "dagrt_kind": kind.removeprefix("dagrt-"),
            "dagrt_ns_median": st.median(kinds[kind].values()),
            "peer_ns_median": {who: st.median(v.values()) for who, v in sorted(peers.items())},
            "best_peer_counts": dict(best_peers),
            "pairs": len(ratios),
            "ratio_median": st.median(ratios),
            "ratio_q1": lo,
            "ratio_q3": hi,
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
        })
    return rows


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        rows = summarize(json.loads(x) for x in f if x.strip())
    if "--json" in sys.argv:
        print(json.dumps(rows, indent=1))
        return
    print("tight pairs (dagrt 2 lanes, peers 2 threads, back to back): dagrt / best peer of each pair")
    print(f"{'':4}{'dagrt ns (kind)':>18}  {'peers ns':<28} {'pairs':>5}  {'ratio median':>12}  {'q1-q3':>11}  {'min-max':>11}")
    for r in rows:
        peers = " ".join(f"{k.split('-')[0]} {v:.0f}" for k, v in r["peer_ns_median"].items())
        print(f"{r['workload']:4}{r['dagrt_ns_median']:>11.0f} ({r['dagrt_kind']:>5})  {peers:<28} {r['pairs']:>5}"
              f"  {r['ratio_median']:>12.2f}  {r['ratio_q1']:.2f}-{r['ratio_q3']:.2f}  {r['ratio_min']:.2f}-{r['ratio_max']:.2f}")


if __name__ == "__main__":
    main()
