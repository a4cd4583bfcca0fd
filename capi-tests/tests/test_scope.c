/*
 * test_scope.c: scopes (Orchestrator seed §6).
 *  - up to 64 nested scopes on top of the run's outer scope; the 65th -> SCOPE_TOO_DEEP;
 *  - scope_end without a matching begin -> SCOPE_UNBALANCED; scope calls with no run open ->
 *    WRONG_STATE;
 *  - close_run_submission with a nested scope open -> SCOPE_UNBALANCED and the run stays open
 *    (submits still work); ending the scope lets close succeed;
 *  - scope_end is non-blocking: it returns while tasks of that scope are still running;
 *  - leaf tasks of an ended scope are reclaimed while the run is still open (slot, TensorMap
 *    entry, heap slab), even while a long outer-scope task holds ring 0; outer-scope leaves
 *    stay referenced until submission closes; the TensorMap entries of host buffers written
 *    in an ended scope are erased as its tasks are consumed, while the run is open;
 *  - dagrt_worker_submit ends the nested scopes a callback leaves open.
 */
#include "harness.h"

static void test_depth_limit(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    int opened = 0;
    REQUIRE(h_open_worker(&w, &o, NULL, 1, 0));
    REQUIRE_OK(dagrt_begin_run(o, &run));
    for (int i = 0; i < DAGRT_MAX_SCOPE_DEPTH; i++) {
        if (!EXPECT_OK(dagrt_scope_begin(o)))
            break;
        opened++;
        if (i == 31) {
            h_step s = h_step_id(1);
            SUBMIT_STEP(o, &s, 0, NULL, 0, NULL, 0, NULL);
        }
    }
    CHECK_EQ_U64(opened, 64);
    EXPECT_ERROR(dagrt_scope_begin(o), DAGRT_STATUS_SCOPE_TOO_DEEP, "64");
    EXPECT_ERROR(dagrt_scope_begin(o), DAGRT_STATUS_SCOPE_TOO_DEEP, "64");
    {
        /* still usable at depth 64 */
        h_step s = h_step_id(2);
        dagrt_tensor t = h_tensor(NULL, 4, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT);
        SUBMIT_STEP(o, &s, 0, &t, 1, NULL, 0, NULL);
    }
    for (int i = 0; i < opened; i++)
        if (!EXPECT_OK(dagrt_scope_end(o)))
            break;
    EXPECT_ERROR(dagrt_scope_end(o), DAGRT_STATUS_SCOPE_UNBALANCED, NULL);
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(1);
    CHECK_RAN_ONCE(2);
    h_close_worker(w);
}

static void test_unbalanced_and_wrong_state(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    REQUIRE(h_open_worker(&w, &o, NULL, 1, 0));
    EXPECT_ERROR(dagrt_scope_begin(o), DAGRT_STATUS_WRONG_STATE, NULL);
    EXPECT_ERROR(dagrt_scope_end(o), DAGRT_STATUS_WRONG_STATE, NULL);
    REQUIRE_OK(dagrt_begin_run(o, &run));
    /* the run's outer scope is not the caller's to end */
    EXPECT_ERROR(dagrt_scope_end(o), DAGRT_STATUS_SCOPE_UNBALANCED, NULL);
    REQUIRE_OK(dagrt_scope_begin(o));
    REQUIRE_OK(dagrt_scope_end(o));
    EXPECT_ERROR(dagrt_scope_end(o), DAGRT_STATUS_SCOPE_UNBALANCED, NULL);
    {
        h_step s = h_step_id(1);
        SUBMIT_STEP(o, &s, 0, NULL, 0, NULL, 0, NULL);
    }
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(1);
    EXPECT_ERROR(dagrt_scope_end(o), DAGRT_STATUS_WRONG_STATE, NULL);
    h_close_worker(w);
}

static void test_close_with_open_scope(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    uint32_t done = 9;
    REQUIRE(h_open_worker(&w, &o, NULL, 1, 0));
    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE_OK(dagrt_scope_begin(o));
    REQUIRE_OK(dagrt_scope_begin(o));
    {
        h_step s = h_step_id(1);
        SUBMIT_STEP(o, &s, 0, NULL, 0, NULL, 0, NULL);
    }
    EXPECT_ERROR(dagrt_close_run_submission(o, run), DAGRT_STATUS_SCOPE_UNBALANCED, NULL);
    /* the run stays open: not done, still accepting submits */
    CHECK(H_POLL(h_end(1) != 0, 5000));
    EXPECT_OK(dagrt_run_done(w, run, &done));
    CHECK_EQ_U64(done, 0);
    {
        h_step s = h_step_id(2);
        SUBMIT_STEP(o, &s, 0, NULL, 0, NULL, 0, NULL);
    }
    REQUIRE_OK(dagrt_scope_end(o));
    EXPECT_ERROR(dagrt_close_run_submission(o, run), DAGRT_STATUS_SCOPE_UNBALANCED, NULL);
    REQUIRE_OK(dagrt_scope_end(o));
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(1);
    CHECK_RAN_ONCE(2);
    /* a new run can begin: the old one is closed */
    REQUIRE_OK(dagrt_begin_run(o, &run));
    EXPECT_OK(h_finish_run(w, o, run));
    h_close_worker(w);
}

static void test_scope_end_non_blocking(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    uint32_t done = 9;
    h_step a = h_step_id(1), b = h_step_id(2);
    REQUIRE(h_open_worker(&w, &o, NULL, 2, 0));
    a.wait_gate = 0;
    b.wait_gate = 0;
    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE_OK(dagrt_scope_begin(o));
    SUBMIT_STEP(o, &a, 0, NULL, 0, NULL, 0, NULL);
    SUBMIT_STEP(o, &b, 1, NULL, 0, NULL, 0, NULL);
    CHECK(H_POLL(h_start(1) != 0 && h_start(2) != 0, 5000));
    /* returns although both tasks of the scope are blocked */
    EXPECT_OK(dagrt_scope_end(o));
    CHECK(h_end(1) == 0 && h_end(2) == 0);
    EXPECT_OK(dagrt_run_done(w, run, &done));
    CHECK_EQ_U64(done, 0);
    h_gate_open(0);
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(1);
    CHECK_RAN_ONCE(2);
    h_close_worker(w);
}

static int ring_empty_now(dagrt_worker_t *w, int r)
{
    dagrt_worker_stats_t st = h_stats(w);
    return h_ring_empty(&st, r);
}

static void test_leaves_of_ended_scope_reclaimed(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_worker_stats_t st;
    dagrt_tensor tl = h_tensor(NULL, 256, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT);
    h_step longer = h_step_id(100);
    uint32_t done = 9;
    REQUIRE(h_open_worker(&w, &o, NULL, 2, 0));
    longer.wait_gate = 0; /* a long-lived outer-scope task holding a ring 0 slab */
    REQUIRE_OK(dagrt_begin_run(o, &run));
    SUBMIT_STEP(o, &longer, 0, &tl, 1, NULL, 0, NULL);
    for (int round = 0; round < 3; round++) {
        REQUIRE_OK(dagrt_scope_begin(o));
        for (int i = 0; i < 10; i++) {
            dagrt_tensor t = h_tensor(NULL, 128, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT);
            h_step s = h_step_id(1 + (uint64_t)(round * 10 + i));
            SUBMIT_STEP(o, &s, 1, &t, 1, NULL, 0, NULL);
        }
        st = h_stats(w);
        CHECK(st.heap_top[1] > st.heap_tail[1]);
        REQUIRE_OK(dagrt_scope_end(o));
        /* every leaf of the ended scope is reclaimed while the run is open and the outer
         * task still holds ring 0 */
        CHECKF(H_POLL(ring_empty_now(w, 1) && h_stats(w).live_slots == 1, 5000),
               "round %d: ended scope not reclaimed (live_slots %" PRId64 ")", round,
               h_stats(w).live_slots);
        st = h_stats(w);
        CHECK_EQ_U64(st.tensormap_entries, 1); /* only the outer task's output */
        CHECK(!h_ring_empty(&st, 0));
    }
    CHECK(h_end(100) == 0);
    h_gate_open(0);
    /* an outer-scope leaf is still referenced by the open outer scope */
    CHECK(H_POLL(h_run_stats(w, run).completed == 31, 5000));
    h_sleep_us(10000);
    st = h_stats(w);
    CHECK_EQ_I64(st.live_slots, 1);
    CHECK(!h_ring_empty(&st, 0));
    EXPECT_OK(dagrt_run_done(w, run, &done));
    CHECK_EQ_U64(done, 0);
    EXPECT_OK(h_finish_run(w, o, run));
    for (int i = 1; i <= 30; i++)
        CHECK_RAN_ONCE(i);
    CHECK_RAN_ONCE(100);
    h_close_worker(w);
}

/* The same for tasks that write the host's own buffers: their TensorMap entries are erased
 * as they are consumed, while the run is still open (not only when the run's map is dropped
 * at its end). */
static double host_bufs[10][16];

static void test_ended_scope_erases_its_tensormap_entries(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    static double outer[16];
    dagrt_tensor to = h_tensor(outer, 16, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT);
    h_step longer = h_step_id(300);
    REQUIRE(h_open_worker(&w, &o, NULL, 2, 0));
    longer.wait_gate = 1;
    REQUIRE_OK(dagrt_begin_run(o, &run));
    SUBMIT_STEP(o, &longer, 0, &to, 1, NULL, 0, NULL);
    for (int round = 0; round < 3; round++) {
        REQUIRE_OK(dagrt_scope_begin(o));
        for (int i = 0; i < 10; i++) {
            dagrt_tensor t = h_tensor(host_bufs[i], 16, DAGRT_DTYPE_F64,
                                      i % 2 ? DAGRT_TAG_INOUT : DAGRT_TAG_OUTPUT);
            h_step s = h_step_id(200 + (uint64_t)(round * 10 + i));
            SUBMIT_STEP(o, &s, 1, &t, 1, NULL, 0, NULL);
        }
        CHECK(h_stats(w).tensormap_entries >= 11);
        REQUIRE_OK(dagrt_scope_end(o));
        CHECKF(H_POLL(h_stats(w).live_slots == 1 && h_stats(w).tensormap_entries == 1, 5000),
               "round %d: the ended scope's writers left %" PRIu64 " TensorMap entries "
               "(live_slots %" PRId64 ")",
               round, h_stats(w).tensormap_entries, h_stats(w).live_slots);
    }
    h_gate_open(1);
    EXPECT_OK(h_finish_run(w, o, run));
    for (int i = 0; i < 30; i++)
        CHECK_RAN_ONCE(200 + i);
    h_close_worker(w);
}

static int32_t orch_leaves_scopes_open(dagrt_orch_t *o, void *ctx)
{
    (void)ctx;
    for (int i = 0; i < 3; i++) {
        h_step s = h_step_id(50 + (uint64_t)i);
        if (dagrt_scope_begin(o) != DAGRT_STATUS_OK)
            return 1;
        if (h_submit_step(o, &s, 0, NULL, 0, NULL, 0, NULL) != DAGRT_STATUS_OK)
            return 1;
    }
    return 0;
}

static void test_worker_submit_ends_open_scopes(void)
{
    dagrt_worker_t *w = h_worker(NULL, 1, 0);
    dagrt_run_id run = 0;
    REQUIRE(w != NULL);
    REQUIRE_OK(dagrt_worker_submit(w, orch_leaves_scopes_open, NULL, &run));
    EXPECT_OK(h_wait(w, run));
    EXPECT_OK(dagrt_release_run(w, run));
    for (int i = 50; i < 53; i++)
        CHECK_RAN_ONCE(i);
    CHECK_QUIESCENT(w);
    EXPECT_OK(dagrt_worker_run(w, orch_leaves_scopes_open, NULL));
    for (int i = 50; i < 53; i++)
        CHECK(h_runs(i) == 2);
    h_close_worker(w);
}

int main(void)
{
    h_begin("scope", 60);
    RUN_TEST(test_depth_limit);
    RUN_TEST(test_unbalanced_and_wrong_state);
    RUN_TEST(test_close_with_open_scope);
    RUN_TEST(test_scope_end_non_blocking);
    RUN_TEST(test_leaves_of_ended_scope_reclaimed);
    RUN_TEST(test_ended_scope_erases_its_tensormap_entries);
    RUN_TEST(test_worker_submit_ends_open_scopes);
    return h_done();
}
