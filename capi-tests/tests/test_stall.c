/* The scheduler's stall warning (Scheduler seed §3): a group at the group FIFO head that
 * cannot launch because one target is busy reserves its other targets; when a reserved
 * target is idle with singles queued behind the reservation for five seconds, one warning
 * per episode names the group slot, the busy targets and the idle-but-queued targets. The
 * warning goes through the log hook installed with dagrt_set_log_hook. */
#define _GNU_SOURCE 1
#include <dagrt.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REQ(x)                                                                             \
    do {                                                                                   \
        dagrt_status s_ = (x);                                                             \
        if (s_ != DAGRT_STATUS_OK) {                                                       \
            fprintf(stderr, "FAIL %s:%d %s -> %s: %s\n", __FILE__, __LINE__, #x,          \
                    dagrt_status_str(s_), dagrt_last_error());                             \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)
#define CHECK(c)                                                                           \
    do {                                                                                   \
        if (!(c)) {                                                                        \
            fprintf(stderr, "FAIL %s:%d CHECK(%s)\n", __FILE__, __LINE__, #c);            \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static int failures;
static atomic_int gate;       /* opened by the test to let the blocking task finish */
static atomic_int ran[8];
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int warnings;
static char last_warning[1024];

static void hook(uint32_t level, const char *msg, void *user) {
    (void)user;
    pthread_mutex_lock(&log_mu);
    if (level == DAGRT_LOG_LEVEL_WARN && strstr(msg, "group slot")) {
        warnings++;
        snprintf(last_warning, sizeof last_warning, "%s", msg);
    }
    pthread_mutex_unlock(&log_mu);
}

static int32_t exec(const dagrt_task_view *t, void *user) {
    (void)user;
    uint64_t id = t->scalars[0];
    if (id == 0) { /* the single that keeps lane 0 busy */
        for (int i = 0; i < 30000 && !atomic_load(&gate); i++) usleep(1000);
    }
    atomic_fetch_add(&ran[id], 1);
    return 0;
}

static dagrt_callable C;

static void submit_single(dagrt_orch_t *o, uint64_t id, int32_t lane, dagrt_task_handle *h) {
    dagrt_task_args a = {0};
    a.scalars = &id;
    a.num_scalars = 1;
    REQ(dagrt_submit_next_level(o, &C, &a, NULL, lane, h));
}

static int warning_count(void) {
    pthread_mutex_lock(&log_mu);
    int n = warnings;
    pthread_mutex_unlock(&log_mu);
    return n;
}

int main(void) {
    dagrt_worker_t *w;
    dagrt_orch_t *o;
    dagrt_run_id run;
    REQ(dagrt_set_log_hook(hook, NULL));
    REQ(dagrt_worker_new(NULL, &w));
    REQ(dagrt_worker_add_next_level_lane(w, 10));
    REQ(dagrt_worker_add_next_level_lane(w, 20));
    REQ(dagrt_worker_init(w));
    REQ(dagrt_register_callable("stall.exec", 0, DAGRT_CALLABLE_KIND_TASK, exec, NULL, &C));
    REQ(dagrt_worker_orch(w, &o));
    REQ(dagrt_begin_run(o, &run));

    dagrt_task_handle busy, group, queued;
    submit_single(o, 0, 10, &busy);   /* lane 10 busy until the gate opens */
    usleep(100000);                   /* let it start */
    uint64_t ids[2] = {1, 2};
    dagrt_task_args members[2] = {{0}, {0}};
    members[0].scalars = &ids[0];
    members[0].num_scalars = 1;
    members[1].scalars = &ids[1];
    members[1].num_scalars = 1;
    int32_t targets[2] = {10, 20};
    REQ(dagrt_submit_next_level_group(o, &C, members, 2, NULL, targets, &group));
    submit_single(o, 3, 20, &queued); /* idle lane 20, but reserved by the blocked group */
    REQ(dagrt_close_run_submission(o, run));

    /* Under 5 s: no warning yet, and the reservation holds the single back. */
    usleep(2000000);
    CHECK(warning_count() == 0);
    CHECK(atomic_load(&ran[3]) == 0);
    CHECK(atomic_load(&ran[1]) == 0 && atomic_load(&ran[2]) == 0);
    /* After 5 s of the structural stall: exactly one warning for the episode. */
    for (int i = 0; i < 100 && warning_count() == 0; i++) usleep(100000);
    usleep(1500000);
    CHECK(warning_count() == 1);
    char expect_slot[64];
    snprintf(expect_slot, sizeof expect_slot, "group slot %llu", (unsigned long long)group.slot);
    CHECK(strstr(last_warning, expect_slot) != NULL);
    CHECK(strstr(last_warning, "busy targets [10]") != NULL);
    char expect_queued[96];
    snprintf(expect_queued, sizeof expect_queued, "[20 (single FIFO head slot %llu)]",
             (unsigned long long)queued.slot);
    CHECK(strstr(last_warning, expect_queued) != NULL);
    fprintf(stderr, "warning: %s\n", last_warning);
    /* The warning does not release the reservation. */
    CHECK(atomic_load(&ran[3]) == 0);

    atomic_store(&gate, 1);
    REQ(dagrt_wait_run(w, run));
    for (int i = 0; i < 4; i++) CHECK(atomic_load(&ran[i]) == 1);
    CHECK(warning_count() == 1);
    REQ(dagrt_release_run(w, run));
    REQ(dagrt_set_log_hook(NULL, NULL));
    dagrt_worker_free(w);
    if (failures == 0) printf("stall: passed\n");
    return failures != 0;
}
