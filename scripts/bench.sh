#!/usr/bin/env bash
# Run dagrt's workload bench (benches/workloads.rs) and the peer harness
# (/work/shared/bench/peers/run.sh) side by side, then print a comparison table.
#
# Usage: scripts/bench.sh [BENCH ARGS...]
#   BENCH ARGS go to `cargo bench --bench workloads --`, e.g. `--workloads W1 --lanes 2`.
#
# Env knobs:
#   ROUNDS=1        rounds; each runs dagrt and the peers once, alternating which goes first.
#                   The table takes, per figure, the median of the per-round medians.
#   PEERS=1         0 skips the peer harness (dagrt only).
#   PAIRS=10        then this many tight pairs (scripts/bench_pairs.sh): dagrt on 2 lanes and the
#                   TBB and OpenMP peers on 2 threads back to back, seconds apart, and per
#                   workload the median of the per-pair ratios, which the host's slow and fast
#                   phases move far less than a round's (0 skips them; needs PEERS=1).
#   PY=0            passed to run.sh (1 adds the Python peers; they need `pip install dask`).
#   FLOOR=1         passed to bench_pairs.sh (0: the pairs leave out benches/floor.rs).
#   PEERS_DIR       peer harness directory (default /work/shared/bench/peers).
#   PEERS_BUILD     where run.sh builds the peers (default target/peers-build).
#   OUT             results directory (default target/bench-results/<timestamp>).
#   CHOL=1          0 skips the tiled Cholesky comparison: examples/cholesky beside the peers'
#                   OpenMP and StarPU versions and whole-matrix LAPACK (shared/bench/peers/cholesky,
#                   built once by its run.sh, then run by scripts/chol_peers.sh), same input,
#                   kernels and timing, at CHOL_SIZES (default "2048:128 2048:256 4096:256",
#                   the sizes the peers' README reports), 2 threads,
#                   CHOL_REPS (default 3) reps each, one of each in turn (dagrt first in
#                   odd rounds, last in even ones); a median GFLOP/s table is printed, with
#                   each size's median of per-round ratios (a dagrt rep over the best peer
#                   rep of its round, seconds apart). A rep that fails (its check, or exits
#                   nonzero) is reported on stderr and left out of the medians, which the
#                   table lists;
#                   the other reps still run, and a failed dagrt rep makes the exit status 1.
#   CHOL_BUILD      where the peers' Cholesky programs are built (chol_peers.sh; default
#                   $TMPDIR/dagrt-peers-cholesky).
#
# Results directory: env.txt (machine, load, commit, every setting above), build.log, workloads-bench (the exact
# bench executable every round ran), dagrt.rN.jsonl (one JSON
# object per measurement) and dagrt.rN.log, peers.rN.txt and peers.rN.log (raw run.sh
# output), table.txt (what is printed) and summary.json (machine-readable summary), pairs.jsonl
# and pairs.txt (the tight pairs), host.txt (scripts/host_probe.c's ms before and after each
# part: the host's phase, which bench_compare.py reports per round), chol.txt (one line per
# Cholesky rep; a failed rep as "# FAILED ...", left out of the medians), chol.log (their
# stderr) and chol_table.txt (bench_compare.py --chol: the table and the dropped reps).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# Every setting read from the environment, here with its default, and recorded in env.txt (a
# result is read against what produced it); FLOOR is bench_pairs.sh's, CHOL_BUILD
# chol_peers.sh's (CHOL_B, its default under TMPDIR).
ROUNDS=${ROUNDS:-1}
PEERS=${PEERS:-1}
PEERS_DIR=${PEERS_DIR:-/work/shared/bench/peers}
PEERS_BUILD=${PEERS_BUILD:-$root/target/peers-build}
PAIRS=${PAIRS:-10}
FLOOR=${FLOOR:-1}
PY=${PY:-0}
OUT=${OUT:-$root/target/bench-results/$(date +%Y%m%d-%H%M%S)}
CHOL=${CHOL:-1}
CHOL_SIZES=${CHOL_SIZES:-"2048:128 2048:256 4096:256"}
CHOL_REPS=${CHOL_REPS:-3}
. "$root/scripts/chol_peers.sh"
CHOL_BUILD=$CHOL_B
settings="ROUNDS PEERS PEERS_DIR PEERS_BUILD PAIRS FLOOR PY OUT CHOL CHOL_SIZES CHOL_REPS CHOL_BUILD"
out=$OUT
mkdir -p "$out"

{
    echo "date: $(date -Is)"
    echo "host: $(uname -a)"
    echo "cpus: $(nproc)"
    echo "load: $(cat /proc/loadavg)"
    echo "commit: $(git rev-parse HEAD 2>/dev/null || echo none)"
    echo "dirty files:"; git status --short 2>/dev/null || true
    echo "rustc: $(rustc -V)"
    echo "bench args: $*"
    echo "settings:"
    for k in $settings; do echo "  $k=${!k}"; done
} > "$out/env.txt"

# What the Cholesky part builds with, installed now rather than found missing at the end.
if [ "$CHOL" = 1 ]; then
    . "$root/scripts/need_commands.sh"
    # One apt-get update and install for both kinds (package names: one word each).
    # shellcheck disable=SC2046
    apt_install $(missing_for_commands cmake:cmake pkg-config:pkg-config cc:gcc) \
        $(missing_packages libopenblas-dev liblapacke-dev) >&2
fi

# Build once and run that executable directly in every round: `cargo bench` per round would
# rebuild (and mix engine versions) if src/ changed while the rounds run.
echo "== building dagrt bench (log: $out/build.log)" >&2
exe=$("$root/scripts/build_bench.sh" "$out/build.log")
cp "$exe" "$out/workloads-bench"
# The Cholesky example links target/release/libdagrt.so, which `cargo bench` does not build:
# built now, from the same tree as the bench, rather than whatever an earlier build left.
if [ "$CHOL" = 1 ]; then
    cargo build --release >> "$out/build.log" 2>&1
fi
{
    echo "bench executable: $exe (copied to workloads-bench)"
    d=$(git diff HEAD -- src Cargo.toml 2>/dev/null || true)
    if [ -z "$d" ]; then echo "src vs HEAD: clean"; else echo "src vs HEAD: dirty, diff sha256 $(printf '%s' "$d" | sha256sum | cut -c1-16)"; fi
} >> "$out/env.txt"

# The host's speed before and after each part ("<part> <before|after> <ms>" lines).
cc -O2 -o "$out/host_probe" "$root/scripts/host_probe.c"
probe() { echo "$1 $2 $("$out/host_probe")" >> "$out/host.txt"; }
# Print part $1's probes, as "$2".
show_probe() {
    echo "host probe around $2: $(grep "^$1 " "$out/host.txt" | awk '{printf "%s %s ms  ", $2, $3}')"
}

run_dagrt() {
    echo "== round $1: dagrt bench ${*:2}" >&2
    probe "r$1.dagrt" before
    "$out/workloads-bench" "${@:2}" > "$out/dagrt.r$1.jsonl" 2> "$out/dagrt.r$1.log" || {
        tail -20 "$out/dagrt.r$1.log" >&2
        exit 1
    }
    probe "r$1.dagrt" after
}

run_peers() {
    [ "$PEERS" = 1 ] || return 0
    echo "== round $1: peers ($PEERS_DIR/run.sh, PY=$PY)" >&2
    probe "r$1.peers" before
    PY=$PY PEERS_BUILD=$PEERS_BUILD \
        "$PEERS_DIR/run.sh" > "$out/peers.r$1.txt" 2> "$out/peers.r$1.log" || {
        tail -20 "$out/peers.r$1.log" >&2
        exit 1
    }
    probe "r$1.peers" after
}

for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then
        run_dagrt "$r" "$@"
        run_peers "$r"
    else
        run_peers "$r"
        run_dagrt "$r" "$@"
    fi
    echo "load after round $r: $(cat /proc/loadavg)" >> "$out/env.txt"
done

python3 "$root/scripts/bench_compare.py" "$out" | tee "$out/table.txt"

if [ "$PEERS" = 1 ] && [ "$PAIRS" -gt 0 ]; then
    echo "== $PAIRS tight pairs (log: $out/pairs.log)" >&2
    probe pairs before
    PAIRS=$PAIRS FLOOR=$FLOOR PEERS_DIR=$PEERS_DIR PEERS_BUILD=$PEERS_BUILD \
        "$root/scripts/bench_pairs.sh" "$out" "$out/workloads-bench" 2> "$out/pairs.log"
    probe pairs after
    show_probe pairs "the pairs"
fi

if [ "$CHOL" = 1 ]; then
    echo "== tiled Cholesky: dagrt example and peers (sizes $CHOL_SIZES)" >&2
    cmake -S examples/cholesky -B build/cholesky -Ddagrt_DIR="$root/cmake" \
        -DCMAKE_BUILD_TYPE=Release > "$out/chol_build.log" 2>&1
    cmake --build build/cholesky >> "$out/chol_build.log" 2>&1
    chol_peers_build 2 "$out/chol_build.log"
    : > "$out/chol.txt"
    chol_dagrt_failed=0
    probe chol before
    # One rep of each at a time, dagrt and the peers (and whole-matrix LAPACK, once per n):
    # the machine drifts by tens of percent within minutes, and a block of dagrt reps followed
    # by a block of peer reps compares two different machines.
    chol_dagrt() { # one dagrt rep at size $1:$2
        # A failed dagrt rep does not stop the script: it is reported now, the other sizes
        # and reps still run, and the script exits 1 at the end.
        chol_rep "$out/chol.txt" "$out/chol.log" dagrt "$1" "$2" \
            env OPENBLAS_NUM_THREADS=1 build/cholesky/dagrt_cholesky -n "$1" -b "$2" \
            --lanes 2 --reps 1 --peer-lines --no-progress ||
            chol_dagrt_failed=$((chol_dagrt_failed + 1))
    }
    for r in $(seq "$CHOL_REPS"); do
        # Pairs each dagrt rep with its round's peer reps (bench_compare.py --chol).
        echo "# round $r" >> "$out/chol.txt"
        lapack_done=" "
        for nb in $CHOL_SIZES; do
            n=${nb%%:*} b=${nb##*:}
            # dagrt first in odd rounds, after the peers in even ones: the host drifts within
            # a round too, and a fixed order would give one side its later phase every time.
            if [ $((r % 2)) = 1 ]; then chol_dagrt "$n" "$b"; fi
            peers="omp starpu"
            case $lapack_done in *" $n "*) ;; *) peers="$peers lapack" lapack_done="$lapack_done$n " ;; esac
            for peer in $peers; do
                chol_rep "$out/chol.txt" "$out/chol.log" "$peer" "$n" "$b" \
                    chol_peer "$peer" "$n" "$b" 2 || true
            done
            if [ $((r % 2)) = 0 ]; then chol_dagrt "$n" "$b"; fi
        done
    done
    probe chol after
    show_probe chol "the Cholesky reps"
    python3 "$root/scripts/bench_compare.py" --chol "$out/chol.txt" | tee "$out/chol_table.txt"
fi
echo "results: $out" >&2
if [ "${chol_dagrt_failed:-0}" -gt 0 ]; then
    echo "bench.sh: $chol_dagrt_failed dagrt Cholesky reps failed (see above and $out/chol.log)" >&2
    exit 1
fi
