/*
 * test_deps.c: explicit dependencies (Orchestrator seed §1, §2 step 3/5, §8b "Consumer
 * interaction").
 *  - add_dep and add_dep_wait order a consumer after its producer, whether added before or
 *    after the tensors;
 *  - thousands of deps on one task (no cap), live and completed producers mixed;
 *  - a dep on a producer that already completed, or was already consumed, is satisfied;
 *  - handles are checked: another run -> FOREIGN_HANDLE (STALE_HANDLE once that run is
 *    released), another worker -> FOREIGN_HANDLE, a slot not yet submitted -> STALE_HANDLE,
 *    a bad dep kind -> INVALID_ARGUMENT; rejected submits leave no trace;
 *  - add_dep (and a tensor edge) retains the producer (slot, TensorMap entry, heap slab)
 *    until the consumer finishes; add_dep_wait does not. Observed with dagrt_worker_stats;
 *  - the TensorMap is per run (Orchestrator seed §7): with two runs of one worker live at
 *    once, a task of the later run that touches a buffer the earlier run's blocked writer
 *    produces gets no edge to it (INPUT and INOUT alike), while a reader of the same run does.
 */
#include "harness.h"

static void test_add_dep_before_and_after_tensors(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_task_handle hp1, hp2, hp3;
    uint64_t unrelated[4] = {0};
    dagrt_tensor tu = h_tensor(unrelated, 4, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    h_step p1 = h_step_id(1), p2 = h_step_id(2), p3 = h_step_id(3);
    REQUIRE(h_open_worker(&w, &o, NULL, 3, 0));
    p1.sleep_us = p2.sleep_us = p3.sleep_us = 20000;
    REQUIRE_OK(dagrt_begin_run(o, &run));
    SUBMIT_STEP(o, &p1, 0, NULL, 0, NULL, 0, &hp1);
    SUBMIT_STEP(o, &p2, 1, NULL, 0, NULL, 0, &hp2);
    SUBMIT_STEP(o, &p3, 0, NULL, 0, NULL, 0, &hp3);
    CHECK_EQ_U64(hp1.run_id, run);
    CHECK(hp1.slot != hp2.slot && hp2.slot != hp3.slot);
    for (int k = 0; k < 4; k++) {
        /* k = 0: add_dep before tensors; 1: add_dep after; 2: add_dep_wait before; 3: after */
        dagrt_args_t *a = NULL;
        dagrt_task_args v;
        uint64_t sc[S_COUNT];
        h_step c = h_step_id(10 + (uint64_t)k);
        dagrt_task_handle target = (k % 2 == 0) ? hp1 : hp2;
        h_step_scalars(&c, sc);
        REQUIRE_OK(dagrt_args_new(&a));
        if (k == 0)
            EXPECT_OK(dagrt_args_add_dep(a, target));
        if (k == 2)
            EXPECT_OK(dagrt_args_add_dep_wait(a, target));
        EXPECT_OK(dagrt_args_add_tensor(a, &tu));
        for (int i = 0; i < S_COUNT; i++)
            EXPECT_OK(dagrt_args_add_scalar(a, sc[i]));
        if (k == 1)
            EXPECT_OK(dagrt_args_add_dep(a, target));
        if (k == 3)
            EXPECT_OK(dagrt_args_add_dep_wait(a, target));
        EXPECT_OK(dagrt_args_view(a, &v));
        CHECK_EQ_U64(v.num_deps, 1);
        CHECK_EQ_U64(v.deps[0].kind, k < 2 ? DAGRT_DEP_KIND_RETAIN : DAGRT_DEP_KIND_WAIT);
        EXPECT_OK(dagrt_submit_next_level(o, h_step_callable(), &v, NULL, 2, NULL));
        /* the builder is reusable after clear */
        EXPECT_OK(dagrt_args_clear(a));
        EXPECT_OK(dagrt_args_view(a, &v));
        CHECK(v.num_deps == 0 && v.num_tensors == 0 && v.num_scalars == 0);
        dagrt_args_free(a);
    }
    /* raw dep array: both kinds on two producers */
    {
        dagrt_dep d[2];
        h_step c = h_step_id(20);
        d[0] = h_dep(hp3, DAGRT_DEP_KIND_WAIT);
        d[1] = h_dep(hp2, DAGRT_DEP_KIND_RETAIN);
        SUBMIT_STEP(o, &c, 2, NULL, 0, d, 2, NULL);
    }
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_BEFORE(1, 10);
    CHECK_BEFORE(2, 11);
    CHECK_BEFORE(1, 12);
    CHECK_BEFORE(2, 13);
    CHECK_BEFORE(3, 20);
    CHECK_BEFORE(2, 20);
    for (int k = 0; k < 4; k++)
        CHECK_RAN_ONCE(10 + k);
    h_close_worker(w);
}

#define MANY 3000

static void test_thousands_of_deps(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    static dagrt_dep deps[MANY];
    h_step c = h_step_id(MANY), c2 = h_step_id(MANY + 1);
    REQUIRE(h_open_worker(&w, &o, NULL, 3, 0));
    REQUIRE_OK(dagrt_begin_run(o, &run));
    for (int i = 0; i < MANY; i++) {
        h_step p = h_step_id((uint64_t)i);
        dagrt_task_handle h;
        if (i == 0)
            p.wait_gate = 0; /* lane 0 stays busy until every consumer is submitted */
        if (!SUBMIT_STEP(o, &p, i % 2, NULL, 0, NULL, 0, &h)) {
            h_gate_open(0);
            dagrt_close_run_submission(o, run);
            h_wait(w, run);
            dagrt_worker_free(w);
            return;
        }
        deps[i] = h_dep(h, (i % 3 == 0) ? DAGRT_DEP_KIND_WAIT : DAGRT_DEP_KIND_RETAIN);
    }
    SUBMIT_STEP(o, &c, 2, NULL, 0, deps, MANY, NULL);
    /* the same thousands through the builder, all ordering-only */
    {
        dagrt_args_t *a = NULL;
        dagrt_task_args v;
        uint64_t sc[S_COUNT];
        h_step_scalars(&c2, sc);
        REQUIRE_OK(dagrt_args_new(&a));
        for (int i = 0; i < MANY; i++)
            if (dagrt_args_add_dep_wait(a, deps[i].handle) != DAGRT_STATUS_OK) {
                H_FAIL("add_dep_wait #%d: %s", i, dagrt_last_error());
                break;
            }
        for (int i = 0; i < S_COUNT; i++)
            EXPECT_OK(dagrt_args_add_scalar(a, sc[i]));
        EXPECT_OK(dagrt_args_view(a, &v));
        CHECK_EQ_U64(v.num_deps, MANY);
        EXPECT_OK(dagrt_submit_next_level(o, h_step_callable(), &v, NULL, 2, NULL));
        dagrt_args_free(a);
    }
    h_gate_open(0);
    EXPECT_OK(h_finish_run(w, o, run));
    {
        uint64_t last_end = 0;
        int bad = 0;
        for (int i = 0; i < MANY; i++) {
            if (h_runs(i) != 1)
                bad++;
            if (h_end(i) > last_end)
                last_end = h_end(i);
        }
        CHECKF(bad == 0, "%d producers did not run exactly once", bad);
        CHECK_RAN_ONCE(MANY);
        CHECK_RAN_ONCE(MANY + 1);
        CHECKF(h_start(MANY) > last_end && h_start(MANY + 1) > last_end,
               "consumers started at %" PRIu64 "/%" PRIu64 " before the last producer ended (%" PRIu64 ")",
               h_start(MANY), h_start(MANY + 1), last_end);
    }
    h_close_worker(w);
}

/* Submits step `id` to lane 1 with one dependency of `kind` on `producer`. */
static void submit_consumer(dagrt_orch_t *o, uint64_t id, dagrt_task_handle producer,
                            uint32_t kind)
{
    h_step c = h_step_id(id);
    dagrt_dep d = h_dep(producer, kind);
    if (!SUBMIT_STEP(o, &c, 1, NULL, 0, &d, 1, NULL))
        fprintf(stderr, "    (consumer %" PRIu64 ")\n", id);
}

static void test_dep_on_finished_producer(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_task_handle hp, hq;
    h_step p = h_step_id(1), q = h_step_id(2);
    REQUIRE(h_open_worker(&w, &o, NULL, 2, 0));
    REQUIRE_OK(dagrt_begin_run(o, &run));
    /* p completes (and stays COMPLETED: the outer scope still holds it) */
    SUBMIT_STEP(o, &p, 0, NULL, 0, NULL, 0, &hp);
    CHECK(H_POLL(h_run_stats(w, run).completed == 1, 5000));
    submit_consumer(o, 10, hp, DAGRT_DEP_KIND_RETAIN);
    submit_consumer(o, 11, hp, DAGRT_DEP_KIND_WAIT);
    /* q runs in a nested scope that ends with no consumer: q is consumed (its slot freed) */
    REQUIRE_OK(dagrt_scope_begin(o));
    SUBMIT_STEP(o, &q, 0, NULL, 0, NULL, 0, &hq);
    REQUIRE_OK(dagrt_scope_end(o));
    CHECK(H_POLL(h_run_stats(w, run).completed == 4, 5000));
    CHECKF(H_POLL(h_run_stats(w, run).live_slots == 3, 5000),
           "q should be consumed: live_slots = %" PRId64, h_run_stats(w, run).live_slots);
    submit_consumer(o, 12, hq, DAGRT_DEP_KIND_RETAIN);
    submit_consumer(o, 13, hq, DAGRT_DEP_KIND_WAIT);
    EXPECT_OK(h_finish_run(w, o, run));
    for (int i = 10; i < 14; i++)
        CHECK_RAN_ONCE(i);
    CHECK_BEFORE(1, 10);
    CHECK_BEFORE(2, 12);
    h_close_worker(w);
}

static void test_handle_checks(void)
{
    dagrt_worker_t *w = h_worker(NULL, 2, 0), *w2 = h_worker(NULL, 1, 0);
    dagrt_orch_t *o, *o2;
    dagrt_run_id run1, run2, run_other;
    dagrt_task_handle h1, h2, h_other, out = {5, 5};
    dagrt_dep d;
    h_step s = h_step_id(1);
    dagrt_run_stats_t rs;
    REQUIRE(w != NULL && w2 != NULL);
    o = h_orch(w);
    o2 = h_orch(w2);

    REQUIRE_OK(dagrt_begin_run(o, &run1));
    SUBMIT_STEP(o, &s, 0, NULL, 0, NULL, 0, &h1);
    EXPECT_OK(dagrt_close_run_submission(o, run1));
    EXPECT_OK(h_wait(w, run1));

    /* another worker's live run */
    REQUIRE_OK(dagrt_begin_run(o2, &run_other));
    s.id = 2;
    SUBMIT_STEP(o2, &s, 0, NULL, 0, NULL, 0, &h_other);

    REQUIRE_OK(dagrt_begin_run(o, &run2));
    CHECK(run2 != run1 && run2 != run_other);
    s.id = 3;
    SUBMIT_STEP(o, &s, 1, NULL, 0, NULL, 0, &h2);

    /* a handle of the previous (finished, not released) run */
    s.id = 4;
    d = h_dep(h1, DAGRT_DEP_KIND_RETAIN);
    EXPECT_ERROR(h_submit_step(o, &s, 1, NULL, 0, &d, 1, &out), DAGRT_STATUS_FOREIGN_HANDLE, NULL);
    d = h_dep(h1, DAGRT_DEP_KIND_WAIT);
    EXPECT_ERROR(h_submit_step(o, &s, 1, NULL, 0, &d, 1, &out), DAGRT_STATUS_FOREIGN_HANDLE, NULL);
    /* ... and once it is released */
    EXPECT_OK(dagrt_release_run(w, run1));
    d = h_dep(h1, DAGRT_DEP_KIND_RETAIN);
    EXPECT_ERROR(h_submit_step(o, &s, 1, NULL, 0, &d, 1, &out), DAGRT_STATUS_STALE_HANDLE, NULL);
    /* a handle of another worker's live run */
    d = h_dep(h_other, DAGRT_DEP_KIND_RETAIN);
    EXPECT_ERROR(h_submit_step(o, &s, 1, NULL, 0, &d, 1, &out), DAGRT_STATUS_FOREIGN_HANDLE, NULL);
    /* slots of this run that were never submitted */
    {
        dagrt_task_handle bad = h2;
        bad.slot = h2.slot + 1;
        d = h_dep(bad, DAGRT_DEP_KIND_RETAIN);
        EXPECT_ERROR(h_submit_step(o, &s, 1, NULL, 0, &d, 1, &out), DAGRT_STATUS_STALE_HANDLE, NULL);
        bad.slot = h2.slot + 1000;
        d = h_dep(bad, DAGRT_DEP_KIND_WAIT);
        EXPECT_ERROR(h_submit_step(o, &s, 1, NULL, 0, &d, 1, &out), DAGRT_STATUS_STALE_HANDLE, NULL);
        bad.slot = h1.slot; /* this run's id with the previous run's slot */
        d = h_dep(bad, DAGRT_DEP_KIND_RETAIN);
        EXPECT_ERROR(h_submit_step(o, &s, 1, NULL, 0, &d, 1, &out), DAGRT_STATUS_STALE_HANDLE, NULL);
        bad.slot = 0;
        EXPECT_ERROR(h_submit_step(o, &s, 1, NULL, 0, &d, 1, &out), DAGRT_STATUS_STALE_HANDLE, NULL);
        /* a run id that never existed */
        bad.run_id = 0xFFFFFFFFFFFFull;
        bad.slot = h2.slot;
        d = h_dep(bad, DAGRT_DEP_KIND_RETAIN);
        EXPECT_ERROR(h_submit_step(o, &s, 1, NULL, 0, &d, 1, &out), DAGRT_STATUS_STALE_HANDLE, NULL);
    }
    /* a dep kind that is not a dagrt_dep_kind */
    d = h_dep(h2, 5);
    EXPECT_ERROR(h_submit_step(o, &s, 1, NULL, 0, &d, 1, &out), DAGRT_STATUS_INVALID_ARGUMENT, "kind");
    CHECK_EQ_U64(out.slot, 5); /* never written */
    /* a good kind with a non-zero reserved field: the message names the field */
    d = h_dep(h2, DAGRT_DEP_KIND_RETAIN);
    d.reserved = 1;
    EXPECT_ERROR(h_submit_step(o, &s, 1, NULL, 0, &d, 1, &out), DAGRT_STATUS_INVALID_ARGUMENT,
                 "reserved field");
    /* none of the rejected submits left a slot behind */
    rs = h_run_stats(w, run2);
    CHECK_EQ_I64(rs.live_slots, 1);
    /* a good handle still works, and the rejected task never ran */
    d = h_dep(h2, DAGRT_DEP_KIND_RETAIN);
    s.id = 5;
    SUBMIT_STEP(o, &s, 0, NULL, 0, &d, 1, NULL);
    EXPECT_OK(h_finish_run(w, o, run2));
    EXPECT_OK(h_finish_run(w2, o2, run_other));
    CHECK_NEVER_RAN(4);
    CHECK_RAN_ONCE(5);
    CHECK_BEFORE(3, 5);
    h_close_worker(w);
    h_close_worker(w2);
}

/* Retention, observed through dagrt_worker_stats. p auto-allocates a slab on ring 1 (a nested
 * scope) and completes; c (also in the scope) depends on p and blocks. The scope ends. */
static void retention_case(int kind)
{
    /* kind 0: add_dep (retain); 1: a tensor (INPUT on p's slab, retain); 2: add_dep_wait */
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_tensor tp = h_tensor(NULL, 128, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT);
    dagrt_tensor tc;
    dagrt_task_handle hp;
    dagrt_dep d;
    dagrt_worker_stats_t st;
    h_step p = h_step_id(1), c = h_step_id(2);
    REQUIRE(h_open_worker(&w, &o, NULL, 2, 0));
    c.wait_gate = 0;
    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE_OK(dagrt_scope_begin(o));
    SUBMIT_STEP(o, &p, 0, &tp, 1, NULL, 0, &hp);
    REQUIRE(tp.data != NULL);
    if (kind == 1) {
        tc = h_tensor(tp.data, 128, DAGRT_DTYPE_F64, DAGRT_TAG_INPUT);
        SUBMIT_STEP(o, &c, 1, &tc, 1, NULL, 0, NULL);
    } else {
        d = h_dep(hp, kind == 0 ? DAGRT_DEP_KIND_RETAIN : DAGRT_DEP_KIND_WAIT);
        SUBMIT_STEP(o, &c, 1, NULL, 0, &d, 1, NULL);
    }
    REQUIRE_OK(dagrt_scope_end(o));
    /* p completed and its completion was processed; c is blocked */
    CHECK(H_POLL(h_run_stats(w, run).completed == 1, 5000));
    if (kind == 2) {
        /* ordering-only: p is consumed although c has not finished */
        CHECKF(H_POLL(h_stats(w).live_slots == 1, 5000),
               "add_dep_wait must not retain the producer: live_slots = %" PRId64,
               h_stats(w).live_slots);
        st = h_stats(w);
        CHECK(h_ring_empty(&st, 1));
        CHECK_EQ_U64(st.tensormap_entries, 0);
    } else {
        h_sleep_us(20000); /* a wrong early release would have happened by now */
        st = h_stats(w);
        CHECKF(st.live_slots == 2, "retained producer released early: live_slots = %" PRId64,
               st.live_slots);
        CHECKF(st.heap_top[1] - st.heap_tail[1] >= 1024,
               "the producer's slab was reclaimed while retained (ring 1 top %" PRIu64
               ", tail %" PRIu64 ")",
               st.heap_top[1], st.heap_tail[1]);
        CHECKF(st.tensormap_entries == 1, "tensormap_entries = %" PRIu64, st.tensormap_entries);
    }
    CHECK(h_end(2) == 0); /* c still running */
    h_gate_open(0);
    /* once c finishes, everything of the ended scope is reclaimed, run still open */
    CHECKF(H_POLL(h_quiescent_now(w), 5000), "scope not reclaimed after the consumer finished");
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(1);
    CHECK_RAN_ONCE(2);
    CHECK_BEFORE(1, 2);
    h_close_worker(w);
}

static void test_add_dep_retains_producer(void)
{
    retention_case(0);
}

static void test_tensor_edge_retains_producer(void)
{
    retention_case(1);
}

static void test_add_dep_wait_does_not_retain(void)
{
    retention_case(2);
}

/* Run A writes x with a task blocked on a gate, and a reader of x in run A waits for it.
 * Run A is closed and run B begun on the same worker while the writer still runs. Run B's
 * INPUT reader and INOUT updater of x (on other lanes) must finish, and run B with them,
 * while A's writer is still blocked: the TensorMap resolves producers within a run only. */
static void test_runs_do_not_share_producers(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run_a, run_b;
    uint64_t x[8] = {0};
    dagrt_tensor tw = h_tensor(x, 8, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT_EXISTING);
    dagrt_tensor tra = h_tensor(x, 8, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    /* run B: a reader of x[0..4] and an updater of x[4..8] (disjoint: no edge between them) */
    dagrt_tensor trb = h_tensor(x, 4, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    dagrt_tensor tub = h_tensor(x + 4, 4, DAGRT_DTYPE_U64, DAGRT_TAG_INOUT);
    dagrt_run_stats_t rs;
    uint32_t done = 9;
    h_step wa = h_step_id(1), ra = h_step_id(2), rb = h_step_id(3), ub = h_step_id(4);
    REQUIRE(h_open_worker(&w, &o, NULL, 4, 0));
    wa.wait_gate = 0; /* A's writer runs until the test opens gate 0 */
    wa.op = H_OP_FILL;
    wa.operand = 1;
    ra.op = H_OP_READ;
    rb.op = H_OP_READ;
    ub.op = H_OP_APPEND;
    ub.operand = 7;

    REQUIRE_OK(dagrt_begin_run(o, &run_a));
    SUBMIT_STEP(o, &wa, 0, &tw, 1, NULL, 0, NULL);
    SUBMIT_STEP(o, &ra, 1, &tra, 1, NULL, 0, NULL); /* same run: RaW on the writer */
    EXPECT_OK(dagrt_close_run_submission(o, run_a));
    REQUIRE(H_POLL(h_start(1) != 0, 5000)); /* the writer is running (and blocked) */

    REQUIRE_OK(dagrt_begin_run(o, &run_b));
    CHECK(run_b != run_a);
    SUBMIT_STEP(o, &rb, 2, &trb, 1, NULL, 0, NULL);
    SUBMIT_STEP(o, &ub, 3, &tub, 1, NULL, 0, NULL);
    EXPECT_OK(dagrt_close_run_submission(o, run_b));
    /* (well within the writer's gate timeout, H_BLOCK_TIMEOUT_MS) */
    CHECKF(H_POLL(h_end(3) != 0 && h_end(4) != 0, 2000),
           "run B's reader/updater of x did not finish while run A's writer of x was blocked "
           "(ends: %" PRIu64 ", %" PRIu64 "): a producer was resolved across runs",
           h_end(3), h_end(4));
    EXPECT_OK(dagrt_wait_run_for(w, run_b, 1000 * h_time_scale(), &done));
    CHECKF(done == 1, "run B did not finish while run A's writer was blocked");
    /* the writer is still blocked, and so is the same-run reader */
    CHECKF(h_end(1) == 0, "run A's writer ended before its gate opened");
    CHECKF(h_start(2) == 0, "run A's reader started before run A's writer ended");
    done = 9;
    EXPECT_OK(dagrt_run_done(w, run_a, &done));
    CHECK_EQ_U64(done, 0);
    /* what B saw is x as it was, untouched by A's (unfinished) fill */
    CHECK(h_read[3] == 0);
    h_gate_open(0);
    EXPECT_OK(h_wait(w, run_a));
    EXPECT_OK(dagrt_run_stats(w, run_a, &rs));
    CHECK_EQ_U64(rs.completed, 2);
    EXPECT_OK(dagrt_run_stats(w, run_b, &rs));
    CHECK_EQ_U64(rs.completed, 2);
    CHECK_EQ_U64(rs.failed, 0);
    EXPECT_OK(dagrt_release_run(w, run_a));
    EXPECT_OK(dagrt_release_run(w, run_b));
    for (int i = 1; i <= 4; i++)
        CHECK_RAN_ONCE(i);
    CHECK_BEFORE(1, 2);
    CHECKF(h_end(3) < h_end(1) && h_end(4) < h_end(1),
           "run B's tasks (ends %" PRIu64 ", %" PRIu64 ") did not end while run A's writer "
           "(end %" PRIu64 ") ran", h_end(3), h_end(4), h_end(1));
    CHECK(h_read[2] == 8); /* A's reader saw A's fill */
    h_close_worker(w);
}

int main(void)
{
    h_begin("deps", 90);
    RUN_TEST(test_add_dep_before_and_after_tensors);
    RUN_TEST(test_thousands_of_deps);
    RUN_TEST(test_dep_on_finished_producer);
    RUN_TEST(test_handle_checks);
    RUN_TEST(test_add_dep_retains_producer);
    RUN_TEST(test_tensor_edge_retains_producer);
    RUN_TEST(test_add_dep_wait_does_not_retain);
    RUN_TEST(test_runs_do_not_share_producers);
    return h_done();
}
