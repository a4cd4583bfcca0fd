/* dagrt showcase: tiled Cholesky factorization A = L L^T of an SPD matrix.
 *
 * The algorithm, input, check and timing are exactly those of the OpenMP and StarPU peers
 * (shared/bench/peers/cholesky): right-looking, lower, over b x b tiles of ONE column-major
 * n x n double array with leading dimension n. Each tile is a strided dagrt view into that
 * array (never copied); every task tags the tile it writes INOUT and the tiles it reads INPUT,
 * and dagrt infers the whole DAG from those tags (no explicit dependencies):
 *
 *     for k in 0..N-1:
 *         POTRF  A[k][k]                                       LAPACKE_dpotrf
 *         for m > k:  TRSM  A[k][k] (in) -> A[m][k] (inout)     cblas_dtrsm
 *         for m > k:  SYRK  A[m][k] (in) -> A[m][m] (inout)     cblas_dsyrk
 *                     for k < j < m:
 *                         GEMM A[m][k], A[j][k] (in) -> A[m][j] (inout)   cblas_dgemm
 *
 * OpenBLAS runs single-threaded inside each task. Timed section: from the first submit to
 * the completion of the last task (dagrt_worker_submit builds the graph; the main thread then
 * waits in dagrt_wait_run_for, drawing a progress bar on stderr when it is a terminal).
 * GFLOP/s = n^3/3 / seconds / 1e9. Exit status 2 when ||A - L L^T||_F / ||A||_F >= 1e-12 or a
 * task fails, 1 on a usage or setup error.
 *
 *   dagrt_cholesky [-n N] [-b B] [--lanes L] [--lane-kind sub|next-level] [--reps R]
 *                  [--no-pin] [--trace FILE] [--dot FILE] [--align BYTES] [--peer-lines]
 *                  [--no-progress] [--break-input]      (--help describes each option)
 */
#define _GNU_SOURCE 1 /* sched_getaffinity, CPU_ISSET */
#include <dagrt.h>
#include <lapacke.h>

#include "chol_input.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_N 2048
#define DEFAULT_B 256
#define DEFAULT_LANES 2
/* 0: plain malloc, as the peers allocate their matrix (16 bytes past a 64-byte line here) */
#define DEFAULT_ALIGN 0
#define CHECK_LIMIT 1e-12

enum lane_kind { LANES_SUB, LANES_NEXT_LEVEL };
static const char *const LANE_KIND_NAME[] = {"sub", "next-level"};

/* Tasks finished so far in the current run, bumped by the executors on the lane threads and
 * read by the main thread for the progress bar. */
static atomic_long g_tasks_done;

/* The progress bar (on when stderr is a terminal): tasks submitted so far by the build
 * callback (main thread only) and the start of the timed section. */
static int g_tty;
static long g_submitted, g_total;
static double g_t0;
static void draw_progress(long done, long total, double elapsed);

/* ---------------------------------------------------------------------------------------
 * Executors: each receives its tiles as strided views (data + offset, shape {b, b},
 * element strides {1, ld}) and calls one single-threaded OpenBLAS kernel on them.
 * ------------------------------------------------------------------------------------- */

static inline double *tile_ptr(const dagrt_tensor *t)
{
    return (double *)((char *)t->data + t->offset);
}
static inline int tile_ld(const dagrt_tensor *t) { return (int)t->strides[1]; }
static inline int tile_b(const dagrt_tensor *t) { return (int)t->shape[0]; }

static int32_t exec_potrf(const dagrt_task_view *v, void *user)
{
    (void)user;
    const dagrt_tensor *akk = &v->tensors[0];
    int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', tile_b(akk), tile_ptr(akk), tile_ld(akk));
    atomic_fetch_add_explicit(&g_tasks_done, 1, memory_order_relaxed);
    if (info != 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "LAPACKE_dpotrf info=%d (the tile is not positive definite)",
                 info);
        dagrt_task_fail(v, msg);
        return 1;
    }
    return 0;
}

static int32_t exec_trsm(const dagrt_task_view *v, void *user)
{
    (void)user;
    const dagrt_tensor *akk = &v->tensors[0], *amk = &v->tensors[1];
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, tile_b(amk),
                tile_b(amk), 1.0, tile_ptr(akk), tile_ld(akk), tile_ptr(amk), tile_ld(amk));
    atomic_fetch_add_explicit(&g_tasks_done, 1, memory_order_relaxed);
    return 0;
}

static int32_t exec_syrk(const dagrt_task_view *v, void *user)
{
    (void)user;
    const dagrt_tensor *amk = &v->tensors[0], *amm = &v->tensors[1];
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, tile_b(amm), tile_b(amm), -1.0,
                tile_ptr(amk), tile_ld(amk), 1.0, tile_ptr(amm), tile_ld(amm));
    atomic_fetch_add_explicit(&g_tasks_done, 1, memory_order_relaxed);
    return 0;
}

static int32_t exec_gemm(const dagrt_task_view *v, void *user)
{
    (void)user;
    const dagrt_tensor *amk = &v->tensors[0], *ajk = &v->tensors[1], *amj = &v->tensors[2];
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, tile_b(amj), tile_b(amj), tile_b(amj),
                -1.0, tile_ptr(amk), tile_ld(amk), tile_ptr(ajk), tile_ld(ajk), 1.0,
                tile_ptr(amj), tile_ld(amj));
    atomic_fetch_add_explicit(&g_tasks_done, 1, memory_order_relaxed);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Graph construction (the orchestration callback, run on the main thread).
 * ------------------------------------------------------------------------------------- */

struct chol {
    double *A;
    int n, b, N;
    enum lane_kind kind;
    int lanes;
    int P, Q; /* next-level: 2D block-cyclic P x Q grid of lane ids, P * Q = lanes */
    dagrt_callable potrf, trsm, syrk, gemm;
};

/* The b x b tile (i, j) of A as a strided view: offset (j*b*n + i*b) doubles, shape {b, b},
 * element strides {1, n} (column-major, leading dimension n). */
static void tile(const struct chol *c, dagrt_tensor *t, int i, int j, uint32_t tag)
{
    const uint64_t shape[2] = {(uint64_t)c->b, (uint64_t)c->b};
    const uint64_t strides[2] = {1, (uint64_t)c->n};
    uint64_t offset = ((uint64_t)j * c->b * c->n + (uint64_t)i * c->b) * sizeof(double);
    dagrt_tensor_init_strided(t, c->A, offset, DAGRT_DTYPE_F64, 2, shape, strides, tag);
}

/* next-level: the lane that owns tile (i, j), i.e. runs every task writing it. */
static int owner(const struct chol *c, int i, int j)
{
    return (i % c->P) * c->Q + (j % c->Q);
}

/* Submit one task whose last tensor is the written tile (i, j). */
static int submit(const struct chol *c, dagrt_orch_t *o, const dagrt_callable *k, dagrt_tensor *t,
                  uint32_t nt, int i, int j)
{
    dagrt_task_args args = {.tensors = t, .num_tensors = nt};
    dagrt_status s = c->kind == LANES_SUB
                         ? dagrt_submit_sub(o, k, &args, NULL)
                         : dagrt_submit_next_level(o, k, &args, NULL, owner(c, i, j), NULL);
    if (s != DAGRT_STATUS_OK) {
        fprintf(stderr, "dagrt_cholesky: submit failed: %s\n", dagrt_last_error());
        return 1;
    }
    /* Big graphs take a while to build: the bar counts submits too (every 4096th, so the
     * check stays off the measured per-task cost). */
    if (g_tty && (++g_submitted & 4095) == 0)
        draw_progress(atomic_load_explicit(&g_tasks_done, memory_order_relaxed), g_total,
                      chol_now() - g_t0);
    return 0;
}

static int32_t build(dagrt_orch_t *o, void *ctx)
{
    const struct chol *c = ctx;
    dagrt_tensor t[3];
    for (int k = 0; k < c->N; k++) {
        tile(c, &t[0], k, k, DAGRT_TAG_INOUT);
        if (submit(c, o, &c->potrf, t, 1, k, k)) return 1;
        for (int m = k + 1; m < c->N; m++) {
            tile(c, &t[0], k, k, DAGRT_TAG_INPUT);
            tile(c, &t[1], m, k, DAGRT_TAG_INOUT);
            if (submit(c, o, &c->trsm, t, 2, m, k)) return 1;
        }
        for (int m = k + 1; m < c->N; m++) {
            tile(c, &t[0], m, k, DAGRT_TAG_INPUT);
            tile(c, &t[1], m, m, DAGRT_TAG_INOUT);
            if (submit(c, o, &c->syrk, t, 2, m, m)) return 1;
            for (int j = k + 1; j < m; j++) {
                tile(c, &t[0], m, k, DAGRT_TAG_INPUT);
                tile(c, &t[1], j, k, DAGRT_TAG_INPUT);
                tile(c, &t[2], m, j, DAGRT_TAG_INOUT);
                if (submit(c, o, &c->gemm, t, 3, m, j)) return 1;
            }
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Command line.
 * ------------------------------------------------------------------------------------- */

struct options {
    int n, b, lanes, reps;
    enum lane_kind kind;
    const char *trace, *dot;
    int peer_lines, progress, break_input, pin;
    long align;
};

static void usage(FILE *f, const char *argv0)
{
    fprintf(f,
            "usage: %s [options]\n"
            "Tiled Cholesky (lower, double) of the peers' SPD matrix S + n*I with dagrt.\n"
            "  -n N                 matrix order (default %d)\n"
            "  -b B                 tile size, must divide N (default %d)\n"
            "  --lanes L            worker lanes (default %d)\n"
            "  --lane-kind KIND     sub (default): freely scheduled SUB lanes;\n"
            "                       next-level: each tile's owner lane runs its writers\n"
            "                       (2D block-cyclic over a P x Q grid of lane ids, P*Q = L)\n"
            "  --reps R             factor R times, print each rep and the median (default 1)\n"
            "  --no-pin             leave the lane threads unpinned (by default lane i runs on\n"
            "                       the i-th CPU this process may use, dagrt_worker_set_lane_cpus:\n"
            "                       kernels keep their tiles in one core's caches)\n"
            "  --trace FILE         Chrome trace JSON of the last rep (dagrt_worker_trace_start)\n"
            "  --dot FILE           Graphviz DOT of the last rep's DAG (dagrt_worker_write_dot;\n"
            "                       a file other than --trace's)\n"
            "  --align BYTES        align the matrix to BYTES (a power of two >= 16) with\n"
            "                       posix_memalign; 0 (default): malloc, as the peers do\n"
            "                       (default %d; malloc gives 16)\n"
            "  --peer-lines         also print one line per rep in the peers' format\n"
            "                       \"peer n b tasks seconds gflops residual\"\n"
            "  --no-progress        no progress bar (it is drawn only when stderr is a terminal)\n"
            "  --break-input        make the input indefinite (a negative diagonal entry in tile\n"
            "                       N/2): that POTRF fails and poisons its dependents, exit 2\n"
            "Exit status: 0 ok, 1 usage or setup error, 2 the check failed.\n",
            argv0, DEFAULT_N, DEFAULT_B, DEFAULT_LANES, DEFAULT_ALIGN);
}

/* The largest value an integer option takes: the options are ints. */
#define ARG_MAX_INT 1000000000L

static int parse_int(const char *opt, const char *s, int min, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || *s == '\0' || *end != '\0' || errno || v < min || v > ARG_MAX_INT) {
        fprintf(stderr, "dagrt_cholesky: %s needs an integer from %d to %ld (got '%s')\n", opt,
                min, ARG_MAX_INT, s ? s : "");
        return 1;
    }
    *out = (int)v;
    return 0;
}

static int parse_args(int argc, char **argv, struct options *o)
{
    *o = (struct options){.n = DEFAULT_N, .b = DEFAULT_B, .lanes = DEFAULT_LANES, .reps = 1,
                          .kind = LANES_SUB, .progress = 1, .align = DEFAULT_ALIGN,
                          .pin = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout, argv[0]);
            exit(0);
        } else if (!strcmp(a, "-n")) {
            if (parse_int(a, val, 1, &o->n)) return 1;
            i++;
        } else if (!strcmp(a, "-b")) {
            if (parse_int(a, val, 1, &o->b)) return 1;
            i++;
        } else if (!strcmp(a, "--lanes")) {
            if (parse_int(a, val, 1, &o->lanes)) return 1;
            i++;
        } else if (!strcmp(a, "--reps")) {
            if (parse_int(a, val, 1, &o->reps)) return 1;
            i++;
        } else if (!strcmp(a, "--lane-kind")) {
            if (!val || val[0] == '-') {
                fprintf(stderr, "dagrt_cholesky: --lane-kind needs sub or next-level\n");
                return 1;
            }
            if (!strcmp(val, "sub")) {
                o->kind = LANES_SUB;
            } else if (!strcmp(val, "next-level") || !strcmp(val, "next_level")) {
                o->kind = LANES_NEXT_LEVEL;
            } else if (!strcmp(val, "processes") || !strcmp(val, "process")) {
                fprintf(stderr,
                        "dagrt_cholesky: --lane-kind processes is not available yet: dagrt has "
                        "no process lanes in this version (use sub or next-level)\n");
                return 1;
            } else {
                fprintf(stderr,
                        "dagrt_cholesky: unknown lane kind '%s' (use sub or next-level)\n", val);
                return 1;
            }
            i++;
        } else if (!strcmp(a, "--trace") || !strcmp(a, "--dot")) {
            if (!val || !*val) {
                fprintf(stderr, "dagrt_cholesky: %s needs a file name\n", a);
                return 1;
            }
            if (val[0] == '-') {
                fprintf(stderr,
                        "dagrt_cholesky: %s needs a file name (got '%s'; write ./-name for a "
                        "file named so)\n", a, val);
                return 1;
            }
            if (!strcmp(a, "--trace"))
                o->trace = val;
            else
                o->dot = val;
            i++;
        } else if (!strcmp(a, "--align")) {
            int v = 0;
            if (parse_int(a, val, 0, &v)) return 1;
            if ((v != 0 && v < 16) || (v & (v - 1))) {
                fprintf(stderr, "dagrt_cholesky: --align needs 0 or a power of two >= 16 (got %d)\n",
                        v);
                return 1;
            }
            o->align = v;
            i++;
        } else if (!strcmp(a, "--peer-lines")) {
            o->peer_lines = 1;
        } else if (!strcmp(a, "--no-pin")) {
            o->pin = 0;
        } else if (!strcmp(a, "--no-progress")) {
            o->progress = 0;
        } else if (!strcmp(a, "--break-input")) {
            o->break_input = 1;
        } else {
            fprintf(stderr, "dagrt_cholesky: unknown argument '%s'\n", a);
            usage(stderr, argv[0]);
            return 1;
        }
    }
    if (o->n % o->b != 0) {
        fprintf(stderr, "dagrt_cholesky: n (%d) must be a multiple of b (%d)\n", o->n, o->b);
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Main.
 * ------------------------------------------------------------------------------------- */

static void draw_progress(long done, long total, double elapsed)
{
    enum { WIDTH = 40 };
    static const char bar[WIDTH + 1] = "########################################";
    int fill = total > 0 ? (int)(done * WIDTH / total) : WIDTH;
    if (fill > WIDTH) fill = WIDTH;
    fprintf(stderr, "\r\033[K  [%.*s%*s] %ld/%ld tasks", fill, bar, WIDTH - fill, "", done,
            total);
    if (g_submitted < total) fprintf(stderr, " (%ld submitted)", g_submitted);
    fprintf(stderr, "  %.3f s", elapsed);
    fflush(stderr);
}

/* A file name given for output must be writable before the runs it is to record: checked
 * by opening it for append. *created says whether that made the file, which the caller
 * removes again once done with it. */
static int check_writable(const char *opt, const char *path, int *created)
{
    struct stat l, t;
    /* A dangling symbolic link: the file would be created at its target, which the probe's
     * clean-up (unlink) cannot reach without removing the link itself. Left unprobed: the
     * trace or DOT writer reports a failure when it writes. */
    if (lstat(path, &l) == 0 && S_ISLNK(l.st_mode) && stat(path, &t) != 0) {
        *created = 0;
        return 0;
    }
    *created = access(path, F_OK) != 0;
    FILE *f = fopen(path, "a");
    if (!f) {
        fprintf(stderr, "dagrt_cholesky: %s %s: %s\n", opt, path, strerror(errno));
        *created = 0;
        return 1;
    }
    fclose(f);
    return 0;
}

/* The trace and the DOT graph are written one after the other at the end of the last rep:
 * into one file, the second would leave only the first. Checked while both files exist (a
 * missing one made by check_writable), so that any two names of one file (x and ./x, a link,
 * a hard link) are caught by device and inode, not only the same spelling. */
static int check_distinct(const char *trace, const char *dot)
{
    struct stat a, b;
    int same = !strcmp(trace, dot) || (stat(trace, &a) == 0 && stat(dot, &b) == 0 &&
                                       a.st_dev == b.st_dev && a.st_ino == b.st_ino);
    if (same) {
        fprintf(stderr,
                "dagrt_cholesky: --trace %s and --dot %s name the same file: give two files\n",
                trace, dot);
        return 1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int fail_setup(const char *what)
{
    fprintf(stderr, "dagrt_cholesky: %s: %s\n", what, dagrt_last_error());
    return 1;
}

/* A setup error once the worker exists: report it, then free the worker. */
static int fail_worker(dagrt_worker_t *w, const char *what)
{
    int rc = fail_setup(what);
    dagrt_worker_free(w);
    return rc;
}

int main(int argc, char **argv)
{
    /* One OpenBLAS thread per task. OpenBLAS reads OPENBLAS_NUM_THREADS when it is loaded and
     * then starts its own thread pool, so set it and re-execute once if it is not already 1;
     * openblas_set_num_threads(1) below covers the case where the re-exec is not possible. */
    const char *obt = getenv("OPENBLAS_NUM_THREADS");
    if (!obt || strcmp(obt, "1") != 0) {
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
        execv("/proc/self/exe", argv);
    }
    openblas_set_num_threads(1);

    struct options opt;
    if (parse_args(argc, argv, &opt)) return 1;
    const int n = opt.n, b = opt.b, N = n / b;
    const long tasks = chol_task_count(N);
    int made_trace = 0, made_dot = 0;
    int bad = (opt.trace && check_writable("--trace", opt.trace, &made_trace)) ||
              (opt.dot && check_writable("--dot", opt.dot, &made_dot)) ||
              (opt.trace && opt.dot && check_distinct(opt.trace, opt.dot));
    if (made_trace) unlink(opt.trace);
    if (made_dot) unlink(opt.dot);
    if (bad) return 1;
    if ((opt.trace || opt.dot) && getenv("DAGRT_TRACE")) {
        /* DAGRT_TRACE would start a recording at init, and ours could not start beside it. */
        fprintf(stderr, "dagrt_cholesky: --trace/--dot given: ignoring DAGRT_TRACE=%s\n",
                getenv("DAGRT_TRACE"));
        unsetenv("DAGRT_TRACE");
    }

    struct chol c = {.n = n, .b = b, .N = N, .kind = opt.kind, .lanes = opt.lanes};
    c.P = 1;
    for (int p = 1; p * p <= opt.lanes; p++)
        if (opt.lanes % p == 0) c.P = p;
    c.Q = opt.lanes / c.P;

    /* Matrix: A0 keeps the input for the check, A is factored in place by each rep. */
    size_t bytes = (size_t)n * n * sizeof(double);
    double *A0 = NULL, *A = NULL;
    if (opt.align == 0)
        A = malloc(bytes);
    else if (posix_memalign((void **)&A, (size_t)opt.align, bytes))
        A = NULL;
    if (posix_memalign((void **)&A0, 64, bytes) || A == NULL) {
        fprintf(stderr, "dagrt_cholesky: out of memory (2 x %zu bytes)\n", bytes);
        return 1;
    }
    chol_gen_spd(A0, n);
    if (opt.break_input) { /* the POTRF of diagonal tile N/2 fails, and everything after it */
        size_t r = (size_t)(N / 2) * b;
        A0[r * n + r] = -1.0;
    }
    c.A = A;

    /* Runtime start-up (not timed, like the peers' team start and StarPU init). */
    dagrt_worker_t *w = NULL;
    if (dagrt_worker_new(NULL, &w)) return fail_setup("dagrt_worker_new");
    if (opt.kind == LANES_SUB) {
        if (dagrt_worker_add_sub_lanes(w, (uint32_t)opt.lanes))
            return fail_worker(w, "dagrt_worker_add_sub_lanes");
    } else {
        for (int l = 0; l < opt.lanes; l++)
            if (dagrt_worker_add_next_level_lane(w, l))
                return fail_worker(w, "dagrt_worker_add_next_level_lane");
    }
    int n_cpus = 0;
    if (opt.pin) { /* lane i on the i-th CPU of this process's mask (wrapping round) */
        static int32_t cpus[CPU_SETSIZE];
        cpu_set_t mine;
        if (sched_getaffinity(0, sizeof mine, &mine) == 0)
            for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
                if (CPU_ISSET(cpu, &mine)) cpus[n_cpus++] = cpu;
        if (n_cpus > 0 && dagrt_worker_set_lane_cpus(w, cpus, (uint32_t)n_cpus))
            return fail_worker(w, "dagrt_worker_set_lane_cpus");
    }
    if (dagrt_worker_init(w)) return fail_worker(w, "dagrt_worker_init");
    if (dagrt_register_callable("potrf", 0, DAGRT_CALLABLE_KIND_TASK, exec_potrf, NULL, &c.potrf) ||
        dagrt_register_callable("trsm", 0, DAGRT_CALLABLE_KIND_TASK, exec_trsm, NULL, &c.trsm) ||
        dagrt_register_callable("syrk", 0, DAGRT_CALLABLE_KIND_TASK, exec_syrk, NULL, &c.syrk) ||
        dagrt_register_callable("gemm", 0, DAGRT_CALLABLE_KIND_TASK, exec_gemm, NULL, &c.gemm))
        return fail_worker(w, "dagrt_register_callable");

    const long n_potrf = N, n_trsm = (long)N * (N - 1) / 2, n_gemm = tasks - n_potrf - 2 * n_trsm;
    printf("dagrt %s tiled Cholesky (lower, double): n=%d b=%d (%d x %d tiles)\n",
           dagrt_version(), n, b, N, N);
    printf("  %ld tasks (%ld potrf, %ld trsm, %ld syrk, %ld gemm), %d %s lane%s", tasks, n_potrf,
           n_trsm, n_trsm, n_gemm, opt.lanes, opt.kind == LANES_SUB ? "SUB" : "NEXT_LEVEL",
           opt.lanes == 1 ? "" : "s");
    if (opt.kind == LANES_NEXT_LEVEL)
        printf(" (tile owners: %d x %d block-cyclic)", c.P, c.Q);
    printf(", %s, OpenBLAS core %s, %d thread per task\n",
           n_cpus > 0 ? "pinned" : "unpinned", openblas_get_corename(), openblas_get_num_threads());
    fflush(stdout);

    const int tty = opt.progress && isatty(STDERR_FILENO);
    double *secs = calloc((size_t)opt.reps, sizeof(double));
    double worst_res = 0.0;
    int failed = 0, setup_failed = 0, reps_done = 0, traces_written = 0;
    if (!secs) {
        fprintf(stderr, "dagrt_cholesky: out of memory\n");
        dagrt_worker_free(w);
        return 1;
    }
    g_tty = tty;
    g_total = tasks;

    for (int rep = 0; rep < opt.reps && !failed; rep++) {
        const int traced = rep == opt.reps - 1 && (opt.trace || opt.dot);
        memcpy(A, A0, bytes); /* untimed: every rep factors the same input */
        atomic_store(&g_tasks_done, 0);
        g_submitted = 0;
        if (traced && dagrt_worker_trace_start(w, opt.trace ? opt.trace : "/dev/null")) {
            setup_failed = fail_setup("dagrt_worker_trace_start");
            break;
        }

        /* Timed section: first submit .. last completion. */
        double t0 = g_t0 = chol_now(), cpu0 = chol_thread_cpu();
        dagrt_run_id run = 0;
        dagrt_status s = dagrt_worker_submit(w, build, &c, &run);
        double t_sub = chol_now() - t0, cpu_sub = chol_thread_cpu() - cpu0;
        g_submitted = tasks;
        if (s != DAGRT_STATUS_OK) {
            if (tty) fputs("\r\033[K", stderr);
            fprintf(stderr, "dagrt_cholesky: building the graph failed: %s (%s)\n",
                    dagrt_status_str(s), dagrt_last_error());
            setup_failed = 1;
            break;
        }
        uint32_t done = 0;
        for (;;) {
            s = dagrt_wait_run_for(w, run, tty ? 25 : 1000, &done);
            if (s != DAGRT_STATUS_OK || done) break;
            if (tty)
                draw_progress(atomic_load_explicit(&g_tasks_done, memory_order_relaxed), tasks,
                              chol_now() - t0);
        }
        double sec = chol_now() - t0;
        if (tty) {
            draw_progress(atomic_load(&g_tasks_done), tasks, sec);
            fputs("\r\033[K", stderr); /* erase the bar: the result lines follow */
            fflush(stderr);
        }
        secs[rep] = sec;
        reps_done = rep + 1;

        dagrt_run_stats_t st = {0};
        dagrt_run_stats(w, run, &st);
        if (s != DAGRT_STATUS_OK) {
            fprintf(stderr, "dagrt_cholesky: the run failed: %s: %s\n", dagrt_status_str(s),
                    dagrt_last_error());
            fprintf(stderr, "dagrt_cholesky: tasks completed %llu, failed %llu, cancelled %llu\n",
                    (unsigned long long)st.completed, (unsigned long long)st.failed,
                    (unsigned long long)st.cancelled);
            failed = 1;
        } else if ((long)st.completed != tasks) {
            fprintf(stderr, "dagrt_cholesky: %llu tasks completed, expected %ld\n",
                    (unsigned long long)st.completed, tasks);
            failed = 1;
        }
        if (traced) {
            if (opt.dot && dagrt_worker_write_dot(w, run, opt.dot))
                setup_failed = fail_setup("dagrt_worker_write_dot");
            if (dagrt_worker_trace_stop(w)) setup_failed = fail_setup("dagrt_worker_trace_stop");
            traces_written = !setup_failed;
        }
        if (dagrt_release_run(w, run)) setup_failed = fail_setup("dagrt_release_run");
        if (setup_failed) break;

        double res = failed ? NAN : chol_residual(A0, A, n);
        if (!(res < CHECK_LIMIT)) failed = 1;
        if (!(res <= worst_res)) worst_res = res; /* NaN sticks */
        if (failed)
            printf("rep %d/%d: FAILED after %.4f s  residual %.1e%s\n", rep + 1, opt.reps, sec,
                   res, traced ? "  [traced]" : "");
        else
            printf("rep %d/%d: %.4f s  %6.2f GFLOP/s  residual %.1e  (graph built in %.2f ms, "
                   "%.2f ms of CPU)%s\n",
                   rep + 1, opt.reps, sec, chol_gflops(n, sec), res, t_sub * 1e3, cpu_sub * 1e3,
                   traced ? "  [traced]" : "");
        if (opt.peer_lines)
            printf("dagrt-%s-t%d %d %d %ld %.6f %.2f %.3e\n", LANE_KIND_NAME[opt.kind], opt.lanes,
                   n, b, tasks, sec, chol_gflops(n, sec), res);
        fflush(stdout);
    }
    dagrt_worker_free(w); /* also writes a trace still recording after an error */
    if (setup_failed || reps_done == 0) {
        free(secs);
        free(A);
        free(A0);
        return 1;
    }

    /* The traced rep, the last, pays for the recording: it counts in the timing only when it
     * is the only rep. */
    int timed = reps_done;
    if ((opt.trace || opt.dot) && reps_done == opt.reps && reps_done > 1) timed--;
    qsort(secs, (size_t)timed, sizeof(double), cmp_double);
    double med = timed % 2 ? secs[timed / 2] : 0.5 * (secs[timed / 2 - 1] + secs[timed / 2]);
    printf("\n");
    printf("n          %d\n", n);
    printf("b          %d\n", b);
    printf("tasks      %ld\n", tasks);
    printf("lanes      %d\n", opt.lanes);
    printf("lane kind  %s\n", LANE_KIND_NAME[opt.kind]);
    if (timed > 1)
        printf("wall time  %.4f s (median of %d reps, min %.4f, max %.4f%s)\n", med, timed,
               secs[0], secs[timed - 1], timed < reps_done ? "; the traced rep left out" : "");
    else
        printf("wall time  %.4f s%s\n", med,
               timed < reps_done ? " (the traced rep left out)" : "");
    if (failed)
        printf("GFLOP/s    - (the run failed)\n");
    else
        printf("GFLOP/s    %.2f\n", chol_gflops(n, med));
    printf("residual   %.1e (%s: ||A - L L^T||_F / ||A||_F < %.0e)\n", worst_res,
           failed ? "FAILED" : "passed", CHECK_LIMIT);
    /* Only the last rep is traced: a run that stopped before it wrote neither file. */
    if (opt.trace && traces_written) printf("trace      %s\n", opt.trace);
    if (opt.dot && traces_written) printf("dot        %s\n", opt.dot);
    if ((opt.trace || opt.dot) && !traces_written)
        printf("trace      - (the run stopped before the traced last rep)\n");
    free(secs);
    free(A);
    free(A0);
    return failed ? 2 : 0;
}
