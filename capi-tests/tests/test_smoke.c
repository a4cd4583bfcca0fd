/* Smoke test of the public C API (also built against dagrt::dagrt_static as test_smoke_static).
 *
 * A worker with 2 NEXT_LEVEL lanes (ids 0 and 1) and 2 SUB lanes runs, in two runs, a chain of
 * INOUT tasks on one int64 buffer: task k computes x = x * 31 + (k + 1) (mod 2^64), which only
 * gives the expected value if the tasks ran exactly once each and in submission order. Tasks
 * rotate between lane 0, lane 1 and the SUB lanes; each records the lane that ran it. After the
 * runs, the worker holds no live slot, no TensorMap entry, no run, and its heap rings are empty.
 */
#include <dagrt.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CHAIN 60 /* tasks per run */
#define RUNS 2

static int failures;

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);       \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

#define CHECK_OK(call)                                                                     \
    do {                                                                                   \
        dagrt_status s_ = (call);                                                          \
        if (s_ != DAGRT_STATUS_OK) {                                                       \
            fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call,            \
                    dagrt_status_str((int32_t)s_), dagrt_last_error());                    \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static int64_t buffer;               /* the chain's one tensor */
static int32_t ran_on[RUNS * CHAIN]; /* worker_id seen by task k (INT32_MIN: never ran) */
static uint32_t executions[RUNS * CHAIN];

static int32_t step(const dagrt_task_view *task, void *user) {
    (void)user;
    if (task->num_tensors != 1 || task->num_scalars != 1 || task->tensors[0].data != &buffer) {
        dagrt_task_fail(task, "smoke.step: unexpected arguments");
        return 1;
    }
    uint64_t k = task->scalars[0];
    if (k >= RUNS * CHAIN) {
        dagrt_task_fail(task, "smoke.step: task index out of range");
        return 1;
    }
    int64_t *x = (int64_t *)task->tensors[0].data;
    *x = (int64_t)((uint64_t)*x * 31u + (k + 1u));
    ran_on[k] = task->worker_id;
    executions[k]++;
    return 0;
}

static dagrt_callable STEP;

struct chain_ctx {
    uint64_t first; /* index of the run's first task */
};

/* Where task k goes: lane 0, lane 1, or any SUB lane. */
static int target_of(uint64_t k) { return (int)(k % 3); }

static int32_t build_chain(dagrt_orch_t *orch, void *ctx_) {
    const struct chain_ctx *ctx = (const struct chain_ctx *)ctx_;
    for (uint64_t i = 0; i < CHAIN; i++) {
        uint64_t k = ctx->first + i;
        dagrt_tensor t;
        uint64_t one = 1;
        if (dagrt_tensor_init(&t, &buffer, DAGRT_DTYPE_I64, 1, &one, DAGRT_TAG_INOUT) != DAGRT_STATUS_OK)
            return 1;
        dagrt_task_args args;
        memset(&args, 0, sizeof args);
        args.tensors = &t;
        args.num_tensors = 1;
        args.scalars = &k;
        args.num_scalars = 1;
        dagrt_task_handle h;
        dagrt_status s;
        int target = target_of(k);
        if (target == 2)
            s = dagrt_submit_sub(orch, &STEP, &args, &h);
        else
            s = dagrt_submit_next_level(orch, &STEP, &args, NULL, target, &h);
        if (s != DAGRT_STATUS_OK) {
            fprintf(stderr, "submit of task %llu: %s: %s\n", (unsigned long long)k,
                    dagrt_status_str((int32_t)s), dagrt_last_error());
            return 1;
        }
    }
    return 0;
}

int main(void) {
    printf("dagrt %s (header %s)\n", dagrt_version(), DAGRT_VERSION_STRING);
    CHECK(strcmp(dagrt_version(), DAGRT_VERSION_STRING) == 0);

    for (int i = 0; i < RUNS * CHAIN; i++) ran_on[i] = INT32_MIN;

    CHECK_OK(dagrt_register_callable("capi-tests.smoke.step", 0, DAGRT_CALLABLE_KIND_TASK, step,
                                     NULL, &STEP));

    dagrt_worker_config cfg;
    CHECK_OK(dagrt_worker_config_default(&cfg));
    cfg.heap_ring_size = 16u << 20; /* no allocation here; keep the mappings small */

    dagrt_worker_t *w = NULL;
    CHECK_OK(dagrt_worker_new(&cfg, &w));
    if (w == NULL) return 1;
    CHECK_OK(dagrt_worker_add_next_level_lane(w, 0));
    CHECK_OK(dagrt_worker_add_next_level_lane(w, 1));
    CHECK_OK(dagrt_worker_add_sub_lanes(w, 2));
    CHECK_OK(dagrt_worker_init(w));
    if (failures) {
        dagrt_worker_free(w);
        return 1;
    }

    uint64_t expected = 0;
    for (int r = 0; r < RUNS; r++) {
        struct chain_ctx ctx = {(uint64_t)r * CHAIN};
        CHECK_OK(dagrt_worker_run(w, build_chain, &ctx));
        for (uint64_t i = 0; i < CHAIN; i++) expected = expected * 31u + (ctx.first + i + 1u);
        CHECK((uint64_t)buffer == expected);
    }
    printf("chain of %d tasks: buffer = %lld, expected %lld\n", RUNS * CHAIN, (long long)buffer,
           (long long)expected);

    for (int k = 0; k < RUNS * CHAIN; k++) {
        if (executions[k] != 1) {
            fprintf(stderr, "task %d ran %u times\n", k, executions[k]);
            failures++;
            continue;
        }
        int target = target_of((uint64_t)k);
        /* NEXT_LEVEL lane ids are 0 and 1; SUB lane j reports -1-j. */
        int ok = target == 2 ? (ran_on[k] == -1 || ran_on[k] == -2) : ran_on[k] == target;
        if (!ok) {
            fprintf(stderr, "task %d (target %d) ran on worker_id %d\n", k, target, ran_on[k]);
            failures++;
        }
    }

    dagrt_worker_stats_t st;
    memset(&st, 0xff, sizeof st);
    CHECK_OK(dagrt_worker_stats(w, &st));
    printf("stats: live_slots %lld, tensormap_entries %llu, runs %llu, ready_queued %llu\n",
           (long long)st.live_slots, (unsigned long long)st.tensormap_entries,
           (unsigned long long)st.runs, (unsigned long long)st.ready_queued);
    CHECK(st.live_slots == 0);
    CHECK(st.tensormap_entries == 0);
    CHECK(st.runs == 0); /* dagrt_worker_run releases its run */
    CHECK(st.ready_queued == 0);
    for (int i = 0; i < 4; i++) CHECK(st.heap_top[i] == st.heap_tail[i]);

    CHECK_OK(dagrt_worker_close(w));
    dagrt_worker_free(w);

    if (failures) {
        fprintf(stderr, "test_smoke: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_smoke: ok\n");
    return 0;
}
