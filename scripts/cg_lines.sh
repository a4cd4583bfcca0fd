#!/usr/bin/env bash
# Where a workload's instructions go, by source statement: callgrind (instruction counts do
# not drift, unlike this machine's wall clock) over the workloads bench on 1 SUB lane, 3 timed
# reps minus 1, attributed through inlining by scripts/cg_lines.py.
#
# Usage: scripts/cg_lines.sh WORKLOAD [THREAD] [BENCH ARGS...]
#   WORKLOAD: w1..w4; THREAD: 1 = the submitting thread (default), 2 = the lane, 3 = the
#   scheduler thread;
#   BENCH ARGS: e.g. --n 20000 (default; W4: --layers 300).
# CG_ANCHOR: the source file whose statements name the costs (default the submit's,
# src/orchestrator/submit.rs; for the lane e.g. src/lane/thread.rs).
# CG_EVENTS: what to count, callgrind event names joined by '+' (default Ir). Any other
# turns on the cache simulation, its last level sized by CG_LL (default 2097152,16,64: this
# machine's per-core L2), e.g. CG_EVENTS=DLmr+DLmw for the data misses of that level.
# CG_EXE: a saved copy of the bench executable to profile instead of the current build's
# (an A/B; addr2line then reads that copy's debug info).
# Needs valgrind and binutils (addr2line). Output files stay in $CG_DIR (default a temp dir).
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,17p "$0" >&2; exit 2; }
w=$1
shift
thread=1
if [ $# -ge 1 ] && [[ $1 =~ ^[0-9]+$ ]]; then
    thread=$1
    shift
fi
cd "$(dirname "$0")/.."
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
    if [ "$w" = w4 ]; then args=(--layers 300); else args=(--n 20000); fi
fi
exe=${CG_EXE:-$(cargo bench --bench workloads --no-run --message-format=json 2>/dev/null |
    python3 -c 'import sys, json
for l in sys.stdin:
    j = json.loads(l)
    if j.get("executable") and j["target"]["name"] == "workloads": print(j["executable"])')}
dir=${CG_DIR:-$(mktemp -d)}
mkdir -p "$dir"
rm -f "$dir"/cg.[13].*
events=${CG_EVENTS:-Ir}
sim=()
[ "$events" = Ir ] || sim=(--cache-sim=yes --LL="${CG_LL:-2097152,16,64}")
for r in 1 3; do
    valgrind --tool=callgrind --dump-instr=yes --separate-threads=yes "${sim[@]}" \
        --callgrind-out-file="$dir/cg.$r.%p" "$exe" --workloads "$w" --lanes 1 --kinds sub \
        --reps $r "${args[@]}" >"$dir/out.$r" 2>"$dir/log.$r"
done
# Tasks of one rep, from the bench's JSON line.
tasks=$(python3 -c 'import sys, json; print(json.loads(open(sys.argv[1]).readline())["tasks"])' \
    "$dir/out.1")
f3=$(ls "$dir"/cg.3.*-0"$thread")
f1=$(ls "$dir"/cg.1.*-0"$thread")
python3 scripts/cg_lines.py "$exe" "$f3" "$f1" $((2 * tasks)) "${CG_ANCHOR:-}" "$events"
echo "(callgrind files in $dir)"
