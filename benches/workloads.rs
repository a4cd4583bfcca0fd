//! dagrt per-task overhead on the peer workloads W1-W4 (see /work/shared/bench/peers/README.md
//! and common.h: the definitions here must stay identical to the peers').
//!
//!   cargo bench --bench workloads [-- OPTIONS]
//!
//! Options (all optional):
//!   --workloads W1,W2,W3,W4   workloads to run (default all)
//!   --lanes 1,2               lane counts (default 1,2)
//!   --kinds sub,next,next1    lane kinds (default all three):
//!                               sub   = SUB lanes, freely scheduled (dagrt_submit_sub)
//!                               next  = NEXT_LEVEL lanes, targets round-robin by task index
//!                               next1 = NEXT_LEVEL lanes, every task on lane 0 (W2 only, and
//!                                       only with more than one lane; elsewhere it is skipped)
//!   --reps R                  timed repetitions (default 5; one untimed warm-up before them)
//!   --window W                task window (default 131072: above any workload's task count,
//!                             so submission is never throttled)
//!   --n N                     override W1/W2 task count and W3 consumer count (profiling)
//!   --layers L                override W4 layer count (profiling)
//!   --scope K                 end and reopen a nested scope every K submits (default 0: every
//!                             task in the run's outer scope). Slots are then consumed while
//!                             the run is still being built (the way a long stream bounds its
//!                             window), which exercises the TensorMap erase on consumption.
//!
//! Output: one JSON object per (workload, lanes, kind) on stdout; progress on stderr. Besides
//! the required fields it carries `window`, `submit_ns_per_task_median` (first submission to the
//! return of close_run_submission: the submitting thread's share), `samples_ns` (per-rep totals,
//! in run order), for W3 `reducer_submit_ns_median` (the 10000-input reducer's submit call),
//! and, where the kernel keeps per-thread accounting, each thread's CPU time and run-queue
//! wait per task over the timed reps (`cpu_ns_per_task`, `runqueue_wait_ns_per_task`, by role:
//! `submit` (submits, close and the wait for the run), `scheduler`, `lane-K`) and the CPU of
//! all of them together (`cpu_total_ns_per_task`; see `workloads/thread_cpu.rs`).
//! Timing: from just before `dagrt_begin_run` (the first submission follows immediately) to
//! the return of `dagrt_wait_run` (the run's fence: every task completed and consumed),
//! divided by the task count; median / min / max over the timed repetitions.
//! Threads: the submitting (orchestrator) thread + the scheduler thread + one per lane.
//!
//! The engine is driven through its C ABI (`dagrt::capi`), the path a C host takes, so the
//! figures include the boundary's validation, orchestrator lock and panic guard.

// (Only its `--help`: this bench drives the engine through the C ABI, not the Rust set-up.)
#[path = "common/buffers.rs"]
mod buffers;
#[allow(dead_code)]
mod common;
#[path = "workloads/thread_cpu.rs"]
mod thread_cpu;

use buffers::{
    tensor, w4_tag, Bufs, DTYPE_U8, TAG_INOUT, TAG_INPUT, TAG_OUTPUT, W1_N, W2_N, W3_N, W4_L, W4_W,
};
use dagrt::callable::Callable;
use dagrt::capi::args::dagrt_tensor_init;
use dagrt::capi::callable::dagrt_register_callable;
use dagrt::capi::dagrt_last_error;
use dagrt::capi::orch::{
    dagrt_begin_run, dagrt_close_run_submission, dagrt_scope_begin, dagrt_scope_end,
    dagrt_submit_next_level, dagrt_submit_sub,
};
use dagrt::capi::run::{dagrt_release_run, dagrt_wait_run};
use dagrt::capi::worker::{
    dagrt_orch_t, dagrt_worker_add_next_level_lane, dagrt_worker_add_sub_lanes, dagrt_worker_free,
    dagrt_worker_init, dagrt_worker_new, dagrt_worker_orch, dagrt_worker_t,
};
use dagrt::error::Status;
use dagrt::task::{TaskArgs, TaskView, Tensor};
use dagrt::worker::WorkerConfig;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

/// `tensor()` must describe exactly what `dagrt_tensor_init` would.
fn check_tensor_layout() {
    let mut buf = [0u8; 64];
    let p = buf.as_mut_ptr();
    let mut t = std::mem::MaybeUninit::<Tensor>::zeroed();
    let shape = [64u64];
    check(
        dagrt_tensor_init(
            t.as_mut_ptr(),
            p.cast(),
            DTYPE_U8,
            1,
            shape.as_ptr(),
            TAG_INOUT,
        ),
        "dagrt_tensor_init",
    );
    // SAFETY: zero-initialised (a valid Tensor: null pointer and integers) and then written
    // by a successful dagrt_tensor_init.
    let a = unsafe { t.assume_init() };
    let b = tensor(p, TAG_INOUT);
    assert!(
        a.data == b.data
            && a.offset == b.offset
            && a.ndim == b.ndim
            && a.dtype == b.dtype
            && a.tag == b.tag
            && a.reserved == b.reserved
            && a.shape[..1] == b.shape[..1]
            && a.strides[..1] == b.strides[..1],
        "bench tensor differs from dagrt_tensor_init: {a:?} vs {b:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Executors. Bodies touch one byte (W4 also reads its three inputs' first bytes, as the OpenMP
// peer does, to count dependency violations).

/// Data pointer of tensor `i` of the running task.
///
/// # Safety
/// `task` is the view passed to a running executor and `i < task.num_tensors`.
unsafe fn data(task: *const TaskView, i: usize) -> *mut u8 {
    // SAFETY: per the function contract.
    unsafe { (*(*task).tensors.add(i)).data.cast() }
}

/// W1 / W3 producer: write 1 into the output (last tensor).
unsafe extern "C" fn exec_set(task: *const TaskView, _: *mut c_void) -> i32 {
    // SAFETY: dagrt passes a valid view for the duration of the call; the last tensor is the
    // task's own 64-byte OUTPUT buffer, which no other task touches concurrently.
    unsafe {
        let n = (*task).num_tensors as usize;
        std::ptr::write_volatile(data(task, n - 1), 1);
    }
    0
}

/// W2: increment the INOUT buffer (the chain's result counts the tasks, mod 256).
unsafe extern "C" fn exec_inc(task: *const TaskView, _: *mut c_void) -> i32 {
    // SAFETY: valid view; the INOUT chain serialises every access to the buffer.
    unsafe {
        let p = data(task, 0);
        std::ptr::write_volatile(p, std::ptr::read_volatile(p).wrapping_add(1));
    }
    0
}

/// W3 consumer / reducer: copy the first INPUT's byte into the OUTPUT (last tensor). A
/// consumer that ran before the producer leaves 0; the reducer copies c[N-1] (its first
/// input is arranged to be the last consumer's buffer).
unsafe extern "C" fn exec_copy(task: *const TaskView, _: *mut c_void) -> i32 {
    // SAFETY: valid view; input 0 is complete (dependency) and the output is this task's own.
    unsafe {
        let n = (*task).num_tensors as usize;
        let v = std::ptr::read_volatile(data(task, 0));
        std::ptr::write_volatile(data(task, n - 1), v);
    }
    0
}

static W4_BASE: AtomicUsize = AtomicUsize::new(0);
static W4_VIOLATIONS: AtomicU64 = AtomicU64::new(0);

/// W4: layer l's output gets tag(l); the three inputs must carry tag(l-1).
unsafe extern "C" fn exec_stencil(task: *const TaskView, _: *mut c_void) -> i32 {
    // SAFETY: valid view; inputs are complete (dependencies), the output is this task's own;
    // W4_BASE was stored before the run began (the run's submission orders it before us).
    unsafe {
        let n = (*task).num_tensors as usize;
        let out = data(task, n - 1);
        let l = (out as usize - W4_BASE.load(Ordering::Relaxed)) / 64 / W4_W;
        if l > 0 {
            let want = w4_tag(l - 1);
            for i in 0..n - 1 {
                if std::ptr::read_volatile(data(task, i)) != want {
                    W4_VIOLATIONS.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        std::ptr::write_volatile(out, w4_tag(l));
    }
    0
}

struct Callables {
    set: Callable,
    inc: Callable,
    copy: Callable,
    stencil: Callable,
}

fn register(name: &CStr, f: unsafe extern "C" fn(*const TaskView, *mut c_void) -> i32) -> Callable {
    let mut c = std::mem::MaybeUninit::<Callable>::zeroed();
    check(
        dagrt_register_callable(
            name.as_ptr(),
            0,
            0,
            Some(f),
            std::ptr::null_mut(),
            c.as_mut_ptr(),
        ),
        "dagrt_register_callable",
    );
    // SAFETY: written by the successful registration (and zeroed before, a valid Callable).
    unsafe { c.assume_init() }
}

// ---------------------------------------------------------------------------------------------
// Engine plumbing.

fn check(s: Status, what: &str) {
    if s != Status::Ok {
        // SAFETY: dagrt_last_error returns a valid NUL-terminated string owned by dagrt.
        let msg = unsafe { CStr::from_ptr(dagrt_last_error()) }.to_string_lossy();
        panic!("{what} failed: {s:?}: {msg}");
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Sub,
    Next,
    Next1,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Sub => "sub",
            Kind::Next => "next",
            Kind::Next1 => "next1",
        }
    }
}

struct Engine {
    w: *mut dagrt_worker_t,
    o: *mut dagrt_orch_t,
    kind: Kind,
    lanes: usize,
    /// Tasks per nested scope (0: every task in the run's outer scope).
    scope: usize,
    /// Submits since the current nested scope began.
    in_scope: std::cell::Cell<usize>,
}

impl Engine {
    fn new(kind: Kind, lanes: usize, window: u32, scope: usize) -> Engine {
        let cfg = WorkerConfig {
            // No task auto-allocates: keep the (lazy) heap rings small.
            heap_ring_size: 16 << 20,
            task_window: window,
            timeout_ms: 60_000,
        };
        let mut w = std::ptr::null_mut();
        check(dagrt_worker_new(&cfg, &mut w), "dagrt_worker_new");
        match kind {
            Kind::Sub => check(dagrt_worker_add_sub_lanes(w, lanes as u32), "add_sub_lanes"),
            Kind::Next | Kind::Next1 => {
                for id in 0..lanes as i32 {
                    check(
                        dagrt_worker_add_next_level_lane(w, id),
                        "add_next_level_lane",
                    );
                }
            }
        }
        check(dagrt_worker_init(w), "dagrt_worker_init");
        let mut o = std::ptr::null_mut();
        check(dagrt_worker_orch(w, &mut o), "dagrt_worker_orch");
        Engine {
            w,
            o,
            kind,
            lanes,
            scope,
            in_scope: std::cell::Cell::new(0),
        }
    }

    /// Submit one task; `i` picks the NEXT_LEVEL target (round-robin) for kind `next`.
    #[inline]
    fn submit(&self, c: &Callable, tensors: &mut [Tensor], i: usize) {
        let args = TaskArgs::of_tensors(tensors);
        let s = match self.kind {
            Kind::Sub => dagrt_submit_sub(self.o, c, &args, std::ptr::null_mut()),
            Kind::Next => dagrt_submit_next_level(
                self.o,
                c,
                &args,
                std::ptr::null(),
                (i % self.lanes) as i32,
                std::ptr::null_mut(),
            ),
            Kind::Next1 => {
                dagrt_submit_next_level(self.o, c, &args, std::ptr::null(), 0, std::ptr::null_mut())
            }
        };
        if s != Status::Ok {
            check(s, "submit");
        }
        if self.scope > 0 {
            let k = self.in_scope.get() + 1;
            if k == self.scope {
                check(dagrt_scope_end(self.o), "dagrt_scope_end");
                check(dagrt_scope_begin(self.o), "dagrt_scope_begin");
            }
            self.in_scope.set(k % self.scope);
        }
    }

    /// Time one run: begin, `build` (all submissions), close, wait.
    fn timed_run(&self, build: impl FnOnce(&Engine)) -> Sample {
        let mut run = 0;
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        let before = thread_cpu::snapshot(me);
        let t0 = Instant::now();
        check(dagrt_begin_run(self.o, &mut run), "dagrt_begin_run");
        if self.scope > 0 {
            self.in_scope.set(0);
            check(dagrt_scope_begin(self.o), "dagrt_scope_begin");
        }
        build(self);
        if self.scope > 0 {
            check(dagrt_scope_end(self.o), "dagrt_scope_end");
        }
        check(
            dagrt_close_run_submission(self.o, run),
            "dagrt_close_run_submission",
        );
        let submit = t0.elapsed().as_nanos() as u64;
        check(dagrt_wait_run(self.w, run), "dagrt_wait_run");
        let total = t0.elapsed().as_nanos() as u64;
        let cpu = match (before, thread_cpu::snapshot(me)) {
            (Some(a), Some(b)) => thread_cpu::between(&a, &b),
            _ => Default::default(),
        };
        check(dagrt_release_run(self.w, run), "dagrt_release_run");
        Sample {
            total,
            submit,
            extra: 0,
            cpu,
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        dagrt_worker_free(self.w);
    }
}

// ---------------------------------------------------------------------------------------------
// Workloads. Each returns (task count, per-rep samples), warm-up excluded.

/// One timed repetition, in ns.
struct Sample {
    /// First submission to run completion: the reported figure.
    total: u64,
    /// First submission to the return of `dagrt_close_run_submission` (diagnostic: how much
    /// of `total` the submitting thread needed to hand everything over).
    submit: u64,
    /// Workload-specific diagnostic (W3: the reducer's submit call alone).
    extra: u64,
    /// CPU time and run-queue wait by thread role, from just before the run to its end
    /// (empty without the kernel's accounting).
    cpu: std::collections::BTreeMap<String, thread_cpu::Use>,
}

struct Opts {
    reps: usize,
    window: u32,
    n: Option<usize>,
    layers: Option<usize>,
    scope: usize,
}

fn reps(o: &Opts, mut one: impl FnMut() -> Sample) -> Vec<Sample> {
    one(); // warm-up
    (0..o.reps).map(|_| one()).collect()
}

fn w1(e: &Engine, c: &Callables, o: &Opts) -> (usize, Vec<Sample>) {
    let n = o.n.unwrap_or(W1_N);
    let b = Bufs::new(n);
    let s = reps(o, || {
        b.zero();
        let ns = e.timed_run(|e| {
            for i in 0..n {
                let mut t = [tensor(b.at(i), TAG_OUTPUT)];
                e.submit(&c.set, &mut t, i);
            }
        });
        let bad = (0..n).filter(|&i| b.byte(i) != 1).count();
        assert!(bad == 0, "W1: {bad} tasks did not run");
        ns
    });
    (n, s)
}

fn w2(e: &Engine, c: &Callables, o: &Opts) -> (usize, Vec<Sample>) {
    let n = o.n.unwrap_or(W2_N);
    let b = Bufs::new(1);
    let s = reps(o, || {
        b.zero();
        let ns = e.timed_run(|e| {
            for i in 0..n {
                let mut t = [tensor(b.at(0), TAG_INOUT)];
                e.submit(&c.inc, &mut t, i);
            }
        });
        assert_eq!(b.byte(0), n as u8, "W2: chain result wrong");
        ns
    });
    (n, s)
}

fn w3(e: &Engine, c: &Callables, o: &Opts) -> (usize, Vec<Sample>) {
    let n = o.n.unwrap_or(W3_N);
    // [0] = X, [1..=n] = c[i], [n+1] = reducer output.
    let b = Bufs::new(n + 2);
    let mut red: Vec<Tensor> = Vec::with_capacity(n + 1);
    let s = reps(o, || {
        b.zero();
        let mut reducer = 0;
        let mut ns = e.timed_run(|e| {
            let mut t = [tensor(b.at(0), TAG_OUTPUT)];
            e.submit(&c.set, &mut t, 0);
            for i in 0..n {
                let mut t = [tensor(b.at(0), TAG_INPUT), tensor(b.at(1 + i), TAG_OUTPUT)];
                e.submit(&c.copy, &mut t, 1 + i);
            }
            // One reducer task with n INPUT tensors (c[n-1] first: it is what the body
            // copies) and its OUTPUT last.
            red.clear();
            red.push(tensor(b.at(n), TAG_INPUT));
            for i in 0..n - 1 {
                red.push(tensor(b.at(1 + i), TAG_INPUT));
            }
            red.push(tensor(b.at(n + 1), TAG_OUTPUT));
            let t = Instant::now();
            e.submit(&c.copy, &mut red, n + 1);
            reducer = t.elapsed().as_nanos() as u64;
        });
        let bad = (1..=n).filter(|&i| b.byte(i) != 1).count();
        assert!(
            bad == 0,
            "W3: {bad} consumers ran before the producer or not at all"
        );
        assert_eq!(b.byte(n + 1), 1, "W3: reducer ran before the last consumer");
        ns.extra = reducer;
        ns
    });
    (n + 2, s)
}

fn w4(e: &Engine, c: &Callables, o: &Opts) -> (usize, Vec<Sample>) {
    let layers = o.layers.unwrap_or(W4_L);
    let b = Bufs::new(W4_W * layers);
    W4_BASE.store(b.p as usize, Ordering::Relaxed);
    W4_VIOLATIONS.store(0, Ordering::Relaxed);
    let s = reps(o, || {
        b.zero();
        let ns = e.timed_run(|e| {
            for i in 0..W4_W {
                let mut t = [tensor(b.at(i), TAG_OUTPUT)];
                e.submit(&c.stencil, &mut t, i);
            }
            for l in 1..layers {
                let prev = (l - 1) * W4_W;
                for i in 0..W4_W {
                    let lo = i.saturating_sub(1);
                    let hi = (i + 1).min(W4_W - 1);
                    let mut t = [
                        tensor(b.at(prev + lo), TAG_INPUT),
                        tensor(b.at(prev + i), TAG_INPUT),
                        tensor(b.at(prev + hi), TAG_INPUT),
                        tensor(b.at(l * W4_W + i), TAG_OUTPUT),
                    ];
                    e.submit(&c.stencil, &mut t, l * W4_W + i);
                }
            }
        });
        let v = W4_VIOLATIONS.load(Ordering::Relaxed);
        assert!(v == 0, "W4: {v} dependency violations");
        let last = w4_tag(layers - 1);
        let bad = (0..W4_W)
            .filter(|&i| b.byte((layers - 1) * W4_W + i) != last)
            .count();
        assert!(bad == 0, "W4: {bad} last-layer tasks did not run");
        ns
    });
    (W4_W * layers, s)
}

// ---------------------------------------------------------------------------------------------

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.trim().to_string())
        .collect()
}

fn main() {
    common::exit_on_help(include_str!("workloads.rs"));
    let mut workloads = list("W1,W2,W3,W4");
    let mut lanes: Vec<usize> = vec![1, 2];
    let mut kinds = vec![Kind::Sub, Kind::Next, Kind::Next1];
    let mut o = Opts {
        reps: 5,
        window: 1 << 17,
        n: None,
        layers: None,
        scope: 0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| {
            args.next()
                .unwrap_or_else(|| panic!("{name} needs a value"))
        };
        match a.as_str() {
            "--bench" => {} // passed by `cargo bench`
            "--workloads" => workloads = list(&val("--workloads").to_uppercase()),
            "--lanes" => {
                lanes = list(&val("--lanes"))
                    .iter()
                    .map(|s| s.parse().expect("--lanes: integers"))
                    .collect()
            }
            "--kinds" => {
                kinds = list(&val("--kinds"))
                    .iter()
                    .map(|s| match s.as_str() {
                        "sub" => Kind::Sub,
                        "next" => Kind::Next,
                        "next1" => Kind::Next1,
                        x => panic!("--kinds: unknown kind {x} (sub, next, next1)"),
                    })
                    .collect()
            }
            "--reps" => o.reps = val("--reps").parse().expect("--reps: integer"),
            "--window" => o.window = val("--window").parse().expect("--window: integer"),
            "--n" => o.n = Some(val("--n").parse().expect("--n: integer")),
            "--layers" => o.layers = Some(val("--layers").parse().expect("--layers: integer")),
            "--scope" => o.scope = val("--scope").parse().expect("--scope: integer"),
            x => panic!("unknown argument {x}"),
        }
    }
    assert!(o.reps >= 1, "--reps must be at least 1");

    check_tensor_layout();
    let c = Callables {
        set: register(c"bench.set", exec_set),
        inc: register(c"bench.inc", exec_inc),
        copy: register(c"bench.copy", exec_copy),
        stencil: register(c"bench.stencil", exec_stencil),
    };

    for w in &workloads {
        for &nl in &lanes {
            for &k in &kinds {
                // `next1` (everything on lane 0) only means something for the chain on >1 lanes.
                if k == Kind::Next1 && (w != "W2" || nl < 2) {
                    continue;
                }
                let e = Engine::new(k, nl, o.window, o.scope);
                eprintln!("dagrt bench: {w} lanes={nl} kind={} ...", k.name());
                let (tasks, samples) = match w.as_str() {
                    "W1" => w1(&e, &c, &o),
                    "W2" => w2(&e, &c, &o),
                    "W3" => w3(&e, &c, &o),
                    "W4" => w4(&e, &c, &o),
                    x => panic!("unknown workload {x}"),
                };
                drop(e);
                let sorted = |f: fn(&Sample) -> u64| {
                    let mut v: Vec<u64> = samples.iter().map(f).collect();
                    v.sort_unstable();
                    v
                };
                let total = sorted(|x| x.total);
                let submit = sorted(|x| x.submit);
                let per = |ns: u64| ns as f64 / tasks as f64;
                let med = |v: &[u64]| v[v.len() / 2];
                let extra = if w == "W3" {
                    format!(
                        ",\"reducer_submit_ns_median\":{}",
                        med(&sorted(|x| x.extra))
                    )
                } else {
                    String::new()
                };
                let mut cpu = Default::default();
                for x in &samples {
                    thread_cpu::add(&mut cpu, &x.cpu);
                }
                let cpu = thread_cpu::json_fields(&cpu, (tasks * samples.len()) as f64);
                println!(
                    "{{\"workload\":\"{w}\",\"lanes\":{nl},\"lane_kind\":\"{}\",\"threads\":{},\"tasks\":{tasks},\"ns_per_task_median\":{:.1},\"ns_per_task_min\":{:.1},\"ns_per_task_max\":{:.1},\"reps\":{},\"window\":{},\"submit_ns_per_task_median\":{:.1}{extra}{cpu},\"samples_ns\":{:?}}}",
                    k.name(),
                    nl + 2,
                    per(med(&total)),
                    per(total[0]),
                    per(total[total.len() - 1]),
                    total.len(),
                    o.window,
                    per(med(&submit)),
                    samples.iter().map(|x| x.total).collect::<Vec<_>>()
                );
            }
        }
    }
}
