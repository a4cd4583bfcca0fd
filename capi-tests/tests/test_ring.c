/*
 * test_ring.c: the Ring (Orchestrator seed §5, §8b "OUTPUT auto-allocation" and
 * "heap_ring_size and back-pressure").
 *  - task window back-pressure: with task_window 4, 100 briefly sleeping tasks (each in its
 *    own scope, so it can be reclaimed) all complete, and no more than 4 slots are ever live;
 *  - "task window full": with a small timeout_ms and every slot held by blocked tasks, a
 *    submit (and an alloc) fails with WINDOW_FULL; once the tasks are released, submitting
 *    works again;
 *  - OUTPUT with NULL data is auto-allocated from the heap ring, 1024-aligned, written back
 *    into the tensor (and into an args builder), and consumers of that address depend on the
 *    producer; several NULL OUTPUTs in one submit get distinct aligned slabs;
 *    OUTPUT_EXISTING with NULL data -> INVALID_ARGUMENT;
 *  - an OUTPUT (or alloc) larger than a ring -> HEAP_EXHAUSTED with the seed's message;
 *    exhaustion by timeout with a small heap_ring_size, then recovery;
 *  - a submit blocked on a full heap ring is woken by a slab released during its wait and
 *    succeeds then (after the release, long before its timeout);
 *  - ring selection by scope depth: outer -> ring 0, nested 1/2/3 -> rings 1/2/3, deeper ->
 *    ring 3; after each run every ring's tail == top.
 */
#include "harness.h"

#define HEAP_MSG "HeapRing exhausted, increase heap_ring_size on Worker"

/* A NULL (auto-allocated) F64 OUTPUT of `kib` KiB. */
static dagrt_tensor heap_output(uint32_t kib)
{
    return h_tensor(NULL, ((uint64_t)kib << 10) / 8, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT);
}

static void test_window_backpressure(void)
{
    dagrt_worker_config cfg = h_config(0, 4, 10000);
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    int64_t max_live = 0;
    REQUIRE(h_open_worker(&w, &o, &cfg, 2, 0));
    REQUIRE_OK(dagrt_begin_run(o, &run));
    for (int i = 0; i < 100; i++) {
        h_step s = h_step_id((uint64_t)i);
        dagrt_worker_stats_t st;
        s.sleep_us = 300;
        REQUIRE_OK(dagrt_scope_begin(o));
        if (!SUBMIT_STEP(o, &s, i % 2, NULL, 0, NULL, 0, NULL)) {
            dagrt_scope_end(o);
            break;
        }
        REQUIRE_OK(dagrt_scope_end(o));
        st = h_stats(w);
        if (st.live_slots > max_live)
            max_live = st.live_slots;
    }
    EXPECT_OK(h_finish_run(w, o, run));
    for (int i = 0; i < 100; i++)
        CHECK_RAN_ONCE(i);
    CHECKF(max_live <= 4, "%" PRId64 " slots live at once with a task window of 4", max_live);
    h_close_worker(w);
}

static void test_window_full_then_recovery(void)
{
    dagrt_worker_config cfg = h_config(0, 4, 200);
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_task_handle h = {3, 3};
    dagrt_run_stats_t rs;
    void *p = &h;
    uint64_t shape[1] = {16};
    REQUIRE(h_open_worker(&w, &o, &cfg, 2, 0));
    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE_OK(dagrt_scope_begin(o));
    for (int i = 0; i < 4; i++) {
        h_step s = h_step_id((uint64_t)i);
        s.wait_gate = 0;
        SUBMIT_STEP(o, &s, i % 2, NULL, 0, NULL, 0, NULL);
    }
    REQUIRE_OK(dagrt_scope_end(o));
    {
        h_step s = h_step_id(10);
        EXPECT_ERROR(h_submit_step(o, &s, 0, NULL, 0, NULL, 0, &h), DAGRT_STATUS_WINDOW_FULL,
                     "task window full");
        CHECK_EQ_U64(h.slot, 3);
        EXPECT_ERROR(dagrt_alloc(o, shape, 1, DAGRT_DTYPE_F64, &p, NULL), DAGRT_STATUS_WINDOW_FULL,
                     "task window full");
        CHECK(p == (void *)&h);
    }
    REQUIRE_OK(dagrt_run_stats(w, run, &rs));
    CHECK_EQ_I64(rs.live_slots, 4);
    h_gate_open(0); /* the blocked tasks finish, their scope already ended: slots free up */
    {
        h_step s = h_step_id(11);
        SUBMIT_STEP(o, &s, 1, NULL, 0, NULL, 0, &h);
        CHECK_EQ_U64(h.run_id, run);
    }
    EXPECT_OK(h_finish_run(w, o, run));
    for (int i = 0; i < 4; i++)
        CHECK_RAN_ONCE(i);
    CHECK_NEVER_RAN(10);
    CHECK_RAN_ONCE(11);
    h_close_worker(w);
}

static void test_auto_allocated_output(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_tensor tp = h_tensor(NULL, 100, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT);
    dagrt_tensor tc;
    dagrt_worker_stats_t s0, s1;
    h_step p = h_step_id(1), c = h_step_id(2);
    REQUIRE(h_open_worker(&w, &o, NULL, 2, 0));
    p.op = H_OP_FILL;
    p.operand = 7;
    p.sleep_us = 20000;
    c.op = H_OP_READ;
    REQUIRE_OK(dagrt_begin_run(o, &run));
    s0 = h_stats(w);
    SUBMIT_STEP(o, &p, 0, &tp, 1, NULL, 0, NULL);
    s1 = h_stats(w);
    REQUIRE(tp.data != NULL);
    CHECKF(((uintptr_t)tp.data % 1024) == 0, "auto-allocated address %p not 1024-aligned", tp.data);
    CHECK_EQ_U64(s1.heap_top[0] - s0.heap_top[0], 1024); /* 800 bytes rounded up */
    CHECK_EQ_U64(tp.offset, 0);
    CHECK_EQ_U64(tp.shape[0], 100);
    tc = h_tensor(tp.data, 100, DAGRT_DTYPE_F64, DAGRT_TAG_INPUT);
    SUBMIT_STEP(o, &c, 1, &tc, 1, NULL, 0, NULL);
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_BEFORE(1, 2);
    CHECKF(h_read[2] == 700, "consumer read %g, expected 700", h_read[2]);

    /* several NULL OUTPUTs (and a user buffer) in one submit, through the args builder */
    {
        dagrt_args_t *a = NULL;
        dagrt_task_args v;
        dagrt_tensor t[4], got[4];
        uint64_t user_buf[8];
        uint64_t sc[S_COUNT];
        h_step q = h_step_id(3);
        h_step_scalars(&q, sc);
        t[0] = h_tensor(NULL, 10, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT);   /* 80 B -> 1024 */
        t[1] = h_tensor(NULL, 300, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT);  /* 2400 B -> 3072 */
        t[2] = h_tensor(user_buf, 8, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
        t[3] = h_tensor(NULL, 1, DAGRT_DTYPE_U8, DAGRT_TAG_OUTPUT);     /* 1 B -> 1024 */
        REQUIRE_OK(dagrt_args_new(&a));
        for (int i = 0; i < 4; i++)
            EXPECT_OK(dagrt_args_add_tensor(a, &t[i]));
        for (int i = 0; i < S_COUNT; i++)
            EXPECT_OK(dagrt_args_add_scalar(a, sc[i]));
        REQUIRE_OK(dagrt_begin_run(o, &run));
        s0 = h_stats(w);
        EXPECT_OK(dagrt_args_view(a, &v));
        EXPECT_OK(dagrt_submit_next_level(o, h_step_callable(), &v, NULL, 0, NULL));
        s1 = h_stats(w);
        for (int i = 0; i < 4; i++)
            EXPECT_OK(dagrt_args_get_tensor(a, (uint32_t)i, &got[i]));
        CHECK(got[0].data && got[1].data && got[3].data);
        CHECK(got[2].data == (void *)user_buf); /* user buffers are left alone */
        for (int i = 0; i < 4; i++)
            if (i != 2)
                CHECKF(((uintptr_t)got[i].data % 1024) == 0, "slab %d at %p not aligned", i,
                       got[i].data);
        {
            /* distinct and non-overlapping */
            uintptr_t b0 = (uintptr_t)got[0].data, b1 = (uintptr_t)got[1].data,
                      b3 = (uintptr_t)got[3].data;
            CHECK(b0 != b1 && b1 != b3 && b0 != b3);
            CHECK(b0 + 80 <= b1 || b1 + 2400 <= b0);
            CHECK(b1 + 2400 <= b3 || b3 + 1 <= b1);
            CHECK(b0 + 80 <= b3 || b3 + 1 <= b0);
        }
        CHECK_EQ_U64(s1.heap_top[0] - s0.heap_top[0], 1024 + 3072 + 1024);
        EXPECT_OK(h_finish_run(w, o, run));
        CHECK_RAN_ONCE(3);
        dagrt_args_free(a);
    }

    /* OUTPUT_EXISTING is never auto-allocated */
    {
        dagrt_tensor te = h_tensor(NULL, 8, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT_EXISTING);
        dagrt_tensor ts = h_tile(NULL, 0, DAGRT_DTYPE_F64, 4, 4, 8, DAGRT_TAG_OUTPUT);
        h_step q = h_step_id(4);
        REQUIRE_OK(dagrt_begin_run(o, &run));
        s0 = h_stats(w);
        EXPECT_ERROR(h_submit_step(o, &q, 0, &te, 1, NULL, 0, NULL), DAGRT_STATUS_INVALID_ARGUMENT,
                     NULL);
        CHECK(te.data == NULL);
        /* an auto-allocated OUTPUT must be dense */
        EXPECT_ERROR(h_submit_step(o, &q, 0, &ts, 1, NULL, 0, NULL), DAGRT_STATUS_INVALID_ARGUMENT,
                     NULL);
        s1 = h_stats(w);
        CHECK_EQ_U64(s1.heap_top[0], s0.heap_top[0]);
        EXPECT_OK(h_finish_run(w, o, run));
        CHECK_NEVER_RAN(4);
    }
    h_close_worker(w);
}

static void test_heap_too_large(void)
{
    dagrt_worker_config cfg = h_config(1u << 20, 0, 200);
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_tensor t = h_tensor(NULL, (2u << 20) / 8, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT);
    uint64_t shape[2] = {1024, 1024};
    void *p = NULL;
    h_step s = h_step_id(1);
    REQUIRE(h_open_worker(&w, &o, &cfg, 1, 0));
    REQUIRE_OK(dagrt_begin_run(o, &run));
    EXPECT_ERROR(h_submit_step(o, &s, 0, &t, 1, NULL, 0, NULL), DAGRT_STATUS_HEAP_EXHAUSTED, HEAP_MSG);
    CHECK(t.data == NULL);
    EXPECT_ERROR(dagrt_alloc(o, shape, 2, DAGRT_DTYPE_F64, &p, NULL), DAGRT_STATUS_HEAP_EXHAUSTED,
                 HEAP_MSG);
    CHECK(p == NULL);
    /* exactly one ring fits */
    t = h_tensor(NULL, (1u << 20) / 8, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT);
    s.id = 2;
    SUBMIT_STEP(o, &s, 0, &t, 1, NULL, 0, NULL);
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_NEVER_RAN(1);
    CHECK_RAN_ONCE(2);
    h_close_worker(w);
}

static void test_heap_exhausted_by_timeout(void)
{
    dagrt_worker_config cfg = h_config(64u << 10, 0, 200);
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_tensor ta = heap_output(48);
    dagrt_tensor tb = heap_output(32);
    dagrt_run_stats_t rs;
    dagrt_worker_stats_t before, after;
    h_step a = h_step_id(1), b = h_step_id(2), b2 = h_step_id(3);
    uint64_t shape[1] = {(32u << 10) / 8};
    void *p = NULL;
    REQUIRE(h_open_worker(&w, &o, &cfg, 2, 0));
    a.wait_gate = 0;
    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE_OK(dagrt_scope_begin(o)); /* ring 1 */
    SUBMIT_STEP(o, &a, 0, &ta, 1, NULL, 0, NULL);
    before = h_stats(w);
    EXPECT_ERROR(h_submit_step(o, &b, 1, &tb, 1, NULL, 0, NULL), DAGRT_STATUS_HEAP_EXHAUSTED,
                 HEAP_MSG);
    EXPECT_ERROR(dagrt_alloc(o, shape, 1, DAGRT_DTYPE_F64, &p, NULL), DAGRT_STATUS_HEAP_EXHAUSTED,
                 HEAP_MSG);
    after = h_stats(w);
    CHECK(tb.data == NULL);
    CHECK_EQ_U64(after.heap_top[1], before.heap_top[1]);
    CHECK_EQ_I64(after.live_slots, before.live_slots); /* the slot claim was rolled back */
    REQUIRE_OK(dagrt_run_stats(w, run, &rs));
    CHECK_EQ_I64(rs.live_slots, 1);
    /* other rings are unaffected by ring 1 being full */
    REQUIRE_OK(dagrt_scope_begin(o)); /* ring 2 */
    {
        dagrt_tensor tc = heap_output(32);
        h_step c = h_step_id(4);
        SUBMIT_STEP(o, &c, 1, &tc, 1, NULL, 0, NULL);
    }
    REQUIRE_OK(dagrt_scope_end(o));
    REQUIRE_OK(dagrt_scope_end(o)); /* a's scope reference is released */
    h_gate_open(0);                  /* a finishes and is reclaimed: ring 1 drains */
    REQUIRE_OK(dagrt_scope_begin(o));
    SUBMIT_STEP(o, &b2, 1, &tb, 1, NULL, 0, NULL);
    CHECK(tb.data != NULL);
    REQUIRE_OK(dagrt_scope_end(o));
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(1);
    CHECK_NEVER_RAN(2);
    CHECK_RAN_ONCE(3);
    CHECK_RAN_ONCE(4);
    h_close_worker(w);
}

/* The helper thread of test_heap_wait_wakes_on_release: once the main thread is inside its
 * submit (it sets `go`, then claims a slot: live slots reach 2), 50 ms more, then open gate
 * 0, which lets task 1 finish and release its slab. */
typedef struct heap_waker {
    dagrt_worker_t *w;
    atomic_int go;
    atomic_int saw_claim;
    atomic_uint_fast64_t opened_ms;
} heap_waker;

static void *heap_waker_main(void *arg)
{
    heap_waker *k = arg;
    if (H_POLL(atomic_load(&k->go) != 0, 5000)) {
        /* the slot is claimed before the heap wait (a synchronisation aid, not a check) */
        atomic_store(&k->saw_claim, H_POLL(h_stats(k->w).live_slots >= 2, 1000));
        h_sleep_us(50000);
    }
    atomic_store(&k->opened_ms, h_now_ms());
    h_gate_open(0);
    return NULL;
}

/* A submit blocked on a full heap ring wakes up when a slab is released during its wait, and
 * succeeds then, not at its timeout: task 1 holds 48 KiB of a 64 KiB ring 1 behind gate 0
 * with its scope ended; a 32 KiB OUTPUT submit in ring 1 blocks until a helper thread opens
 * the gate 50 ms later. The submit takes at least those 50 ms, returns after task 1 ended,
 * and returns long before its 10 s timeout (a waiter woken only by its deadline would find
 * the space free then and succeed too, at the timeout). */
static void test_heap_wait_wakes_on_release(void)
{
    dagrt_worker_config cfg = h_config(64u << 10, 0, 10000);
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_tensor ta = heap_output(48);
    dagrt_tensor tb = heap_output(32);
    h_step a = h_step_id(1), b = h_step_id(2);
    heap_waker k;
    pthread_t th;
    dagrt_status s;
    uint64_t t0, t1, a_end;
    REQUIRE(h_open_worker(&w, &o, &cfg, 2, 0));
    a.wait_gate = 0;
    memset(&k, 0, sizeof k);
    k.w = w;
    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE_OK(dagrt_scope_begin(o)); /* ring 1 */
    SUBMIT_STEP(o, &a, 0, &ta, 1, NULL, 0, NULL);
    REQUIRE_OK(dagrt_scope_end(o)); /* a's slab now waits only for a to finish */
    REQUIRE(pthread_create(&th, NULL, heap_waker_main, &k) == 0);
    REQUIRE_OK(dagrt_scope_begin(o)); /* ring 1 again */
    t0 = h_now_ms();
    atomic_store(&k.go, 1);
    s = h_submit_step(o, &b, 1, &tb, 1, NULL, 0, NULL);
    t1 = h_now_ms();
    a_end = h_end(1);
    pthread_join(th, NULL);
    EXPECT_OK(s);
    CHECK(tb.data != NULL);
    CHECKF(a_end != 0, "the submit got its 32 KiB before task 1 released its 48 KiB");
    CHECKF(t1 - t0 >= 50 && t1 >= atomic_load(&k.opened_ms),
           "the submit returned after %" PRIu64 " ms, before the gate opened at 50 ms", t1 - t0);
    CHECKF(t1 - t0 < cfg.timeout_ms / 2,
           "the blocked submit returned after %" PRIu64 " ms of its %u ms timeout: the slab "
           "released at ~50 ms did not wake it",
           t1 - t0, cfg.timeout_ms);
    if (!atomic_load(&k.saw_claim))
        printf("note: the helper did not see the submit's slot claim before opening the gate\n");
    REQUIRE_OK(dagrt_scope_end(o));
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(1);
    CHECK_RAN_ONCE(2);
    h_close_worker(w);
}

/* Back-pressure fails after timeout_ms without progress, and a slot that came free is
 * progress: a submit that waited most of the timeout for a slot (window 2, both held) and then
 * finds the heap ring still full fails a full timeout after the slot came free, not when what
 * was left of the first timeout is spent. */
static void test_slot_freed_restarts_the_slab_wait(void)
{
    dagrt_worker_config cfg = h_config(64u << 10, 2, 1000);
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_tensor ta = heap_output(48);
    dagrt_tensor tc = heap_output(32);
    h_step a = h_step_id(1), b = h_step_id(2), c = h_step_id(3);
    uint64_t slot_free_ms = cfg.timeout_ms * 6 / 10, t0, took;
    h_gate_timer opener;
    REQUIRE(h_open_worker(&w, &o, &cfg, 2, 0));
    a.wait_gate = 0; /* holds 48 KiB of ring 1 until the end */
    b.wait_gate = 1; /* holds the window's other slot until 0.6 of the timeout */
    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE_OK(dagrt_scope_begin(o)); /* ring 1 */
    SUBMIT_STEP(o, &a, 0, &ta, 1, NULL, 0, NULL);
    SUBMIT_STEP(o, &b, 1, NULL, 0, NULL, 0, NULL);
    REQUIRE_OK(dagrt_scope_end(o)); /* a and b are now held only by their gates */
    REQUIRE_OK(dagrt_scope_begin(o)); /* ring 1 again */
    REQUIRE(h_open_gate_after(&opener, 1, slot_free_ms));
    t0 = h_now_ms();
    EXPECT_ERROR(h_submit_step(o, &c, 1, &tc, 1, NULL, 0, NULL), DAGRT_STATUS_HEAP_EXHAUSTED,
                 HEAP_MSG);
    took = h_now_ms() - t0;
    pthread_join(opener.th, NULL);
    CHECKF(h_end(2) != 0 && h_end(2) < t0 + took, "the window's slot was not freed during the "
                                                    "submit");
    CHECKF(took >= slot_free_ms + cfg.timeout_ms * 9 / 10 &&
               took < slot_free_ms + cfg.timeout_ms * 14 / 10,
           "a submit that waited %" PRIu64 " ms for a slot then for the slab failed after %" PRIu64
           " ms; its timeout is %u ms without progress",
           slot_free_ms, took, cfg.timeout_ms);
    CHECK(tc.data == NULL);
    REQUIRE_OK(dagrt_scope_end(o));
    h_gate_open(0);
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(1);
    CHECK_RAN_ONCE(2);
    CHECK_NEVER_RAN(3);
    h_close_worker(w);
}

/* A submit that claims a slot and then fails on the heap rolls the claim back completely: the
 * id it held for a moment was never issued. Once that sequence number is issued at another
 * table entry, a handle forged with the rolled-back id is still refused. */
static void test_rolled_back_claim_is_not_issued(void)
{
    dagrt_worker_config cfg = h_config(64u << 10, 0, 100);
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_tensor ta = heap_output(48);
    dagrt_tensor tb = heap_output(32);
    h_step a = h_step_id(1), b = h_step_id(2), c = h_step_id(3), f = h_step_id(4);
    dagrt_task_handle ha, hc, forged;
    dagrt_dep d;
    uint64_t seq, index;
    int spins = 0;
    REQUIRE(h_open_worker(&w, &o, &cfg, 2, 0));
    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE_OK(dagrt_scope_begin(o)); /* ring 1, holds a's slab until the scope ends */
    SUBMIT_STEP(o, &a, 0, &ta, 1, NULL, 0, &ha);
    seq = ha.slot >> 24;
    index = ha.slot & 0xffffffu;
    /* claims {seq + 1, index + 1} (the next fresh entry), then the heap times out */
    EXPECT_ERROR(h_submit_step(o, &b, 1, &tb, 1, NULL, 0, NULL), DAGRT_STATUS_HEAP_EXHAUSTED,
                 HEAP_MSG);
    REQUIRE_OK(dagrt_scope_end(o)); /* a is reclaimed: its entry is the next one free */
    while (h_stats(w).live_slots != 0 && spins++ < 10000)
        usleep(1000);
    REQUIRE(h_stats(w).live_slots == 0);
    SUBMIT_STEP(o, &c, 1, NULL, 0, NULL, 0, &hc);
    CHECK_EQ_U64(hc.slot, ((seq + 1) << 24) | index); /* seq + 1 issued at a's entry */
    forged = ha;
    forged.slot = ((seq + 1) << 24) | (index + 1);
    d = h_dep(forged, DAGRT_DEP_KIND_WAIT);
    EXPECT_ERROR(h_submit_step(o, &f, 1, NULL, 0, &d, 1, NULL), DAGRT_STATUS_STALE_HANDLE, NULL);
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(1);
    CHECK_NEVER_RAN(2);
    CHECK_RAN_ONCE(3);
    CHECK_NEVER_RAN(4);
    h_close_worker(w);
}

/* Which ring did one NULL OUTPUT (and one alloc) submitted at `nested` extra scopes use? */
static void ring_at_depth(dagrt_worker_t *w, dagrt_orch_t *o, int nested, int want_ring,
                          uint64_t id)
{
    dagrt_worker_stats_t s0, s1, s2;
    dagrt_tensor t = h_tensor(NULL, 16, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT);
    h_step s = h_step_id(id);
    uint64_t shape[1] = {300};
    void *p = NULL;
    for (int i = 0; i < nested; i++)
        REQUIRE_OK(dagrt_scope_begin(o));
    s0 = h_stats(w);
    SUBMIT_STEP(o, &s, 0, &t, 1, NULL, 0, NULL);
    s1 = h_stats(w);
    EXPECT_OK(dagrt_alloc(o, shape, 1, DAGRT_DTYPE_F64, &p, NULL));
    s2 = h_stats(w);
    for (int r = 0; r < 4; r++) {
        uint64_t d1 = s1.heap_top[r] - s0.heap_top[r], d2 = s2.heap_top[r] - s1.heap_top[r];
        CHECKF(d1 == (r == want_ring ? 1024u : 0u),
               "depth %d: OUTPUT moved ring %d top by %" PRIu64 " (expected ring %d)", nested, r,
               d1, want_ring);
        CHECKF(d2 == (r == want_ring ? 3072u : 0u),
               "depth %d: alloc moved ring %d top by %" PRIu64 " (expected ring %d)", nested, r,
               d2, want_ring);
    }
    for (int i = 0; i < nested; i++)
        REQUIRE_OK(dagrt_scope_end(o));
}

static void test_ring_by_scope_depth(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    static const int depth[7] = {0, 1, 2, 3, 4, 5, 9};
    static const int ring[7] = {0, 1, 2, 3, 3, 3, 3};
    REQUIRE(h_open_worker(&w, &o, NULL, 1, 0));
    REQUIRE_OK(dagrt_begin_run(o, &run));
    for (int i = 0; i < 7; i++)
        ring_at_depth(w, o, depth[i], ring[i], (uint64_t)i);
    EXPECT_OK(h_finish_run(w, o, run));
    for (int i = 0; i < 7; i++)
        CHECK_RAN_ONCE(i);
    {
        dagrt_worker_stats_t st = h_stats(w);
        for (int r = 0; r < 4; r++) {
            CHECK(st.heap_top[r] > 0);
            CHECKF(st.heap_tail[r] == st.heap_top[r], "ring %d: tail %" PRIu64 " != top %" PRIu64,
                   r, st.heap_tail[r], st.heap_top[r]);
        }
    }
    h_close_worker(w);
}

int main(void)
{
    h_begin("ring", 90);
    RUN_TEST(test_window_backpressure);
    RUN_TEST(test_window_full_then_recovery);
    RUN_TEST(test_auto_allocated_output);
    RUN_TEST(test_heap_too_large);
    RUN_TEST(test_heap_exhausted_by_timeout);
    RUN_TEST(test_heap_wait_wakes_on_release);
    RUN_TEST(test_slot_freed_restarts_the_slab_wait);
    RUN_TEST(test_rolled_back_claim_is_not_issued);
    RUN_TEST(test_ring_by_scope_depth);
    return h_done();
}
