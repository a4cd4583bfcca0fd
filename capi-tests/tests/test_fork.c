/*
 * test_fork.c: fork hygiene (Orchestrator seed §8c) and heap rings that forked children
 * share (§5 "mapped before any fork; children inherit at the same address", §8b "heap
 * mapped before children fork, MAP_SHARED | MAP_ANONYMOUS").
 *  - thread-pool environment defaults: with OMP_NUM_THREADS=7 set and OPENBLAS_NUM_THREADS,
 *    MKL_NUM_THREADS and BLIS_NUM_THREADS unset, the first dagrt_worker_init leaves
 *    OMP_NUM_THREADS at "7" (user-supplied values win) and sets the three others to "1";
 *    the step runs once per process: a variable unset after that stays unset through a
 *    second worker's init;
 *  - a dagrt_alloc buffer is shared with a child forked after init, while a run is open and
 *    a task is running on a lane: the child finds the parent's data at the same address,
 *    writes a pattern and _exit(0)s; the parent, and a task reading the buffer, see the
 *    pattern; /proc/self/maps lists the buffer's mapping as shared;
 *  - the same for an auto-allocated OUTPUT buffer: the child sees the producer task's data,
 *    overwrites it, and the consumer task (blocked on a gate during the fork) reads the
 *    child's values;
 *  - the pthread_atfork handlers leave dagrt usable across forks: a thread forks repeatedly
 *    while the main thread runs task graphs; every child exits cleanly, every run succeeds
 *    and the worker ends quiescent.
 *  - a worker initialised before the fork is refused in the child (WRONG_STATE, never a
 *    hang), dagrt_worker_free there releases the handle only, and a worker of the child's own
 *    runs a graph, also when the child was forked inside an orchestration callback (its
 *    own worker may get the freed handle's address); children forked while another thread
 *    registers callables, swaps the log
 *    hook and runs graphs do the same, never finding a dagrt lock held; a fork while the
 *    log hook runs (which itself forks, or registers a callable) deadlocks nobody; a child
 *    forked while a parent thread is blocked in dagrt's default stderr logging (fd 2 a full
 *    pipe) logs to its own stderr without waiting for that thread.
 * The children of the earlier cases touch only memory and leave with _exit (no dagrt call,
 * no stdio); those of the last two call dagrt, which the fork handlers make safe. Each exit
 * status says what the child found. This file's cases must run in this order: the environment case needs
 * the process's first dagrt_worker_init.
 */
#include "harness.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define HAVE_VALGRIND_H 1
#endif
#endif

/* Child exit statuses. */
#define CHILD_OK 0
#define CHILD_SAW_WRONG_DATA 3

/* First thing in a forked child: under valgrind, no leak check at its exit. The child is a
 * one-thread copy of a threaded process, so blocks only the parent's other threads point to
 * look lost there, and --error-exitcode would replace the child's exit status (the scan of
 * the 4 GiB of heap rings also takes half a minute under memcheck). The parent's own leak
 * check covers the real process; other memcheck errors in the child still fail it. A client
 * request, not a libc call: safe after fork. */
static inline void child_no_leak_check(void)
{
#ifdef HAVE_VALGRIND_H
    VALGRIND_CLO_CHANGE("--leak-check=no");
#endif
}

/* Whether this run can judge a child by its exit status (see child_no_leak_check). */
static int can_fork_here(void)
{
#ifndef HAVE_VALGRIND_H
    if (h_under_valgrind()) {
        printf("skip %s: <valgrind/valgrind.h> is missing, so memcheck's leak check of the "
               "forked child would set its exit status\n",
               h_current_test);
        return 0;
    }
#endif
    return 1;
}

/* ------------------------------------------------------------------------------------- */
/* Environment defaults                                                                   */
/* ------------------------------------------------------------------------------------- */

/* The variables dagrt defaults to "1" (src/worker.rs fork_hygiene_once). */
static const char *const pool_vars[4] = {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                         "MKL_NUM_THREADS", "BLIS_NUM_THREADS"};

#define CHECK_ENV(name, want)                                                             \
    do {                                                                                  \
        const char *v_ = getenv(name);                                                    \
        CHECKF(v_ != NULL && strcmp(v_, (want)) == 0, "%s is %s%s%s, expected \"%s\"",    \
               (name), v_ ? "\"" : "", v_ ? v_ : "unset", v_ ? "\"" : "", (want));        \
    } while (0)

#define CHECK_UNSET(name)                                                                 \
    do {                                                                                  \
        const char *v_ = getenv(name);                                                    \
        CHECKF(v_ == NULL, "%s is \"%s\", expected unset", (name), v_ ? v_ : "");         \
    } while (0)

static void test_env_defaults(void)
{
    dagrt_worker_t *w, *w2;
    REQUIRE(setenv("OMP_NUM_THREADS", "7", 1) == 0);
    for (int i = 1; i < 4; i++)
        REQUIRE(unsetenv(pool_vars[i]) == 0);
    for (int i = 1; i < 4; i++)
        CHECK_UNSET(pool_vars[i]);

    /* configuration alone changes nothing: the step belongs to init */
    {
        dagrt_worker_t *cfg_only = NULL;
        REQUIRE_OK(dagrt_worker_new(NULL, &cfg_only));
        EXPECT_OK(dagrt_worker_add_next_level_lane(cfg_only, 0));
        CHECK_UNSET("MKL_NUM_THREADS");
        dagrt_worker_free(cfg_only);
    }

    w = h_worker(NULL, 1, 0);
    REQUIRE(w != NULL);
    CHECK_ENV("OMP_NUM_THREADS", "7"); /* the user's value wins */
    for (int i = 1; i < 4; i++)
        CHECK_ENV(pool_vars[i], "1");
    EXPECT_OK(dagrt_worker_close(w));
    dagrt_worker_free(w);
    CHECK_ENV("OMP_NUM_THREADS", "7"); /* close and free restore nothing */
    CHECK_ENV("BLIS_NUM_THREADS", "1");

    /* once per process: a second init does not set them again */
    REQUIRE(unsetenv("MKL_NUM_THREADS") == 0);
    REQUIRE(setenv("OPENBLAS_NUM_THREADS", "3", 1) == 0);
    w2 = h_worker(NULL, 1, 0);
    REQUIRE(w2 != NULL);
    CHECK_UNSET("MKL_NUM_THREADS");
    CHECK_ENV("OPENBLAS_NUM_THREADS", "3");
    CHECK_ENV("OMP_NUM_THREADS", "7");
    EXPECT_OK(dagrt_worker_close(w2));
    dagrt_worker_free(w2);
}

/* ------------------------------------------------------------------------------------- */
/* Heap rings shared with forked children                                                 */
/* ------------------------------------------------------------------------------------- */

/* Does /proc/self/maps list the mapping that contains `p` as shared? 1 shared, 0 private,
 * -1 not found (or unreadable). */
static int mapping_is_shared(const void *p)
{
    char line[512];
    int found = -1;
    uintptr_t a = (uintptr_t)p;
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3)
            continue;
        if (a >= lo && a < hi) {
            found = perms[3] == 's';
            break;
        }
    }
    fclose(f);
    return found;
}

/* Fork a child that checks that the `n` words at `buf` hold `before + i`, writes
 * `after + i` into each and leaves with _exit. Returns 1 if the child exited CHILD_OK,
 * else reports why and returns 0. */
static int fork_child_writes(volatile uint64_t *buf, size_t n, uint64_t before, uint64_t after)
{
    int st = 0;
    pid_t pid, got;
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        H_FAIL("fork: %s", strerror(errno));
        return 0;
    }
    if (pid == 0) {
        child_no_leak_check();
        for (size_t i = 0; i < n; i++)
            if (buf[i] != before + i)
                _exit(CHILD_SAW_WRONG_DATA);
        for (size_t i = 0; i < n; i++)
            buf[i] = after + i;
        _exit(CHILD_OK);
    }
    do
        got = waitpid(pid, &st, 0);
    while (got < 0 && errno == EINTR);
    if (got != pid) {
        H_FAIL("waitpid: %s", strerror(errno));
        return 0;
    }
    if (WIFSIGNALED(st)) {
        H_FAIL("the child died of signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
        return 0;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != CHILD_OK) {
        H_FAIL("the child exited with status %d (%s)", WEXITSTATUS(st),
               WEXITSTATUS(st) == CHILD_SAW_WRONG_DATA
                   ? "it did not find the parent's data at the buffer's address"
                   : "unexpected");
        return 0;
    }
    return 1;
}

/* How many of the `n` words at `buf` are not `want + i` (the first one is reported). */
static size_t count_mismatches(const volatile uint64_t *buf, size_t n, uint64_t want,
                               const char *what)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (buf[i] != want + i) {
            if (bad == 0)
                H_FAIL("%s: word %zu is %" PRIu64 ", expected %" PRIu64
                       " (written by the forked child): the heap ring is not shared with "
                       "forked children",
                       what, i, (uint64_t)buf[i], want + i);
            bad++;
        }
    return bad;
}

/* Sum of `base + i` for i < n (what H_OP_READ finds). */
static double pattern_sum(uint64_t base, uint64_t n)
{
    return (double)(base * n + n * (n - 1) / 2);
}

#define WORDS 512u

static void test_alloc_buffer_shared_with_child(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    void *p = NULL;
    uint64_t shape[1] = {WORDS};
    volatile uint64_t *buf;
    dagrt_tensor tr;
    h_step busy = h_step_id(1), rd = h_step_id(2);
    if (!can_fork_here())
        return;
    REQUIRE(h_open_worker(&w, &o, NULL, 2, 0));
    busy.wait_gate = 0;
    rd.op = H_OP_READ;
    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE_OK(dagrt_alloc(o, shape, 1, DAGRT_DTYPE_U64, &p, NULL));
    REQUIRE(p != NULL);
    buf = (volatile uint64_t *)p;
    for (uint64_t i = 0; i < WORDS; i++)
        buf[i] = 100 + i;
    CHECKF(mapping_is_shared(p) == 1, "/proc/self/maps: the mapping of alloc buffer %p is %s", p,
           mapping_is_shared(p) == 0 ? "private" : "not found");

    /* a lane is inside an executor while the process forks */
    SUBMIT_STEP(o, &busy, 0, NULL, 0, NULL, 0, NULL);
    CHECKF(H_POLL(h_start(1) != 0, 5000), "the gated task did not start");

    if (fork_child_writes(buf, WORDS, 100, 5000))
        count_mismatches(buf, WORDS, 5000, "alloc buffer after the child exited");

    /* a task reading the buffer sees what the child wrote */
    tr = h_tensor(p, WORDS, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    SUBMIT_STEP(o, &rd, 1, &tr, 1, NULL, 0, NULL);
    h_gate_open(0);
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(1);
    CHECK_RAN_ONCE(2);
    CHECKF(h_read[2] == pattern_sum(5000, WORDS), "the reader task saw a sum of %g, expected %g",
           h_read[2], pattern_sum(5000, WORDS));
    h_close_worker(w);
}

static void test_auto_allocated_output_shared_with_child(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_tensor tp = h_tensor(NULL, WORDS, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    dagrt_tensor tc;
    volatile uint64_t *buf;
    h_step pr = h_step_id(1), co = h_step_id(2);
    if (!can_fork_here())
        return;
    REQUIRE(h_open_worker(&w, &o, NULL, 2, 0));
    pr.op = H_OP_FILL;
    pr.operand = 7;
    co.op = H_OP_READ;
    co.wait_gate = 0; /* reads after the gate: the fork happens while it waits */
    REQUIRE_OK(dagrt_begin_run(o, &run));
    SUBMIT_STEP(o, &pr, 0, &tp, 1, NULL, 0, NULL);
    REQUIRE(tp.data != NULL);
    tc = h_tensor(tp.data, WORDS, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    SUBMIT_STEP(o, &co, 1, &tc, 1, NULL, 0, NULL);
    buf = (volatile uint64_t *)tp.data;
    CHECKF(mapping_is_shared(tp.data) == 1,
           "/proc/self/maps: the mapping of auto-allocated buffer %p is %s", tp.data,
           mapping_is_shared(tp.data) == 0 ? "private" : "not found");
    /* the consumer starts only after the producer ended: the buffer holds 7s */
    CHECKF(H_POLL(h_start(2) != 0, 5000), "the consumer did not start");
    CHECK(h_end(1) != 0);

    /* the producer task's 7s are there; then the parent writes a per-word pattern for the
     * child to find at the same address */
    {
        size_t bad = 0;
        for (size_t i = 0; i < WORDS; i++)
            bad += buf[i] != 7;
        CHECKF(bad == 0, "%zu words of the producer's output are not 7", bad);
        for (size_t i = 0; i < WORDS; i++)
            buf[i] = 300 + i; /* the parent's data, for the child to find */
    }
    if (fork_child_writes(buf, WORDS, 300, 9000))
        count_mismatches(buf, WORDS, 9000, "auto-allocated OUTPUT after the child exited");
    h_gate_open(0);
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(1);
    CHECK_RAN_ONCE(2);
    CHECK_BEFORE(1, 2);
    CHECKF(h_read[2] == pattern_sum(9000, WORDS), "the consumer task saw a sum of %g, expected %g",
           h_read[2], pattern_sum(9000, WORDS));
    h_close_worker(w);
}

/* ------------------------------------------------------------------------------------- */
/* Forks while dagrt is busy                                                              */
/* ------------------------------------------------------------------------------------- */

typedef struct forker {
    int forks;
    atomic_int stop;
    atomic_int done;
    int bad_children; /* children that did not exit CHILD_OK */
    int failed_forks;
} forker;

/* Fork `forks` times, 2 ms apart; each child leaves at once. */
static void *forker_main(void *arg)
{
    forker *f = arg;
    for (int i = 0; i < f->forks && !atomic_load(&f->stop); i++) {
        int st = 0;
        pid_t pid = fork(), got;
        if (pid < 0) {
            f->failed_forks++;
            continue;
        }
        if (pid == 0) {
            child_no_leak_check();
            _exit(CHILD_OK);
        }
        do
            got = waitpid(pid, &st, 0);
        while (got < 0 && errno == EINTR);
        if (got != pid || !WIFEXITED(st) || WEXITSTATUS(st) != CHILD_OK)
            f->bad_children++;
        h_sleep_us(2000);
    }
    atomic_store(&f->done, 1);
    return NULL;
}

/* A run of a chain of `n` (<= 19) tasks appending 1 to one INOUT cell, on alternating
 * lanes, with an auto-allocated OUTPUT per task (heap ring traffic). */
static void chain_run(dagrt_worker_t *w, dagrt_orch_t *o, uint64_t first_id, int n)
{
    static uint64_t cell[1];
    dagrt_run_id run;
    uint64_t want = 0;
    cell[0] = 0;
    REQUIRE_OK(dagrt_begin_run(o, &run));
    for (int i = 0; i < n; i++) {
        dagrt_tensor t[2];
        h_step s = h_step_id(first_id + (uint64_t)i);
        t[0] = h_tensor(cell, 1, DAGRT_DTYPE_U64, DAGRT_TAG_INOUT);
        t[1] = h_tensor(NULL, 64, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
        s.op = H_OP_APPEND;
        s.operand = 1;
        want = want * 10 + 1;
        if (!SUBMIT_STEP(o, &s, i % 2, t, 2, NULL, 0, NULL))
            break;
    }
    EXPECT_OK(h_finish_run(w, o, run));
    CHECKF(cell[0] == want, "the chain computed %" PRIu64 ", expected %" PRIu64, cell[0], want);
}

static void test_forks_while_running(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    pthread_t th;
    forker f;
    int runs = 0;
    if (!can_fork_here())
        return;
    REQUIRE(h_open_worker(&w, &o, NULL, 2, 0));
    memset(&f, 0, sizeof f);
    f.forks = h_under_valgrind() ? 4 : 20;
    REQUIRE(pthread_create(&th, NULL, forker_main, &f) == 0);
    /* keep the lanes and the scheduler busy until every fork is done (at least 3 runs) */
    while (runs < 3 || !atomic_load(&f.done)) {
        chain_run(w, o, 100 + (uint64_t)(runs % 100) * 10, 10);
        if (++runs >= 2000 || atomic_load(&h_failures) != 0)
            break;
    }
    atomic_store(&f.stop, 1);
    pthread_join(th, NULL);
    CHECKF(f.failed_forks == 0, "%d of %d forks failed", f.failed_forks, f.forks);
    CHECKF(f.bad_children == 0, "%d of %d children did not exit cleanly", f.bad_children,
           f.forks);
    h_close_worker(w);
}

/* ---- a forked child and dagrt ---- */

#define CHILD_INHERITED_USABLE 10 /* a call on the inherited worker did not fail as it should */
#define CHILD_OWN_WORKER_FAILED 11

static int32_t child_task(const dagrt_task_view *t, void *user)
{
    (void)t;
    (*(int *)user)++;
    return 0;
}

/* ThreadSanitizer lets no forked child of a threaded process start threads (it dies): under
 * scripts/test-tsan.sh (DAGRT_TSAN set) the children skip their own worker. Read before any
 * fork. */
static int no_threads_in_children;

/* In a child: a worker of its own, with a callable registered there, runs one task. 1 on
 * success (and, without threads allowed, after the registration only). Raw API calls only:
 * the harness's checks print and count in the parent's way. */
static int child_runs_own_worker(int k)
{
    dagrt_worker_t *w = NULL;
    dagrt_orch_t *o = NULL;
    dagrt_callable c;
    dagrt_run_id run;
    dagrt_task_args a;
    char name[64];
    static int ran;
    int ok;
    ran = 0;
    snprintf(name, sizeof name, "fork.child.%d", k);
    memset(&a, 0, sizeof a);
    if (no_threads_in_children)
        return dagrt_register_callable(name, 0, DAGRT_CALLABLE_KIND_TASK, child_task, &ran, &c) ==
               0;
    ok = dagrt_register_callable(name, 0, DAGRT_CALLABLE_KIND_TASK, child_task, &ran, &c) == 0 &&
         dagrt_worker_new(NULL, &w) == 0 && dagrt_worker_add_sub_lanes(w, 1) == 0 &&
         dagrt_worker_init(w) == 0 && dagrt_worker_orch(w, &o) == 0 &&
         dagrt_begin_run(o, &run) == 0 && dagrt_submit_sub(o, &c, &a, NULL) == 0 &&
         dagrt_close_run_submission(o, run) == 0 && dagrt_wait_run(w, run) == 0 && ran == 1;
    dagrt_worker_free(w);
    return ok;
}

/* Wait up to `ms` for child `pid`; its exit status, or -1 (killed: it hung) / -2 (signal). */
static int wait_child(pid_t pid, uint64_t ms)
{
    uint64_t end = h_now_ms() + ms * h_time_scale();
    int st = 0;
    for (;;) {
        pid_t got = waitpid(pid, &st, WNOHANG);
        if (got == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : -2;
        if (got < 0 && errno != EINTR)
            return -2;
        if (h_now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        h_sleep_us(2000);
    }
}

/* A worker initialised before the fork, with a run in flight (a task blocked on a gate):
 * in the child every call on it fails with WRONG_STATE instead of hanging (its lanes and
 * scheduler thread were not copied), dagrt_worker_free releases the handle only, and a
 * worker of the child's own runs a graph. The parent's run is untouched. */
static void test_child_refuses_inherited_worker(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    h_step b = h_step_id(1);
    pid_t pid;
    int st;
    if (!can_fork_here())
        return;
    REQUIRE(h_open_worker(&w, &o, NULL, 1, 0));
    b.wait_gate = 0;
    REQUIRE_OK(dagrt_begin_run(o, &run));
    SUBMIT_STEP(o, &b, 0, NULL, 0, NULL, 0, NULL);
    REQUIRE_OK(dagrt_close_run_submission(o, run));
    REQUIRE(H_POLL(h_start(1) != 0, 5000));
    fflush(NULL);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dagrt_worker_stats_t ws;
        dagrt_run_id r2;
        uint32_t done;
        child_no_leak_check();
        if (dagrt_worker_stats(w, &ws) != DAGRT_STATUS_WRONG_STATE ||
            !strstr(dagrt_last_error(), "forked") ||
            dagrt_begin_run(o, &r2) != DAGRT_STATUS_WRONG_STATE ||
            dagrt_run_done(w, run, &done) != DAGRT_STATUS_WRONG_STATE ||
            dagrt_wait_run(w, run) != DAGRT_STATUS_WRONG_STATE ||
            dagrt_worker_close(w) != DAGRT_STATUS_WRONG_STATE)
            _exit(CHILD_INHERITED_USABLE);
        dagrt_worker_free(w);
        _exit(child_runs_own_worker(0) ? CHILD_OK : CHILD_OWN_WORKER_FAILED);
    }
    st = wait_child(pid, 10000);
    CHECKF(st == CHILD_OK, "the child %s",
           st == -1                       ? "hung (killed after 10 s)"
           : st == CHILD_INHERITED_USABLE ? "could call the inherited worker"
           : st == CHILD_OWN_WORKER_FAILED ? "could not run a worker of its own"
                                           : "died or exited with an unexpected status");
    h_gate_open(0);
    EXPECT_OK(h_wait(w, run));
    EXPECT_OK(dagrt_release_run(w, run));
    CHECK_RAN_ONCE(1);
    h_close_worker(w);
}

/* A fork inside an orchestration callback: the child frees its copy of the worker (the
 * handle only) and runs a worker of its own, which may get the freed handle's address. It is
 * not inside that worker's callback: configuring it was once refused with WRONG_STATE. */
static int32_t forking_callback(dagrt_orch_t *o, void *ctx)
{
    dagrt_worker_t *w = *(dagrt_worker_t **)ctx;
    pid_t pid;
    (void)o;
    fflush(NULL);
    pid = fork();
    if (pid < 0) return 3;
    if (pid == 0) {
        child_no_leak_check();
        dagrt_worker_free(w);
        _exit(child_runs_own_worker(1) ? CHILD_OK : CHILD_OWN_WORKER_FAILED);
    }
    return wait_child(pid, 10000);
}

static void test_fork_in_an_orchestration_callback(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run = 0;
    dagrt_status s;
    if (!can_fork_here())
        return;
    REQUIRE(h_open_worker(&w, &o, NULL, 0, 1));
    /* The callback returns the child's exit status: non-zero fails the submit. */
    s = dagrt_worker_submit(w, forking_callback, &w, &run);
    CHECKF(s == DAGRT_STATUS_OK, "the child forked in the callback %s (%s)",
           s == DAGRT_STATUS_ORCHESTRATION_FAILED ? "could not run a worker of its own"
                                                  : "failed otherwise",
           dagrt_last_error());
    if (run) {
        dagrt_wait_run(w, run);
        EXPECT_OK(dagrt_release_run(w, run));
    }
    h_close_worker(w);
}

/* The process-wide locks (callable registry, log hook, live run ids) are taken around a
 * fork: a child forked while another thread registers callables, swaps the log hook and
 * begins and releases runs never inherits one of them held. Each child registers a callable,
 * sets the hook and runs a worker of its own. (Without the fork handlers about a quarter of
 * such children hung.) */
typedef struct {
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    atomic_int stop;
    int calls;
} churner;

static void quiet_hook(uint32_t level, const char *msg, void *user)
{
    (void)level;
    (void)msg;
    (void)user;
}

static void *churn_main(void *arg)
{
    churner *c = arg;
    dagrt_callable cb;
    while (!atomic_load(&c->stop)) {
        dagrt_run_id run;
        dagrt_register_callable("fork.churn", 0, DAGRT_CALLABLE_KIND_TASK, child_task, &c->calls,
                                &cb);
        dagrt_set_log_hook(quiet_hook, NULL);
        dagrt_set_log_hook(NULL, NULL);
        if (dagrt_begin_run(c->o, &run) == DAGRT_STATUS_OK) {
            dagrt_close_run_submission(c->o, run);
            dagrt_wait_run(c->w, run);
            dagrt_release_run(c->w, run);
        }
    }
    return NULL;
}

static void test_children_of_a_busy_process(void)
{
    churner c;
    pthread_t th;
    int forks, bad = 0, hung = 0;
    if (!can_fork_here())
        return;
    memset(&c, 0, sizeof c);
    REQUIRE(h_open_worker(&c.w, &c.o, NULL, 0, 1));
    REQUIRE(pthread_create(&th, NULL, churn_main, &c) == 0);
    forks = h_under_valgrind() ? 3 : 30;
    for (int i = 0; i < forks; i++) {
        pid_t pid;
        int st;
        fflush(NULL);
        pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            child_no_leak_check();
            dagrt_set_log_hook(quiet_hook, NULL);
            _exit(child_runs_own_worker(i + 1) ? CHILD_OK : CHILD_OWN_WORKER_FAILED);
        }
        st = wait_child(pid, 10000);
        hung += st == -1;
        bad += st != CHILD_OK;
        h_sleep_us(1000);
    }
    atomic_store(&c.stop, 1);
    pthread_join(th, NULL);
    CHECKF(bad == 0, "%d of %d children failed (%d hung)", bad, forks, hung);
    EXPECT_OK(dagrt_set_log_hook(NULL, NULL));
    h_close_worker(c.w);
}

/* fork() while the log hook runs: the hook's lock is held across the host's hook code, so
 * the fork handlers never wait for it. A thread forks while the hook (called on the main
 * thread by a worker init whose DAGRT_TRACE path cannot be created) either forks too (mode
 * 0) or registers a callable (mode 1); both forks return, and each child can set the log
 * hook. (Waiting for the hook's lock deadlocked the parent in both.) */
static int hook_mode;
static atomic_int forker_go;
static atomic_int hook_child_status = -3, forker_child_status = -3;

static void set_hook_and_exit(void)
{
    dagrt_set_log_hook(NULL, NULL);
    /* Under ThreadSanitizer, _exit reports the parent's other threads (copied as records,
     * never joined here) as leaked and changes the status: leave by the system call. */
    if (no_threads_in_children)
        syscall(SYS_exit_group, CHILD_OK);
    _exit(CHILD_OK);
}

static void forking_hook(uint32_t level, const char *msg, void *user)
{
    (void)level;
    (void)msg;
    (void)user;
    atomic_store(&forker_go, 1);
    h_sleep_us(100000); /* the other thread is in its fork by now */
    if (hook_mode == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            child_no_leak_check();
            set_hook_and_exit();
        }
        atomic_store(&hook_child_status, pid < 0 ? -2 : wait_child(pid, 10000));
    } else {
        dagrt_callable c;
        atomic_store(&hook_child_status,
                     dagrt_register_callable("fork.from_hook", 0, DAGRT_CALLABLE_KIND_TASK,
                                             child_task, NULL, &c) == DAGRT_STATUS_OK
                         ? CHILD_OK
                         : -4);
    }
}

static void *forker_thread(void *arg)
{
    pid_t pid;
    (void)arg;
    while (!atomic_load(&forker_go))
        h_sleep_us(100);
    pid = fork();
    if (pid == 0) {
        child_no_leak_check();
        set_hook_and_exit();
    }
    atomic_store(&forker_child_status, pid < 0 ? -2 : wait_child(pid, 10000));
    return NULL;
}

static void test_fork_while_the_hook_runs(void)
{
    if (!can_fork_here())
        return;
    for (hook_mode = 0; hook_mode < 2; hook_mode++) {
        pthread_t th;
        dagrt_worker_t *w;
        atomic_store(&forker_go, 0);
        atomic_store(&hook_child_status, -3);
        atomic_store(&forker_child_status, -3);
        REQUIRE(pthread_create(&th, NULL, forker_thread, NULL) == 0);
        REQUIRE_OK(dagrt_set_log_hook(forking_hook, NULL));
        setenv("DAGRT_TRACE", "/nonexistent-dagrt-dir/t.json", 1);
        w = h_worker(NULL, 0, 1); /* its init logs the DAGRT_TRACE failure to the hook */
        unsetenv("DAGRT_TRACE");
        atomic_store(&forker_go, 1); /* in case the hook was not called */
        pthread_join(th, NULL);
        EXPECT_OK(dagrt_set_log_hook(NULL, NULL));
        CHECKF(atomic_load(&hook_child_status) == CHILD_OK,
               "mode %d: the hook's %s gave %d", hook_mode, hook_mode ? "registration" : "child",
               atomic_load(&hook_child_status));
        CHECKF(atomic_load(&forker_child_status) == CHILD_OK,
               "mode %d: the other thread's child gave %d", hook_mode,
               atomic_load(&forker_child_status));
        if (w)
            h_close_worker(w);
    }
}

/* A parent thread blocked inside dagrt's default stderr logging (no hook; fd 2 a full pipe
 * nobody reads) while another thread forks: the child's own first message to stderr does not
 * wait for the parent's writer (a lock around stderr inherited held would hang it). */
static atomic_int stderr_writer_done;

static void *stderr_writer(void *arg)
{
    dagrt_worker_t *w = NULL;
    (void)arg;
    /* init logs the DAGRT_TRACE failure to stderr and blocks in the write */
    if (dagrt_worker_new(NULL, &w) == 0 && dagrt_worker_add_sub_lanes(w, 1) == 0)
        (void)dagrt_worker_init(w);
    dagrt_worker_free(w);
    atomic_store(&stderr_writer_done, 1);
    return NULL;
}

static void test_fork_while_another_thread_writes_stderr(void)
{
    int p[2], saved, child = -3;
    char buf[4096];
    pthread_t th;
    pid_t pid;
    if (!can_fork_here())
        return;
    if (no_threads_in_children) {
        printf("skip %s: the child needs a worker of its own\n", h_current_test);
        return;
    }
    REQUIRE(pipe(p) == 0);
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    memset(buf, 'x', sizeof buf);
    while (write(p[1], buf, sizeof buf) > 0) {
    }
    fcntl(p[1], F_SETFL, 0);
    fflush(stderr);
    saved = dup(2);
    REQUIRE(saved >= 0);
    dup2(p[1], 2);
    setenv("DAGRT_TRACE", "/nonexistent-dagrt-dir/t.json", 1); /* every init logs an error */
    atomic_store(&stderr_writer_done, 0);
    if (pthread_create(&th, NULL, stderr_writer, NULL) != 0) {
        dup2(saved, 2);
        REQUIRE(0);
    }
    h_sleep_us(300000);
    pid = fork();
    if (pid == 0) {
        dagrt_worker_t *w = NULL;
        int devnull = open("/dev/null", O_WRONLY);
        child_no_leak_check();
        dup2(devnull, 2);
        if (dagrt_worker_new(NULL, &w) != 0 || dagrt_worker_add_sub_lanes(w, 1) != 0)
            _exit(3);
        (void)dagrt_worker_init(w); /* logs the DAGRT_TRACE failure to stderr */
        dagrt_worker_free(w);
        _exit(CHILD_OK);
    }
    if (pid > 0)
        child = wait_child(pid, 5000);
    /* let the parent's writer finish: stderr back, the pipe drained */
    dup2(saved, 2);
    close(saved);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    while (!atomic_load(&stderr_writer_done)) {
        while (read(p[0], buf, sizeof buf) > 0) {
        }
        h_sleep_us(1000);
    }
    pthread_join(th, NULL);
    unsetenv("DAGRT_TRACE");
    close(p[0]);
    close(p[1]);
    CHECKF(child == CHILD_OK, "the child gave %d (-1: it hung on its stderr message)", child);
}

int main(void)
{
    h_begin("fork", 120);
    no_threads_in_children = getenv("DAGRT_TSAN") != NULL;
    RUN_TEST(test_env_defaults); /* first: it needs the process's first init */
    RUN_TEST(test_alloc_buffer_shared_with_child);
    RUN_TEST(test_auto_allocated_output_shared_with_child);
    RUN_TEST(test_forks_while_running);
    RUN_TEST(test_child_refuses_inherited_worker);
    RUN_TEST(test_fork_in_an_orchestration_callback);
    RUN_TEST(test_children_of_a_busy_process);
    RUN_TEST(test_fork_while_the_hook_runs);
    RUN_TEST(test_fork_while_another_thread_writes_stderr);
    return h_done();
}
