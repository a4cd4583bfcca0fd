// test_cpp.cpp: dagrt from C++17 through a small RAII wrapper.
//  - unique_ptr with custom deleters own the worker and the args builder;
//  - every non-OK status becomes a dagrt::error carrying the status and dagrt_last_error();
//  - an executor backed by a lambda, reached through the callable's user pointer;
//  - a diamond DAG (A -> B, A -> C, B + C -> D) built from tensor tags on two lanes, checked
//    by execution order (an atomic sequence counter) and by the values it computes;
//  - a failing lambda surfaces as a dagrt::error with DAGRT_STATUS_TASK_FAILED and its text;
//  - `test_cpp --escape` (ctest `cpp_exception_escape_aborts`): an exception that escapes a raw
//    executor (no trampoline) aborts the process, as the header says, rather than unwinding
//    through the lane: the run is never reported.
#include <dagrt.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace dagrt {

class error : public std::runtime_error {
public:
    error(dagrt_status s, const std::string &what)
        : std::runtime_error(std::string(dagrt_status_str(s)) + ": " + what), status_(s) {}
    dagrt_status status() const noexcept { return status_; }

private:
    dagrt_status status_;
};

inline void check(dagrt_status s, const char *what)
{
    if (s != DAGRT_STATUS_OK)
        throw error(s, std::string(what) + ": " + dagrt_last_error());
}

struct worker_deleter {
    void operator()(dagrt_worker_t *w) const noexcept { dagrt_worker_free(w); }
};
struct args_deleter {
    void operator()(dagrt_args_t *a) const noexcept { dagrt_args_free(a); }
};
using worker_ptr = std::unique_ptr<dagrt_worker_t, worker_deleter>;
using args_ptr = std::unique_ptr<dagrt_args_t, args_deleter>;

using task_fn = std::function<void(const dagrt_task_view &)>;

// The trampoline every lambda-backed callable registers; `user` is the std::function.
inline int32_t trampoline(const dagrt_task_view *t, void *user)
{
    auto *fn = static_cast<task_fn *>(user);
    try {
        (*fn)(*t);
        return 0;
    } catch (const std::exception &e) {
        dagrt_task_fail(t, e.what());
        return 1;
    } catch (...) {
        dagrt_task_fail(t, "unknown C++ exception");
        return 1;
    }
}

// A registered callable that owns its lambda (registrations are per process and permanent,
// so the lambda must outlive every worker that may run it).
class callable {
public:
    callable(const std::string &name, task_fn fn) : fn_(new task_fn(std::move(fn)))
    {
        check(dagrt_register_callable(name.c_str(), 0, DAGRT_CALLABLE_KIND_TASK, trampoline,
                                      fn_.get(), &id_),
              "register_callable");
    }
    const dagrt_callable *id() const noexcept { return &id_; }

private:
    std::unique_ptr<task_fn> fn_;
    dagrt_callable id_{};
};

class args {
public:
    args()
    {
        dagrt_args_t *a = nullptr;
        check(dagrt_args_new(&a), "args_new");
        p_.reset(a);
    }
    args &tensor(void *data, uint64_t n, uint32_t dtype, uint32_t tag)
    {
        dagrt_tensor t{};
        check(dagrt_tensor_init(&t, data, dtype, 1, &n, tag), "tensor_init");
        check(dagrt_args_add_tensor(p_.get(), &t), "add_tensor");
        return *this;
    }
    args &scalar(uint64_t v)
    {
        check(dagrt_args_add_scalar(p_.get(), v), "add_scalar");
        return *this;
    }
    args &dep(dagrt_task_handle h)
    {
        check(dagrt_args_add_dep(p_.get(), h), "add_dep");
        return *this;
    }
    dagrt_task_args view()
    {
        dagrt_task_args v{};
        check(dagrt_args_view(p_.get(), &v), "args_view");
        return v;
    }

private:
    args_ptr p_;
};

class worker {
public:
    explicit worker(const std::vector<int32_t> &lanes)
    {
        dagrt_worker_t *w = nullptr;
        check(dagrt_worker_new(nullptr, &w), "worker_new");
        w_.reset(w);
        for (int32_t id : lanes)
            check(dagrt_worker_add_next_level_lane(w_.get(), id), "add_next_level_lane");
        check(dagrt_worker_init(w_.get()), "worker_init");
        check(dagrt_worker_orch(w_.get(), &orch_), "worker_orch");
    }
    dagrt_worker_t *get() const noexcept { return w_.get(); }

    dagrt_run_id begin() { dagrt_run_id r = 0; check(dagrt_begin_run(orch_, &r), "begin_run"); return r; }
    dagrt_task_handle submit(const callable &c, args &a, int32_t lane)
    {
        dagrt_task_args v = a.view();
        dagrt_task_handle h{};
        check(dagrt_submit_next_level(orch_, c.id(), &v, nullptr, lane, &h), "submit_next_level");
        return h;
    }
    void close(dagrt_run_id r) { check(dagrt_close_run_submission(orch_, r), "close_run_submission"); }
    void wait(dagrt_run_id r)
    {
        uint32_t done = 0;
        dagrt_status s = dagrt_wait_run_for(w_.get(), r, 15000, &done);
        if (s == DAGRT_STATUS_OK && !done)
            throw error(DAGRT_STATUS_SYSTEM, "run did not finish in 15 s");
        check(s, "wait_run");
    }
    void release(dagrt_run_id r) { check(dagrt_release_run(w_.get(), r), "release_run"); }
    dagrt_worker_stats_t stats() const
    {
        dagrt_worker_stats_t s{};
        check(dagrt_worker_stats(w_.get(), &s), "worker_stats");
        return s;
    }

private:
    worker_ptr w_;
    dagrt_orch_t *orch_ = nullptr;
};

} // namespace dagrt

static int failures = 0;
#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            std::fprintf(stderr, "FAIL %s:%d: CHECK(%s)\n", __FILE__, __LINE__, #cond);    \
            ++failures;                                                                    \
        }                                                                                  \
    } while (0)

static std::atomic<uint64_t> seq{0};

struct record {
    std::atomic<uint64_t> start{0}, end{0};
    std::atomic<int> runs{0};
    std::atomic<int32_t> lane{-100};
};

static record rec[4];

static void diamond()
{
    // Each task: out = sum(inputs) + k, on 8-element u64 vectors; tasks sleep a little so a
    // missing edge would let a consumer start first on the other lane.
    auto body = [](const dagrt_task_view &t) {
        uint64_t k = t.scalars[0];
        record &r = rec[k];
        r.lane.store(t.worker_id);
        r.runs.fetch_add(1);
        r.start.store(++seq);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        auto *out = static_cast<uint64_t *>(t.tensors[t.num_tensors - 1].data);
        for (int i = 0; i < 8; i++) {
            uint64_t acc = k + 1;
            for (uint32_t j = 0; j + 1 < t.num_tensors; j++)
                acc += static_cast<const uint64_t *>(t.tensors[j].data)[i];
            out[i] = acc;
        }
        r.end.store(++seq);
    };
    static dagrt::callable add("cpp.diamond.add", body);

    uint64_t a[8] = {0}, b[8] = {0}, c[8] = {0}, d[8] = {0};
    dagrt::worker w({0, 1});
    dagrt_run_id run = w.begin();
    dagrt::args aa, ab, ac, ad;
    aa.scalar(0).tensor(a, 8, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    ab.scalar(1).tensor(a, 8, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT).tensor(b, 8, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    ac.scalar(2).tensor(a, 8, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT).tensor(c, 8, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    ad.scalar(3)
        .tensor(b, 8, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT)
        .tensor(c, 8, DAGRT_DTYPE_U64, DAGRT_TAG_INPUT)
        .tensor(d, 8, DAGRT_DTYPE_U64, DAGRT_TAG_OUTPUT);
    dagrt_task_handle ha = w.submit(add, aa, 0);
    ab.dep(ha); // redundant with the tensor edge: collapses
    w.submit(add, ab, 1);
    w.submit(add, ac, 0);
    w.submit(add, ad, 1);
    w.close(run);
    w.wait(run);
    w.release(run);

    for (auto &r : rec)
        CHECK(r.runs.load() == 1);
    CHECK(rec[0].end < rec[1].start && rec[0].end < rec[2].start);
    CHECK(rec[1].end < rec[3].start && rec[2].end < rec[3].start);
    CHECK(rec[0].lane == 0 && rec[1].lane == 1 && rec[2].lane == 0 && rec[3].lane == 1);
    for (int i = 0; i < 8; i++) {
        CHECK(a[i] == 1);
        CHECK(b[i] == 3);     // a + 2
        CHECK(c[i] == 4);     // a + 3
        CHECK(d[i] == 3 + 4 + 4);
    }
    dagrt_worker_stats_t st = w.stats();
    CHECK(st.live_slots == 0 && st.tensormap_entries == 0);
}

static void errors_are_exceptions()
{
    static dagrt::callable boom("cpp.boom", [](const dagrt_task_view &) {
        throw std::runtime_error("lambda says no");
    });
    dagrt::worker w({3});
    // an unknown lane id throws with the status
    {
        dagrt_run_id run = w.begin();
        dagrt::args a;
        a.scalar(0);
        bool thrown = false;
        try {
            w.submit(boom, a, 9);
        } catch (const dagrt::error &e) {
            thrown = true;
            CHECK(e.status() == DAGRT_STATUS_UNKNOWN_WORKER);
            CHECK(std::string(e.what()).find("DAGRT_STATUS_UNKNOWN_WORKER") != std::string::npos);
            CHECK(std::string(e.what()).find("9") != std::string::npos);
        }
        CHECK(thrown);
        // a failing lambda fails its run with the exception text
        w.submit(boom, a, 3);
        w.close(run);
        thrown = false;
        try {
            w.wait(run);
        } catch (const dagrt::error &e) {
            thrown = true;
            CHECK(e.status() == DAGRT_STATUS_TASK_FAILED);
            CHECK(std::string(e.what()).find("lambda says no") != std::string::npos);
        }
        CHECK(thrown);
        w.release(run);
    }
    // the worker is still usable, and the deleters free everything on scope exit
    dagrt_run_id run = w.begin();
    w.close(run);
    w.wait(run);
    w.release(run);
}

// A raw executor that lets its exception escape (the header forbids it: dagrt aborts).
static int32_t escaping(const dagrt_task_view *, void *)
{
    throw std::runtime_error("escaped");
}

static int escape()
{
    dagrt::worker w({0});
    dagrt_callable c{};
    dagrt::check(dagrt_register_callable("cpp.escaping", 0, DAGRT_CALLABLE_KIND_TASK, escaping,
                                         nullptr, &c),
                 "register_callable");
    dagrt::args a;
    dagrt_task_args v = a.view();
    dagrt_run_id r = w.begin();
    std::printf("an exception escapes an executor\n");
    std::fflush(stdout);
    dagrt_orch_t *o = nullptr;
    dagrt::check(dagrt_worker_orch(w.get(), &o), "worker_orch");
    dagrt::check(dagrt_submit_next_level(o, &c, &v, nullptr, 0, nullptr), "submit_next_level");
    w.close(r);
    dagrt_status s = dagrt_wait_run(w.get(), r);
    std::printf("wait returned %s\n", dagrt_status_str(s));
    return 1;
}

int main(int argc, char **argv)
{
    alarm(60); // a hang fails the test long before ctest's timeout
    if (argc > 1 && std::strcmp(argv[1], "--escape") == 0)
        return escape();
    try {
        diamond();
        errors_are_exceptions();
    } catch (const std::exception &e) {
        std::fprintf(stderr, "FAIL: unexpected exception: %s\n", e.what());
        return 1;
    }
    std::printf("cpp: %s (%d failed checks)\n", failures ? "FAILED" : "passed", failures);
    return failures ? 1 : 0;
}
