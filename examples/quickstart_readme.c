#include <dagrt.h>
#include <stdio.h>

static int32_t add_one(const dagrt_task_view *t, void *user) {
    (void)user;
    int64_t *x = (int64_t *)t->tensors[0].data;
    *x += 1;                                   /* INOUT: a serial chain on x */
    return 0;
}

static dagrt_callable ADD_ONE;

static int32_t build(dagrt_orch_t *orch, void *ctx) {
    int64_t *x = ctx;
    uint64_t one = 1;
    for (int i = 0; i < 10; i++) {
        dagrt_tensor t;
        dagrt_tensor_init(&t, x, DAGRT_DTYPE_I64, 1, &one, DAGRT_TAG_INOUT);
        dagrt_task_args args = {.tensors = &t, .num_tensors = 1};
        if (dagrt_submit_next_level(orch, &ADD_ONE, &args, NULL, /*lane id*/ i % 2, NULL))
            return 1;                          /* dagrt_last_error() says why */
    }
    return 0;
}

int main(void) {
    dagrt_worker_t *w = NULL;
    int64_t x = 0;
    if (dagrt_worker_new(NULL, &w) || dagrt_worker_add_next_level_lane(w, 0) ||
        dagrt_worker_add_next_level_lane(w, 1) || dagrt_worker_init(w) ||
        dagrt_register_callable("add_one", 0, DAGRT_CALLABLE_KIND_TASK, add_one, NULL, &ADD_ONE)) {
        fprintf(stderr, "dagrt: %s\n", dagrt_last_error());
        return 1;
    }
    dagrt_status s = dagrt_worker_run(w, build, &x);   /* submit, wait, release */
    printf("x = %lld (%s)\n", (long long)x, dagrt_status_str(s));
    dagrt_worker_free(w);
    return s != DAGRT_STATUS_OK || x != 10;
}
