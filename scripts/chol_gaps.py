#!/usr/bin/env python3
"""Gaps between one thread's tile kernels, from benches/chol/kernel_timer.c's KERNEL_TIMER_LOG.

Usage: chol_gaps.py LOG...   (one log per run of one program: "tid start_ns end_ns" lines)

Per log: the run's span (first kernel start to last kernel end), and over its threads the
idle time before a thread's first kernel, after its last, and between its kernels, split at
20 us into short gaps (the runtime's own cost per task: report, dispatch, claim) and long
ones (no ready work, or the thread was off its core). Shares are of threads x span. Long gaps
are also summed by where they start: in the span's first tenth, while a runtime whose host
thread builds the graph is still building it, or after.
"""
import collections
import statistics
import sys

LONG_NS = 20_000


def one(path):
    calls = collections.defaultdict(list)
    for line in open(path):
        tid, t0, t1 = map(int, line.split())
        calls[tid].append((t0, t1))
    if not calls:
        return None
    start = min(c[0] for cs in calls.values() for c in cs)
    end = max(c[1] for cs in calls.values() for c in cs)
    span = end - start
    r = dict(span_ms=span / 1e6, threads=len(calls), lead=0, tail=0, short=0, long=0,
             n_short=0, n_long=0, gaps=[], long_first=0)
    for cs in calls.values():
        cs.sort()
        r["lead"] += cs[0][0] - start
        r["tail"] += end - cs[-1][1]
        for (a0, a1), (b0, _) in zip(cs, cs[1:]):
            g = b0 - a1
            r["gaps"].append(g)
            if g < LONG_NS:
                r["short"] += g
                r["n_short"] += 1
            else:
                r["long"] += g
                r["n_long"] += 1
                if (a1 - start) * 10 < span:
                    r["long_first"] += g
    return r


def main():
    rows = [r for r in map(one, sys.argv[1:]) if r]
    if not rows:
        sys.exit("chol_gaps.py: no kernel calls in the logs")
    for key in ("lead", "tail", "short", "long"):
        shares = [r[key] / (r["threads"] * r["span_ms"] * 1e6) for r in rows]
        print(f"{key:6s} share of threads x span: median {statistics.median(shares):.4f} "
              f"[{min(shares):.4f}-{max(shares):.4f}]")
    med = [statistics.median([g for g in r["gaps"] if g < LONG_NS] or [0]) / 1e3 for r in rows]
    print(f"short gap, median per run (us): median {statistics.median(med):.2f} "
          f"[{min(med):.2f}-{max(med):.2f}]")
    for what, part in (("in the first tenth", lambda r: r["long_first"]),
                       ("after it", lambda r: r["long"] - r["long_first"])):
        ms = [part(r) / 1e6 for r in rows]
        print(f"long gaps {what}, ms per run: median {statistics.median(ms):.3f} "
              f"[{min(ms):.3f}-{max(ms):.3f}]")
    nl = [r["n_long"] for r in rows]
    print(f"long gaps per run: median {statistics.median(nl)}; runs {len(rows)}, "
          f"threads {rows[0]['threads']}")


if __name__ == "__main__":
    main()
