#!/usr/bin/env python3
"""Summarize scripts/bench_pairs.sh: per workload, dagrt's lane kind with the lowest median over
all pairs, and the median (and quartiles) of the per-pair ratios dagrt / best peer of that pair;
where the pairs ran benches/floor.rs ("floor-l1", "floor-l2"), the same for its best lane count
(floor / best peer of each pair: what the bare mechanism costs here).

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


def best_ratios(runs, peers):
    """Of `runs` (who -> {pair: ns}), the one with the lowest median over its pairs, and its
    per-pair ratios against each pair's best peer, with how often each peer was that best."""
    who = min(runs, key=lambda k: st.median(runs[k].values()))
    ratios, best_peers = [], collections.Counter()
    for p, d in sorted(runs[who].items()):
        here = {w: v[p] for w, v in peers.items() if p in v}
        if not here:
            continue
        best = min(here, key=here.get)
        best_peers[best] += 1
        ratios.append(d / here[best])
    return who, ratios, best_peers


def figures(lines):
    """fig[(workload, who)][pair] = ns per task (the median of that run's reps)."""
    fig = collections.defaultdict(dict)
    for j in lines:
        fig[(j["workload"], j["who"])][j["pair"]] = j["ns_per_task_median"]
    return fig


def summarize(lines):
    fig = figures(lines)
    rows = []
    for w in sorted({w for w, _ in fig}):
        kinds = {who: v for (ww, who), v in fig.items() if ww == w and who.startswith("dagrt-")}
        floors = {who: v for (ww, who), v in fig.items() if ww == w and who.startswith("floor-")}
        peers = {who: v for (ww, who), v in fig.items()
                 if ww == w and not who.startswith(("dagrt-", "floor-"))}
        if not kinds or not peers:
            continue
        kind, ratios, best_peers = best_ratios(kinds, peers)
        if not ratios:
            continue
        lo, hi = quartiles(ratios)
        row = {
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
        }
        if floors:
            fwho, fratios, _ = best_ratios(floors, peers)
            if fratios:
                row["floor_lanes"] = int(fwho.removeprefix("floor-l"))
                row["floor_ns_median"] = st.median(floors[fwho].values())
                row["floor_ratio_median"] = st.median(fratios)
        rows.append(row)
    return rows


def rows_from_argv(summarize, doc):
    """The rows `summarize` makes of the JSON lines in the file argv[1] names; with --json they
    are printed as JSON and None comes back."""
    if len(sys.argv) < 2:
        sys.exit(doc)
    with open(sys.argv[1]) as f:
        rows = summarize(json.loads(x) for x in f if x.strip())
    if "--json" in sys.argv:
        print(json.dumps(rows, indent=1))
        return None
    return rows


def main():
    rows = rows_from_argv(summarize, __doc__)
    if rows is None:
        return
    print("tight pairs (dagrt 2 lanes, peers 2 threads, back to back): dagrt / best peer of each pair")
    print(f"{'':4}{'dagrt ns (kind)':>18}  {'peers ns':<28} {'pairs':>5}  {'ratio median':>12}  {'q1-q3':>11}  {'min-max':>11}")
    for r in rows:
        peers = " ".join(f"{k.split('-')[0]} {v:.0f}" for k, v in r["peer_ns_median"].items())
        print(f"{r['workload']:4}{r['dagrt_ns_median']:>11.0f} ({r['dagrt_kind']:>5})  {peers:<28} {r['pairs']:>5}"
              f"  {r['ratio_median']:>12.2f}  {r['ratio_q1']:.2f}-{r['ratio_q3']:.2f}  {r['ratio_min']:.2f}-{r['ratio_max']:.2f}")
    floors = [r for r in rows if "floor_ns_median" in r]
    if floors:
        print("the floor (benches/floor.rs, the bare mechanism, not dagrt): floor / best peer of each pair")
        for r in floors:
            print(f"{r['workload']:4}{r['floor_ns_median']:>11.0f} ({r['floor_lanes']} lane{'s' if r['floor_lanes'] > 1 else ''})"
                  f"  {r['floor_ratio_median']:>12.2f}")


if __name__ == "__main__":
    main()
