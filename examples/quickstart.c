/* dagrt quickstart: a diamond DAG whose edges come from tensor tags alone.
 *   a = 1            (OUTPUT a)
 *   b = a + 1        (INPUT a, OUTPUT b)      runs on lane 0
 *   c = a * 10       (INPUT a, OUTPUT c)      runs on lane 1
 *   d = b + c        (INPUT b, INPUT c, OUTPUT d)
 */
#include <dagrt.h>
#include <stdio.h>

static int32_t kernel(const dagrt_task_view *t, void *user) {
    (void)user;
    int64_t op = (int64_t)t->scalars[0];
    int64_t *out = (int64_t *)t->tensors[t->num_tensors - 1].data;
    const int64_t *x = t->num_tensors > 1 ? (const int64_t *)t->tensors[0].data : NULL;
    const int64_t *y = t->num_tensors > 2 ? (const int64_t *)t->tensors[1].data : NULL;
    switch (op) {
    case 0: *out = 1; break;
    case 1: *out = *x + 1; break;
    case 2: *out = *x * 10; break;
    default: *out = *x + *y; break;
    }
    return 0;
}

static dagrt_callable K;
static int64_t a, b, c, d;

static void task(dagrt_orch_t *o, int64_t op, int64_t *in0, int64_t *in1, int64_t *out, int lane) {
    dagrt_tensor t[3];
    uint32_t n = 0;
    uint64_t one = 1;
    if (in0) dagrt_tensor_init(&t[n++], in0, DAGRT_DTYPE_I64, 1, &one, DAGRT_TAG_INPUT);
    if (in1) dagrt_tensor_init(&t[n++], in1, DAGRT_DTYPE_I64, 1, &one, DAGRT_TAG_INPUT);
    dagrt_tensor_init(&t[n++], out, DAGRT_DTYPE_I64, 1, &one, DAGRT_TAG_OUTPUT);
    uint64_t scalar = (uint64_t)op;
    dagrt_task_args args = {.tensors = t, .num_tensors = n, .scalars = &scalar, .num_scalars = 1};
    if (dagrt_submit_next_level(o, &K, &args, NULL, lane, NULL) != DAGRT_STATUS_OK)
        fprintf(stderr, "submit: %s\n", dagrt_last_error());
}

static int32_t build(dagrt_orch_t *o, void *ctx) {
    (void)ctx;
    task(o, 0, NULL, NULL, &a, 0);
    task(o, 1, &a, NULL, &b, 0);
    task(o, 2, &a, NULL, &c, 1);
    task(o, 3, &b, &c, &d, 0);
    return 0;
}

int main(void) {
    dagrt_worker_t *w = NULL;
    if (dagrt_worker_new(NULL, &w) || dagrt_worker_add_next_level_lane(w, 0) ||
        dagrt_worker_add_next_level_lane(w, 1) || dagrt_worker_init(w) ||
        dagrt_register_callable("quickstart.kernel", 0, DAGRT_CALLABLE_KIND_TASK, kernel, NULL, &K)) {
        fprintf(stderr, "setup failed: %s\n", dagrt_last_error());
        return 1;
    }
    dagrt_status s = dagrt_worker_run(w, build, NULL);
    printf("dagrt %s: d = %lld (expected 12), status %s\n", dagrt_version(), (long long)d,
           dagrt_status_str(s));
    dagrt_worker_free(w);
    return (s == DAGRT_STATUS_OK && d == 12) ? 0 : 1;
}
