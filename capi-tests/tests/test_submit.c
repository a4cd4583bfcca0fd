/*
 * test_submit.c: the submit API (Orchestrator seed §1-4, Scheduler seed §3-4).
 *  - submit_next_level runs on exactly its target lane (task_view->worker_id), with
 *    non-contiguous stable ids; an unknown id is UNKNOWN_WORKER;
 *  - lane ids at add time: negative -> INVALID_ARGUMENT, duplicate -> DUPLICATE_TARGET; lanes
 *    cannot be added after init; init needs lanes;
 *  - groups: member i on workers[i], members run concurrently (a barrier all N must reach),
 *    all-or-nothing dispatch (no member starts while one target is busy), a blocked group
 *    head reserves its targets against later singles, consumers wait for every member;
 *    duplicate target -> DUPLICATE_TARGET, unknown target -> UNKNOWN_WORKER, empty group ->
 *    INVALID_ARGUMENT, and a rejected group leaves no trace;
 *  - submit_sub / submit_sub_group: SUB lanes, distinct lanes, concurrently; a SUB group
 *    larger than the SUB lane count is rejected;
 *  - the executor sees its tensors, scalars, call config, member index, run id and slot;
 *  - dagrt_task_fail's message reaches dagrt_wait_run's error;
 *  - unknown callable -> UNKNOWN_CALLABLE; registration identity and CALLABLE_CONFLICT.
 */
#include "harness.h"

static const int32_t IDS[3] = {5, 9, 2};

static void test_single_targets_exact_lane(void)
{
    dagrt_worker_t *w = h_worker_ids(NULL, IDS, 3, 2);
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_task_handle h = {111, 222};
    REQUIRE(w != NULL);
    o = h_orch(w);
    REQUIRE_OK(dagrt_begin_run(o, &run));
    for (int i = 0; i < 30; i++) {
        h_step s = h_step_id((uint64_t)i);
        SUBMIT_STEP(o, &s, IDS[i % 3], NULL, 0, NULL, 0, NULL);
    }
    /* unknown ids: never a lane, including SUB-looking negative ids */
    {
        h_step s = h_step_id(100);
        EXPECT_ERROR(h_submit_step(o, &s, 3, NULL, 0, NULL, 0, &h), DAGRT_STATUS_UNKNOWN_WORKER,
                     "3");
        EXPECT_ERROR(h_submit_step(o, &s, -1, NULL, 0, NULL, 0, &h), DAGRT_STATUS_UNKNOWN_WORKER,
                     "-1");
        EXPECT_ERROR(h_submit_step(o, &s, 0, NULL, 0, NULL, 0, &h), DAGRT_STATUS_UNKNOWN_WORKER,
                     "0");
        CHECK_EQ_U64(h.run_id, 111); /* out untouched on failure */
        CHECK_EQ_U64(h.slot, 222);
    }
    EXPECT_OK(h_finish_run(w, o, run));
    for (int i = 0; i < 30; i++) {
        CHECK_RAN_ONCE(i);
        CHECKF(h_worker_of(i) == IDS[i % 3], "task %d targeted lane %d but ran on %d", i,
               IDS[i % 3], h_worker_of(i));
    }
    CHECK_NEVER_RAN(100);
    h_close_worker(w);
}

static void test_lane_registration_errors(void)
{
    dagrt_worker_t *w = NULL;
    dagrt_orch_t *o = (dagrt_orch_t *)&w;
    dagrt_worker_stats_t st;
    dagrt_worker_config cfg;

    REQUIRE_OK(dagrt_worker_new(NULL, &w));
    EXPECT_ERROR(dagrt_worker_add_next_level_lane(w, -1), DAGRT_STATUS_INVALID_ARGUMENT, "-1");
    EXPECT_ERROR(dagrt_worker_add_next_level_lane(w, INT32_MIN), DAGRT_STATUS_INVALID_ARGUMENT,
                 NULL);
    EXPECT_OK(dagrt_worker_add_next_level_lane(w, 4));
    EXPECT_ERROR(dagrt_worker_add_next_level_lane(w, 4), DAGRT_STATUS_DUPLICATE_TARGET, "4");
    EXPECT_ERROR(dagrt_worker_add_sub_lanes(w, 0), DAGRT_STATUS_INVALID_ARGUMENT, NULL);
    /* not initialised yet */
    EXPECT_ERROR(dagrt_worker_orch(w, &o), DAGRT_STATUS_WRONG_STATE, NULL);
    CHECK(o == (dagrt_orch_t *)&w);
    EXPECT_ERROR(dagrt_worker_stats(w, &st), DAGRT_STATUS_WRONG_STATE, NULL);
    REQUIRE_OK(dagrt_worker_init(w));
    /* after init: configuration is frozen */
    EXPECT_ERROR(dagrt_worker_add_next_level_lane(w, 7), DAGRT_STATUS_WRONG_STATE, NULL);
    EXPECT_ERROR(dagrt_worker_add_sub_lanes(w, 1), DAGRT_STATUS_WRONG_STATE, NULL);
    EXPECT_ERROR(dagrt_worker_init(w), DAGRT_STATUS_WRONG_STATE, NULL);
    {
        /* lane 4 exists and works; 7 was rejected */
        dagrt_run_id run;
        h_step s = h_step_id(1);
        o = h_orch(w);
        REQUIRE_OK(dagrt_begin_run(o, &run));
        SUBMIT_STEP(o, &s, 4, NULL, 0, NULL, 0, NULL);
        s.id = 2;
        EXPECT_STATUS(h_submit_step(o, &s, 7, NULL, 0, NULL, 0, NULL), DAGRT_STATUS_UNKNOWN_WORKER);
        EXPECT_OK(h_finish_run(w, o, run));
        CHECK_RAN_ONCE(1);
        CHECK(h_worker_of(1) == 4);
        CHECK_NEVER_RAN(2);
    }
    EXPECT_OK(dagrt_worker_close(w));
    dagrt_worker_free(w);

    /* a worker without lanes cannot start */
    w = NULL;
    REQUIRE_OK(dagrt_worker_new(NULL, &w));
    EXPECT_ERROR(dagrt_worker_init(w), DAGRT_STATUS_WRONG_STATE, NULL);
    dagrt_worker_free(w);

    /* configuration values */
    /* the seed's defaults: 1 GiB per heap ring, 10 s back-pressure timeout */
    memset(&cfg, 0xff, sizeof cfg);
    EXPECT_OK(dagrt_worker_config_default(&cfg));
    CHECK_EQ_U64(cfg.heap_ring_size, 1ull << 30);
    CHECK_EQ_U64(cfg.timeout_ms, 10000);
    CHECK(cfg.task_window >= 1 && cfg.task_window <= (1u << 24));
    cfg.task_window = 0;
    w = NULL;
    EXPECT_ERROR(dagrt_worker_new(&cfg, &w), DAGRT_STATUS_INVALID_ARGUMENT, "task_window");
    CHECK(w == NULL);
    dagrt_worker_config_default(&cfg);
    cfg.heap_ring_size = 0;
    EXPECT_ERROR(dagrt_worker_new(&cfg, &w), DAGRT_STATUS_INVALID_ARGUMENT, "heap_ring_size");
    CHECK(w == NULL);
}

static void test_group_placement_and_concurrency(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    const int32_t targets[3] = {2, 0, 1};
    h_step steps[3];
    h_group g;
    dagrt_task_handle gh, ch;
    dagrt_dep dep;
    dagrt_run_stats_t rs;
    REQUIRE(h_open_worker(&w, &o, NULL, 3, 0));
    h_barrier_steps(steps, 3, 10, 0, 3); /* all three must be running at once to pass */
    h_make_group(&g, steps, 3, NULL, 0);
    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE_OK(dagrt_submit_next_level_group(o, h_step_callable(), g.a, 3, NULL, targets, &gh));
    CHECK_EQ_U64(gh.run_id, run);
    dep = h_dep(gh, DAGRT_DEP_KIND_RETAIN);
    {
        h_step c = h_step_id(20);
        SUBMIT_STEP(o, &c, 1, NULL, 0, &dep, 1, &ch);
    }
    EXPECT_OK(h_finish_run(w, o, run));
    for (int i = 0; i < 3; i++) {
        CHECK_RAN_ONCE(10 + i);
        CHECKF(h_worker_of(10 + i) == targets[i], "member %d ran on lane %d, target %d", i,
               h_worker_of(10 + i), targets[i]);
        CHECK_EQ_U64(atomic_load(&h_recs[10 + i].member), (uint64_t)i);
        CHECK_EQ_U64(atomic_load(&h_recs[10 + i].group_size), 3);
        CHECK_EQ_U64(atomic_load(&h_recs[10 + i].slot), gh.slot);
        CHECK_BEFORE(10 + i, 20); /* the consumer waits for every member */
    }
    CHECK_RAN_ONCE(20);
    (void)rs;
    h_close_worker(w);
}

/* A group whose target lane 0 is busy: no member starts until lane 0 is idle, and a single
 * for lane 1 submitted behind the blocked group head does not overtake it. */
static void test_group_all_or_nothing(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    const int32_t targets[2] = {0, 1};
    h_step steps[2];
    h_group g;
    h_step blocker = h_step_id(1), later = h_step_id(5), other = h_step_id(6);
    REQUIRE(h_open_worker(&w, &o, NULL, 3, 0));
    blocker.wait_gate = 0; /* lane 0 stays busy until the test opens gate 0 */
    h_barrier_steps(steps, 2, 2, 1, 2);
    h_make_group(&g, steps, 2, NULL, 0);
    REQUIRE_OK(dagrt_begin_run(o, &run));
    SUBMIT_STEP(o, &blocker, 0, NULL, 0, NULL, 0, NULL);
    REQUIRE(H_POLL(h_start(1) != 0, 5000)); /* lane 0 is now busy */
    REQUIRE_OK(dagrt_submit_next_level_group(o, h_step_callable(), g.a, 2, NULL, targets, NULL));
    SUBMIT_STEP(o, &later, 1, NULL, 0, NULL, 0, NULL);  /* behind the reserved head */
    SUBMIT_STEP(o, &other, 2, NULL, 0, NULL, 0, NULL);  /* lane 2 is not reserved */
    /* lane 2's single is not held back by the blocked group */
    CHECKF(H_POLL(h_end(6) != 0, 5000), "a single on an unreserved lane did not run while a "
                                        "group head was blocked");
    h_sleep_us(50 * 1000); /* give a (wrong) partial dispatch every chance to happen */
    CHECKF(h_start(3) == 0, "group member 1 started on idle lane 1 while target lane 0 was busy");
    CHECKF(h_start(5) == 0, "a single on lane 1 overtook the blocked group head reserving lane 1");
    h_gate_open(0);
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(1);
    CHECK_RAN_ONCE(2);
    CHECK_RAN_ONCE(3);
    CHECK_RAN_ONCE(5);
    CHECK_RAN_ONCE(6);
    CHECK_BEFORE(1, 2);
    CHECK_BEFORE(1, 3);
    CHECK_BEFORE(3, 5);
    CHECK(h_worker_of(2) == 0 && h_worker_of(3) == 1);
    h_close_worker(w);
}

static int stats_equal(const dagrt_worker_stats_t *a, const dagrt_worker_stats_t *b)
{
    for (int r = 0; r < 4; r++)
        if (a->heap_top[r] != b->heap_top[r] || a->heap_tail[r] != b->heap_tail[r])
            return 0;
    return a->live_slots == b->live_slots && a->tensormap_entries == b->tensormap_entries &&
           a->runs == b->runs;
}

static void test_group_rejections_leave_no_trace(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    h_step steps[2];
    h_group g;
    double buf[2][16];
    dagrt_tensor ts[4]; /* per member: an auto-allocated OUTPUT and an OUTPUT on buf[i] */
    dagrt_task_handle h = {42, 43}, ok_h;
    dagrt_worker_stats_t before, after;
    dagrt_run_stats_t rs;
    const int32_t dup[2] = {1, 1}, unknown[2] = {0, 42}, fine[2] = {0, 1};
    REQUIRE(h_open_worker(&w, &o, NULL, 3, 0));
    for (int i = 0; i < 2; i++) {
        steps[i] = h_step_id(30 + (uint64_t)i);
        ts[2 * i] = h_tensor(NULL, 16, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT);
        ts[2 * i + 1] = h_tensor(buf[i], 16, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT);
    }
    h_make_group(&g, steps, 2, ts, 2);
    REQUIRE_OK(dagrt_begin_run(o, &run));
    before = h_stats(w);
    EXPECT_ERROR(dagrt_submit_next_level_group(o, h_step_callable(), g.a, 2, NULL, dup, &h),
                 DAGRT_STATUS_DUPLICATE_TARGET, "1");
    EXPECT_ERROR(dagrt_submit_next_level_group(o, h_step_callable(), g.a, 2, NULL, unknown, &h),
                 DAGRT_STATUS_UNKNOWN_WORKER, "42");
    EXPECT_ERROR(dagrt_submit_next_level_group(o, h_step_callable(), g.a, 0, NULL, fine, &h),
                 DAGRT_STATUS_INVALID_ARGUMENT, "count");
    {
        /* members whose tensors arrays overlap, with an auto-allocated OUTPUT in them: one
         * address written back would hide the other member's buffer */
        h_group shared = g;
        shared.a[1].tensors = g.a[0].tensors; /* the same array */
        EXPECT_ERROR(
            dagrt_submit_next_level_group(o, h_step_callable(), shared.a, 2, NULL, fine, &h),
            DAGRT_STATUS_INVALID_ARGUMENT, "share a tensors array");
        shared.a[1].tensors = ts + 1; /* overlapping by one element (member 0's buf OUTPUT) */
        EXPECT_ERROR(
            dagrt_submit_next_level_group(o, h_step_callable(), shared.a, 2, NULL, fine, &h),
            DAGRT_STATUS_INVALID_ARGUMENT, "members 0 and 1");
    }
    after = h_stats(w);
    CHECKF(stats_equal(&before, &after),
           "a rejected group changed the worker: live_slots %" PRId64 " -> %" PRId64
           ", tensormap %" PRIu64 " -> %" PRIu64 ", ring0 top %" PRIu64 " -> %" PRIu64,
           before.live_slots, after.live_slots, before.tensormap_entries,
           after.tensormap_entries, before.heap_top[0], after.heap_top[0]);
    CHECK(ts[0].data == NULL && ts[2].data == NULL); /* no address written back */
    CHECK_EQ_U64(h.run_id, 42);
    CHECK_EQ_U64(h.slot, 43);
    REQUIRE_OK(dagrt_run_stats(w, run, &rs));
    CHECK_EQ_I64(rs.live_slots, 0);

    /* later submits are fine, including the same group on distinct targets */
    {
        h_step s = h_step_id(35);
        SUBMIT_STEP(o, &s, 2, NULL, 0, NULL, 0, NULL);
    }
    EXPECT_OK(dagrt_submit_next_level_group(o, h_step_callable(), g.a, 2, NULL, fine, &ok_h));
    CHECK(ts[0].data != NULL && ts[2].data != NULL && ts[0].data != ts[2].data);
    {
        /* sharing one array is fine when nothing in it is auto-allocated */
        h_step rd[2] = {h_step_id(36), h_step_id(37)};
        dagrt_tensor in = h_tensor(buf[1], 16, DAGRT_DTYPE_F64, DAGRT_TAG_INPUT);
        h_group gr;
        h_make_group(&gr, rd, 2, NULL, 0);
        gr.a[0].tensors = gr.a[1].tensors = &in;
        gr.a[0].num_tensors = gr.a[1].num_tensors = 1;
        EXPECT_OK(dagrt_submit_next_level_group(o, h_step_callable(), gr.a, 2, NULL, fine, NULL));
    }
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(30);
    CHECK_RAN_ONCE(31);
    CHECK_RAN_ONCE(35);
    CHECK_RAN_ONCE(36);
    CHECK_RAN_ONCE(37);
    CHECK(h_worker_of(30) == 0 && h_worker_of(31) == 1);
    h_close_worker(w);
}

static void test_sub_lanes(void)
{
    dagrt_worker_t *w = h_worker(NULL, 1, 3);
    dagrt_worker_t *w_nosub = h_worker(NULL, 1, 0);
    dagrt_orch_t *o;
    dagrt_run_id run;
    h_step steps[4];
    h_group g;
    dagrt_task_handle h = {9, 9};
    REQUIRE(w != NULL && w_nosub != NULL);
    o = h_orch(w);
    REQUIRE_OK(dagrt_begin_run(o, &run));
    for (int i = 0; i < 6; i++) {
        h_step s = h_step_id((uint64_t)i);
        EXPECT_OK(h_submit_step_sub(o, &s, NULL, 0, NULL, 0, NULL));
    }
    /* a SUB group of 2 on distinct lanes, concurrently (barrier of 2) */
    h_barrier_steps(steps, 4, 10, 0, 2);
    h_make_group(&g, steps, 4, NULL, 0);
    EXPECT_OK(dagrt_submit_sub_group(o, h_step_callable(), g.a, 2, &h));
    CHECK_EQ_U64(h.run_id, run);
    /* larger than the SUB lane count (3): rejected */
    {
        dagrt_task_handle bad = {5, 5};
        EXPECT_ERROR(dagrt_submit_sub_group(o, h_step_callable(), g.a, 4, &bad),
                     DAGRT_STATUS_INVALID_ARGUMENT, "SUB");
        EXPECT_ERROR(dagrt_submit_sub_group(o, h_step_callable(), g.a, 0, &bad),
                     DAGRT_STATUS_INVALID_ARGUMENT, "count");
        CHECK_EQ_U64(bad.slot, 5);
    }
    /* a group of exactly the SUB lane count is fine */
    {
        h_step s3[3];
        h_group g3;
        h_barrier_steps(s3, 3, 20, 1, 3);
        h_make_group(&g3, s3, 3, NULL, 0);
        EXPECT_OK(dagrt_submit_sub_group(o, h_step_callable(), g3.a, 3, NULL));
    }
    EXPECT_OK(h_finish_run(w, o, run));
    for (int i = 0; i < 6; i++) {
        CHECK_RAN_ONCE(i);
        CHECKF(h_worker_of(i) <= -1 && h_worker_of(i) >= -3,
               "SUB task %d ran on worker id %d (SUB lane k reports -1-k)", i, h_worker_of(i));
    }
    CHECK_RAN_ONCE(10);
    CHECK_RAN_ONCE(11);
    CHECK_NEVER_RAN(12);
    CHECK_NEVER_RAN(13);
    CHECK(h_worker_of(10) != h_worker_of(11));
    CHECK(h_worker_of(10) < 0 && h_worker_of(11) < 0);
    CHECK_EQ_U64(atomic_load(&h_recs[11].member), 1);
    CHECK_EQ_U64(atomic_load(&h_recs[11].group_size), 2);
    for (int i = 20; i < 23; i++)
        CHECK_RAN_ONCE(i);
    CHECK(h_worker_of(20) != h_worker_of(21) && h_worker_of(21) != h_worker_of(22) &&
          h_worker_of(20) != h_worker_of(22));
    CHECK_QUIESCENT(w);

    /* a worker without SUB lanes rejects SUB submits */
    o = h_orch(w_nosub);
    REQUIRE_OK(dagrt_begin_run(o, &run));
    {
        h_step s = h_step_id(40);
        dagrt_status st = h_submit_step_sub(o, &s, NULL, 0, NULL, 0, NULL);
        CHECKF(st != DAGRT_STATUS_OK && h_contains(dagrt_last_error(), "SUB"),
               "submit_sub without SUB lanes: %s \"%s\"", dagrt_status_str((int32_t)st),
               dagrt_last_error());
    }
    EXPECT_OK(h_finish_run(w_nosub, o, run));
    CHECK_NEVER_RAN(40);
    EXPECT_OK(dagrt_worker_close(w));
    EXPECT_OK(dagrt_worker_close(w_nosub));
    dagrt_worker_free(w);
    dagrt_worker_free(w_nosub);
}

/* ---- what the executor sees ---- */

typedef struct {
    atomic_int seen;
    dagrt_tensor tensors[4];
    uint32_t num_tensors, num_scalars;
    uint64_t scalars[8];
    dagrt_call_config config;
    int config_null;
    int32_t worker_id;
    uint32_t member_index, group_size;
    uint64_t run_id, slot;
} seen_view;

static seen_view seen[8];

static int32_t inspect_exec(const dagrt_task_view *t, void *user)
{
    uint64_t k = t->num_scalars > 0 ? t->scalars[0] : 0;
    seen_view *v;
    CHECK(user == (void *)&seen);
    if (k >= 8)
        return 1;
    v = &seen[k];
    v->num_tensors = t->num_tensors;
    v->num_scalars = t->num_scalars;
    for (uint32_t i = 0; i < t->num_tensors && i < 4; i++)
        v->tensors[i] = t->tensors[i];
    for (uint32_t i = 0; i < t->num_scalars && i < 8; i++)
        v->scalars[i] = t->scalars[i];
    v->config_null = t->config == NULL;
    if (t->config)
        v->config = *t->config;
    v->worker_id = t->worker_id;
    v->member_index = t->member_index;
    v->group_size = t->group_size;
    v->run_id = t->run_id;
    v->slot = t->slot;
    /* write through the OUTPUT tensor so the test can see the pointer is usable */
    if (t->num_tensors >= 2 && t->tensors[1].data)
        ((uint64_t *)((char *)t->tensors[1].data + t->tensors[1].offset))[0] = 0xC0FFEE + k;
    atomic_fetch_add(&v->seen, 1);
    return 0;
}

/* Lanes that run long jobs are handed the next SUB job while the current one runs (so the
 * scheduler's wake-up hides behind it). A job queued behind a long one must not be stranded
 * there: when another SUB lane goes idle with the SUB FIFO empty, it takes the job over.
 * Here the job stuck behind a blocked task is the one that unblocks it. */
static void test_sub_job_queued_behind_long_one_moves(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    h_step t1 = h_step_id(10), t2 = h_step_id(11), t3 = h_step_id(12);
    REQUIRE(h_open_worker(&w, &o, NULL, 0, 2));
    REQUIRE_OK(dagrt_begin_run(o, &run));
    /* both lanes learn that jobs here are long (milliseconds) */
    for (int i = 0; i < 6; i++) {
        h_step s = h_step_id((uint64_t)i);
        s.sleep_us = 2000;
        EXPECT_OK(h_submit_step_sub(o, &s, NULL, 0, NULL, 0, NULL));
    }
    CHECK(H_POLL(h_runs(5) == 1 && h_runs(4) == 1, 5000));
    usleep(20000);
    t1.wait_gate = 0; /* blocked until t3 runs */
    t2.wait_gate = 1; /* blocked until the test opens gate 1 */
    t3.open_at_start = 0;
    EXPECT_OK(h_submit_step_sub(o, &t1, NULL, 0, NULL, 0, NULL));
    EXPECT_OK(h_submit_step_sub(o, &t2, NULL, 0, NULL, 0, NULL));
    CHECK(H_POLL(h_runs(10) == 1 && h_runs(11) == 1, 5000)); /* one on each lane */
    EXPECT_OK(h_submit_step_sub(o, &t3, NULL, 0, NULL, 0, NULL));
    usleep(50000); /* t3 is now queued behind t1 or t2 */
    CHECK_EQ_U64(h_runs(12), 0);
    h_gate_open(1); /* t2 ends; its lane is idle, the SUB FIFO is empty */
    EXPECT_OK(h_finish_run(w, o, run));
    for (int i = 10; i <= 12; i++)
        CHECK_RAN_ONCE(i);
    CHECKF(h_worker_of(12) == h_worker_of(11), "t3 ran on lane %d, t2 on lane %d",
           h_worker_of(12), h_worker_of(11));
    h_close_worker(w);
}

/* Scheduler seed: all READY SUB tasks share one FIFO and a single goes to an idle SUB lane.
 * With lanes running long jobs, A and B block one lane each; C, D and E follow. When B's lane
 * goes idle it must start C, the FIFO's oldest, not a job queued after it: C before D before
 * E, while A still runs. (With a job queued behind A, C started only once A ended.) */
static void test_sub_fifo_order_with_long_jobs(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    h_step a = h_step_id(10), b = h_step_id(11);
    REQUIRE(h_open_worker(&w, &o, NULL, 0, 2));
    REQUIRE_OK(dagrt_begin_run(o, &run));
    for (int i = 0; i < 6; i++) { /* both lanes learn that jobs here are long (milliseconds) */
        h_step s = h_step_id((uint64_t)i);
        s.sleep_us = 2000;
        EXPECT_OK(h_submit_step_sub(o, &s, NULL, 0, NULL, 0, NULL));
    }
    REQUIRE(H_POLL(h_end(0) && h_end(1) && h_end(2) && h_end(3) && h_end(4) && h_end(5), 5000));
    a.wait_gate = 0;
    b.wait_gate = 1;
    EXPECT_OK(h_submit_step_sub(o, &a, NULL, 0, NULL, 0, NULL));
    EXPECT_OK(h_submit_step_sub(o, &b, NULL, 0, NULL, 0, NULL));
    REQUIRE(H_POLL(h_start(10) != 0 && h_start(11) != 0, 5000)); /* one on each lane */
    for (uint64_t id = 12; id <= 14; id++) {
        h_step s = h_step_id(id);
        s.sleep_us = 1000;
        EXPECT_OK(h_submit_step_sub(o, &s, NULL, 0, NULL, 0, NULL));
    }
    h_sleep_us(20 * 1000); /* C, D and E are placed, wherever the scheduler puts them */
    CHECK(h_start(12) == 0 && h_start(13) == 0 && h_start(14) == 0);
    h_gate_open(1); /* B ends: its lane runs the FIFO's C, D, E in turn */
    CHECKF(H_POLL(h_end(14) != 0, 5000), "C, D and E did not all run on B's idle lane while A "
                                         "blocked the other (C queued behind A?)");
    CHECK_EQ_U64(h_end(10), 0);
    h_gate_open(0);
    EXPECT_OK(h_finish_run(w, o, run));
    for (int id = 10; id <= 14; id++)
        CHECK_RAN_ONCE(id);
    CHECK_BEFORE(12, 13);
    CHECK_BEFORE(13, 14);
    CHECK(h_worker_of(12) == h_worker_of(11) && h_worker_of(14) == h_worker_of(11));
    h_close_worker(w);
}

/* The same on lanes that have not run anything yet (job lengths unknown): a job submitted
 * after a blocked one goes to the idle lane, not behind it. */
static void test_sub_fresh_lanes_do_not_queue_behind_a_blocked_job(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    h_step a = h_step_id(1), b = h_step_id(2), c = h_step_id(3);
    REQUIRE(h_open_worker(&w, &o, NULL, 0, 2));
    a.wait_gate = 0;
    REQUIRE_OK(dagrt_begin_run(o, &run));
    EXPECT_OK(h_submit_step_sub(o, &a, NULL, 0, NULL, 0, NULL));
    EXPECT_OK(h_submit_step_sub(o, &b, NULL, 0, NULL, 0, NULL));
    EXPECT_OK(h_submit_step_sub(o, &c, NULL, 0, NULL, 0, NULL));
    CHECKF(H_POLL(h_end(2) != 0 && h_end(3) != 0, 5000),
           "tasks submitted after a blocked one did not run on the other, idle lane");
    CHECK_EQ_U64(h_end(1), 0);
    h_gate_open(0);
    EXPECT_OK(h_finish_run(w, o, run));
    for (int id = 1; id <= 3; id++)
        CHECK_RAN_ONCE(id);
    CHECK(h_worker_of(2) != h_worker_of(1) && h_worker_of(3) != h_worker_of(1));
    CHECK_BEFORE(2, 3);
    h_close_worker(w);
}

/* Scheduler seed: a single is dispatched only to an idle target, and each pass examines the
 * group FIFO head first. s1 runs on lane 0; s2 for lane 0 and then a group on lanes {0, 1}
 * wait. When s1 ends, the group launches before s2. (With s2 queued behind s1 in lane 0's
 * mailbox, it started first and the group waited for it.) */
/* With `warm`, lane 0 first ran a run of tiny jobs: its recent jobs are short, and s2 must
 * still wait in the FIFO (not behind s1 in the lane's mailbox) for the group to pass it. */
static void group_head_before_a_waiting_single(int warm)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    const int32_t targets[2] = {0, 1};
    h_step steps[2];
    h_group g;
    h_step s1 = h_step_id(1), s2 = h_step_id(2);
    h_reset_records();
    REQUIRE(h_open_worker(&w, &o, NULL, 2, 0));
    if (warm)
        h_warm_lane(w, o, 0, 100, 16);
    s1.wait_gate = 0;
    for (int i = 0; i < 2; i++)
        steps[i] = h_step_id(10 + (uint64_t)i);
    h_make_group(&g, steps, 2, NULL, 0);
    REQUIRE_OK(dagrt_begin_run(o, &run));
    SUBMIT_STEP(o, &s1, 0, NULL, 0, NULL, 0, NULL);
    REQUIRE(H_POLL(h_start(1) != 0, 5000));
    SUBMIT_STEP(o, &s2, 0, NULL, 0, NULL, 0, NULL);
    h_sleep_us(20 * 1000); /* s2 is placed, wherever the scheduler puts it */
    REQUIRE_OK(dagrt_submit_next_level_group(o, h_step_callable(), g.a, 2, NULL, targets, NULL));
    h_sleep_us(20 * 1000);
    CHECK(h_start(2) == 0 && h_start(10) == 0 && h_start(11) == 0);
    h_gate_open(0);
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(1);
    CHECK_RAN_ONCE(2);
    CHECK_RAN_ONCE(10);
    CHECK_RAN_ONCE(11);
    CHECKF(h_start(10) < h_start(2), "the single on lane 0 started before the group head "
                                     "reserving lane 0 (lane 0 warmed with tiny jobs: %d)", warm);
    h_close_worker(w);
}

static void test_group_head_goes_before_a_single_waiting_for_its_lane(void)
{
    group_head_before_a_waiting_single(0);
    group_head_before_a_waiting_single(1);
}

static void test_executor_sees_args(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_callable c;
    uint64_t in[6] = {1, 2, 3, 4, 5, 6}, out0[4] = {0}, out1[4] = {0}, out2[4] = {0};
    dagrt_tensor t0[2], tg[4];
    uint64_t s0[3] = {0, 0xdeadbeefcafef00dull, UINT64_MAX};
    uint64_t sg0[2] = {1, 100}, sg1[3] = {2, 200, 201};
    dagrt_call_config cfg;
    dagrt_task_args a0, ag[2];
    dagrt_task_handle h0, hg;
    const int32_t targets[2] = {1, 0};
    REQUIRE(h_open_worker(&w, &o, NULL, 2, 0));
    memset(seen, 0, sizeof seen);
    REQUIRE_OK(dagrt_register_callable("submit.inspect", 3, DAGRT_CALLABLE_KIND_TASK, inspect_exec,
                                       (void *)&seen, &c));
    memset(&cfg, 0, sizeof cfg);
    cfg.flags = 0x5;
    cfg.block_dim = 24;
    for (int i = 0; i < 6; i++)
        cfg.user[i] = 1000 + (uint64_t)i;
    {
        uint64_t shape[2] = {2, 3};
        REQUIRE_OK(dagrt_tensor_init(&t0[0], in, DAGRT_DTYPE_U64, 2, shape, DAGRT_TAG_INPUT));
    }
    t0[1] = h_tile(out0, 8, DAGRT_DTYPE_U64, 1, 3, 1, DAGRT_TAG_OUTPUT_EXISTING);
    a0 = h_args(t0, 2, s0, 3, NULL, 0);

    tg[0] = h_tensor(in, 6, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    tg[1] = h_tensor(out1, 4, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    tg[2] = h_tensor(in, 6, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT);
    tg[3] = h_tensor(out2, 4, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    ag[0] = h_args(&tg[0], 2, sg0, 2, NULL, 0);
    ag[1] = h_args(&tg[2], 2, sg1, 3, NULL, 0);

    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE_OK(dagrt_submit_next_level(o, &c, &a0, &cfg, 1, &h0));
    /* the config is copied at submit: changing it afterwards must not matter */
    cfg.block_dim = 99;
    REQUIRE_OK(dagrt_submit_next_level_group(o, &c, ag, 2, &cfg, targets, &hg));
    EXPECT_OK(h_finish_run(w, o, run));

    CHECK(atomic_load(&seen[0].seen) == 1);
    CHECK_EQ_U64(seen[0].num_tensors, 2);
    CHECK_EQ_U64(seen[0].num_scalars, 3);
    CHECK(seen[0].tensors[0].data == (void *)in);
    CHECK_EQ_U64(seen[0].tensors[0].ndim, 2);
    CHECK_EQ_U64(seen[0].tensors[0].shape[0], 2);
    CHECK_EQ_U64(seen[0].tensors[0].shape[1], 3);
    CHECK_EQ_U64(seen[0].tensors[0].dtype, DAGRT_DTYPE_U64);
    CHECK(seen[0].tensors[1].data == (void *)out0);
    /* tags are consumed at submit (Orchestrator seed, invariant 2): the executor's view reads
     * NO_DEP; the host's own array keeps its tags */
    CHECK_EQ_U64(seen[0].tensors[0].tag, DAGRT_TAG_NO_DEP);
    CHECK_EQ_U64(seen[0].tensors[1].tag, DAGRT_TAG_NO_DEP);
    CHECK_EQ_U64(t0[0].tag, DAGRT_TAG_INPUT);
    CHECK_EQ_U64(seen[0].tensors[1].offset, 8);
    CHECK_EQ_U64(seen[0].tensors[1].strides[1], 1);
    CHECK_EQ_U64(seen[0].scalars[1], 0xdeadbeefcafef00dull);
    CHECK_EQ_U64(seen[0].scalars[2], UINT64_MAX);
    CHECK(!seen[0].config_null);
    CHECK_EQ_U64(seen[0].config.flags, 0x5);
    CHECK_EQ_U64(seen[0].config.block_dim, 24);
    for (int i = 0; i < 6; i++)
        CHECK_EQ_U64(seen[0].config.user[i], 1000 + (uint64_t)i);
    CHECK_EQ_I64(seen[0].worker_id, 1);
    CHECK_EQ_U64(seen[0].member_index, 0);
    CHECK_EQ_U64(seen[0].group_size, 1);
    CHECK_EQ_U64(seen[0].run_id, run);
    CHECK_EQ_U64(seen[0].slot, h0.slot);
    CHECK_EQ_U64(out0[1], 0xC0FFEE + 0); /* written through offset 8 */
    CHECK_EQ_U64(out0[0], 0);

    for (int m = 0; m < 2; m++) {
        seen_view *v = &seen[1 + m];
        CHECK(atomic_load(&v->seen) == 1);
        CHECK_EQ_U64(v->num_tensors, 2);
        CHECK_EQ_U64(v->num_scalars, (uint64_t)(2 + m));
        CHECK_EQ_U64(v->scalars[1], 100 * (uint64_t)(m + 1));
        CHECK(v->tensors[1].data == (void *)(m == 0 ? out1 : out2));
        CHECK_EQ_U64(v->config.block_dim, 99);
        CHECK_EQ_I64(v->worker_id, targets[m]);
        CHECK_EQ_U64(v->member_index, (uint64_t)m);
        CHECK_EQ_U64(v->group_size, 2);
        CHECK_EQ_U64(v->slot, hg.slot);
        CHECK_EQ_U64(v->run_id, run);
    }
    CHECK_EQ_U64(sg1[2], 201);
    CHECK_EQ_U64(out1[0], 0xC0FFEE + 1);
    CHECK_EQ_U64(out2[0], 0xC0FFEE + 2);

    /* a NULL config reaches the executor as a zeroed config */
    memset(seen, 0, sizeof seen);
    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE_OK(dagrt_submit_next_level(o, &c, &a0, NULL, 0, NULL));
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK(atomic_load(&seen[0].seen) == 1);
    CHECK(!seen[0].config_null);
    CHECK_EQ_U64(seen[0].config.flags, 0);
    CHECK_EQ_U64(seen[0].config.block_dim, 0);
    CHECK_EQ_U64(seen[0].config.user[5], 0);
    h_close_worker(w);
}

/* A zero-size auto-allocated OUTPUT gets no buffer: its data stays NULL in the tensor and in
 * the executor, whatever else the task allocates (it used to be handed the address of the
 * next buffer). Group members may share an array holding only zero-size ones. */
static void test_zero_size_auto_output_stays_null(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_callable c;
    dagrt_tensor t[2], shared_z, own_p;
    uint64_t sc[1] = {0};
    dagrt_task_args a;
    h_step steps[3] = {h_step_id(50), h_step_id(51), h_step_id(52)};
    h_group g;
    const int32_t targets[3] = {0, 1, 2};
    REQUIRE(h_open_worker(&w, &o, NULL, 3, 0));
    memset(seen, 0, sizeof seen);
    REQUIRE_OK(dagrt_register_callable("submit.inspect", 3, DAGRT_CALLABLE_KIND_TASK, inspect_exec,
                                       (void *)&seen, &c));
    t[0] = h_tensor(NULL, 0, DAGRT_DTYPE_F64, DAGRT_TAG_OUTPUT); /* zero size, listed first */
    t[1] = h_tensor(NULL, 4, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    a = h_args(t, 2, sc, 1, NULL, 0);
    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE_OK(dagrt_submit_next_level(o, &c, &a, NULL, 0, NULL));
    CHECK(t[0].data == NULL);
    CHECK(t[1].data != NULL);

    /* A zero extent after extents whose product overflows is still empty, in either order. */
    for (int last = 0; last < 2; last++) {
        const uint64_t big = 1ull << 40;
        uint64_t shape[3] = {last ? big : 0, big, last ? 0 : big};
        dagrt_tensor z;
        dagrt_task_args za;
        EXPECT_OK(dagrt_tensor_init(&z, NULL, DAGRT_DTYPE_F64, 3, shape, DAGRT_TAG_OUTPUT));
        uint64_t other[1] = {7}; /* inspect_exec's record 7, unread here */
        za = h_args(&z, 1, other, 1, NULL, 0);
        EXPECT_OK(dagrt_submit_next_level(o, &c, &za, NULL, 1, NULL));
        CHECKF(z.data == NULL, "zero extent %s: data %p", last ? "last" : "first", z.data);
    }

    /* members 0 and 1 share an array with only a zero-size auto OUTPUT; member 2 allocates */
    shared_z = h_tensor(NULL, 0, DAGRT_DTYPE_U8, DAGRT_TAG_OUTPUT);
    own_p = h_tensor(NULL, 8, DAGRT_DTYPE_U8, DAGRT_TAG_OUTPUT);
    h_make_group(&g, steps, 3, NULL, 0);
    g.a[0].tensors = g.a[1].tensors = &shared_z;
    g.a[0].num_tensors = g.a[1].num_tensors = 1;
    g.a[2].tensors = &own_p;
    g.a[2].num_tensors = 1;
    EXPECT_OK(dagrt_submit_next_level_group(o, h_step_callable(), g.a, 3, NULL, targets, NULL));
    CHECK(shared_z.data == NULL);
    CHECK(own_p.data != NULL);
    EXPECT_OK(h_finish_run(w, o, run));

    CHECK(atomic_load(&seen[0].seen) == 1);
    CHECK(seen[0].tensors[0].data == NULL);
    CHECK_EQ_U64(seen[0].tensors[0].shape[0], 0);
    CHECK(seen[0].tensors[1].data == t[1].data);
    CHECK_RAN_ONCE(50);
    CHECK_RAN_ONCE(51);
    CHECK_RAN_ONCE(52);
    h_close_worker(w);
}

static atomic_int latin1_status;

static int32_t latin1_fail_exec(const dagrt_task_view *t, void *u)
{
    (void)u;
    atomic_store(&latin1_status, dagrt_task_fail(t, "errno text \xe9t\xe9"));
    return 0;
}

static void test_task_fail_reaches_wait(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    REQUIRE(h_open_worker(&w, &o, NULL, 1, 0));

    /* dagrt_task_fail + non-zero return */
    {
        h_step s = h_step_id(1);
        s.fail = 1;
        REQUIRE_OK(dagrt_begin_run(o, &run));
        SUBMIT_STEP(o, &s, 0, NULL, 0, NULL, 0, NULL);
        EXPECT_OK(dagrt_close_run_submission(o, run));
        EXPECT_ERROR(h_wait(w, run), DAGRT_STATUS_TASK_FAILED, "step 1 failed on purpose");
        EXPECT_OK(dagrt_release_run(w, run));
    }
    /* non-zero return without a message: the message still says what failed */
    {
        h_step s = h_step_id(2);
        s.fail = 2;
        REQUIRE_OK(dagrt_begin_run(o, &run));
        SUBMIT_STEP(o, &s, 0, NULL, 0, NULL, 0, NULL);
        EXPECT_OK(dagrt_close_run_submission(o, run));
        if (EXPECT_STATUS(h_wait(w, run), DAGRT_STATUS_TASK_FAILED))
            CHECKF(h_contains(dagrt_last_error(), "harness.step") &&
                       h_contains(dagrt_last_error(), "7"),
                   "message \"%s\" should name the callable and the code 7", dagrt_last_error());
        EXPECT_OK(dagrt_release_run(w, run));
    }
    /* dagrt_task_fail then return 0: the task fails anyway */
    {
        h_step s = h_step_id(3);
        s.fail = 3;
        REQUIRE_OK(dagrt_begin_run(o, &run));
        SUBMIT_STEP(o, &s, 0, NULL, 0, NULL, 0, NULL);
        EXPECT_OK(dagrt_close_run_submission(o, run));
        EXPECT_ERROR(h_wait(w, run), DAGRT_STATUS_TASK_FAILED, "step 3 failed on purpose");
        EXPECT_OK(dagrt_release_run(w, run));
    }
    /* a message that is not UTF-8 (a Latin-1 strerror text): the task fails all the same,
     * the bytes that are no UTF-8 shown as U+FFFD */
    {
        dagrt_callable c;
        dagrt_task_args a = h_args(NULL, 0, NULL, 0, NULL, 0);
        latin1_status = DAGRT_STATUS_SYSTEM;
        REQUIRE_OK(dagrt_register_callable("submit.latin1_fail", 0, DAGRT_CALLABLE_KIND_TASK,
                                           latin1_fail_exec, NULL, &c));
        REQUIRE_OK(dagrt_begin_run(o, &run));
        EXPECT_OK(dagrt_submit_next_level(o, &c, &a, NULL, 0, NULL));
        EXPECT_OK(dagrt_close_run_submission(o, run));
        EXPECT_ERROR(h_wait(w, run), DAGRT_STATUS_TASK_FAILED, "errno text \xef\xbf\xbdt");
        CHECK(atomic_load(&latin1_status) == DAGRT_STATUS_OK);
        EXPECT_OK(dagrt_release_run(w, run));
    }
    CHECK_RAN_ONCE(1);
    CHECK_RAN_ONCE(2);
    CHECK_RAN_ONCE(3);
    h_close_worker(w);
}

static int32_t other_exec(const dagrt_task_view *t, void *u)
{
    (void)t;
    (void)u;
    return 0;
}

static int32_t another_exec(const dagrt_task_view *t, void *u)
{
    (void)t;
    (void)u;
    return 1;
}

static void test_unknown_callable(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_callable bogus, orch_kind, wrong_ns;
    uint64_t sc[S_COUNT];
    h_step s = h_step_id(1);
    dagrt_task_args a;
    int32_t target = 0;
    REQUIRE(h_open_worker(&w, &o, NULL, 1, 1));
    a = h_step_args(&s, sc, NULL, 0, NULL, 0);
    memset(&bogus, 0, sizeof bogus);
    memset(bogus.digest, 0xab, sizeof bogus.digest);
    REQUIRE_OK(dagrt_register_callable("submit.orchestration", 0, DAGRT_CALLABLE_KIND_ORCHESTRATION,
                                       other_exec, NULL, &orch_kind));
    wrong_ns = *h_step_callable();
    wrong_ns.ns = 77;

    REQUIRE_OK(dagrt_begin_run(o, &run));
    EXPECT_ERROR(dagrt_submit_next_level(o, &bogus, &a, NULL, 0, NULL), DAGRT_STATUS_UNKNOWN_CALLABLE,
                 NULL);
    EXPECT_ERROR(dagrt_submit_sub(o, &bogus, &a, NULL), DAGRT_STATUS_UNKNOWN_CALLABLE, NULL);
    EXPECT_ERROR(dagrt_submit_next_level_group(o, &bogus, &a, 1, NULL, &target, NULL),
                 DAGRT_STATUS_UNKNOWN_CALLABLE, NULL);
    EXPECT_ERROR(dagrt_submit_sub_group(o, &bogus, &a, 1, NULL), DAGRT_STATUS_UNKNOWN_CALLABLE, NULL);
    /* an orchestration callable is not a leaf task */
    EXPECT_ERROR(dagrt_submit_next_level(o, &orch_kind, &a, NULL, 0, NULL),
                 DAGRT_STATUS_UNKNOWN_CALLABLE, NULL);
    /* the digest alone is not the identity: namespace must match too */
    EXPECT_ERROR(dagrt_submit_next_level(o, &wrong_ns, &a, NULL, 0, NULL),
                 DAGRT_STATUS_UNKNOWN_CALLABLE, NULL);
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_NEVER_RAN(1);
    h_close_worker(w);
}

static void test_callable_identity(void)
{
    dagrt_callable a, b, c, d, e, f;
    int user_a = 0, user_b = 0;
    REQUIRE_OK(dagrt_register_callable("ident.alpha", 1, DAGRT_CALLABLE_KIND_TASK, other_exec,
                                       &user_a, &a));
    CHECK_EQ_U64(a.kind, DAGRT_CALLABLE_KIND_TASK);
    CHECK_EQ_U64(a.ns, 1);
    {
        int nonzero = 0;
        for (int i = 0; i < 32; i++)
            nonzero |= a.digest[i];
        CHECK(nonzero != 0);
    }
    /* same (name, ns, kind, fn, user): the same identity */
    REQUIRE_OK(dagrt_register_callable("ident.alpha", 1, DAGRT_CALLABLE_KIND_TASK, other_exec,
                                       &user_a, &b));
    CHECK(memcmp(a.digest, b.digest, 32) == 0 && a.kind == b.kind && a.ns == b.ns);
    /* another namespace or kind: another identity */
    REQUIRE_OK(dagrt_register_callable("ident.alpha", 2, DAGRT_CALLABLE_KIND_TASK, other_exec,
                                       &user_a, &c));
    CHECK(memcmp(a.digest, c.digest, 32) != 0);
    CHECK_EQ_U64(c.ns, 2);
    REQUIRE_OK(dagrt_register_callable("ident.alpha", 1, DAGRT_CALLABLE_KIND_ORCHESTRATION,
                                       other_exec, &user_a, &d));
    CHECK(memcmp(a.digest, d.digest, 32) != 0);
    CHECK_EQ_U64(d.kind, DAGRT_CALLABLE_KIND_ORCHESTRATION);
    /* another name: another identity */
    REQUIRE_OK(dagrt_register_callable("ident.beta", 1, DAGRT_CALLABLE_KIND_TASK, other_exec,
                                       &user_a, &e));
    CHECK(memcmp(a.digest, e.digest, 32) != 0);
    /* the same identity bound to another executor, or another user pointer: conflict */
    memset(&f, 0x5a, sizeof f);
    EXPECT_ERROR(dagrt_register_callable("ident.alpha", 1, DAGRT_CALLABLE_KIND_TASK, another_exec,
                                         &user_a, &f),
                 DAGRT_STATUS_CALLABLE_CONFLICT, "ident.alpha");
    EXPECT_ERROR(dagrt_register_callable("ident.alpha", 1, DAGRT_CALLABLE_KIND_TASK, other_exec,
                                         &user_b, &f),
                 DAGRT_STATUS_CALLABLE_CONFLICT, "ident.alpha");
    CHECK(f.ns == 0x5a5a5a5a); /* out untouched */
    /* the original binding still resolves: a task with identity `a` runs other_exec */
    {
        dagrt_worker_t *w = h_worker(NULL, 1, 0);
        dagrt_orch_t *o;
        dagrt_run_id run;
        dagrt_task_args args = h_args(NULL, 0, NULL, 0, NULL, 0);
        REQUIRE(w != NULL);
        o = h_orch(w);
        REQUIRE_OK(dagrt_begin_run(o, &run));
        EXPECT_OK(dagrt_submit_next_level(o, &a, &args, NULL, 0, NULL));
        EXPECT_OK(h_finish_run(w, o, run)); /* another_exec would fail the run */
        EXPECT_OK(dagrt_worker_close(w));
        dagrt_worker_free(w);
    }
    /* invalid registrations */
    EXPECT_ERROR(dagrt_register_callable("", 0, DAGRT_CALLABLE_KIND_TASK, other_exec, NULL, &f),
                 DAGRT_STATUS_INVALID_ARGUMENT, NULL);
    EXPECT_ERROR(dagrt_register_callable("ident.kind", 0, 7, other_exec, NULL, &f),
                 DAGRT_STATUS_INVALID_ARGUMENT, "7");
}

int main(void)
{
    h_begin("submit", 90);
    RUN_TEST(test_single_targets_exact_lane);
    RUN_TEST(test_lane_registration_errors);
    RUN_TEST(test_group_placement_and_concurrency);
    RUN_TEST(test_group_all_or_nothing);
    RUN_TEST(test_group_rejections_leave_no_trace);
    RUN_TEST(test_sub_lanes);
    RUN_TEST(test_sub_job_queued_behind_long_one_moves);
    RUN_TEST(test_sub_fifo_order_with_long_jobs);
    RUN_TEST(test_sub_fresh_lanes_do_not_queue_behind_a_blocked_job);
    RUN_TEST(test_group_head_goes_before_a_single_waiting_for_its_lane);
    RUN_TEST(test_executor_sees_args);
    RUN_TEST(test_zero_size_auto_output_stays_null);
    RUN_TEST(test_task_fail_reaches_wait);
    RUN_TEST(test_unknown_callable);
    RUN_TEST(test_callable_identity);
    return h_done();
}
