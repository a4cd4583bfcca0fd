/*
 * test_teardown.c: a worker used, closed and freed while its thread or the process ends.
 *  - From a pthread key destructor (after the thread's own thread-locals are destroyed, as
 *    with a C++ thread_local holding the worker): a run, dagrt_worker_close and
 *    dagrt_worker_free all succeed, and the worker's threads are gone afterwards.
 *  - From an atexit handler on the main thread (after exit() has destroyed the main thread's
 *    thread-locals): the same, checked inside the handler, which turns a failure into the
 *    process's exit status.
 *  - Orchestration callbacks nest on one thread (a callback submitting to another worker,
 *    and so on) up to 16 deep; the 17th is refused with WRONG_STATE and begins no run, and
 *    the 16 below it complete.
 */
#include "harness.h"

static int32_t empty_orch(dagrt_orch_t *o, void *ctx)
{
    (void)o;
    atomic_fetch_add((atomic_int *)ctx, 1);
    return 0;
}

/* ---- a pthread key destructor ---- */

static pthread_key_t key;
static dagrt_status key_run = DAGRT_STATUS_SYSTEM, key_close = DAGRT_STATUS_SYSTEM;
static atomic_int key_calls;

static void key_destructor(void *p)
{
    dagrt_worker_t *w = p;
    key_run = dagrt_worker_run(w, empty_orch, &key_calls);
    key_close = dagrt_worker_close(w);
    dagrt_worker_free(w);
}

static void *thread_with_worker(void *arg)
{
    (void)arg;
    dagrt_worker_t *w = h_worker(NULL, 0, 1);
    if (w != NULL)
        pthread_setspecific(key, w);
    return NULL;
}

static void *nothing(void *arg)
{
    return arg;
}

static void test_key_destructor(void)
{
    int before;
    pthread_t t;
    /* A first thread, joined: a runtime that starts a helper thread of its own at the first
     * pthread_create (ThreadSanitizer does) has it in the baseline. */
    REQUIRE(pthread_create(&t, NULL, nothing, NULL) == 0);
    pthread_join(t, NULL);
    before = h_thread_count();
    REQUIRE(pthread_key_create(&key, key_destructor) == 0);
    REQUIRE(pthread_create(&t, NULL, thread_with_worker, NULL) == 0);
    pthread_join(t, NULL);
    pthread_key_delete(key);
    CHECKF(key_run == DAGRT_STATUS_OK, "run from a key destructor: %s",
           dagrt_status_str(key_run));
    CHECK(atomic_load(&key_calls) == 1);
    CHECKF(key_close == DAGRT_STATUS_OK, "close from a key destructor: %s",
           dagrt_status_str(key_close));
    /* The freed worker's scheduler and lane threads were joined. */
    CHECKF(h_thread_count() == before, "threads: %d before, %d after", before,
           h_thread_count());
}

/* ---- nesting ---- */

#define NEST 17
static dagrt_worker_t *nest_w[NEST];
static dagrt_status nest_status[NEST];
static char nest_msg[256];
static atomic_int nest_calls;

static int32_t nest_orch(dagrt_orch_t *o, void *ctx)
{
    (void)o;
    int level = (int)(intptr_t)ctx;
    atomic_fetch_add(&nest_calls, 1);
    if (level + 1 < NEST) {
        nest_status[level + 1] =
            dagrt_worker_run(nest_w[level + 1], nest_orch, (void *)(intptr_t)(level + 1));
        if (level + 1 == NEST - 1)
            snprintf(nest_msg, sizeof nest_msg, "%s", dagrt_last_error());
    }
    return 0;
}

static void test_nesting_limit(void)
{
    for (int i = 0; i < NEST; i++)
        nest_w[i] = h_worker(NULL, 0, 1);
    for (int i = 0; i < NEST; i++)
        REQUIRE(nest_w[i] != NULL);
    nest_status[0] = dagrt_worker_run(nest_w[0], nest_orch, (void *)(intptr_t)0);
    for (int i = 0; i < NEST - 1; i++)
        CHECKF(nest_status[i] == DAGRT_STATUS_OK, "level %d: %s", i,
               dagrt_status_str(nest_status[i]));
    CHECKF(nest_status[NEST - 1] == DAGRT_STATUS_WRONG_STATE, "level %d: %s", NEST - 1,
           dagrt_status_str(nest_status[NEST - 1]));
    CHECKF(h_contains(nest_msg, "16 deep"), "message: %s", nest_msg);
    CHECK(atomic_load(&nest_calls) == NEST - 1);
    /* The refused level began no run. */
    CHECK(h_stats(nest_w[NEST - 1]).runs == 0);
    for (int i = 0; i < NEST; i++)
        h_close_worker(nest_w[i]);
}

/* ---- an atexit handler ---- */

static dagrt_worker_t *exit_w;
static atomic_int exit_calls;

static void at_exit(void)
{
    dagrt_status run = dagrt_worker_run(exit_w, empty_orch, &exit_calls);
    dagrt_status close = dagrt_worker_close(exit_w);
    dagrt_worker_free(exit_w);
    if (run != DAGRT_STATUS_OK || close != DAGRT_STATUS_OK || atomic_load(&exit_calls) != 1) {
        fprintf(stderr, "FAIL atexit: run %s, close %s, callback called %d times\n",
                dagrt_status_str(run), dagrt_status_str(close), atomic_load(&exit_calls));
        _exit(1);
    }
    printf("ok   teardown.atexit\n");
}

int main(void)
{
    h_begin("teardown", 120);
    RUN_TEST(test_key_destructor);
    RUN_TEST(test_nesting_limit);
    exit_w = h_worker(NULL, 0, 1);
    if (exit_w == NULL || atexit(at_exit) != 0)
        return 1;
    return h_done();
}
