#!/usr/bin/env bash
# Tiled Cholesky, dagrt beside the peers' OpenMP and StarPU versions, measured two ways:
#   - GFLOP/s, as bench.sh reports it;
#   - parallel efficiency: time spent inside the tile kernels (benches/chol/kernel_timer.c,
#     LD_PRELOADed into every program) / (threads x wall time), and where the rest went
#     (scripts/chol_gaps.py over each run's log of kernel calls). On this shared machine kernel
#     speed drifts by +-30% from one second to the next, which GFLOP/s inherits and the
#     efficiency does not: it is the share of the workers' time the runtime kept them busy.
# Runs are interleaved (dagrt, OpenMP, StarPU, dagrt, ...); medians over ROUNDS.
#
# Usage: scripts/chol_efficiency.sh   (env: SIZES="2048:128 2048:256", ROUNDS=6, THREADS=2,
#                                      PEERS_DIR=/work/shared/bench/peers, OUT=...)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
SIZES=${SIZES:-"2048:128 2048:256"}
ROUNDS=${ROUNDS:-6}
T=${THREADS:-2}
PEERS_DIR=${PEERS_DIR:-/work/shared/bench/peers}
. "$root/scripts/chol_peers.sh"
out=${OUT:-$root/target/bench-results/chol-eff-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"

cargo build --release > "$out/build.log" 2>&1
cmake -S examples/cholesky -B build/cholesky -Ddagrt_DIR="$root/cmake" \
    -DCMAKE_BUILD_TYPE=Release >> "$out/build.log" 2>&1
cmake --build build/cholesky >> "$out/build.log" 2>&1
inc=$(dirname "$(find /usr/include -name cblas.h -path '*openblas*' | head -1)")
gcc -O2 -Wall -shared -fPIC -I"$inc" -o "$out/kernel_timer.so" benches/chol/kernel_timer.c -ldl
echo "== building the peers (one small run of $PEERS_DIR/cholesky/run.sh)" >&2
chol_peers_build "$T" "$out/build.log"

export OPENBLAS_NUM_THREADS=1
timer="$out/kernel_timer.so"
logs="$out/kernel-logs" # one per run: each kernel call's thread, start and end
mkdir -p "$logs"
: > "$out/runs.txt"
for r in $(seq 1 "$ROUNDS"); do
    for nb in $SIZES; do
        n=${nb%%:*} b=${nb##*:}
        {
            KERNEL_TIMER_LOG=$logs/dagrt-$n-$b-$r.log \
                LD_PRELOAD=$timer build/cholesky/dagrt_cholesky -n "$n" -b "$b" --lanes "$T" \
                --reps 1 --peer-lines --no-progress 2>&1 | grep -E '^dagrt-|^KERNELS' | tr '\n' ' '
            echo
            KERNEL_TIMER_LOG=$logs/omp-$n-$b-$r.log LD_PRELOAD=$timer chol_peer omp "$n" "$b" "$T" \
                2>&1 | grep -E '^omp-|^KERNELS' | tr '\n' ' '
            echo
            KERNEL_TIMER_LOG=$logs/starpu-$n-$b-$r.log \
                LD_PRELOAD=$timer chol_peer starpu "$n" "$b" "$T" \
                2>&1 | grep -E '^starpu-|^KERNELS' | tr '\n' ' '
            echo
        } >> "$out/runs.txt"
    done
done

python3 - "$out/runs.txt" "$T" <<'PY' | tee "$out/table.txt"
import collections, re, statistics, sys
threads = int(sys.argv[2])
eff = collections.defaultdict(list)
gf = collections.defaultdict(list)
for line in open(sys.argv[1]):
    run = re.search(r"(?:^|\s)(\S+) (\d+) (\d+) \d+ (\S+) (\S+) \S+", line)
    k = re.search(r"KERNELS \d+ total_ms (\S+)", line)
    if not (run and k):
        continue
    peer, n, b, secs, g = run.group(1), run.group(2), run.group(3), float(run.group(4)), float(run.group(5))
    eff[(n, b, peer)].append(float(k.group(1)) / 1e3 / (threads * secs))
    gf[(n, b, peer)].append(g)
print(f"tiled Cholesky, {threads} threads: kernel time / (threads x wall), and GFLOP/s (medians)")
for key in sorted(eff):
    e, g = eff[key], gf[key]
    print(f"n={key[0]} b={key[1]} {key[2]:<18} efficiency {statistics.median(e):.3f} "
          f"[{min(e):.3f}-{max(e):.3f}]  GFLOP/s {statistics.median(g):5.1f} "
          f"[{min(g):.1f}-{max(g):.1f}]  runs {len(e)}")
PY
# Where the threads' time outside kernels went (scripts/chol_gaps.py), per runtime and size.
for nb in $SIZES; do
    n=${nb%%:*} b=${nb##*:}
    for who in dagrt omp starpu; do
        echo "== $who n=$n b=$b: time outside kernels"
        python3 scripts/chol_gaps.py "$logs/$who-$n-$b-"*.log || true
    done
done | tee "$out/gaps.txt"
echo "results: $out" >&2
