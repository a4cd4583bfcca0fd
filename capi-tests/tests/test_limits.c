/*
 * test_limits.c: what dagrt does when the system refuses it memory. Each case runs in a
 * forked child that lowers its own resource limits (the parent's stay as they were); the
 * parent fails the case if the child fails a check or dies (an abort is the defect these
 * cases look for).
 *  - worker init under an address-space limit (RLIMIT_AS) too small for the default task
 *    window's reservation: SYSTEM, with a message naming the window and its size, and no
 *    abort; a worker with a small window and small heap rings then starts in the same
 *    process and runs a task;
 *  - a run whose slots in use reach a chunk of the slot table that RLIMIT_DATA will not let
 *    the table commit: the submit fails with SYSTEM ("no memory for more slots"), leaves
 *    nothing behind (live slots unchanged, a second attempt fails the same way), and the
 *    run goes on: once the limit is raised again the same run takes the task, and every
 *    task runs exactly once.
 * Skipped under valgrind, which emulates these limits for its own allocator.
 */
#include "harness.h"

#include <sys/resource.h>
#include <sys/wait.h>

/* A field of /proc/self/status in kB ("VmSize:", "VmData:"), or 0. */
static uint64_t status_kb(const char *field)
{
    long long v = h_status_field(field);
    return v > 0 ? (uint64_t)v : 0;
}

static int set_soft_limit(int resource, rlim_t soft)
{
    struct rlimit r;
    if (getrlimit(resource, &r) != 0)
        return -1;
    r.rlim_cur = soft;
    return setrlimit(resource, &r);
}

/* Run `fn` in a child process; the case passes if the child exits 0. */
static void in_child(void (*fn)(void), const char *name)
{
    int st = 0;
    pid_t pid;
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        H_FAIL("fork: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        h_current_test = name;
        fn();
        fflush(NULL);
        _exit(atomic_load(&h_failures) == 0 ? 0 : 1);
    }
    if (waitpid(pid, &st, 0) != pid) {
        H_FAIL("waitpid: %s", strerror(errno));
        return;
    }
    if (WIFSIGNALED(st))
        H_FAIL("%s: the child died of signal %d (%s)", name, WTERMSIG(st), strsignal(WTERMSIG(st)));
    else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        H_FAIL("%s: the child failed checks (exit status %d)", name, WEXITSTATUS(st));
}

static void init_under_address_space_limit(void)
{
    dagrt_worker_config cfg;
    dagrt_worker_t *w = NULL;
    dagrt_orch_t *o;
    dagrt_run_id run;
    h_step s = h_step_id(1);
    uint64_t vm_kb = status_kb("VmSize:");
    REQUIRE(vm_kb > 0);
    /* 256 MiB more than this process uses: the default window alone reserves 640 MiB. */
    REQUIRE(set_soft_limit(RLIMIT_AS, (rlim_t)(vm_kb * 1024 + (256u << 20))) == 0);

    dagrt_worker_config_default(&cfg);
    REQUIRE_OK(dagrt_worker_new(&cfg, &w));
    REQUIRE_OK(dagrt_worker_add_next_level_lane(w, 0));
    EXPECT_ERROR(dagrt_worker_init(w), DAGRT_STATUS_SYSTEM, "task window");
    CHECKF(h_contains(dagrt_last_error(), "640 MiB") &&
               h_contains(dagrt_last_error(), "smaller task_window"),
           "message: %s", dagrt_last_error());
    dagrt_worker_free(w);

    /* The same process, the same limit: a worker sized for it starts and runs. */
    cfg = h_config(1u << 20, 4096, 0);
    REQUIRE(h_open_worker(&w, &o, &cfg, 1, 0));
    REQUIRE_OK(dagrt_begin_run(o, &run));
    SUBMIT_STEP(o, &s, 0, NULL, 0, NULL, 0, NULL);
    EXPECT_OK(h_finish_run(w, o, run));
    CHECK_RAN_ONCE(1);
    h_close_worker(w);
}

/* Slots per chunk of the slot table (ring.rs CHUNK): the first is built at init. */
#define CHUNK 4096

static void slot_table_growth_under_data_limit(void)
{
    dagrt_worker_config cfg = h_config(1u << 20, 3 * CHUNK, 0);
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    struct rlimit saved;
    int64_t live;
    REQUIRE(h_open_worker(&w, &o, &cfg, 1, 0));
    REQUIRE_OK(dagrt_begin_run(o, &run));
    REQUIRE(getrlimit(RLIMIT_DATA, &saved) == 0);
    /* 2 MiB of headroom: a chunk of slots is 2.5 MiB of private writable memory. (With 1 MiB
     * the scheduler's ready queue, growing while 4096 submits outrun the lane, sometimes
     * could not: an abort in about 1 run in 30.) */
    REQUIRE(set_soft_limit(RLIMIT_DATA, (rlim_t)(status_kb("VmData:") * 1024 + (2u << 20))) ==
            0);

    /* Every task keeps its slot until the run's scope ends, so these fill the first chunk. */
    for (int i = 0; i < CHUNK; i++) {
        h_step s = h_step_id((uint64_t)i);
        if (!SUBMIT_STEP(o, &s, 0, NULL, 0, NULL, 0, NULL))
            break;
    }
    live = h_stats(w).live_slots;
    CHECK_EQ_I64(live, CHUNK);
    for (int attempt = 0; attempt < 2; attempt++) {
        h_step s = h_step_id(CHUNK);
        EXPECT_ERROR(h_submit_step(o, &s, 0, NULL, 0, NULL, 0, NULL), DAGRT_STATUS_SYSTEM,
                     "no memory for more slots");
        CHECK_EQ_I64(h_stats(w).live_slots, live);
    }

    REQUIRE(setrlimit(RLIMIT_DATA, &saved) == 0);
    {
        h_step s = h_step_id(CHUNK);
        SUBMIT_STEP(o, &s, 0, NULL, 0, NULL, 0, NULL);
    }
    EXPECT_OK(h_finish_run(w, o, run));
    for (int i = 0; i <= CHUNK; i++)
        CHECK_RAN_ONCE(i);
    h_close_worker(w);
}

static void address_space(void)
{
    in_child(init_under_address_space_limit, "init_under_address_space_limit");
}

static void data_limit(void)
{
    in_child(slot_table_growth_under_data_limit, "slot_table_growth_under_data_limit");
}

int main(void)
{
    h_begin("limits", 120);
    if (h_under_valgrind()) {
        printf("skip limits: valgrind emulates resource limits for its own allocator\n");
        return h_done();
    }
    RUN_TEST(address_space);
    RUN_TEST(data_limit);
    return h_done();
}
