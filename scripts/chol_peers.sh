# Sourced by bench.sh and chol_efficiency.sh: the peers' tiled Cholesky programs
# ($PEERS_DIR/cholesky), built once per invocation of the calling script (by one small run of
# the peers' run.sh, which compiles them and installs what they need), then run one program
# at a time, so that the reps interleave with dagrt's and no compiler runs between them.
# Needs PEERS_DIR; builds into CHOL_BUILD (default $TMPDIR/dagrt-peers-cholesky).

CHOL_B=${CHOL_BUILD:-${TMPDIR:-/tmp}/dagrt-peers-cholesky}

chol_peers_build() { # <threads> <log file>
    REPS=1 SIZES="256:64" THREADS="$1" EX=0 CHOL_BUILD="$CHOL_B" \
        "$PEERS_DIR/cholesky/run.sh" >> "$2" 2>&1
}

# One run of a peer: a tiled one (omp, starpu; OpenBLAS single-threaded inside tasks) or the
# whole-matrix limit (lapack), in the environment run.sh sets. It prints
# "peer n b tasks seconds gflops residual".
chol_peer() { # <omp|starpu|lapack> <n> <b> <threads>
    case $1 in
    omp) # bound to cores, as dagrt's lanes and StarPU's workers are
        OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=$4 OMP_PROC_BIND=true OMP_PLACES=cores \
            "$CHOL_B/omp_cholesky" tiled "omp-tiled-t$4" "$2" "$3" ;;
    starpu)
        OPENBLAS_NUM_THREADS=1 STARPU_NCPU=$4 STARPU_NCUDA=0 STARPU_NOPENCL=0 \
            STARPU_SILENT=1 STARPU_CALIBRATE=0 STARPU_FXT_TRACE=0 STARPU_PROFILING=0 \
            STARPU_HOME="$CHOL_B/starpu_home" \
            "$CHOL_B/starpu_cholesky" "starpu-tiled-t$4" "$2" "$3" ;;
    lapack) # the limit: one LAPACKE_dpotrf on the whole matrix, OpenBLAS on all threads
        OPENBLAS_NUM_THREADS=$4 "$CHOL_B/omp_cholesky" potrf "lapack-dpotrf-t$4" "$2" ;;
    *) echo "chol_peer: unknown peer $1" >&2; return 1 ;;
    esac
}

# One Cholesky rep of any runtime (dagrt's example with --peer-lines, or chol_peer): its result
# line "label n b tasks seconds gflops residual" goes to RESULTS, its stderr to LOG. The programs
# print that line before they check the residual and exit 2 on a failed check, so a line alone
# does not make a valid rep: one that exits nonzero or prints no line goes in as
# "# FAILED who n b exit rc[: its line]" (bench_compare.py --chol lists it as dropped) and is
# reported on stderr with its stderr's last lines, as nothing else would show it. Returns 1 then.
chol_rep() { # <results file> <log file> <who> <n> <b> <command...>
    local res=$1 log=$2 who=$3 n=$4 b=$5 rc=0 line
    shift 5
    "$@" > "$res.rep.out" 2> "$res.rep.err" || rc=$?
    cat "$res.rep.err" >> "$log"
    line=$(grep -m1 -E '^[a-z0-9-]+ [0-9]+ [0-9-]+ [0-9]+ [0-9.]+ [0-9.]+ ' "$res.rep.out" || true)
    if [ "$rc" = 0 ] && [ -n "$line" ]; then
        echo "$line" >> "$res"
    else
        echo "== Cholesky rep of $who at n=$n b=$b failed: exit $rc, ${line:-no result line}" \
            "(dropped from the table; full log $log); its stderr ends:" >&2
        tail -5 "$res.rep.err" | sed 's/^/   /' >&2
        echo "# FAILED $who $n $b exit $rc${line:+: $line}" >> "$res"
        rc=1
    fi
    rm -f "$res.rep.out" "$res.rep.err"
    return "$rc"
}
