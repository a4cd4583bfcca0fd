/*
 * test_reentry.c: calls into the API from inside a task, or from inside the log hook.
 * A task that calls back into its own worker gets an error, never a hang:
 *  - dagrt_wait_run on its own run -> WRONG_THREAD (the run cannot end while the task waits
 *    for it); a timed wait on it (timeout 0) and dagrt_run_done answer "not done";
 *  - dagrt_worker_run on its own worker -> WRONG_THREAD (its run would be waited for while
 *    the task holds a lane), the orchestration callback never called; so is an unbounded
 *    wait for another run of its worker that is not over (a timed one waits it out);
 *  - dagrt_worker_close and dagrt_worker_free from the task -> WRONG_THREAD: nothing is torn
 *    down or freed, the run completes, and the host closes and frees the worker afterwards;
 *    so do dagrt_worker_close_for, adding lanes and init (no exclusive use of the worker
 *    while the host waits on it);
 *  - the rule is per worker and per run: a task of worker A waits without bound for a run of
 *    worker B and gets its result, and a task waits without bound for an earlier run of its
 *    own worker that has ended.
 * dagrt_task_fail from threads the task runs, all at once: the task fails with one whole
 * message (no torn or lost one); called twice, the first message is the task's.
 * An orchestration callback (dagrt_worker_run) that closes, reconfigures or frees its own
 * worker -> WRONG_STATE, nothing done: the call that runs it goes on using the worker; so
 * does one that begins another run of its worker (submit, run), even after failing its own.
 * The log hook replaces itself from inside its call: no deadlock, the change takes effect
 * as it returns, and the next message reaches the new hook. A hook called inside a worker's
 * init that reconfigures or frees that worker -> WRONG_STATE, nothing done.
 */
#include "harness.h"

#define MSG 512

/* What the re-entering task saw. Written by the task, read by the test thread after the
 * run's wait returned (which orders the task's writes before the reads). */
struct seen {
    dagrt_worker_t *w;
    dagrt_status wait, wait_for, done_q, close, close_for, lanes, init, worker_run;
    dagrt_status other_submit, other_wait, other_wait_for;
    uint32_t other_done;
    dagrt_run_id other;
    atomic_int release_other;
    int orch_called;
    uint32_t timed_done, done, closed;
    char wait_msg[MSG], close_msg[MSG], free_msg[MSG];
    int ran;
};

static void keep_msg(char *dst)
{
    snprintf(dst, MSG, "%s", dagrt_last_error());
}

static int32_t count_call(dagrt_orch_t *o, void *ctx)
{
    (void)o;
    ((struct seen *)ctx)->orch_called++;
    return 0;
}

/* A task of the other run: held until the re-entering task releases it (bounded). */
static int32_t held_other(const dagrt_task_view *t, void *user)
{
    struct seen *s = user;
    uint64_t end = h_now_ms() + 10000;
    (void)t;
    while (!atomic_load(&s->release_other) && h_now_ms() < end)
        h_sleep_us(200);
    return 0;
}

static int32_t submit_held_other(dagrt_orch_t *o, void *ctx)
{
    dagrt_callable c;
    dagrt_task_args a = h_args(NULL, 0, NULL, 0, NULL, 0);
    if (dagrt_register_callable("capi-tests.reentry.held", 0, DAGRT_CALLABLE_KIND_TASK, held_other,
                                ctx, &c) != DAGRT_STATUS_OK)
        return 1;
    return dagrt_submit_sub(o, &c, &a, NULL) != DAGRT_STATUS_OK;
}

static int32_t reenter(const dagrt_task_view *t, void *user)
{
    struct seen *s = user;
    s->timed_done = 7;
    s->done = 7;
    s->closed = 7;
    s->wait = dagrt_wait_run(s->w, t->run_id);
    keep_msg(s->wait_msg);
    s->wait_for = dagrt_wait_run_for(s->w, t->run_id, 0, &s->timed_done);
    s->done_q = dagrt_run_done(s->w, t->run_id, &s->done);
    s->worker_run = dagrt_worker_run(s->w, count_call, s);
    /* another run of this worker, not over (its task is held): no unbounded wait from here */
    s->other_submit = dagrt_worker_submit(s->w, submit_held_other, s, &s->other);
    s->other_wait = dagrt_wait_run(s->w, s->other);
    atomic_store(&s->release_other, 1);
    s->other_wait_for = dagrt_wait_run_for(s->w, s->other, 10000, &s->other_done);
    s->close = dagrt_worker_close(s->w);
    keep_msg(s->close_msg);
    s->close_for = dagrt_worker_close_for(s->w, 0, &s->closed);
    s->lanes = dagrt_worker_add_sub_lanes(s->w, 1);
    s->init = dagrt_worker_init(s->w);
    dagrt_worker_free(s->w);
    keep_msg(s->free_msg);
    s->ran = 1;
    return 0;
}

/* One run of one SUB task calling `exec` with `user`; returns the run's (bounded) wait
 * status. */
static dagrt_status run_one(dagrt_worker_t *w, dagrt_orch_t *o, const char *name,
                            int32_t (*exec)(const dagrt_task_view *, void *), void *user,
                            dagrt_run_id *out_run)
{
    dagrt_callable c;
    dagrt_task_args a = h_args(NULL, 0, NULL, 0, NULL, 0);
    dagrt_task_handle h;
    dagrt_run_id run = 0;
    dagrt_status s;
    if (!EXPECT_OK(dagrt_register_callable(name, 0, DAGRT_CALLABLE_KIND_TASK, exec, user, &c)) ||
        !EXPECT_OK(dagrt_begin_run(o, &run)))
        return DAGRT_STATUS_SYSTEM;
    EXPECT_OK(dagrt_submit_sub(o, &c, &a, &h));
    EXPECT_OK(dagrt_close_run_submission(o, run));
    s = h_wait(w, run);
    if (out_run)
        *out_run = run;
    return s;
}

static int32_t noop(const dagrt_task_view *t, void *user)
{
    (void)t;
    (void)user;
    return 0;
}

static void test_own_worker_refused(void)
{
    static struct seen s;
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run = 0;
    REQUIRE(h_open_worker(&w, &o, NULL, 0, 2));
    s.w = w;
    EXPECT_OK(run_one(w, o, "capi-tests.reentry.own", reenter, &s, &run));
    REQUIRE(s.ran);
    CHECKF(s.wait == DAGRT_STATUS_WRONG_THREAD, "dagrt_wait_run on its own run: %s (%s)",
           dagrt_status_str(s.wait), s.wait_msg);
    CHECKF(h_contains(s.wait_msg, "wait for itself"), "message: %s", s.wait_msg);
    CHECK(s.wait_for == DAGRT_STATUS_OK);
    CHECK_EQ_U64(s.timed_done, 0);
    CHECK(s.done_q == DAGRT_STATUS_OK);
    CHECK_EQ_U64(s.done, 0);
    /* a whole run of its own worker, waited for while the task holds its lane */
    CHECKF(s.worker_run == DAGRT_STATUS_WRONG_THREAD, "dagrt_worker_run from its task: %s",
           dagrt_status_str(s.worker_run));
    CHECK_EQ_U64(s.orch_called, 0);
    CHECK(s.other_submit == DAGRT_STATUS_OK);
    CHECKF(s.other_wait == DAGRT_STATUS_WRONG_THREAD,
           "an unbounded wait from the task for another run of its worker: %s",
           dagrt_status_str(s.other_wait));
    CHECK(s.other_wait_for == DAGRT_STATUS_OK);
    CHECK_EQ_U64(s.other_done, 1);
    EXPECT_OK(dagrt_release_run(w, s.other));
    CHECKF(s.close == DAGRT_STATUS_WRONG_THREAD, "dagrt_worker_close from its task: %s (%s)",
           dagrt_status_str(s.close), s.close_msg);
    CHECKF(h_contains(s.close_msg, "dagrt_worker_close"), "message: %s", s.close_msg);
    /* Nor closed with a budget (which would refuse new runs from then on), given lanes or
     * initialised: each would take the worker exclusively while the host waits on it. */
    CHECKF(s.close_for == DAGRT_STATUS_WRONG_THREAD, "close_for from its task: %s",
           dagrt_status_str(s.close_for));
    CHECK_EQ_U64(s.closed, 7);
    CHECKF(s.lanes == DAGRT_STATUS_WRONG_THREAD, "add_sub_lanes from its task: %s",
           dagrt_status_str(s.lanes));
    CHECKF(s.init == DAGRT_STATUS_WRONG_THREAD, "init from its task: %s",
           dagrt_status_str(s.init));
    CHECKF(h_contains(s.free_msg, "dagrt_worker_free") && h_contains(s.free_msg, "task"),
           "dagrt_worker_free from its task left: %s", s.free_msg);
    /* Nothing was torn down: the worker still runs work, then closes and frees. */
    {
        uint32_t done = 0;
        EXPECT_OK(dagrt_run_done(w, run, &done));
        CHECK_EQ_U64(done, 1);
        EXPECT_OK(dagrt_release_run(w, run));
    }
    EXPECT_OK(run_one(w, o, "capi-tests.reentry.after", noop, NULL, &run));
    EXPECT_OK(dagrt_release_run(w, run));
    h_close_worker(w);
}

/* A task of worker A waits without bound for a run of worker B, and for an ended run of A. */
struct cross {
    dagrt_worker_t *a, *b;
    dagrt_run_id b_run, a_earlier;
    dagrt_status on_b, on_a;
    int ran;
};

static int32_t wait_elsewhere(const dagrt_task_view *t, void *user)
{
    struct cross *x = user;
    (void)t;
    x->on_b = dagrt_wait_run(x->b, x->b_run);
    x->on_a = dagrt_wait_run(x->a, x->a_earlier);
    x->ran = 1;
    return 0;
}

static void test_other_runs_allowed(void)
{
    static struct cross x;
    dagrt_run_id run = 0;
    dagrt_worker_t *a, *b;
    dagrt_orch_t *oa, *ob;
    REQUIRE(h_open_worker(&a, &oa, NULL, 0, 1));
    if (!h_open_worker(&b, &ob, NULL, 0, 1)) {
        h_close_worker(a);
        return;
    }
    x.a = a;
    x.b = b;
    EXPECT_OK(run_one(a, oa, "capi-tests.reentry.noop_a", noop, NULL, &x.a_earlier));
    EXPECT_OK(run_one(b, ob, "capi-tests.reentry.noop_b", noop, NULL, &x.b_run));
    EXPECT_OK(run_one(a, oa, "capi-tests.reentry.wait_elsewhere", wait_elsewhere, &x, &run));
    REQUIRE(x.ran);
    CHECKF(x.on_b == DAGRT_STATUS_OK, "a task of A waiting for B's run: %s",
           dagrt_status_str(x.on_b));
    CHECKF(x.on_a == DAGRT_STATUS_OK, "a task of A waiting for A's ended run: %s",
           dagrt_status_str(x.on_a));
    EXPECT_OK(dagrt_release_run(a, run));
    EXPECT_OK(dagrt_release_run(a, x.a_earlier));
    EXPECT_OK(dagrt_release_run(b, x.b_run));
    h_close_worker(b);
    h_close_worker(a);
}

/* Threads a task runs and waits for, failing it all at once. */
#define FAILERS 4
struct failer {
    const dagrt_task_view *t;
    int i;
    pthread_barrier_t *start;
};

static void *fail_from_thread(void *arg)
{
    struct failer *f = arg;
    char m[64];
    snprintf(m, sizeof m, "helper %d failed the task", f->i);
    pthread_barrier_wait(f->start);
    for (int k = 0; k < 2000; k++)
        dagrt_task_fail(f->t, m);
    return NULL;
}

static int32_t fail_in_threads(const dagrt_task_view *t, void *user)
{
    pthread_t th[FAILERS];
    struct failer f[FAILERS];
    pthread_barrier_t start;
    int started = 0;
    (void)user;
    pthread_barrier_init(&start, NULL, FAILERS);
    for (int i = 0; i < FAILERS; i++) {
        f[i].t = t;
        f[i].i = i;
        f[i].start = &start;
        if (pthread_create(&th[i], NULL, fail_from_thread, &f[i]) != 0)
            break;
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    return started == FAILERS ? 0 : 99;
}

static int32_t fail_twice(const dagrt_task_view *t, void *user)
{
    (void)user;
    dagrt_task_fail(t, "the first message");
    dagrt_task_fail(t, "the second message");
    return 0;
}

static void test_task_fail_from_threads(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run = 0;
    char msg[MSG];
    int helpers = 0;
    REQUIRE(h_open_worker(&w, &o, NULL, 0, 1));
    EXPECT_STATUS(run_one(w, o, "capi-tests.reentry.fail_in_threads", fail_in_threads, NULL, &run),
                  DAGRT_STATUS_TASK_FAILED);
    keep_msg(msg);
    for (int i = 0; i < FAILERS; i++) {
        char m[64];
        snprintf(m, sizeof m, "helper %d failed the task", i);
        helpers += h_contains(msg, m);
    }
    CHECKF(helpers == 1, "the run's message names %d helpers' whole messages: %s", helpers, msg);
    EXPECT_OK(dagrt_release_run(w, run));
    EXPECT_STATUS(run_one(w, o, "capi-tests.reentry.fail_twice", fail_twice, NULL, &run),
                  DAGRT_STATUS_TASK_FAILED);
    keep_msg(msg);
    CHECKF(h_contains(msg, "the first message") && !h_contains(msg, "the second message"),
           "message: %s", msg);
    EXPECT_OK(dagrt_release_run(w, run));
    h_close_worker(w);
}

/* An orchestration callback that tries to close, reconfigure and free its own worker. */
struct inside {
    dagrt_worker_t *w;
    dagrt_status close, lanes, close_for, submit, run;
    int nested_calls;
    uint32_t closed;
    char free_msg[MSG];
};

static int32_t orch_touches_worker(dagrt_orch_t *o, void *ctx)
{
    struct inside *x = ctx;
    (void)o;
    x->closed = 7;
    x->close = dagrt_worker_close(x->w);
    x->lanes = dagrt_worker_add_sub_lanes(x->w, 1);
    x->close_for = dagrt_worker_close_for(x->w, 0, &x->closed);
    dagrt_worker_free(x->w);
    keep_msg(x->free_msg);
    return 0;
}

static int32_t count_nested(dagrt_orch_t *o, void *ctx)
{
    (void)o;
    ((struct inside *)ctx)->nested_calls++;
    return 0;
}

/* A callback that fails its own run, then asks its worker for a run of its own again. */
static int32_t orch_fails_then_resubmits(dagrt_orch_t *o, void *ctx)
{
    struct inside *x = ctx;
    dagrt_run_id nested = 0;
    uint64_t shape[1] = {8};
    void *p;
    dagrt_task_handle h;
    if (dagrt_alloc(o, shape, 1, DAGRT_DTYPE_U8, &p, &h) != DAGRT_STATUS_OK ||
        dagrt_fail_run_submission(o, h.run_id, "given up") != DAGRT_STATUS_OK)
        return 9;
    x->submit = dagrt_worker_submit(x->w, count_nested, x, &nested);
    x->run = dagrt_worker_run(x->w, count_nested, x);
    return 0;
}

static void test_orchestration_callback_keeps_its_worker(void)
{
    static struct inside x;
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    REQUIRE(h_open_worker(&w, &o, NULL, 0, 1));
    x.w = w;
    EXPECT_OK(dagrt_worker_run(w, orch_touches_worker, &x));
    CHECKF(x.close == DAGRT_STATUS_WRONG_STATE, "close: %s", dagrt_status_str(x.close));
    CHECKF(x.lanes == DAGRT_STATUS_WRONG_STATE, "add_sub_lanes: %s", dagrt_status_str(x.lanes));
    CHECKF(x.close_for == DAGRT_STATUS_WRONG_STATE, "close_for: %s",
           dagrt_status_str(x.close_for));
    CHECK_EQ_U64(x.closed, 7);
    CHECKF(h_contains(x.free_msg, "orchestration callback"), "free left: %s", x.free_msg);
    /* Nor may it begin another run of its worker, even after failing its own. */
    EXPECT_ERROR(dagrt_worker_run(w, orch_fails_then_resubmits, &x),
                 DAGRT_STATUS_ORCHESTRATION_FAILED, "given up");
    CHECKF(x.submit == DAGRT_STATUS_WRONG_STATE, "submit: %s", dagrt_status_str(x.submit));
    CHECKF(x.run == DAGRT_STATUS_WRONG_STATE, "run: %s", dagrt_status_str(x.run));
    CHECK(x.nested_calls == 0);
    /* The worker is whole: it runs a run and closes. */
    {
        dagrt_run_id run = 0;
        EXPECT_OK(run_one(w, o, "capi-tests.reentry.after_callback", noop, NULL, &run));
        EXPECT_OK(dagrt_release_run(w, run));
    }
    h_close_worker(w);
}

/* A callback run from inside another worker's callback is still inside the outer one: the
 * outer worker can be neither freed nor closed from it, nor its run closed (only the
 * innermost worker was once remembered, and the outer one was freed under its own submit). */
static dagrt_worker_t *outer_w, *inner_w;
static dagrt_run_id outer_run;
static dagrt_status nested_close, nested_close_run;
static char nested_free_msg[256];

static int32_t inner_cb(dagrt_orch_t *o, void *ctx)
{
    (void)o;
    (void)ctx;
    dagrt_worker_free(outer_w);
    keep_msg(nested_free_msg);
    nested_close = dagrt_worker_close(outer_w);
    {
        dagrt_orch_t *oo = NULL;
        nested_close_run = dagrt_worker_orch(outer_w, &oo);
        if (nested_close_run == DAGRT_STATUS_OK)
            nested_close_run = dagrt_close_run_submission(oo, outer_run);
    }
    return 0;
}

static int32_t outer_cb(dagrt_orch_t *o, void *ctx)
{
    dagrt_task_handle h;
    uint64_t shape[1] = {8};
    void *p;
    (void)ctx;
    /* the run's id, from a handle of it */
    if (dagrt_alloc(o, shape, 1, DAGRT_DTYPE_U8, &p, &h) != DAGRT_STATUS_OK) return 1;
    outer_run = h.run_id;
    return dagrt_worker_run(inner_w, inner_cb, NULL) == DAGRT_STATUS_OK ? 0 : 2;
}

static void test_nested_callback_keeps_the_outer_worker(void)
{
    dagrt_orch_t *o, *o2;
    dagrt_run_id run = 0;
    REQUIRE(h_open_worker(&outer_w, &o, NULL, 0, 1));
    REQUIRE(h_open_worker(&inner_w, &o2, NULL, 0, 1));
    EXPECT_OK(dagrt_worker_submit(outer_w, outer_cb, NULL, &run));
    CHECKF(h_contains(nested_free_msg, "orchestration callback"), "free left: %s",
           nested_free_msg);
    CHECKF(nested_close == DAGRT_STATUS_WRONG_STATE, "close: %s",
           dagrt_status_str(nested_close));
    CHECKF(nested_close_run != DAGRT_STATUS_OK, "closing the outer run: %s",
           dagrt_status_str(nested_close_run));
    EXPECT_OK(dagrt_wait_run(outer_w, run));
    EXPECT_OK(dagrt_release_run(outer_w, run));
    h_close_worker(inner_w);
    h_close_worker(outer_w);
}

/* A task that calls dagrt_worker_submit just as the host begins a run is turned away with
 * WRONG_THREAD, never left waiting for the orchestrator's lock: the host holds that lock
 * through a submit that waits for a window slot, which the task's lane would free. (Blocked
 * on the lock, the task held the slot, and the host's submit failed with WINDOW_FULL after
 * its timeout.) Each iteration moves the task's call a little against the host's begin. */
static atomic_int inv_go, inv_started, inv_spin;
static dagrt_status inv_status;
static dagrt_worker_t *inv_w;

static int32_t empty_orch(dagrt_orch_t *o, void *ctx)
{
    (void)o;
    (void)ctx;
    return 0;
}

static int32_t inv_task(const dagrt_task_view *t, void *u)
{
    dagrt_run_id r = 0;
    uint32_t done = 0;
    (void)t;
    (void)u;
    atomic_store(&inv_started, 1);
    while (!atomic_load(&inv_go))
        ;
    for (volatile int i = 0; i < atomic_load(&inv_spin); i++)
        ;
    inv_status = dagrt_worker_submit(inv_w, empty_orch, NULL, &r);
    if (inv_status == DAGRT_STATUS_OK) {
        dagrt_wait_run_for(inv_w, r, 5000, &done);
        dagrt_release_run(inv_w, r);
    }
    return 0;
}

static void test_task_never_waits_for_the_builders_lock(void)
{
    dagrt_worker_config cfg = h_config(0, 2, 2000);
    dagrt_orch_t *o;
    dagrt_callable tc, xc;
    dagrt_task_args args;
    int it, stalled = 0;
    memset(&args, 0, sizeof args);
    REQUIRE(h_open_worker(&inv_w, &o, &cfg, 1, 0));
    REQUIRE_OK(dagrt_register_callable("capi-tests.reentry.inv", 0, DAGRT_CALLABLE_KIND_TASK,
                                       inv_task, NULL, &tc));
    REQUIRE_OK(dagrt_register_callable("capi-tests.reentry.inv_x", 0, DAGRT_CALLABLE_KIND_TASK,
                                       noop, NULL, &xc));
    for (it = 0; it < 300 && !stalled; it++) {
        dagrt_run_id a = 0, b = 0;
        dagrt_status s, sx, sy;
        atomic_store(&inv_go, 0);
        atomic_store(&inv_started, 0);
        atomic_store(&inv_spin, (it * 37) % 4000);
        REQUIRE_OK(dagrt_begin_run(o, &a));
        REQUIRE_OK(dagrt_submit_next_level(o, &tc, &args, NULL, 0, NULL));
        REQUIRE_OK(dagrt_close_run_submission(o, a));
        REQUIRE(H_POLL(atomic_load(&inv_started), 5000));
        atomic_store(&inv_go, 1);
        while ((s = dagrt_begin_run(o, &b)) == DAGRT_STATUS_WRONG_THREAD)
            ; /* the task began its own (empty) run first */
        REQUIRE_OK(s);
        sx = dagrt_submit_next_level(o, &xc, &args, NULL, 0, NULL);
        sy = dagrt_submit_next_level(o, &xc, &args, NULL, 0, NULL);
        stalled = sx != DAGRT_STATUS_OK || sy != DAGRT_STATUS_OK;
        CHECKF(!stalled, "iteration %d: the host's submits returned %s, %s; the task's "
               "dagrt_worker_submit %s", it, dagrt_status_str(sx), dagrt_status_str(sy),
               dagrt_status_str(inv_status));
        REQUIRE_OK(dagrt_close_run_submission(o, b));
        EXPECT_OK(h_wait(inv_w, a));
        EXPECT_OK(h_wait(inv_w, b));
        EXPECT_OK(dagrt_release_run(inv_w, a));
        EXPECT_OK(dagrt_release_run(inv_w, b));
    }
    h_close_worker(inv_w);
}

/* A callback that fails its run, then waits for it and releases it: the status is still
 * ORCHESTRATION_FAILED with the callback's message, whatever the callback returns. */
static int32_t fail_wait_release(dagrt_orch_t *o, void *ctx)
{
    dagrt_task_handle h;
    uint64_t shape[1] = {8};
    void *p;
    dagrt_worker_t *w = *(dagrt_worker_t **)ctx;
    if (dagrt_alloc(o, shape, 1, DAGRT_DTYPE_U8, &p, &h) != DAGRT_STATUS_OK) return 9;
    if (dagrt_fail_run_submission(o, h.run_id, "input file missing") != DAGRT_STATUS_OK)
        return 9;
    if (dagrt_wait_run(w, h.run_id) != DAGRT_STATUS_ORCHESTRATION_FAILED) return 9;
    if (dagrt_release_run(w, h.run_id) != DAGRT_STATUS_OK) return 9;
    return 0;
}

static void test_failed_and_released_inside_its_callback(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run = 0;
    REQUIRE(h_open_worker(&w, &o, NULL, 0, 1));
    EXPECT_ERROR(dagrt_worker_submit(w, fail_wait_release, &w, &run),
                 DAGRT_STATUS_ORCHESTRATION_FAILED, "input file missing");
    EXPECT_ERROR(dagrt_worker_run(w, fail_wait_release, &w), DAGRT_STATUS_ORCHESTRATION_FAILED,
                 "input file missing");
    h_close_worker(w);
}

/* A DAGRT_TRACE file that cannot be created logs one error at init, on the host thread. */
static int hook_a_calls, hook_b_calls;
static dagrt_status set_from_inside = DAGRT_STATUS_SYSTEM;

static void hook_b(uint32_t level, const char *msg, void *user)
{
    (void)msg;
    (void)user;
    /* errors only: the second DAGRT_TRACE worker also says at info which file it records to */
    if (level == DAGRT_LOG_LEVEL_ERROR) hook_b_calls++;
}

static void hook_a(uint32_t level, const char *msg, void *user)
{
    (void)level;
    (void)msg;
    (void)user;
    hook_a_calls++;
    set_from_inside = dagrt_set_log_hook(hook_b, NULL);
}

static void test_log_hook_replaces_itself(void)
{
    dagrt_worker_t *w;
    setenv("DAGRT_TRACE", "/nonexistent-dagrt-dir/reentry.json", 1);
    REQUIRE_OK(dagrt_set_log_hook(hook_a, NULL));
    w = h_worker(NULL, 0, 1);
    CHECK_EQ_U64(hook_a_calls, 1);
    CHECK(set_from_inside == DAGRT_STATUS_OK);
    CHECK_EQ_U64(hook_b_calls, 0);
    h_close_worker(w);
    w = h_worker(NULL, 0, 1);
    unsetenv("DAGRT_TRACE");
    CHECK_EQ_U64(hook_a_calls, 1);
    CHECK_EQ_U64(hook_b_calls, 1);
    h_close_worker(w);
    EXPECT_OK(dagrt_set_log_hook(NULL, NULL));
}

/* Header, dagrt_set_log_hook: "once it returns, no call of the previous hook is still
 * running" and "a hook may call it to replace or remove itself; that change takes effect as
 * the hook returns". A hook re-installing itself (on a thread initialising a worker) while
 * the host replaces it: the host's call waits for the hook, returns, and stays in force. */
static _Atomic int g_self_in_hook, g_self_a_after;
static _Atomic int g_self_replaced;

static void hook_self(uint32_t level, const char *msg, void *user)
{
    (void)level;
    (void)msg;
    if (atomic_load(&g_self_replaced))
        atomic_fetch_add(&g_self_a_after, 1);
    dagrt_set_log_hook(hook_self, (void *)((uintptr_t)user + 1));
    atomic_store(&g_self_in_hook, 1);
    h_sleep_us(50 * 1000);
}

static void hook_host(uint32_t level, const char *msg, void *user)
{
    (void)level;
    (void)msg;
    (void)user;
}

static void *init_with_hook(void *arg)
{
    dagrt_worker_init((dagrt_worker_t *)arg);
    return NULL;
}

static void test_log_hook_self_change_yields_to_a_later_install(void)
{
    setenv("DAGRT_TRACE", "/nonexistent-dagrt-dir/reentry-self.json", 1);
    for (int i = 0; i < 5; i++) {
        dagrt_worker_t *w = NULL;
        pthread_t th;
        atomic_store(&g_self_in_hook, 0);
        atomic_store(&g_self_replaced, 0);
        REQUIRE_OK(dagrt_set_log_hook(hook_self, (void *)1));
        REQUIRE_OK(dagrt_worker_new(NULL, &w));
        REQUIRE_OK(dagrt_worker_add_sub_lanes(w, 1));
        REQUIRE(pthread_create(&th, NULL, init_with_hook, w) == 0);
        REQUIRE(H_POLL(atomic_load(&g_self_in_hook), 5000));
        /* waits for the hook's call, which has asked to re-install itself */
        EXPECT_OK(dagrt_set_log_hook(hook_host, NULL));
        atomic_store(&g_self_replaced, 1);
        pthread_join(th, NULL);
        dagrt_worker_free(w);
        /* another message: it must reach hook_host, not the re-installed hook_self */
        w = h_worker(NULL, 0, 1);
        h_close_worker(w);
    }
    unsetenv("DAGRT_TRACE");
    CHECKF(atomic_load(&g_self_a_after) == 0,
           "a hook's own re-install, asked for before the host's dagrt_set_log_hook returned, "
           "undid it: the replaced hook was called %d times after",
           atomic_load(&g_self_a_after));
    EXPECT_OK(dagrt_set_log_hook(NULL, NULL));
}

/* A hook that tries to reconfigure and free the worker whose init calls it. */
static dagrt_worker_t *initing;
static dagrt_status hook_lanes = DAGRT_STATUS_OK;
static char hook_free_msg[MSG];

static void hook_frees(uint32_t level, const char *msg, void *user)
{
    (void)level;
    (void)msg;
    (void)user;
    hook_lanes = dagrt_worker_add_sub_lanes(initing, 1);
    dagrt_worker_free(initing);
    keep_msg(hook_free_msg);
}

static void test_log_hook_cannot_free_a_worker(void)
{
    dagrt_worker_t *w = NULL;
    dagrt_orch_t *o = NULL;
    dagrt_run_id run = 0;
    REQUIRE_OK(dagrt_worker_new(NULL, &w));
    REQUIRE_OK(dagrt_worker_add_sub_lanes(w, 1));
    initing = w;
    setenv("DAGRT_TRACE", "/nonexistent-dagrt-dir/reentry-free.json", 1);
    REQUIRE_OK(dagrt_set_log_hook(hook_frees, NULL));
    EXPECT_OK(dagrt_worker_init(w));
    unsetenv("DAGRT_TRACE");
    EXPECT_OK(dagrt_set_log_hook(NULL, NULL));
    CHECKF(hook_lanes == DAGRT_STATUS_WRONG_STATE, "add_sub_lanes in the hook: %s",
           dagrt_status_str(hook_lanes));
    CHECKF(h_contains(hook_free_msg, "log hook"), "free in the hook left: %s", hook_free_msg);
    /* The worker is whole. */
    if (EXPECT_OK(dagrt_worker_orch(w, &o))) {
        EXPECT_OK(run_one(w, o, "capi-tests.reentry.after_hook", noop, NULL, &run));
        EXPECT_OK(dagrt_release_run(w, run));
    }
    h_close_worker(w);
}

int main(void)
{
    h_begin("reentry", 60);
    RUN_TEST(test_own_worker_refused);
    RUN_TEST(test_other_runs_allowed);
    RUN_TEST(test_task_fail_from_threads);
    RUN_TEST(test_orchestration_callback_keeps_its_worker);
    RUN_TEST(test_nested_callback_keeps_the_outer_worker);
    RUN_TEST(test_failed_and_released_inside_its_callback);
    RUN_TEST(test_task_never_waits_for_the_builders_lock);
    RUN_TEST(test_log_hook_replaces_itself);
    RUN_TEST(test_log_hook_self_change_yields_to_a_later_install);
    RUN_TEST(test_log_hook_cannot_free_a_worker);
    return h_done();
}
