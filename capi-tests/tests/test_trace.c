/*
 * test_trace.c: the timeline trace's lifecycle through the C API.
 *  - dagrt_worker_trace_start creates its file at once: a path that cannot be created fails
 *    there (SYSTEM, naming the path), before any run, and leaves nothing recording;
 *  - a second start while a trace records -> WRONG_STATE naming the file in use, and the
 *    second file is not created;
 *  - stop writes Chrome trace JSON holding one "X" slice per task of the traced runs;
 *    stop with nothing recording is a no-op;
 *  - a new trace holds its own recording only: the earlier one's tasks are not in it, and
 *    write_dot no longer knows the earlier run;
 *  - DAGRT_TRACE with two workers: the first records into the path, the second into the
 *    path with ".1" before the extension, each file written at free holding its own runs
 *    (the same file for both left a corrupt document); runs first, as the numbering is per
 *    process;
 *  - DAGRT_TRACE set to a path that cannot be created: init succeeds, the log hook gets an
 *    error naming DAGRT_TRACE at init, and the worker records nothing (a start succeeds);
 *  - two threads exporting the DOT of two runs to one path at once leave one whole document.
 */
#include "harness.h"

#include <sys/stat.h>

static char dir[64];

static void path_in_dir(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* The whole file as a string (NULL if unreadable); the caller frees it. */
static char *slurp(const char *p)
{
    FILE *f = fopen(p, "rb");
    char *s;
    long n;
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = '\0';
    fclose(f);
    return s;
}

static unsigned count_of(const char *hay, const char *needle)
{
    unsigned n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* One run of `n` chained SUB steps on one buffer; returns its id (0 on failure). */
static dagrt_run_id run_chain(dagrt_worker_t *w, unsigned n)
{
    static int64_t buf[8];
    dagrt_orch_t *o = h_orch(w);
    dagrt_run_id run = 0;
    if (!o || !EXPECT_OK(dagrt_begin_run(o, &run)))
        return 0;
    for (unsigned i = 0; i < n; i++) {
        h_step s = h_step_id(i);
        dagrt_tensor t = h_tensor(buf, 8, DAGRT_DTYPE_I64, DAGRT_TAG_INOUT);
        EXPECT_OK(h_submit_step_sub(o, &s, &t, 1, NULL, 0, NULL));
    }
    EXPECT_OK(h_finish_run(w, o, run));
    return run;
}

static void test_unwritable_path_fails_at_start(void)
{
    dagrt_worker_t *w = h_worker(NULL, 0, 1);
    REQUIRE(w != NULL);
    EXPECT_ERROR(dagrt_worker_trace_start(w, "/nonexistent-dagrt-dir/t.json"),
                 DAGRT_STATUS_SYSTEM, "/nonexistent-dagrt-dir/t.json");
    /* Nothing records: stop is a no-op, and a run leaves no graph. */
    EXPECT_OK(dagrt_worker_trace_stop(w));
    dagrt_run_id run = run_chain(w, 2);
    char dot[128];
    path_in_dir(dot, sizeof dot, "none.dot");
    EXPECT_STATUS(dagrt_worker_write_dot(w, run, dot), DAGRT_STATUS_INVALID_ARGUMENT);
    dagrt_worker_free(w);
}

/* Header, dagrt_worker_write_dot: "Control characters in callable names are shown as '?'",
 * a newline too: the label's line breaks are its own (name, then kind and slot). */
static int32_t exec_nop(const dagrt_task_view *t, void *u)
{
    (void)t;
    (void)u;
    return 0;
}

static void test_dot_shows_control_characters_in_names(void)
{
    char trace[128], dot[128];
    path_in_dir(trace, sizeof trace, "names.json");
    path_in_dir(dot, sizeof dot, "names.dot");
    dagrt_callable c;
    REQUIRE_OK(dagrt_register_callable("line\nbreak\ttab", 0, DAGRT_CALLABLE_KIND_TASK,
                                       exec_nop, NULL, &c));
    dagrt_worker_t *w = h_worker(NULL, 0, 1);
    REQUIRE(w != NULL);
    dagrt_orch_t *o = h_orch(w);
    dagrt_run_id run;
    REQUIRE_OK(dagrt_worker_trace_start(w, trace));
    REQUIRE_OK(dagrt_begin_run(o, &run));
    dagrt_task_args a = h_args(NULL, 0, NULL, 0, NULL, 0);
    REQUIRE_OK(dagrt_submit_sub(o, &c, &a, NULL));
    EXPECT_OK(dagrt_close_run_submission(o, run));
    EXPECT_OK(h_wait(w, run));
    EXPECT_OK(dagrt_worker_write_dot(w, run, dot));
    EXPECT_OK(dagrt_worker_trace_stop(w));
    char *d = slurp(dot);
    REQUIRE(d != NULL);
    CHECKF(strstr(d, "label=\"line?break?tab\\n") != NULL, "the name's control characters "
                                                          "are not shown as '?':\n%s",
           d);
    free(d);
    EXPECT_OK(dagrt_release_run(w, run));
    dagrt_worker_free(w);
}

static void test_one_recording_per_file(void)
{
    char a[128], b[128], dot[128];
    path_in_dir(a, sizeof a, "a.json");
    path_in_dir(b, sizeof b, "b.json");
    path_in_dir(dot, sizeof dot, "a.dot");
    dagrt_worker_t *w = h_worker(NULL, 0, 2);
    REQUIRE(w != NULL);
    REQUIRE_OK(dagrt_worker_trace_start(w, a));
    CHECK(file_exists(a));
    EXPECT_ERROR(dagrt_worker_trace_start(w, b), DAGRT_STATUS_WRONG_STATE, a);
    CHECK(!file_exists(b));

    dagrt_run_id first = run_chain(w, 3);
    EXPECT_OK(dagrt_worker_trace_stop(w));
    EXPECT_OK(dagrt_worker_trace_stop(w)); /* nothing recording: a no-op */
    char *ja = slurp(a);
    REQUIRE(ja != NULL);
    CHECK(strstr(ja, "\"traceEvents\"") != NULL);
    CHECKF(count_of(ja, "\"harness.step\"") >= 3, "%u task names in %s",
           count_of(ja, "\"harness.step\""), a);
    CHECKF(count_of(ja, "\"ph\":\"X\",\"cat\":\"task\"") == 3, "%u task slices in %s",
           count_of(ja, "\"ph\":\"X\",\"cat\":\"task\""), a);
    free(ja);
    EXPECT_OK(dagrt_worker_write_dot(w, first, dot));

    /* A second recording: its file holds its own run only. */
    REQUIRE_OK(dagrt_worker_trace_start(w, b));
    dagrt_run_id second = run_chain(w, 1);
    EXPECT_OK(dagrt_worker_trace_stop(w));
    char *jb = slurp(b);
    REQUIRE(jb != NULL);
    CHECKF(count_of(jb, "\"ph\":\"X\",\"cat\":\"task\"") == 1, "%u task slices in %s",
           count_of(jb, "\"ph\":\"X\",\"cat\":\"task\""), b);
    free(jb);
    EXPECT_OK(dagrt_worker_write_dot(w, second, dot));
    EXPECT_STATUS(dagrt_worker_write_dot(w, first, dot), DAGRT_STATUS_INVALID_ARGUMENT);
    dagrt_worker_free(w);
}

static void test_env_trace_file_per_worker(void)
{
    char env[128], first[128], second[128];
    path_in_dir(env, sizeof env, "env.json");
    path_in_dir(first, sizeof first, "env.json");
    path_in_dir(second, sizeof second, "env.1.json");
    setenv("DAGRT_TRACE", env, 1);
    dagrt_worker_t *a = h_worker(NULL, 0, 1);
    dagrt_worker_t *b = h_worker(NULL, 0, 1);
    unsetenv("DAGRT_TRACE");
    REQUIRE(a != NULL && b != NULL);
    run_chain(a, 5);
    run_chain(b, 2);
    dagrt_worker_free(b); /* the shorter document first: it used to leave a's tail behind */
    dagrt_worker_free(a);
    const char *paths[2] = {first, second};
    const unsigned tasks[2] = {5, 2};
    for (int i = 0; i < 2; i++) {
        char *j = slurp(paths[i]);
        CHECKF(j != NULL, "%s was not written", paths[i]);
        if (!j)
            continue;
        unsigned n = count_of(j, "\"ph\":\"X\",\"cat\":\"task\"");
        CHECKF(n == tasks[i], "%u task slices in %s, expected %u", n, paths[i], tasks[i]);
        CHECKF(count_of(j, "\"traceEvents\"") == 1, "%s holds %u documents", paths[i],
               count_of(j, "\"traceEvents\""));
        free(j);
    }
}

static char logged[512];
static atomic_int log_errors;

static void log_hook(uint32_t level, const char *msg, void *user)
{
    (void)user;
    if (level == DAGRT_LOG_LEVEL_ERROR && atomic_fetch_add(&log_errors, 1) == 0)
        snprintf(logged, sizeof logged, "%s", msg);
}

static void test_bad_env_path_is_logged_at_init(void)
{
    char ok[128];
    path_in_dir(ok, sizeof ok, "after-env.json");
    REQUIRE_OK(dagrt_set_log_hook(log_hook, NULL));
    setenv("DAGRT_TRACE", "/nonexistent-dagrt-dir/env.json", 1);
    dagrt_worker_t *w = h_worker(NULL, 0, 1);
    unsetenv("DAGRT_TRACE");
    REQUIRE(w != NULL);
    CHECKF(atomic_load(&log_errors) == 1, "%d errors logged", atomic_load(&log_errors));
    /* (the third DAGRT_TRACE worker of the process: its file is env.2.json) */
    CHECKF(h_contains(logged, "DAGRT_TRACE") && h_contains(logged, "/nonexistent-dagrt-dir/env.2.json"),
           "logged: '%s'", logged);
    /* Nothing is recording, so a trace can start. */
    EXPECT_OK(dagrt_worker_trace_start(w, ok));
    EXPECT_OK(dagrt_worker_trace_stop(w));
    CHECK(file_exists(ok));
    dagrt_worker_free(w);
    EXPECT_OK(dagrt_set_log_hook(NULL, NULL));
}

/* Two threads exporting the DOT of two runs (of 1 and 40 tasks) to one path at once, many
 * times: the file always holds one of the two documents whole (it was written in place, and
 * a short document over a long one left the long one's tail). */
struct dot_writer {
    dagrt_worker_t *w;
    dagrt_run_id run;
    const char *path;
    atomic_int *go;
    dagrt_status st;
};

static void *write_dot_once(void *arg)
{
    struct dot_writer *x = arg;
    atomic_fetch_add(x->go, 1);
    while (atomic_load(x->go) < 2) {
    }
    x->st = dagrt_worker_write_dot(x->w, x->run, x->path);
    return NULL;
}

static void test_concurrent_dot_exports_stay_whole(void)
{
    char path[128], one[128], many[128];
    char *doc[2];
    dagrt_run_id runs[2];
    int torn = 0;
    path_in_dir(path, sizeof path, "shared.dot");
    path_in_dir(one, sizeof one, "one.dot");
    path_in_dir(many, sizeof many, "many.dot");
    dagrt_worker_t *w = h_worker(NULL, 0, 1);
    REQUIRE(w != NULL);
    REQUIRE_OK(dagrt_worker_trace_start(w, "/dev/null"));
    runs[0] = run_chain(w, 1);
    runs[1] = run_chain(w, 40);
    REQUIRE_OK(dagrt_worker_write_dot(w, runs[0], one));
    REQUIRE_OK(dagrt_worker_write_dot(w, runs[1], many));
    doc[0] = slurp(one);
    doc[1] = slurp(many);
    REQUIRE(doc[0] != NULL && doc[1] != NULL);
    for (int i = 0; i < 1000 && !torn; i++) {
        atomic_int go = 0;
        struct dot_writer x[2] = {{w, runs[0], path, &go, DAGRT_STATUS_SYSTEM},
                                  {w, runs[1], path, &go, DAGRT_STATUS_SYSTEM}};
        pthread_t t[2];
        for (int k = 0; k < 2; k++)
            REQUIRE(pthread_create(&t[k], NULL, write_dot_once, &x[k]) == 0);
        for (int k = 0; k < 2; k++)
            pthread_join(t[k], NULL);
        CHECK(x[0].st == DAGRT_STATUS_OK && x[1].st == DAGRT_STATUS_OK);
        char *got = slurp(path);
        if (got == NULL || (strcmp(got, doc[0]) != 0 && strcmp(got, doc[1]) != 0)) {
            torn = 1;
            CHECKF(0, "export %d: %s holds neither document (%zu bytes)", i, path,
                   got ? strlen(got) : 0);
        }
        free(got);
    }
    free(doc[0]);
    free(doc[1]);
    EXPECT_OK(dagrt_worker_trace_stop(w));
    dagrt_worker_free(w);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/dagrt-test-trace-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    h_begin("trace", 60);
    RUN_TEST(test_env_trace_file_per_worker); /* first: DAGRT_TRACE numbering is per process */
    RUN_TEST(test_unwritable_path_fails_at_start);
    RUN_TEST(test_one_recording_per_file);
    RUN_TEST(test_dot_shows_control_characters_in_names);
    RUN_TEST(test_bad_env_path_is_logged_at_init);
    RUN_TEST(test_concurrent_dot_exports_stay_whole);
    int rc = h_done();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}
