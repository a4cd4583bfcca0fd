/*
 * harness.h: shared helpers for the dagrt C tests (header-only; include it FIRST in every
 * test file, before any system header, so that the feature-test macro below takes effect).
 *
 * What it gives a test:
 *  - CHECK / EXPECT_OK / EXPECT_STATUS / EXPECT_ERROR: non-fatal checks that print the file,
 *    line, the status name (dagrt_status_str) and the thread's dagrt_last_error(), and count
 *    failures; REQUIRE_OK aborts the current test function (returns) on failure.
 *  - a worker factory (config, NEXT_LEVEL lanes by stable id, SUB lanes); h_open_worker
 *    (worker and orchestrator) and h_close_worker (quiescent, closed, freed) around a test;
 *  - the "step" executor: a configurable task that records its start/end on a global atomic
 *    sequence counter, its lane, member index and run count, and can sleep, wait on a gate,
 *    meet other tasks at a counting barrier, open a gate, or fail on purpose. Every wait has
 *    a timeout, so a missing (or extra) dependency edge shows up as a failed check, never as
 *    a hang;
 *  - gates (flags the test thread or a task opens) and barriers (N arrivals) for proving
 *    concurrency or the absence of an edge;
 *  - bounded run waits and worker-stats helpers (quiescence: no live slot, no TensorMap
 *    entry, every heap ring empty); h_run_one_per_lane submits steps to lanes 0, 1, ... and
 *    finishes the run;
 *  - value operations for the step (fill / append / read-sum / add over 8-byte elements of
 *    dense or strided views), so tests can check what each task computed;
 *  - a watchdog (alarm) so that a hang kills the test long before the ctest timeout;
 *  - a time scale for every timeout (DAGRT_TEST_TIME_SCALE, or 20 under valgrind), so slow
 *    runs never fail a correct engine.
 *
 * main() of a test: h_begin("name", watchdog_s); RUN_TEST(fn)...; return h_done();
 */
#ifndef DAGRT_TEST_HARNESS_H
#define DAGRT_TEST_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <dagrt.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------- */
/* Checks                                                                                 */
/* ------------------------------------------------------------------------------------- */

static atomic_int h_failures;
static const char *h_current_test = "";

static inline void h_fail_at(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s:%d [%s]: ", file, line, h_current_test);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    atomic_fetch_add(&h_failures, 1);
}

#define H_FAIL(...) h_fail_at(__FILE__, __LINE__, __VA_ARGS__)

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond))                                                                      \
            H_FAIL("CHECK(%s) failed", #cond);                                            \
    } while (0)

/* CHECK with a printf-style explanation. */
#define CHECKF(cond, ...)                                                                 \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            H_FAIL("CHECK(%s) failed", #cond);                                            \
            fprintf(stderr, "    ");                                                      \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fputc('\n', stderr);                                                          \
        }                                                                                 \
    } while (0)

/* CHECK(a == b) on both values converted to `type`, printed with `fmt` (a PRI macro) and
 * named by the texts a_str and b_str on failure. */
#define H_CHECK_EQ_AS(type, fmt, a, b, a_str, b_str)                                      \
    do {                                                                                  \
        type a_ = (type)(a), b_ = (type)(b);                                              \
        if (a_ != b_)                                                                     \
            H_FAIL("CHECK(%s == %s) failed: %" fmt " != %" fmt, a_str, b_str, a_, b_);    \
    } while (0)

#define CHECK_EQ_U64(a, b) H_CHECK_EQ_AS(uint64_t, PRIu64, a, b, #a, #b)
#define CHECK_EQ_I64(a, b) H_CHECK_EQ_AS(int64_t, PRId64, a, b, #a, #b)

/* Status check: returns 1 when `got` is `want`, else reports and returns 0. */
static inline int h_expect_status(const char *file, int line, const char *expr,
                                  dagrt_status got, dagrt_status want)
{
    if (got == want)
        return 1;
    h_fail_at(file, line, "%s returned %s, expected %s (last error: \"%s\")", expr,
              dagrt_status_str((int32_t)got), dagrt_status_str((int32_t)want),
              dagrt_last_error());
    return 0;
}

/* Does `msg` contain `needle` (case-sensitive)? */
static inline int h_contains(const char *msg, const char *needle)
{
    return msg != NULL && needle != NULL && strstr(msg, needle) != NULL;
}

/* Does `msg` contain `word` as a whole identifier (not inside a longer identifier)? */
static inline int h_mentions_word(const char *msg, const char *word)
{
    size_t n = strlen(word);
    const char *p = msg;
    if (msg == NULL || n == 0)
        return 0;
    while ((p = strstr(p, word)) != NULL) {
        int left_ok = (p == msg) ||
                      !((p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= 'A' && p[-1] <= 'Z') ||
                        (p[-1] >= '0' && p[-1] <= '9') || p[-1] == '_');
        char r = p[n];
        int right_ok = !((r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') ||
                         (r >= '0' && r <= '9') || r == '_');
        if (left_ok && right_ok)
            return 1;
        p += 1;
    }
    return 0;
}

/* Status and message check: `got` must be `want`, and dagrt_last_error() must contain
 * `needle` (NULL: only a non-empty message is required). */
static inline int h_expect_error(const char *file, int line, const char *expr,
                                 dagrt_status got, dagrt_status want, const char *needle)
{
    const char *msg;
    if (!h_expect_status(file, line, expr, got, want))
        return 0;
    msg = dagrt_last_error();
    if (msg == NULL || msg[0] == '\0') {
        h_fail_at(file, line, "%s: %s but dagrt_last_error() is empty", expr,
                  dagrt_status_str((int32_t)want));
        return 0;
    }
    if (needle != NULL && !h_contains(msg, needle)) {
        h_fail_at(file, line, "%s: last error \"%s\" does not mention \"%s\"", expr, msg,
                  needle);
        return 0;
    }
    return 1;
}

#define EXPECT_STATUS(expr, want) h_expect_status(__FILE__, __LINE__, #expr, (expr), (want))
#define EXPECT_OK(expr) EXPECT_STATUS(expr, DAGRT_STATUS_OK)
#define EXPECT_ERROR(expr, want, needle)                                                  \
    h_expect_error(__FILE__, __LINE__, #expr, (expr), (want), (needle))

/* Fatal for the current test function: on failure, return from it. */
#define REQUIRE_OK(expr)                                                                  \
    do {                                                                                  \
        if (!EXPECT_OK(expr))                                                             \
            return;                                                                       \
    } while (0)
#define REQUIRE(cond)                                                                     \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            H_FAIL("REQUIRE(%s) failed", #cond);                                          \
            return;                                                                       \
        }                                                                                 \
    } while (0)

/* ------------------------------------------------------------------------------------- */
/* Time                                                                                   */
/* ------------------------------------------------------------------------------------- */

static inline uint64_t h_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline void h_sleep_us(uint64_t us)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(us / 1000000u);
    ts.tv_nsec = (long)((us % 1000000u) * 1000u);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Whether the test runs under valgrind (detected through its preload library). */
static inline int h_under_valgrind(void)
{
    const char *pre = getenv("LD_PRELOAD");
    return pre != NULL && strstr(pre, "vgpreload") != NULL;
}

/* Every timeout of the tests is multiplied by this factor: DAGRT_TEST_TIME_SCALE if set,
 * else 20 under valgrind, else 1. Timeouts only turn hangs into failures; a slow machine
 * must never make a correct engine fail. */
static inline uint64_t h_time_scale(void)
{
    static uint64_t scale;
    if (scale == 0) {
        const char *e = getenv("DAGRT_TEST_TIME_SCALE");
        uint64_t v = 1;
        if (e != NULL && atoi(e) > 0)
            v = (uint64_t)atoi(e);
        else if (h_under_valgrind())
            v = 20;
        scale = v;
    }
    return scale;
}

/* How long any in-task wait (gate, barrier) may block before it is declared a deadlock
 * (unscaled: H_POLL applies the scale). */
#ifndef H_BLOCK_TIMEOUT_MS
#define H_BLOCK_TIMEOUT_MS 3000u
#endif
/* How long a test waits for a run before declaring it hung (scaled). */
#ifndef H_RUN_TIMEOUT_MS
#define H_RUN_TIMEOUT_MS (15000u * h_time_scale())
#endif

/* Poll `cond` (an expression) every 200 us for at most `ms` (scaled); evaluates to 1 if it
 * became true, else 0. */
#define H_POLL(cond, ms)                                                                  \
    __extension__({                                                                       \
        uint64_t h_deadline_ = h_now_ms() + (uint64_t)(ms) * h_time_scale();              \
        int h_ok_ = 0;                                                                    \
        for (;;) {                                                                        \
            if (cond) {                                                                   \
                h_ok_ = 1;                                                                \
                break;                                                                    \
            }                                                                             \
            if (h_now_ms() > h_deadline_)                                                 \
                break;                                                                    \
            h_sleep_us(200);                                                              \
        }                                                                                 \
        h_ok_;                                                                            \
    })

/* ------------------------------------------------------------------------------------- */
/* Sequence counter, gates, barriers, per-task records                                    */
/* ------------------------------------------------------------------------------------- */

#define H_MAX_REC 8192
#define H_MAX_GATES 64
#define H_MAX_BARRIERS 64

/* Global sequence: every recorded event takes the next number (starting at 1). */
static atomic_uint_fast64_t h_seq;

static inline uint64_t h_next_seq(void)
{
    return (uint64_t)atomic_fetch_add(&h_seq, 1) + 1;
}

typedef struct h_rec {
    atomic_uint_fast64_t start; /* sequence number at executor entry (0: never ran) */
    atomic_uint_fast64_t end;   /* sequence number at executor exit */
    atomic_uint runs;           /* how many times the executor ran for this id */
    atomic_int worker;          /* task_view->worker_id */
    atomic_uint member;         /* task_view->member_index */
    atomic_uint group_size;     /* task_view->group_size */
    atomic_uint_fast64_t run_id;
    atomic_uint_fast64_t slot;
    atomic_int timed_out; /* a gate or barrier wait of this task timed out */
} h_rec;

static h_rec h_recs[H_MAX_REC];
static atomic_int h_gates[H_MAX_GATES];
static atomic_uint h_barriers[H_MAX_BARRIERS];
/* What H_OP_READ saw, per step id (-1: nothing). */
static double h_read[H_MAX_REC];

static inline void h_reset_records(void)
{
    for (int i = 0; i < H_MAX_REC; i++) {
        atomic_store(&h_recs[i].start, 0);
        atomic_store(&h_recs[i].end, 0);
        atomic_store(&h_recs[i].runs, 0);
        atomic_store(&h_recs[i].worker, INT32_MIN);
        atomic_store(&h_recs[i].member, 0);
        atomic_store(&h_recs[i].group_size, 0);
        atomic_store(&h_recs[i].run_id, 0);
        atomic_store(&h_recs[i].slot, 0);
        atomic_store(&h_recs[i].timed_out, 0);
        h_read[i] = -1;
    }
    for (int i = 0; i < H_MAX_GATES; i++)
        atomic_store(&h_gates[i], 0);
    for (int i = 0; i < H_MAX_BARRIERS; i++)
        atomic_store(&h_barriers[i], 0);
}

static inline void h_gate_open(int g)
{
    atomic_store(&h_gates[g], 1);
}

static inline int h_gate_is_open(int g)
{
    return atomic_load(&h_gates[g]) != 0;
}

/* Wait for gate g; 1 when open, 0 on timeout. */
static inline int h_gate_wait(int g, uint64_t timeout_ms)
{
    return H_POLL(atomic_load(&h_gates[g]) != 0, timeout_ms);
}

/* A thread that opens a gate after a delay (h_open_gate_after; pthread_join its `th`). */
typedef struct h_gate_timer {
    int gate;
    uint64_t ms;
    pthread_t th;
} h_gate_timer;

static inline void *h_gate_timer_main(void *arg)
{
    const h_gate_timer *t = arg;
    h_sleep_us(t->ms * 1000);
    h_gate_open(t->gate);
    return NULL;
}

/* Open gate g from another thread `ms` ms from now; 1 if the thread started. */
static inline int h_open_gate_after(h_gate_timer *t, int g, uint64_t ms)
{
    t->gate = g;
    t->ms = ms;
    return pthread_create(&t->th, NULL, h_gate_timer_main, t) == 0;
}

/* Arrive at barrier b and wait until n tasks have arrived; 1 on success, 0 on timeout. */
static inline int h_barrier_arrive(int b, unsigned n, uint64_t timeout_ms)
{
    atomic_fetch_add(&h_barriers[b], 1);
    return H_POLL(atomic_load(&h_barriers[b]) >= n, timeout_ms);
}

static inline uint64_t h_start(int id)
{
    return (uint64_t)atomic_load(&h_recs[id].start);
}
static inline uint64_t h_end(int id)
{
    return (uint64_t)atomic_load(&h_recs[id].end);
}
static inline unsigned h_runs(int id)
{
    return atomic_load(&h_recs[id].runs);
}
static inline int h_worker_of(int id)
{
    return atomic_load(&h_recs[id].worker);
}
static inline int h_timed_out(int id)
{
    return atomic_load(&h_recs[id].timed_out);
}

/* a ran (completely) before b started. */
#define CHECK_BEFORE(a, b)                                                                \
    CHECKF(h_end(a) != 0 && h_start(b) != 0 && h_end(a) < h_start(b),                     \
           "task %d [start %" PRIu64 ", end %" PRIu64 "] should end before task %d "      \
           "[start %" PRIu64 ", end %" PRIu64 "] starts",                                 \
           (int)(a), h_start(a), h_end(a), (int)(b), h_start(b), h_end(b))

/* Task ran exactly once and none of its waits timed out. */
#define CHECK_RAN_ONCE(id)                                                                \
    CHECKF(h_runs(id) == 1 && !h_timed_out(id),                                           \
           "task %d: runs = %u (expected 1), timed_out = %d", (int)(id), h_runs(id),      \
           h_timed_out(id))

#define CHECK_NEVER_RAN(id)                                                               \
    CHECKF(h_runs(id) == 0, "task %d ran %u time(s) but must never run", (int)(id),       \
           h_runs(id))

/* ------------------------------------------------------------------------------------- */
/* The step executor                                                                      */
/* ------------------------------------------------------------------------------------- */

/* Scalars of a step task (all optional after S_ID; missing ones read as 0). */
enum {
    S_ID = 0,         /* record index (< H_MAX_REC) */
    S_SLEEP_US,       /* sleep this long after starting */
    S_WAIT_GATE,      /* gate index + 1: wait until it is open */
    S_BARRIER,        /* barrier index + 1: arrive and wait for S_BARRIER_N arrivals */
    S_BARRIER_N,      /* arrivals the barrier needs */
    S_OPEN_AT_START,  /* gate index + 1: open it right after recording the start */
    S_OPEN_AT_END,    /* gate index + 1: open it just before returning */
    S_FAIL,           /* 1: dagrt_task_fail("step <id> failed on purpose"), return 1;
                         2: return 7 without a message; 3: task_fail then return 0 */
    S_OP,             /* value operation on the task's tensors, between the waits and the end
                         record (H_OP_*) */
    S_OPERAND,        /* its operand */
    S_COUNT
};

/* Value operations (elements are 8-byte: U64/I64 as integers, F64 as doubles). */
enum {
    H_OP_NONE = 0,
    H_OP_FILL,   /* every element of tensor 0 = operand */
    H_OP_APPEND, /* every element v of tensor 0: v = v * 10 + operand */
    H_OP_READ,   /* h_read[id] = sum of the elements of tensor 0 */
    H_OP_ADD,    /* every element of tensor 1 = the same element of tensor 0 + operand */
};

typedef struct h_step {
    uint64_t id;
    uint64_t sleep_us;
    int wait_gate;     /* -1: none */
    int barrier;       /* -1: none */
    unsigned barrier_n;
    int open_at_start; /* -1: none */
    int open_at_end;   /* -1: none */
    int fail;
    int op;
    uint64_t operand;
} h_step;

static inline h_step h_step_id(uint64_t id)
{
    h_step s;
    memset(&s, 0, sizeof s);
    s.id = id;
    s.wait_gate = -1;
    s.barrier = -1;
    s.open_at_start = -1;
    s.open_at_end = -1;
    return s;
}

/* A step that applies value operation `op` (H_OP_*) with `operand` to its tensors. */
static inline h_step h_op_step(uint64_t id, int op, uint64_t operand)
{
    h_step s = h_step_id(id);
    s.op = op;
    s.operand = operand;
    return s;
}

/* Steps first_id, first_id + 1, ... in steps[0..n-1], all meeting at barrier `barrier`, which
 * needs `barrier_n` arrivals (members of a group that must run at the same time). */
static inline void h_barrier_steps(h_step *steps, uint32_t n, uint64_t first_id, int barrier,
                                   unsigned barrier_n)
{
    for (uint32_t i = 0; i < n; i++) {
        steps[i] = h_step_id(first_id + i);
        steps[i].barrier = barrier;
        steps[i].barrier_n = barrier_n;
    }
}

static inline void h_step_scalars(const h_step *s, uint64_t out[S_COUNT])
{
    out[S_ID] = s->id;
    out[S_SLEEP_US] = s->sleep_us;
    out[S_WAIT_GATE] = s->wait_gate < 0 ? 0 : (uint64_t)s->wait_gate + 1;
    out[S_BARRIER] = s->barrier < 0 ? 0 : (uint64_t)s->barrier + 1;
    out[S_BARRIER_N] = s->barrier_n;
    out[S_OPEN_AT_START] = s->open_at_start < 0 ? 0 : (uint64_t)s->open_at_start + 1;
    out[S_OPEN_AT_END] = s->open_at_end < 0 ? 0 : (uint64_t)s->open_at_end + 1;
    out[S_FAIL] = (uint64_t)s->fail;
    out[S_OP] = (uint64_t)s->op;
    out[S_OPERAND] = s->operand;
}

static inline uint64_t h_scalar(const dagrt_task_view *t, uint32_t i)
{
    return i < t->num_scalars ? t->scalars[i] : 0;
}

/* Number of elements of a view. */
static inline uint64_t h_elems(const dagrt_tensor *t)
{
    uint64_t n = 1;
    for (uint32_t k = 0; k < t->ndim; k++)
        n *= t->shape[k];
    return n;
}

/* Address of element `i` (row-major order over the shape) of an 8-byte-element view. */
static inline void *h_elem8(const dagrt_tensor *t, uint64_t i)
{
    int dense = 1;
    uint64_t off = 0, rem = i, dense_stride = 1;
    for (uint32_t k = 0; k < t->ndim; k++)
        if (t->strides[k] != 0)
            dense = 0;
    for (int k = (int)t->ndim - 1; k >= 0; k--) {
        uint64_t idx = rem % t->shape[k];
        rem /= t->shape[k];
        off += idx * (dense ? dense_stride : t->strides[k]);
        dense_stride *= t->shape[k];
    }
    return (char *)t->data + t->offset + off * 8;
}

static inline double h_get8(const dagrt_tensor *t, uint64_t i)
{
    void *p = h_elem8(t, i);
    if (t->dtype == DAGRT_DTYPE_F64)
        return *(double *)p;
    return (double)*(uint64_t *)p;
}

static inline void h_set8(const dagrt_tensor *t, uint64_t i, double v)
{
    void *p = h_elem8(t, i);
    if (t->dtype == DAGRT_DTYPE_F64)
        *(double *)p = v;
    else
        *(uint64_t *)p = (uint64_t)v;
}

static inline int h_step_op(const dagrt_task_view *t, uint64_t id)
{
    uint64_t op = h_scalar(t, S_OP), x = h_scalar(t, S_OPERAND);
    if (op == H_OP_NONE)
        return 0;
    if (t->num_tensors < 1 || (op == H_OP_ADD && t->num_tensors < 2)) {
        dagrt_task_fail(t, "step op: missing tensor");
        return 1;
    }
    switch (op) {
    case H_OP_FILL:
        for (uint64_t i = 0; i < h_elems(&t->tensors[0]); i++)
            h_set8(&t->tensors[0], i, (double)x);
        break;
    case H_OP_APPEND:
        for (uint64_t i = 0; i < h_elems(&t->tensors[0]); i++)
            h_set8(&t->tensors[0], i, h_get8(&t->tensors[0], i) * 10 + (double)x);
        break;
    case H_OP_READ: {
        double sum = 0;
        for (uint64_t i = 0; i < h_elems(&t->tensors[0]); i++)
            sum += h_get8(&t->tensors[0], i);
        h_read[id] = sum;
        break;
    }
    case H_OP_ADD:
        for (uint64_t i = 0; i < h_elems(&t->tensors[0]); i++)
            h_set8(&t->tensors[1], i, h_get8(&t->tensors[0], i) + (double)x);
        break;
    default:
        dagrt_task_fail(t, "step op: unknown op");
        return 1;
    }
    return 0;
}

static inline int32_t h_step_exec(const dagrt_task_view *t, void *user)
{
    uint64_t id = h_scalar(t, S_ID);
    h_rec *r;
    int32_t rc = 0;
    (void)user;
    if (id >= H_MAX_REC) {
        dagrt_task_fail(t, "step id out of range");
        return 1;
    }
    r = &h_recs[id];
    atomic_store(&r->worker, t->worker_id);
    atomic_store(&r->member, t->member_index);
    atomic_store(&r->group_size, t->group_size);
    atomic_store(&r->run_id, t->run_id);
    atomic_store(&r->slot, t->slot);
    atomic_fetch_add(&r->runs, 1);
    atomic_store(&r->start, h_next_seq());
    if (h_scalar(t, S_OPEN_AT_START))
        h_gate_open((int)h_scalar(t, S_OPEN_AT_START) - 1);
    if (h_scalar(t, S_SLEEP_US))
        h_sleep_us(h_scalar(t, S_SLEEP_US));
    if (h_scalar(t, S_BARRIER)) {
        if (!h_barrier_arrive((int)h_scalar(t, S_BARRIER) - 1,
                              (unsigned)h_scalar(t, S_BARRIER_N), H_BLOCK_TIMEOUT_MS)) {
            atomic_store(&r->timed_out, 1);
            dagrt_task_fail(t, "barrier timeout");
            rc = 1;
        }
    }
    if (rc == 0 && h_scalar(t, S_WAIT_GATE)) {
        if (!h_gate_wait((int)h_scalar(t, S_WAIT_GATE) - 1, H_BLOCK_TIMEOUT_MS)) {
            atomic_store(&r->timed_out, 1);
            dagrt_task_fail(t, "gate timeout");
            rc = 1;
        }
    }
    if (rc == 0)
        rc = h_step_op(t, id);
    if (rc == 0) {
        switch (h_scalar(t, S_FAIL)) {
        case 1: {
            char msg[64];
            snprintf(msg, sizeof msg, "step %" PRIu64 " failed on purpose", id);
            dagrt_task_fail(t, msg);
            rc = 1;
            break;
        }
        case 2:
            rc = 7;
            break;
        case 3: {
            char msg[64];
            snprintf(msg, sizeof msg, "step %" PRIu64 " failed on purpose", id);
            dagrt_task_fail(t, msg);
            rc = 0; /* the task must fail anyway */
            break;
        }
        default:
            break;
        }
    }
    atomic_store(&r->end, h_next_seq());
    if (h_scalar(t, S_OPEN_AT_END))
        h_gate_open((int)h_scalar(t, S_OPEN_AT_END) - 1);
    return rc;
}

/* The step callable (registered once per process). */
static inline const dagrt_callable *h_step_callable(void)
{
    static dagrt_callable c;
    static int done;
    if (!done) {
        dagrt_status s = dagrt_register_callable("harness.step", 0, DAGRT_CALLABLE_KIND_TASK,
                                                 h_step_exec, NULL, &c);
        if (s != DAGRT_STATUS_OK) {
            fprintf(stderr, "cannot register harness.step: %s: %s\n",
                    dagrt_status_str((int32_t)s), dagrt_last_error());
            exit(2);
        }
        done = 1;
    }
    return &c;
}

/* ------------------------------------------------------------------------------------- */
/* Tensors and task args                                                                  */
/* ------------------------------------------------------------------------------------- */

/* A dense 1-D view of n elements. */
static inline dagrt_tensor h_tensor(void *data, uint64_t n, uint32_t dtype, uint32_t tag)
{
    dagrt_tensor t;
    uint64_t shape[1];
    shape[0] = n;
    memset(&t, 0, sizeof t);
    if (dagrt_tensor_init(&t, data, dtype, 1, shape, tag) != DAGRT_STATUS_OK)
        H_FAIL("dagrt_tensor_init: %s", dagrt_last_error());
    return t;
}

/* A 2-D strided view (column-major tile: shape {rows, cols}, strides {1, ld}). */
static inline dagrt_tensor h_tile(void *data, uint64_t offset_bytes, uint32_t dtype,
                                  uint64_t rows, uint64_t cols, uint64_t ld, uint32_t tag)
{
    dagrt_tensor t;
    uint64_t shape[2], strides[2];
    shape[0] = rows;
    shape[1] = cols;
    strides[0] = 1;
    strides[1] = ld;
    memset(&t, 0, sizeof t);
    if (dagrt_tensor_init_strided(&t, data, offset_bytes, dtype, 2, shape, strides, tag) !=
        DAGRT_STATUS_OK)
        H_FAIL("dagrt_tensor_init_strided: %s", dagrt_last_error());
    return t;
}

static inline dagrt_dep h_dep(dagrt_task_handle h, uint32_t kind)
{
    dagrt_dep d;
    memset(&d, 0, sizeof d);
    d.handle = h;
    d.kind = kind;
    return d;
}

/* Build a dagrt_task_args over caller arrays (scalars of a step). */
static inline dagrt_task_args h_args(dagrt_tensor *tensors, uint32_t nt, const uint64_t *scalars,
                                     uint32_t ns, const dagrt_dep *deps, uint32_t nd)
{
    dagrt_task_args a;
    memset(&a, 0, sizeof a);
    a.tensors = tensors;
    a.num_tensors = nt;
    a.scalars = scalars;
    a.num_scalars = ns;
    a.deps = deps;
    a.num_deps = nd;
    return a;
}

/* The args of a step task `s` (its scalars are written to sc, which must outlive them). */
static inline dagrt_task_args h_step_args(const h_step *s, uint64_t sc[S_COUNT],
                                          dagrt_tensor *tensors, uint32_t nt,
                                          const dagrt_dep *deps, uint32_t nd)
{
    h_step_scalars(s, sc);
    return h_args(tensors, nt, sc, S_COUNT, deps, nd);
}

/* Per-member args of a group of step tasks (at most H_MAX_GROUP members). */
#define H_MAX_GROUP 8
typedef struct h_group {
    uint64_t sc[H_MAX_GROUP][S_COUNT];
    dagrt_task_args a[H_MAX_GROUP];
} h_group;

/* Member i runs steps[i], with tensors[i * per_member ...] when `tensors` is not NULL. */
static inline void h_make_group(h_group *g, const h_step *steps, uint32_t n, dagrt_tensor *tensors,
                                uint32_t per_member)
{
    for (uint32_t i = 0; i < n && i < H_MAX_GROUP; i++)
        g->a[i] = h_step_args(&steps[i], g->sc[i], tensors ? tensors + i * per_member : NULL,
                              tensors ? per_member : 0, NULL, 0);
}

/* Submit a step task to NEXT_LEVEL lane `worker`. */
static inline dagrt_status h_submit_step(dagrt_orch_t *o, const h_step *s, int32_t worker,
                                         dagrt_tensor *tensors, uint32_t nt,
                                         const dagrt_dep *deps, uint32_t nd,
                                         dagrt_task_handle *out)
{
    uint64_t sc[S_COUNT];
    dagrt_task_args a = h_step_args(s, sc, tensors, nt, deps, nd);
    return dagrt_submit_next_level(o, h_step_callable(), &a, NULL, worker, out);
}

/* Submit a step task to the SUB lanes. */
static inline dagrt_status h_submit_step_sub(dagrt_orch_t *o, const h_step *s,
                                             dagrt_tensor *tensors, uint32_t nt,
                                             const dagrt_dep *deps, uint32_t nd,
                                             dagrt_task_handle *out)
{
    uint64_t sc[S_COUNT];
    dagrt_task_args a = h_step_args(s, sc, tensors, nt, deps, nd);
    return dagrt_submit_sub(o, h_step_callable(), &a, out);
}

/* Shorthand: a plain step `id` on `worker` with up to one tensor. */
#define SUBMIT_STEP(o, stepp, worker, tensors, nt, deps, nd, outp)                         \
    EXPECT_OK(h_submit_step((o), (stepp), (worker), (tensors), (nt), (deps), (nd), (outp)))

/* ------------------------------------------------------------------------------------- */
/* Workers                                                                                */
/* ------------------------------------------------------------------------------------- */

/* A started worker with NEXT_LEVEL lanes of the given stable ids and `n_sub` SUB lanes.
 * `cfg` may be NULL (defaults). Returns NULL (after reporting) on failure. */
static inline dagrt_worker_t *h_worker_ids(const dagrt_worker_config *cfg, const int32_t *ids,
                                           uint32_t n_ids, uint32_t n_sub)
{
    dagrt_worker_t *w = NULL;
    if (!EXPECT_OK(dagrt_worker_new(cfg, &w)))
        return NULL;
    for (uint32_t i = 0; i < n_ids; i++) {
        if (!EXPECT_OK(dagrt_worker_add_next_level_lane(w, ids[i]))) {
            dagrt_worker_free(w);
            return NULL;
        }
    }
    if (n_sub > 0 && !EXPECT_OK(dagrt_worker_add_sub_lanes(w, n_sub))) {
        dagrt_worker_free(w);
        return NULL;
    }
    if (!EXPECT_OK(dagrt_worker_init(w))) {
        dagrt_worker_free(w);
        return NULL;
    }
    return w;
}

/* NEXT_LEVEL lanes with ids 0..n_next-1. */
static inline dagrt_worker_t *h_worker(const dagrt_worker_config *cfg, uint32_t n_next,
                                       uint32_t n_sub)
{
    int32_t ids[64];
    for (uint32_t i = 0; i < n_next && i < 64; i++)
        ids[i] = (int32_t)i;
    return h_worker_ids(cfg, ids, n_next, n_sub);
}

static inline dagrt_worker_config h_config(uint64_t heap_ring_size, uint32_t task_window,
                                           uint32_t timeout_ms)
{
    dagrt_worker_config c;
    dagrt_worker_config_default(&c);
    if (heap_ring_size)
        c.heap_ring_size = heap_ring_size;
    if (task_window)
        c.task_window = task_window;
    if (timeout_ms)
        c.timeout_ms = (uint32_t)(timeout_ms * h_time_scale());
    return c;
}

static inline dagrt_orch_t *h_orch(dagrt_worker_t *w)
{
    dagrt_orch_t *o = NULL;
    if (!EXPECT_OK(dagrt_worker_orch(w, &o)))
        return NULL;
    return o;
}

/* Wait for a run with a bound; returns the run's status, or DAGRT_STATUS_SYSTEM (after
 * reporting) if it did not finish within H_RUN_TIMEOUT_MS. */
static inline dagrt_status h_wait_at(const char *file, int line, dagrt_worker_t *w,
                                     dagrt_run_id run)
{
    uint32_t done = 0;
    dagrt_status s = dagrt_wait_run_for(w, run, H_RUN_TIMEOUT_MS, &done);
    if (s == DAGRT_STATUS_OK && !done) {
        h_fail_at(file, line, "run %" PRIu64 " did not finish within %" PRIu64 " ms", run,
                  (uint64_t)H_RUN_TIMEOUT_MS);
        return DAGRT_STATUS_SYSTEM;
    }
    return s;
}
#define h_wait(w, run) h_wait_at(__FILE__, __LINE__, (w), (run))

/* Close submission, wait (bounded), release; returns the wait status. */
static inline dagrt_status h_finish_run_at(const char *file, int line, dagrt_worker_t *w,
                                           dagrt_orch_t *o, dagrt_run_id run)
{
    dagrt_status s;
    h_expect_status(file, line, "dagrt_close_run_submission", dagrt_close_run_submission(o, run),
                    DAGRT_STATUS_OK);
    s = h_wait_at(file, line, w, run);
    if (s != DAGRT_STATUS_SYSTEM)
        h_expect_status(file, line, "dagrt_release_run", dagrt_release_run(w, run),
                        DAGRT_STATUS_OK);
    return s;
}
#define h_finish_run(w, o, run) h_finish_run_at(__FILE__, __LINE__, (w), (o), (run))

/* A run of `n` empty steps (ids first_id...) on NEXT_LEVEL lane `lane`, finished: the lane's
 * recent jobs are then tiny, which is when the scheduler would queue jobs behind its running
 * one if it did that on NEXT_LEVEL lanes. */
static inline void h_warm_lane(dagrt_worker_t *w, dagrt_orch_t *o, int32_t lane, uint64_t first_id,
                               int n)
{
    dagrt_run_id r;
    if (!EXPECT_OK(dagrt_begin_run(o, &r)))
        return;
    for (int i = 0; i < n; i++) {
        h_step s = h_step_id(first_id + (uint64_t)i);
        SUBMIT_STEP(o, &s, lane, NULL, 0, NULL, 0, NULL);
    }
    EXPECT_OK(h_finish_run(w, o, r));
}

static inline dagrt_worker_stats_t h_stats(const dagrt_worker_t *w)
{
    dagrt_worker_stats_t s;
    memset(&s, 0, sizeof s);
    if (dagrt_worker_stats(w, &s) != DAGRT_STATUS_OK)
        H_FAIL("dagrt_worker_stats: %s", dagrt_last_error());
    return s;
}

static inline int h_ring_empty(const dagrt_worker_stats_t *s, int r)
{
    return s->heap_top[r] == s->heap_tail[r];
}

static inline int h_is_quiescent(const dagrt_worker_stats_t *s)
{
    return s->live_slots == 0 && s->tensormap_entries == 0 && s->ready_queued == 0 &&
           h_ring_empty(s, 0) && h_ring_empty(s, 1) && h_ring_empty(s, 2) &&
           h_ring_empty(s, 3);
}

/* After every run of the worker finished: nothing live, every heap ring empty. */
static inline void h_check_quiescent_at(const char *file, int line, const dagrt_worker_t *w)
{
    dagrt_worker_stats_t s = h_stats(w);
    if (!h_is_quiescent(&s))
        h_fail_at(file, line,
                  "worker not quiescent: live_slots=%" PRId64 " tensormap_entries=%" PRIu64
                  " ready_queued=%" PRIu64 " rings top/tail: %" PRIu64 "/%" PRIu64
                  " %" PRIu64 "/%" PRIu64 " %" PRIu64 "/%" PRIu64 " %" PRIu64 "/%" PRIu64,
                  s.live_slots, s.tensormap_entries, s.ready_queued, s.heap_top[0],
                  s.heap_tail[0], s.heap_top[1], s.heap_tail[1], s.heap_top[2],
                  s.heap_tail[2], s.heap_top[3], s.heap_tail[3]);
}
#define CHECK_QUIESCENT(w) h_check_quiescent_at(__FILE__, __LINE__, (w))

/* Whether the worker is quiescent now (a condition for H_POLL). */
static inline int h_quiescent_now(const dagrt_worker_t *w)
{
    dagrt_worker_stats_t s = h_stats(w);
    return h_is_quiescent(&s);
}

/* The stats of a run (zeroed, after reporting, when dagrt_run_stats fails). */
static inline dagrt_run_stats_t h_run_stats_at(const char *file, int line, const dagrt_worker_t *w,
                                               dagrt_run_id run)
{
    dagrt_run_stats_t s;
    memset(&s, 0, sizeof s);
    if (dagrt_run_stats(w, run, &s) != DAGRT_STATUS_OK)
        h_fail_at(file, line, "dagrt_run_stats: %s", dagrt_last_error());
    return s;
}
#define h_run_stats(w, run) h_run_stats_at(__FILE__, __LINE__, (w), (run))

/* The end of a test's worker: CHECK_QUIESCENT, dagrt_worker_close (expected OK), then
 * dagrt_worker_free. Does nothing for a NULL worker. */
static inline void h_close_worker_at(const char *file, int line, const char *close_expr,
                                     dagrt_worker_t *w)
{
    if (w == NULL)
        return;
    h_check_quiescent_at(file, line, w);
    h_expect_status(file, line, close_expr, dagrt_worker_close(w), DAGRT_STATUS_OK);
    dagrt_worker_free(w);
}
#define h_close_worker(w) h_close_worker_at(__FILE__, __LINE__, "dagrt_worker_close(" #w ")", (w))

/* A test's worker and orchestrator: h_open_worker starts a worker (h_worker: `cfg` may be
 * NULL, NEXT_LEVEL lanes 0..n_next-1, n_sub SUB lanes) into *w and its orchestrator into *o,
 * and returns 1 (0 after reporting a failure); h_close_fixture(w, o) ends a worker kept in
 * file-scope variables (h_close_worker) and sets both back to NULL. */
static inline int h_open_worker(dagrt_worker_t **w, dagrt_orch_t **o,
                                const dagrt_worker_config *cfg, uint32_t n_next, uint32_t n_sub)
{
    *w = h_worker(cfg, n_next, n_sub);
    *o = *w ? h_orch(*w) : NULL;
    return *o != NULL;
}
#define h_close_fixture(w, o)                                                             \
    do {                                                                                  \
        h_close_worker(w);                                                                \
        (w) = NULL;                                                                       \
        (o) = NULL;                                                                       \
    } while (0)

/* A step task with its one tensor (for h_submit_one_per_lane). */
typedef struct h_step_tensor {
    const h_step *step;
    dagrt_tensor *tensor;
} h_step_tensor;

/* Steps on distinct lanes: submits st[i] to NEXT_LEVEL lane i, in order, for i < n. */
static inline void h_submit_one_per_lane(dagrt_orch_t *o, uint32_t n, const h_step_tensor *st)
{
    for (uint32_t i = 0; i < n; i++)
        if (!SUBMIT_STEP(o, st[i].step, (int32_t)i, st[i].tensor, 1, NULL, 0, NULL))
            fprintf(stderr, "    (step %" PRIu64 " on lane %u)\n", st[i].step->id, i);
}

/* A whole run of steps on distinct lanes: h_submit_one_per_lane, then the run is finished
 * (h_finish_run) and every step must have run exactly once. */
static inline void h_run_one_per_lane(dagrt_worker_t *w, dagrt_orch_t *o, dagrt_run_id run,
                                      uint32_t n, const h_step_tensor *st)
{
    h_submit_one_per_lane(o, n, st);
    EXPECT_OK(h_finish_run(w, o, run));
    for (uint32_t i = 0; i < n; i++)
        CHECK_RAN_ONCE((int)st[i].step->id);
}

/* The number after `field` ("Threads:", "VmSize:" in kB...) in /proc/self/status, or -1. */
static inline long long h_status_field(const char *field)
{
    char line[256];
    long long v = -1;
    size_t n = strlen(field);
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, field, n) == 0) {
            v = strtoll(line + n, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* Threads of this process, or -1. */
static inline int h_thread_count(void)
{
    return (int)h_status_field("Threads:");
}

/* ------------------------------------------------------------------------------------- */
/* Test driver                                                                            */
/* ------------------------------------------------------------------------------------- */

static const char *h_suite = "";

static inline void h_begin(const char *suite, unsigned watchdog_s)
{
    h_suite = suite;
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* A hang must fail the test well before ctest's timeout: SIGALRM's default action
     * terminates the process. */
    alarm((unsigned)(watchdog_s * h_time_scale()));
    (void)h_step_callable();
}

#define RUN_TEST(fn)                                                                      \
    do {                                                                                  \
        int before_ = atomic_load(&h_failures);                                           \
        uint64_t t0_ = h_now_ms();                                                        \
        h_current_test = #fn;                                                             \
        h_reset_records();                                                                \
        fn();                                                                             \
        printf("%s %s.%s (%" PRIu64 " ms)\n",                                             \
               atomic_load(&h_failures) == before_ ? "ok  " : "FAIL", h_suite, #fn,       \
               h_now_ms() - t0_);                                                         \
    } while (0)

static inline int h_done(void)
{
    int f = atomic_load(&h_failures);
    printf("%s: %s (%d failed check%s)\n", h_suite, f ? "FAILED" : "passed", f,
           f == 1 ? "" : "s");
    return f ? 1 : 0;
}

#endif /* DAGRT_TEST_HARNESS_H */
