/*
 * test_alloc.c: dagrt_alloc, runtime-owned intermediate buffers (Orchestrator seed §8b).
 *  - the pointer is 1024-aligned and inside the heap ring of the current scope (the ring's
 *    top moves by the aligned size; each buffer lies at heap_base[0] + its position modulo
 *    heap_size[0]; the four rings are the configured size and do not overlap);
 *  - a writer tagged INOUT then a reader tagged INPUT run in order and see the data; the
 *    alloc handle is a valid (already satisfied) explicit dependency;
 *  - the slab is reclaimed after the run (tail == top), and inside an ended scope while the
 *    run is still open, once its writer finished;
 *  - a writer tagged OUTPUT or OUTPUT_EXISTING creates no lifetime link: the alloc slot of
 *    an ended scope is consumed (live slots drop, the ring's tail reaches its top) while
 *    that writer is still blocked; an INOUT writer, in the same setting, keeps it alive;
 *  - invalid dtype / ndim / zero shape -> INVALID_ARGUMENT; no run open -> WRONG_STATE.
 */
#include "harness.h"

static void test_alignment_and_placement(void)
{
    dagrt_worker_config cfg = h_config(64u << 10, 0, 0);
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    void *p[5];
    dagrt_task_handle h[5];
    static const uint64_t n[5] = {1, 100, 128, 129, 1000}; /* doubles */
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    REQUIRE(h_open_worker(&w, &o, &cfg, 1, 0));
    REQUIRE_OK(dagrt_begin_run(o, &run));
    for (int i = 0; i < 5; i++) {
        dagrt_worker_stats_t s0 = h_stats(w), s1;
        uint64_t shape[1];
        uint64_t want = ((n[i] * 8 + 1023) / 1024) * 1024;
        shape[0] = n[i];
        p[i] = NULL;
        REQUIRE_OK(dagrt_alloc(o, shape, 1, DAGRT_DTYPE_F64, &p[i], &h[i]));
        s1 = h_stats(w);
        REQUIRE(p[i] != NULL);
        CHECKF(((uintptr_t)p[i] % 1024) == 0, "alloc %d returned %p, not 1024-aligned", i, p[i]);
        CHECK_EQ_U64(s1.heap_top[0] - s0.heap_top[0], want);
        CHECKF((uintptr_t)p[i] == s1.heap_base[0] + s0.heap_top[0] % s1.heap_size[0],
               "alloc %d at %p, not at ring 0's base + its position", i, p[i]);
        CHECK_EQ_U64(h[i].run_id, run);
        if ((uintptr_t)p[i] < lo)
            lo = (uintptr_t)p[i];
        if ((uintptr_t)p[i] + n[i] * 8 > hi)
            hi = (uintptr_t)p[i] + n[i] * 8;
        for (int j = 0; j < i; j++)
            CHECK(p[j] != p[i]);
        /* the memory is usable */
        memset(p[i], 0x5a, n[i] * 8);
    }
    CHECKF(hi - lo <= (64u << 10), "alloc'd buffers span %zu bytes, more than one 64 KiB ring",
           (size_t)(hi - lo));
    {
        dagrt_worker_stats_t s = h_stats(w);
        for (int r = 0; r < 4; r++) {
            CHECK_EQ_U64(s.heap_size[r], 64u << 10);
            for (int q = 0; q < r; q++)
                CHECKF(s.heap_base[q] + s.heap_size[q] <= s.heap_base[r] ||
                           s.heap_base[r] + s.heap_size[r] <= s.heap_base[q],
                       "heap rings %d and %d overlap", q, r);
        }
    }
    {
        /* a NULL OUTPUT of the same scope comes from the same ring */
        dagrt_tensor t = h_tensor(NULL, 8, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT);
        h_step s = h_step_id(1);
        SUBMIT_STEP(o, &s, 0, &t, 1, NULL, 0, NULL);
        CHECK((uintptr_t)t.data >= lo - (64u << 10) && (uintptr_t)t.data < lo + (64u << 10));
    }
    EXPECT_OK(h_finish_run(w, o, run));
    h_close_worker(w);
}

static void test_writer_then_reader(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    void *p = NULL;
    uint64_t shape[2] = {8, 8};
    dagrt_task_handle ha;
    dagrt_tensor tw, tr, tr2;
    dagrt_dep d;
    h_step wr = h_step_id(1), rd = h_step_id(2), rd2 = h_step_id(3), early = h_step_id(4);
    REQUIRE(h_open_worker(&w, &o, NULL, 3, 0));
    wr.op = H_OP_FILL;
    wr.operand = 5;
    wr.sleep_us = 20000;
    rd.op = H_OP_READ;
    rd2.op = H_OP_READ;
    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE_OK(dagrt_alloc(o, shape, 2, DAGRT_DTYPE_F64, &p, &ha));
    memset(p, 0, 64 * sizeof(double));
    /* the alloc handle is a satisfied dependency */
    d = h_dep(ha, DAGRT_DEP_KIND_RETAIN);
    SUBMIT_STEP(o, &early, 2, NULL, 0, &d, 1, NULL);
    {
        uint64_t sh[2] = {8, 8};
        REQUIRE_OK(dagrt_tensor_init(&tw, p, DAGRT_DTYPE_F64, 2, sh, DAGRT_TAG_INOUT));
        REQUIRE_OK(dagrt_tensor_init(&tr, p, DAGRT_DTYPE_F64, 2, sh, DAGRT_TAG_INPUT));
    }
    /* a reader of one column of the buffer, as a strided view */
    tr2 = h_tile(p, 3 * 8 * sizeof(double), DAGRT_DTYPE_F64, 8, 1, 8, DAGRT_TAG_INPUT);
    SUBMIT_STEP(o, &wr, 0, &tw, 1, NULL, 0, NULL);
    SUBMIT_STEP(o, &rd, 1, &tr, 1, NULL, 0, NULL);
    SUBMIT_STEP(o, &rd2, 2, &tr2, 1, NULL, 0, NULL);
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(1);
    CHECK_RAN_ONCE(2);
    CHECK_RAN_ONCE(3);
    CHECK_RAN_ONCE(4);
    CHECK_BEFORE(1, 2);
    CHECK_BEFORE(1, 3);
    CHECKF(h_read[2] == 5.0 * 64, "reader saw %g", h_read[2]);
    CHECKF(h_read[3] == 5.0 * 8, "column reader saw %g", h_read[3]);
    h_close_worker(w);
}

static void test_reclaimed(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    void *p = NULL, *q = NULL;
    uint64_t shape[1] = {512};
    dagrt_tensor tw;
    dagrt_worker_stats_t st;
    h_step wr = h_step_id(1);
    REQUIRE(h_open_worker(&w, &o, NULL, 2, 0));
    wr.wait_gate = 0;
    wr.op = H_OP_FILL;
    wr.operand = 1;
    REQUIRE_OK(dagrt_begin_run(o, &run));

    /* an unused alloc in an ended scope is reclaimed at once */
    REQUIRE_OK(dagrt_scope_begin(o));
    REQUIRE_OK(dagrt_alloc(o, shape, 1, DAGRT_DTYPE_F64, &q, NULL));
    st = h_stats(w);
    CHECK(st.heap_top[1] - st.heap_tail[1] == 4096);
    CHECK_EQ_I64(st.live_slots, 1);
    CHECK_EQ_U64(st.tensormap_entries, 1);
    REQUIRE_OK(dagrt_scope_end(o));
    st = h_stats(w);
    CHECK(h_is_quiescent(&st));

    /* an alloc written (INOUT) inside a scope: alive while the writer runs, reclaimed after */
    REQUIRE_OK(dagrt_scope_begin(o));
    REQUIRE_OK(dagrt_alloc(o, shape, 1, DAGRT_DTYPE_F64, &p, NULL));
    tw = h_tensor(p, 512, DAGRT_DTYPE_F64, DAGRT_TAG_INOUT);
    SUBMIT_STEP(o, &wr, 0, &tw, 1, NULL, 0, NULL);
    REQUIRE_OK(dagrt_scope_end(o));
    h_sleep_us(10000);
    st = h_stats(w);
    CHECKF(st.heap_top[1] - st.heap_tail[1] >= 4096,
           "the alloc slab was reclaimed while its INOUT writer was still running");
    CHECK_EQ_I64(st.live_slots, 2);
    h_gate_open(0);
    CHECKF(H_POLL(h_quiescent_now(w), 5000), "alloc slab not reclaimed after its writer finished");
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(1);

    /* outer-scope allocs are reclaimed when the run finishes */
    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE_OK(dagrt_alloc(o, shape, 1, DAGRT_DTYPE_F64, &p, NULL));
    REQUIRE_OK(dagrt_alloc(o, shape, 1, DAGRT_DTYPE_U8, &q, NULL));
    st = h_stats(w);
    CHECK_EQ_U64(st.heap_top[0] - st.heap_tail[0], 4096 + 1024);
    EXPECT_OK(h_finish_run(w, o, run));
    st = h_stats(w);
    CHECK(st.heap_top[0] > 0 && st.heap_tail[0] == st.heap_top[0]);
    h_close_worker(w);
}

/* Only one slot is live (the writer's) and ring 1 is empty. */
static int only_writer_left(dagrt_worker_t *w)
{
    dagrt_worker_stats_t st = h_stats(w);
    return st.live_slots == 1 && h_ring_empty(&st, 1);
}

/* Inside a nested scope (ring 1): an alloc, a writer of the whole buffer tagged `tag` that
 * waits on gate `id`, scope_end. With `linked` 0 (OUTPUT, OUTPUT_EXISTING: pure inserts), the
 * alloc slot is consumed while the writer is still blocked: the live slots drop to the
 * writer's alone and ring 1 is empty again (its tail reaches its top). With `linked` 1
 * (INOUT: the writer retains the buffer's producer), slab and slot stay until the writer
 * ends. Either way everything is reclaimed once it ends. */
static void writer_of_alloc(dagrt_worker_t *w, dagrt_orch_t *o, uint32_t tag, uint64_t id,
                            int linked, const char *what)
{
    void *p = NULL;
    uint64_t shape[1] = {512};
    dagrt_tensor tw;
    dagrt_worker_stats_t st;
    dagrt_run_stats_t rs;
    dagrt_run_id run;
    h_step wr = h_step_id(id);
    wr.wait_gate = (int)id;
    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE_OK(dagrt_scope_begin(o));
    REQUIRE_OK(dagrt_alloc(o, shape, 1, DAGRT_DTYPE_F64, &p, NULL));
    tw = h_tensor(p, 512, DAGRT_DTYPE_F64, tag);
    SUBMIT_STEP(o, &wr, 0, &tw, 1, NULL, 0, NULL);
    st = h_stats(w);
    CHECKF(st.live_slots == 2 && st.heap_top[1] - st.heap_tail[1] == 4096,
           "%s: before scope_end, live_slots %" PRId64 " (expected 2), ring 1 holds %" PRIu64
           " bytes (expected 4096)",
           what, st.live_slots, st.heap_top[1] - st.heap_tail[1]);
    REQUIRE_OK(dagrt_scope_end(o));
    CHECKF(H_POLL(h_start((int)id) != 0, 2000), "%s: the writer did not start", what);
    if (!linked) {
        int consumed = H_POLL(only_writer_left(w), 2000);
        st = h_stats(w);
        CHECKF(consumed, "%s: the alloc slot was not consumed while its writer ran: live_slots %"
               PRId64 " (expected 1: the writer), ring 1 top %" PRIu64 " tail %" PRIu64
               " (expected equal): the writer created a lifetime link",
               what, st.live_slots, st.heap_top[1], st.heap_tail[1]);
        REQUIRE_OK(dagrt_run_stats(w, run, &rs));
        CHECK_EQ_I64(rs.live_slots, 1);
    } else {
        h_sleep_us(20000);
        st = h_stats(w);
        CHECKF(st.live_slots == 2 && st.heap_top[1] - st.heap_tail[1] == 4096,
               "%s: the alloc was reclaimed while its writer ran: live_slots %" PRId64
               ", ring 1 holds %" PRIu64 " bytes",
               what, st.live_slots, st.heap_top[1] - st.heap_tail[1]);
    }
    /* all of the above happened while the writer was still blocked */
    CHECKF(h_end((int)id) == 0 && !h_timed_out((int)id),
           "%s: the writer was no longer blocked when the alloc was checked", what);
    h_gate_open((int)id);
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(id);
    CHECK_QUIESCENT(w);
}

/* OUTPUT and OUTPUT_EXISTING writers of an alloc buffer create no lifetime link (seed §8b:
 * only INPUT/INOUT look the buffer's producer up); INOUT does, in the same setting. */
static void test_output_writer_does_not_pin(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    REQUIRE(h_open_worker(&w, &o, NULL, 1, 0));
    writer_of_alloc(w, o, DAGRT_TAG_OUTPUT, 1, 0, "OUTPUT");
    writer_of_alloc(w, o, DAGRT_TAG_OUTPUT_EXISTING, 2, 0, "OUTPUT_EXISTING");
    writer_of_alloc(w, o, DAGRT_TAG_INOUT, 3, 1, "INOUT");
    EXPECT_OK(dagrt_worker_close(w));
    dagrt_worker_free(w);
}

static void test_invalid_alloc(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    void *p = (void *)&run;
    dagrt_task_handle h = {1, 2};
    uint64_t shape[6] = {4, 4, 4, 4, 4, 4};
    dagrt_worker_stats_t s0, s1;
    REQUIRE(h_open_worker(&w, &o, NULL, 1, 0));
    EXPECT_ERROR(dagrt_alloc(o, shape, 1, DAGRT_DTYPE_F64, &p, &h), DAGRT_STATUS_WRONG_STATE, NULL);
    REQUIRE_OK(dagrt_begin_run(o, &run));
    s0 = h_stats(w);
    EXPECT_ERROR(dagrt_alloc(o, shape, 1, 99, &p, &h), DAGRT_STATUS_INVALID_ARGUMENT, "dtype");
    EXPECT_ERROR(dagrt_alloc(o, shape, 6, DAGRT_DTYPE_F64, &p, &h), DAGRT_STATUS_INVALID_ARGUMENT,
                 "ndim");
    {
        uint64_t huge[2] = {UINT64_MAX / 2, 4};
        EXPECT_ERROR(dagrt_alloc(o, huge, 2, DAGRT_DTYPE_F64, &p, &h),
                     DAGRT_STATUS_INVALID_ARGUMENT, NULL);
    }
    s1 = h_stats(w);
    CHECK(p == (void *)&run);
    CHECK(h.run_id == 1 && h.slot == 2);
    CHECK_EQ_U64(s1.heap_top[0], s0.heap_top[0]);
    CHECK_EQ_I64(s1.live_slots, s0.live_slots);
    EXPECT_OK(h_finish_run(w, o, run));
    h_close_worker(w);
}

/* Seed §5 ("nullptr when alloc(0)"): a shape with a zero extent gets a NULL buffer and no
 * heap space, and its synthetic task is made as for any alloc: its handle is a completed
 * task to depend on, and the run accounts for it. */
static void test_empty_alloc(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    void *p = &run;
    dagrt_task_handle h = {0, 0};
    uint64_t zero[2] = {4, 0}, huge_then_zero[3] = {UINT64_MAX / 2, 4, 0};
    REQUIRE(h_open_worker(&w, &o, NULL, 1, 0));
    REQUIRE_OK(dagrt_begin_run(o, &run));
    dagrt_worker_stats_t s0 = h_stats(w);
    EXPECT_OK(dagrt_alloc(o, zero, 2, DAGRT_DTYPE_F64, &p, &h));
    CHECKF(p == NULL, "alloc of a zero extent returned %p, not NULL", p);
    CHECK(h.run_id == run);
    p = &run;
    EXPECT_OK(dagrt_alloc(o, huge_then_zero, 3, DAGRT_DTYPE_F64, &p, NULL));
    CHECK(p == NULL);
    dagrt_worker_stats_t s1 = h_stats(w);
    CHECK_EQ_U64(s1.heap_top[0], s0.heap_top[0]);
    CHECK_EQ_I64(s1.live_slots, s0.live_slots + 2);
    /* A task waiting on the empty buffer's owner runs: the owner is complete. */
    h_step s = h_step_id(1);
    dagrt_dep d = h_dep(h, DAGRT_DEP_KIND_RETAIN);
    SUBMIT_STEP(o, &s, 0, NULL, 0, &d, 1, NULL);
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK(h_runs(1) == 1);
    dagrt_worker_stats_t s2 = h_stats(w);
    CHECK_EQ_I64(s2.live_slots, 0);
    h_close_worker(w);
}

int main(void)
{
    h_begin("alloc", 60);
    RUN_TEST(test_alignment_and_placement);
    RUN_TEST(test_writer_then_reader);
    RUN_TEST(test_reclaimed);
    RUN_TEST(test_output_writer_does_not_pin);
    RUN_TEST(test_invalid_alloc);
    RUN_TEST(test_empty_alloc);
    return h_done();
}
