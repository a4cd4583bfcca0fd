#!/usr/bin/env python3
"""Compare dagrt's workload bench with the peer harness, from a scripts/bench.sh results dir.

Usage: scripts/bench_compare.py RESULTS_DIR [--lanes 2]
       scripts/bench_compare.py --chol CHOL_TXT     (the tiled Cholesky table: see chol_table)

Reads RESULTS_DIR/dagrt.r*.jsonl (benches/workloads.rs output) and RESULTS_DIR/peers.r*.txt
(run.sh output: "peer workload N ns_per_task"). Per figure, the median over rounds of each
round's median (min/max: over rounds, of the per-round medians for peers and of the per-rep
extremes for dagrt). Prints a table per workload at the chosen lane/thread count (default 2):
dagrt best lane kind, each kind, each peer "-t<lanes>", dagrt best / best peer, and that
ratio within each round (dagrt and the peers run back to back in a round, so the spread of
these shows how far the machine's drift moves the ratio). Writes RESULTS_DIR/summary.json.
"""
import collections
import glob
import json
import os
import re
import statistics
import sys


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    if args[0] == "--chol":
        if len(args) != 2:
            sys.exit(__doc__)
        print(chol_table(args[1]), end="")
        return
    d = args[0]
    lanes = 2
    if "--lanes" in args:
        lanes = int(args[args.index("--lanes") + 1])

    # dagrt: (workload, lanes, kind) -> list of per-round records
    dg = {}
    # round -> {(workload, lanes, kind) or (peer, workload): that round's median}
    by_round = {}
    for path in sorted(glob.glob(os.path.join(d, "dagrt.r*.jsonl"))):
        rnd = round_of(path)
        for line in open(path):
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            k = (r["workload"], r["lanes"], r["lane_kind"])
            dg.setdefault(k, []).append(r)
            by_round.setdefault(rnd, {})[k] = r["ns_per_task_median"]

    # peers: (peer, workload) -> list of per-round medians, and the task counts they ran
    pe = {}
    pe_tasks = {}
    phys = {}
    # The rounds that ran the peers, and (peer, workload) -> the rounds that have its figure.
    peer_rounds = set()
    pe_rounds = {}
    for path in sorted(glob.glob(os.path.join(d, "peers.r*.txt"))):
        rnd = round_of(path)
        peer_rounds.add(rnd)
        for line in open(path):
            p = line.split()
            if len(p) != 4 or line.startswith("#"):
                continue
            try:
                v = float(p[3])
            except ValueError:
                continue
            if p[0] == "phys":
                phys.setdefault(p[1], []).append(v)
            else:
                pe.setdefault((p[0], p[1]), []).append(v)
                pe_tasks.setdefault((p[0], p[1]), set()).add(p[2])
                pe_rounds.setdefault((p[0], p[1]), set()).add(rnd)
                by_round.setdefault(rnd, {})[(p[0], p[1])] = v

    summary = {"results_dir": os.path.abspath(d), "lanes": lanes, "workloads": {},
               "dagrt_all": [], "peers_all": [], "phys": {}}
    for (w, nl, k), rs in sorted(dg.items()):
        summary["dagrt_all"].append({
            "workload": w, "lanes": nl, "lane_kind": k, "threads": rs[0]["threads"],
            "tasks": rs[0]["tasks"], "window": rs[0].get("window"),
            "ns_per_task_median": statistics.median(r["ns_per_task_median"] for r in rs),
            "ns_per_task_min": min(r["ns_per_task_min"] for r in rs),
            "ns_per_task_max": max(r["ns_per_task_max"] for r in rs),
            "submit_ns_per_task_median": statistics.median(
                r.get("submit_ns_per_task_median", float("nan")) for r in rs),
            "reducer_submit_ns_median": (statistics.median(r["reducer_submit_ns_median"] for r in rs)
                                         if "reducer_submit_ns_median" in rs[0] else None),
            "rounds": len(rs), "reps": rs[0]["reps"], **cpu_medians(rs)})
    for (peer, w), vs in sorted(pe.items()):
        summary["peers_all"].append({"peer": peer, "workload": w,
                                     "ns_per_task_median": statistics.median(vs),
                                     "min": min(vs), "max": max(vs), "rounds": len(vs)})
    for name, vs in phys.items():
        summary["phys"][name] = statistics.median(vs)

    workloads = sorted({w for (w, _, _) in dg} | {w for (_, w) in pe if re.fullmatch(r"W\d", w)})
    suffix = f"-t{lanes}"
    peer_names = sorted({p for (p, _) in pe if p.endswith(suffix)})
    kinds = ["sub", "next", "next1"]

    def fmt(x):
        return "-" if x is None else f"{x:.0f}"

    rows = []
    # Workloads whose figures come from different task counts (a --n passed to the bench, or
    # peers run at another N): their ratio compares two workloads.
    mismatched = {}
    # (peer, workload) -> the peer rounds without its figure, for the peers in the table.
    missing = {}
    # (workload, dagrt's best kind, its submitting thread's CPU per task), where measured.
    floors = []
    hdr = (["workload", "dagrt best", "kind"] + [f"dagrt {k}" for k in kinds]
           + [p for p in peer_names] + ["best peer", "dagrt/best", "per round"])
    for w in workloads:
        ent = {"workload": w, "dagrt": {}, "peers": {}}
        cpu_submit = {}
        for k in kinds:
            m = next((x for x in summary["dagrt_all"]
                      if x["workload"] == w and x["lanes"] == lanes and x["lane_kind"] == k), None)
            if m:
                if "submit" in m.get("cpu_ns_per_task", {}):
                    cpu_submit[k] = m["cpu_ns_per_task"]["submit"]
                ent["dagrt"][k] = {"median": m["ns_per_task_median"], "min": m["ns_per_task_min"],
                                   "max": m["ns_per_task_max"], "threads": m["threads"],
                                   "rounds": m["rounds"]}
        for p in peer_names:
            if (p, w) in pe:
                ent["peers"][p] = statistics.median(pe[(p, w)])
                # A median over fewer rounds than the others' can pick a different best peer.
                gone = sorted(peer_rounds - pe_rounds[(p, w)])
                if gone:
                    missing[(p, w)] = gone
                    ent.setdefault("peer_rounds_missing", {})[p] = gone
        counts = {str(x["tasks"]) for x in summary["dagrt_all"]
                  if x["workload"] == w and x["lanes"] == lanes}
        for p in peer_names:
            counts |= pe_tasks.get((p, w), set())
        if len(counts) > 1:
            ent["task_counts_differ"] = sorted(counts, key=int)
            mismatched[w] = ent["task_counts_differ"]
        best_k = min(ent["dagrt"], key=lambda k: ent["dagrt"][k]["median"], default=None)
        best_p = min(ent["peers"], key=lambda p: ent["peers"][p], default=None)
        ent["dagrt_best_kind"] = best_k
        if best_k in cpu_submit:
            floors.append((w, best_k, cpu_submit[best_k]))
        ent["dagrt_best"] = ent["dagrt"][best_k]["median"] if best_k else None
        ent["best_peer"] = best_p
        ent["best_peer_ns"] = ent["peers"][best_p] if best_p else None
        ent["ratio_dagrt_over_best_peer"] = (
            ent["dagrt_best"] / ent["best_peer_ns"] if best_k and best_p else None)
        per_round = []
        for rnd in sorted(by_round):
            got = by_round[rnd]
            ours = [got[(w, lanes, k)] for k in kinds if (w, lanes, k) in got]
            theirs = [got[(p, w)] for p in peer_names if (p, w) in got]
            if ours and theirs:
                per_round.append(min(ours) / min(theirs))
        ent["ratio_per_round"] = per_round
        summary["workloads"][w] = ent
        rows.append([w, fmt(ent["dagrt_best"]), best_k or "-"]
                    + [fmt(ent["dagrt"].get(k, {}).get("median")) for k in kinds]
                    + [fmt(ent["peers"].get(p)) for p in peer_names]
                    + [best_p or "-",
                       "-" if ent["ratio_dagrt_over_best_peer"] is None
                       else f"{ent['ratio_dagrt_over_best_peer']:.2f}",
                       "/".join(f"{x:.2f}" for x in per_round) or "-"])

    widths = [max(len(str(r[i])) for r in [hdr] + rows) for i in range(len(hdr))]
    print(f"ns per task (median over rounds of the median of reps); dagrt {lanes} lanes "
          f"({lanes + 2} threads: orchestrator + scheduler + lanes), peers {lanes} threads")
    print("  ".join(h.rjust(wd) for h, wd in zip(hdr, widths)))
    for r in rows:
        print("  ".join(str(c).rjust(wd) for c, wd in zip(r, widths)))
    for w, counts in mismatched.items():
        print(f"WARNING: {w}'s figures come from different task counts ({', '.join(counts)}): "
              "its ratio compares different workloads")
    for (p, w), gone in sorted(missing.items()):
        print(f"WARNING: {p} has no {w} figure in round{'s' if len(gone) > 1 else ''} "
              f"{', '.join(map(str, gone))}: its median is over {len(peer_rounds) - len(gone)} "
              f"of {len(peer_rounds)} rounds")
    if floors:
        print("dagrt's submitting thread, CPU ns per task (a floor under dagrt's figure: every "
              "submit runs on it): " + ", ".join(f"{w} {v:.0f} ({k})" for w, k, v in floors))
    if summary["phys"]:
        print("machine floor (phys, ns): " + ", ".join(
            f"{k}={v:.0f}" for k, v in summary["phys"].items()))
    if any(r["lanes"] != lanes for r in summary["dagrt_all"]):
        print("dagrt, all lane counts (median [min-max] ns/task; submit = first submission to "
              "close_run_submission returning, per task):")
        for r in summary["dagrt_all"]:
            red = r.get("reducer_submit_ns_median")
            print(f"  {r['workload']} lanes={r['lanes']} {r['lane_kind']:5} threads={r['threads']}: "
                  f"{r['ns_per_task_median']:.0f} [{r['ns_per_task_min']:.0f}-{r['ns_per_task_max']:.0f}]"
                  f"  submit {r['submit_ns_per_task_median']:.0f}"
                  + (f"  reducer submit {red / 1e6:.1f} ms" if red else "")
                  + ("  cpu " + " ".join(f"{k} {v:.0f}" for k, v in r["cpu_ns_per_task"].items())
                     + f" total {r['cpu_total_ns_per_task']:.0f}"
                     if "cpu_ns_per_task" in r else ""))
    host = host_phases(d)
    if host:
        summary["host_probe_ms"] = host
        fastest = min(v for part in host.values() for v in part.values())
        print("host probe (scripts/host_probe.c, ms; more is a slower phase of the host), "
              "before-after each half:")
        for rnd in sorted({k.split(".")[0] for k in host}, key=lambda r: int(r[1:])):
            halves = {h: host.get(f"{rnd}.{h}", {}) for h in ("dagrt", "peers")}
            cells = "  ".join(f"{h} {v.get('before', float('nan')):.0f}-{v.get('after', float('nan')):.0f}"
                              for h, v in halves.items() if v)
            print(f"  round {rnd[1:]}: {cells}{host_note(halves, fastest)}")
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


# The Cholesky programs' check: ||A - L L^T||_F / ||A||_F must be below this.
CHOL_CHECK_LIMIT = 1e-12


def chol_table(path):
    """The tiled Cholesky table, as text, from the chol.txt scripts/bench.sh writes: one line
    per rep, "label n b tasks seconds gflops residual" (dagrt's example with --peer-lines, the
    peers, whole-matrix LAPACK with a label lapack-*), and "# FAILED who n b exit rc[: line]"
    for a rep that exited nonzero or printed no result line (who: dagrt, omp, starpu, lapack;
    line: the result line it printed). A rep counts only when it exited 0 with a residual below
    the check's limit; the others are listed after the table, per runtime and size, with why.
    Lines "# round K" (bench.sh writes one before each round of reps) pair each dagrt rep with
    the peers' reps of its round, seconds apart: the median of those per-round ratios follows
    each size's row."""
    runs = collections.defaultdict(list)  # (n, b) -> [(label, gflops)], the tiled runtimes
    rounds = collections.defaultdict(dict)  # (n, b) -> {round: {label: gflops}}
    rnd = None  # the round the lines being read belong to (None before any marker)
    limit = collections.defaultdict(list)  # (n, label) -> [gflops], whole-matrix LAPACK
    dropped = collections.defaultdict(list)  # (label, n, b or None for LAPACK) -> [why]
    sizes = set()  # every (n, b) a tiled rep ran at, failed or not

    def key(label, n, b):
        # By runtime (the label's first word: dagrt, omp, starpu, lapack), which a failed rep
        # that printed no result line is named by too, so its count is out of all that
        # runtime's reps at that size.
        who = label.split("-")[0]
        return (who, n, None if who == "lapack" else b)

    for line in open(path):
        f = line.split()
        if line.startswith("# round ") and len(f) == 3:
            rnd = f[2]
            continue
        if line.startswith("# FAILED") and len(f) >= 7:
            # Every program prints its result line, residual included, before it checks the
            # residual and exits 2: the line is kept here only to say why the rep is dropped.
            who, n, b, rc, res = f[2], f[3], f[4], f[6].rstrip(":"), f[7:]
            label = res[0] if res else who
            why = f"exit {rc}" + (f", residual {res[6]}" if len(res) >= 7 else ", no result line")
            dropped[key(label, n, b)].append(why)
            if not label.startswith("lapack"):
                sizes.add((n, b))
            continue
        if len(f) < 7 or line.startswith("#"):
            continue
        label, n, b = f[0], f[1], f[2]
        try:
            res = float(f[6])
        except ValueError:
            res = float("nan")
        if not label.startswith("lapack"):
            sizes.add((n, b))
        if not res < CHOL_CHECK_LIMIT:  # NaN too: a failed run prints nan
            dropped[key(label, n, b)].append(f"residual {f[6]} >= {CHOL_CHECK_LIMIT:.0e}")
        elif label.startswith("lapack"):
            limit[(n, label)].append(float(f[5]))
        else:
            runs[(n, b)].append((label, float(f[5])))
            if rnd is not None:
                rounds[(n, b)].setdefault(rnd, {})[label] = float(f[5])

    def fmt(x, digits=2):  # NaN: a size with no valid rep of dagrt or of any peer
        return "-" if x != x else f"{x:.{digits}f}"

    out = ["tiled Cholesky, GFLOP/s (median of reps), 2 threads"]
    nan = float("nan")
    for n, b in sorted(sizes, key=lambda s: (int(s[0]), int(s[1]))):
        by = collections.defaultdict(list)
        for label, g in runs.get((n, b), []):
            by[label].append(g)
        med = {p: statistics.median(v) for p, v in by.items()}
        peers = {p: g for p, g in med.items() if not p.startswith("dagrt")}
        best = max(peers.items(), key=lambda x: x[1]) if peers else ("-", nan)
        cells = "  ".join(f"{p} {g:.1f}" for p, g in sorted(med.items()))
        lim = "  ".join(f"limit {p} {statistics.median(v):.1f}"
                        for (ln, p), v in sorted(limit.items()) if ln == n)
        d = max((g for p, g in med.items() if p.startswith("dagrt")), default=nan)
        # The host has slow phases of seconds in which every runtime's reps drop together (see
        # docs/performance.md): each runtime's fastest rep is the one a quiet phase measured.
        top = {p: max(v) for p, v in by.items()}
        tp = max((g for p, g in top.items() if not p.startswith("dagrt")), default=nan)
        td = max((g for p, g in top.items() if p.startswith("dagrt")), default=nan)
        out.append(f"n={n} b={b}: {cells or 'no valid rep'}  {lim}  | dagrt / best tiled peer "
                   f"({best[0]}) = {fmt(d / best[1])}  (fastest reps: {fmt(td, 1)} / {fmt(tp, 1)} = "
                   f"{fmt(td / tp)})")
        # Per round: dagrt's rep over the best peer rep of the same round (run seconds apart,
        # so more often in one phase of the host than two medians over minutes).
        paired = sorted(
            max(g for p, g in r.items() if p.startswith("dagrt"))
            / max(g for p, g in r.items() if not p.startswith("dagrt"))
            for r in rounds.get((n, b), {}).values()
            if any(p.startswith("dagrt") for p in r) and any(not p.startswith("dagrt") for p in r))
        if paired:
            out.append(f"  paired by round: dagrt / best peer of its round, median "
                       f"{fmt(statistics.median(paired))} [{fmt(paired[0])}-{fmt(paired[-1])}] "
                       f"over {len(paired)} round{'' if len(paired) == 1 else 's'}")
    if dropped:
        k = sum(len(v) for v in dropped.values())
        out.append(f"dropped {k} rep{'' if k == 1 else 's'} (not in the medians: their "
                   "correctness check failed or they exited nonzero):")
        for (label, n, b), whys in sorted(dropped.items(), key=lambda x: (
                x[0][0], int(x[0][1]), int(x[0][2] or 0))):
            kept = sum(len(v) for (ln, p), v in limit.items()
                       if ln == n and p.split("-")[0] == label) if b is None else sum(
                1 for p, _ in runs.get((n, b), []) if p.split("-")[0] == label)
            where = f"n={n}" if b is None else f"n={n} b={b}"
            reasons = collections.Counter(whys)
            out.append(f"  {label} {where}: {len(whys)} of {len(whys) + kept} ("
                       + "; ".join(f"{w}" + (f" x{c}" if c > 1 else "")
                                   for w, c in sorted(reasons.items())) + ")")
    return "\n".join(out) + "\n"


def cpu_medians(rs):
    """The per-thread CPU fields of a dagrt measurement's rounds (benches/workloads/
    thread_cpu.rs), as medians over the rounds that have them; {} when none has."""
    rs = [r for r in rs if "cpu_ns_per_task" in r]
    if not rs:
        return {}
    roles = sorted({k for r in rs for k in r["cpu_ns_per_task"]})
    return {"cpu_ns_per_task": {k: statistics.median(r["cpu_ns_per_task"].get(k, 0.0) for r in rs)
                                for k in roles},
            "cpu_total_ns_per_task": statistics.median(r["cpu_total_ns_per_task"] for r in rs)}


def host_note(halves, fastest):
    """What a round's probes say about its ratio, from its halves' readings ({"dagrt":
    {"before": ms, "after": ms}, "peers": ...}) and the fastest reading of any round."""
    halves = {h: list(v.values()) for h, v in halves.items() if v}
    readings = [x for v in halves.values() for x in v]
    if not readings:
        return ""
    lo, hi = min(readings), max(readings)
    # The ratio divides one half by the other: it holds when both ran in one phase, slow or
    # fast, and compares two hosts when they did not: their levels (the mean of each half's
    # readings) differ, or one half saw the phase change and the other did not.
    level = {h: sum(v) / len(v) for h, v in halves.items()}
    drift = {h: max(v) / min(v) > 1.3 for h, v in halves.items()}
    if len(halves) == 2 and (max(level.values()) > 1.3 * min(level.values())
                             or len(set(drift.values())) == 2):
        return ("  <- mixed: its halves ran in different phases (%.1fx apart); its ratio compares "
                "two hosts" % (hi / lo))
    if hi > 1.3 * lo:
        return ("  <- drifted: the host's phase changed during %s (%.1fx); its figures mix "
                "phases" % ("both halves alike" if len(halves) == 2 else "the round", hi / lo))
    if lo > 1.3 * fastest:
        return ("  <- slow: the whole round ran at %.1fx the fastest phase (its ratio holds; its "
                "figures are slow)" % (lo / fastest))
    return ""


def host_phases(d):
    """host.txt as {part: {"before": ms, "after": ms}} for the rounds' parts (r1.dagrt ...)."""
    path = os.path.join(d, "host.txt")
    res = {}
    if os.path.exists(path):
        for line in open(path):
            p = line.split()
            if len(p) == 3 and re.fullmatch(r"r\d+\.(dagrt|peers)", p[0]):
                res.setdefault(p[0], {})[p[1]] = float(p[2])
    return res


def round_of(path):
    """The round number N of a dagrt.rN.jsonl or peers.rN.txt file."""
    return int(re.search(r"\.r(\d+)\.", os.path.basename(path)).group(1))


if __name__ == "__main__":
    main()
