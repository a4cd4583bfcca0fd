//! Fault injection: failing tasks, failing orchestration, and submits that fail part-way.
//!
//! 1. `random_failing_dags`: thousands of random graphs (the generator and byte-level
//!    reference model of `random_dags.rs`: random views over static matrices and flat
//!    buffers, `alloc()` buffers and auto-allocated OUTPUTs, all five tags, `add_dep` and
//!    `add_dep_wait`, NEXT_LEVEL and SUB singles and groups, nested scopes) in which random
//!    nodes fail: the executor of one random member returns a non-zero code, or calls
//!    `dagrt_task_fail` with a message naming the node (and then returns 0 or non-zero).
//!    Half the runs go through the Rust API, half through the C ABI. Per run:
//!    - MUST: every descendant of a failing node through required edges (the last writer of
//!      every byte an INPUT/INOUT view touches, plus explicit deps of both kinds) never ran;
//!    - every node that is not a descendant of a failing node even through the superset
//!      model MAY (every earlier writer whose byte interval meets the view's, dropped only by
//!      a later dense write covering it: a bound on what a conservative TensorMap can wire)
//!      ran exactly once. Nodes poisoned between MUST and MAY are counted and reported as
//!      "extra poisoning" (a hard failure with DAGRT_FAULT_STRICT=1, see the directed tests
//!      below for why they exist);
//!    - in gated runs (no executor finishes before the graph is complete) the engine's actual
//!      wiring is read from the producers' consumer lists: it must contain every required
//!      edge and lie inside MAY, and the poisoned set must be exactly the closure of the
//!      failing nodes over that wiring;
//!    - the run reports TASK_FAILED with the first failure: failing executors take a ticket
//!      in order and every ticket but the first waits until the run has recorded a failure,
//!      so the first recorded failure is exactly the ticket-0 node's (checked by its
//!      message / return code); every failing node that ran took exactly one ticket;
//!    - run counts: completed = nodes that ran and did not fail, failed = failing nodes that
//!      ran + every node that never ran, cancelled = 0; a node that ran saw every required
//!      producer end before it started;
//!    - afterwards no slot is live, every heap ring's tail equals its top, the TensorMap is
//!      empty and no run is registered after release;
//!    - Rust-API runs also wait until a failed node whose scope has ended is consumed and
//!      then submit a consumer naming it by handle (`add_dep` / `add_dep_wait`) or reading
//!      its output through the TensorMap: the consumer must be FAILED right after its submit;
//!    - gated runs try hostile submits (a bad tensor in the last member of a group, a bad dep
//!      after valid tensors, unknown or duplicate targets, oversized SUB groups, unknown
//!      callables, null arrays, OUTPUTs that can never fit) and check the status, that no
//!      auto-allocated address was written back, and that worker and run stats are
//!      unchanged by the failed call.
//! 2. `orchestration_failure_cancels_unstarted`: random graphs whose orchestration fails at a
//!    random op: a `dagrt_worker_submit` callback returning non-zero (sometimes right after a
//!    failing dagrt call, whose message the run must carry), `dagrt_fail_run_submission`, or
//!    `Orchestrator::fail_run_submission`. The run ends ORCHESTRATION_FAILED with that
//!    message; running tasks finish and count as completed, no node runs after a cancelled
//!    producer, completed + failed + cancelled = submitted tasks (exactly: cancelled = tasks
//!    that never ran when no task fails); in "all-hold" runs nothing can finish before the
//!    failure, so at most one task per lane ran and only tasks without task producers. Then
//!    a successful random run on the same worker is checked completely.
//! 3. `heap_exhaustion_leaves_nothing_and_recovers`, `window_full_leaves_nothing_and_recovers`,
//!    `late_invalid_arguments_leave_nothing`: submits and allocs that fail after waiting for
//!    a full heap ring or a full task window, or on a bad argument found late, leave worker
//!    and run stats exactly as they were (slots, heap bytes, TensorMap entries, the run's
//!    fence), other rings stay usable, and the caller recovers: either by letting the
//!    blocking tasks drain and submitting again in the same run, or by closing the run and
//!    starting another.
//! 4. Directed checks: a consumer of a failed producer that was already consumed (nested
//!    scope ended) is poisoned through a handle dep and through the TensorMap
//!    (`consumer_of_consumed_failed_producer_is_poisoned`); a stress of the same with the
//!    consumer submitted right as the producer is consumed
//!    (`consumer_racing_consumption_of_failed_producer_is_poisoned`); a cancelled READY task
//!    leaves no queue entry that dispatches another task reusing its slot
//!    (`cancelled_ready_task_leaves_no_queue_entry_behind`) and cancelled group entries do
//!    not hold back later runs (`cancelled_group_entries_do_not_block_later_runs`); and
//!    three cases where a failed writer must NOT poison a task that does not read its data
//!    (`failed_writer_overwritten_does_not_poison_readers_of_new_data`,
//!    `failed_writer_does_not_poison_disjoint_interleaved_reader`,
//!    `failed_writer_on_reclaimed_heap_does_not_poison_new_buffer`).
//!
//! Environment: DAGRT_FAULT_RUNS (runs of the main test; the others scale from it),
//! DAGRT_FAULT_SEED (base seed, decimal or 0x-hex), DAGRT_FAULT_ONLY (replay one run seed
//! printed by a failure), DAGRT_FAULT_STRICT=1 (extra poisoning is a failure).

use dagrt::callable::Callable;
use dagrt::capi;
use dagrt::capi::run::RunStats;
use dagrt::capi::worker::{dagrt_orch_t, dagrt_worker_t, WorkerStats};
use dagrt::error::Status;
use dagrt::orchestrator::{Orchestrator, SubmitKind};
use dagrt::run::{FailureKind, Run};
use dagrt::slot::{state_name, FAILED, FREE};
use dagrt::task::{
    dtype_size, CallConfig, DataType, Dep, DepKind, Tag, TaskArgs, TaskHandle, TaskView, Tensor,
    MAX_TENSOR_DIMS,
};
use dagrt::worker::{Engine, Worker, WorkerConfig};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{c_void, CStr, CString};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

mod common;
use common::*;

// ---------------------------------------------------------------------------------------
// Configuration

const DEFAULT_SEED: u64 = 0xFA17_0000_5EED_0001;
/// Nodes per run at most.
const MAX_NODES: usize = 96;
const NSCALARS: usize = 6;

fn fault_runs() -> u64 {
    env_u64("DAGRT_FAULT_RUNS").unwrap_or(DEFAULT_RUNS)
}

fn base_seed() -> u64 {
    env_u64("DAGRT_FAULT_SEED").unwrap_or(DEFAULT_SEED)
}

fn replaying() -> bool {
    env_u64("DAGRT_FAULT_ONLY").is_some()
}

fn strict() -> bool {
    env_u64("DAGRT_FAULT_STRICT").is_some_and(|v| v != 0)
}

/// The run seeds a test executes: `n` seeds derived from the base seed, or only the replayed one.
fn run_seeds(salt: u64, n: u64) -> Vec<u64> {
    if let Some(s) = env_u64("DAGRT_FAULT_ONLY") {
        return vec![s];
    }
    let base = base_seed() ^ salt.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    (0..n)
        .map(|i| Rng(base ^ i.wrapping_mul(0xA24B_AED4_963E_E407)).next())
        .collect()
}

// ---------------------------------------------------------------------------------------
// The executor and what it records

/// Failure modes of a member (scalar 4).
const FAIL_NONE: u64 = 0;
/// Return a non-zero code (`fault_rc`).
const FAIL_RC: u64 = 1;
/// `dagrt_task_fail(fault_msg)`, then return 0.
const FAIL_MSG: u64 = 2;
/// `dagrt_task_fail(fault_msg)`, then return the code.
const FAIL_MSG_RC: u64 = 3;

/// The code a failing member returns: negative and large, so it cannot be confused with a
/// slot or run id in a message.
fn fault_rc(node: usize, m: usize) -> i32 {
    -(0x2000_0000 + (node * MAXM + m) as i32)
}

fn fault_msg(run: u64, node: usize, m: usize) -> String {
    format!("<injected fault in n{node} member {m} of run {run}>")
}

/// Does `msg` contain the integer `n` as a whole token?
fn contains_int(msg: &str, n: i64) -> bool {
    let pat = n.to_string();
    let b = msg.as_bytes();
    let mut from = 0;
    while let Some(i) = msg[from..].find(&pat) {
        let s = from + i;
        let e = s + pat.len();
        let before_ok = s == 0 || !(b[s - 1].is_ascii_digit() || (n >= 0 && b[s - 1] == b'-'));
        let after_ok = e == b.len() || !b[e].is_ascii_digit();
        if before_ok && after_ok {
            return true;
        }
        from = s + 1;
    }
    false
}

/// Does the run's failure message name this failing member?
fn names_failure(msg: &str, run: u64, node: usize, m: usize, mode: u64) -> bool {
    if mode == FAIL_RC {
        contains_int(msg, fault_rc(node, m) as i64)
    } else {
        msg.contains(&fault_msg(run, node, m))
    }
}

struct MemberRec {
    start: AtomicU64,
    end: AtomicU64,
    count: AtomicU32,
    /// Failure ticket taken by a failing member (u32::MAX: none).
    ticket: AtomicU32,
    worker: AtomicI32,
    slot: AtomicU64,
}

impl Default for MemberRec {
    fn default() -> Self {
        MemberRec {
            start: AtomicU64::new(0),
            end: AtomicU64::new(0),
            count: AtomicU32::new(0),
            ticket: AtomicU32::new(u32::MAX),
            worker: AtomicI32::new(i32::MIN),
            slot: AtomicU64::new(0),
        }
    }
}

/// How an executor learns that its run has recorded a failure.
enum Probe {
    Rust(Arc<Run>),
    /// (dagrt_worker_t address, run id)
    C(usize, u64),
}

impl Probe {
    fn failure_recorded(&self) -> bool {
        match self {
            Probe::Rust(r) => r.result().is_err(),
            Probe::C(w, run) => {
                let mut s = RunStats::default();
                capi::run::dagrt_run_stats(*w as *const dagrt_worker_t, *run, &mut s) == Status::Ok
                    && s.failed > 0
            }
        }
    }
}

/// Per-run record, addressed by the executor through scalar 0.
struct RunRec {
    /// Executors wait here (after recording their start) until the run's graph is complete.
    gate_open: AtomicBool,
    /// Members with the hold flag (scalar 5) wait here after the gate.
    hold_open: AtomicBool,
    /// Sequence failures: every ticket but the first waits for a recorded failure.
    sequence: bool,
    probe: OnceLock<Probe>,
    tickets: AtomicU32,
    recs: Vec<MemberRec>,
    errors: Mutex<Vec<String>>,
}

impl RunRec {
    fn new(gated: bool, sequence: bool) -> RunRec {
        RunRec::sized(gated, sequence, MAX_NODES)
    }
    fn sized(gated: bool, sequence: bool, nodes: usize) -> RunRec {
        RunRec {
            gate_open: AtomicBool::new(!gated),
            hold_open: AtomicBool::new(false),
            sequence,
            probe: OnceLock::new(),
            tickets: AtomicU32::new(0),
            recs: (0..nodes * MAXM).map(|_| MemberRec::default()).collect(),
            errors: Mutex::new(Vec::new()),
        }
    }
    fn error(&self, msg: String) {
        self.errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(msg);
    }
    fn rec(&self, node: usize, m: usize) -> &MemberRec {
        &self.recs[node * MAXM + m]
    }
    fn open_all(&self) {
        self.gate_open.store(true, Ordering::Release);
        self.hold_open.store(true, Ordering::Release);
    }
}

fn spin(n: u64) {
    match n {
        0 => {}
        SPIN_YIELD => std::thread::yield_now(),
        n => {
            for _ in 0..n {
                std::hint::spin_loop();
            }
        }
    }
}

/// The task executor: scalars are [RunRec address, node, member, spin, failure mode, hold].
unsafe extern "C" fn exec(task: *const TaskView, _user: *mut c_void) -> i32 {
    let start = SEQ.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the lane passes a view that is valid for the duration of this call.
    let v = unsafe { &*task };
    if v.num_scalars as usize != NSCALARS || v.scalars.is_null() {
        return 77;
    }
    // SAFETY: the view carries `num_scalars` scalars, valid during the call.
    let sc = unsafe { std::slice::from_raw_parts(v.scalars, NSCALARS) };
    // SAFETY: scalar 0 is the address of this run's RunRec, which the test frees only after
    // the run's fence reached zero (every executor of the run has returned), and leaks when a
    // run fails or hangs.
    let rr = unsafe { &*(sc[0] as *const RunRec) };
    let (node, m) = (sc[1] as usize, sc[2] as usize);
    if node * MAXM + m >= rr.recs.len() || m >= MAXM {
        return 78;
    }
    let r = rr.rec(node, m);
    r.start.store(start, Ordering::SeqCst);
    r.count.fetch_add(1, Ordering::SeqCst);
    r.worker.store(v.worker_id, Ordering::Relaxed);
    r.slot.store(v.slot, Ordering::Relaxed);
    while !rr.gate_open.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    if sc[5] != 0 {
        while !rr.hold_open.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
    }
    spin(sc[3]);
    let mode = sc[4];
    let rc = if mode == FAIL_NONE {
        0
    } else {
        let t = rr.tickets.fetch_add(1, Ordering::SeqCst);
        r.ticket.store(t, Ordering::SeqCst);
        if t > 0 && rr.sequence {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if rr.probe.get().is_some_and(|p| p.failure_recorded()) {
                    break;
                }
                if Instant::now() > deadline {
                    rr.error(format!(
                        "n{node} member {m} (failure ticket {t}) waited 20 s for the run to record its first failure"
                    ));
                    break;
                }
                std::thread::yield_now();
            }
        }
        let rc = fault_rc(node, m);
        if mode == FAIL_RC {
            rc
        } else {
            let msg = CString::new(fault_msg(v.run_id, node, m)).expect("no NUL");
            let st = capi::callable::dagrt_task_fail(task, msg.as_ptr());
            if st != Status::Ok {
                rr.error(format!(
                    "n{node} member {m}: dagrt_task_fail returned {st:?}"
                ));
            }
            match mode {
                FAIL_MSG => 0,
                FAIL_MSG_RC => rc,
                _ => 79,
            }
        }
    };
    r.end
        .store(SEQ.fetch_add(1, Ordering::SeqCst), Ordering::SeqCst);
    rc
}

fn callable() -> Callable {
    static C: OnceLock<Callable> = OnceLock::new();
    *C.get_or_init(|| {
        dagrt::callable::register(
            "tests.fault_injection.exec",
            7,
            0,
            exec,
            std::ptr::null_mut(),
        )
        .expect("register the test executor")
    })
}

/// The calling thread's last dagrt error.
fn last_error() -> String {
    // SAFETY: dagrt_last_error returns a NUL-terminated string owned by this thread, valid
    // until the next failing dagrt call on it; it is copied at once.
    unsafe { CStr::from_ptr(capi::dagrt_last_error()) }
        .to_string_lossy()
        .into_owned()
}

// ---------------------------------------------------------------------------------------
// Workers: the same checks through the Rust API or the C ABI

fn cfg(heap: u64, window: u32, timeout_ms: u32) -> WorkerConfig {
    WorkerConfig {
        heap_ring_size: heap,
        task_window: window,
        timeout_ms,
    }
}

struct Env {
    name: &'static str,
    lanes: Lanes,
    rust: Option<(Worker, Arc<Engine>)>,
    cw: *mut dagrt_worker_t,
    corch: *mut dagrt_orch_t,
    /// Static buffers: three 8x8 column-major u64 matrices and three 16 x u64 flat buffers.
    statics: Vec<Vec<u64>>,
}

type ApiErr = (Status, String);

fn c_res(st: Status) -> Result<(), ApiErr> {
    if st == Status::Ok {
        Ok(())
    } else {
        Err((st, last_error()))
    }
}

fn rs_err(e: dagrt::error::Error) -> ApiErr {
    (e.status, e.msg)
}

impl Env {
    fn new_rust(name: &'static str, lanes: Lanes, cfg: WorkerConfig) -> Env {
        let mut worker = Worker::new(cfg).expect("Worker::new");
        for &id in &lanes.nl {
            worker.add_next_level_lane(id).expect("add_next_level_lane");
        }
        worker.add_sub_lanes(lanes.subs).expect("add_sub_lanes");
        worker.init().expect("init");
        let engine = worker.engine().expect("engine").clone();
        Env {
            name,
            lanes,
            rust: Some((worker, engine)),
            cw: std::ptr::null_mut(),
            corch: std::ptr::null_mut(),
            statics: static_storage(),
        }
    }

    fn new_c(name: &'static str, lanes: Lanes, cfg: WorkerConfig) -> Env {
        let mut w = std::ptr::null_mut();
        assert_eq!(capi::worker::dagrt_worker_new(&cfg, &mut w), Status::Ok);
        for &id in &lanes.nl {
            assert_eq!(
                capi::worker::dagrt_worker_add_next_level_lane(w, id),
                Status::Ok
            );
        }
        assert_eq!(
            capi::worker::dagrt_worker_add_sub_lanes(w, lanes.subs),
            Status::Ok
        );
        assert_eq!(capi::worker::dagrt_worker_init(w), Status::Ok);
        let mut o = std::ptr::null_mut();
        assert_eq!(capi::worker::dagrt_worker_orch(w, &mut o), Status::Ok);
        Env {
            name,
            lanes,
            rust: None,
            cw: w,
            corch: o,
            statics: static_storage(),
        }
    }

    fn backend(&self) -> &'static str {
        if self.rust.is_some() {
            "Rust API"
        } else {
            "C ABI"
        }
    }

    fn engine(&self) -> Option<&Arc<Engine>> {
        self.rust.as_ref().map(|r| &r.1)
    }

    fn orch(&self) -> Orch<'_> {
        match &self.rust {
            Some((w, _)) => Orch::Rust(
                w.orchestrator()
                    .expect("orchestrator")
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()),
            ),
            None => Orch::C(self.corch),
        }
    }

    fn probe(&self, run: u64) -> Probe {
        match self.engine() {
            Some(e) => Probe::Rust(e.runs.get(run).expect("run registered")),
            None => Probe::C(self.cw as usize, run),
        }
    }

    fn stats(&self) -> WorkerStats {
        match self.engine() {
            Some(e) => {
                let mut s = WorkerStats {
                    live_slots: e.slots.live(),
                    tensormap_entries: e.tensormap.len() as u64,
                    runs: e.runs.len() as u64,
                    ready_queued: dagrt::scheduler::queued(e) as u64,
                    ..Default::default()
                };
                for (i, r) in e.heap.rings.iter().enumerate() {
                    s.heap_top[i] = r.top();
                    s.heap_tail[i] = r.tail();
                }
                s
            }
            None => {
                let mut s = WorkerStats::default();
                assert_eq!(
                    capi::worker::dagrt_worker_stats(self.cw, &mut s),
                    Status::Ok
                );
                s
            }
        }
    }

    fn run_stats(&self, run: u64) -> Option<RunStats> {
        match self.engine() {
            Some(e) => {
                let r = e.runs.get(run)?;
                let c = r.counts();
                Some(RunStats {
                    completed: c.completed,
                    failed: c.failed,
                    cancelled: c.cancelled,
                    live_slots: r.live_slots(),
                    done: r.done() as u32,
                    reserved: 0,
                })
            }
            None => {
                let mut s = RunStats::default();
                (capi::run::dagrt_run_stats(self.cw, run, &mut s) == Status::Ok).then_some(s)
            }
        }
    }

    /// Wait for the run: its terminal (status, message), Err on a hang (or, through the C
    /// ABI, when the blocking wait and the bounded wait disagree).
    fn wait(&self, run: u64, timeout: Duration) -> Result<(Status, String), String> {
        match self.engine() {
            Some(e) => {
                let r = e
                    .runs
                    .get(run)
                    .ok_or_else(|| format!("run {run} is not registered"))?;
                if !r.wait(Some(timeout)) {
                    return Err(format!("HANG: run {run} did not finish within {timeout:?}"));
                }
                Ok(match r.result() {
                    Ok(()) => (Status::Ok, String::new()),
                    Err((m, FailureKind::Task)) => (Status::TaskFailed, m.to_string()),
                    Err((m, FailureKind::Orchestration)) => {
                        (Status::OrchestrationFailed, m.to_string())
                    }
                })
            }
            None => {
                let mut done = 0u32;
                let st = capi::run::dagrt_wait_run_for(
                    self.cw,
                    run,
                    timeout.as_millis() as u64,
                    &mut done,
                );
                if st == Status::Ok && done == 0 {
                    return Err(format!("HANG: run {run} did not finish within {timeout:?}"));
                }
                let msg = if st == Status::Ok {
                    String::new()
                } else {
                    last_error()
                };
                if done != 1 {
                    return Err(format!(
                        "dagrt_wait_run_for returned {st:?} ({msg}) with out_done = {done}"
                    ));
                }
                let st2 = capi::run::dagrt_wait_run(self.cw, run);
                let msg2 = if st2 == Status::Ok {
                    String::new()
                } else {
                    last_error()
                };
                if (st2, &msg2) != (st, &msg) {
                    return Err(format!(
                        "dagrt_wait_run gave {st2:?} '{msg2}' after dagrt_wait_run_for gave {st:?} '{msg}'"
                    ));
                }
                Ok((st, msg))
            }
        }
    }

    fn release(&self, run: u64) -> Result<(), String> {
        match self.engine() {
            Some(e) => {
                let r = e.runs.get(run).ok_or("run vanished before release")?;
                if !r.done() {
                    return Err(format!("run {run} is not done at release"));
                }
                e.runs.remove_done(run);
                Ok(())
            }
            None => c_res(capi::run::dagrt_release_run(self.cw, run))
                .map_err(|(s, m)| format!("dagrt_release_run: {s:?} {m}")),
        }
    }

    /// After every run of this worker finished and was released: nothing may be left behind.
    fn check_reclaimed(&self) -> Result<(), String> {
        let s = self.stats();
        let mut errs = Vec::new();
        if s.live_slots != 0 {
            errs.push(format!("{} slots still live", s.live_slots));
        }
        if s.tensormap_entries != 0 {
            errs.push(format!("{} TensorMap entries left", s.tensormap_entries));
        }
        for i in 0..4 {
            if s.heap_top[i] != s.heap_tail[i] {
                errs.push(format!(
                    "heap ring {i}: tail {} != top {}",
                    s.heap_tail[i], s.heap_top[i]
                ));
            }
        }
        if s.ready_queued != 0 {
            errs.push(format!("{} slots still in ready queues", s.ready_queued));
        }
        if s.runs != 0 {
            errs.push(format!("{} runs still registered after release", s.runs));
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "worker {} ({}): not reclaimed after its runs finished: {}",
                self.name,
                self.backend(),
                errs.join("; ")
            ))
        }
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if !self.cw.is_null() {
            capi::worker::dagrt_worker_free(self.cw);
        }
    }
}

/// The orchestrator of a run being built, through either API.
enum Orch<'a> {
    Rust(MutexGuard<'a, Orchestrator>),
    C(*mut dagrt_orch_t),
}

impl Orch<'_> {
    fn begin_run(&mut self) -> Result<u64, ApiErr> {
        match self {
            // Every run start of a quiescent Rust-API worker renumbers its tasks from 1 (the
            // queues' entries of cancelled tasks dropped, the entries' id histories forgotten).
            Orch::Rust(o) => {
                o.ids_past_renumbering();
                o.begin_run().map_err(rs_err)
            }
            Orch::C(p) => {
                let mut r = 0;
                c_res(capi::orch::dagrt_begin_run(*p, &mut r))?;
                Ok(r)
            }
        }
    }
    fn close(&mut self, run: u64) -> Result<(), ApiErr> {
        match self {
            Orch::Rust(o) => o.close_run_submission(run).map_err(rs_err),
            Orch::C(p) => c_res(capi::orch::dagrt_close_run_submission(*p, run)),
        }
    }
    fn fail(&mut self, run: u64, msg: &str) -> Result<(), ApiErr> {
        match self {
            Orch::Rust(o) => o.fail_run_submission(run, msg).map_err(rs_err),
            Orch::C(p) => {
                let m = CString::new(msg).expect("no NUL");
                c_res(capi::orch::dagrt_fail_run_submission(*p, run, m.as_ptr()))
            }
        }
    }
    fn scope_begin(&mut self) -> Result<(), ApiErr> {
        match self {
            Orch::Rust(o) => o.scope_begin().map_err(rs_err),
            Orch::C(p) => c_res(capi::orch::dagrt_scope_begin(*p)),
        }
    }
    fn scope_end(&mut self) -> Result<(), ApiErr> {
        match self {
            Orch::Rust(o) => o.scope_end().map_err(rs_err),
            Orch::C(p) => c_res(capi::orch::dagrt_scope_end(*p)),
        }
    }
    /// Single kinds take exactly one member; groups any number (the C path reads
    /// `members.len()` targets from `workers` for NEXT_LEVEL groups).
    fn submit(
        &mut self,
        kind: SubmitKind,
        callable: &Callable,
        members: &[TaskArgs],
        cfg: &CallConfig,
        workers: &[i32],
    ) -> Result<TaskHandle, ApiErr> {
        match self {
            Orch::Rust(o) => o
                .submit(kind, callable, members, cfg, workers)
                .map_err(rs_err),
            Orch::C(p) => {
                let mut h = TaskHandle { run_id: 0, slot: 0 };
                let st = match kind {
                    SubmitKind::NextLevel => {
                        assert_eq!(members.len(), 1);
                        capi::orch::dagrt_submit_next_level(
                            *p,
                            callable,
                            members.as_ptr(),
                            cfg,
                            workers[0],
                            &mut h,
                        )
                    }
                    SubmitKind::NextLevelGroup => {
                        assert_eq!(members.len(), workers.len());
                        capi::orch::dagrt_submit_next_level_group(
                            *p,
                            callable,
                            members.as_ptr(),
                            members.len() as u32,
                            cfg,
                            workers.as_ptr(),
                            &mut h,
                        )
                    }
                    SubmitKind::Sub => {
                        assert_eq!(members.len(), 1);
                        capi::orch::dagrt_submit_sub(*p, callable, members.as_ptr(), &mut h)
                    }
                    SubmitKind::SubGroup => capi::orch::dagrt_submit_sub_group(
                        *p,
                        callable,
                        members.as_ptr(),
                        members.len() as u32,
                        &mut h,
                    ),
                };
                c_res(st).map(|_| h)
            }
        }
    }
    fn alloc(&mut self, shape: &[u64], dtype: u32) -> Result<(*mut u8, TaskHandle), ApiErr> {
        match self {
            Orch::Rust(o) => o.alloc(shape, dtype).map_err(rs_err),
            Orch::C(p) => {
                let mut h = TaskHandle { run_id: 0, slot: 0 };
                let mut ptr: *mut c_void = std::ptr::null_mut();
                c_res(capi::orch::dagrt_alloc(
                    *p,
                    shape.as_ptr(),
                    shape.len() as u32,
                    dtype,
                    &mut ptr,
                    &mut h,
                ))?;
                Ok((ptr.cast(), h))
            }
        }
    }
}

/// Worker and run counters that a failed call must leave unchanged (the ready-queue length
/// is left out: the scheduler pops concurrently).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct Snap {
    live_slots: i64,
    tensormap_entries: u64,
    heap_top: [u64; 4],
    heap_tail: [u64; 4],
    run_live: i64,
    run_counts: (u64, u64, u64),
}

fn snap(env: &Env, run: u64) -> Snap {
    let s = env.stats();
    let r = env.run_stats(run).unwrap_or_default();
    Snap {
        live_slots: s.live_slots,
        tensormap_entries: s.tensormap_entries,
        heap_top: s.heap_top,
        heap_tail: s.heap_tail,
        run_live: r.live_slots,
        run_counts: (r.completed, r.failed, r.cancelled),
    }
}

// ---------------------------------------------------------------------------------------
// Views (as in random_dags.rs)

fn tagged(mut t: Tensor, tag: Tag) -> Tensor {
    t.tag = tag as u32;
    t
}

/// A view the engine treats as dense for sure (all strides zero): its write drops every
/// TensorMap entry inside its byte interval.
fn surely_dense(t: &Tensor) -> bool {
    t.strides[..t.ndim as usize].iter().all(|&s| s == 0)
}

// ---------------------------------------------------------------------------------------
// Reference model

impl Kind {
    fn members(&self) -> usize {
        match self {
            Kind::NlGroup(ids) => ids.len(),
            Kind::SubGroup(k) => *k,
            Kind::Alloc => 0,
            _ => 1,
        }
    }
    fn submit_kind(&self) -> (SubmitKind, Vec<i32>) {
        match self {
            Kind::Nl(t) => (SubmitKind::NextLevel, vec![*t]),
            Kind::NlGroup(ids) => (SubmitKind::NextLevelGroup, ids.clone()),
            Kind::Sub => (SubmitKind::Sub, vec![]),
            Kind::SubGroup(_) => (SubmitKind::SubGroup, vec![]),
            Kind::Alloc => unreachable!("alloc is not submitted"),
        }
    }
    fn is_alloc(&self) -> bool {
        matches!(self, Kind::Alloc)
    }
}

#[derive(Clone)]
struct Member {
    tensors: Vec<Tensor>,
    /// Buffer index per tensor (usize::MAX: auto-allocated OUTPUT).
    bufs: Vec<usize>,
    deps: Vec<Dep>,
    scalars: [u64; NSCALARS],
}

impl Member {
    fn args(&mut self) -> TaskArgs {
        TaskArgs {
            tensors: self.tensors.as_mut_ptr(),
            num_tensors: self.tensors.len() as u32,
            num_scalars: NSCALARS as u32,
            scalars: self.scalars.as_ptr(),
            deps: self.deps.as_ptr(),
            num_deps: self.deps.len() as u32,
            reserved: 0,
        }
    }
}

struct Node {
    kind: Kind,
    slot: u64,
    level: usize,
    frame_open: bool,
    members: Vec<Member>,
    /// Explicit deps: (node, retain).
    deps: Vec<(usize, bool)>,
    /// Required producers (byte-exact last writers and explicit deps): node -> retained.
    req: BTreeMap<usize, bool>,
    /// Producers the engine may wire (superset model MAY, explicit deps included).
    may: BTreeSet<usize>,
    /// (failing member, failure mode).
    fail: Option<(usize, u64)>,
    /// Some required producer fails or must fail: this node must never run.
    must: bool,
    hold: bool,
    alloc: Option<(Vec<u64>, u32)>,
    note: Option<String>,
}

/// An entry of the superset model: a write's byte interval [lo, hi) by `node`.
struct UEntry {
    node: usize,
    lo: u64,
    hi: u64,
}

#[derive(Clone, Copy, Default)]
struct Opts {
    /// Percentage of task nodes with a failing member.
    fail_pct: u64,
    /// Executors wait until the graph is complete.
    gated: bool,
    /// Wait for failed nodes of ended scopes to be consumed, then consume them (Rust API).
    consumed_ops: bool,
    /// Percentage of task submits preceded by a hostile submit.
    hostile_pct: u64,
    /// Try every applicable corruption at one random op.
    hostile_sweep: bool,
    /// Every task holds until the test opens `hold_open`.
    hold_all: bool,
    /// Percentage of tasks that hold.
    hold_pct: u64,
}

/// A consumer the next task node must be: of node `producer`, which has failed and been
/// consumed, by handle (`Some(retain)`) and/or by reading a byte it last wrote.
struct Force {
    producer: usize,
    dep: Option<bool>,
    read: Option<(usize, u64)>,
}

#[derive(Default)]
struct Totals {
    runs: u64,
    gated: u64,
    c_runs: u64,
    nodes: u64,
    tasks: u64,
    groups: u64,
    allocs: u64,
    autos: u64,
    failing: u64,
    failing_ran: u64,
    poisoned_must: u64,
    poisoned_extra: u64,
    first_exact: u64,
    first_rc: u64,
    first_msg: u64,
    wiring_edges: u64,
    exact_poison_checks: u64,
    consumed_ops: u64,
    consumed_dep: u64,
    consumed_read: u64,
    consumed_timeouts: u64,
    hostile: u64,
    hostile_snap: u64,
    hostile_kinds: BTreeSet<String>,
    max_depth: usize,
    cancelled_runs: u64,
    cancelled_tasks: u64,
    cancel_running: u64,
    cancel_via: BTreeMap<&'static str, u64>,
    follow_ups: u64,
}

static LAST_RELEASED: AtomicU64 = AtomicU64::new(0);

struct Builder<'a> {
    rng: Rng,
    env: &'a Env,
    o: Orch<'a>,
    opts: Opts,
    run_id: u64,
    bufs: Vec<Buf>,
    nodes: Vec<Node>,
    frames: Vec<Vec<usize>>,
    ops: Vec<Op>,
    last_slot: Option<u64>,
    rr: &'a RunRec,
    scratch: Vec<u64>,
    totals: &'a mut Totals,
    u: Vec<UEntry>,
    force: Option<Force>,
}

impl<'a> Builder<'a> {
    fn new(
        env: &'a Env,
        o: Orch<'a>,
        run_id: u64,
        opts: Opts,
        rr: &'a RunRec,
        rng: Rng,
        totals: &'a mut Totals,
    ) -> Builder<'a> {
        let bufs = static_bufs(&env.statics);
        Builder {
            rng,
            env,
            o,
            opts,
            run_id,
            bufs,
            nodes: Vec::new(),
            frames: vec![Vec::new()],
            ops: Vec::new(),
            last_slot: None,
            rr,
            scratch: Vec::new(),
            totals,
            u: Vec::new(),
            force: None,
        }
    }

    fn depth(&self) -> usize {
        self.frames.len()
    }

    fn scope_begin(&mut self) -> Result<(), String> {
        self.o
            .scope_begin()
            .map_err(|e| format!("scope_begin at depth {}: {e:?}", self.depth()))?;
        self.frames.push(Vec::new());
        self.ops.push(Op::Begin(self.depth()));
        self.totals.max_depth = self.totals.max_depth.max(self.depth());
        Ok(())
    }

    fn scope_end(&mut self) -> Result<(), String> {
        let d = self.depth();
        self.o
            .scope_end()
            .map_err(|e| format!("scope_end at depth {d}: {e:?}"))?;
        self.close_frame();
        self.ops.push(Op::End(d));
        Ok(())
    }

    /// Model side of a scope end: its nodes lose their scope reference, its buffers die.
    fn close_frame(&mut self) {
        let d = self.depth();
        for i in self.frames.pop().expect("open frame") {
            self.nodes[i].frame_open = false;
        }
        for b in self.bufs.iter_mut() {
            if b.level == d {
                b.alive = false;
            }
        }
    }

    /// End every nested scope and close the run's submission.
    fn close_run(&mut self) -> Result<(), String> {
        while self.depth() > 1 {
            self.scope_end()?;
        }
        self.o
            .close(self.run_id)
            .map_err(|e| format!("close_run_submission: {e:?}"))?;
        self.close_frame();
        Ok(())
    }

    fn new_buf(&mut self, name: String, base: u64, len: u64, layout: Layout, writer: usize) {
        self.bufs.push(Buf {
            name,
            base,
            len,
            layout,
            level: self.depth(),
            alive: true,
            last: vec![writer as u32 + 1; len as usize],
        });
    }

    fn gen_member(&mut self, node: usize, m: usize, mode: u64, hold: bool) -> Member {
        let nt = self.rng.below(5) as usize;
        let mut tensors = Vec::with_capacity(nt);
        let mut bufs = Vec::with_capacity(nt);
        let alive: Vec<usize> = (0..self.bufs.len())
            .filter(|&i| self.bufs[i].alive)
            .collect();
        for _ in 0..nt {
            let r = self.rng.below(100);
            if r >= 95 {
                // OUTPUT with a null data pointer: the runtime allocates it.
                let t = if self.rng.pct(50) {
                    tensor(0, 0, DataType::U64, &[8, 8], &[])
                } else {
                    tensor(0, 0, DataType::U64, &[16], &[])
                };
                tensors.push(tagged(t, Tag::Output));
                bufs.push(usize::MAX);
                continue;
            }
            let tag = match r {
                0..=32 => Tag::Input,
                33..=47 => Tag::Output,
                48..=72 => Tag::Inout,
                73..=84 => Tag::OutputExisting,
                _ => Tag::NoDep,
            };
            let bi = alive[self.rng.below(alive.len() as u64) as usize];
            let b = &self.bufs[bi];
            let t = gen_view(&mut self.rng, b);
            tensors.push(tagged(t, tag));
            bufs.push(bi);
        }
        let mut deps = Vec::new();
        if node > 0 && self.rng.pct(30) {
            for _ in 0..self.rng.range(1, 3) {
                let back = if self.rng.pct(70) {
                    self.rng.below(node.min(6) as u64)
                } else {
                    self.rng.below(node as u64)
                } as usize;
                let p = node - 1 - back;
                let kind = if self.rng.pct(50) {
                    DepKind::Retain
                } else {
                    DepKind::Wait
                };
                deps.push(Dep {
                    handle: TaskHandle {
                        run_id: self.run_id,
                        slot: self.nodes[p].slot,
                    },
                    kind: kind as u32,
                    reserved: 0,
                });
            }
        }
        let spin = match self.rng.below(100) {
            0..=59 => 0,
            60..=84 => self.rng.range(1, 300),
            85..=96 => self.rng.range(300, 8000),
            _ => SPIN_YIELD,
        };
        Member {
            tensors,
            bufs,
            deps,
            scalars: [
                self.rr as *const RunRec as u64,
                node as u64,
                m as u64,
                spin,
                mode,
                hold as u64,
            ],
        }
    }

    fn gen_kind(&mut self) -> Kind {
        let l = &self.env.lanes;
        match self.rng.below(100) {
            0..=34 => Kind::Nl(l.nl[self.rng.below(l.nl.len() as u64) as usize]),
            35..=49 => {
                let mut ids = l.nl.clone();
                for i in (1..ids.len()).rev() {
                    ids.swap(i, self.rng.below(i as u64 + 1) as usize);
                }
                ids.truncate(self.rng.range(1, l.nl.len() as u64) as usize);
                Kind::NlGroup(ids)
            }
            50..=84 => Kind::Sub,
            _ => Kind::SubGroup(self.rng.range(1, l.subs as u64) as usize),
        }
    }

    fn node_of_slot(&self, slot: u64) -> Option<usize> {
        self.nodes.iter().position(|n| n.slot == slot)
    }

    /// Byte-exact reference model: explicit deps first, then each tensor in submission order
    /// (a lookup, then an insert), so the node's own earlier writes shadow older writers.
    fn model_required(
        &mut self,
        idx: usize,
        members: &[Member],
    ) -> (BTreeMap<usize, bool>, Vec<(usize, bool)>) {
        let mut req: BTreeMap<usize, bool> = BTreeMap::new();
        let mut deps = Vec::new();
        for m in members {
            for d in &m.deps {
                let p = self
                    .node_of_slot(d.handle.slot)
                    .expect("dep on a node of this run");
                let retain = d.kind == DepKind::Retain as u32;
                deps.push((p, retain));
                *req.entry(p).or_insert(false) |= retain;
            }
        }
        for m in members {
            for (t, &bi) in m.tensors.iter().zip(&m.bufs) {
                if bi == usize::MAX {
                    continue;
                }
                let tag = Tag::from_u32(t.tag).expect("tag");
                if tag == Tag::NoDep {
                    continue;
                }
                let b = &mut self.bufs[bi];
                view_bytes(t, b.base, &mut self.scratch);
                if tag.looks_up() {
                    for &x in &self.scratch {
                        let w = b.last[x as usize];
                        if w != 0 && w as usize - 1 != idx {
                            req.insert(w as usize - 1, true);
                        }
                    }
                }
                if tag.inserts() {
                    for &x in &self.scratch {
                        b.last[x as usize] = idx as u32 + 1;
                    }
                }
            }
        }
        (req, deps)
    }

    /// Superset model MAY, after the submit (auto-allocated addresses known): every earlier
    /// write whose byte interval meets the view's, unless a later dense write covered it.
    fn model_may(
        &mut self,
        idx: usize,
        members: &[Member],
        deps: &[(usize, bool)],
    ) -> BTreeSet<usize> {
        let mut may: BTreeSet<usize> = deps.iter().map(|d| d.0).collect();
        for m in members {
            for t in &m.tensors {
                let Some(tag) = Tag::from_u32(t.tag) else {
                    continue;
                };
                if tag == Tag::NoDep {
                    continue;
                }
                view_bytes(t, 0, &mut self.scratch);
                let (Some(&lo), Some(&hi)) = (self.scratch.iter().min(), self.scratch.iter().max())
                else {
                    continue;
                };
                let hi = hi + 1;
                if tag.looks_up() {
                    for e in &self.u {
                        if e.node != idx && e.lo < hi && lo < e.hi {
                            may.insert(e.node);
                        }
                    }
                }
                if tag.inserts() {
                    if surely_dense(t) {
                        self.u.retain(|e| !(lo <= e.lo && e.hi <= hi));
                    }
                    self.u.push(UEntry { node: idx, lo, hi });
                }
            }
        }
        may
    }

    fn submit_task(&mut self) -> Result<(), String> {
        let idx = self.nodes.len();
        if idx >= MAX_NODES {
            return Err("generator produced too many nodes".into());
        }
        let kind = self.gen_kind();
        let n = kind.members();
        let fail = self
            .rng
            .pct(self.opts.fail_pct)
            .then(|| (self.rng.below(n as u64) as usize, self.rng.range(1, 3)));
        let hold = self.opts.hold_all || self.rng.pct(self.opts.hold_pct);
        let mut members: Vec<Member> = (0..n)
            .map(|m| {
                let mode = match fail {
                    Some((fm, mode)) if fm == m => mode,
                    _ => FAIL_NONE,
                };
                self.gen_member(idx, m, mode, hold)
            })
            .collect();
        let forced = self.force.take();
        let mut note = None;
        if let Some(f) = &forced {
            let p = &self.nodes[f.producer];
            let mut what = Vec::new();
            if let Some(retain) = f.dep {
                members[0].deps.push(Dep {
                    handle: TaskHandle {
                        run_id: self.run_id,
                        slot: p.slot,
                    },
                    kind: if retain {
                        DepKind::Retain
                    } else {
                        DepKind::Wait
                    } as u32,
                    reserved: 0,
                });
                what.push(if retain { "add_dep" } else { "add_dep_wait" });
            }
            if let Some((bi, byte)) = f.read {
                let b = &self.bufs[bi];
                // First, so no write of the node itself shadows the producer's byte.
                members[0].tensors.insert(
                    0,
                    tagged(tensor(b.base, byte, DataType::U8, &[], &[]), Tag::Input),
                );
                members[0].bufs.insert(0, bi);
                what.push("INPUT of its output");
            }
            note = Some(format!(
                "consumer of n{} after it failed and was consumed ({})",
                f.producer,
                what.join(" + ")
            ));
        }
        let (req, deps) = self.model_required(idx, &members);
        if self.opts.hostile_pct > 0 && self.rng.pct(self.opts.hostile_pct) {
            self.hostile_attempt(&kind, &members, None)?;
        }
        let mut config = CallConfig {
            flags: self.rng.below(4) as u32,
            block_dim: self.rng.below(64) as u32,
            user: [0; 6],
        };
        config.user[0] = self.rng.next();
        let args: Vec<TaskArgs> = members.iter_mut().map(|m| m.args()).collect();
        let (sk, workers) = kind.submit_kind();
        let h = self
            .o
            .submit(sk, &callable(), &args, &config, &workers)
            .map_err(|e| format!("submit of node n{idx} ({kind:?}) failed: {e:?}"))?;
        drop(args);
        if self.run_id == 0 {
            self.run_id = h.run_id;
        } else if h.run_id != self.run_id {
            return Err(format!(
                "node n{idx}: handle names run {} instead of {}",
                h.run_id, self.run_id
            ));
        }
        self.last_slot = Some(h.slot);
        let may = self.model_may(idx, &members, &deps);
        for (mi, m) in members.iter_mut().enumerate() {
            for ti in 0..m.tensors.len() {
                if m.bufs[ti] != usize::MAX {
                    continue;
                }
                let t = m.tensors[ti];
                if t.data.is_null() {
                    return Err(format!(
                        "node n{idx}: auto-allocated OUTPUT {ti} of member {mi} was not written back"
                    ));
                }
                let (layout, len) = if t.ndim == 2 {
                    (Layout::Mat8, 512)
                } else {
                    (Layout::Flat, 128)
                };
                self.new_buf(format!("O{idx}.{mi}.{ti}"), t.data as u64, len, layout, idx);
                m.bufs[ti] = self.bufs.len() - 1;
                self.totals.autos += 1;
            }
        }
        let must = req
            .keys()
            .any(|&p| self.nodes[p].fail.is_some() || self.nodes[p].must);
        self.totals.nodes += 1;
        self.totals.tasks += 1;
        if matches!(kind, Kind::NlGroup(_) | Kind::SubGroup(_)) {
            self.totals.groups += 1;
        }
        self.totals.failing += fail.is_some() as u64;
        self.nodes.push(Node {
            kind,
            slot: h.slot,
            level: self.depth(),
            frame_open: true,
            members,
            deps,
            req,
            may,
            fail,
            must,
            hold,
            alloc: None,
            note,
        });
        self.frames.last_mut().expect("frame").push(idx);
        self.ops.push(Op::Node(idx));
        if let Some(f) = forced {
            self.check_poisoned_at_submit(idx, f.producer)?;
        }
        Ok(())
    }

    /// A consumer of a consumed failed producer is poisoned by its own submit.
    fn check_poisoned_at_submit(&mut self, idx: usize, producer: usize) -> Result<(), String> {
        let Some(e) = self.env.engine() else {
            return Ok(());
        };
        let n = &self.nodes[idx];
        if !n.must {
            return Err(format!(
                "test model: forced consumer n{idx} of n{producer} is not a must-fail node"
            ));
        }
        let slot = e.slots.get(n.slot);
        let (id, _) = slot.core.ident();
        let st = slot.core.state();
        let ran =
            (0..n.members.len()).any(|m| self.rr.rec(idx, m).count.load(Ordering::SeqCst) > 0);
        let ok = if id == n.slot && st != FREE {
            st == FAILED
        } else {
            !ran
        };
        if !ok {
            return Err(format!(
                "MISSED POISONING: n{idx} (slot {}) names n{producer} (slot {}), which failed and was \
                 already consumed, yet right after its submit it is {} (ran: {ran})",
                n.slot,
                self.nodes[producer].slot,
                state_name(st)
            ));
        }
        Ok(())
    }

    fn submit_alloc(&mut self) -> Result<(), String> {
        let idx = self.nodes.len();
        if idx >= MAX_NODES {
            return Err("generator produced too many nodes".into());
        }
        let (shape, dtype, layout): (Vec<u64>, DataType, Layout) = match self.rng.below(4) {
            0 => (vec![8, 8], DataType::U64, Layout::Mat8),
            1 => (vec![16], DataType::U64, Layout::Flat),
            2 => (vec![32], DataType::U32, Layout::Flat),
            _ => (vec![100], DataType::U8, Layout::Flat),
        };
        let (ptr, h) = self
            .o
            .alloc(&shape, dtype as u32)
            .map_err(|e| format!("alloc of node n{idx} failed: {e:?}"))?;
        if ptr.is_null() || (ptr as u64) % 1024 != 0 {
            return Err(format!(
                "alloc of node n{idx} returned {ptr:?}, not 1024-aligned"
            ));
        }
        if self.run_id == 0 {
            self.run_id = h.run_id;
        } else if h.run_id != self.run_id {
            return Err(format!("alloc n{idx}: handle names run {}", h.run_id));
        }
        self.last_slot = Some(h.slot);
        let len = shape.iter().product::<u64>() * dtype_size(dtype as u32).expect("dtype");
        self.new_buf(format!("A{idx}"), ptr as u64, len, layout, idx);
        let (lo, hi) = (ptr as u64, ptr as u64 + len);
        self.u.retain(|e| !(lo <= e.lo && e.hi <= hi));
        self.u.push(UEntry { node: idx, lo, hi });
        self.nodes.push(Node {
            kind: Kind::Alloc,
            slot: h.slot,
            level: self.depth(),
            frame_open: true,
            members: Vec::new(),
            deps: Vec::new(),
            req: BTreeMap::new(),
            may: BTreeSet::new(),
            fail: None,
            must: false,
            hold: false,
            alloc: Some((shape, dtype as u32)),
            note: None,
        });
        self.frames.last_mut().expect("frame").push(idx);
        self.ops.push(Op::Node(idx));
        self.totals.nodes += 1;
        self.totals.allocs += 1;
        Ok(())
    }

    /// Pick a node of an ended scope that is sure to fail, wait until the engine consumed it,
    /// and make the next task node its consumer (by handle and/or through the TensorMap).
    fn consumed_producer_op(&mut self) -> Result<(), String> {
        let Some(e) = self.env.engine().cloned() else {
            return Ok(());
        };
        // Until a failure is recorded, failing executors wait for ticket 0, which only a
        // submitted failing node can take: wait for it only if one exists (a failing node
        // without failing ancestors runs, takes a ticket, and the holder of ticket 0 fails).
        if !self.nodes.iter().any(|n| n.fail.is_some()) {
            return Ok(());
        }
        let probe = self.rr.probe.get().expect("probe set at begin_run");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !probe.failure_recorded() {
            if Instant::now() > deadline {
                return Err(
                    "no failure was recorded within 10 s although failing nodes were submitted"
                        .into(),
                );
            }
            std::thread::yield_now();
        }
        let cands: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| {
                let n = &self.nodes[i];
                !n.frame_open && !n.kind.is_alloc() && (n.fail.is_some() || n.must)
            })
            .collect();
        if cands.is_empty() {
            return Ok(());
        }
        let c = cands[self.rng.below(cands.len() as u64) as usize];
        let slot = self.nodes[c].slot;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let s = e.slots.get(slot);
            let (id, _) = s.core.ident();
            if id != slot || s.core.state() == FREE {
                break;
            }
            if Instant::now() > deadline {
                self.totals.consumed_timeouts += 1;
                self.ops.push(Op::Note(format!(
                    "n{c} was not consumed within 5 s (state {}); no consumer forced",
                    state_name(s.core.state())
                )));
                return Ok(());
            }
            std::thread::yield_now();
        }
        let mut reads = Vec::new();
        for (bi, b) in self.bufs.iter().enumerate() {
            if !b.alive {
                continue;
            }
            if let Some(x) = b.last.iter().position(|&w| w as usize == c + 1) {
                reads.push((bi, x as u64));
            }
        }
        let read = if !reads.is_empty() && self.rng.pct(60) {
            Some(reads[self.rng.below(reads.len() as u64) as usize])
        } else {
            None
        };
        let dep = if read.is_none() || self.rng.pct(40) {
            Some(self.rng.pct(50))
        } else {
            None
        };
        self.totals.consumed_ops += 1;
        self.totals.consumed_dep += dep.is_some() as u64;
        self.totals.consumed_read += read.is_some() as u64;
        self.force = Some(Force {
            producer: c,
            dep,
            read,
        });
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Hostile submits: one bad thing placed late in otherwise valid arguments

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Corrupt {
    BadDtype,
    BadTag,
    TensorReserved,
    TooManyDims,
    NullInput,
    StridedAuto,
    ExtentOverflow,
    BadDepKind,
    FutureSlot,
    ReleasedRun,
    UnknownWorker,
    DuplicateTarget,
    SubGroupTooBig,
    MemberReserved,
    NullTensors,
    UnknownCallable,
    AutoTooLarge,
}

const ALL_CORRUPT: [Corrupt; 17] = [
    Corrupt::BadDtype,
    Corrupt::BadTag,
    Corrupt::TensorReserved,
    Corrupt::TooManyDims,
    Corrupt::NullInput,
    Corrupt::StridedAuto,
    Corrupt::ExtentOverflow,
    Corrupt::BadDepKind,
    Corrupt::FutureSlot,
    Corrupt::ReleasedRun,
    Corrupt::UnknownWorker,
    Corrupt::DuplicateTarget,
    Corrupt::SubGroupTooBig,
    Corrupt::MemberReserved,
    Corrupt::NullTensors,
    Corrupt::UnknownCallable,
    Corrupt::AutoTooLarge,
];

impl Corrupt {
    fn applies(self, kind: &Kind) -> bool {
        match self {
            Corrupt::UnknownWorker => matches!(kind, Kind::Nl(_) | Kind::NlGroup(_)),
            Corrupt::DuplicateTarget => matches!(kind, Kind::NlGroup(ids) if ids.len() >= 2),
            Corrupt::SubGroupTooBig => matches!(kind, Kind::SubGroup(_)),
            _ => true,
        }
    }
    fn expected(self) -> Status {
        match self {
            Corrupt::FutureSlot | Corrupt::ReleasedRun => Status::StaleHandle,
            Corrupt::UnknownWorker => Status::UnknownWorker,
            Corrupt::DuplicateTarget => Status::DuplicateTarget,
            Corrupt::NullTensors => Status::NullPointer,
            Corrupt::UnknownCallable => Status::UnknownCallable,
            Corrupt::AutoTooLarge => Status::HeapExhausted,
            _ => Status::InvalidArgument,
        }
    }
}

impl Builder<'_> {
    /// Submit a corrupted copy of `members` and check it is refused without a trace.
    fn hostile_attempt(
        &mut self,
        kind: &Kind,
        members: &[Member],
        which: Option<Corrupt>,
    ) -> Result<(), String> {
        let c = match which {
            Some(c) => c,
            None => {
                let ok: Vec<Corrupt> = ALL_CORRUPT
                    .iter()
                    .copied()
                    .filter(|c| c.applies(kind))
                    .collect();
                ok[self.rng.below(ok.len() as u64) as usize]
            }
        };
        let mut ms: Vec<Member> = members.to_vec();
        if c != Corrupt::AutoTooLarge && self.rng.pct(60) {
            // A valid auto-allocated OUTPUT ahead of the bad argument: never written back.
            ms[0]
                .tensors
                .push(tagged(tensor(0, 0, DataType::U64, &[16], &[]), Tag::Output));
            ms[0].bufs.push(usize::MAX);
        }
        let (sk, mut workers) = kind.submit_kind();
        let mut cal = callable();
        let valid = tagged(
            tensor(self.bufs[0].base, 8, DataType::U64, &[4], &[]),
            Tag::Input,
        );
        let last = ms.len() - 1;
        let prev_slot = self.nodes.last().map_or(0, |n| n.slot);
        let bad: Option<Tensor> = match c {
            Corrupt::BadDtype => Some(Tensor { dtype: 99, ..valid }),
            Corrupt::BadTag => Some(Tensor { tag: 17, ..valid }),
            Corrupt::TensorReserved => Some(Tensor {
                reserved: 1,
                ..valid
            }),
            Corrupt::TooManyDims => Some(Tensor { ndim: 6, ..valid }),
            Corrupt::NullInput => Some(tagged(tensor(0, 0, DataType::U64, &[4], &[]), Tag::Input)),
            Corrupt::StridedAuto => Some(tagged(
                tensor(0, 0, DataType::U64, &[4, 4], &[1, 4]),
                Tag::Output,
            )),
            Corrupt::ExtentOverflow => Some(tagged(
                tensor(0xFFFF_FFFF_FFFF_0000, 0, DataType::U64, &[1 << 40], &[]),
                Tag::Input,
            )),
            Corrupt::AutoTooLarge => Some(tagged(
                tensor(0, 0, DataType::U8, &[64 << 20], &[]),
                Tag::Output,
            )),
            _ => None,
        };
        if let Some(t) = bad {
            ms[last].tensors.push(t);
            ms[last].bufs.push(0);
        }
        match c {
            Corrupt::BadDepKind => ms[last].deps.push(Dep {
                handle: TaskHandle {
                    run_id: self.run_id,
                    slot: prev_slot,
                },
                kind: 9,
                reserved: 0,
            }),
            Corrupt::FutureSlot => ms[last].deps.push(Dep {
                handle: TaskHandle {
                    run_id: self.run_id,
                    slot: self.last_slot.unwrap_or(0) + (3 << 24),
                },
                kind: DepKind::Retain as u32,
                reserved: 0,
            }),
            Corrupt::ReleasedRun => {
                let r = LAST_RELEASED.load(Ordering::Relaxed);
                ms[last].deps.push(Dep {
                    handle: TaskHandle {
                        run_id: if r == 0 { u64::MAX - 7 } else { r },
                        slot: prev_slot,
                    },
                    kind: DepKind::Wait as u32,
                    reserved: 0,
                })
            }
            Corrupt::UnknownWorker => *workers.last_mut().expect("NEXT_LEVEL target") = 999,
            Corrupt::DuplicateTarget => {
                let w0 = workers[0];
                *workers.last_mut().expect("target") = w0;
            }
            Corrupt::SubGroupTooBig => {
                while ms.len() <= self.env.lanes.subs as usize {
                    let m0 = ms[0].clone();
                    ms.push(m0);
                }
            }
            Corrupt::UnknownCallable => cal.digest[0] ^= 0xFF,
            _ => {}
        }
        let autos: Vec<(usize, usize)> = ms
            .iter()
            .enumerate()
            .flat_map(|(mi, m)| {
                m.tensors
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| t.data.is_null() && t.tag == Tag::Output as u32)
                    .map(move |(ti, _)| (mi, ti))
            })
            .collect();
        let mut args: Vec<TaskArgs> = ms.iter_mut().map(|m| m.args()).collect();
        let la = args.len() - 1;
        match c {
            Corrupt::MemberReserved => args[la].reserved = 1,
            Corrupt::NullTensors => {
                args[la].tensors = std::ptr::null_mut();
                args[la].num_tensors = args[la].num_tensors.max(1);
            }
            _ => {}
        }
        let before = self.opts.gated.then(|| snap(self.env, self.run_id));
        let r = self
            .o
            .submit(sk, &cal, &args, &CallConfig::default(), &workers);
        drop(args);
        let (st, msg) = match r {
            Ok(h) => {
                return Err(format!(
                    "HOSTILE SUBMIT ACCEPTED: {kind:?} with {c:?} returned slot {}",
                    h.slot
                ))
            }
            Err(x) => x,
        };
        if st != c.expected() || msg.is_empty() {
            return Err(format!(
                "hostile submit {kind:?} with {c:?}: got {st:?} '{msg}', expected {:?} with a message",
                c.expected()
            ));
        }
        for (mi, ti) in autos {
            if !ms[mi].tensors[ti].data.is_null() {
                return Err(format!(
                    "hostile submit {kind:?} with {c:?} failed ({st:?}) but wrote an auto-allocated \
                     address back into member {mi} tensor {ti}"
                ));
            }
        }
        if let Some(b) = before {
            let a = snap(self.env, self.run_id);
            if a != b {
                return Err(format!(
                    "LEFT BEHIND: hostile submit {kind:?} with {c:?} failed ({st:?}) but changed \
                     the stats:\n  before {b:?}\n  after  {a:?}"
                ));
            }
            self.totals.hostile_snap += 1;
        }
        self.totals.hostile += 1;
        self.totals.hostile_kinds.insert(format!("{c:?}"));
        self.ops.push(Op::Note(format!(
            "hostile {kind:?} with {c:?} refused: {st:?}"
        )));
        Ok(())
    }

    /// Every applicable corruption of one random task (gated runs: stats compared each time).
    fn hostile_sweep(&mut self) -> Result<(), String> {
        let idx = self.nodes.len();
        for _ in 0..3 {
            let kind = self.gen_kind();
            let members: Vec<Member> = (0..kind.members())
                .map(|m| self.gen_member(idx, m, FAIL_NONE, false))
                .collect();
            for c in ALL_CORRUPT {
                if c.applies(&kind) {
                    self.hostile_attempt(&kind, &members, Some(c))?;
                }
            }
        }
        Ok(())
    }

    /// Gated runs, before the gate opens (nothing has finished): the engine's wiring, read
    /// from the producers' consumer lists, as (producer, consumer, retain) node triples.
    fn read_wiring(&mut self) -> Result<Vec<(usize, usize, bool)>, Vec<String>> {
        let e = self.env.engine().expect("Rust API").clone();
        let by_slot: HashMap<u64, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.slot, i))
            .collect();
        let mut edges = Vec::new();
        let mut errs = Vec::new();
        for (p, pn) in self.nodes.iter().enumerate() {
            if pn.kind.is_alloc() {
                continue;
            }
            let g = e
                .slots
                .get(pn.slot)
                .core
                .sync
                .lock()
                .unwrap_or_else(|x| x.into_inner());
            if g.id != pn.slot {
                errs.push(format!(
                    "gated: n{p} (slot {}) left its slot before anything finished",
                    pn.slot
                ));
                continue;
            }
            for x in g.consumers.iter() {
                match by_slot.get(&x.slot) {
                    Some(&c) => edges.push((p, c, x.retain)),
                    None => errs.push(format!(
                        "gated: n{p} has consumer slot {} that is no node of the run",
                        x.slot
                    )),
                }
            }
        }
        for (c, cn) in self.nodes.iter().enumerate() {
            for (&p, &retain) in &cn.req {
                if self.nodes[p].kind.is_alloc() {
                    continue;
                }
                self.totals.wiring_edges += 1;
                match edges.iter().find(|e| e.0 == p && e.1 == c) {
                    None => errs.push(format!(
                        "MISSED EDGE: n{c} (slot {}) must wait for n{p} (slot {}) but is not among its consumers",
                        cn.slot, self.nodes[p].slot
                    )),
                    Some(e) if retain && !e.2 => errs.push(format!(
                        "n{c} is wired on n{p} without retaining it (tensor edge or add_dep)"
                    )),
                    _ => {}
                }
            }
        }
        for &(p, c, _) in &edges {
            if !self.nodes[c].may.contains(&p) {
                errs.push(format!(
                    "engine edge n{p} -> n{c} lies outside the superset model MAY (a dependency \
                     through no byte interval and no explicit dep)"
                ));
            }
        }
        if errs.is_empty() {
            Ok(edges)
        } else {
            Err(errs)
        }
    }
}

/// Random ops: scopes, tasks, allocs (and the optional consumed-producer, hostile sweep
/// extras). Stops before op `stop_at` (`n_ops`: after the last op); true if it stopped.
fn build_ops(b: &mut Builder<'_>, n_ops: u64, stop_at: Option<u64>) -> Result<bool, String> {
    let max_depth = if b.rng.pct(50) { 4 } else { 9 };
    let sweep_at = b.opts.hostile_sweep.then(|| b.rng.below(n_ops));
    for op in 0..n_ops {
        if stop_at == Some(op) {
            return Ok(true);
        }
        let r = b.rng.below(100);
        if r < 12 && b.depth() < max_depth {
            b.scope_begin()?;
        } else if r < 22 && b.depth() > 1 {
            b.scope_end()?;
        }
        if sweep_at == Some(op) {
            b.hostile_sweep()?;
        }
        if b.opts.consumed_ops && b.rng.pct(8) {
            b.consumed_producer_op()?;
        }
        if b.force.is_none() && b.rng.pct(7) {
            b.submit_alloc()?;
        } else {
            b.submit_task()?;
        }
    }
    Ok(stop_at == Some(n_ops))
}

// ---------------------------------------------------------------------------------------
// One run: build, then check against the model

struct Built {
    seed: u64,
    what: &'static str,
    env_name: &'static str,
    backend: &'static str,
    run_id: u64,
    gated: bool,
    nodes: Vec<Node>,
    ops: Vec<Op>,
    bufs: Vec<Buf>,
    /// From Box::into_raw; freed once the run is done and checked, leaked on failure.
    rr: *const RunRec,
    /// Gated runs through the Rust API: the engine's wiring before the gate opened.
    eng_edges: Option<Vec<(usize, usize, bool)>>,
}

type BuildErr = Box<(String, Option<Built>)>;

fn describe_tensor(t: &Tensor, bufs: &[Buf], bi: usize) -> String {
    let nd = (t.ndim as usize).min(MAX_TENSOR_DIMS);
    let name = bufs.get(bi).map_or("auto".to_string(), |b| b.name.clone());
    format!(
        "{} {}[+{} {:?} shape {:?} strides {:?}]",
        tag_name(t.tag),
        name,
        t.offset,
        dtype_size(t.dtype).unwrap_or(0),
        &t.shape[..nd],
        &t.strides[..nd]
    )
}

fn dump(b: &Built) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "--- {}: run seed {:#x} on worker {} ({}), run id {}, gated {}; replay with DAGRT_FAULT_ONLY={:#x}",
        b.what, b.seed, b.env_name, b.backend, b.run_id, b.gated, b.seed
    );
    for op in &b.ops {
        match op {
            Op::Begin(d) => {
                let _ = writeln!(s, "scope_begin -> depth {d}");
            }
            Op::End(d) => {
                let _ = writeln!(s, "scope_end   <- depth {d}");
            }
            Op::Note(n) => {
                let _ = writeln!(s, "# {n}");
            }
            Op::Node(i) => {
                let n = &b.nodes[*i];
                if let Some((shape, dtype)) = &n.alloc {
                    let _ = writeln!(
                        s,
                        "n{i} slot {} = alloc(shape {shape:?}, dtype {dtype}) at depth {} -> A{i}",
                        n.slot, n.level
                    );
                    continue;
                }
                let extra: Vec<usize> = n
                    .may
                    .iter()
                    .copied()
                    .filter(|p| !n.req.contains_key(p))
                    .collect();
                let _ = writeln!(
                    s,
                    "n{i} slot {} = {:?} at depth {}{}{}{}; deps {:?}; required {:?}; may also {:?}{}",
                    n.slot,
                    n.kind,
                    n.level,
                    match n.fail {
                        Some((m, mode)) => format!(", FAILS (member {m}, mode {mode})"),
                        None => String::new(),
                    },
                    if n.must { ", must be poisoned" } else { "" },
                    if n.hold { ", holds" } else { "" },
                    n.deps
                        .iter()
                        .map(|&(p, r)| format!("{}(n{p})", if r { "add_dep" } else { "add_dep_wait" }))
                        .collect::<Vec<_>>(),
                    n.req
                        .iter()
                        .map(|(&p, &r)| format!("n{p}{}", if r { "" } else { "(wait)" }))
                        .collect::<Vec<_>>(),
                    extra,
                    n.note.as_ref().map_or(String::new(), |x| format!(" [{x}]")),
                );
                for (mi, m) in n.members.iter().enumerate() {
                    let ts: Vec<String> = m
                        .tensors
                        .iter()
                        .zip(&m.bufs)
                        .map(|(t, &bi)| describe_tensor(t, &b.bufs, bi))
                        .collect();
                    let _ = writeln!(s, "    member {mi}: {}", ts.join(", "));
                }
            }
        }
    }
    if let Some(edges) = &b.eng_edges {
        let _ = writeln!(
            s,
            "engine wiring: {:?}",
            edges
                .iter()
                .map(|e| format!("n{}->n{}", e.0, e.1))
                .collect::<Vec<_>>()
        );
    }
    s
}

fn fail_test(what: &str, msg: &str, built: Option<&Built>, envs: Vec<Env>) -> ! {
    let d = built.map(dump).unwrap_or_default();
    // Leak the workers: dropping them would wait for a run that may never finish.
    std::mem::forget(envs);
    panic!("{what}: {msg}\n{d}");
}

/// Build one random run with failing nodes (none with `no_fail`) and close its submission.
/// A gated run's wiring is read and checked before its gate opens.
fn build_failing(
    env: &Env,
    seed: u64,
    no_fail: bool,
    sweep: bool,
    totals: &mut Totals,
) -> Result<Built, BuildErr> {
    let mut rng = Rng(seed);
    let gated = sweep || rng.pct(25);
    let fail_pct = if no_fail {
        0
    } else {
        [0, 8, 8, 8, 15, 15, 15, 25, 25, 40][rng.below(10) as usize]
    };
    let opts = Opts {
        fail_pct,
        gated,
        consumed_ops: env.engine().is_some() && !gated && fail_pct > 0,
        hostile_pct: if gated { 5 } else { 2 },
        hostile_sweep: sweep,
        hold_all: false,
        hold_pct: 0,
    };
    let rr = Box::into_raw(Box::new(RunRec::new(gated, true)));
    // SAFETY: `rr` was just allocated; it is freed only after the run is done and checked.
    let rr_ref: &RunRec = unsafe { &*rr };
    let mut o = env.orch();
    let run_id = match o.begin_run() {
        Ok(r) => r,
        Err(e) => return Err(Box::new((format!("begin_run: {e:?}"), None))),
    };
    let _ = rr_ref.probe.set(env.probe(run_id));
    let mut b = Builder::new(env, o, run_id, opts, rr_ref, rng, totals);
    let n_ops = b.rng.range(10, 60);
    let mut errs = match build_ops(&mut b, n_ops, None).and_then(|_| b.close_run()) {
        Ok(()) => Vec::new(),
        Err(e) => vec![e],
    };
    let mut eng_edges = None;
    if errs.is_empty() && gated && env.engine().is_some() {
        match b.read_wiring() {
            Ok(e) => eng_edges = Some(e),
            Err(e) => errs = e,
        }
    }
    rr_ref.open_all();
    b.totals.runs += 1;
    b.totals.gated += gated as u64;
    b.totals.c_runs += env.engine().is_none() as u64;
    let built = Built {
        seed,
        what: "random_failing_dags",
        env_name: env.name,
        backend: env.backend(),
        run_id,
        gated,
        nodes: std::mem::take(&mut b.nodes),
        ops: std::mem::take(&mut b.ops),
        bufs: std::mem::take(&mut b.bufs),
        rr,
        eng_edges,
    };
    if errs.is_empty() {
        Ok(built)
    } else {
        Err(Box::new((errs.join("\n"), Some(built))))
    }
}

/// Strict descendants of `seeds` over `producers_of(consumer)`.
fn closure(n: usize, seeds: &[usize], producers_of: impl Fn(usize) -> Vec<usize>) -> Vec<bool> {
    let mut cons: Vec<Vec<usize>> = vec![Vec::new(); n];
    for c in 0..n {
        for p in producers_of(c) {
            cons[p].push(c);
        }
    }
    let mut reached = vec![false; n];
    let mut stack: Vec<usize> = seeds.to_vec();
    while let Some(p) = stack.pop() {
        for &c in &cons[p] {
            if !reached[c] {
                reached[c] = true;
                stack.push(c);
            }
        }
    }
    reached
}

/// Per task node: did it run (every member exactly once) and its [first start, last end].
fn analyze(b: &Built, rr: &RunRec, errs: &mut Vec<String>) -> (Vec<bool>, Vec<(u64, u64)>) {
    let n = b.nodes.len();
    let mut ran = vec![false; n];
    let mut span = vec![(u64::MAX, 0u64); n];
    for (i, nd) in b.nodes.iter().enumerate() {
        if nd.kind.is_alloc() {
            continue;
        }
        let mut counts = Vec::new();
        for m in 0..MAXM {
            let r = rr.rec(i, m);
            let c = r.count.load(Ordering::SeqCst);
            if m >= nd.members.len() {
                if c != 0 {
                    errs.push(format!(
                        "n{i}: member {m} ran but the node has {} members",
                        nd.members.len()
                    ));
                }
                continue;
            }
            counts.push(c);
            if c > 0 {
                span[i].0 = span[i].0.min(r.start.load(Ordering::SeqCst));
                span[i].1 = span[i].1.max(r.end.load(Ordering::SeqCst));
                // Where it ran and what it saw.
                let w = r.worker.load(Ordering::SeqCst);
                let target = match &nd.kind {
                    Kind::Nl(t) => Some(*t),
                    Kind::NlGroup(ids) => Some(ids[m]),
                    _ => None,
                };
                match target {
                    Some(t) if w != t => errs.push(format!(
                        "n{i} member {m} ({:?}) ran on worker {w}, its target is {t}",
                        nd.kind
                    )),
                    None if w >= 0 => errs.push(format!(
                        "n{i} member {m} (SUB) ran on NEXT_LEVEL worker {w}"
                    )),
                    _ => {}
                }
                let seen = r.slot.load(Ordering::SeqCst);
                if seen != nd.slot {
                    errs.push(format!(
                        "n{i} member {m} saw slot {seen}, its slot is {}",
                        nd.slot
                    ));
                }
            }
        }
        if counts.iter().any(|&c| c > 1) {
            errs.push(format!(
                "n{i} ({:?}): member run counts {counts:?}, at most once each",
                nd.kind
            ));
        }
        if let Kind::SubGroup(k) = nd.kind {
            let mut ws: Vec<i32> = (0..k)
                .map(|m| rr.rec(i, m).worker.load(Ordering::SeqCst))
                .collect();
            ws.sort_unstable();
            ws.dedup();
            if counts.iter().all(|&c| c == 1) && ws.len() != k {
                errs.push(format!(
                    "n{i}: SUB group of {k} members ran on lanes {ws:?}, not {k} distinct lanes"
                ));
            }
        }
        if counts.iter().all(|&c| c == 1) {
            ran[i] = true;
        } else if counts.iter().any(|&c| c != 0) {
            errs.push(format!(
                "n{i} ({:?}): only some members ran ({counts:?}): a group runs whole or not at all",
                nd.kind
            ));
        }
    }
    (ran, span)
}

/// A node that ran saw each required task producer end before any of its members started.
fn check_order(b: &Built, ran: &[bool], span: &[(u64, u64)], errs: &mut Vec<String>) {
    for (c, cn) in b.nodes.iter().enumerate() {
        if !ran[c] {
            continue;
        }
        for &p in cn.req.keys() {
            if b.nodes[p].kind.is_alloc() {
                continue;
            }
            if !ran[p] {
                errs.push(format!(
                    "n{c} ran although its required producer n{p} never ran (failed or cancelled)"
                ));
            } else if span[p].1 >= span[c].0 {
                errs.push(format!(
                    "ORDER VIOLATION: n{c} started at seq {} but its required producer n{p} ended at seq {}",
                    span[c].0, span[p].1
                ));
            }
        }
    }
}

/// Wait for a run with failing nodes and check it against the model.
fn check_failing(env: &Env, b: &Built, t: &mut Totals) -> Result<(), String> {
    let (st, msg) = env.wait(b.run_id, RUN_TIMEOUT)?;
    // SAFETY: the run's fence is zero: every slot was consumed, so every executor of the run
    // has returned and no lane reads the RunRec any more.
    let rr = unsafe { &*b.rr };
    let mut errs = rr.errors.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let n = b.nodes.len();
    let (ran, span) = analyze(b, rr, &mut errs);
    let task = |i: usize| !b.nodes[i].kind.is_alloc();
    let failing: Vec<usize> = (0..n).filter(|&i| b.nodes[i].fail.is_some()).collect();
    let must = closure(n, &failing, |c| b.nodes[c].req.keys().copied().collect());
    let may = closure(n, &failing, |c| b.nodes[c].may.iter().copied().collect());
    for i in 0..n {
        if must[i] && !may[i] {
            errs.push(format!("test model: n{i} is in MUST but not in MAY"));
        }
        if must[i] != b.nodes[i].must {
            errs.push(format!(
                "test model: n{i} incremental must-fail flag disagrees"
            ));
        }
    }
    let mut extra = Vec::new();
    for i in (0..n).filter(|&i| task(i)) {
        if must[i] && ran[i] {
            let from: Vec<usize> = b.nodes[i]
                .req
                .keys()
                .copied()
                .filter(|&p| b.nodes[p].fail.is_some() || must[p])
                .collect();
            errs.push(format!(
                "MISSED POISONING: n{i} ran although its required producer(s) {from:?} failed or were poisoned"
            ));
        }
        if !may[i] && !ran[i] {
            errs.push(format!(
                "n{i} never ran, yet it does not descend from any failing node even through the superset model"
            ));
        }
        if may[i] && !must[i] && !ran[i] {
            extra.push(i);
        }
    }
    t.poisoned_must += (0..n).filter(|&i| must[i] && task(i)).count() as u64;
    t.poisoned_extra += extra.len() as u64;
    if strict() && !extra.is_empty() {
        errs.push(format!(
            "EXTRA POISONING (DAGRT_FAULT_STRICT): {extra:?} never ran although no required edge leads to them from a failing node"
        ));
    }
    if let Some(edges) = &b.eng_edges {
        let exact = closure(n, &failing, |c| {
            edges.iter().filter(|e| e.1 == c).map(|e| e.0).collect()
        });
        for i in (0..n).filter(|&i| task(i)) {
            t.exact_poison_checks += 1;
            if exact[i] == ran[i] {
                errs.push(format!(
                    "gated: n{i} {} but it {} a descendant of a failing node over the engine's own wiring",
                    if ran[i] { "ran" } else { "never ran" },
                    if exact[i] { "is" } else { "is not" }
                ));
            }
        }
    }
    check_order(b, &ran, &span, &mut errs);
    // Counts.
    let failing_ran: Vec<usize> = failing.iter().copied().filter(|&i| ran[i]).collect();
    let tasks = (0..n).filter(|&i| task(i)).count() as u64;
    let ran_n = (0..n).filter(|&i| task(i) && ran[i]).count() as u64;
    let exp_completed = ran_n - failing_ran.len() as u64;
    let exp_failed = failing_ran.len() as u64 + (tasks - ran_n);
    match env.run_stats(b.run_id) {
        None => errs.push("run stats unavailable before release".into()),
        Some(s) => {
            if (s.completed, s.failed, s.cancelled) != (exp_completed, exp_failed, 0)
                || s.live_slots != 0
                || s.done != 1
            {
                errs.push(format!(
                    "run stats {s:?}, expected completed {exp_completed}, failed {exp_failed} ({} failing nodes ran + {} never ran), cancelled 0, no live slot, done",
                    failing_ran.len(),
                    tasks - ran_n
                ));
            }
        }
    }
    // The first failure.
    t.failing_ran += failing_ran.len() as u64;
    if failing_ran.is_empty() {
        if st != Status::Ok {
            errs.push(format!(
                "no failing node ran, yet the run reports {st:?}: {msg}"
            ));
        }
    } else {
        let mut tickets = Vec::new();
        let mut first = None;
        for &i in &failing_ran {
            let (fm, mode) = b.nodes[i].fail.expect("failing");
            let tk = rr.rec(i, fm).ticket.load(Ordering::SeqCst);
            tickets.push(tk);
            if tk == 0 {
                first = Some((i, fm, mode));
            }
        }
        tickets.sort_unstable();
        if tickets != (0..failing_ran.len() as u32).collect::<Vec<_>>() {
            errs.push(format!(
                "failure tickets {tickets:?} of the failing nodes that ran {failing_ran:?}: expected one each, 0..{}",
                failing_ran.len()
            ));
        }
        if st != Status::TaskFailed {
            errs.push(format!(
                "failing nodes {failing_ran:?} ran, yet the run reports {st:?}: {msg}"
            ));
        } else if let Some((i, fm, mode)) = first {
            if names_failure(&msg, b.run_id, i, fm, mode) {
                t.first_exact += 1;
                if mode == FAIL_RC {
                    t.first_rc += 1;
                } else {
                    t.first_msg += 1;
                }
            } else {
                errs.push(format!(
                    "FIRST FAILURE: the run reports '{msg}', but the first failure recorded was n{i} member {fm} (mode {mode}, slot {})",
                    b.nodes[i].slot
                ));
            }
            for &j in &failing_ran {
                let (jm, jmode) = b.nodes[j].fail.expect("failing");
                if j != i && names_failure(&msg, b.run_id, j, jm, jmode) {
                    errs.push(format!("the run's message '{msg}' names n{j} too"));
                }
            }
        }
    }
    if !errs.is_empty() {
        errs.truncate(25);
        return Err(errs.join("\n"));
    }
    env.release(b.run_id)?;
    LAST_RELEASED.store(b.run_id, Ordering::Relaxed);
    // SAFETY: allocated by Box::into_raw in `build_failing`; no executor of the run is left.
    drop(unsafe { Box::from_raw(b.rr as *mut RunRec) });
    env.check_reclaimed()
}

fn report(what: &str, t: &Totals, t0: Instant) {
    println!(
        "{what}: {} runs ({} gated, {} through the C ABI) in {:.2?}: {} nodes ({} tasks, {} groups, {} allocs, {} auto OUTPUTs), max scope depth {}; \
         {} failing nodes ({} ran and failed), {} must-poisoned, {} extra-poisoned (conservative wiring); \
         first failure checked exactly {} times ({} by return code, {} by message); {} wired edges checked, {} exact poison checks; \
         {} consumed-producer consumers ({} by handle, {} through the TensorMap, {} waits timed out); {} hostile submits ({} with stats compared; kinds {:?}); \
         {} cancelled runs ({} tasks cancelled, {} running at cancel) via {:?}; {} follow-up runs",
        t.runs, t.gated, t.c_runs, t0.elapsed(), t.nodes, t.tasks, t.groups, t.allocs, t.autos, t.max_depth,
        t.failing, t.failing_ran, t.poisoned_must, t.poisoned_extra,
        t.first_exact, t.first_rc, t.first_msg, t.wiring_edges, t.exact_poison_checks,
        t.consumed_ops, t.consumed_dep, t.consumed_read, t.consumed_timeouts, t.hostile, t.hostile_snap, t.hostile_kinds,
        t.cancelled_runs, t.cancelled_tasks, t.cancel_running, t.cancel_via, t.follow_ups
    );
}

// ---------------------------------------------------------------------------------------
// Orchestration failure: cancellation of unstarted tasks

#[derive(Clone, Copy, Debug)]
enum CancelVia {
    /// `Orchestrator::fail_run_submission`.
    RustFail,
    /// `dagrt_fail_run_submission`.
    CFail,
    /// A `dagrt_worker_submit` callback returning non-zero.
    CCallback,
}

/// What a build leaves for the checks: nodes, ops, buffers and the run id.
type Parts = (Vec<Node>, Vec<Op>, Vec<Buf>, u64);

struct CbCtx<'a> {
    env: &'a Env,
    seed: u64,
    opts: Opts,
    rr: *const RunRec,
    n_ops: u64,
    stop_at: u64,
    rc: i32,
    deliberate: bool,
    totals: Totals,
    parts: Option<Parts>,
    err: Option<String>,
    captured: String,
    fail_seq: u64,
}

/// The orchestration callback: build random ops, then fail at op `stop_at`.
unsafe extern "C" fn orch_cb(orch: *mut dagrt_orch_t, ctx: *mut c_void) -> i32 {
    // SAFETY: `ctx` is the CbCtx that `cancelled_run` passed to dagrt_worker_submit; it
    // outlives this call and nothing else touches it meanwhile.
    let cx = unsafe { &mut *(ctx as *mut CbCtx<'_>) };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: the RunRec outlives the run (freed only after the run is checked).
        let rr = unsafe { &*cx.rr };
        let mut totals = std::mem::take(&mut cx.totals);
        let mut b = Builder::new(
            cx.env,
            Orch::C(orch),
            0,
            cx.opts,
            rr,
            Rng(cx.seed),
            &mut totals,
        );
        let res = build_ops(&mut b, cx.n_ops, Some(cx.stop_at));
        let mut err = res.as_ref().err().cloned();
        if err.is_none() && cx.deliberate {
            // A failing dagrt call right before returning: its message is what the callback
            // "saw", and the run's failure must carry it.
            let mut m = Member {
                tensors: vec![],
                bufs: vec![],
                deps: vec![],
                scalars: [cx.rr as u64, 0, 0, 0, 0, 0],
            };
            let args = [m.args()];
            match b.o.submit(
                SubmitKind::NextLevel,
                &callable(),
                &args,
                &CallConfig::default(),
                &[999],
            ) {
                Err((Status::UnknownWorker, _)) => {}
                other => {
                    err = Some(format!(
                        "submit to unknown worker 999 returned {other:?}, expected UnknownWorker"
                    ))
                }
            }
        }
        cx.captured = last_error();
        let run_id = b.run_id;
        let parts = (
            std::mem::take(&mut b.nodes),
            std::mem::take(&mut b.ops),
            std::mem::take(&mut b.bufs),
            run_id,
        );
        drop(b);
        cx.totals = totals;
        (parts, err, res.unwrap_or(false))
    }));
    cx.fail_seq = SEQ.load(Ordering::SeqCst);
    match r {
        Ok((parts, err, stopped)) => {
            cx.parts = Some(parts);
            cx.err = err;
            if stopped {
                cx.rc
            } else {
                0
            }
        }
        Err(_) => {
            cx.err = Some("panic inside the orchestration callback".into());
            1
        }
    }
}

/// One run whose orchestration fails at a random op; then a successful run on the same
/// worker, checked completely.
fn cancelled_run(
    env: &Env,
    seed: u64,
    via: CancelVia,
    totals: &mut Totals,
) -> Result<(), BuildErr> {
    let mut rng = Rng(seed);
    let hold_all = rng.pct(40);
    let fail_pct = if rng.pct(30) { 10 } else { 0 };
    let opts = Opts {
        fail_pct,
        gated: false,
        consumed_ops: false,
        hostile_pct: 2,
        hostile_sweep: false,
        hold_all,
        hold_pct: if hold_all { 0 } else { 20 },
    };
    let rr = Box::into_raw(Box::new(RunRec::new(false, false)));
    // SAFETY: just allocated; freed after the run is checked (leaked on failure).
    let rr_ref: &RunRec = unsafe { &*rr };
    let n_ops = rng.range(3, 50);
    let stop_at = rng.below(n_ops + 1);
    let custom = format!("<orchestration fault of seed {seed:#x}>");
    let build_seed = rng.next();
    let mut errs = Vec::new();
    let (nodes, ops, bufs, run_id): Parts;
    let fail_seq: u64;
    let expect_msg: Box<dyn Fn(&str) -> bool>;
    match via {
        CancelVia::RustFail | CancelVia::CFail => {
            let mut o = env.orch();
            let run = match o.begin_run() {
                Ok(r) => r,
                Err(e) => return Err(Box::new((format!("begin_run: {e:?}"), None))),
            };
            let mut b = Builder::new(env, o, run, opts, rr_ref, Rng(build_seed), totals);
            match build_ops(&mut b, n_ops, Some(stop_at)) {
                Ok(true) => {}
                Ok(false) => errs.push("build did not stop at the failure point".into()),
                Err(e) => errs.push(e),
            }
            let fs = SEQ.load(Ordering::SeqCst);
            if let Err(e) = b.o.fail(run, &custom) {
                errs.push(format!("fail_run_submission: {e:?}"));
            }
            // Submission is closed: the orchestrator refuses further calls for this run.
            match b.o.scope_begin() {
                Err((Status::WrongState, _)) => {}
                other => errs.push(format!(
                    "scope_begin after a failed submission returned {other:?}, expected WrongState"
                )),
            }
            nodes = std::mem::take(&mut b.nodes);
            ops = std::mem::take(&mut b.ops);
            bufs = std::mem::take(&mut b.bufs);
            run_id = run;
            fail_seq = fs;
            let c2 = custom.clone();
            expect_msg = Box::new(move |m: &str| m == c2);
        }
        CancelVia::CCallback => {
            let mut cx = CbCtx {
                env,
                seed: build_seed,
                opts,
                rr,
                n_ops,
                stop_at,
                rc: rng.range(1, 1 << 30) as i32,
                deliberate: rng.pct(50),
                totals: std::mem::take(totals),
                parts: None,
                err: None,
                captured: String::new(),
                fail_seq: 0,
            };
            let mut run = 0;
            let st = capi::worker::dagrt_worker_submit(
                env.cw,
                Some(orch_cb),
                &mut cx as *mut CbCtx<'_> as *mut c_void,
                &mut run,
            );
            let submit_msg = last_error();
            *totals = std::mem::take(&mut cx.totals);
            if let Some(e) = cx.err.take() {
                errs.push(e);
            }
            if st != Status::OrchestrationFailed || run == 0 {
                errs.push(format!(
                    "dagrt_worker_submit with a callback returning {} gave {st:?} ({submit_msg}), run {run}",
                    cx.rc
                ));
            }
            // The run's message carries the last error the callback itself caused; an error
            // left over from before the callback is not the callback's (only the deliberate
            // failing call is certain to have happened inside it).
            let (rc, captured) = (cx.rc, cx.captured.clone());
            let must_carry = cx.deliberate;
            if !contains_int(&submit_msg, rc as i64)
                || (must_carry && !submit_msg.contains(&captured))
            {
                errs.push(format!(
                    "dagrt_worker_submit's message '{submit_msg}' does not carry the callback's code {rc} and last error '{captured}'"
                ));
            }
            let (n, o2, bf, _) = cx.parts.take().unwrap_or_default();
            nodes = n;
            ops = o2;
            bufs = bf;
            run_id = run;
            fail_seq = cx.fail_seq;
            expect_msg = Box::new(move |m: &str| m == submit_msg);
        }
    }
    rr_ref.open_all();
    totals.cancelled_runs += 1;
    *totals
        .cancel_via
        .entry(match via {
            CancelVia::RustFail => "Orchestrator::fail_run_submission",
            CancelVia::CFail => "dagrt_fail_run_submission",
            CancelVia::CCallback => "dagrt_worker_submit callback",
        })
        .or_insert(0) += 1;
    let built = Built {
        seed,
        what: "orchestration_failure_cancels_unstarted",
        env_name: env.name,
        backend: env.backend(),
        run_id,
        gated: false,
        nodes,
        ops,
        bufs,
        rr,
        eng_edges: None,
    };
    if !errs.is_empty() {
        return Err(Box::new((errs.join("\n"), Some(built))));
    }
    match check_cancelled(env, &built, fail_seq, hold_all, &*expect_msg, totals) {
        Ok(()) => {}
        Err(m) => return Err(Box::new((m, Some(built)))),
    }
    // The worker stays usable: a successful random run right after.
    let b2 = build_failing(env, rng.next(), true, false, totals)?;
    totals.follow_ups += 1;
    check_failing(env, &b2, totals).map_err(|m| Box::new((m, Some(b2))))
}

fn check_cancelled(
    env: &Env,
    b: &Built,
    fail_seq: u64,
    hold_all: bool,
    expect_msg: &dyn Fn(&str) -> bool,
    t: &mut Totals,
) -> Result<(), String> {
    let (st, msg) = env.wait(b.run_id, RUN_TIMEOUT)?;
    // SAFETY: the run is done: no executor reads the RunRec any more.
    let rr = unsafe { &*b.rr };
    let mut errs = rr.errors.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if st != Status::OrchestrationFailed || !expect_msg(&msg) {
        errs.push(format!(
            "the run reports {st:?} '{msg}', expected ORCHESTRATION_FAILED with the orchestration's message"
        ));
    }
    let n = b.nodes.len();
    let (ran, span) = analyze(b, rr, &mut errs);
    let tasks: Vec<usize> = (0..n).filter(|&i| !b.nodes[i].kind.is_alloc()).collect();
    let ran_n = tasks.iter().filter(|&&i| ran[i]).count() as u64;
    let failing_ran = tasks
        .iter()
        .filter(|&&i| ran[i] && b.nodes[i].fail.is_some())
        .count() as u64;
    let any_failing = tasks.iter().any(|&i| b.nodes[i].fail.is_some());
    // Running tasks finish: a member that started before the failure ran to its end.
    for &i in &tasks {
        let started = (0..b.nodes[i].members.len()).any(|m| {
            let s = rr.rec(i, m).start.load(Ordering::SeqCst);
            s != 0 && s < fail_seq
        });
        if started {
            t.cancel_running += 1;
            if !ran[i] {
                errs.push(format!(
                    "n{i} was running at the failure but did not finish"
                ));
            }
        }
    }
    check_order(b, &ran, &span, &mut errs);
    if hold_all {
        // Nothing could finish before the failure: at most one member per lane ran, and only
        // tasks that had no task producer.
        let lanes = env.lanes.nl.len() + env.lanes.subs as usize;
        let members: usize = tasks
            .iter()
            .filter(|&&i| ran[i])
            .map(|&i| b.nodes[i].members.len())
            .sum();
        if members > lanes {
            errs.push(format!(
                "{members} members ran although nothing could finish before the failure and there are {lanes} lanes"
            ));
        }
        for &i in &tasks {
            if ran[i] {
                if let Some(p) = b.nodes[i]
                    .req
                    .keys()
                    .find(|&&p| !b.nodes[p].kind.is_alloc())
                {
                    errs.push(format!(
                        "n{i} ran after the failure although its producer n{p} could not have finished before it"
                    ));
                }
            }
        }
    }
    match env.run_stats(b.run_id) {
        None => errs.push("run stats unavailable".into()),
        Some(s) => {
            let total = s.completed + s.failed + s.cancelled;
            let exp_completed = ran_n - failing_ran;
            let ok = s.completed == exp_completed
                && total == tasks.len() as u64
                && s.live_slots == 0
                && s.done == 1
                && if any_failing {
                    s.failed >= failing_ran
                } else {
                    s.failed == 0 && s.cancelled == tasks.len() as u64 - ran_n
                };
            if !ok {
                errs.push(format!(
                    "run stats {s:?}: expected completed {exp_completed} (ran and did not fail), completed + failed + cancelled = {} tasks, {}",
                    tasks.len(),
                    if any_failing {
                        format!("failed >= {failing_ran}")
                    } else {
                        format!("failed 0 and cancelled {} (never ran)", tasks.len() as u64 - ran_n)
                    }
                ));
            }
            t.cancelled_tasks += s.cancelled;
        }
    }
    if !errs.is_empty() {
        errs.truncate(25);
        return Err(errs.join("\n"));
    }
    env.release(b.run_id)?;
    LAST_RELEASED.store(b.run_id, Ordering::Relaxed);
    // SAFETY: allocated by Box::into_raw in `cancelled_run`; the run is done.
    drop(unsafe { Box::from_raw(b.rr as *mut RunRec) });
    env.check_reclaimed()
}

// ---------------------------------------------------------------------------------------
// Tests: parts 1 and 2

fn std_cfg() -> WorkerConfig {
    cfg(4 << 20, 16384, 10_000)
}

/// Part 1: random graphs with failing nodes, half through the Rust API (gated wiring checks,
/// consumed-producer consumers), half through the C ABI.
#[test]
fn random_failing_dags() {
    let _g = serial();
    let t0 = Instant::now();
    let envs = vec![
        Env::new_rust("R", lanes_a(), std_cfg()),
        Env::new_c("C", lanes_a(), std_cfg()),
    ];
    let mut t = Totals::default();
    let runs = fault_runs();
    for seed in run_seeds(1, runs) {
        let env = &envs[(seed >> 7) as usize % 2];
        let b = match build_failing(env, seed, false, false, &mut t) {
            Ok(b) => b,
            Err(x) => fail_test("random_failing_dags", &x.0, x.1.as_ref(), envs),
        };
        if let Err(m) = check_failing(env, &b, &mut t) {
            fail_test("random_failing_dags", &m, Some(&b), envs);
        }
    }
    report("random_failing_dags", &t, t0);
    if !replaying() && runs >= 300 {
        // The interesting paths were taken (else the checks above proved little).
        assert!(
            t.failing_ran > 0 && t.poisoned_must > 0,
            "no failure was propagated"
        );
        assert!(
            t.first_rc > 0 && t.first_msg > 0,
            "first failure not checked both ways"
        );
        assert!(
            t.consumed_dep > 0 && t.consumed_read > 0,
            "no consumer of a consumed failed producer"
        );
        assert!(
            t.exact_poison_checks > 0 && t.hostile_snap > 0,
            "no gated run"
        );
        assert!(t.c_runs > 0 && t.c_runs < t.runs);
    }
}

/// Part 2: orchestration failing at a random op, through the three ways to fail it; each
/// failed run is followed by a successful one on the same worker.
#[test]
fn orchestration_failure_cancels_unstarted() {
    let _g = serial();
    let t0 = Instant::now();
    let envs = vec![
        Env::new_rust("R", lanes_a(), std_cfg()),
        Env::new_c("C", lanes_a(), std_cfg()),
    ];
    let mut t = Totals::default();
    for seed in run_seeds(2, (fault_runs() / 4).max(1)) {
        let via = match seed % 3 {
            0 => CancelVia::RustFail,
            1 => CancelVia::CFail,
            _ => CancelVia::CCallback,
        };
        let env = &envs[matches!(via, CancelVia::CFail | CancelVia::CCallback) as usize];
        if let Err(x) = cancelled_run(env, seed, via, &mut t) {
            fail_test(
                "orchestration_failure_cancels_unstarted",
                &x.0,
                x.1.as_ref(),
                envs,
            );
        }
    }
    report("orchestration_failure_cancels_unstarted", &t, t0);
    if !replaying() && fault_runs() >= 300 {
        assert!(t.cancelled_tasks > 0 && t.cancel_running > 0 && t.cancel_via.len() == 3);
    }
}

/// Part 3 (late invalid arguments): in gated runs, every corruption of several random
/// tasks is refused with the right status and leaves worker and run stats untouched; the
/// run then completes normally with exact counts.
#[test]
fn late_invalid_arguments_leave_nothing() {
    let _g = serial();
    let t0 = Instant::now();
    let envs = vec![
        Env::new_rust("R", lanes_a(), std_cfg()),
        Env::new_c("C", lanes_a(), std_cfg()),
    ];
    let mut t = Totals::default();
    for seed in run_seeds(3, (fault_runs() / 30).max(2)) {
        let env = &envs[(seed & 1) as usize];
        let b = match build_failing(env, seed, true, true, &mut t) {
            Ok(b) => b,
            Err(x) => fail_test(
                "late_invalid_arguments_leave_nothing",
                &x.0,
                x.1.as_ref(),
                envs,
            ),
        };
        if let Err(m) = check_failing(env, &b, &mut t) {
            fail_test("late_invalid_arguments_leave_nothing", &m, Some(&b), envs);
        }
    }
    report("late_invalid_arguments_leave_nothing", &t, t0);
    if !replaying() {
        assert_eq!(
            t.hostile_kinds.len(),
            ALL_CORRUPT.len(),
            "corruptions tried: {:?}",
            t.hostile_kinds
        );
    }
}

// ---------------------------------------------------------------------------------------
// Hand-written tasks for the directed tests

fn member(
    rr: &RunRec,
    node: usize,
    m: usize,
    tensors: Vec<Tensor>,
    deps: Vec<Dep>,
    mode: u64,
    hold: bool,
) -> Member {
    Member {
        bufs: vec![0; tensors.len()],
        tensors,
        deps,
        scalars: [
            rr as *const RunRec as u64,
            node as u64,
            m as u64,
            0,
            mode,
            hold as u64,
        ],
    }
}

fn dep(h: TaskHandle, retain: bool) -> Dep {
    Dep {
        handle: h,
        kind: if retain {
            DepKind::Retain
        } else {
            DepKind::Wait
        } as u32,
        reserved: 0,
    }
}

/// Submit one SUB task of `node` (member 0).
fn sub1(
    o: &mut Orch<'_>,
    rr: &RunRec,
    node: usize,
    tensors: Vec<Tensor>,
    deps: Vec<Dep>,
    mode: u64,
    hold: bool,
) -> Result<TaskHandle, String> {
    let mut m = member(rr, node, 0, tensors, deps, mode, hold);
    let args = [m.args()];
    o.submit(
        SubmitKind::Sub,
        &callable(),
        &args,
        &CallConfig::default(),
        &[],
    )
    .map_err(|e| format!("submit of n{node}: {e:?}"))
}

fn ran(rr: &RunRec, node: usize) -> bool {
    rr.rec(node, 0).count.load(Ordering::SeqCst) > 0
}

fn wait_for(what: &str, secs: u64, mut cond: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        if Instant::now() > deadline {
            return Err(format!("timed out after {secs} s waiting for {what}"));
        }
        std::thread::yield_now();
    }
    Ok(())
}

/// Close, wait, compare (status, completed, failed) and release; on success the RunRec is
/// freed and the worker must be fully reclaimed.
fn finish_directed(
    env: &Env,
    mut o: Orch<'_>,
    run: u64,
    rr: *mut RunRec,
    expect: (Status, u64, u64),
) -> Result<String, String> {
    o.close(run).map_err(|e| format!("close: {e:?}"))?;
    drop(o);
    // SAFETY: `rr` is live until freed below.
    unsafe { &*rr }.open_all();
    let (st, msg) = env.wait(run, RUN_TIMEOUT)?;
    let s = env.run_stats(run).ok_or("run stats unavailable")?;
    if (st, s.completed, s.failed) != expect || s.cancelled != 0 {
        return Err(format!(
            "run ended {st:?} '{msg}' with completed {}, failed {}, cancelled {}; expected {expect:?} and nothing cancelled",
            s.completed, s.failed, s.cancelled
        ));
    }
    env.release(run)?;
    // SAFETY: allocated by Box::into_raw by the caller; the run is done.
    drop(unsafe { Box::from_raw(rr) });
    env.check_reclaimed()?;
    Ok(msg)
}

// ---------------------------------------------------------------------------------------
// Part 3: back-pressure failures leave nothing behind and are recoverable

#[derive(Default, Debug)]
struct BpStats {
    cases: u64,
    same_run: u64,
    new_run: u64,
    cross_ring: u64,
    retries: u64,
    calls: BTreeMap<&'static str, u64>,
}

/// The call that hits the full heap ring / task window: built fresh for each attempt.
#[derive(Clone, Copy, Debug)]
enum BpCall {
    /// SUB task: INPUT on a static buffer, a dep on a blocked task, an auto OUTPUT.
    Sub,
    /// NEXT_LEVEL group: valid members, the last one with the auto OUTPUT.
    NlGroup,
    /// SUB group of two members, each with an auto OUTPUT.
    SubGroup,
    Alloc,
}

fn bp_call(
    o: &mut Orch<'_>,
    env: &Env,
    rr: &RunRec,
    node: usize,
    call: BpCall,
    holder: Option<TaskHandle>,
) -> (Result<(), ApiErr>, bool) {
    let st = |i: usize| env.statics[i].as_ptr() as u64;
    let auto = || tagged(tensor(0, 0, DataType::U8, &[1000], &[]), Tag::Output);
    let input = tagged(tensor(st(3), 8, DataType::U64, &[4], &[]), Tag::Input);
    let deps: Vec<Dep> = holder.map(|h| dep(h, true)).into_iter().collect();
    let (kind, workers, mut ms) = match call {
        BpCall::Alloc => {
            let r = o.alloc(&[777], DataType::U8 as u32).map(|_| ());
            return (r, true);
        }
        BpCall::Sub => (
            SubmitKind::Sub,
            vec![],
            vec![member(
                rr,
                node,
                0,
                vec![input, auto()],
                deps,
                FAIL_NONE,
                false,
            )],
        ),
        BpCall::NlGroup => (
            SubmitKind::NextLevelGroup,
            vec![42, 3],
            vec![
                member(rr, node, 0, vec![input], deps.clone(), FAIL_NONE, false),
                member(rr, node, 1, vec![input, auto()], deps, FAIL_NONE, false),
            ],
        ),
        BpCall::SubGroup => (
            SubmitKind::SubGroup,
            vec![],
            vec![
                member(rr, node, 0, vec![auto()], deps, FAIL_NONE, false),
                member(rr, node, 1, vec![input, auto()], vec![], FAIL_NONE, false),
            ],
        ),
    };
    let args: Vec<TaskArgs> = ms.iter_mut().map(|m| m.args()).collect();
    let r = o
        .submit(kind, &callable(), &args, &CallConfig::default(), &workers)
        .map(|_| ());
    drop(args);
    // Out-parameters are written only on success.
    let untouched = ms.iter().all(|m| {
        m.tensors
            .iter()
            .filter(|t| t.tag == Tag::Output as u32)
            .all(|t| t.data.is_null() == r.is_err())
    });
    (r, untouched)
}

/// Fill a heap ring (`window` false: 8 KiB rings) or the task window (`window` true: 8
/// slots) with blocked work in a nested scope, hit the limit with a random call, check it
/// waited, failed with the seed's message and changed nothing, then recover.
fn backpressure_case(env: &Env, seed: u64, window: bool, bs: &mut BpStats) -> Result<(), String> {
    let mut rng = Rng(seed);
    let rr_p = Box::into_raw(Box::new(RunRec::new(true, false)));
    // SAFETY: just allocated; freed by `finish_directed` (leaked on failure).
    let rr = unsafe { &*rr_p };
    let mut node = 0usize;
    let mut o = env.orch();
    let run = o.begin_run().map_err(|e| format!("begin_run: {e:?}"))?;
    let d = rng.below(4) as usize;
    for _ in 0..=d {
        o.scope_begin().map_err(|e| format!("{e:?}"))?;
    }
    let ring = (d + 1).min(3);
    let mut ok_tasks = 0u64;
    let mut holders = Vec::new();
    let auto = |n: u64| tagged(tensor(0, 0, DataType::U8, &[n], &[]), Tag::Output);
    let cap = 8usize;
    let mut used = 0usize;
    // The heap ring is circular: a reservation never straddles its end, so multi-slab
    // submits must fit before the wrap point (slab position `pos`).
    let mut pos = (env.stats().heap_top[ring] % 8192 / 1024) as usize;
    while used < cap {
        let room = if window {
            cap - used
        } else {
            (cap - used).min(8 - pos)
        };
        let lane = lanes_a().nl[rng.below(3) as usize];
        let (kind, workers, mut ms, units, alloc_first) = match rng.below(5) {
            0 => {
                let t = if window && rng.pct(50) {
                    vec![]
                } else {
                    vec![auto(rng.range(1, 1024))]
                };
                (
                    SubmitKind::Sub,
                    vec![],
                    vec![member(rr, node, 0, t, vec![], FAIL_NONE, false)],
                    1,
                    false,
                )
            }
            1 => {
                let t = if window { vec![] } else { vec![auto(1024)] };
                (
                    SubmitKind::NextLevel,
                    vec![lane],
                    vec![member(rr, node, 0, t, vec![], FAIL_NONE, false)],
                    1,
                    false,
                )
            }
            2 => {
                let g = if window {
                    rng.range(1, 3)
                } else {
                    rng.range(1, room.min(3) as u64)
                } as usize;
                let ms = (0..g)
                    .map(|m| {
                        let t = if window {
                            vec![]
                        } else {
                            vec![auto(rng.range(1, 1024))]
                        };
                        member(rr, node, m, t, vec![], FAIL_NONE, false)
                    })
                    .collect::<Vec<_>>();
                let ws = lanes_a().nl[..g].to_vec();
                (
                    SubmitKind::NextLevelGroup,
                    ws,
                    ms,
                    if window { 1 } else { g },
                    false,
                )
            }
            3 if !window || room >= 2 => (
                SubmitKind::Sub,
                vec![],
                vec![],
                if window { 2 } else { 1 },
                true,
            ),
            _ if !window && room >= 2 => (
                SubmitKind::Sub,
                vec![],
                vec![member(
                    rr,
                    node,
                    0,
                    vec![auto(1024), auto(1)],
                    vec![],
                    FAIL_NONE,
                    false,
                )],
                2,
                false,
            ),
            _ => continue,
        };
        if alloc_first {
            // An alloc() buffer kept alive by a blocked INOUT writer.
            let (p, _) = o
                .alloc(&[rng.range(1, 1024)], DataType::U8 as u32)
                .map_err(|e| format!("alloc: {e:?}"))?;
            ms = vec![member(
                rr,
                node,
                0,
                vec![tagged(
                    tensor(p as u64, 0, DataType::U8, &[1], &[]),
                    Tag::Inout,
                )],
                vec![],
                FAIL_NONE,
                false,
            )];
        }
        let args: Vec<TaskArgs> = ms.iter_mut().map(|m| m.args()).collect();
        let h = o
            .submit(kind, &callable(), &args, &CallConfig::default(), &workers)
            .map_err(|e| format!("filling: submit of n{node}: {e:?}"))?;
        holders.push(h);
        node += 1;
        ok_tasks += 1;
        used += units;
        pos = (pos + units) % 8;
    }
    let s = env.stats();
    if window {
        if s.live_slots != cap as i64 {
            return Err(format!(
                "test setup: {} live slots, expected the window of {cap} full",
                s.live_slots
            ));
        }
    } else if s.heap_top[ring] - s.heap_tail[ring] != 8192 {
        return Err(format!(
            "test setup: heap ring {ring} holds {} bytes, expected 8192",
            s.heap_top[ring] - s.heap_tail[ring]
        ));
    }
    let call = [
        BpCall::Sub,
        BpCall::NlGroup,
        BpCall::SubGroup,
        BpCall::Alloc,
    ][rng.below(4) as usize];
    *bs.calls
        .entry(match call {
            BpCall::Sub => "sub",
            BpCall::NlGroup => "next_level_group",
            BpCall::SubGroup => "sub_group",
            BpCall::Alloc => "alloc",
        })
        .or_insert(0) += 1;
    let holder = holders
        .get(rng.below(holders.len() as u64) as usize)
        .copied();
    let (want, words) = if window {
        (Status::WindowFull, "task window full")
    } else {
        (Status::HeapExhausted, "HeapRing exhausted")
    };
    let before = snap(env, run);
    let t0 = Instant::now();
    let (r, untouched) = bp_call(&mut o, env, rr, node, call, holder);
    let waited = t0.elapsed();
    let after = snap(env, run);
    match &r {
        Err((st, msg)) if *st == want && msg.contains(words) => {}
        other => {
            return Err(format!(
                "{call:?} against a full {}: {other:?}, expected {want:?} '{words} ...'",
                if window { "task window" } else { "heap ring" }
            ))
        }
    }
    if waited < Duration::from_millis(40) {
        return Err(format!(
            "{call:?} failed after {waited:?}, before the 50 ms back-pressure timeout"
        ));
    }
    if !untouched {
        return Err(format!(
            "{call:?} failed but wrote an auto-allocated address back"
        ));
    }
    if before != after {
        return Err(format!("LEFT BEHIND: {call:?} failed with {want:?} but changed the stats:\n  before {before:?}\n  after  {after:?}"));
    }
    if !window && ring < 3 {
        // Back-pressure is per ring: a deeper scope's ring still has room.
        o.scope_begin().map_err(|e| format!("{e:?}"))?;
        let h = sub1(
            &mut o,
            rr,
            node + 1,
            vec![auto(1024)],
            vec![],
            FAIL_NONE,
            false,
        )
        .map_err(|e| {
            format!(
                "heap ring {} should have room while ring {ring} is full: {e}",
                ring + 1
            )
        })?;
        let _ = h;
        o.scope_end().map_err(|e| format!("{e:?}"))?;
        ok_tasks += 1;
        bs.cross_ring += 1;
    }
    let node = node + 2;
    let is_task = !matches!(call, BpCall::Alloc);
    if rng.pct(50) {
        // Let the blocked work drain and submit again in the same run.
        o.scope_end().map_err(|e| format!("{e:?}"))?;
        rr.open_all();
        let t1 = Instant::now();
        loop {
            o.scope_begin().map_err(|e| format!("{e:?}"))?;
            let (r, untouched) = bp_call(&mut o, env, rr, node, call, holder);
            o.scope_end().map_err(|e| format!("{e:?}"))?;
            if !untouched {
                return Err(format!(
                    "retry of {call:?}: out-parameters inconsistent with {r:?}"
                ));
            }
            match r {
                Ok(()) => break,
                Err((st, _)) if st == want && t1.elapsed() < Duration::from_secs(10) => {
                    bs.retries += 1
                }
                Err(e) => {
                    return Err(format!(
                        "retry of {call:?} after the blocked work drained: {e:?}"
                    ))
                }
            }
        }
        for _ in 0..d {
            o.scope_end().map_err(|e| format!("{e:?}"))?;
        }
        ok_tasks += is_task as u64;
        finish_directed(env, o, run, rr_p, (Status::Ok, ok_tasks, 0))?;
        bs.same_run += 1;
    } else {
        // Close the run and start another.
        for _ in 0..=d {
            o.scope_end().map_err(|e| format!("{e:?}"))?;
        }
        drop(o);
        let o = env.orch();
        let rr2 = Box::into_raw(Box::new(RunRec::new(false, false)));
        finish_directed(env, o, run, rr_p, (Status::Ok, ok_tasks, 0))?;
        let mut o = env.orch();
        let run2 = o.begin_run().map_err(|e| format!("begin_run: {e:?}"))?;
        for _ in 0..=d {
            o.scope_begin().map_err(|e| format!("{e:?}"))?;
        }
        // SAFETY: just allocated; freed by `finish_directed`.
        let (r, _) = bp_call(&mut o, env, unsafe { &*rr2 }, 0, call, None);
        r.map_err(|e| format!("{call:?} in a new run after the full one closed: {e:?}"))?;
        for _ in 0..=d {
            o.scope_end().map_err(|e| format!("{e:?}"))?;
        }
        finish_directed(env, o, run2, rr2, (Status::Ok, is_task as u64, 0))?;
        bs.new_run += 1;
    }
    bs.cases += 1;
    Ok(())
}

/// Heap rings of 8 KiB, 50 ms timeout.
#[test]
fn heap_exhaustion_leaves_nothing_and_recovers() {
    let _g = serial();
    let t0 = Instant::now();
    let env = Env::new_c("H", lanes_a(), cfg(8192, 4096, 50));
    let mut bs = BpStats::default();
    for seed in run_seeds(4, (fault_runs() / 200).clamp(4, 40)) {
        if let Err(m) = backpressure_case(&env, seed, false, &mut bs) {
            fail_test(
                "heap_exhaustion_leaves_nothing_and_recovers",
                &format!("seed {seed:#x} (replay with DAGRT_FAULT_ONLY={seed:#x}): {m}"),
                None,
                vec![env],
            );
        }
    }
    println!(
        "heap_exhaustion_leaves_nothing_and_recovers: {bs:?} in {:.2?}",
        t0.elapsed()
    );
    if !replaying() {
        assert!(bs.same_run > 0 && bs.new_run > 0 && bs.cross_ring > 0);
    }
}

/// A task window of 8 slots, 50 ms timeout.
#[test]
fn window_full_leaves_nothing_and_recovers() {
    let _g = serial();
    let t0 = Instant::now();
    let env = Env::new_c("W", lanes_a(), cfg(4 << 20, 8, 50));
    let mut bs = BpStats::default();
    for seed in run_seeds(5, (fault_runs() / 200).clamp(4, 40)) {
        if let Err(m) = backpressure_case(&env, seed, true, &mut bs) {
            fail_test(
                "window_full_leaves_nothing_and_recovers",
                &format!("seed {seed:#x} (replay with DAGRT_FAULT_ONLY={seed:#x}): {m}"),
                None,
                vec![env],
            );
        }
    }
    println!(
        "window_full_leaves_nothing_and_recovers: {bs:?} in {:.2?}",
        t0.elapsed()
    );
    if !replaying() {
        assert!(bs.same_run > 0 && bs.new_run > 0);
    }
}

// ---------------------------------------------------------------------------------------
// Directed: consumers of failed producers that were already consumed

/// A producer in a nested scope fails; the scope ends and the engine consumes it; only then
/// are its consumers submitted. Through the TensorMap (INPUT / INOUT of its output), by
/// handle (`add_dep`, `add_dep_wait`) and transitively they must be poisoned; a task on
/// other data runs. Both APIs, with and without a heap slab on the producer.
#[test]
fn consumer_of_consumed_failed_producer_is_poisoned() {
    let _g = serial();
    let envs = vec![
        Env::new_rust("R", lanes_a(), std_cfg()),
        Env::new_c("C", lanes_a(), std_cfg()),
    ];
    let mut cases = 0;
    for env in &envs {
        for with_heap in [false, true] {
            let r = (|| -> Result<(), String> {
                let rr_p = Box::into_raw(Box::new(RunRec::new(false, false)));
                // SAFETY: just allocated; freed by `finish_directed` (leaked on failure).
                let rr = unsafe { &*rr_p };
                let f0 = env.statics[3].as_ptr() as u64;
                let f1 = env.statics[4].as_ptr() as u64;
                let mut o = env.orch();
                let run = o.begin_run().map_err(|e| format!("{e:?}"))?;
                o.scope_begin().map_err(|e| format!("{e:?}"))?;
                let mut pt = vec![tagged(
                    tensor(f0, 0, DataType::U64, &[8], &[]),
                    Tag::OutputExisting,
                )];
                if with_heap {
                    pt.push(tagged(tensor(0, 0, DataType::U64, &[16], &[]), Tag::Output));
                }
                let p = sub1(&mut o, rr, 0, pt, vec![], FAIL_RC, false)?;
                o.scope_end().map_err(|e| format!("{e:?}"))?;
                wait_for("the failed producer to be consumed", 10, || {
                    env.run_stats(run)
                        .is_some_and(|s| s.failed == 1 && s.live_slots == 0)
                })?;
                let rd = |off: u64, n: u64, tag: Tag| {
                    tagged(tensor(f0, off, DataType::U64, &[n], &[]), tag)
                };
                let c1 = sub1(
                    &mut o,
                    rr,
                    1,
                    vec![rd(16, 2, Tag::Input)],
                    vec![],
                    FAIL_NONE,
                    false,
                )?;
                sub1(&mut o, rr, 2, vec![], vec![dep(p, true)], FAIL_NONE, false)?;
                sub1(&mut o, rr, 3, vec![], vec![dep(p, false)], FAIL_NONE, false)?;
                let other = tagged(tensor(f1, 0, DataType::U64, &[16], &[]), Tag::Input);
                sub1(&mut o, rr, 4, vec![other], vec![], FAIL_NONE, false)?;
                sub1(&mut o, rr, 5, vec![], vec![dep(c1, true)], FAIL_NONE, false)?;
                sub1(
                    &mut o,
                    rr,
                    6,
                    vec![rd(56, 1, Tag::Inout)],
                    vec![],
                    FAIL_NONE,
                    false,
                )?;
                let msg = finish_directed(env, o, run, rr_p, (Status::TaskFailed, 1, 6))?;
                if !contains_int(&msg, fault_rc(0, 0) as i64) {
                    return Err(format!(
                        "the run's message '{msg}' is not the producer's failure"
                    ));
                }
                Ok(())
            })();
            if let Err(m) = r {
                fail_test(
                    "consumer_of_consumed_failed_producer_is_poisoned",
                    &format!(
                        "{} API, producer {} a heap slab: {m}",
                        env.backend(),
                        if with_heap { "with" } else { "without" }
                    ),
                    None,
                    envs,
                );
            }
            cases += 1;
        }
    }
    assert_eq!(cases, 4);
}

/// A consumer submitted right as its failed producer is being consumed (the producer's scope
/// already ended): whatever the interleaving, the consumer must never run. The consumer is
/// submitted a random 0-10 us (mostly 0.5-3.5 us) after the producer's executor returned,
/// which lands some attaches between the producer's CONSUMED transition and the bookkeeping
/// that remembers its failure.
#[test]
fn consumer_racing_consumption_of_failed_producer_is_poisoned() {
    let _g = serial();
    let t0 = Instant::now();
    // Leaked if the test panics: dropping it would wait for a run that may never finish.
    let env = std::mem::ManuallyDrop::new(Env::new_rust("X", lanes_a(), std_cfg()));
    let iters = (3 * fault_runs()).max(200);
    let per_run = 200u64;
    let mut rng = Rng(base_seed() ^ 0x4ACE);
    let mut escaped = Vec::new();
    let mut done = 0u64;
    let f2 = env.statics[5].as_ptr() as u64;
    while done < iters {
        let n = per_run.min(iters - done);
        let rr_p = Box::into_raw(Box::new(RunRec::sized(false, false, 2 * n as usize)));
        // SAFETY: just allocated; freed by `finish_directed` (leaked on failure).
        let rr = unsafe { &*rr_p };
        let mut o = env.orch();
        let run = o.begin_run().expect("begin_run");
        let mut variants = Vec::new();
        for i in 0..n as usize {
            let byte = (i % 128) as u64;
            let cell = |tag| tagged(tensor(f2, byte, DataType::U8, &[], &[]), tag);
            o.scope_begin().expect("scope_begin");
            let mut m = member(
                rr,
                2 * i,
                0,
                vec![cell(Tag::OutputExisting)],
                vec![],
                FAIL_RC,
                false,
            );
            m.scalars[3] = rng.range(0, 3000);
            let args = [m.args()];
            let p = o
                .submit(
                    SubmitKind::Sub,
                    &callable(),
                    &args,
                    &CallConfig::default(),
                    &[],
                )
                .expect("producer");
            o.scope_end().expect("scope_end");
            let end = &rr.rec(2 * i, 0).end;
            if let Err(m) = wait_for("the producer to run", 10, || {
                end.load(Ordering::SeqCst) != 0
            }) {
                panic!("consumer_racing_consumption_of_failed_producer_is_poisoned: {m}");
            }
            // Most delays where the window was observed on this machine (0.8-3.5 us).
            let delay = Duration::from_nanos(if rng.pct(75) {
                rng.range(500, 3500)
            } else {
                rng.below(10_000)
            });
            let t = Instant::now();
            while t.elapsed() < delay {
                std::hint::spin_loop();
            }
            let v = rng.below(4);
            let (tensors, deps) = match v {
                0 => (vec![], vec![dep(p, true)]),
                1 => (vec![], vec![dep(p, false)]),
                2 => (vec![cell(Tag::Input)], vec![]),
                _ => (vec![cell(Tag::Inout)], vec![dep(p, false)]),
            };
            if let Err(m) = sub1(&mut o, rr, 2 * i + 1, tensors, deps, FAIL_NONE, false) {
                panic!("consumer_racing_consumption_of_failed_producer_is_poisoned: {m}");
            }
            variants.push((v, delay));
        }
        o.close(run).expect("close");
        drop(o);
        let res = env.wait(run, RUN_TIMEOUT);
        for (i, &(v, delay)) in variants.iter().enumerate() {
            if ran(rr, 2 * i + 1) {
                escaped.push(format!(
                    "run {run} iteration {i}: consumer by {} submitted {delay:?} after the producer returned RAN",
                    ["add_dep", "add_dep_wait", "INPUT of its output", "INOUT + add_dep_wait"][v as usize]
                ));
            }
        }
        match res {
            Ok((Status::TaskFailed, _)) => {}
            other => panic!(
                "consumer_racing_consumption_of_failed_producer_is_poisoned: run {run} ended {other:?}"
            ),
        }
        let s = env.run_stats(run).expect("stats");
        env.release(run).expect("release");
        // SAFETY: the run is done; no executor reads the RunRec any more.
        drop(unsafe { Box::from_raw(rr_p) });
        if escaped.is_empty() && (s.completed, s.failed) != (0, 2 * n) {
            panic!(
                "consumer_racing_consumption_of_failed_producer_is_poisoned: run {run}: stats {s:?}, expected 0 completed and {} failed",
                2 * n
            );
        }
        done += n;
    }
    if let Err(m) = env.check_reclaimed() {
        panic!("consumer_racing_consumption_of_failed_producer_is_poisoned: {m}");
    }
    println!(
        "consumer_racing_consumption_of_failed_producer_is_poisoned: {iters} producer/consumer pairs in {:.2?}, {} consumers escaped",
        t0.elapsed(),
        escaped.len()
    );
    assert!(
        escaped.is_empty(),
        "MISSED POISONING: {} of {iters} consumers of a failed producer ran:\n{}",
        escaped.len(),
        escaped
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    drop(std::mem::ManuallyDrop::into_inner(env));
}

// ---------------------------------------------------------------------------------------
// Directed: a failed writer poisons the readers of its data, and only them

/// Which of `nodes` ran, as a readable list.
fn ran_list(rr: &RunRec, nodes: &[(usize, &str)]) -> String {
    nodes
        .iter()
        .map(|&(n, name)| format!("{name}: {}", if ran(rr, n) { "ran" } else { "never ran" }))
        .collect::<Vec<_>>()
        .join(", ")
}

/// W writes F0[0..64) and fails; later V rewrites F0[0..32) and succeeds. R reads F0[0..32):
/// every byte it reads was written by V, so R must run (element-set model); Rc reads
/// F0[32..40), which W wrote, and must not. Once with W already failed when V, R, Rc are
/// submitted, once with W still running.
#[test]
fn failed_writer_overwritten_does_not_poison_readers_of_new_data() {
    let _g = serial();
    let env = Env::new_c("O", lanes_a(), std_cfg());
    let f0 = env.statics[3].as_ptr() as u64;
    let v = |off: u64, n: u64, tag: Tag| tagged(tensor(f0, off, DataType::U64, &[n], &[]), tag);
    let mut bad = Vec::new();
    for w_done in [true, false] {
        let rr_p = Box::into_raw(Box::new(RunRec::new(false, false)));
        // SAFETY: just allocated; freed by `finish_directed` (leaked on failure).
        let rr = unsafe { &*rr_p };
        let mut o = env.orch();
        let run = o.begin_run().expect("begin_run");
        sub1(
            &mut o,
            rr,
            0,
            vec![v(0, 8, Tag::OutputExisting)],
            vec![],
            FAIL_RC,
            !w_done,
        )
        .expect("W");
        if w_done {
            wait_for("W to fail", 10, || {
                env.run_stats(run).is_some_and(|s| s.failed == 1)
            })
            .expect("W fails");
        }
        sub1(
            &mut o,
            rr,
            1,
            vec![v(0, 4, Tag::OutputExisting)],
            vec![],
            FAIL_NONE,
            false,
        )
        .expect("V");
        sub1(
            &mut o,
            rr,
            2,
            vec![v(0, 4, Tag::Input)],
            vec![],
            FAIL_NONE,
            false,
        )
        .expect("R");
        sub1(
            &mut o,
            rr,
            3,
            vec![v(32, 1, Tag::Input)],
            vec![],
            FAIL_NONE,
            false,
        )
        .expect("Rc");
        let r = finish_directed(&env, o, run, rr_p, (Status::TaskFailed, 2, 2));
        if let Err(m) = r {
            bad.push(format!(
                "W {} when V, R, Rc were submitted: {m}; {}",
                if w_done {
                    "already failed"
                } else {
                    "still running"
                },
                ran_list(rr, &[(0, "W"), (1, "V"), (2, "R"), (3, "Rc")])
            ));
        }
    }
    if !bad.is_empty() {
        fail_test(
            "failed_writer_overwritten_does_not_poison_readers_of_new_data",
            &format!(
                "EXTRA POISONING: expected W failed, V ran, R ran (it reads only bytes V rewrote), Rc poisoned\n{}",
                bad.join("\n")
            ),
            None,
            vec![env],
        );
    }
}

/// W writes bytes {0, 3} of F0 (u8, stride 3) and fails; R reads bytes {1, 5} (u8, stride 4
/// from offset 1): no byte in common, so R must run; Rc reads byte 3 and must not.
///
/// Known limitation, kept as a target: strides 3 and 4 do not divide each other, so the
/// overlap test cannot decide these views exactly and answers "overlap" (an extra edge,
/// never a missing one, as the engine issue allows), which poisons R.
#[test]
#[ignore = "conservative overlap for non-dividing strides: an extra edge poisons R"]
fn failed_writer_does_not_poison_disjoint_interleaved_reader() {
    let _g = serial();
    let env = Env::new_c("I", lanes_a(), std_cfg());
    let f0 = env.statics[3].as_ptr() as u64;
    let rr_p = Box::into_raw(Box::new(RunRec::new(false, false)));
    // SAFETY: just allocated; freed by `finish_directed` (leaked on failure).
    let rr = unsafe { &*rr_p };
    let mut o = env.orch();
    let run = o.begin_run().expect("begin_run");
    let w = tagged(tensor(f0, 0, DataType::U8, &[2], &[3]), Tag::OutputExisting);
    let r = tagged(tensor(f0, 1, DataType::U8, &[2], &[4]), Tag::Input);
    let rc = tagged(tensor(f0, 3, DataType::U8, &[], &[]), Tag::Input);
    sub1(&mut o, rr, 0, vec![w], vec![], FAIL_RC, true).expect("W");
    sub1(&mut o, rr, 1, vec![r], vec![], FAIL_NONE, false).expect("R");
    sub1(&mut o, rr, 2, vec![rc], vec![], FAIL_NONE, false).expect("Rc");
    if let Err(m) = finish_directed(&env, o, run, rr_p, (Status::TaskFailed, 1, 2)) {
        let l = ran_list(rr, &[(0, "W"), (1, "R"), (2, "Rc")]);
        fail_test(
            "failed_writer_does_not_poison_disjoint_interleaved_reader",
            &format!("EXTRA POISONING: expected W failed, R ran (bytes 1,5 vs W's 0,3), Rc poisoned: {m}; {l}"),
            None,
            vec![env],
        );
    }
}

/// Heap rings of one 1 KiB slab. In a nested scope, A = alloc(1 KiB) and W writes A's upper
/// half (INOUT, so A lives until W ends) and fails; the scope ends and both are consumed, so
/// A's slab is free. In a new scope B = alloc(768 B) reuses the slab; R reads B[512..520):
/// a fresh buffer only B produced, so R must run. The control run has W succeed.
#[test]
fn failed_writer_on_reclaimed_heap_does_not_poison_new_buffer() {
    let _g = serial();
    // Leaked if the test panics: dropping it would wait for a run that may never finish.
    let env = std::mem::ManuallyDrop::new(Env::new_c("M", lanes_a(), cfg(1024, 1024, 2_000)));
    let mut bad = Vec::new();
    for w_fails in [false, true] {
        let rr_p = Box::into_raw(Box::new(RunRec::new(false, false)));
        // SAFETY: just allocated; freed by `finish_directed` (leaked on failure).
        let rr = unsafe { &*rr_p };
        let mut o = env.orch();
        let run = o.begin_run().expect("begin_run");
        o.scope_begin().expect("scope_begin");
        let (a, _) = o.alloc(&[128], DataType::U64 as u32).expect("alloc A");
        let w = tagged(tensor(a as u64, 512, DataType::U64, &[64], &[]), Tag::Inout);
        let mode = if w_fails { FAIL_RC } else { FAIL_NONE };
        sub1(&mut o, rr, 0, vec![w], vec![], mode, false).expect("W");
        o.scope_end().expect("scope_end");
        wait_for("A and W to be consumed", 10, || {
            env.run_stats(run).is_some_and(|s| s.live_slots == 0) && {
                let s = env.stats();
                s.heap_top[1] == s.heap_tail[1]
            }
        })
        .expect("reclaimed");
        o.scope_begin().expect("scope_begin");
        let (b, _) = o.alloc(&[96], DataType::U64 as u32).expect("alloc B");
        assert_eq!(b, a, "test setup: B did not reuse A's slab");
        let r = tagged(tensor(b as u64, 512, DataType::U64, &[], &[]), Tag::Input);
        sub1(&mut o, rr, 1, vec![r], vec![], FAIL_NONE, false).expect("R");
        o.scope_end().expect("scope_end");
        let expect = if w_fails {
            (Status::TaskFailed, 1, 1)
        } else {
            (Status::Ok, 2, 0)
        };
        if let Err(m) = finish_directed(&env, o, run, rr_p, expect) {
            bad.push(format!(
                "W {}: {m}; {}",
                if w_fails {
                    "fails"
                } else {
                    "succeeds (control)"
                },
                ran_list(rr, &[(0, "W"), (1, "R")])
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "EXTRA POISONING: R reads only the new buffer B and must run whatever W did\n{}",
        bad.join("\n")
    );
    drop(std::mem::ManuallyDrop::into_inner(env));
}

// ---------------------------------------------------------------------------------------
// Directed: cancellation leaves no ready-queue entry that can dispatch another task

/// Run 1: T0 holds lane 17, T1 holds lane 3, T2 (lane 3) waits READY in lane 3's FIFO; the
/// submission fails, so T2 is cancelled and its slot freed. Run 2: T3 (lane 17) takes the
/// freed table entry and waits READY behind T0. T1 is released, lane 3 becomes idle. T3 must
/// run on lane 17 (its target), once, seeing its own slot id, after T0.
#[test]
fn cancelled_ready_task_leaves_no_queue_entry_behind() {
    let _g = serial();
    // Leaked if the test panics: dropping it would wait for a run that may never finish.
    let env = std::mem::ManuallyDrop::new(Env::new_rust(
        "Q",
        Lanes {
            nl: vec![3, 17],
            subs: 1,
        },
        std_cfg(),
    ));
    let e = env.engine().expect("Rust API").clone();
    let ra = Box::into_raw(Box::new(RunRec::new(false, false)));
    let rb = Box::into_raw(Box::new(RunRec::new(false, false)));
    let rc = Box::into_raw(Box::new(RunRec::new(false, false)));
    // SAFETY: allocated above, freed at the end once every run is done (leaked on failure).
    let (a, b, c) = unsafe { (&*ra, &*rb, &*rc) };
    let nl1 = |o: &mut Orch<'_>, rr: &RunRec, node: usize, lane: i32, hold: bool| {
        let mut m = member(rr, node, 0, vec![], vec![], FAIL_NONE, hold);
        let args = [m.args()];
        o.submit(
            SubmitKind::NextLevel,
            &callable(),
            &args,
            &CallConfig::default(),
            &[lane],
        )
        .expect("submit")
    };
    let mut o = env.orch();
    let run1 = o.begin_run().expect("begin_run");
    nl1(&mut o, a, 0, 17, true);
    nl1(&mut o, b, 0, 3, true);
    wait_for("T0 and T1 to start", 10, || ran(a, 0) && ran(b, 0)).expect("lanes busy");
    let t2 = nl1(&mut o, c, 2, 3, false);
    o.fail(run1, "cancel T2").expect("fail_run_submission");
    let queued_after_cancel = dagrt::scheduler::queued(&e);
    let run2 = o.begin_run().expect("begin_run");
    let t3 = nl1(&mut o, c, 3, 17, false);
    o.close(run2).expect("close");
    drop(o);
    let reused = (t3.slot & ((1 << 24) - 1)) == (t2.slot & ((1 << 24) - 1));
    b.hold_open.store(true, Ordering::Release);
    wait_for("T1 to end", 10, || {
        b.rec(0, 0).end.load(Ordering::SeqCst) != 0
    })
    .expect("T1 ends");
    std::thread::sleep(Duration::from_millis(20));
    let early = ran(c, 3);
    a.hold_open.store(true, Ordering::Release);
    let r1 = env.wait(run1, RUN_TIMEOUT);
    let r2 = env.wait(run2, RUN_TIMEOUT);
    let rec = c.rec(3, 0);
    let (w, seen, count) = (
        rec.worker.load(Ordering::SeqCst),
        rec.slot.load(Ordering::SeqCst),
        rec.count.load(Ordering::SeqCst),
    );
    let mut errs = Vec::new();
    if !reused {
        errs.push(format!(
            "test setup: T3 (slot {}) did not reuse T2's table entry (slot {})",
            t3.slot, t2.slot
        ));
    }
    if early {
        errs.push(format!(
            "T3 (target lane 17, busy with T0) ran while T0 was still running: dispatched through T2's stale entry in lane 3's FIFO \
             ({queued_after_cancel} ready-queue entries were left after the cancellation)"
        ));
    }
    if count != 1 || w != 17 || seen != t3.slot {
        errs.push(format!(
            "T3 ran {count} time(s) on worker {w} seeing slot {seen}; expected once on worker 17 seeing its slot {} (T2's was {})",
            t3.slot, t2.slot
        ));
    }
    if !matches!(r1, Ok((Status::OrchestrationFailed, _))) || !matches!(r2, Ok((Status::Ok, _))) {
        errs.push(format!(
            "run 1 ended {r1:?} (expected ORCHESTRATION_FAILED), run 2 {r2:?} (expected OK)"
        ));
    }
    if errs.is_empty() {
        for run in [run1, run2] {
            env.release(run).expect("release");
        }
        if let Err(m) = env.check_reclaimed() {
            errs.push(m);
        }
    }
    assert!(errs.is_empty(), "{}", errs.join("\n"));
    // SAFETY: both runs are done: no executor reads these records any more.
    unsafe {
        drop(Box::from_raw(ra));
        drop(Box::from_raw(rb));
        drop(Box::from_raw(rc));
    }
    drop(std::mem::ManuallyDrop::into_inner(env));
}

/// Cancelled group entries must not hold back later runs. Run 1: H holds NEXT_LEVEL lane 3
/// and SUB lane A; group G1 = [3, 17] and SUB group G2 (2 lanes) wait READY at the heads of
/// the group and SUB FIFOs; the submission fails, so both are cancelled. Run 2: S1 targets
/// the idle lane 17 and S2 is a SUB single with SUB lane B idle: both must run while H is
/// still holding, since nothing that is still alive is queued ahead of them.
#[test]
fn cancelled_group_entries_do_not_block_later_runs() {
    let _g = serial();
    // Leaked if the test panics: dropping it would wait for a run that may never finish.
    let env = std::mem::ManuallyDrop::new(Env::new_c(
        "G",
        Lanes {
            nl: vec![3, 17],
            subs: 2,
        },
        std_cfg(),
    ));
    let ra = Box::into_raw(Box::new(RunRec::new(false, false)));
    let rb = Box::into_raw(Box::new(RunRec::new(false, false)));
    // SAFETY: allocated above, freed at the end once every run is done (leaked on failure).
    let (a, b) = unsafe { (&*ra, &*rb) };
    let mut o = env.orch();
    let run1 = o.begin_run().expect("begin_run");
    let mut hold_nl = member(a, 0, 0, vec![], vec![], FAIL_NONE, true);
    let args = [hold_nl.args()];
    o.submit(
        SubmitKind::NextLevel,
        &callable(),
        &args,
        &CallConfig::default(),
        &[3],
    )
    .expect("H on lane 3");
    sub1(&mut o, a, 1, vec![], vec![], FAIL_NONE, true).expect("H on a SUB lane");
    wait_for("H to start on both lanes", 10, || ran(a, 0) && ran(a, 1)).expect("H runs");
    let mut g1: Vec<Member> = (0..2)
        .map(|m| member(b, 2, m, vec![], vec![], FAIL_NONE, false))
        .collect();
    let args: Vec<TaskArgs> = g1.iter_mut().map(|m| m.args()).collect();
    o.submit(
        SubmitKind::NextLevelGroup,
        &callable(),
        &args,
        &CallConfig::default(),
        &[3, 17],
    )
    .expect("G1");
    let mut g2: Vec<Member> = (0..2)
        .map(|m| member(b, 3, m, vec![], vec![], FAIL_NONE, false))
        .collect();
    let args: Vec<TaskArgs> = g2.iter_mut().map(|m| m.args()).collect();
    o.submit(
        SubmitKind::SubGroup,
        &callable(),
        &args,
        &CallConfig::default(),
        &[],
    )
    .expect("G2");
    o.fail(run1, "cancel the groups")
        .expect("fail_run_submission");
    let run2 = o.begin_run().expect("begin_run");
    let mut s1 = member(b, 4, 0, vec![], vec![], FAIL_NONE, false);
    let args = [s1.args()];
    o.submit(
        SubmitKind::NextLevel,
        &callable(),
        &args,
        &CallConfig::default(),
        &[17],
    )
    .expect("S1 on lane 17");
    sub1(&mut o, b, 5, vec![], vec![], FAIL_NONE, false).expect("S2");
    o.close(run2).expect("close");
    drop(o);
    let mut errs = Vec::new();
    let started = wait_for("S1 and S2 to run", 2, || ran(b, 4) && ran(b, 5));
    let queued = env.stats().ready_queued;
    if started.is_err() {
        errs.push(format!(
            "while H holds lane 3 and one SUB lane, S1 (idle lane 17) {} and S2 (one SUB lane idle) {}; \
             {queued} entries queued: the cancelled groups G1/G2 still head their FIFOs",
            if ran(b, 4) { "ran" } else { "did not run" },
            if ran(b, 5) { "ran" } else { "did not run" },
        ));
    }
    a.hold_open.store(true, Ordering::Release);
    let r1 = env.wait(run1, RUN_TIMEOUT);
    let r2 = env.wait(run2, RUN_TIMEOUT);
    if ran(b, 2) || ran(b, 3) {
        errs.push("a cancelled group ran".into());
    }
    if !matches!(r1, Ok((Status::OrchestrationFailed, _))) || !matches!(r2, Ok((Status::Ok, _))) {
        errs.push(format!(
            "run 1 ended {r1:?} (expected ORCHESTRATION_FAILED), run 2 {r2:?} (expected OK)"
        ));
    }
    if errs.is_empty() {
        for run in [run1, run2] {
            env.release(run).expect("release");
        }
        if let Err(m) = env.check_reclaimed() {
            errs.push(m);
        }
    }
    assert!(errs.is_empty(), "{}", errs.join("\n"));
    // SAFETY: both runs are done: no executor reads these records any more.
    unsafe {
        drop(Box::from_raw(ra));
        drop(Box::from_raw(rb));
    }
    drop(std::mem::ManuallyDrop::into_inner(env));
}
