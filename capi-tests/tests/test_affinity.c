/*
 * test_affinity.c: dagrt_worker_set_lane_cpus (lane threads pinned to CPUs).
 *  - NULL cpus with a count -> NULL_POINTER; a negative CPU or one outside the caller's
 *    affinity mask -> INVALID_ARGUMENT naming it, and the earlier setting stays; after init ->
 *    WRONG_STATE;
 *  - 3 NEXT_LEVEL lanes pinned to {first allowed CPU, last allowed CPU} run on those (lane 2
 *    wraps round to the first): a task on each lane reads its thread's mask and finds that one
 *    CPU; with count 0 (the default) every lane keeps the caller's whole mask.
 */
#include "harness.h"

#include <sched.h>

#define LANES 3

static cpu_set_t seen_mask[LANES];
static atomic_int seen[LANES];

static int32_t read_mask(const dagrt_task_view *task, void *user)
{
    (void)user;
    int32_t id = task->worker_id;
    if (id < 0 || id >= LANES) {
        dagrt_task_fail(task, "affinity.read_mask: unexpected worker id");
        return 1;
    }
    CPU_ZERO(&seen_mask[id]);
    if (sched_getaffinity(0, sizeof(cpu_set_t), &seen_mask[id]) != 0) {
        dagrt_task_fail(task, "affinity.read_mask: sched_getaffinity failed");
        return 1;
    }
    atomic_store(&seen[id], 1);
    return 0;
}

static dagrt_callable READ_MASK;

/* A worker with LANES NEXT_LEVEL lanes, pinned to cpus[0..n) (none when n is 0), runs one
 * read_mask task on each lane. */
static void run_on_each_lane(const int32_t *cpus, uint32_t n)
{
    dagrt_worker_t *w = NULL;
    dagrt_orch_t *o;
    dagrt_run_id run;
    dagrt_task_args a = h_args(NULL, 0, NULL, 0, NULL, 0);
    REQUIRE_OK(dagrt_worker_new(NULL, &w));
    for (int32_t i = 0; i < LANES; i++)
        EXPECT_OK(dagrt_worker_add_next_level_lane(w, i));
    EXPECT_OK(dagrt_worker_set_lane_cpus(w, cpus, n));
    REQUIRE_OK(dagrt_worker_init(w));
    o = h_orch(w);
    for (int i = 0; i < LANES; i++)
        atomic_store(&seen[i], 0);
    REQUIRE_OK(dagrt_begin_run(o, &run));
    for (int32_t i = 0; i < LANES; i++)
        EXPECT_OK(dagrt_submit_next_level(o, &READ_MASK, &a, NULL, i, NULL));
    EXPECT_OK(dagrt_close_run_submission(o, run));
    EXPECT_OK(h_wait(w, run));
    EXPECT_OK(dagrt_release_run(w, run));
    /* Configuration is over once the worker runs. */
    EXPECT_ERROR(dagrt_worker_set_lane_cpus(w, cpus, n), DAGRT_STATUS_WRONG_STATE, "initialised");
    dagrt_worker_free(w);
    for (int i = 0; i < LANES; i++)
        CHECKF(atomic_load(&seen[i]), "lane %d ran no task", i);
}

static void test_invalid(void)
{
    dagrt_worker_t *w = NULL;
    cpu_set_t mine;
    int32_t outside = -1, negative = -1;
    char name[32];
    REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
    for (int32_t c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &mine)) {
            outside = c;
            break;
        }
    }
    REQUIRE(outside >= 0);
    REQUIRE_OK(dagrt_worker_new(NULL, &w));
    EXPECT_ERROR(dagrt_worker_set_lane_cpus(w, NULL, 1), DAGRT_STATUS_NULL_POINTER, "cpus");
    EXPECT_OK(dagrt_worker_set_lane_cpus(w, NULL, 0));
    snprintf(name, sizeof name, "CPU %d", (int)outside);
    EXPECT_ERROR(dagrt_worker_set_lane_cpus(w, &outside, 1), DAGRT_STATUS_INVALID_ARGUMENT, name);
    EXPECT_ERROR(dagrt_worker_set_lane_cpus(w, &negative, 1), DAGRT_STATUS_INVALID_ARGUMENT, "CPU -1");
    EXPECT_ERROR(dagrt_worker_set_lane_cpus(NULL, NULL, 0), DAGRT_STATUS_NULL_POINTER, "worker");
    dagrt_worker_free(w);
}

static void test_pinned_lanes_run_there(void)
{
    cpu_set_t mine;
    int32_t cpus[2] = {-1, -1};
    REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
    for (int32_t c = 0; c < CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, &mine)) {
            if (cpus[0] < 0)
                cpus[0] = c;
            cpus[1] = c;
        }
    }
    REQUIRE(cpus[0] >= 0);
    run_on_each_lane(cpus, 2);
    for (int i = 0; i < LANES; i++) {
        int32_t want = cpus[i % 2];
        CHECKF(CPU_COUNT(&seen_mask[i]) == 1 && CPU_ISSET(want, &seen_mask[i]),
               "lane %d: mask of %d CPUs, CPU %d %s", i, CPU_COUNT(&seen_mask[i]), (int)want,
               CPU_ISSET(want, &seen_mask[i]) ? "in it" : "not in it");
    }
}

static void test_unpinned_lanes_keep_the_mask(void)
{
    cpu_set_t mine;
    REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
    run_on_each_lane(NULL, 0);
    for (int i = 0; i < LANES; i++)
        CHECKF(CPU_EQUAL(&seen_mask[i], &mine), "lane %d: mask of %d CPUs, the caller's has %d", i,
               CPU_COUNT(&seen_mask[i]), CPU_COUNT(&mine));
}

int main(void)
{
    h_begin("affinity", 60);
    if (dagrt_register_callable("capi-tests.affinity.read_mask", 0, DAGRT_CALLABLE_KIND_TASK,
                                read_mask, NULL, &READ_MASK) != DAGRT_STATUS_OK) {
        fprintf(stderr, "register: %s\n", dagrt_last_error());
        return 1;
    }
    RUN_TEST(test_invalid);
    RUN_TEST(test_pinned_lanes_run_there);
    RUN_TEST(test_unpinned_lanes_keep_the_mask);
    return h_done();
}
