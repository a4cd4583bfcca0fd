/* A downstream program built against an INSTALLED dagrt (find_package or pkg-config).
 * Checks that the library's version matches the header's, then runs a tiny graph: N tasks on
 * one NEXT_LEVEL lane (id 0), each writing its own int64 slot (OUTPUT, no dependencies). */
#include <dagrt.h>

#include <stdio.h>
#include <string.h>

#define N 8

static int64_t out[N];

static int32_t write_index(const dagrt_task_view *task, void *user) {
    (void)user;
    if (task->num_tensors != 1 || task->num_scalars != 1 || task->worker_id != 0) {
        dagrt_task_fail(task, "consumer: unexpected task view");
        return 1;
    }
    *(int64_t *)task->tensors[0].data = (int64_t)task->scalars[0] * 100 + 7;
    return 0;
}

static dagrt_callable WRITE;

static int32_t build(dagrt_orch_t *orch, void *ctx) {
    (void)ctx;
    for (uint64_t i = 0; i < N; i++) {
        dagrt_tensor t;
        uint64_t one = 1;
        if (dagrt_tensor_init(&t, &out[i], DAGRT_DTYPE_I64, 1, &one, DAGRT_TAG_OUTPUT) != DAGRT_STATUS_OK)
            return 1;
        dagrt_task_args args;
        memset(&args, 0, sizeof args);
        args.tensors = &t;
        args.num_tensors = 1;
        args.scalars = &i;
        args.num_scalars = 1;
        if (dagrt_submit_next_level(orch, &WRITE, &args, NULL, 0, NULL) != DAGRT_STATUS_OK) return 1;
    }
    return 0;
}

int main(void) {
    const char *v = dagrt_version();
    printf("dagrt_version() = %s, DAGRT_VERSION_STRING = %s\n", v, DAGRT_VERSION_STRING);
    if (strcmp(v, DAGRT_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: library/header version mismatch\n");
        return 1;
    }
    unsigned maj, min, pat;
    if (sscanf(v, "%u.%u.%u", &maj, &min, &pat) != 3 || maj != DAGRT_VERSION_MAJOR ||
        min != DAGRT_VERSION_MINOR || pat != DAGRT_VERSION_PATCH ||
        ((maj << 16) | (min << 8) | pat) != (unsigned)DAGRT_VERSION_NUMBER) {
        fprintf(stderr, "consumer: version macros disagree with \"%s\"\n", v);
        return 1;
    }

    dagrt_worker_t *w = NULL;
    dagrt_status s = dagrt_worker_new(NULL, &w);
    if (s == DAGRT_STATUS_OK) s = dagrt_worker_add_next_level_lane(w, 0);
    if (s == DAGRT_STATUS_OK) s = dagrt_worker_init(w);
    if (s == DAGRT_STATUS_OK)
        s = dagrt_register_callable("consumer.write_index", 0, DAGRT_CALLABLE_KIND_TASK, write_index,
                                    NULL, &WRITE);
    if (s == DAGRT_STATUS_OK) s = dagrt_worker_run(w, build, NULL);
    if (s != DAGRT_STATUS_OK) {
        fprintf(stderr, "consumer: %s: %s\n", dagrt_status_str((int32_t)s), dagrt_last_error());
        dagrt_worker_free(w);
        return 1;
    }
    dagrt_worker_free(w);

    for (int i = 0; i < N; i++) {
        if (out[i] != (int64_t)i * 100 + 7) {
            fprintf(stderr, "consumer: task %d did not run (out = %lld)\n", i, (long long)out[i]);
            return 1;
        }
    }
    printf("consumer: %d tasks ran on lane 0: ok\n", N);
    return 0;
}
