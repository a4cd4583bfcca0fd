#!/usr/bin/env python3
"""Tag benchmark output lines for the pair and ladder scripts: one JSON object per input line,
with "pair" (the round) and "who" (the runtime and its variant).

Usage: ... | tag_lines.py PAIR WHO
  A JSON line (dagrt's workloads bench, benches/floor.rs) keeps its fields; WHO is a format
  string over them, e.g. 'dagrt-{lane_kind}' or 'floor-l{lanes}'.
  A peer line "peer workload N ns_per_task" (the peer harness) becomes {"who": peer,
  "workload", "ns_per_task_median"}; WHO is then ignored. Other lines are dropped.
"""
import json
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    pair, who = int(sys.argv[1]), sys.argv[2]
    for line in sys.stdin:
        line = line.strip()
        if line.startswith("{"):
            j = json.loads(line)
            j["pair"], j["who"] = pair, who.format(**j)
        else:
            f = line.split()
            if len(f) != 4:
                continue
            j = {"pair": pair, "who": f[0], "workload": f[1], "ns_per_task_median": float(f[3])}
        print(json.dumps(j))


if __name__ == "__main__":
    main()
