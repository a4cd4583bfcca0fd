#!/usr/bin/env python3
"""Instructions per task by source statement, through inlining (used by scripts/cg_lines.sh).

The release build is one codegen unit with fat LTO, so the submit path is a few huge functions
and callgrind's per-function counts say little. This reads two callgrind outputs of the same
bench thread made with --dump-instr=yes (3 timed reps and 1: their difference is two reps of
steady state, without start-up and warm-up), keeps each instruction address's own cost (not
the calls it makes), and resolves every address with `addr2line -i` to its chain of inlined
frames. It prints the cost per task by the innermost frame in ANCHOR (default
src/orchestrator/submit.rs: the statement of the submit a cost belongs to; addresses outside
it are named by their outermost function), then by the innermost frame in dagrt's sources.

usage: cg_lines.py EXE REPS3_FILE REPS1_FILE TASKS [ANCHOR [EVENTS]]
  TASKS: the tasks of the two extra reps (2 x the workload's task count).
  EVENTS: callgrind events to count, joined by '+' (default Ir; e.g. DLmr+DLmw, the
  last-level misses of a run with --cache-sim=yes).
"""
import collections
import os
import re
import subprocess
import sys

# The checkout this script lies in: dagrt's own frames are the ones under it.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + "/"


def own_costs(path, exe_name, events):
    """Own cost per instruction address of the object whose file is named exe_name (a saved
    copy's short name must not match other objects by suffix): the sum of the named events
    (callgrind's names, e.g. Ir, or DLmr and DLmw with --cache-sim=yes)."""
    cost = collections.Counter()
    names, obj, addr, after_calls = {}, None, 0, False
    cols = None
    for line in open(path):
        line = line.rstrip("\n")
        if not line:
            continue
        if line.startswith("events:"):
            have = line.split()[1:]
            missing = [e for e in events if e not in have]
            if missing:
                sys.exit("%s: no event %s (has %s)" % (path, ", ".join(missing), " ".join(have)))
            # Columns after the address and the line number.
            cols = [2 + have.index(e) for e in events]
            continue
        m = re.match(r"c?ob=\((\d+)\)(?: (.*))?", line)
        if m:
            if m.group(2):
                names[m.group(1)] = m.group(2)
            if line.startswith("ob="):
                obj = names.get(m.group(1))
            continue
        if line.startswith("calls="):
            # The next cost line is the call's inclusive cost, not this address's own.
            after_calls = True
            continue
        head = line[0]
        if not (head.isdigit() or head in "+-*"):
            after_calls = False
            continue
        parts = line.split()
        a = parts[0]
        if a.startswith("0x"):
            addr = int(a, 16)
        elif a[0] in "+-":
            step = int(a[1:], 16) if a[1:].startswith("0x") else int(a[1:])
            addr += step if a[0] == "+" else -step
        if after_calls:
            after_calls = False
            continue
        if obj and os.path.basename(obj) == exe_name:
            # A cost line may stop early: trailing zero events are left out.
            cost[addr] += sum(int(parts[c]) for c in cols if c < len(parts))
    return cost


def inline_frames(exe, addrs):
    """addr -> [(function, file:line)], innermost first."""
    out = subprocess.run(
        ["addr2line", "-a", "-i", "-f", "-C", "-e", exe] + [hex(a) for a in addrs],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    frames, cur, i = collections.defaultdict(list), None, 0
    while i < len(out):
        if out[i].startswith("0x"):
            cur = int(out[i], 16)
            i += 1
            continue
        frames[cur].append((out[i], out[i + 1] if i + 1 < len(out) else "?"))
        i += 2
    return frames


def short(loc):
    return loc[len(ROOT):] if loc.startswith(ROOT) else loc.split("/")[-1]


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    exe, f3, f1, tasks = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    anchor = sys.argv[5] if len(sys.argv) > 5 and sys.argv[5] else "src/orchestrator/submit.rs"
    events = (sys.argv[6] if len(sys.argv) > 6 else "Ir").split("+")
    name = exe.split("/")[-1]
    c3, c1 = own_costs(f3, name, events), own_costs(f1, name, events)
    diff = {a: c3[a] - c1.get(a, 0) for a in c3}
    diff = {a: v for a, v in diff.items() if v > 0}
    frames = inline_frames(exe, sorted(diff))
    by_stmt, by_leaf = collections.Counter(), collections.Counter()
    for a, v in diff.items():
        fr = frames.get(a, [])
        stmt = next((short(loc) for _, loc in fr if anchor in loc), None)
        by_stmt[stmt or "fn " + (fr[-1][0][:70] if fr else "?")] += v
        leaf = next((short(loc) for _, loc in fr if loc.startswith(ROOT + "src/")), None)
        by_leaf[leaf or (short(fr[0][1]) if fr else "?")] += v
    what = "instructions" if events == ["Ir"] else "+".join(events)
    print("own %s per task, all statements: %.1f" % (what, sum(diff.values()) / tasks))
    print("-- by statement of %s (else outermost function)" % anchor)
    for k, v in by_stmt.most_common(40):
        print("%8.1f  %s" % (v / tasks, k))
    print("-- by innermost line in dagrt's sources")
    for k, v in by_leaf.most_common(30):
        print("%8.1f  %s" % (v / tasks, k))


main()
