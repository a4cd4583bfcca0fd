#!/usr/bin/env python3
"""Summarize scripts/floor_ladder.sh: per workload, the median ns per task over the rounds of
each floor configuration ("floor-*"), of dagrt ("dagrt-*") and of each peer, and for the floor
and dagrt the median of the per-round ratios to that round's best peer.

Usage: floor_ladder.py LADDER_JSONL [--json]
"""
import statistics as st

from bench_pairs import best_ratios, figures, rows_from_argv

FLOORS = ["floor-bare", "floor-slot", "floor-locks", "floor-hop", "floor-seed", "floor-all"]


def ours(who):
    return who.startswith(("floor-", "dagrt-"))


def summarize(lines):
    fig = figures(lines)  # by (workload, who), then by round
    rows = []
    for w in sorted({w for w, _ in fig}):
        runs = {who: v for (ww, who), v in fig.items() if ww == w}
        peers = {who: v for who, v in runs.items() if not ours(who)}
        if not peers:
            continue
        row = {"workload": w, "ns_median": {}, "ratio_median": {}}
        for who, v in sorted(runs.items()):
            row["ns_median"][who] = st.median(v.values())
            ratios = best_ratios({who: v}, peers)[1] if ours(who) else []
            if ratios:
                row["ratio_median"][who] = st.median(ratios)
        rows.append(row)
    return rows


def main():
    rows = rows_from_argv(summarize, __doc__)
    if rows is None:
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
