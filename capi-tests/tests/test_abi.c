/*
 * test_abi.c: the ABI conventions of include/dagrt.h.
 *  - dagrt_version() matches the header's DAGRT_VERSION_* macros (string, parts, packed);
 *  - dagrt_status_str names every status code, and "DAGRT_STATUS_UNKNOWN" for garbage;
 *  - a NULL for every kind of required pointer gives DAGRT_STATUS_NULL_POINTER with a
 *    message naming the argument, and out-parameters are left untouched;
 *  - _free(NULL) is a no-op (and does not disturb the last error);
 *  - the last error is per thread.
 */
#include "harness.h"

static void test_version(void)
{
    const char *v = dagrt_version();
    unsigned maj = 999, min = 999, pat = 999;
    REQUIRE(v != NULL);
    CHECKF(strcmp(v, DAGRT_VERSION_STRING) == 0, "dagrt_version() = \"%s\", header says \"%s\"",
           v, DAGRT_VERSION_STRING);
    CHECK(sscanf(v, "%u.%u.%u", &maj, &min, &pat) == 3);
    CHECK_EQ_U64(maj, DAGRT_VERSION_MAJOR);
    CHECK_EQ_U64(min, DAGRT_VERSION_MINOR);
    CHECK_EQ_U64(pat, DAGRT_VERSION_PATCH);
    /* the packed macro, numerically */
    CHECK_EQ_U64(DAGRT_VERSION_NUMBER,
                 ((uint64_t)maj << 16) | ((uint64_t)min << 8) | (uint64_t)pat);
    /* a static string: same pointer every call */
    CHECK(dagrt_version() == v);
    /* header constants the seeds fix */
    CHECK_EQ_U64(DAGRT_MAX_TENSOR_DIMS, 5);
    CHECK_EQ_U64(DAGRT_MAX_SCOPE_DEPTH, 64);
    CHECK_EQ_U64(DAGRT_HEAP_ALIGN, 1024);
}

static void test_status_names(void)
{
    static const struct {
        int code;
        const char *name;
    } names[] = {
        {DAGRT_STATUS_OK, "DAGRT_STATUS_OK"},
        {DAGRT_STATUS_NULL_POINTER, "DAGRT_STATUS_NULL_POINTER"},
        {DAGRT_STATUS_INVALID_ARGUMENT, "DAGRT_STATUS_INVALID_ARGUMENT"},
        {DAGRT_STATUS_UNKNOWN_WORKER, "DAGRT_STATUS_UNKNOWN_WORKER"},
        {DAGRT_STATUS_DUPLICATE_TARGET, "DAGRT_STATUS_DUPLICATE_TARGET"},
        {DAGRT_STATUS_UNKNOWN_CALLABLE, "DAGRT_STATUS_UNKNOWN_CALLABLE"},
        {DAGRT_STATUS_CALLABLE_CONFLICT, "DAGRT_STATUS_CALLABLE_CONFLICT"},
        {DAGRT_STATUS_FOREIGN_HANDLE, "DAGRT_STATUS_FOREIGN_HANDLE"},
        {DAGRT_STATUS_STALE_HANDLE, "DAGRT_STATUS_STALE_HANDLE"},
        {DAGRT_STATUS_SCOPE_UNBALANCED, "DAGRT_STATUS_SCOPE_UNBALANCED"},
        {DAGRT_STATUS_SCOPE_TOO_DEEP, "DAGRT_STATUS_SCOPE_TOO_DEEP"},
        {DAGRT_STATUS_WRONG_STATE, "DAGRT_STATUS_WRONG_STATE"},
        {DAGRT_STATUS_WRONG_THREAD, "DAGRT_STATUS_WRONG_THREAD"},
        {DAGRT_STATUS_HEAP_EXHAUSTED, "DAGRT_STATUS_HEAP_EXHAUSTED"},
        {DAGRT_STATUS_WINDOW_FULL, "DAGRT_STATUS_WINDOW_FULL"},
        {DAGRT_STATUS_TASK_FAILED, "DAGRT_STATUS_TASK_FAILED"},
        {DAGRT_STATUS_RUN_NOT_DONE, "DAGRT_STATUS_RUN_NOT_DONE"},
        {DAGRT_STATUS_SYSTEM, "DAGRT_STATUS_SYSTEM"},
        {DAGRT_STATUS_PANIC, "DAGRT_STATUS_PANIC"},
        {DAGRT_STATUS_ORCHESTRATION_FAILED, "DAGRT_STATUS_ORCHESTRATION_FAILED"},
    };
    static const int garbage[] = {-1, -2, 20, 21, 100, 1000, INT32_MAX, INT32_MIN};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *s = dagrt_status_str(names[i].code);
        CHECKF(s != NULL && strcmp(s, names[i].name) == 0, "dagrt_status_str(%d) = \"%s\", want \"%s\"",
               names[i].code, s ? s : "(null)", names[i].name);
        /* every name is distinct: a code maps back to itself only */
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(dagrt_status_str(names[j].code), s ? s : "") != 0);
    }
    for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
        const char *s = dagrt_status_str(garbage[i]);
        CHECKF(s != NULL && strcmp(s, "DAGRT_STATUS_UNKNOWN") == 0,
               "dagrt_status_str(%d) = \"%s\", want DAGRT_STATUS_UNKNOWN", garbage[i],
               s ? s : "(null)");
    }
}

static int32_t noop_exec(const dagrt_task_view *t, void *u)
{
    (void)t;
    (void)u;
    return 0;
}

static int32_t noop_orch(dagrt_orch_t *o, void *ctx)
{
    (void)o;
    (void)ctx;
    return 0;
}

/* The status must be NULL_POINTER and the message must name `arg` as a whole word. */
#define EXPECT_NULL_ARG(expr, arg)                                                        \
    do {                                                                                  \
        if (EXPECT_STATUS(expr, DAGRT_STATUS_NULL_POINTER))                               \
            CHECKF(h_mentions_word(dagrt_last_error(), arg),                              \
                   "%s: message \"%s\" does not name argument '%s'", #expr,               \
                   dagrt_last_error(), arg);                                              \
    } while (0)

static void test_null_pointers_builders(void)
{
    dagrt_tensor t;
    dagrt_args_t *a = NULL;
    dagrt_task_args view;
    dagrt_task_handle h = {0, 0};
    uint64_t shape[2] = {4, 4}, strides[2] = {1, 4};
    dagrt_callable c;
    dagrt_worker_config cfg;

    /* tensor initialisers */
    EXPECT_NULL_ARG(dagrt_tensor_init(NULL, NULL, DAGRT_DTYPE_F64, 2, shape, DAGRT_TAG_INPUT),
                    "out");
    EXPECT_NULL_ARG(dagrt_tensor_init(&t, NULL, DAGRT_DTYPE_F64, 2, NULL, DAGRT_TAG_INPUT),
                    "shape");
    EXPECT_NULL_ARG(dagrt_tensor_init_strided(NULL, NULL, 0, DAGRT_DTYPE_F64, 2, shape, strides,
                                              DAGRT_TAG_INPUT),
                    "out");
    EXPECT_NULL_ARG(dagrt_tensor_init_strided(&t, NULL, 0, DAGRT_DTYPE_F64, 2, NULL, strides,
                                              DAGRT_TAG_INPUT),
                    "shape");
    EXPECT_NULL_ARG(dagrt_tensor_init_strided(&t, NULL, 0, DAGRT_DTYPE_F64, 2, shape, NULL,
                                              DAGRT_TAG_INPUT),
                    "strides");
    /* ndim 0 needs no shape */
    EXPECT_OK(dagrt_tensor_init(&t, &h, DAGRT_DTYPE_U64, 0, NULL, DAGRT_TAG_INPUT));
    /* a dtype or tag outside its enum is refused where it is written */
    EXPECT_ERROR(dagrt_tensor_init(&t, &h, 999, 0, NULL, DAGRT_TAG_INPUT),
                 DAGRT_STATUS_INVALID_ARGUMENT, "dtype 999");
    EXPECT_ERROR(dagrt_tensor_init(&t, &h, DAGRT_DTYPE_U64, 0, NULL, 77),
                 DAGRT_STATUS_INVALID_ARGUMENT, "tag 77");
    EXPECT_ERROR(dagrt_tensor_init_strided(&t, &h, 0, 999, 1, shape, strides, DAGRT_TAG_INPUT),
                 DAGRT_STATUS_INVALID_ARGUMENT, "dtype 999");
    CHECK_EQ_U64(t.ndim, 0);
    /* ndim out of range */
    EXPECT_ERROR(dagrt_tensor_init(&t, &h, DAGRT_DTYPE_U64, 6, shape, DAGRT_TAG_INPUT),
                 DAGRT_STATUS_INVALID_ARGUMENT, "ndim");

    /* args builder */
    EXPECT_NULL_ARG(dagrt_args_new(NULL), "out");
    REQUIRE_OK(dagrt_args_new(&a));
    EXPECT_NULL_ARG(dagrt_args_clear(NULL), "args");
    EXPECT_NULL_ARG(dagrt_args_add_tensor(NULL, &t), "args");
    EXPECT_NULL_ARG(dagrt_args_add_tensor(a, NULL), "tensor");
    EXPECT_NULL_ARG(dagrt_args_add_scalar(NULL, 1), "args");
    EXPECT_NULL_ARG(dagrt_args_add_dep(NULL, h), "args");
    EXPECT_NULL_ARG(dagrt_args_add_dep_wait(NULL, h), "args");
    EXPECT_NULL_ARG(dagrt_args_view(NULL, &view), "args");
    EXPECT_NULL_ARG(dagrt_args_view(a, NULL), "out");
    EXPECT_OK(dagrt_args_add_tensor(a, &t));
    EXPECT_NULL_ARG(dagrt_args_get_tensor(NULL, 0, &t), "args");
    EXPECT_NULL_ARG(dagrt_args_get_tensor(a, 0, NULL), "out");
    EXPECT_ERROR(dagrt_args_get_tensor(a, 1, &t), DAGRT_STATUS_INVALID_ARGUMENT, "index");
    dagrt_args_free(a);

    /* callables */
    EXPECT_NULL_ARG(dagrt_register_callable(NULL, 0, DAGRT_CALLABLE_KIND_TASK, noop_exec, NULL, &c),
                    "name");
    EXPECT_NULL_ARG(dagrt_register_callable("abi.null_exec", 0, DAGRT_CALLABLE_KIND_TASK, NULL, NULL, &c),
                    "exec");
    EXPECT_NULL_ARG(dagrt_register_callable("abi.null_out", 0, DAGRT_CALLABLE_KIND_TASK, noop_exec, NULL, NULL),
                    "out");
    EXPECT_NULL_ARG(dagrt_task_fail(NULL, "x"), "task");

    /* worker construction */
    EXPECT_NULL_ARG(dagrt_worker_config_default(NULL), "out");
    REQUIRE_OK(dagrt_worker_config_default(&cfg));
    EXPECT_NULL_ARG(dagrt_worker_new(&cfg, NULL), "out");
    EXPECT_NULL_ARG(dagrt_worker_add_next_level_lane(NULL, 0), "worker");
    EXPECT_NULL_ARG(dagrt_worker_add_sub_lanes(NULL, 1), "worker");
    EXPECT_NULL_ARG(dagrt_worker_init(NULL), "worker");
    EXPECT_NULL_ARG(dagrt_worker_close(NULL), "worker");
    EXPECT_NULL_ARG(dagrt_worker_orch(NULL, NULL), "worker");
    EXPECT_NULL_ARG(dagrt_worker_stats(NULL, NULL), "worker");
    EXPECT_NULL_ARG(dagrt_worker_submit(NULL, noop_orch, NULL, NULL), "worker");
    EXPECT_NULL_ARG(dagrt_worker_run(NULL, noop_orch, NULL), "worker");
    EXPECT_NULL_ARG(dagrt_wait_run(NULL, 1), "worker");
    EXPECT_NULL_ARG(dagrt_release_run(NULL, 1), "worker");
}

/* A lane count past the limit is refused, also one whose sum with the lanes already added
 * wraps around 32 bits (an unsigned `wanted - existing` gone below zero): it once passed the
 * check and the worker tried to build 2^32 lanes. */
static void test_lane_counts(void)
{
    dagrt_worker_t *w = NULL;
    REQUIRE_OK(dagrt_worker_new(NULL, &w));
    EXPECT_ERROR(dagrt_worker_add_sub_lanes(w, 0), DAGRT_STATUS_INVALID_ARGUMENT, "out of range");
    EXPECT_ERROR(dagrt_worker_add_sub_lanes(w, 1025), DAGRT_STATUS_INVALID_ARGUMENT,
                 "out of range");
    EXPECT_OK(dagrt_worker_add_sub_lanes(w, 1));
    EXPECT_ERROR(dagrt_worker_add_sub_lanes(w, UINT32_MAX), DAGRT_STATUS_INVALID_ARGUMENT,
                 "out of range");
    EXPECT_ERROR(dagrt_worker_add_sub_lanes(w, UINT32_MAX - 100), DAGRT_STATUS_INVALID_ARGUMENT,
                 "out of range");
    EXPECT_ERROR(dagrt_worker_add_sub_lanes(w, 1024), DAGRT_STATUS_INVALID_ARGUMENT,
                 "out of range");
    EXPECT_OK(dagrt_worker_add_sub_lanes(w, 1023));
    dagrt_worker_free(w);
}

static void test_null_pointers_engine(void)
{
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run = 0, sentinel_run = 12345;
    dagrt_task_handle h = {777, 777};
    dagrt_task_args args;
    uint64_t sc[S_COUNT];
    h_step st = h_step_id(0);
    int32_t workers[1] = {0};
    uint64_t shape[1] = {8};
    void *p = (void *)&h;
    uint32_t done = 7;
    dagrt_run_stats_t rs;
    dagrt_worker_stats_t ws;
    dagrt_task_view fake_view;
    REQUIRE(h_open_worker(&w, &o, NULL, 1, 1));
    REQUIRE(o != NULL);
    args = h_step_args(&st, sc, NULL, 0, NULL, 0);

    EXPECT_NULL_ARG(dagrt_worker_orch(w, NULL), "out");
    EXPECT_NULL_ARG(dagrt_worker_stats(w, NULL), "out");
    EXPECT_NULL_ARG(dagrt_worker_submit(w, NULL, NULL, &run), "orch_fn");
    EXPECT_NULL_ARG(dagrt_worker_submit(w, noop_orch, NULL, NULL), "out_run");
    EXPECT_NULL_ARG(dagrt_worker_run(w, NULL, NULL), "orch_fn");

    EXPECT_NULL_ARG(dagrt_begin_run(NULL, &run), "orch");
    EXPECT_NULL_ARG(dagrt_begin_run(o, NULL), "out_run");
    REQUIRE_OK(dagrt_begin_run(o, &run));

    EXPECT_NULL_ARG(dagrt_submit_next_level(NULL, h_step_callable(), &args, NULL, 0, &h), "orch");
    EXPECT_NULL_ARG(dagrt_submit_next_level(o, NULL, &args, NULL, 0, &h), "callable");
    EXPECT_NULL_ARG(dagrt_submit_next_level(o, h_step_callable(), NULL, NULL, 0, &h), "args");
    EXPECT_NULL_ARG(dagrt_submit_next_level_group(o, h_step_callable(), NULL, 1, NULL, workers, &h),
                    "args_list");
    EXPECT_NULL_ARG(dagrt_submit_next_level_group(o, h_step_callable(), &args, 1, NULL, NULL, &h),
                    "workers");
    EXPECT_NULL_ARG(dagrt_submit_next_level_group(o, NULL, &args, 1, NULL, workers, &h),
                    "callable");
    EXPECT_NULL_ARG(dagrt_submit_sub(o, NULL, &args, &h), "callable");
    EXPECT_NULL_ARG(dagrt_submit_sub(o, h_step_callable(), NULL, &h), "args");
    EXPECT_NULL_ARG(dagrt_submit_sub(NULL, h_step_callable(), &args, &h), "orch");
    EXPECT_NULL_ARG(dagrt_submit_sub_group(o, h_step_callable(), NULL, 1, &h), "args_list");
    EXPECT_NULL_ARG(dagrt_alloc(o, NULL, 1, DAGRT_DTYPE_F64, &p, &h), "shape");
    EXPECT_NULL_ARG(dagrt_alloc(o, shape, 1, DAGRT_DTYPE_F64, NULL, &h), "out_ptr");
    EXPECT_NULL_ARG(dagrt_alloc(NULL, shape, 1, DAGRT_DTYPE_F64, &p, &h), "orch");
    EXPECT_NULL_ARG(dagrt_scope_begin(NULL), "orch");
    EXPECT_NULL_ARG(dagrt_scope_end(NULL), "orch");

    /* task args whose counts promise arrays that are NULL */
    {
        dagrt_task_args bad = args;
        bad.num_tensors = 1;
        EXPECT_NULL_ARG(dagrt_submit_next_level(o, h_step_callable(), &bad, NULL, 0, &h), "tensors");
        bad = args;
        bad.scalars = NULL;
        EXPECT_NULL_ARG(dagrt_submit_next_level(o, h_step_callable(), &bad, NULL, 0, &h), "scalars");
        bad = args;
        bad.num_deps = 2;
        EXPECT_NULL_ARG(dagrt_submit_next_level(o, h_step_callable(), &bad, NULL, 0, &h), "deps");
    }
    /* none of the failures wrote the handle or the pointer */
    CHECK_EQ_U64(h.run_id, 777);
    CHECK_EQ_U64(h.slot, 777);
    CHECK(p == (void *)&h);
    /* and none of them submitted anything */
    {
        dagrt_run_stats_t r0;
        REQUIRE_OK(dagrt_run_stats(w, run, &r0));
        CHECK_EQ_I64(r0.live_slots, 0);
    }

    EXPECT_NULL_ARG(dagrt_close_run_submission(NULL, run), "orch");
    EXPECT_NULL_ARG(dagrt_fail_run_submission(NULL, run, "x"), "orch");
    REQUIRE_OK(dagrt_close_run_submission(o, run));

    EXPECT_NULL_ARG(dagrt_wait_run_for(w, run, 10, NULL), "out_done");
    EXPECT_NULL_ARG(dagrt_wait_run_for(NULL, run, 10, &done), "worker");
    EXPECT_NULL_ARG(dagrt_run_done(w, run, NULL), "out_done");
    EXPECT_NULL_ARG(dagrt_run_done(NULL, run, &done), "worker");
    EXPECT_NULL_ARG(dagrt_run_stats(w, run, NULL), "out");
    EXPECT_NULL_ARG(dagrt_run_stats(NULL, run, &rs), "worker");
    CHECK_EQ_U64(done, 7); /* out-parameters are written only on success */
    EXPECT_OK(h_wait(w, run));
    EXPECT_OK(dagrt_release_run(w, run));

    /* dagrt_worker_submit leaves out_run alone when it fails before beginning a run */
    EXPECT_NULL_ARG(dagrt_worker_submit(w, NULL, NULL, &sentinel_run), "orch_fn");
    CHECK_EQ_U64(sentinel_run, 12345);

    /* dagrt_task_fail on a view that is not a running executor's */
    memset(&fake_view, 0, sizeof fake_view);
    EXPECT_ERROR(dagrt_task_fail(&fake_view, "x"), DAGRT_STATUS_INVALID_ARGUMENT, NULL);

    ws = h_stats(w);
    CHECK(h_is_quiescent(&ws));
    EXPECT_OK(dagrt_worker_close(w));
    dagrt_worker_free(w);
}

static void test_free_null(void)
{
    dagrt_tensor t;
    /* make a known last error first */
    EXPECT_STATUS(dagrt_tensor_init(NULL, NULL, 0, 0, NULL, 0), DAGRT_STATUS_NULL_POINTER);
    {
        char before[256];
        snprintf(before, sizeof before, "%s", dagrt_last_error());
        dagrt_args_free(NULL);
        dagrt_worker_free(NULL);
        CHECKF(strcmp(before, dagrt_last_error()) == 0,
               "_free(NULL) changed the last error from \"%s\" to \"%s\"", before,
               dagrt_last_error());
    }
    /* successful calls after a failure: the library still works */
    EXPECT_OK(dagrt_tensor_init(&t, NULL, DAGRT_DTYPE_U8, 0, NULL, DAGRT_TAG_OUTPUT));
}

/* Last error is per thread: thread B's failure does not change thread A's message. */
typedef struct {
    char msg[256];
    char initial[256];
    dagrt_status st;
} thread_err;

static void *other_thread(void *arg)
{
    thread_err *te = (thread_err *)arg;
    snprintf(te->initial, sizeof te->initial, "%s", dagrt_last_error());
    te->st = dagrt_worker_add_sub_lanes(NULL, 1); /* "worker is NULL" */
    snprintf(te->msg, sizeof te->msg, "%s", dagrt_last_error());
    return NULL;
}

static void test_last_error_per_thread(void)
{
    pthread_t th;
    thread_err te;
    char mine[256];
    dagrt_args_t *a = NULL;
    memset(&te, 0, sizeof te);
    REQUIRE_OK(dagrt_args_new(&a));
    EXPECT_STATUS(dagrt_args_add_tensor(a, NULL), DAGRT_STATUS_NULL_POINTER); /* "tensor" */
    dagrt_args_free(a);
    snprintf(mine, sizeof mine, "%s", dagrt_last_error());
    CHECK(h_mentions_word(mine, "tensor"));

    REQUIRE(pthread_create(&th, NULL, other_thread, &te) == 0);
    pthread_join(th, NULL);

    CHECKF(te.initial[0] == '\0', "a new thread's last error should be empty, got \"%s\"",
           te.initial);
    CHECK(te.st == DAGRT_STATUS_NULL_POINTER);
    CHECKF(h_mentions_word(te.msg, "worker"), "thread B's message: \"%s\"", te.msg);
    CHECKF(strcmp(mine, dagrt_last_error()) == 0,
           "thread A's last error changed from \"%s\" to \"%s\" after thread B failed", mine,
           dagrt_last_error());
}

int main(void)
{
    h_begin("abi", 60);
    RUN_TEST(test_version);
    RUN_TEST(test_status_names);
    RUN_TEST(test_null_pointers_builders);
    RUN_TEST(test_null_pointers_engine);
    RUN_TEST(test_lane_counts);
    RUN_TEST(test_free_null);
    RUN_TEST(test_last_error_per_thread);
    return h_done();
}
