/*
 * test_failure.c: failure propagation (Orchestrator seed §8 "The failure claim", Scheduler seed
 * §5-6).
 *  - a failing task's consumers, transitively (tensor edges and explicit deps), are FAILED and
 *    never run; independent tasks still run exactly once; dagrt_wait_run returns TASK_FAILED
 *    with the failure message; run stats count completed/failed;
 *  - add_dep and add_dep_wait on a failing producer poison the consumer, whether the producer
 *    fails after the consumer was wired or had already failed when it was submitted (also a
 *    tensor edge onto an already failed producer);
 *  - the run reports the first failure;
 *  - a failing group member fails the group node and poisons its consumers; a failing SUB
 *    task poisons a NEXT_LEVEL consumer;
 *  - a group is terminal only once every member is (Scheduler seed §6): with member 0 failed
 *    and member 1 still running, the group is neither counted failed nor has its consumer
 *    poisoned, until member 1 ends;
 *  - a group with two failing members is failed once, and the run reports the first failure
 *    (header: "the message is the first failure"): the member that failed first in time
 *    (whatever its member index or lane), and one of the two when they fail together;
 *  - after a failed run: live_slots == 0, tensormap_entries == 0, every heap ring tail == top,
 *    and the worker runs the next graph correctly.
 */
#include "harness.h"

static dagrt_worker_t *W;
static dagrt_orch_t *O;

static int setup(void)
{
    return h_open_worker(&W, &O, NULL, 3, 2);
}

static void teardown(void)
{
    h_close_fixture(W, O);
}

/* The worker is still good: a small INOUT chain computes the right value. */
static void check_worker_usable(void)
{
    uint64_t v[4] = {0};
    dagrt_tensor t = h_tensor(v, 4, DAGRT_DTYPE_U64, DAGRT_TAG_INOUT);
    dagrt_run_id run;
    REQUIRE_OK(dagrt_begin_run(O, &run));
    for (int i = 0; i < 3; i++) {
        h_step s = h_op_step(900 + (uint64_t)i, H_OP_APPEND, (uint64_t)i + 1);
        SUBMIT_STEP(O, &s, i, &t, 1, NULL, 0, NULL);
    }
    EXPECT_OK(h_finish_run(W, O, run));
    CHECK(v[0] == 123 && v[3] == 123);
}

/* The finished (failed) run counts `failed` failed and `completed` completed tasks; then it is
 * released. */
static void check_counts_and_release(dagrt_run_id run, uint64_t failed, uint64_t completed)
{
    dagrt_run_stats_t rs = h_run_stats(W, run);
    CHECK_EQ_U64(rs.failed, failed);
    CHECK_EQ_U64(rs.completed, completed);
    EXPECT_OK(dagrt_release_run(W, run));
}

/* The end of a test after a failed run: the worker is quiescent and still usable; teardown. */
static void end_after_failure(void)
{
    CHECK_QUIESCENT(W);
    check_worker_usable();
    teardown();
}

static void test_failure_poisons_transitively(void)
{
    uint64_t y[4] = {0}, z[4] = {0}, u[4] = {0};
    dagrt_run_id run;
    dagrt_tensor tp = h_tensor(NULL, 64, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT); /* heap slab */
    dagrt_tensor t1[2], t2, t3, t5, t6, t7;
    dagrt_task_handle h1;
    dagrt_dep d;
    dagrt_run_stats_t rs;
    h_step p = h_step_id(1), c1 = h_step_id(2), c2 = h_step_id(3), c3 = h_step_id(4),
           c4 = h_step_id(8), i1 = h_step_id(5), i2 = h_step_id(6), i3 = h_step_id(7);
    p.fail = 1;
    p.sleep_us = 10000;
    i2.op = H_OP_FILL;
    i2.operand = 4;
    i3.op = H_OP_READ;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    SUBMIT_STEP(O, &p, 0, &tp, 1, NULL, 0, NULL);
    REQUIRE(tp.data != NULL);
    t1[0] = h_tensor(tp.data, 64, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    t1[1] = h_tensor(y, 4, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    t2 = h_tensor(y, 4, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    t3 = h_tensor(tp.data, 64, DAGRT_DTYPE_U64, DAGRT_TAG_INOUT);
    t5 = h_tensor(u, 4, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    t6 = h_tensor(z, 4, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    t7 = h_tensor(z, 4, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    SUBMIT_STEP(O, &c1, 1, t1, 2, NULL, 0, &h1); /* RaW on p */
    SUBMIT_STEP(O, &c2, 2, &t2, 1, NULL, 0, NULL); /* RaW on c1: transitive */
    SUBMIT_STEP(O, &c3, 2, &t3, 1, NULL, 0, NULL); /* INOUT on p */
    d = h_dep(h1, DAGRT_DEP_KIND_WAIT);
    SUBMIT_STEP(O, &c4, 1, NULL, 0, &d, 1, NULL); /* explicit dep on c1: transitive */
    SUBMIT_STEP(O, &i1, 1, &t5, 1, NULL, 0, NULL); /* independent */
    SUBMIT_STEP(O, &i2, 2, &t6, 1, NULL, 0, NULL);
    SUBMIT_STEP(O, &i3, 1, &t7, 1, NULL, 0, NULL);
    EXPECT_OK(dagrt_close_run_submission(O, run));
    EXPECT_ERROR(h_wait(W, run), DAGRT_STATUS_TASK_FAILED, "step 1 failed on purpose");
    /* repeatable */
    EXPECT_ERROR(dagrt_wait_run(W, run), DAGRT_STATUS_TASK_FAILED, "step 1 failed on purpose");
    rs = h_run_stats(W, run);
    CHECK_EQ_U64(rs.failed, 5);
    CHECK_EQ_U64(rs.completed, 3);
    CHECK_EQ_I64(rs.live_slots, 0);
    CHECK_EQ_U64(rs.done, 1);
    EXPECT_OK(dagrt_release_run(W, run));
    EXPECT_STATUS(dagrt_run_stats(W, run, &rs), DAGRT_STATUS_STALE_HANDLE);
    CHECK_RAN_ONCE(1);
    CHECK_NEVER_RAN(2);
    CHECK_NEVER_RAN(3);
    CHECK_NEVER_RAN(4);
    CHECK_NEVER_RAN(8);
    CHECK_RAN_ONCE(5);
    CHECK_RAN_ONCE(6);
    CHECK_RAN_ONCE(7);
    CHECK_BEFORE(6, 7);
    CHECK(h_read[7] == 16);
    end_after_failure();
}

static void test_explicit_dep_on_failing_producer(void)
{
    dagrt_run_id run;
    dagrt_task_handle hp, hc;
    dagrt_dep d;
    h_step p = h_step_id(1), cr = h_step_id(2), cw = h_step_id(3), g = h_step_id(4);
    p.wait_gate = 0; /* p fails only once both consumers are wired */
    p.fail = 1;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    SUBMIT_STEP(O, &p, 0, NULL, 0, NULL, 0, &hp);
    d = h_dep(hp, DAGRT_DEP_KIND_RETAIN);
    SUBMIT_STEP(O, &cr, 1, NULL, 0, &d, 1, &hc);
    d = h_dep(hp, DAGRT_DEP_KIND_WAIT);
    SUBMIT_STEP(O, &cw, 2, NULL, 0, &d, 1, NULL);
    d = h_dep(hc, DAGRT_DEP_KIND_WAIT);
    SUBMIT_STEP(O, &g, 1, NULL, 0, &d, 1, NULL);
    h_gate_open(0);
    EXPECT_OK(dagrt_close_run_submission(O, run));
    EXPECT_ERROR(h_wait(W, run), DAGRT_STATUS_TASK_FAILED, "step 1 failed on purpose");
    check_counts_and_release(run, 4, 0);
    CHECK_RAN_ONCE(1);
    CHECK_NEVER_RAN(2);
    CHECK_NEVER_RAN(3);
    CHECK_NEVER_RAN(4);
    end_after_failure();
}

static void test_dep_on_already_failed_producer(void)
{
    uint64_t x[4] = {0};
    dagrt_run_id run;
    dagrt_tensor tp = h_tensor(x, 4, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    dagrt_tensor tc = h_tensor(x, 4, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    dagrt_task_handle hp, hr;
    dagrt_dep d;
    h_step p = h_step_id(10), cr = h_step_id(11), cw = h_step_id(12), ct = h_step_id(13),
           g = h_step_id(14), ok = h_step_id(15);
    p.fail = 1;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    SUBMIT_STEP(O, &p, 0, &tp, 1, NULL, 0, &hp);
    /* p has failed (and is still referenced by the outer scope) before its consumers exist */
    CHECK(H_POLL(h_run_stats(W, run).failed == 1, 5000));
    d = h_dep(hp, DAGRT_DEP_KIND_RETAIN);
    SUBMIT_STEP(O, &cr, 1, NULL, 0, &d, 1, &hr);
    d = h_dep(hp, DAGRT_DEP_KIND_WAIT);
    SUBMIT_STEP(O, &cw, 2, NULL, 0, &d, 1, NULL);
    SUBMIT_STEP(O, &ct, 1, &tc, 1, NULL, 0, NULL); /* tensor edge onto the failed writer */
    d = h_dep(hr, DAGRT_DEP_KIND_RETAIN);
    SUBMIT_STEP(O, &g, 2, NULL, 0, &d, 1, NULL); /* consumer of a poisoned consumer */
    SUBMIT_STEP(O, &ok, 0, NULL, 0, NULL, 0, NULL); /* unrelated */
    EXPECT_OK(dagrt_close_run_submission(O, run));
    EXPECT_ERROR(h_wait(W, run), DAGRT_STATUS_TASK_FAILED, "step 10 failed on purpose");
    check_counts_and_release(run, 5, 1);
    CHECK_RAN_ONCE(10);
    CHECK_NEVER_RAN(11);
    CHECK_NEVER_RAN(12);
    CHECK_NEVER_RAN(13);
    CHECK_NEVER_RAN(14);
    CHECK_RAN_ONCE(15);
    end_after_failure();
}

static void test_first_failure_is_reported(void)
{
    dagrt_run_id run;
    h_step f1 = h_step_id(20), f2 = h_step_id(21);
    f1.fail = 1;
    f2.fail = 1;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    SUBMIT_STEP(O, &f1, 0, NULL, 0, NULL, 0, NULL);
    CHECK(H_POLL(h_run_stats(W, run).failed == 1, 5000));
    SUBMIT_STEP(O, &f2, 1, NULL, 0, NULL, 0, NULL);
    CHECK(H_POLL(h_run_stats(W, run).failed == 2, 5000));
    EXPECT_OK(dagrt_close_run_submission(O, run));
    for (int i = 0; i < 3; i++) {
        if (EXPECT_ERROR(h_wait(W, run), DAGRT_STATUS_TASK_FAILED, "step 20 failed on purpose"))
            CHECKF(!h_contains(dagrt_last_error(), "step 21"), "message: \"%s\"",
                   dagrt_last_error());
    }
    EXPECT_OK(dagrt_release_run(W, run));
    CHECK_RAN_ONCE(20);
    CHECK_RAN_ONCE(21);
    teardown();
}

static void test_group_member_failure(void)
{
    dagrt_run_id run;
    const int32_t targets[2] = {0, 1};
    h_step m[2];
    h_group g;
    dagrt_task_handle hg;
    dagrt_dep d;
    h_step c = h_step_id(32), ind = h_step_id(33);
    h_barrier_steps(m, 2, 30, 0, 2);
    m[1].fail = 1;
    h_make_group(&g, m, 2, NULL, 0);
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    REQUIRE_OK(dagrt_submit_next_level_group(O, h_step_callable(), g.a, 2, NULL, targets, &hg));
    d = h_dep(hg, DAGRT_DEP_KIND_RETAIN);
    SUBMIT_STEP(O, &c, 2, NULL, 0, &d, 1, NULL);
    SUBMIT_STEP(O, &ind, 2, NULL, 0, NULL, 0, NULL);
    EXPECT_OK(dagrt_close_run_submission(O, run));
    EXPECT_ERROR(h_wait(W, run), DAGRT_STATUS_TASK_FAILED, "step 31 failed on purpose");
    check_counts_and_release(run, 2, 1); /* failed: the group node (once) and its consumer */
    CHECK_RAN_ONCE(30);
    CHECK_RAN_ONCE(31);
    CHECK_NEVER_RAN(32);
    CHECK_RAN_ONCE(33);
    end_after_failure();
}

static void test_sub_failure_poisons_next_level(void)
{
    uint64_t x[4] = {0};
    dagrt_run_id run;
    dagrt_tensor tp = h_tensor(x, 4, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    dagrt_tensor tc = h_tensor(x, 4, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    h_step p = h_step_id(40), c = h_step_id(41), cs = h_step_id(42);
    p.fail = 2; /* non-zero return, no message */
    p.sleep_us = 5000;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    REQUIRE_OK(dagrt_scope_begin(O));
    EXPECT_OK(h_submit_step_sub(O, &p, &tp, 1, NULL, 0, NULL));
    SUBMIT_STEP(O, &c, 0, &tc, 1, NULL, 0, NULL);
    EXPECT_OK(h_submit_step_sub(O, &cs, &tc, 1, NULL, 0, NULL));
    REQUIRE_OK(dagrt_scope_end(O));
    EXPECT_OK(dagrt_close_run_submission(O, run));
    EXPECT_ERROR(h_wait(W, run), DAGRT_STATUS_TASK_FAILED, "harness.step");
    EXPECT_OK(dagrt_release_run(W, run));
    CHECK_RAN_ONCE(40);
    CHECK_NEVER_RAN(41);
    CHECK_NEVER_RAN(42);
    end_after_failure();
}

/* Set up, then one run: a group of m[0], m[1] on `targets`, its consumer `c` on lane 2 (a
 * `dep_kind` dependency), and `after` (when not NULL) on lane `after_lane`, behind that lane's
 * member; submission closed. Returns 0 if the set-up failed. */
static int group_and_consumer(h_step m[2], const int32_t targets[2], uint32_t dep_kind,
                              const h_step *c, const h_step *after, int32_t after_lane,
                              dagrt_run_id *run)
{
    h_group g;
    dagrt_task_handle hg;
    dagrt_dep d;
    h_make_group(&g, m, 2, NULL, 0);
    if (!setup())
        return 0;
    if (!EXPECT_OK(dagrt_begin_run(O, run)) ||
        !EXPECT_OK(dagrt_submit_next_level_group(O, h_step_callable(), g.a, 2, NULL, targets, &hg)))
        return 0;
    d = h_dep(hg, dep_kind);
    SUBMIT_STEP(O, c, 2, NULL, 0, &d, 1, NULL);
    if (after)
        SUBMIT_STEP(O, after, after_lane, NULL, 0, NULL, 0, NULL);
    EXPECT_OK(dagrt_close_run_submission(O, *run));
    return 1;
}

/* Member 0 (lane 0) fails at once, member 1 (lane 1) waits on a gate. A single on lane 0,
 * submitted after the group, completes: lane completions are drained in order, so member 0's
 * failure has been seen by then. The group must still not be terminal: not counted failed,
 * its consumer (lane 2) neither started nor poisoned, the run not done. Once the gate opens,
 * the group fails (once) and the consumer is poisoned. */
static void test_group_waits_for_every_member_after_a_failure(void)
{
    dagrt_run_id run;
    const int32_t targets[2] = {0, 1};
    h_step m[2];
    dagrt_run_stats_t rs;
    uint32_t done = 9;
    h_step c = h_step_id(52), after = h_step_id(53);
    m[0] = h_step_id(50);
    m[0].fail = 1;
    m[1] = h_step_id(51);
    m[1].wait_gate = 0;
    /* `after` behind member 0 on lane 0 */
    REQUIRE(group_and_consumer(m, targets, DAGRT_DEP_KIND_RETAIN, &c, &after, 0, &run));
    REQUIRE(H_POLL(h_end(50) != 0 && h_start(51) != 0, 5000));
    /* `after` completed: member 0's completion (before it on lane 0) was drained */
    CHECKF(H_POLL(h_run_stats(W, run).completed == 1, 5000),
           "the single behind member 0 on lane 0 did not complete");
    h_sleep_us(50 * 1000 * h_time_scale()); /* a wrong early aggregation has happened by now */
    rs = h_run_stats(W, run);
    CHECKF(rs.failed == 0,
           "the group was counted failed (run stats failed = %" PRIu64 ") while member 1 was "
           "still running", rs.failed);
    CHECKF(h_start(52) == 0, "the group's consumer started while a member was running");
    CHECK_EQ_U64(rs.done, 0);
    EXPECT_OK(dagrt_run_done(W, run, &done));
    CHECK_EQ_U64(done, 0);
    CHECK(h_end(51) == 0); /* member 1 still blocked */
    h_gate_open(0);
    EXPECT_ERROR(h_wait(W, run), DAGRT_STATUS_TASK_FAILED, "step 50 failed on purpose");
    check_counts_and_release(run, 2, 1); /* failed: the group node (once) and its consumer */
    CHECK_RAN_ONCE(50);
    CHECK_RAN_ONCE(51);
    CHECK_NEVER_RAN(52);
    CHECK_RAN_ONCE(53);
    CHECK_BEFORE(50, 53);
    end_after_failure();
}

/* Two failing members, one clearly first: member 1 (lane 1) fails at once; member 0 (lane 0,
 * the lower member index and lane) fails only after the test has seen member 1's failure
 * drained (a single behind it on lane 1 completed). The run reports member 1's message. */
static void test_group_two_failures_first_is_reported(void)
{
    dagrt_run_id run;
    const int32_t targets[2] = {0, 1};
    h_step m[2];
    h_step c = h_step_id(62), after = h_step_id(63);
    m[0] = h_step_id(60);
    m[0].wait_gate = 0;
    m[0].fail = 1;
    m[1] = h_step_id(61);
    m[1].fail = 1;
    /* `after` behind member 1 on lane 1 */
    REQUIRE(group_and_consumer(m, targets, DAGRT_DEP_KIND_WAIT, &c, &after, 1, &run));
    CHECK(H_POLL(h_run_stats(W, run).completed == 1, 5000));
    CHECK(h_end(60) == 0 && h_end(61) != 0);
    h_gate_open(0); /* now member 0 fails too */
    for (int i = 0; i < 3; i++) {
        if (EXPECT_ERROR(h_wait(W, run), DAGRT_STATUS_TASK_FAILED, "step 61 failed on purpose"))
            CHECKF(!h_contains(dagrt_last_error(), "step 60"), "message: \"%s\"",
                   dagrt_last_error());
    }
    check_counts_and_release(run, 2, 1); /* failed: the group node once, and its consumer */
    CHECK_RAN_ONCE(60);
    CHECK_RAN_ONCE(61);
    CHECK_NEVER_RAN(62);
    CHECK_RAN_ONCE(63);
    end_after_failure();
}

/* Two members failing together (they meet at a barrier, then both fail): no order between
 * the failures, so the run reports one of the two messages, and the group fails once. */
static void test_group_two_failures_together(void)
{
    dagrt_run_id run;
    const int32_t targets[2] = {1, 0};
    h_step m[2];
    h_step c = h_step_id(72);
    h_barrier_steps(m, 2, 70, 0, 2);
    m[0].fail = m[1].fail = 1;
    REQUIRE(group_and_consumer(m, targets, DAGRT_DEP_KIND_RETAIN, &c, NULL, 0, &run));
    if (EXPECT_STATUS(h_wait(W, run), DAGRT_STATUS_TASK_FAILED)) {
        const char *msg = dagrt_last_error();
        CHECKF(h_contains(msg, "step 70 failed on purpose") !=
                   h_contains(msg, "step 71 failed on purpose"),
               "the run's failure names neither member's failure, or both: \"%s\"", msg);
    }
    check_counts_and_release(run, 2, 0);
    CHECK_RAN_ONCE(70);
    CHECK_RAN_ONCE(71);
    CHECK_NEVER_RAN(72);
    end_after_failure();
}

int main(void)
{
    h_begin("failure", 90);
    RUN_TEST(test_failure_poisons_transitively);
    RUN_TEST(test_explicit_dep_on_failing_producer);
    RUN_TEST(test_dep_on_already_failed_producer);
    RUN_TEST(test_first_failure_is_reported);
    RUN_TEST(test_group_member_failure);
    RUN_TEST(test_sub_failure_poisons_next_level);
    RUN_TEST(test_group_waits_for_every_member_after_a_failure);
    RUN_TEST(test_group_two_failures_first_is_reported);
    RUN_TEST(test_group_two_failures_together);
    return h_done();
}
