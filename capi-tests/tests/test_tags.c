/*
 * test_tags.c: dependency inference from tensor tags (Orchestrator seed §2 step 3 and the
 * write-after-write tag table, §7 TensorMap semantics).
 *
 * Producer and consumer always run on different NEXT_LEVEL lanes, so an ordering can only come
 * from a dependency edge, never from a lane's FIFO. The absence of an edge is shown by making
 * the earlier task wait (with a timeout) for something only the later task can do: with an
 * edge that would deadlock, and the wait times out and fails the check.
 *
 *  - RaW: INPUT after OUTPUT waits for the writer and reads its value;
 *  - INOUT chain is serial (values prove the order);
 *  - WaR is not tracked: an OUTPUT writer after a blocked reader runs meanwhile;
 *  - OUTPUT after OUTPUT adds no edge, and later readers depend on the latest writer only;
 *    also after a partial overwrite by a strided view or a sub-tile, for a reader of only the
 *    overwritten part (no wait for the older writer, no poisoning by its failure), also
 *    after the newer writer was consumed;
 *  - OUTPUT_EXISTING behaves like OUTPUT (no lookup, becomes the producer);
 *  - NO_DEP neither looks up nor inserts;
 *  - repeated producers (two tensors + add_dep + add_dep_wait on one producer) collapse:
 *    the consumer runs once after the producer and the run drains completely;
 *  - WaW via INOUT: the INOUT writer waits for the prior OUTPUT writer;
 *  - a read listed after a write of the same bytes (in one task, or across a group's
 *    members) still waits for the earlier writer: a task's reads see the writers before it.
 */
#include "harness.h"

#define N 8

static dagrt_worker_t *W;
static dagrt_orch_t *O;

static int setup(void)
{
    return h_open_worker(&W, &O, NULL, 3, 0);
}

static void teardown(void)
{
    h_close_fixture(W, O);
}

static void test_raw(void)
{
    uint64_t x[N] = {0};
    dagrt_run_id run;
    dagrt_tensor tw = h_tensor(x, N, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    dagrt_tensor tr = h_tensor(x, N, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    h_step w = h_op_step(1, H_OP_FILL, 7), r = h_op_step(2, H_OP_READ, 0);
    /* a reader of a single element in the middle also waits */
    dagrt_tensor tr1 = h_tile(x, 3 * 8, DAGRT_DTYPE_U64, 1, 1, 1, DAGRT_TAG_INPUT);
    h_step r1 = h_op_step(3, H_OP_READ, 0);
    w.sleep_us = 30000;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    h_run_one_per_lane(W, O, run, 3, (h_step_tensor[]){{&w, &tw}, {&r, &tr}, {&r1, &tr1}});
    CHECK_BEFORE(1, 2);
    CHECK_BEFORE(1, 3);
    CHECKF(h_read[2] == 7.0 * N, "reader saw sum %g, expected %g", h_read[2], 7.0 * N);
    CHECKF(h_read[3] == 7.0, "element reader saw %g, expected 7", h_read[3]);
    teardown();
}

static void test_inout_chain_is_serial(void)
{
    uint64_t x[N] = {0};
    dagrt_run_id run;
    dagrt_tensor t = h_tensor(x, N, DAGRT_DTYPE_U64, DAGRT_TAG_INOUT);
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    for (int i = 0; i < 6; i++) {
        h_step s = h_op_step(10 + (uint64_t)i, H_OP_APPEND, (uint64_t)i + 1);
        s.sleep_us = 3000;
        SUBMIT_STEP(O, &s, i % 3, &t, 1, NULL, 0, NULL);
    }
    EXPECT_OK(h_finish_run(W, O, run));
    for (int i = 0; i < 6; i++) {
        CHECK_RAN_ONCE(10 + i);
        if (i > 0)
            CHECK_BEFORE(10 + i - 1, 10 + i);
    }
    for (int i = 0; i < N; i++)
        CHECKF(x[i] == 123456, "x[%d] = %" PRIu64 ", expected 123456 (serial order)", i, x[i]);
    teardown();
}

static void test_war_not_tracked(void)
{
    uint64_t x[N] = {0};
    dagrt_run_id run;
    dagrt_tensor tp = h_tensor(x, N, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    dagrt_tensor tr = h_tensor(x, N, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    dagrt_tensor tw = h_tensor(x, N, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    h_step p = h_op_step(20, H_OP_FILL, 1), r = h_op_step(21, H_OP_READ, 0),
           w = h_step_id(22);
    /* the reader reads, then blocks until the writer has run; the writer (submitted after the
     * reader) must therefore not wait for the reader */
    r.wait_gate = 0;
    w.open_at_end = 0;
    p.sleep_us = 10000;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    h_run_one_per_lane(W, O, run, 3, (h_step_tensor[]){{&p, &tp}, {&r, &tr}, {&w, &tw}});
    CHECK_BEFORE(20, 21); /* RaW still holds for the reader */
    CHECKF(h_end(22) < h_end(21), "the writer should finish while the reader is still blocked");
    teardown();
}

static void output_after_output(uint32_t tag)
{
    uint64_t y[N] = {0};
    dagrt_run_id run;
    dagrt_tensor t1 = h_tensor(y, N, DAGRT_DTYPE_U64, tag);
    dagrt_tensor t2 = h_tensor(y, N, DAGRT_DTYPE_U64, tag);
    dagrt_tensor tr = h_tensor(y, N, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    h_step w1 = h_step_id(30), w2 = h_op_step(31, H_OP_FILL, 5),
           r = h_op_step(32, H_OP_READ, 0);
    /* w1 blocks until the reader has started: w2 must not wait for w1 (no WaW edge for a pure
     * overwrite), and the reader must depend on w2 only (w2 replaced w1 in the TensorMap) */
    w1.wait_gate = 1;
    r.open_at_start = 1;
    w2.sleep_us = 10000;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    h_run_one_per_lane(W, O, run, 3, (h_step_tensor[]){{&w1, &t1}, {&w2, &t2}, {&r, &tr}});
    CHECK_BEFORE(31, 32); /* RaW on the latest writer */
    CHECKF(h_start(32) < h_end(30), "the reader should start while the first writer is blocked");
    CHECKF(h_read[32] == 5.0 * N, "reader saw %g, expected %g", h_read[32], 5.0 * N);
    teardown();
}

static void test_output_after_output_no_edge(void)
{
    output_after_output(DAGRT_TAG_OUTPUT);
}

/* A partial overwrite by a view that is not dense leaves the older writer's entry whole (it
 * still produces the bytes the new one left), but a reader all of whose bytes the newer
 * writer wrote depends on that writer only (seed §7, WaW: "new consumers depend only on the
 * latest"): it neither waits for the older writer nor is poisoned by its failure. w1 writes
 * the whole view `t1`; w2 overwrites part of it (`t2`: every other element, or a sub-tile);
 * r reads exactly that part. Blocked: w1 waits until r has started. Failing: w1 fails
 * slowly, and r still runs and reads w2's values. */
static void partial_overwrite(dagrt_tensor t1, dagrt_tensor t2, dagrt_tensor tr, double want,
                              int failing)
{
    dagrt_run_id run;
    h_step w1 = h_step_id(40), w2 = h_op_step(41, H_OP_FILL, 5), r = h_op_step(42, H_OP_READ, 0);
    if (failing) {
        w1.sleep_us = 30000;
        w1.fail = 1;
    } else {
        w1.wait_gate = 1;
        r.open_at_start = 1;
    }
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    h_submit_one_per_lane(O, 3, (h_step_tensor[]){{&w1, &t1}, {&w2, &t2}, {&r, &tr}});
    if (failing)
        EXPECT_ERROR(h_finish_run(W, O, run), DAGRT_STATUS_TASK_FAILED, "step 40");
    else
        EXPECT_OK(h_finish_run(W, O, run));
    CHECK_RAN_ONCE(41);
    CHECK_RAN_ONCE(42);
    CHECK_BEFORE(41, 42);
    if (!failing)
        CHECKF(h_start(42) < h_end(40), "the reader should start while the older writer is "
                                        "blocked: it read only bytes the newer writer wrote");
    CHECKF(h_read[42] == want, "reader saw %g, expected %g", h_read[42], want);
    teardown();
}

static void test_partial_overwrite_shadows_the_older_writer(void)
{
    static uint64_t x[N];
    static double m[16 * 16];
    uint64_t shape[1] = {N / 2}, strides[1] = {2};
    dagrt_tensor t1 = h_tensor(x, N, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT), t2, tr;
    REQUIRE_OK(dagrt_tensor_init_strided(&t2, x, 0, DAGRT_DTYPE_U64, 1, shape, strides,
                                         DAGRT_TAG_OUTPUT));
    tr = t2;
    tr.tag = DAGRT_TAG_INPUT;
    for (int failing = 0; failing < 2; failing++) {
        h_reset_records();
        partial_overwrite(t1, t2, tr, 5.0 * N / 2, failing);
        /* a 4x4 tile of a 16x16 column-major matrix, then its top-left 2x2 sub-tile */
        h_reset_records();
        partial_overwrite(h_tile(m, 0, DAGRT_DTYPE_F64, 4, 4, 16, DAGRT_TAG_OUTPUT),
                          h_tile(m, 0, DAGRT_DTYPE_F64, 2, 2, 16, DAGRT_TAG_OUTPUT),
                          h_tile(m, 0, DAGRT_DTYPE_F64, 2, 2, 16, DAGRT_TAG_INPUT), 5.0 * 4,
                          failing);
    }
}

/* The shadowing outlives the newer writer: once w2 (in a nested scope that ended) is
 * consumed, its entry leaves a marker that still shadows w1's, so a reader of the part w2
 * wrote is still not poisoned by w1's failure (it was, once w2's entry was erased). */
static void test_shadowing_outlives_the_newer_writer(void)
{
    static double m[16 * 16];
    dagrt_run_id run;
    h_step w1 = h_step_id(50), w2 = h_op_step(51, H_OP_FILL, 5), r = h_op_step(52, H_OP_READ, 0);
    dagrt_tensor t1 = h_tile(m, 0, DAGRT_DTYPE_F64, 4, 4, 16, DAGRT_TAG_OUTPUT);
    dagrt_tensor t2 = h_tile(m, 0, DAGRT_DTYPE_F64, 2, 2, 16, DAGRT_TAG_OUTPUT);
    dagrt_tensor tr = h_tile(m, 0, DAGRT_DTYPE_F64, 2, 2, 16, DAGRT_TAG_INPUT);
    w1.fail = 1;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    SUBMIT_STEP(O, &w1, 0, &t1, 1, NULL, 0, NULL);
    REQUIRE_OK(dagrt_scope_begin(O));
    SUBMIT_STEP(O, &w2, 1, &t2, 1, NULL, 0, NULL);
    REQUIRE_OK(dagrt_scope_end(O));
    /* w1 failed and w2 consumed: only w1's slot (outer scope) is left */
    CHECK(H_POLL(h_runs(50) == 1 && h_runs(51) == 1 && h_stats(W).live_slots == 1, 5000));
    SUBMIT_STEP(O, &r, 2, &tr, 1, NULL, 0, NULL);
    EXPECT_ERROR(h_finish_run(W, O, run), DAGRT_STATUS_TASK_FAILED, "step 50");
    CHECK_RAN_ONCE(52);
    CHECKF(h_read[52] == 5.0 * 4, "reader saw %g, expected %g", h_read[52], 5.0 * 4);
    teardown();
}

/* Seed §7 (WAW: "new consumers depend only on the latest") when no single newer writer
 * covers the read: w1 writes a 4x4 tile and fails; w2 and w3 write its top and bottom two
 * rows. A reader of the whole tile reads only bytes w2 and w3 wrote: it runs, unpoisoned by
 * w1, and sees their values. A reader of the tile and the row below it still reads bytes
 * only w1 wrote, and is poisoned. */
static void test_read_rewritten_by_several_newer_writers(void)
{
    static double m[16 * 16];
    dagrt_run_id run;
    h_step w1 = h_step_id(60), w2 = h_op_step(61, H_OP_FILL, 5), w3 = h_op_step(62, H_OP_FILL, 5);
    h_step r = h_op_step(63, H_OP_READ, 0), r5 = h_step_id(64);
    dagrt_tensor t1 = h_tile(m, 0, DAGRT_DTYPE_F64, 5, 4, 16, DAGRT_TAG_OUTPUT);
    dagrt_tensor t2 = h_tile(m, 0, DAGRT_DTYPE_F64, 2, 4, 16, DAGRT_TAG_OUTPUT);
    dagrt_tensor t3 = h_tile(m, 2 * sizeof(double), DAGRT_DTYPE_F64, 2, 4, 16, DAGRT_TAG_OUTPUT);
    dagrt_tensor tr = h_tile(m, 0, DAGRT_DTYPE_F64, 4, 4, 16, DAGRT_TAG_INPUT);
    dagrt_tensor tr5 = h_tile(m, 0, DAGRT_DTYPE_F64, 5, 4, 16, DAGRT_TAG_INPUT);
    w1.fail = 1;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    SUBMIT_STEP(O, &w1, 0, &t1, 1, NULL, 0, NULL);
    SUBMIT_STEP(O, &w2, 1, &t2, 1, NULL, 0, NULL);
    SUBMIT_STEP(O, &w3, 2, &t3, 1, NULL, 0, NULL);
    SUBMIT_STEP(O, &r, 1, &tr, 1, NULL, 0, NULL);
    SUBMIT_STEP(O, &r5, 2, &tr5, 1, NULL, 0, NULL);
    EXPECT_ERROR(h_finish_run(W, O, run), DAGRT_STATUS_TASK_FAILED, "step 60");
    CHECKF(h_runs(63) == 1, "the reader of bytes only w2 and w3 wrote ran %u times: poisoned "
                            "by w1, which they rewrote",
           h_runs(63));
    CHECKF(h_read[63] == 5.0 * 16, "reader saw %g, expected %g", h_read[63], 5.0 * 16);
    CHECKF(h_runs(64) == 0, "the reader of a row only w1 wrote ran");
    teardown();
}

static void test_output_existing_like_output(void)
{
    output_after_output(DAGRT_TAG_OUTPUT_EXISTING);
    /* and RaW after OUTPUT_EXISTING */
    {
        uint64_t x[N] = {0};
        dagrt_run_id run;
        dagrt_tensor tw = h_tensor(x, N, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT_EXISTING);
        dagrt_tensor tr = h_tensor(x, N, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
        h_step w = h_op_step(35, H_OP_FILL, 3), r = h_op_step(36, H_OP_READ, 0);
        w.sleep_us = 20000;
        REQUIRE(setup());
        REQUIRE_OK(dagrt_begin_run(O, &run));
        h_submit_one_per_lane(O, 2, (h_step_tensor[]){{&w, &tw}, {&r, &tr}});
        EXPECT_OK(h_finish_run(W, O, run));
        CHECK_BEFORE(35, 36);
        CHECK(h_read[36] == 3.0 * N);
        teardown();
    }
}

static void test_no_dep_ignored(void)
{
    uint64_t z[N] = {0};
    dagrt_run_id run;
    dagrt_tensor tp = h_tensor(z, N, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    dagrt_tensor tn = h_tensor(z, N, DAGRT_DTYPE_U64, DAGRT_TAG_NO_DEP);
    dagrt_tensor tr = h_tensor(z, N, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    h_step p = h_op_step(40, H_OP_FILL, 3), n = h_step_id(41),
           r = h_op_step(42, H_OP_READ, 0);
    /* p waits for n to start: n must not look up p.
     * n waits for r to start: r (INPUT) must depend on p only, i.e. n inserted nothing. */
    p.wait_gate = 2;
    n.open_at_start = 2;
    n.wait_gate = 3;
    r.open_at_start = 3;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    h_run_one_per_lane(W, O, run, 3, (h_step_tensor[]){{&p, &tp}, {&n, &tn}, {&r, &tr}});
    CHECK_BEFORE(40, 42);
    CHECK(h_read[42] == 3.0 * N);
    teardown();
}

static void test_repeated_producer_collapses(void)
{
    uint64_t a[N] = {0}, b[N] = {0};
    dagrt_run_id run;
    dagrt_tensor tp[2], tc[3];
    dagrt_task_handle hp;
    dagrt_dep deps[4];
    dagrt_run_stats_t rs;
    h_step p = h_op_step(50, H_OP_FILL, 9), c = h_op_step(51, H_OP_READ, 0);
    tp[0] = h_tensor(a, N, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    tp[1] = h_tensor(b, N, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    tc[0] = h_tensor(a, N, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    tc[1] = h_tensor(b, N, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    tc[2] = h_tensor(a, N / 2, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT); /* same producer, again */
    p.sleep_us = 20000;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    SUBMIT_STEP(O, &p, 0, tp, 2, NULL, 0, &hp);
    deps[0] = h_dep(hp, DAGRT_DEP_KIND_RETAIN);
    deps[1] = h_dep(hp, DAGRT_DEP_KIND_WAIT);
    deps[2] = h_dep(hp, DAGRT_DEP_KIND_RETAIN);
    deps[3] = h_dep(hp, DAGRT_DEP_KIND_WAIT);
    SUBMIT_STEP(O, &c, 1, tc, 3, deps, 4, NULL);
    /* the same through the args builder: add_dep before and after the tensors */
    {
        dagrt_args_t *ab = NULL;
        dagrt_task_args v;
        uint64_t sc[S_COUNT];
        h_step c2 = h_op_step(52, H_OP_READ, 0);
        h_step_scalars(&c2, sc);
        REQUIRE_OK(dagrt_args_new(&ab));
        EXPECT_OK(dagrt_args_add_dep(ab, hp));
        EXPECT_OK(dagrt_args_add_tensor(ab, &tc[1]));
        EXPECT_OK(dagrt_args_add_dep_wait(ab, hp));
        EXPECT_OK(dagrt_args_add_tensor(ab, &tc[0]));
        EXPECT_OK(dagrt_args_add_dep(ab, hp));
        for (int i = 0; i < S_COUNT; i++)
            EXPECT_OK(dagrt_args_add_scalar(ab, sc[i]));
        EXPECT_OK(dagrt_args_view(ab, &v));
        CHECK_EQ_U64(v.num_deps, 3);
        CHECK_EQ_U64(v.num_tensors, 2);
        CHECK_EQ_U64(v.num_scalars, S_COUNT);
        EXPECT_OK(dagrt_submit_next_level(O, h_step_callable(), &v, NULL, 2, NULL));
        dagrt_args_free(ab);
    }
    EXPECT_OK(h_finish_run(W, O, run));
    /* a double-counted retention would never release p and the run would never finish;
     * a double-counted fanin would leave c PENDING forever */
    CHECK_RAN_ONCE(50);
    CHECK_RAN_ONCE(51);
    CHECK_RAN_ONCE(52);
    CHECK_BEFORE(50, 51);
    CHECK_BEFORE(50, 52);
    CHECK(h_read[51] == 9.0 * N);
    CHECK(h_read[52] == 0.0); /* tensor 0 of c2 is b, which p did not fill */
    (void)rs;
    teardown();
}

static void test_waw_via_inout(void)
{
    uint64_t w[N] = {0};
    dagrt_run_id run;
    dagrt_tensor t1 = h_tensor(w, N, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    dagrt_tensor t2 = h_tensor(w, N, DAGRT_DTYPE_U64, DAGRT_TAG_INOUT);
    dagrt_tensor tr = h_tensor(w, N, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    h_step w1 = h_op_step(60, H_OP_FILL, 4), w2 = h_op_step(61, H_OP_APPEND, 5),
           r = h_op_step(62, H_OP_READ, 0);
    w1.sleep_us = 20000;
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    h_submit_one_per_lane(O, 3, (h_step_tensor[]){{&w1, &t1}, {&w2, &t2}, {&r, &tr}});
    EXPECT_OK(h_finish_run(W, O, run));
    CHECK_BEFORE(60, 61);
    CHECK_BEFORE(61, 62);
    for (int i = 0; i < N; i++)
        CHECKF(w[i] == 45, "w[%d] = %" PRIu64 ", expected 45", i, w[i]);
    CHECK(h_read[62] == 45.0 * N);
    teardown();
}

/* A task that lists a write of x before a read of x (OUTPUT or OUTPUT_EXISTING first, then
 * INPUT or INOUT), and a group whose member 0 writes x while member 1 reads it: each reads
 * what the earlier writer wrote, so each waits for it whatever the order of its tensors. */
static void test_read_listed_after_write(void)
{
    static const uint32_t first[3] = {DAGRT_TAG_OUTPUT, DAGRT_TAG_OUTPUT_EXISTING, DAGRT_TAG_OUTPUT};
    static const uint32_t second[3] = {DAGRT_TAG_INPUT, DAGRT_TAG_INOUT, DAGRT_TAG_INPUT};
    for (int k = 0; k < 4; k++) {
        uint64_t x[N] = {0};
        dagrt_run_id run;
        dagrt_tensor tw = h_tensor(x, N, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
        h_step w = h_op_step(80, H_OP_FILL, 3);
        w.sleep_us = 30000;
        h_reset_records();
        REQUIRE(setup());
        REQUIRE_OK(dagrt_begin_run(O, &run));
        SUBMIT_STEP(O, &w, 0, &tw, 1, NULL, 0, NULL);
        if (k < 3) {
            dagrt_tensor t[2] = {h_tensor(x, N, DAGRT_DTYPE_U64, first[k]),
                                 h_tensor(x, N, DAGRT_DTYPE_U64, second[k])};
            h_step r = h_op_step(81, H_OP_READ, 0);
            SUBMIT_STEP(O, &r, 1, t, 2, NULL, 0, NULL);
        } else {
            const int32_t targets[2] = {2, 1};
            dagrt_tensor t[2] = {h_tensor(x, N, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT),
                                 h_tensor(x, N, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT)};
            h_step steps[2] = {h_op_step(82, H_OP_NONE, 0), h_op_step(81, H_OP_READ, 0)};
            h_group g;
            h_make_group(&g, steps, 2, t, 1);
            EXPECT_OK(dagrt_submit_next_level_group(O, h_step_callable(), g.a, 2, NULL, targets,
                                                    NULL));
        }
        EXPECT_OK(h_finish_run(W, O, run));
        CHECKF(h_end(80) != 0 && h_start(81) > h_end(80),
               "case %d: the reader started before the earlier writer ended", k);
        CHECKF(h_read[81] == 3.0 * N, "case %d: reader saw sum %g, expected %g", k, h_read[81],
               3.0 * N);
        teardown();
    }
}

/* Tags are validated at submit (dagrt_tensor_init refuses them too: these are written into
 * the struct afterwards). */
static void test_bad_tags_rejected(void)
{
    uint64_t x[N] = {0};
    dagrt_run_id run;
    dagrt_tensor t = h_tensor(x, N, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    h_step s = h_step_id(70);
    REQUIRE(setup());
    REQUIRE_OK(dagrt_begin_run(O, &run));
    t.tag = 9;
    EXPECT_ERROR(h_submit_step(O, &s, 0, &t, 1, NULL, 0, NULL), DAGRT_STATUS_INVALID_ARGUMENT, "tag");
    t = h_tensor(x, N, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    t.dtype = 99;
    EXPECT_ERROR(h_submit_step(O, &s, 0, &t, 1, NULL, 0, NULL), DAGRT_STATUS_INVALID_ARGUMENT, "dtype");
    t = h_tensor(x, N, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    t.ndim = 6;
    EXPECT_ERROR(h_submit_step(O, &s, 0, &t, 1, NULL, 0, NULL), DAGRT_STATUS_INVALID_ARGUMENT, "ndim");
    t = h_tensor(x, N, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    t.reserved = 1;
    EXPECT_ERROR(h_submit_step(O, &s, 0, &t, 1, NULL, 0, NULL), DAGRT_STATUS_INVALID_ARGUMENT, "reserved");
    /* a NULL data pointer is only for OUTPUT */
    t = h_tensor(NULL, N, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    EXPECT_ERROR(h_submit_step(O, &s, 0, &t, 1, NULL, 0, NULL), DAGRT_STATUS_INVALID_ARGUMENT, NULL);
    t = h_tensor(NULL, N, DAGRT_DTYPE_U64, DAGRT_TAG_INOUT);
    EXPECT_ERROR(h_submit_step(O, &s, 0, &t, 1, NULL, 0, NULL), DAGRT_STATUS_INVALID_ARGUMENT, NULL);
    EXPECT_OK(h_finish_run(W, O, run));
    CHECK_NEVER_RAN(70);
    teardown();
}

int main(void)
{
    h_begin("tags", 90);
    RUN_TEST(test_raw);
    RUN_TEST(test_inout_chain_is_serial);
    RUN_TEST(test_war_not_tracked);
    RUN_TEST(test_output_after_output_no_edge);
    RUN_TEST(test_output_existing_like_output);
    RUN_TEST(test_partial_overwrite_shadows_the_older_writer);
    RUN_TEST(test_shadowing_outlives_the_newer_writer);
    RUN_TEST(test_read_rewritten_by_several_newer_writers);
    RUN_TEST(test_no_dep_ignored);
    RUN_TEST(test_repeated_producer_collapses);
    RUN_TEST(test_waw_via_inout);
    RUN_TEST(test_read_listed_after_write);
    RUN_TEST(test_bad_tags_rejected);
    return h_done();
}
