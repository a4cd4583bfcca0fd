//! Sequence fuzzer for the C API: random call sequences, valid and invalid, checked against
//! a shadow model of the API's state machine.
//!
//! Each sequence drives the exported `dagrt_*` functions (called from Rust, exactly as a C
//! host calls them) on one or two workers: worker new / add lanes / init / orch / stats /
//! close / close_for (close within a cleanup budget) / free; callable registration; the
//! args builder and the tensor initialisers; runs (begin, the four submits, alloc, scope
//! begin/end, close, fail, wait, wait_for, done, stats, release) and `dagrt_worker_submit`
//! / `dagrt_worker_run` with an orchestration callback that itself makes random calls. At
//! every step it picks a random call, valid or not: null required pointers, handles of
//! another run / a released run / another worker / forged slots, unknown lane ids,
//! duplicate group targets, SUB groups larger than the SUB lane count, bad tags / dtypes /
//! ndim / reserved fields, null data on non-OUTPUT tensors, OUTPUT_EXISTING with null data,
//! scope misuse (end without begin, more than 64 nested, close with scopes open), calls in
//! the wrong state (submit with no run, begin twice, release an unfinished run, add lanes
//! after init, calls on a closed worker, a bounded close with a run open, new runs on a
//! worker whose bounded close ran out of budget), orchestrator calls from a second thread
//! while a run is being built (WRONG_THREAD), bounded waits, and workers with tiny task
//! windows / heap rings and short back-pressure timeouts (WINDOW_FULL / HEAP_EXHAUSTED,
//! which must be recoverable).
//!
//! The shadow model predicts, for every call, the set of statuses it may return: one status
//! for a call with one defect (several only when several defects are present, or when the
//! outcome legitimately depends on timing, e.g. whether a slot was reclaimed yet). To keep
//! predictions exact where it matters, the model tracks which slots are *definitely* live
//! (held by an open scope, blocked on a closed gate, or retained by a blocked consumer) and
//! which are *possibly* live, and polls `dagrt_worker_stats` until everything else has been
//! reclaimed before a call it predicts must succeed. Where the header is explicit the model
//! follows the header, not the implementation (e.g. the task window is rounded up to a power
//! of two; an empty heap ring holds any request that fits in a ring; a closed worker takes
//! no "before init only" call). Tensors view synthetic host addresses (executors never touch
//! memory), runtime buffers (`dagrt_alloc`, auto-allocated OUTPUT) while their scope is open,
//! with INPUT / INOUT / NO_DEP only (a writer must be INOUT to keep runtime memory alive),
//! and dependencies are modelled byte-exactly over dense ranges. Checks:
//! - the status is in the predicted set; a failure leaves a non-empty `dagrt_last_error()`,
//!   a success leaves it unchanged (same text, same pointer: errno-like), a failure on the
//!   helper thread leaves the main thread's message alone; out-parameters are untouched on
//!   failure; WINDOW_FULL / HEAP_EXHAUSTED take at least the back-pressure timeout and carry
//!   the documented messages, and leave no trace (no slot, no heap);
//! - executors count every invocation: a task the model says runs runs exactly once per
//!   member, on the right lane, with its own tensors (auto-allocated OUTPUT addresses as
//!   written back), scalars, config, member index, group size, run id and slot, after every
//!   producer ended; a task downstream of a failure, or cancelled by a failed submission,
//!   never runs; a rejected submit never runs; run status, message and per-run counts
//!   (completed / failed / cancelled) match the model;
//! - heap placement matches the ring model (tops exact, 1024-aligned, one base per ring);
//! - `dagrt_worker_close_for`: out_closed is 1 when no registered run can still be running
//!   (or the budget is large and every gate opens), 0 when a run is definitely blocked on a
//!   closed gate and the budget (0 or 1-20 ms) is far below the gate's hold; a closed = 0
//!   comes no earlier than the budget, tears nothing down (stats exact, runs still waited
//!   and released) and leaves the worker closing: new runs (begin, worker submit / run)
//!   fail WRONG_STATE "closing", everything else behaves as before, and a later close or
//!   close_for finishes the job;
//! - no leak: after each sequence every run was closed, waited and released, and
//!   `dagrt_worker_stats` shows live_slots 0, tensormap_entries 0, runs 0, heap tail == top
//!   on every ring (and, once the scheduler's pass ends, nothing queued); at any time the
//!   registered run count and the heap tops are exact and live_slots / tails are within the
//!   model's bounds;
//! - no hang: a watchdog thread aborts the process (printing the seed and the call log) if
//!   no call completes for DAGRT_FUZZ_HANG_SECS (default 60 s); every wait the model cannot
//!   prove finite is a bounded `dagrt_wait_run_for`.
//!
//! Environment: DAGRT_FUZZ_SEQS (sequences, default 300), DAGRT_FUZZ_STEPS (maximum steps
//! per sequence, default 200; a sequence runs between a quarter of it and all of it),
//! DAGRT_FUZZ_SEED (base seed, decimal or 0x-hex), DAGRT_FUZZ_HANG_SECS (watchdog),
//! DAGRT_FUZZ_LOG_LINES (call-log lines printed per distinct failure, default 150). Failed
//! checks are grouped by signature (known engine defects get a descriptive one) and each is
//! printed once with its sequence seed: `DAGRT_FUZZ_SEED=<seed> DAGRT_FUZZ_SEQS=1` replays
//! that sequence (the registry is reset to the same state per sequence; timing may differ).

use dagrt::callable::Callable;
use dagrt::capi::args::{self as ca, dagrt_args_t};
use dagrt::capi::callable as cc;
use dagrt::capi::orch as co;
use dagrt::capi::run::{self as cr, RunStats};
use dagrt::capi::worker::{self as cw, dagrt_orch_t, dagrt_worker_t, WorkerStats};
use dagrt::capi::{dagrt_last_error, dagrt_status_str, dagrt_version};
use dagrt::error::Status;
use dagrt::task::{CallConfig, Dep, TaskArgs, TaskHandle, TaskView, Tensor};
use dagrt::worker::WorkerConfig;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// Configuration

const DEFAULT_SEQS: u64 = 300;
const DEFAULT_STEPS: u64 = 200;
const DEFAULT_SEED: u64 = 0xDA67_F022_5EED_0001;
/// A bounded wait the model proves finite: far beyond any legitimate duration.
const LONG_WAIT_MS: u64 = 20_000;
/// Polling for reclamation before a call the model says must succeed.
const POLL_LIMIT: Duration = Duration::from_secs(10);
/// Executors blocked on a gate give up (and report) after this long.
const GATE_LIMIT: Duration = Duration::from_secs(25);

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

// ---------------------------------------------------------------------------------------
// RNG: splitmix64

#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// Uniform in lo..=hi.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    fn pct(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
    fn idx(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
}

fn seq_seed(base: u64, i: u64) -> u64 {
    if i == 0 {
        base
    } else {
        Rng(base ^ i.wrapping_mul(0xA24B_AED4_963E_E407)).next()
    }
}

// ---------------------------------------------------------------------------------------
// Small FFI helpers

/// This thread's `dagrt_last_error()`: (text, pointer value).
fn last_error() -> (String, usize) {
    let p = dagrt_last_error();
    if p.is_null() {
        return ("<NULL pointer>".into(), 0);
    }
    // SAFETY: dagrt_last_error returns a NUL-terminated string valid until the next failing
    // dagrt call on this thread; it is copied at once.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    (s, p as usize)
}

fn sname(s: Status) -> &'static str {
    Status::name(s as i32)
}

fn snames(v: &[Status]) -> String {
    v.iter().map(|&s| short(s)).collect::<Vec<_>>().join("|")
}

fn short(s: Status) -> &'static str {
    sname(s).trim_start_matches("DAGRT_STATUS_")
}

fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        return "<NULL>".into();
    }
    // SAFETY: the dagrt string functions return static NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn align1024(n: u64) -> u64 {
    (n + 1023) & !1023
}

fn esize(dtype: u32) -> u64 {
    match dtype {
        0 | 1 | 12 => 1,
        2 | 3 | 8 | 9 => 2,
        4 | 5 | 10 => 4,
        _ => 8,
    }
}

fn hash_tensors(ts: &[Tensor]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ ts.len() as u64;
    for t in ts {
        let head = [
            t.data as u64,
            t.offset,
            t.ndim as u64,
            t.dtype as u64,
            t.tag as u64,
            t.reserved as u64,
        ];
        for x in head.iter().chain(t.shape.iter()).chain(t.strides.iter()) {
            h = (h ^ x).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

fn hash_u64s(v: &[u64]) -> u64 {
    let mut h = 0x8422_2325_cbf2_9ce4u64 ^ v.len() as u64;
    for x in v {
        h = (h ^ x).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

// ---------------------------------------------------------------------------------------
// Executors and what they record

const MAGIC: u64 = 0xF022_A11D_A6F2_0001;
const CFG_MAGIC: u64 = 0xC0F1_0000_0000_0000;
const MAXM: usize = 4;
const MAX_GATES: usize = 64;

// Flags (scalar 3).
const F_MODE_MASK: u64 = 3; // 0 no failure, 1 return code, 2 dagrt_task_fail
const F_MEMBER_SHIFT: u64 = 2; // 2 bits: the failing member
const F_GATED: u64 = 1 << 4;
const F_PROBE: u64 = 1 << 5; // probe dagrt_task_fail misuse (must not fail the task)
const F_GATE_SHIFT: u64 = 8; // 8 bits
const F_EXEC_SHIFT: u64 = 16; // 2 bits: expected executor
const F_USER_SHIFT: u64 = 18; // 2 bits: expected user pointer

/// A global clock: every executor start and end takes one number.
static CLOCK: AtomicU64 = AtomicU64::new(1);
/// Executor anomalies that cannot be attributed to a sequence.
static GLOBAL_ERRORS: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// Distinct addresses used as callable user pointers (index 2 is NULL).
static USER_MARKS: [u8; 2] = [1, 2];

fn user_ptr(i: usize) -> *mut c_void {
    match i {
        0 | 1 => &USER_MARKS[i] as *const u8 as *mut c_void,
        _ => std::ptr::null_mut(),
    }
}

/// Panics on any thread (a dagrt thread that panics dies, and everything waiting on it hangs).
static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Record every panic, and print it at once on the real stderr: libtest captures the output
/// of the threads the test spawns, and a hang would never show it.
fn install_panic_hook() {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        use std::io::Write as _;
        let name = std::thread::current().name().unwrap_or("?").to_string();
        let msg = format!("thread '{name}' panicked: {info}");
        let _ = writeln!(std::io::stderr().lock(), "api_fuzz: {msg}");
        PANICS.lock().unwrap_or_else(|p| p.into_inner()).push(msg);
        prev(info);
    }));
}

fn global_error(s: String) {
    GLOBAL_ERRORS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(s);
}

#[derive(Default)]
struct MemberRec {
    entered: AtomicU32,
    exited: AtomicU32,
    start: AtomicU64,
    end: AtomicU64,
    worker: AtomicI32,
    run: AtomicU64,
    slot: AtomicU64,
    midx: AtomicU32,
    gsize: AtomicU32,
    cfg0: AtomicU64,
    thash: AtomicU64,
    shash: AtomicU64,
}

struct NodeRec {
    m: [MemberRec; MAXM],
}

/// Per-sequence record, addressed by executors through scalar 0. It outlives every worker
/// of its sequence (the workers are freed, joining their lanes, before it is dropped).
struct SeqRec {
    nodes: Vec<NodeRec>,
    gates: Vec<AtomicBool>,
    errors: Mutex<Vec<String>>,
}

impl SeqRec {
    fn new(n: usize) -> SeqRec {
        SeqRec {
            nodes: (0..n)
                .map(|_| NodeRec {
                    m: std::array::from_fn(|_| MemberRec::default()),
                })
                .collect(),
            gates: (0..MAX_GATES).map(|_| AtomicBool::new(false)).collect(),
            errors: Mutex::new(Vec::new()),
        }
    }
    fn error(&self, s: String) {
        self.errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(s);
    }
}

unsafe extern "C" fn exec_a(task: *const TaskView, user: *mut c_void) -> i32 {
    exec_common(task, user, 0)
}

unsafe extern "C" fn exec_b(task: *const TaskView, user: *mut c_void) -> i32 {
    exec_common(task, user, 1)
}

type Exec = unsafe extern "C" fn(*const TaskView, *mut c_void) -> i32;
const EXECS: [Exec; 2] = [exec_a, exec_b];

fn exec_common(task: *const TaskView, user: *mut c_void, which: u64) -> i32 {
    if task.is_null() {
        global_error("an executor was called with a NULL task view".into());
        return 0;
    }
    // SAFETY: the lane passes a view valid for the duration of this call.
    let v = unsafe { &*task };
    if v.num_scalars < 4 || v.scalars.is_null() {
        global_error(format!(
            "an executor got a task with {} scalars (run {}, slot {})",
            v.num_scalars, v.run_id, v.slot
        ));
        return 0;
    }
    // SAFETY: the view carries `num_scalars` scalars, valid during the call.
    let sc = unsafe { std::slice::from_raw_parts(v.scalars, v.num_scalars as usize) };
    if sc[1] != MAGIC {
        global_error(format!(
            "an executor got a task without the fuzzer's scalars (run {}, slot {})",
            v.run_id, v.slot
        ));
        return 0;
    }
    // SAFETY: scalar 0 is the address of the sequence's SeqRec (checked by the magic above),
    // which outlives every worker of the sequence.
    let rec = unsafe { &*(sc[0] as *const SeqRec) };
    let node = (sc[2] >> 8) as usize;
    let member = (sc[2] & 0xff) as usize;
    if node >= rec.nodes.len() || member >= MAXM {
        rec.error(format!("executor: record {node}/{member} out of range"));
        return 0;
    }
    let flags = sc[3];
    let r = &rec.nodes[node].m[member];
    r.start.store(CLOCK.fetch_add(1, SeqCst), SeqCst);
    r.entered.fetch_add(1, SeqCst);
    r.worker.store(v.worker_id, SeqCst);
    r.run.store(v.run_id, SeqCst);
    r.slot.store(v.slot, SeqCst);
    r.midx.store(v.member_index, SeqCst);
    r.gsize.store(v.group_size, SeqCst);
    let cfg0 = if v.config.is_null() {
        u64::MAX
    } else {
        // SAFETY: a non-null config points at the slot's call config during the call.
        unsafe { (*v.config).user[0] }
    };
    r.cfg0.store(cfg0, SeqCst);
    let th = if v.num_tensors == 0 {
        hash_tensors(&[])
    } else if v.tensors.is_null() {
        rec.error(format!(
            "executor: record {node}: tensors NULL with num_tensors {}",
            v.num_tensors
        ));
        0
    } else {
        // SAFETY: the view carries `num_tensors` tensors, valid during the call.
        hash_tensors(unsafe { std::slice::from_raw_parts(v.tensors, v.num_tensors as usize) })
    };
    r.thash.store(th, SeqCst);
    r.shash.store(hash_u64s(sc), SeqCst);
    let exp_exec = (flags >> F_EXEC_SHIFT) & 3;
    if exp_exec != which {
        rec.error(format!(
            "record {node}: executor {which} ran, expected executor {exp_exec}"
        ));
    }
    let exp_user = ((flags >> F_USER_SHIFT) & 3) as usize;
    if user != user_ptr(exp_user) {
        rec.error(format!(
            "record {node}: executor got user pointer {user:?}, expected {:?}",
            user_ptr(exp_user)
        ));
    }
    if flags & F_GATED != 0 {
        let g = ((flags >> F_GATE_SHIFT) & 0xff) as usize;
        let t0 = Instant::now();
        while !rec.gates[g % MAX_GATES].load(SeqCst) {
            if t0.elapsed() > GATE_LIMIT {
                rec.error(format!(
                    "record {node}: gate {g} still closed after {GATE_LIMIT:?}"
                ));
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    if flags & F_PROBE != 0 {
        probe_task_fail(v, task, rec, node);
    }
    let mut rc = 0;
    if (flags >> F_MEMBER_SHIFT) & 3 == member as u64 {
        match flags & F_MODE_MASK {
            1 => rc = 1000 + node as i32,
            2 => {
                let before = last_error();
                let msg = format!("fuzz-fail node <{node}>\0");
                let st = cc::dagrt_task_fail(task, msg.as_ptr().cast());
                if st != Status::Ok {
                    rec.error(format!(
                        "record {node}: dagrt_task_fail on the running task returned {}",
                        sname(st)
                    ));
                } else if last_error() != before {
                    rec.error(format!(
                        "record {node}: a successful dagrt_task_fail changed the lane's last error"
                    ));
                }
            }
            _ => {}
        }
    }
    r.end.store(CLOCK.fetch_add(1, SeqCst), SeqCst);
    r.exited.fetch_add(1, SeqCst);
    rc
}

/// dagrt_task_fail misuse from inside an executor: each is rejected with its status and a
/// message, and none fails the task.
fn probe_task_fail(v: &TaskView, task: *const TaskView, rec: &SeqRec, node: usize) {
    let msg = b"probe\0";
    let bad = [0xffu8, 0xfe, 0];
    let fake = TaskView {
        tensors: v.tensors,
        num_tensors: v.num_tensors,
        num_scalars: v.num_scalars,
        scalars: v.scalars,
        config: v.config,
        worker_id: v.worker_id,
        member_index: v.member_index,
        group_size: v.group_size,
        reserved: 0,
        run_id: v.run_id,
        slot: v.slot,
        private_: std::ptr::null_mut(),
    };
    let cases: [(&str, Status, Status); 4] = [
        (
            "dagrt_task_fail(NULL, msg)",
            cc::dagrt_task_fail(std::ptr::null(), msg.as_ptr().cast()),
            Status::NullPointer,
        ),
        (
            "dagrt_task_fail(task, NULL)",
            cc::dagrt_task_fail(task, std::ptr::null()),
            Status::NullPointer,
        ),
        (
            "dagrt_task_fail(view with private_ NULL, msg)",
            cc::dagrt_task_fail(&fake, msg.as_ptr().cast()),
            Status::InvalidArgument,
        ),
        (
            "dagrt_task_fail(task, invalid UTF-8)",
            cc::dagrt_task_fail(task, bad.as_ptr().cast()),
            Status::InvalidArgument,
        ),
    ];
    for (what, got, want) in cases {
        if got != want {
            rec.error(format!(
                "record {node}: {what} returned {}, expected {}",
                sname(got),
                sname(want)
            ));
        }
    }
    if last_error().0.is_empty() {
        rec.error(format!(
            "record {node}: dagrt_task_fail misuse left no message"
        ));
    }
}

// ---------------------------------------------------------------------------------------
// Helper thread: a second thread that runs calls synchronously for the main thread.

struct SendJob(Box<dyn FnOnce() + 'static>);
// SAFETY: a job only carries raw pointers to objects the main thread keeps alive and does
// not touch while it waits for the job (Helper::run blocks until the job has run); dagrt's
// objects may be called from any thread, which is what the fuzzer exercises.
unsafe impl Send for SendJob {}

struct Helper {
    tx: Option<mpsc::Sender<SendJob>>,
    done: mpsc::Receiver<()>,
    join: Option<std::thread::JoinHandle<()>>,
}

impl Helper {
    fn new() -> Helper {
        let (tx, rx) = mpsc::channel::<SendJob>();
        let (dtx, drx) = mpsc::channel::<()>();
        let join = std::thread::Builder::new()
            .name("fuzz-helper".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    (job.0)();
                    if dtx.send(()).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn the helper thread");
        Helper {
            tx: Some(tx),
            done: drx,
            join: Some(join),
        }
    }

    /// Run `f` on the helper thread and wait for its result.
    fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        let mut out: Option<T> = None;
        {
            let slot: *mut Option<T> = &mut out;
            let job: Box<dyn FnOnce() + '_> = Box::new(move || {
                let v = f();
                // SAFETY: `out` outlives the job: run() waits below until the job has run.
                unsafe { *slot = Some(v) };
            });
            // SAFETY: only the lifetime is erased; run() does not return before the helper
            // has run (and so dropped) the job, so nothing it borrows is used after that.
            let job: Box<dyn FnOnce() + 'static> = unsafe { std::mem::transmute(job) };
            self.tx
                .as_ref()
                .expect("helper channel")
                .send(SendJob(job))
                .expect("the helper thread is gone");
            self.done.recv().expect("the helper thread died");
        }
        out.expect("the helper ran the job")
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

// ---------------------------------------------------------------------------------------
// Watchdog: aborts the process, with the log of the sequence that hung, when no call
// completes for too long.

struct Shared {
    progress: AtomicU64,
    seed: AtomicU64,
    log: Mutex<Vec<String>>,
    stop: AtomicBool,
}

fn start_watchdog(shared: Arc<Shared>, hang: Duration) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("fuzz-watchdog".into())
        .spawn(move || {
            let mut last = shared.progress.load(SeqCst);
            let mut since = Instant::now();
            while !shared.stop.load(SeqCst) {
                std::thread::sleep(Duration::from_millis(200));
                let now = shared.progress.load(SeqCst);
                if now != last {
                    last = now;
                    since = Instant::now();
                    continue;
                }
                if since.elapsed() > hang {
                    let seed = shared.seed.load(SeqCst);
                    use std::io::Write as _;
                    let mut err = std::io::stderr().lock();
                    let log = shared.log.lock().unwrap_or_else(|p| p.into_inner());
                    let tail = log.len().saturating_sub(300);
                    let _ = writeln!(err,
                        "\n*** api_fuzz HANG: no dagrt call returned for {hang:?} in sequence seed {seed:#x}\n\
                         *** replay: DAGRT_FUZZ_SEED={seed:#x} DAGRT_FUZZ_SEQS=1\n\
                         *** call log (last {} of {} lines; the last line is the call that hung or the one before it):",
                        log.len() - tail,
                        log.len()
                    );
                    for l in &log[tail..] {
                        let _ = writeln!(err,"    {l}");
                    }
                    std::process::abort();
                }
            }
        })
        .expect("spawn the watchdog")
}

// ---------------------------------------------------------------------------------------
// The shadow model

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Th {
    Main,
    Helper,
}

impl Th {
    fn other(self) -> Th {
        match self {
            Th::Main => Th::Helper,
            Th::Helper => Th::Main,
        }
    }
    fn tag(self) -> &'static str {
        match self {
            Th::Main => "main",
            Th::Helper => "2nd ",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum WState {
    New,
    Init,
    Closed,
    Freed,
}

/// One heap ring of the model: the engine's exact placement (tops are deterministic), and
/// every reservation with the slot that owns it.
#[derive(Clone, Default)]
struct RingM {
    top: u64,
    res: Vec<(u64, u64, usize)>,
}

struct WModel {
    ptr: *mut dagrt_worker_t,
    cfg: WorkerConfig,
    nl: Vec<i32>,
    nsub: u32,
    state: WState,
    orch: *mut dagrt_orch_t,
    open: Option<usize>,
    rings: Vec<RingM>,
    base: [Option<u64>; 4],
    /// Sequence number of the next slot id (the id's high bits): one per successful
    /// submit or alloc, from 1 at init.
    next_seq: u64,
    /// A `dagrt_worker_close_for` ran out of budget (closed = 0): the worker is still
    /// initialised and its runs keep running, but it refuses new runs (`dagrt_begin_run`,
    /// hence `dagrt_worker_submit` / `dagrt_worker_run`, fail WRONG_STATE "the worker is
    /// closing") until a later close tears it down. No run can be open then: close_for
    /// refuses to start while one is.
    closing: bool,
}

impl WModel {
    fn ring_size(&self) -> u64 {
        align1024(self.cfg.heap_ring_size.max(1024))
    }
    /// The task window as documented: exactly `task_window` slots.
    fn window(&self) -> u64 {
        self.cfg.task_window as u64
    }
    fn lanes(&self) -> usize {
        self.nl.len() + self.nsub as usize
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum FState {
    /// The run's submission closed normally: the fate is deterministic.
    Normal,
    /// The submission failed and the task had started: it runs (all members, once).
    Ran,
    /// The submission failed before the task could start: it never runs.
    NotRan,
    /// The submission failed while the task may have been about to start: all or nothing.
    Unknown,
}

struct TaskM {
    members: usize,
    sub: bool,
    targets: Vec<i32>,
    gate: Option<usize>,
    /// (failing member, mode 1 = return code, 2 = dagrt_task_fail)
    fail: Option<(usize, u64)>,
    cfg0: u64,
    thash: Vec<u64>,
    shash: Vec<u64>,
}

#[derive(Clone, Copy)]
struct EdgeM {
    p: usize,
    retain: bool,
    /// The producer was definitely live at submit: the engine charged the reference.
    certain: bool,
}

struct NodeM {
    run: usize,
    worker: usize,
    rec: usize,
    /// Sequence number of its slot id.
    seq: u64,
    /// Byte ranges its INPUT/INOUT tensors look up.
    reads: Vec<(u64, u64)>,
    handle: Option<TaskHandle>,
    frame: usize,
    producers: Vec<EdgeM>,
    task: Option<TaskM>,
    fstate: FState,
}

struct RunM {
    worker: usize,
    id: Option<u64>,
    builder: Th,
    frames: Vec<usize>,
    closed: bool,
    /// The submission failed: the text the run's failure message must contain.
    failed: Option<String>,
    released: bool,
    /// The worker was closed or freed: the run no longer exists.
    gone: bool,
    nodes: Vec<usize>,
    /// TensorMap model: (lo, hi, owner node).
    tmap: Vec<(u64, u64, usize)>,
    /// Entries dropped because their memory was reclaimed and handed out again (the
    /// engine may still hold them: used to name a mismatch).
    stale: Vec<(u64, u64, usize)>,
    done_seen: bool,
    checked: bool,
    /// Built by a dagrt_worker_run callback: never gated.
    no_gates: bool,
}

struct HeapBuf {
    ptr: u64,
    len: u64,
    run: usize,
    frame: usize,
}

struct Builder {
    ptr: *mut dagrt_args_t,
    tensors: Vec<Tensor>,
    scalars: Vec<u64>,
    deps: Vec<Dep>,
}

/// Process-wide callable registry model: (name, ns, kind) -> (executor, user, identity).
type RegKey = (String, u32, u32);
static REGISTRY: Mutex<BTreeMap<RegKey, (usize, usize, Callable)>> = Mutex::new(BTreeMap::new());

const NAMES: [&str; 5] = ["fz.a", "fz.b", "fz.c", "fz.orch", "fz.é"];
const NSS: [u32; 3] = [0, 1, 0xFFFF_FFFF];
const LANE_IDS: [i32; 9] = [0, 1, 2, 3, 5, 7, 17, 42, 1000];
const HOST_BASE: u64 = 0x0000_1000_0000_0000;
const HOST_BUFS: u64 = 6;
const HOST_LEN: u64 = 4096;
const HOST_STRIDE: u64 = 0x1_0000;

/// The executor and user pointer a name is bound to (so re-registration is idempotent).
fn binding(name: &str, ns: u32, kind: u32) -> (usize, usize) {
    let h = (name.len() as u32)
        .wrapping_add(ns.wrapping_mul(7))
        .wrapping_add(kind.wrapping_mul(3));
    ((h % 2) as usize, (h % 3) as usize)
}

#[derive(Debug)]
struct Abort;
type R<T = ()> = Result<T, Abort>;

struct Failure {
    sig: String,
    detail: String,
    seed: u64,
    log: Vec<String>,
}

#[derive(Default)]
struct Totals {
    seqs: u64,
    steps: u64,
    calls: u64,
    by_status: BTreeMap<&'static str, u64>,
    nodes: u64,
    ran: u64,
    /// dagrt_worker_close_for outcomes on initialised workers (closed = 0, closed = 1), and
    /// new runs refused while closing.
    close_for: [u64; 2],
    refused_closing: u64,
}

/// The liveness picture of one worker (indexed by node).
struct Live {
    /// Possibly unfinished while the gates stay closed.
    pb: Vec<bool>,
    /// Slot definitely not reclaimable during the next call.
    dl: Vec<bool>,
    /// Slot possibly never reclaimed while the gates stay closed.
    pl: Vec<bool>,
}

enum Pred {
    MustOk,
    MustFail,
    Maybe,
}

struct Fz {
    rng: Rng,
    seed: u64,
    shared: Arc<Shared>,
    rec: Arc<SeqRec>,
    next_rec: usize,
    rejected: Vec<usize>,
    step: usize,
    helper: Helper,
    workers: Vec<WModel>,
    runs: Vec<RunM>,
    run_by_id: HashMap<u64, usize>,
    nodes: Vec<NodeM>,
    frames: Vec<bool>,
    gates: Vec<bool>,
    handles: Vec<(TaskHandle, usize)>,
    hmap: HashMap<(u64, u64), usize>,
    heapbufs: Vec<HeapBuf>,
    builders: Vec<Builder>,
    failures: Vec<Failure>,
    /// Worker of the orchestration callback being run (its steps stay on it).
    cb: Option<usize>,
    cb_no_gates: bool,
    /// Failing calls made on the main thread inside the current callback.
    cb_failures: u32,
    /// dagrt_last_error() right after the last call, on the thread that made it.
    last_msg: String,
    /// Names a known kind of mismatch for the next call's failure signature.
    hint: Option<String>,
    /// The hint of the last slot prediction.
    slot_hint: Option<String>,
    totals: Totals,
}

impl Fz {
    fn new(seed: u64, steps: usize, shared: Arc<Shared>) -> Fz {
        shared.seed.store(seed, SeqCst);
        shared.log.lock().unwrap_or_else(|p| p.into_inner()).clear();
        Fz {
            rng: Rng(seed),
            seed,
            shared,
            rec: Arc::new(SeqRec::new(steps * 12 + 64)),
            next_rec: 0,
            rejected: Vec::new(),
            step: 0,
            helper: Helper::new(),
            workers: Vec::new(),
            runs: Vec::new(),
            run_by_id: HashMap::new(),
            nodes: Vec::new(),
            frames: Vec::new(),
            gates: vec![false; MAX_GATES],
            handles: Vec::new(),
            hmap: HashMap::new(),
            heapbufs: Vec::new(),
            builders: Vec::new(),
            failures: Vec::new(),
            cb: None,
            cb_no_gates: false,
            cb_failures: 0,
            last_msg: String::new(),
            hint: None,
            slot_hint: None,
            totals: Totals::default(),
        }
    }

    // ----- logging and failures

    fn log(&self, line: String) {
        self.shared
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(line);
    }

    fn tick(&self) {
        self.shared.progress.fetch_add(1, SeqCst);
    }

    fn record_failure(&mut self, sig: String, detail: String) {
        self.log(format!("!!! CHECK FAILED: {detail}"));
        let log = self
            .shared
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        self.failures.push(Failure {
            sig,
            detail,
            seed: self.seed,
            log,
        });
    }

    /// A failed check the model cannot continue past: the sequence stops.
    fn fatal<T>(&mut self, sig: impl Into<String>, detail: impl Into<String>) -> R<T> {
        self.record_failure(sig.into(), detail.into());
        Err(Abort)
    }

    /// A failed check that does not invalidate the model: the sequence goes on.
    fn soft(&mut self, sig: impl Into<String>, detail: impl Into<String>) {
        let sig = sig.into();
        if self.failures.iter().any(|f| f.sig == sig) {
            self.log(format!("!!! CHECK FAILED (again): {sig}"));
            return;
        }
        self.record_failure(sig, detail.into());
    }

    fn check(&mut self, cond: bool, sig: &str, detail: impl FnOnce() -> String) -> R {
        if cond {
            Ok(())
        } else {
            let d = detail();
            self.fatal(sig.to_string(), d)
        }
    }

    // ----- calls

    fn run_on<T>(&self, th: Th, f: impl FnOnce() -> T) -> T {
        match th {
            Th::Main => f(),
            Th::Helper => self.helper.run(f),
        }
    }

    /// Make one call on thread `th` and check its status against `exp` and the errno-like
    /// behaviour of dagrt_last_error().
    fn call(
        &mut self,
        th: Th,
        desc: String,
        exp: &[Status],
        f: impl FnOnce() -> Status,
    ) -> R<Status> {
        let main_before = last_error();
        let t0 = Instant::now();
        let (st, before, after) = self.run_on(th, move || {
            let b = last_error();
            let st = f();
            (st, b, last_error())
        });
        let el = t0.elapsed();
        self.note_result(th, &desc, exp, st, &before, &after, el)?;
        if th == Th::Helper {
            let main_after = last_error();
            if main_after != main_before {
                self.soft(
                    "last_error: a call on another thread changed the main thread's dagrt_last_error()",
                    format!("{desc} on the helper thread changed the main thread's last error from {:?} to {:?}", main_before.0, main_after.0),
                );
            }
        }
        Ok(st)
    }

    /// Log and check a call's result (status set, last error behaviour).
    #[allow(clippy::too_many_arguments)]
    fn note_result(
        &mut self,
        th: Th,
        desc: &str,
        exp: &[Status],
        st: Status,
        before: &(String, usize),
        after: &(String, usize),
        el: Duration,
    ) -> R {
        self.tick();
        self.last_msg = after.0.clone();
        self.totals.calls += 1;
        *self.totals.by_status.entry(sname(st)).or_default() += 1;
        let msg = if st == Status::Ok {
            String::new()
        } else {
            format!(" \"{}\"", after.0)
        };
        let slow = if el > Duration::from_millis(5) {
            format!(" [{} ms]", el.as_millis())
        } else {
            String::new()
        };
        self.log(format!(
            "#{:<4} {} {desc} -> {}{msg}{slow}   (expect {})",
            self.step,
            th.tag(),
            short(st),
            snames(exp)
        ));
        if th == Th::Main && st != Status::Ok && self.cb.is_some() {
            self.cb_failures += 1;
        }
        let fname = desc.split('(').next().unwrap_or(desc).to_string();
        if st == Status::Panic {
            return self.fatal(
                format!("{fname}: PANIC caught at the C boundary"),
                format!("{desc} returned DAGRT_STATUS_PANIC: {}", after.0),
            );
        }
        let hint = self.hint.take();
        if !exp.contains(&st) {
            let sig = match hint {
                Some(h) => h,
                None => format!("{fname}: expected {} got {}", snames(exp), short(st)),
            };
            return self.fatal(
                sig,
                format!(
                    "{desc} returned {} \"{}\", the model expected {}",
                    sname(st),
                    after.0,
                    snames(exp)
                ),
            );
        }
        let cb_call =
            fname.starts_with("dagrt_worker_submit") || fname.starts_with("dagrt_worker_run");
        if st == Status::Ok {
            if cb_call && after != before {
                self.soft(
                    "last_error: a successful dagrt_worker_submit/run clears dagrt_last_error() (new buffer, old text gone)",
                    format!("{desc} succeeded but dagrt_last_error() went from {:?} at {:#x} to {:?} at {:#x} (the header: the message of the last *failed* call; the pointer stays valid until the next failing call)", before.0, before.1, after.0, after.1),
                );
            } else if after.0 != before.0 {
                self.soft(
                    format!("last_error: successful {fname} changed dagrt_last_error()"),
                    format!("{desc} succeeded but dagrt_last_error() changed from {:?} to {:?} (the header: the message of the last *failed* call)", before.0, after.0),
                );
            } else if after.1 != before.1 {
                self.soft(
                    format!("last_error: successful {fname} moved the dagrt_last_error() buffer"),
                    format!("{desc} succeeded but dagrt_last_error() now returns {:#x} instead of {:#x} (the header: the pointer stays valid until the next failing call)", after.1, before.1),
                );
            }
        } else if after.0.is_empty() {
            return self.fatal(
                format!("{fname}: {} without a message", short(st)),
                format!(
                    "{desc} failed with {} but dagrt_last_error() is empty",
                    sname(st)
                ),
            );
        }
        Ok(())
    }

    // ----- model queries

    fn active(&self, n: usize) -> bool {
        let r = &self.runs[self.nodes[n].run];
        !r.released && !r.gone
    }

    fn exited_all(&self, n: usize) -> bool {
        let nd = &self.nodes[n];
        match &nd.task {
            None => true,
            Some(t) => (0..t.members).all(|m| self.rec.nodes[nd.rec].m[m].exited.load(SeqCst) > 0),
        }
    }

    fn entered_any(&self, n: usize) -> bool {
        let nd = &self.nodes[n];
        match &nd.task {
            None => true,
            Some(t) => (0..t.members).any(|m| self.rec.nodes[nd.rec].m[m].entered.load(SeqCst) > 0),
        }
    }

    fn gate_closed(&self, n: usize) -> bool {
        self.nodes[n]
            .task
            .as_ref()
            .and_then(|t| t.gate)
            .is_some_and(|g| !self.gates[g])
    }

    /// Definite / possible liveness of every slot of worker `wi` (see `Live`).
    fn live(&self, wi: usize) -> Live {
        let n = self.nodes.len();
        let mut db = vec![false; n];
        let mut mfn = vec![false; n];
        let mut pb = vec![false; n];
        let mut wdfs = vec![false; n];
        let mine: Vec<usize> = (0..n)
            .filter(|&i| self.nodes[i].worker == wi && self.active(i))
            .collect();
        let exited: Vec<bool> = (0..n)
            .map(|i| mine.contains(&i) && self.exited_all(i))
            .collect();
        for &i in &mine {
            let nd = &self.nodes[i];
            let Some(t) = &nd.task else { continue };
            let failed_run = self.runs[nd.run].failed.is_some();
            let gclosed = self.gate_closed(i);
            if failed_run {
                db[i] = gclosed && nd.fstate == FState::Ran && !exited[i];
                mfn[i] = !db[i];
            } else {
                let pm = nd.producers.iter().any(|e| mfn[e.p]);
                db[i] = !pm && !exited[i] && (gclosed || nd.producers.iter().any(|e| db[e.p]));
                mfn[i] = pm || (t.fail.is_some() && !db[i]);
            }
        }
        // Possibly unfinished: gated, behind a possibly unfinished producer, or queued
        // behind a possibly blocked lane of its class (NEXT_LEVEL FIFOs and the group
        // head's reservations; the SUB FIFO's head-of-line wait).
        let (mut cnl, mut csub) = (false, false);
        loop {
            for &i in &mine {
                let nd = &self.nodes[i];
                let Some(t) = &nd.task else { continue };
                let gclosed = self.gate_closed(i);
                if self.runs[nd.run].failed.is_some() {
                    pb[i] = gclosed && nd.fstate != FState::NotRan && !exited[i];
                    wdfs[i] = false;
                } else {
                    let pw = nd.producers.iter().any(|e| wdfs[e.p]);
                    let class = if t.sub { csub } else { cnl };
                    pb[i] = !pw
                        && !exited[i]
                        && (gclosed || class || nd.producers.iter().any(|e| pb[e.p]));
                    wdfs[i] = pw || (t.fail.is_some() && !pb[i]);
                }
            }
            let nnl = mine
                .iter()
                .any(|&i| pb[i] && self.nodes[i].task.as_ref().is_some_and(|t| !t.sub));
            let nsub = mine
                .iter()
                .any(|&i| pb[i] && self.nodes[i].task.as_ref().is_some_and(|t| t.sub));
            if (nnl, nsub) == (cnl, csub) {
                break;
            }
            cnl = nnl;
            csub = nsub;
        }
        let mut dl = vec![false; n];
        let mut pl = vec![false; n];
        for &i in &mine {
            let f = self.frames[self.nodes[i].frame];
            dl[i] = f || db[i];
            pl[i] = f || pb[i];
        }
        for &c in mine.iter().rev() {
            for e in &self.nodes[c].producers {
                if e.retain {
                    if db[c] && e.certain {
                        dl[e.p] = true;
                    }
                    if pb[c] {
                        pl[e.p] = true;
                    }
                }
            }
        }
        Live { pb, dl, pl }
    }

    fn run_nodes_any(&self, ri: usize, v: &[bool]) -> bool {
        self.runs[ri].nodes.iter().any(|&n| v[n])
    }

    /// The run cannot be done before the next call returns.
    fn definitely_undone(&self, ri: usize, lv: &Live) -> bool {
        !self.runs[ri].closed || self.run_nodes_any(ri, &lv.dl)
    }

    /// The run finishes without anyone opening a gate.
    fn eventually_done(&self, ri: usize, lv: &Live) -> bool {
        self.runs[ri].closed && !self.run_nodes_any(ri, &lv.pl)
    }

    /// The signature for "the run finished although the model says it cannot have".
    fn undone_sig(&self, ri: usize, lv: &Live) -> &'static str {
        if self.runs[ri]
            .nodes
            .iter()
            .any(|&n| lv.dl[n] && self.stale_poisoned(n))
        {
            "a failed task's TensorMap tombstone outlives its memory: a reader of reallocated heap memory is poisoned"
        } else {
            "a run reported done while it cannot be"
        }
    }

    fn any_blocked(&self, wi: usize) -> bool {
        let lv = self.live(wi);
        (0..self.nodes.len()).any(|i| self.nodes[i].worker == wi && lv.pb[i])
    }

    // ----- resource predictions (task window, heap rings)

    fn poll(&mut self, wi: usize, what: &str, cond: impl Fn(&WorkerStats) -> bool) -> R {
        let t0 = Instant::now();
        let ptr = self.workers[wi].ptr;
        loop {
            let mut s = WorkerStats::default();
            let st = cw::dagrt_worker_stats(ptr, &mut s);
            self.tick();
            if st != Status::Ok {
                return self.fatal(
                    "dagrt_worker_stats failed while polling",
                    format!(
                        "polling for {what}: dagrt_worker_stats returned {} \"{}\"",
                        sname(st),
                        last_error().0
                    ),
                );
            }
            if cond(&s) {
                if t0.elapsed() > Duration::from_millis(5) {
                    self.log(format!(
                        "       (waited {} ms for {what})",
                        t0.elapsed().as_millis()
                    ));
                }
                return Ok(());
            }
            if t0.elapsed() > POLL_LIMIT {
                return self.fatal(
                    "leak or hang: a slot or heap slab outside the possibly-live set was never reclaimed".to_string(),
                    format!("{what}: still not true after {POLL_LIMIT:?} although every slot outside the model's possibly-live set must be reclaimed (stats: live_slots {}, runs {}, tops {:?}, tails {:?})", s.live_slots, s.runs, s.heap_top, s.heap_tail),
                );
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Where the next `bytes` of ring `r` go (the engine's placement rule) and whether the
    /// reservation must succeed, must fail or may go either way. Polls for reclamation when
    /// needed to make "must succeed" exact.
    fn predict_heap(&mut self, wi: usize, r: usize, bytes: u64, lv: &Live) -> R<(Pred, u64)> {
        let w = &self.workers[wi];
        let size = w.ring_size();
        let ring = &w.rings[r];
        let top = ring.top;
        let phys = top % size;
        let start = if phys + bytes > size {
            top + (size - phys)
        } else {
            top
        };
        let fits = |tail: u64| start + bytes - tail <= size;
        // With reservation k the oldest live one, the engine's tail is the end of k-1, or k's
        // own start when k was placed on an empty ring (the gap before a wrap is then free):
        // the low bound for "must succeed", the high one for "must fail".
        let tail_for = |v: &Vec<bool>, high: bool| -> Option<u64> {
            for (k, res) in ring.res.iter().enumerate() {
                if self.active(res.2) && v[res.2] {
                    return Some(if high {
                        res.0
                    } else if k == 0 {
                        0
                    } else {
                        ring.res[k - 1].1
                    });
                }
            }
            None
        };
        let worst = tail_for(&lv.pl, false);
        let best = tail_for(&lv.dl, true);
        let pred = match worst {
            // Everything in the ring is reclaimable: an empty ring holds any request that
            // is not larger than the ring.
            None => {
                self.poll(
                    wi,
                    &format!("heap ring {r} to drain (tail == top {top})"),
                    move |s| s.heap_tail[r] >= top,
                )?;
                Pred::MustOk
            }
            Some(wt) if fits(wt) => {
                self.poll(wi, &format!("heap ring {r} tail to reach {wt}"), move |s| {
                    s.heap_tail[r] >= wt
                })?;
                Pred::MustOk
            }
            Some(_) => match best {
                Some(bt) if !fits(bt) => Pred::MustFail,
                _ => Pred::Maybe,
            },
        };
        Ok((pred, start))
    }

    fn predict_slot(&mut self, wi: usize, lv: &Live) -> R<Pred> {
        self.slot_hint = None;
        let win = self.workers[wi].window();
        let mine: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].worker == wi && self.active(i))
            .collect();
        let dl = mine.iter().filter(|&&i| lv.dl[i]).count() as u64;
        let pl = mine.iter().filter(|&&i| lv.pl[i]).count() as u64;
        if dl >= win {
            if mine.iter().any(|&i| lv.dl[i] && self.stale_poisoned(i)) {
                self.slot_hint = Some("a failed task's TensorMap tombstone outlives its memory: a reader of reallocated heap memory is poisoned".into());
            }
            return Ok(Pred::MustFail);
        }
        if pl < win {
            let raw = self.workers[wi].cfg.task_window as u64;
            if pl >= raw {
                self.slot_hint = Some(
                    "task_window is not rounded up to a power of two as documented (slots run out early)"
                        .into(),
                );
            }
            if mine.len() as u64 >= win {
                self.poll(
                    wi,
                    &format!("a free slot in the task window of {win}"),
                    move |s| (s.live_slots as u64) < win,
                )?;
            }
            return Ok(Pred::MustOk);
        }
        Ok(Pred::Maybe)
    }

    /// The statuses a slot-claiming call (submit or alloc) may return, given the slot and
    /// heap predictions.
    fn resource_statuses(slot: &Pred, heap: &Pred) -> Vec<Status> {
        use Status::*;
        match (slot, heap) {
            (Pred::MustFail, _) => vec![WindowFull],
            (Pred::MustOk, Pred::MustOk) => vec![Ok],
            (Pred::MustOk, Pred::MustFail) => vec![HeapExhausted],
            (Pred::MustOk, Pred::Maybe) => vec![Ok, HeapExhausted],
            (Pred::Maybe, Pred::MustOk) => vec![Ok, WindowFull],
            (Pred::Maybe, Pred::MustFail) => vec![WindowFull, HeapExhausted],
            (Pred::Maybe, Pred::Maybe) => vec![Ok, WindowFull, HeapExhausted],
        }
    }

    /// After a back-pressure failure: the documented message, at least the timeout, and no
    /// trace left (heap tops unchanged, run count unchanged).
    fn check_backpressure(&mut self, wi: usize, st: Status, el: Duration, too_large: bool) -> R {
        let msg = self.last_msg.clone();
        let timeout = self.workers[wi].cfg.timeout_ms as u64;
        match st {
            Status::WindowFull => {
                self.check(
                    msg.contains("task window full"),
                    "WINDOW_FULL message",
                    || format!("WINDOW_FULL message {msg:?} lacks \"task window full\""),
                )?;
            }
            Status::HeapExhausted => {
                self.check(
                    msg.contains("HeapRing exhausted, increase heap_ring_size on Worker"),
                    "HEAP_EXHAUSTED message",
                    || format!("HEAP_EXHAUSTED message {msg:?} lacks the documented text"),
                )?;
            }
            _ => return Ok(()),
        }
        if !too_large && el + Duration::from_millis(1) < Duration::from_millis(timeout) {
            self.soft(
                format!("{} before the back-pressure timeout", short(st)),
                format!(
                    "{} after {} ms, but timeout_ms is {timeout}",
                    sname(st),
                    el.as_micros() as f64 / 1000.0
                ),
            );
        }
        self.check_stats_exact(wi)
    }

    /// Stats that the model knows exactly at any time: runs registered and heap tops.
    fn check_stats_exact(&mut self, wi: usize) -> R {
        let mut s = WorkerStats::default();
        let st = cw::dagrt_worker_stats(self.workers[wi].ptr, &mut s);
        if st != Status::Ok {
            return self.fatal(
                "dagrt_worker_stats failed",
                format!("internal dagrt_worker_stats: {}", sname(st)),
            );
        }
        self.check_stats(wi, &s)
    }

    fn check_stats(&mut self, wi: usize, s: &WorkerStats) -> R {
        let runs = self
            .runs
            .iter()
            .filter(|r| r.worker == wi && !r.released && !r.gone)
            .count() as u64;
        self.check(s.runs == runs, "stats: runs", || {
            format!(
                "dagrt_worker_stats: runs {} but {runs} runs are registered (begun, not released)",
                s.runs
            )
        })?;
        let lv = self.live(wi);
        let mine: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].worker == wi && self.active(i))
            .collect();
        let dl = mine.iter().filter(|&&i| lv.dl[i]).count() as i64;
        if !(s.live_slots >= dl && s.live_slots <= mine.len() as i64) {
            let why: Vec<String> = mine
                .iter()
                .filter(|&&i| lv.dl[i])
                .map(|&i| {
                    let nd = &self.nodes[i];
                    let what = if self.frames[nd.frame] {
                        "scope open".to_string()
                    } else if lv.pb[i] && nd.task.is_some() {
                        "blocked".to_string()
                    } else {
                        "retained".to_string()
                    };
                    format!(
                        "rec{}{}:{what}",
                        nd.rec,
                        if nd.task.is_none() { "(alloc)" } else { "" }
                    )
                })
                .collect();
            let tomb = mine.iter().any(|&i| lv.dl[i] && self.stale_poisoned(i));
            return self.fatal(
                if tomb { "a failed task's TensorMap tombstone outlives its memory: a reader of reallocated heap memory is poisoned" } else { "stats: live_slots out of bounds" },
                format!(
                    "dagrt_worker_stats: live_slots {} outside [{dl} definitely live, {} slots of unreleased runs]; definitely live: {}",
                    s.live_slots,
                    mine.len(),
                    why.join(" ")
                ),
            );
        }
        for r in 0..4 {
            let top = self.workers[wi].rings[r].top;
            self.check(s.heap_top[r] == top, "stats: heap top", || {
                format!(
                    "ring {r}: heap_top {} but the model placed reservations up to {top}",
                    s.heap_top[r]
                )
            })?;
            self.check(
                s.heap_tail[r] <= s.heap_top[r],
                "stats: tail beyond top",
                || format!("ring {r}: tail {} > top {}", s.heap_tail[r], s.heap_top[r]),
            )?;
            let ring = &self.workers[wi].rings[r];
            if let Some(k) = ring.res.iter().position(|x| self.active(x.2) && lv.dl[x.2]) {
                let bound = ring.res[k].0;
                self.check(s.heap_tail[r] <= bound, "stats: heap tail passed a live reservation", || {
                    format!("ring {r}: tail {} passed reservation {k} (starting after {bound}) whose slot is definitely live", s.heap_tail[r])
                })?;
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Formatting for the call log

fn tag_name(tag: u32) -> String {
    match tag {
        0 => "IN".into(),
        1 => "OUT".into(),
        2 => "INOUT".into(),
        3 => "OUTX".into(),
        4 => "NODEP".into(),
        x => format!("tag{x}"),
    }
}

fn fmt_tensor(t: &Tensor) -> String {
    let nd = (t.ndim as usize).min(5);
    let shape: Vec<String> = t.shape[..nd].iter().map(|s| s.to_string()).collect();
    let mut s = format!("{} {:#x}", tag_name(t.tag), t.data as u64);
    if t.offset != 0 {
        s += &format!("+{}", t.offset);
    }
    s += &format!(" dt{} [{}]", t.dtype, shape.join("x"));
    if t.ndim as usize > 5 {
        s += &format!(" ndim{}", t.ndim);
    }
    if t.strides[..nd].iter().any(|&x| x != 0) {
        let st: Vec<String> = t.strides[..nd].iter().map(|s| s.to_string()).collect();
        s += &format!(" st[{}]", st.join(","));
    }
    if t.reserved != 0 {
        s += &format!(" rsv{}", t.reserved);
    }
    s
}

fn fmt_handle(h: &TaskHandle) -> String {
    format!("{{run {}, slot {:#x}}}", h.run_id, h.slot)
}

fn fmt_dep(d: &Dep) -> String {
    let k = match (d.kind, d.reserved) {
        (0, 0) => String::new(),
        (1, 0) => " wait".into(),
        (k, r) => format!(" kind{k} rsv{r}"),
    };
    format!("{}{k}", fmt_handle(&d.handle))
}

fn fmt_callable(c: &Callable) -> String {
    let reg = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    for ((name, ns, kind), (_, _, id)) in reg.iter() {
        if id == c {
            return format!("{name}/ns{ns}/k{kind}");
        }
    }
    format!(
        "callable?{:02x}{:02x}/ns{}/k{}",
        c.digest[0], c.digest[1], c.ns, c.kind
    )
}

// ---------------------------------------------------------------------------------------
// Operations: workers, callables, builders, tensors

/// A worker argument as a call's description shows it: `w<index>`, or `NULL`.
fn worker_label(wi: Option<usize>) -> String {
    wi.map_or("NULL".into(), |w| format!("w{w}"))
}

impl Fz {
    fn live_workers(&self) -> Vec<usize> {
        (0..self.workers.len())
            .filter(|&i| self.workers[i].state != WState::Freed)
            .collect()
    }

    fn primary(&self) -> Option<usize> {
        self.live_workers().first().copied()
    }

    /// A worker for a worker-level call (the callback's worker inside a callback).
    fn pick_worker(&mut self) -> Option<usize> {
        if let Some(c) = self.cb {
            return Some(c);
        }
        let live = self.live_workers();
        if live.is_empty() {
            return None;
        }
        if self.rng.pct(82) {
            Some(live[0])
        } else {
            Some(live[self.rng.idx(live.len())])
        }
    }

    fn wptr(&self, wi: Option<usize>) -> *mut dagrt_worker_t {
        wi.map_or(std::ptr::null_mut(), |w| self.workers[w].ptr)
    }

    fn new_frame(&mut self) -> usize {
        self.frames.push(true);
        self.frames.len() - 1
    }

    fn op_worker_new(&mut self, valid: bool) -> R {
        let null_out = !valid && self.rng.pct(5);
        let v = if valid { 99 } else { self.rng.below(100) };
        let mut cfg = WorkerConfig::default();
        let mut cfg_null = false;
        let mut exp = vec![Status::Ok];
        if v < 7 {
            match self.rng.below(3) {
                0 => cfg.task_window = 0,
                1 => cfg.task_window = (1 << 24) + 1 + self.rng.below(1000) as u32,
                _ => cfg.heap_ring_size = 0,
            }
            exp = vec![Status::InvalidArgument];
        } else if v < 14 {
            cfg_null = true;
        } else {
            let small_window = self.rng.pct(40);
            let small_heap = self.rng.pct(45);
            cfg.task_window = if small_window {
                self.rng.pick(&[1, 2, 3, 4, 4, 5, 6, 8, 8])
            } else if self.rng.pct(15) {
                self.rng.range(9, 64) as u32
            } else {
                1 << 20
            };
            cfg.heap_ring_size = if small_heap {
                if self.rng.pct(10) {
                    self.rng.range(2000, 20000)
                } else {
                    1024 * self.rng.range(4, 64)
                }
            } else if !valid && self.rng.pct(8) {
                1 << 62 // mapping four rings of this size must fail at init (SYSTEM)
            } else if self.rng.pct(50) {
                1 << 20
            } else {
                1 << 30
            };
            cfg.timeout_ms = if small_window || small_heap {
                self.rng.range(3, 8) as u32
            } else {
                200
            };
        }
        if null_out {
            exp = vec![Status::NullPointer];
        }
        let sentinel = 0x5EB7_1E00usize as *mut dagrt_worker_t;
        let mut out = sentinel;
        let outp: *mut *mut dagrt_worker_t = if null_out {
            std::ptr::null_mut()
        } else {
            &mut out
        };
        let cfgp: *const WorkerConfig = if cfg_null { std::ptr::null() } else { &cfg };
        let desc = format!(
            "dagrt_worker_new({}, {})",
            if cfg_null {
                "NULL".to_string()
            } else {
                format!(
                    "{{ring {}, window {}, timeout {} ms}}",
                    cfg.heap_ring_size, cfg.task_window, cfg.timeout_ms
                )
            },
            if null_out { "NULL" } else { "&w" }
        );
        let st = self.call(Th::Main, desc, &exp, || cw::dagrt_worker_new(cfgp, outp))?;
        if st != Status::Ok {
            return self.check(
                out == sentinel,
                "dagrt_worker_new wrote out on failure",
                || "out-parameter written on failure".into(),
            );
        }
        self.check(!out.is_null(), "dagrt_worker_new returned NULL", || {
            "dagrt_worker_new succeeded with a NULL worker".into()
        })?;
        let cfg = if cfg_null {
            WorkerConfig::default()
        } else {
            cfg
        };
        self.log(format!("       (worker {} created)", self.workers.len()));
        self.workers.push(WModel {
            ptr: out,
            cfg,
            nl: Vec::new(),
            nsub: 0,
            state: WState::New,
            orch: std::ptr::null_mut(),
            open: None,
            rings: vec![RingM::default(); 4],
            base: [None; 4],
            next_seq: 1,
            closing: false,
        });
        if cfg.heap_ring_size >= 1 << 61 {
            // four rings of this size cannot be mapped: init fails with SYSTEM (twice: the
            // worker stays configurable), and the worker is freed
            let w = self.workers.len() - 1;
            let lane = self.rng.pick(&LANE_IDS);
            self.call(
                Th::Main,
                format!("dagrt_worker_add_next_level_lane(w{w}, {lane})"),
                &[Status::Ok],
                || cw::dagrt_worker_add_next_level_lane(out, lane),
            )?;
            self.workers[w].nl.push(lane);
            for _ in 0..2 {
                self.call(
                    Th::Main,
                    format!("dagrt_worker_init(w{w}) [unmappable heap]"),
                    &[Status::System],
                    || cw::dagrt_worker_init(out),
                )?;
            }
            self.free_worker(w)?;
        }
        Ok(())
    }

    fn op_add_nl(&mut self, valid: bool) -> R {
        let wi = if valid {
            self.primary()
        } else {
            self.pick_worker()
        };
        let null_w = !valid && self.rng.pct(3);
        let wi = if null_w { None } else { wi };
        let (nl, lanes, state) = match wi {
            Some(w) => (
                self.workers[w].nl.clone(),
                self.workers[w].lanes(),
                self.workers[w].state,
            ),
            None => (Vec::new(), 0, WState::New),
        };
        let fresh: Vec<i32> = LANE_IDS
            .iter()
            .copied()
            .filter(|i| !nl.contains(i))
            .collect();
        let r = if valid { 0 } else { self.rng.below(100) };
        let id = if r < 65 && lanes < 4 && !fresh.is_empty() {
            self.rng.pick(&fresh)
        } else if r < 82 && !nl.is_empty() {
            self.rng.pick(&nl)
        } else if r < 94 {
            self.rng.pick(&[-1, -7, i32::MIN])
        } else {
            self.rng
                .pick(&fresh.iter().copied().chain([4242]).collect::<Vec<_>>())
        };
        let mut exp = Vec::new();
        if wi.is_none() {
            exp.push(Status::NullPointer);
        } else {
            if state != WState::New {
                exp.push(Status::WrongState);
            }
            if id < 0 {
                exp.push(Status::InvalidArgument);
            } else if nl.contains(&id) {
                exp.push(Status::DuplicateTarget);
            }
        }
        if exp.is_empty() {
            exp.push(Status::Ok);
        }
        if wi.is_some_and(|w| self.workers[w].state == WState::Closed) {
            self.hint = Some("a closed worker accepts dagrt_worker_init / add lanes (documented: before init only)".into());
        }
        let p = self.wptr(wi);
        let st = self.call(
            Th::Main,
            format!(
                "dagrt_worker_add_next_level_lane({}, {id})",
                worker_label(wi)
            ),
            &exp,
            || cw::dagrt_worker_add_next_level_lane(p, id),
        )?;
        if st == Status::Ok {
            if let Some(w) = wi {
                self.workers[w].nl.push(id);
            }
        }
        Ok(())
    }

    fn op_add_sub(&mut self, valid: bool) -> R {
        let wi = if valid {
            self.primary()
        } else {
            self.pick_worker()
        };
        let null_w = !valid && self.rng.pct(3);
        let wi = if null_w { None } else { wi };
        let (lanes, nsub, state) = match wi {
            Some(w) => (
                self.workers[w].lanes(),
                self.workers[w].nsub,
                self.workers[w].state,
            ),
            None => (0, 0, WState::New),
        };
        let r = if valid { 0 } else { self.rng.below(100) };
        let n: u32 = if r < 70 && lanes < 4 {
            self.rng.range(1, (4 - lanes as u64).min(2)) as u32
        } else if r < 85 {
            0
        } else {
            1025 - nsub + self.rng.below(500) as u32
        };
        let mut exp = Vec::new();
        if wi.is_none() {
            exp.push(Status::NullPointer);
        } else {
            if state != WState::New {
                exp.push(Status::WrongState);
            }
            if n == 0 || nsub + n > 1024 {
                exp.push(Status::InvalidArgument);
            }
        }
        if exp.is_empty() {
            exp.push(Status::Ok);
        }
        if wi.is_some_and(|w| self.workers[w].state == WState::Closed) {
            self.hint = Some("a closed worker accepts dagrt_worker_init / add lanes (documented: before init only)".into());
        }
        let p = self.wptr(wi);
        let st = self.call(
            Th::Main,
            format!("dagrt_worker_add_sub_lanes({}, {n})", worker_label(wi)),
            &exp,
            || cw::dagrt_worker_add_sub_lanes(p, n),
        )?;
        if st == Status::Ok {
            if let Some(w) = wi {
                self.workers[w].nsub += n;
            }
        }
        Ok(())
    }

    fn op_init(&mut self, valid: bool) -> R {
        let fresh: Vec<usize> = self
            .live_workers()
            .into_iter()
            .filter(|&w| self.workers[w].state == WState::New)
            .collect();
        let wi = if valid {
            self.primary()
        } else if !fresh.is_empty() && self.cb.is_none() && self.rng.pct(70) {
            Some(fresh[self.rng.idx(fresh.len())])
        } else {
            self.pick_worker()
        };
        let wi = if !valid && self.rng.pct(3) { None } else { wi };
        let mut exp = Vec::new();
        match wi {
            None => exp.push(Status::NullPointer),
            Some(w) => {
                let m = &self.workers[w];
                match m.state {
                    // A closed worker has been initialised: "Before init only" calls and a
                    // second init are wrong-state.
                    WState::Init | WState::Closed => exp.push(Status::WrongState),
                    _ if m.lanes() == 0 => exp.push(Status::WrongState),
                    _ if m.cfg.heap_ring_size >= 1 << 61 => exp.push(Status::System),
                    _ => exp.push(Status::Ok),
                }
            }
        }
        if wi.is_some_and(|w| self.workers[w].state == WState::Closed) {
            self.hint = Some("a closed worker accepts dagrt_worker_init / add lanes (documented: before init only)".into());
        }
        let p = self.wptr(wi);
        let st = self.call(
            Th::Main,
            format!("dagrt_worker_init({})", worker_label(wi)),
            &exp,
            || cw::dagrt_worker_init(p),
        )?;
        if st == Status::Ok {
            let w = wi.expect("init succeeded on a worker");
            let m = &mut self.workers[w];
            m.state = WState::Init;
            m.rings = vec![RingM::default(); 4];
            m.base = [None; 4];
            m.next_seq = 1;
            m.open = None;
            let mut o: *mut dagrt_orch_t = std::ptr::null_mut();
            let op: *mut *mut dagrt_orch_t = &mut o;
            self.call(
                Th::Main,
                format!("dagrt_worker_orch(w{w}, &o)"),
                &[Status::Ok],
                || cw::dagrt_worker_orch(p, op),
            )?;
            let known = self.workers[w].orch;
            self.check(
                !o.is_null() && (known.is_null() || known == o),
                "dagrt_worker_orch changed",
                || format!("orch {o:?}, previously {known:?}"),
            )?;
            self.workers[w].orch = o;
        }
        Ok(())
    }

    fn op_orch(&mut self) -> R {
        let wi = self.pick_worker();
        let r = self.rng.below(100);
        let wi = if r < 5 { None } else { wi };
        let null_out = (5..20).contains(&r);
        let mut exp = Vec::new();
        match wi {
            None => exp.push(Status::NullPointer),
            Some(w) => {
                if self.workers[w].state != WState::Init {
                    exp.push(Status::WrongState);
                }
                if null_out {
                    exp.push(Status::NullPointer);
                }
            }
        }
        if exp.is_empty() {
            exp.push(Status::Ok);
        }
        let sentinel = 0x0DC4_0000usize as *mut dagrt_orch_t;
        let mut o = sentinel;
        let op: *mut *mut dagrt_orch_t = if null_out {
            std::ptr::null_mut()
        } else {
            &mut o
        };
        let p = self.wptr(wi);
        let st = self.call(
            Th::Main,
            format!(
                "dagrt_worker_orch({}, {})",
                worker_label(wi),
                if null_out { "NULL" } else { "&o" }
            ),
            &exp,
            || cw::dagrt_worker_orch(p, op),
        )?;
        if st == Status::Ok {
            let w = wi.expect("orch succeeded on a worker");
            let known = self.workers[w].orch;
            self.check(
                !o.is_null() && (known.is_null() || known == o),
                "dagrt_worker_orch changed",
                || format!("orch {o:?}, previously {known:?}"),
            )?;
            self.workers[w].orch = o;
        } else {
            self.check(
                o == sentinel,
                "dagrt_worker_orch wrote out on failure",
                || "out-parameter written on failure".into(),
            )?;
        }
        Ok(())
    }

    fn op_stats(&mut self) -> R {
        let wi = self.pick_worker();
        let r = self.rng.below(100);
        let wi = if r < 4 { None } else { wi };
        let null_out = (4..10).contains(&r);
        let th = if self.rng.pct(15) {
            Th::Helper
        } else {
            Th::Main
        };
        let mut exp = Vec::new();
        match wi {
            None => exp.push(Status::NullPointer),
            Some(w) => {
                if null_out {
                    exp.push(Status::NullPointer);
                }
                if self.workers[w].state != WState::Init {
                    exp.push(Status::WrongState);
                }
            }
        }
        if exp.is_empty() {
            exp.push(Status::Ok);
        }
        let mut s = WorkerStats {
            live_slots: -77,
            ..Default::default()
        };
        let sp: *mut WorkerStats = if null_out {
            std::ptr::null_mut()
        } else {
            &mut s
        };
        let p = self.wptr(wi);
        let st = self.call(
            th,
            format!(
                "dagrt_worker_stats({}, {})",
                worker_label(wi),
                if null_out { "NULL" } else { "&s" }
            ),
            &exp,
            || cw::dagrt_worker_stats(p, sp),
        )?;
        if st == Status::Ok {
            self.log(format!(
                "       (stats: live {}, tmap {}, runs {}, queued {}, tops {:?}, tails {:?})",
                s.live_slots, s.tensormap_entries, s.runs, s.ready_queued, s.heap_top, s.heap_tail
            ));
            self.check_stats(wi.expect("stats on a worker"), &s)?;
        } else {
            self.check(
                s.live_slots == -77,
                "dagrt_worker_stats wrote out on failure",
                || "out-parameter written on failure".into(),
            )?;
        }
        Ok(())
    }

    fn open_all_gates(&mut self) {
        let mut opened = Vec::new();
        for g in 0..MAX_GATES {
            if !self.gates[g] {
                self.gates[g] = true;
                self.rec.gates[g].store(true, SeqCst);
                opened.push(g);
            }
        }
        if self.nodes.iter().any(|n| {
            n.task
                .as_ref()
                .is_some_and(|t| t.gate.is_some_and(|g| opened.contains(&g)))
        }) {
            self.log("       (all gates opened)".into());
        }
    }

    fn op_gate(&mut self) -> R {
        let used: Vec<usize> = self
            .nodes
            .iter()
            .filter_map(|n| n.task.as_ref().and_then(|t| t.gate))
            .filter(|&g| !self.gates[g])
            .collect();
        if used.is_empty() {
            return Ok(());
        }
        let g = self.rng.pick(&used);
        self.gates[g] = true;
        self.rec.gates[g].store(true, SeqCst);
        self.log(format!("#{:<4}      open gate {g}", self.step));
        Ok(())
    }

    /// Close a worker: waits for its closed runs (gates are opened first, now or shortly
    /// after the call started), then its runs are gone.
    fn op_close_worker(&mut self, valid: bool) -> R {
        let wi = if valid {
            self.primary()
        } else {
            self.pick_worker()
        };
        let wi = if !valid && self.rng.pct(3) { None } else { wi };
        let mut exp = vec![Status::Ok];
        if let Some(w) = wi {
            if self.workers[w].state == WState::Init && self.workers[w].open.is_some() {
                exp = vec![Status::WrongState];
            }
        } else {
            exp = vec![Status::NullPointer];
        }
        let mut opener = None;
        if exp == [Status::Ok]
            && wi.is_some_and(|w| self.workers[w].state == WState::Init && self.any_blocked(w))
        {
            if self.rng.pct(50) {
                self.open_all_gates();
            } else {
                // Close while tasks are blocked: a second thread opens the gates a little later.
                opener = Some(self.open_gates_during_close());
            }
        }
        let p = self.wptr(wi);
        let st = self.call(
            Th::Main,
            format!("dagrt_worker_close({})", worker_label(wi)),
            &exp,
            || cw::dagrt_worker_close(p),
        );
        if let Some(o) = opener {
            let _ = o.join();
            self.open_all_gates();
        }
        let st = st?;
        if st == Status::Ok {
            self.closed_model(wi.expect("close on a worker"))?;
        }
        Ok(())
    }

    /// A budget for `dagrt_worker_close_for`: (timeout_ms, large). 0 and small budgets (1-20
    /// ms, three orders of magnitude below GATE_LIMIT, how long a gated task can be held)
    /// let the model say a blocked run cannot finish in time; a large one (LONG_WAIT_MS, or
    /// u64::MAX, which overflows any deadline and so waits without bound) must see every
    /// run finish, so it is only used once no task can stay blocked.
    fn close_budget(&mut self) -> (u64, bool) {
        match self.rng.below(100) {
            0..=24 => (0, false),
            25..=64 => (self.rng.range(1, 20), false),
            65..=94 => (LONG_WAIT_MS, true),
            _ => (u64::MAX, true),
        }
    }

    /// dagrt_worker_close_for: close within a cleanup budget. Defects: a NULL worker, a NULL
    /// out_closed (checked first; the header names no order, so with two defects either
    /// status), a run open for submission (WRONG_STATE; nothing changes, the worker does not
    /// start closing). A never-initialised worker is closed at once, as dagrt_worker_close
    /// does (OK, closed = 1, and it stays configurable: there is nothing to tear down), and
    /// so is a closed one (idempotent). On an initialised worker the model predicts
    /// out_closed from its registered runs (begun, not released):
    /// - 1 when every one was seen done (or there is none), and with a large budget, which
    ///   is only used once every gate is open (now, or by a second thread 5 ms into the
    ///   call: close_for must keep waiting for the runs it refused to tear down);
    /// - 0 when one is definitely unfinished (a task blocked on a closed gate, or behind
    ///   one) and the budget is 0 or small: nothing opens a gate during the call;
    /// - either otherwise (a task may not have finished yet).
    ///
    /// closed = 1 tears the worker down as dagrt_worker_close does (its runs are gone).
    /// closed = 0 must come no earlier than the budget and leaves everything standing
    /// (stats still answer, exact) but puts the worker in the closing state
    /// (`WModel::closing`): from then on only new runs are refused.
    fn op_close_for(&mut self, valid: bool) -> R {
        let wi = if valid {
            self.primary()
        } else {
            self.pick_worker()
        };
        let r = if valid { 99 } else { self.rng.below(100) };
        let wi = if r < 3 { None } else { wi };
        let null_out = (3..9).contains(&r);
        let (mut budget, mut large) = self.close_budget();
        if large && wi.is_some_and(|w| self.any_blocked(w)) && self.rng.pct(60) {
            // A blocked task is what lets a budget run out: use it more often than not.
            budget = self.rng.range(0, 20);
            large = false;
        }
        let mut exp = Vec::new();
        if null_out {
            exp.push(Status::NullPointer);
        }
        match wi {
            None => exp.push(Status::NullPointer),
            Some(w) => {
                if self.workers[w].state == WState::Init && self.workers[w].open.is_some() {
                    exp.push(Status::WrongState);
                }
            }
        }
        if exp.is_empty() {
            exp.push(Status::Ok);
        }
        let waits =
            exp == [Status::Ok] && wi.is_some_and(|w| self.workers[w].state == WState::Init);
        let mut opener = None;
        let mut want: Vec<u32> = vec![1];
        let mut undone = None;
        if waits {
            let w = wi.expect("close_for on a worker");
            if large && self.any_blocked(w) {
                if self.rng.pct(50) {
                    self.open_all_gates();
                } else {
                    // The budget is far beyond the gates' opening: every run finishes.
                    opener = Some(self.open_gates_during_close());
                }
            }
            let mine: Vec<usize> = (0..self.runs.len())
                .filter(|&ri| {
                    self.runs[ri].worker == w && !self.runs[ri].released && !self.runs[ri].gone
                })
                .collect();
            if !large
                && !self.any_blocked(w)
                && mine.iter().any(|&ri| !self.runs[ri].done_seen)
                && self.rng.pct(30)
            {
                // Let every run finish first (none can stay blocked): then even budget 0
                // must close the worker.
                self.settle_runs(w, &mine)?;
            }
            let lv = self.live(w);
            undone = mine
                .iter()
                .copied()
                .find(|&ri| self.definitely_undone(ri, &lv));
            want = if large || mine.iter().all(|&ri| self.runs[ri].done_seen) {
                vec![1]
            } else if undone.is_some() {
                vec![0]
            } else {
                vec![0, 1]
            };
            if let Some(ri) = undone.filter(|_| want == [1]) {
                // Only with a large budget and the gates opening: name the run for the log.
                self.log(format!(
                    "       (run {} is blocked until the gates open)",
                    self.runs[ri].id.unwrap_or(0)
                ));
            }
        }
        let mut closed: u32 = 7;
        let cp: *mut u32 = if null_out {
            std::ptr::null_mut()
        } else {
            &mut closed
        };
        let p = self.wptr(wi);
        let t0 = Instant::now();
        let st = self.call(
            Th::Main,
            format!(
                "dagrt_worker_close_for({}, {budget} ms, {})",
                worker_label(wi),
                if null_out { "NULL" } else { "&closed" }
            ),
            &exp,
            || cw::dagrt_worker_close_for(p, budget, cp),
        );
        let el = t0.elapsed();
        if let Some(o) = opener {
            let _ = o.join();
            self.open_all_gates();
        }
        let st = st?;
        if st != Status::Ok {
            return self.check(
                closed == 7,
                "dagrt_worker_close_for wrote out_closed on failure",
                || format!("out_closed = {closed} after a failed call (was 7)"),
            );
        }
        let w = wi.expect("close_for succeeded on a worker");
        self.log(format!(
            "       (closed = {closed}, expected {})",
            want.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join("|")
        ));
        if !want.contains(&closed) {
            let sig = match (closed, undone) {
                (1, Some(ri)) => {
                    let lv = self.live(w);
                    match self.undone_sig(ri, &lv) {
                        "a run reported done while it cannot be" => {
                            "dagrt_worker_close_for: closed = 1 while a run cannot be done"
                        }
                        x => x,
                    }
                }
                (0, _) => {
                    "dagrt_worker_close_for: closed = 0 although every run was done or had the time to finish"
                }
                _ => "dagrt_worker_close_for: out_closed is neither 0 nor 1",
            };
            return self.fatal(
                sig,
                format!(
                    "dagrt_worker_close_for(w{w}, {budget} ms) set out_closed = {closed} after {} ms, the model expected {want:?}",
                    el.as_millis()
                ),
            );
        }
        if waits {
            self.totals.close_for[closed as usize] += 1;
        }
        if closed == 1 {
            return self.closed_model(w);
        }
        // closed = 0: the budget ran out with a run still running
        if el + Duration::from_millis(1) < Duration::from_millis(budget) {
            self.soft(
                "dagrt_worker_close_for gave up before its budget",
                format!(
                    "closed = 0 after {:.3} ms of a {budget} ms budget",
                    el.as_micros() as f64 / 1000.0
                ),
            );
        }
        if el > Duration::from_millis(budget) + Duration::from_secs(5) {
            self.soft(
                "dagrt_worker_close_for overran its budget",
                format!(
                    "closed = 0 after {} ms of a {budget} ms budget",
                    el.as_millis()
                ),
            );
        }
        if !self.workers[w].closing {
            self.log(format!("       (w{w} is closing: new runs are refused)"));
        }
        self.workers[w].closing = true;
        // nothing was torn down: the worker answers, with its runs still registered
        self.check_stats_exact(w)
    }

    /// Worker `w` was closed (torn down, if it had started): its unreleased runs' tasks ran
    /// as the model says, and the runs are gone.
    fn closed_model(&mut self, w: usize) -> R {
        if self.workers[w].state == WState::Init {
            for ri in 0..self.runs.len() {
                if self.runs[ri].worker == w && !self.runs[ri].released && !self.runs[ri].gone {
                    self.check_fates(ri)?;
                }
            }
            self.drop_worker_runs(w);
            self.workers[w].state = WState::Closed;
            self.workers[w].closing = false;
        }
        Ok(())
    }

    /// A thread that opens every gate 5 ms from now (join it after the close it races).
    fn open_gates_during_close(&mut self) -> std::thread::JoinHandle<()> {
        let rec = self.rec.clone();
        self.log("       (gates open in 5 ms, during the close)".into());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            for g in rec.gates.iter() {
                g.store(true, SeqCst);
            }
        })
    }

    /// Wait for every run in `runs` (closed, none possibly blocked) and check it as done.
    fn settle_runs(&mut self, w: usize, runs: &[usize]) -> R {
        let p = self.workers[w].ptr;
        for &ri in runs {
            if self.runs[ri].done_seen {
                continue;
            }
            self.wait_done(w, p, ri, "with no task blocked")?;
        }
        Ok(())
    }

    /// Wait (bounded) for closed run `ri` of worker `w`, which nothing blocks (`why` says
    /// why not), and check it finished with the terminal status and message it must have.
    fn wait_done(&mut self, w: usize, p: *mut dagrt_worker_t, ri: usize, why: &str) -> R {
        let id = self.runs[ri].id.expect("a closed run has an id");
        let (exp, _) = self.expected_terminal(ri);
        let mut done: u32 = 9;
        let dp: *mut u32 = &mut done;
        let st = self.call(
            Th::Main,
            format!("dagrt_wait_run_for(w{w}, {id}, {LONG_WAIT_MS} ms, &d)"),
            &exp,
            || cr::dagrt_wait_run_for(p, id, LONG_WAIT_MS, dp),
        )?;
        self.check(done == 1, "a run did not finish", || {
            format!("run {id} not done after {LONG_WAIT_MS} ms {why}")
        })?;
        self.check_terminal_msg(ri, st)?;
        self.on_done(ri)
    }

    fn drop_worker_runs(&mut self, w: usize) {
        for r in self.runs.iter_mut() {
            if r.worker == w && !r.released {
                r.gone = true;
                for &f in &r.frames {
                    self.frames[f] = false;
                }
                r.frames.clear();
            }
        }
        self.workers[w].open = None;
    }

    /// Free a worker (dagrt_worker_free cannot fail). An open run is abandoned (its
    /// submission fails), closed runs are waited for: gates are opened first.
    fn free_worker(&mut self, w: usize) -> R {
        self.open_all_gates();
        let p = self.workers[w].ptr;
        let open = self.workers[w].open;
        self.log(format!("#{:<4} main dagrt_worker_free(w{w})", self.step));
        cw::dagrt_worker_free(p);
        self.tick();
        if self.workers[w].state == WState::Init {
            if let Some(ri) = open {
                for &f in &self.runs[ri].frames {
                    self.frames[f] = false;
                }
                self.runs[ri].frames.clear();
                self.runs[ri].closed = true;
                self.runs[ri].failed = Some("worker freed while the run was open".into());
                self.classify_failed_run(ri);
            }
            for ri in 0..self.runs.len() {
                if self.runs[ri].worker == w && !self.runs[ri].released && !self.runs[ri].gone {
                    self.check_fates(ri)?;
                }
            }
        }
        self.drop_worker_runs(w);
        self.workers[w].state = WState::Freed;
        Ok(())
    }

    fn op_free_worker(&mut self) -> R {
        let live = self.live_workers();
        if live.is_empty() {
            return Ok(());
        }
        let p = live[0];
        let w = if live.len() > 1 && (self.workers[p].state == WState::Init || self.rng.pct(50)) {
            live[1 + self.rng.idx(live.len() - 1)]
        } else {
            p
        };
        self.free_worker(w)
    }

    /// Register every identity the fuzzer uses with its binding (idempotent), so that every
    /// sequence starts from the same process-wide registry and replays make the same choices.
    fn register_all(&mut self) -> R {
        for name in NAMES {
            for ns in NSS {
                for kind in [0u32, 1] {
                    let (ex, us) = binding(name, ns, kind);
                    let cname = format!("{name}\0");
                    let mut out = Callable {
                        digest: [0; 32],
                        kind: 0,
                        ns: 0,
                    };
                    let st = cc::dagrt_register_callable(
                        cname.as_ptr().cast(),
                        ns,
                        kind,
                        Some(EXECS[ex]),
                        user_ptr(us),
                        &mut out,
                    );
                    let mut reg = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
                    let prev = reg.insert((name.to_string(), ns, kind), (ex, us, out));
                    drop(reg);
                    self.check(
                        st == Status::Ok && prev.is_none_or(|p| p.2 == out),
                        "dagrt_register_callable (setup)",
                        || {
                            format!(
                                "registering {name}/{ns}/{kind} with its binding: {} (identity {})",
                                sname(st),
                                if prev.is_some() {
                                    "re-registered"
                                } else {
                                    "new"
                                }
                            )
                        },
                    )?;
                }
            }
        }
        Ok(())
    }

    fn op_register(&mut self, fixed: Option<(&str, u32, u32)>) -> R {
        let (name, ns, kind) = match fixed {
            Some(f) => (f.0.to_string(), f.1, f.2),
            None => {
                let k = if self.rng.pct(70) {
                    0
                } else if self.rng.pct(85) {
                    1
                } else {
                    self.rng.pick(&[2, 9])
                };
                (self.rng.pick(&NAMES).to_string(), self.rng.pick(&NSS), k)
            }
        };
        let (mut ex, mut us) = binding(&name, ns, kind);
        let r = if fixed.is_some() {
            99
        } else {
            self.rng.below(100)
        };
        let mut exp = Vec::new();
        let cname = format!("{name}\0");
        let bad = [b'f', 0xff, 0xfe, 0];
        let empty = [0u8];
        let (namep, shown): (*const c_char, String) = match r {
            0..=5 => {
                exp.push(Status::NullPointer);
                (std::ptr::null(), "NULL".into())
            }
            6..=9 => {
                exp.push(Status::InvalidArgument);
                (bad.as_ptr().cast(), "\"f\\xff\\xfe\"".into())
            }
            10..=12 => {
                exp.push(Status::InvalidArgument);
                (empty.as_ptr().cast(), "\"\"".into())
            }
            _ => (cname.as_ptr().cast(), format!("{name:?}")),
        };
        let null_exec = (13..=16).contains(&r);
        let null_out = (17..=20).contains(&r);
        if null_exec || null_out {
            exp.push(Status::NullPointer);
        }
        if (21..=32).contains(&r) {
            // Bind the identity to another executor or user pointer: a conflict if it exists.
            if self.rng.pct(50) {
                ex = 1 - ex;
            } else {
                us = (us + 1 + self.rng.idx(2)) % 3;
            }
        }
        let valid_name = r > 12;
        if kind > 1 {
            exp.push(Status::InvalidArgument);
        }
        let existing = REGISTRY
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(name.clone(), ns, kind))
            .copied();
        if exp.is_empty() && valid_name {
            match existing {
                Some((e, u, _)) if (e, u) != (ex, us) => exp.push(Status::CallableConflict),
                _ => exp.push(Status::Ok),
            }
        }
        let sentinel = Callable {
            digest: [0xAB; 32],
            kind: 77,
            ns: 77,
        };
        let mut out = sentinel;
        let outp: *mut Callable = if null_out {
            std::ptr::null_mut()
        } else {
            &mut out
        };
        let exec: cc_exec::ExecutorFn = if null_exec { None } else { Some(EXECS[ex]) };
        let user = user_ptr(us);
        let th = if self.rng.pct(10) {
            Th::Helper
        } else {
            Th::Main
        };
        let desc = format!(
            "dagrt_register_callable({shown}, {ns}, {kind}, {}, {}, {})",
            if null_exec {
                "NULL".to_string()
            } else {
                format!("exec{ex}")
            },
            ["&U0", "&U1", "NULL"][us],
            if null_out { "NULL" } else { "&c" }
        );
        let nsu = ns;
        let st = self.call(th, desc, &exp, move || {
            cc::dagrt_register_callable(namep, nsu, kind, exec, user, outp)
        })?;
        if st != Status::Ok {
            return self.check(
                out == sentinel,
                "dagrt_register_callable wrote out on failure",
                || "out-parameter written on failure".into(),
            );
        }
        self.check(
            out.kind == kind && out.ns == ns,
            "callable identity fields",
            || {
                format!(
                    "identity kind {} ns {} for kind {kind} ns {ns}",
                    out.kind, out.ns
                )
            },
        )?;
        let mut reg = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
        match existing {
            Some((_, _, id)) => {
                drop(reg);
                self.check(
                    id == out,
                    "re-registration returned another identity",
                    || format!("{name}/{ns}/{kind}: identity changed on re-registration"),
                )?;
            }
            None => {
                let clash = reg.values().any(|(_, _, id)| id.digest == out.digest);
                reg.insert((name.clone(), ns, kind), (ex, us, out));
                drop(reg);
                self.check(!clash, "two callables share a digest", || {
                    format!("{name}/{ns}/{kind} has the digest of another identity")
                })?;
            }
        }
        Ok(())
    }

    fn op_tensor_init(&mut self) -> R {
        let strided = self.rng.pct(40);
        let r = self.rng.below(100);
        let ndim: u32 = if (10..20).contains(&r) {
            self.rng.range(6, 8) as u32
        } else {
            self.rng.range(0, 5) as u32
        };
        let null_out = r < 10;
        let null_shape = (20..30).contains(&r) && ndim > 0;
        let null_strides = strided && (30..40).contains(&r) && ndim > 0;
        let shape: [u64; 8] = std::array::from_fn(|_| self.rng.range(0, 9));
        let strides: [u64; 8] = std::array::from_fn(|_| self.rng.range(0, 20));
        let data = if self.rng.pct(30) {
            std::ptr::null_mut()
        } else {
            (HOST_BASE + self.rng.below(HOST_BUFS) * HOST_STRIDE) as *mut c_void
        };
        let dtype = self.rng.below(15) as u32;
        let tag = self.rng.below(6) as u32;
        let off = self.rng.below(64);
        let mut exp = Vec::new();
        if null_out || null_shape || null_strides {
            exp.push(Status::NullPointer);
        }
        if ndim > 5 {
            exp.push(Status::InvalidArgument);
        }
        if exp.is_empty() {
            exp.push(Status::Ok);
        }
        let sentinel = Tensor {
            data: 0x77usize as *mut c_void,
            offset: 77,
            ndim: 77,
            dtype: 77,
            tag: 77,
            reserved: 77,
            shape: [77; 5],
            strides: [77; 5],
        };
        let mut out = sentinel;
        let outp: *mut Tensor = if null_out {
            std::ptr::null_mut()
        } else {
            &mut out
        };
        let shp: *const u64 = if null_shape {
            std::ptr::null()
        } else {
            shape.as_ptr()
        };
        let stp: *const u64 = if null_strides {
            std::ptr::null()
        } else {
            strides.as_ptr()
        };
        let desc = format!(
            "dagrt_tensor_init{}({}, {:#x}, dt{dtype}, nd{ndim}, {}, tag{tag})",
            if strided { "_strided" } else { "" },
            if null_out { "NULL" } else { "&t" },
            data as u64,
            if null_shape { "NULL" } else { "shape" }
        );
        let st = self.call(Th::Main, desc, &exp, || {
            if strided {
                ca::dagrt_tensor_init_strided(outp, data, off, dtype, ndim, shp, stp, tag)
            } else {
                ca::dagrt_tensor_init(outp, data, dtype, ndim, shp, tag)
            }
        })?;
        if st != Status::Ok {
            return self.check(
                out.offset == 77 && out.ndim == 77,
                "dagrt_tensor_init wrote out on failure",
                || "out-parameter written on failure".into(),
            );
        }
        let nd = ndim as usize;
        let mut ws = [0u64; 5];
        ws[..nd].copy_from_slice(&shape[..nd]);
        let mut wst = [0u64; 5];
        if strided {
            wst[..nd].copy_from_slice(&strides[..nd]);
        }
        let ok = out.data == data
            && out.offset == if strided { off } else { 0 }
            && out.ndim == ndim
            && out.dtype == dtype
            && out.tag == tag
            && out.reserved == 0
            && out.shape == ws
            && out.strides == wst;
        self.check(ok, "dagrt_tensor_init result", || {
            format!("initialised tensor {out:?} does not match the arguments")
        })
    }

    fn op_builder(&mut self) -> R {
        let r = self.rng.below(100);
        // new / free
        if r < 12 || self.builders.is_empty() {
            let null_out = self.rng.pct(8);
            let sentinel = 0xB1D0usize as *mut dagrt_args_t;
            let mut out = sentinel;
            let op: *mut *mut dagrt_args_t = if null_out {
                std::ptr::null_mut()
            } else {
                &mut out
            };
            let exp = if null_out {
                vec![Status::NullPointer]
            } else {
                vec![Status::Ok]
            };
            let st = self.call(
                Th::Main,
                format!("dagrt_args_new({})", if null_out { "NULL" } else { "&a" }),
                &exp,
                || ca::dagrt_args_new(op),
            )?;
            if st == Status::Ok {
                self.check(
                    !out.is_null() && out != sentinel,
                    "dagrt_args_new result",
                    || "no builder returned".into(),
                )?;
                self.builders.push(Builder {
                    ptr: out,
                    tensors: Vec::new(),
                    scalars: Vec::new(),
                    deps: Vec::new(),
                });
            } else {
                self.check(
                    out == sentinel,
                    "dagrt_args_new wrote out on failure",
                    || "out-parameter written on failure".into(),
                )?;
            }
            return Ok(());
        }
        if r < 17 {
            let i = self.rng.idx(self.builders.len() + 1);
            if i == self.builders.len() {
                self.log(format!("#{:<4} main dagrt_args_free(NULL)", self.step));
                ca::dagrt_args_free(std::ptr::null_mut());
            } else {
                let b = self.builders.remove(i);
                self.log(format!("#{:<4} main dagrt_args_free(a{i})", self.step));
                ca::dagrt_args_free(b.ptr);
            }
            return Ok(());
        }
        let bi = self.rng.idx(self.builders.len());
        let null_b = self.rng.pct(6);
        let bp = if null_b {
            std::ptr::null_mut()
        } else {
            self.builders[bi].ptr
        };
        let bn = if null_b {
            "NULL".to_string()
        } else {
            format!("a{bi}")
        };
        let op = self.rng.below(8);
        match op {
            0 => {
                let exp = if null_b {
                    vec![Status::NullPointer]
                } else {
                    vec![Status::Ok]
                };
                let st = self.call(Th::Main, format!("dagrt_args_clear({bn})"), &exp, || {
                    ca::dagrt_args_clear(bp)
                })?;
                if st == Status::Ok {
                    let b = &mut self.builders[bi];
                    b.tensors.clear();
                    b.scalars.clear();
                    b.deps.clear();
                }
            }
            1 => {
                let null_t = self.rng.pct(8);
                let t = self.any_tensor();
                let tp: *const Tensor = if null_t { std::ptr::null() } else { &t };
                let exp = if null_b || null_t {
                    vec![Status::NullPointer]
                } else {
                    vec![Status::Ok]
                };
                let st = self.call(
                    Th::Main,
                    format!(
                        "dagrt_args_add_tensor({bn}, {})",
                        if null_t {
                            "NULL".into()
                        } else {
                            fmt_tensor(&t)
                        }
                    ),
                    &exp,
                    || ca::dagrt_args_add_tensor(bp, tp),
                )?;
                if st == Status::Ok {
                    self.builders[bi].tensors.push(t);
                }
            }
            2 => {
                let v = self.rng.next();
                let exp = if null_b {
                    vec![Status::NullPointer]
                } else {
                    vec![Status::Ok]
                };
                let st = self.call(
                    Th::Main,
                    format!("dagrt_args_add_scalar({bn}, {v:#x})"),
                    &exp,
                    || ca::dagrt_args_add_scalar(bp, v),
                )?;
                if st == Status::Ok {
                    self.builders[bi].scalars.push(v);
                }
            }
            3 | 4 => {
                let h = self.any_handle();
                let wait = op == 4;
                let exp = if null_b {
                    vec![Status::NullPointer]
                } else {
                    vec![Status::Ok]
                };
                let st = self.call(
                    Th::Main,
                    format!(
                        "dagrt_args_add_dep{}({bn}, {})",
                        if wait { "_wait" } else { "" },
                        fmt_handle(&h)
                    ),
                    &exp,
                    || {
                        if wait {
                            ca::dagrt_args_add_dep_wait(bp, h)
                        } else {
                            ca::dagrt_args_add_dep(bp, h)
                        }
                    },
                )?;
                if st == Status::Ok {
                    self.builders[bi].deps.push(Dep {
                        handle: h,
                        kind: wait as u32,
                        reserved: 0,
                    });
                }
            }
            5 => {
                let null_out = self.rng.pct(10);
                let mut v = TaskArgs {
                    tensors: std::ptr::null_mut(),
                    num_tensors: 77,
                    num_scalars: 77,
                    scalars: std::ptr::null(),
                    deps: std::ptr::null(),
                    num_deps: 77,
                    reserved: 77,
                };
                let vp: *mut TaskArgs = if null_out {
                    std::ptr::null_mut()
                } else {
                    &mut v
                };
                let exp = if null_b || null_out {
                    vec![Status::NullPointer]
                } else {
                    vec![Status::Ok]
                };
                let st = self.call(
                    Th::Main,
                    format!(
                        "dagrt_args_view({bn}, {})",
                        if null_out { "NULL" } else { "&v" }
                    ),
                    &exp,
                    || ca::dagrt_args_view(bp, vp),
                )?;
                if st == Status::Ok {
                    let b = &self.builders[bi];
                    let (nt, ns, nd) = (b.tensors.len(), b.scalars.len(), b.deps.len());
                    let ok = v.num_tensors as usize == nt
                        && v.num_scalars as usize == ns
                        && v.num_deps as usize == nd
                        && v.reserved == 0;
                    self.check(ok, "dagrt_args_view counts", || {
                        format!(
                            "view {v:?} of a builder with {nt} tensors, {ns} scalars, {nd} deps"
                        )
                    })?;
                } else {
                    self.check(
                        v.num_tensors == 77,
                        "dagrt_args_view wrote out on failure",
                        || "out-parameter written on failure".into(),
                    )?;
                }
            }
            _ => {
                let n = self.builders[bi].tensors.len() as u32;
                let idx = if self.rng.pct(70) && n > 0 {
                    self.rng.below(n as u64) as u32
                } else {
                    n + self.rng.below(3) as u32
                };
                let null_out = self.rng.pct(8);
                let mut t = Tensor {
                    data: std::ptr::null_mut(),
                    offset: 99,
                    ndim: 99,
                    dtype: 99,
                    tag: 99,
                    reserved: 99,
                    shape: [99; 5],
                    strides: [99; 5],
                };
                let tp: *mut Tensor = if null_out {
                    std::ptr::null_mut()
                } else {
                    &mut t
                };
                let mut exp = Vec::new();
                if null_b || null_out {
                    exp.push(Status::NullPointer);
                }
                if !null_b && idx >= n {
                    exp.push(Status::InvalidArgument);
                }
                if exp.is_empty() {
                    exp.push(Status::Ok);
                }
                let st = self.call(
                    Th::Main,
                    format!(
                        "dagrt_args_get_tensor({bn}, {idx}, {})",
                        if null_out { "NULL" } else { "&t" }
                    ),
                    &exp,
                    || ca::dagrt_args_get_tensor(bp, idx, tp),
                )?;
                if st == Status::Ok {
                    let m = self.builders[bi].tensors[idx as usize];
                    self.check(
                        hash_tensors(&[m]) == hash_tensors(&[t]),
                        "dagrt_args_get_tensor content",
                        || format!("got {} expected {}", fmt_tensor(&t), fmt_tensor(&m)),
                    )?;
                } else {
                    self.check(
                        t.offset == 99,
                        "dagrt_args_get_tensor wrote out on failure",
                        || "out-parameter written on failure".into(),
                    )?;
                }
            }
        }
        Ok(())
    }

    /// An arbitrary tensor (builder fuzzing: the builder does not validate).
    fn any_tensor(&mut self) -> Tensor {
        let mut shape = [0u64; 5];
        for s in shape.iter_mut() {
            *s = self.rng.below(9);
        }
        Tensor {
            data: if self.rng.pct(20) {
                std::ptr::null_mut()
            } else {
                (HOST_BASE + self.rng.below(HOST_BUFS) * HOST_STRIDE) as *mut c_void
            },
            offset: self.rng.below(64),
            ndim: self.rng.below(8) as u32,
            dtype: self.rng.below(15) as u32,
            tag: self.rng.below(7) as u32,
            reserved: if self.rng.pct(10) { 1 } else { 0 },
            shape,
            strides: [0; 5],
        }
    }

    /// Any handle the fuzzer has seen, or garbage.
    fn any_handle(&mut self) -> TaskHandle {
        if !self.handles.is_empty() && self.rng.pct(80) {
            let i = self.rng.idx(self.handles.len());
            self.handles[i].0
        } else {
            TaskHandle {
                run_id: self.rng.next(),
                slot: self.rng.next(),
            }
        }
    }
}

/// Re-export of the executor pointer type (an Option of the executor function).
mod cc_exec {
    pub type ExecutorFn = dagrt::callable::ExecutorFn;
}

// ---------------------------------------------------------------------------------------
// Operations: the orchestrator

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum OState {
    /// NULL orch handle.
    Null,
    /// The worker is closed: no orchestrator.
    Closed,
    /// No run open for submission.
    NoRun,
    /// A run is open, built by the other thread.
    WrongThread,
    /// The run is open and this thread builds it.
    Ready(usize),
}

struct OC {
    wi: Option<usize>,
    orch: *mut dagrt_orch_t,
    th: Th,
    st: OState,
}

/// The tensors of one member as generated, and what the model needs to know about them.
#[derive(Clone, Copy)]
struct TInfo {
    /// Footprint of a tensor with data (None: zero extent or NO_DEP).
    range: Option<(u64, u64)>,
    /// Dense bytes of an auto-allocated OUTPUT (data NULL).
    auto: Option<u64>,
}

struct MemberSpec {
    tensors: Vec<Tensor>,
    info: Vec<TInfo>,
    scalars: Vec<u64>,
    deps: Vec<Dep>,
    reserved: u32,
    null_tensors: bool,
    null_scalars: bool,
    null_deps: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum HClass {
    Valid(usize),
    Foreign,
    Stale,
}

impl Fz {
    fn orch_ctx(&mut self) -> OC {
        let cands: Vec<usize> = match self.cb {
            Some(c) => vec![c],
            None => self
                .live_workers()
                .into_iter()
                .filter(|&w| !self.workers[w].orch.is_null())
                .collect(),
        };
        if cands.is_empty() || (self.cb.is_none() && self.rng.pct(2)) {
            return OC {
                wi: cands.first().copied(),
                orch: std::ptr::null_mut(),
                th: Th::Main,
                st: OState::Null,
            };
        }
        let p = self.primary();
        let wi = if self.cb.is_none() && p.is_some_and(|p| cands.contains(&p)) && self.rng.pct(85) {
            p.unwrap_or(cands[0])
        } else {
            cands[self.rng.idx(cands.len())]
        };
        let w = &self.workers[wi];
        let builder = w.open.map(|r| self.runs[r].builder);
        let th = if self.cb.is_some() {
            if self.rng.pct(6) {
                Th::Helper
            } else {
                Th::Main
            }
        } else {
            match builder {
                Some(b) => {
                    if self.rng.pct(7) {
                        b.other()
                    } else {
                        b
                    }
                }
                None => {
                    if self.rng.pct(4) {
                        Th::Helper
                    } else {
                        Th::Main
                    }
                }
            }
        };
        let st = if w.state != WState::Init {
            OState::Closed
        } else {
            match (w.open, builder) {
                (Some(r), Some(b)) if b == th => OState::Ready(r),
                (Some(_), _) => OState::WrongThread,
                _ => OState::NoRun,
            }
        };
        OC {
            wi: Some(wi),
            orch: w.orch,
            th,
            st,
        }
    }

    /// Statuses of a call that needs an open run, for a context that does not have one.
    fn state_statuses(st: OState) -> Vec<Status> {
        match st {
            OState::Null => vec![Status::NullPointer],
            OState::Closed | OState::NoRun => vec![Status::WrongState],
            OState::WrongThread => vec![Status::WrongThread],
            OState::Ready(_) => vec![],
        }
    }

    fn orch_name(oc: &OC) -> String {
        match (oc.orch.is_null(), oc.wi) {
            (true, _) => "NULL".into(),
            (false, Some(w)) => format!("o{w}"),
            _ => "o?".into(),
        }
    }

    fn classify_handle(&self, ri: usize, h: &TaskHandle) -> HClass {
        if self.runs[ri].id == Some(h.run_id) {
            return match self.hmap.get(&(h.run_id, h.slot)) {
                Some(&n) if self.nodes[n].run == ri => HClass::Valid(n),
                _ => HClass::Stale,
            };
        }
        match self.run_by_id.get(&h.run_id) {
            Some(&r) if !self.runs[r].released && !self.runs[r].gone => HClass::Foreign,
            _ => HClass::Stale,
        }
    }

    fn hclass_status(c: HClass) -> Option<Status> {
        match c {
            HClass::Valid(_) => None,
            HClass::Foreign => Some(Status::ForeignHandle),
            HClass::Stale => Some(Status::StaleHandle),
        }
    }

    /// A run id that is not the current run's: (id, description).
    fn other_run_id(&mut self, wi: Option<usize>, cur: Option<usize>) -> u64 {
        let mut pool: Vec<u64> = Vec::new();
        for (i, r) in self.runs.iter().enumerate() {
            if Some(i) == cur {
                continue;
            }
            if let Some(id) = r.id {
                pool.push(id);
            }
        }
        let _ = wi;
        if !pool.is_empty() && self.rng.pct(70) {
            self.rng.pick(&pool)
        } else {
            match self.rng.below(3) {
                0 => 0,
                1 => (1 << 48) | self.rng.next(),
                _ => self.run_by_id.keys().max().copied().unwrap_or(0) + 1_000_000,
            }
        }
    }

    fn run_class(&self, wi: usize, id: u64) -> Option<usize> {
        match self.run_by_id.get(&id) {
            Some(&r)
                if !self.runs[r].released && !self.runs[r].gone && self.runs[r].worker == wi =>
            {
                Some(r)
            }
            _ => None,
        }
    }

    /// Status of a run-id argument naming another run than the one being built.
    fn foreign_or_stale(&self, id: u64) -> Status {
        match self.run_by_id.get(&id) {
            Some(&r) if !self.runs[r].released && !self.runs[r].gone => Status::ForeignHandle,
            _ => Status::StaleHandle,
        }
    }

    fn op_begin(&mut self) -> R {
        let oc = self.orch_ctx();
        let null_out = self.rng.pct(5);
        // A worker whose close_for ran out of budget refuses new runs (it has no open run:
        // close_for does not start while one is open, and nothing can begin one after).
        let closing = oc.st == OState::NoRun && oc.wi.is_some_and(|w| self.workers[w].closing);
        let mut exp = match oc.st {
            OState::Null => vec![Status::NullPointer],
            OState::Closed | OState::Ready(_) => vec![Status::WrongState],
            OState::WrongThread => vec![Status::WrongThread, Status::WrongState],
            OState::NoRun if closing => vec![Status::WrongState],
            OState::NoRun => vec![],
        };
        if null_out {
            exp.push(Status::NullPointer);
        }
        if exp.is_empty() {
            exp.push(Status::Ok);
        }
        let mut id: u64 = 0xDEAD_0001;
        let idp: *mut u64 = if null_out {
            std::ptr::null_mut()
        } else {
            &mut id
        };
        let orch = oc.orch;
        let st = self.call(
            oc.th,
            format!(
                "dagrt_begin_run({}, {})",
                Self::orch_name(&oc),
                if null_out { "NULL" } else { "&run" }
            ),
            &exp,
            || co::dagrt_begin_run(orch, idp),
        )?;
        if st != Status::Ok {
            if closing && st == Status::WrongState {
                self.totals.refused_closing += 1;
                let msg = self.last_msg.clone();
                self.check(
                    msg.contains("closing"),
                    "dagrt_begin_run on a closing worker: message",
                    || format!("WRONG_STATE message {msg:?} does not say the worker is closing"),
                )?;
            }
            return self.check(
                id == 0xDEAD_0001,
                "dagrt_begin_run wrote out on failure",
                || "out-parameter written on failure".into(),
            );
        }
        let wi = oc.wi.expect("begin on a worker");
        self.check(
            id != 0 && !self.run_by_id.contains_key(&id),
            "run ids are unique",
            || format!("dagrt_begin_run returned run id {id}, already seen"),
        )?;
        self.log(format!(
            "       (run {id} open, built by the {} thread)",
            if oc.th == Th::Main { "main" } else { "helper" }
        ));
        let f = self.new_frame();
        let ri = self.runs.len();
        self.runs.push(RunM {
            worker: wi,
            id: Some(id),
            builder: oc.th,
            frames: vec![f],
            closed: false,
            failed: None,
            released: false,
            gone: false,
            nodes: Vec::new(),
            tmap: Vec::new(),
            stale: Vec::new(),
            done_seen: false,
            checked: false,
            no_gates: false,
        });
        self.run_by_id.insert(id, ri);
        self.workers[wi].open = Some(ri);
        Ok(())
    }

    fn learn_run_id(&mut self, ri: usize, id: u64) -> R {
        match self.runs[ri].id {
            Some(k) => self.check(k == id, "run id of a handle", || {
                format!("a handle names run {id}, the run being built is {k}")
            }),
            None => {
                self.check(
                    id != 0 && !self.run_by_id.contains_key(&id),
                    "run ids are unique",
                    || format!("the callback's run has id {id}, already seen"),
                )?;
                self.runs[ri].id = Some(id);
                self.run_by_id.insert(id, ri);
                self.log(format!("       (the callback's run is run {id})"));
                Ok(())
            }
        }
    }

    /// A valid tensor view: a host buffer range, a heap buffer of the run, an
    /// auto-allocated OUTPUT, or a zero-extent view.
    fn gen_tensor(
        &mut self,
        wi: Option<usize>,
        ri: Option<usize>,
        allow_auto: bool,
    ) -> (Tensor, TInfo) {
        let ring = wi.map_or(1 << 30, |w| self.workers[w].ring_size());
        let mut t = Tensor {
            data: std::ptr::null_mut(),
            offset: 0,
            ndim: 1,
            dtype: 0,
            tag: 0,
            reserved: 0,
            shape: [0; 5],
            strides: [0; 5],
        };
        let dtype = self.rng.pick(&[0u32, 1, 2, 4, 5, 6, 7, 10, 11, 12]);
        let e = esize(dtype);
        t.dtype = dtype;
        let r = self.rng.below(100);
        if r < 18 && allow_auto {
            // auto-allocated OUTPUT
            let bytes = match self.rng.below(100) {
                0..=69 => self.rng.range(1, 1500),
                70..=94 => self.rng.range(ring / 8, ring / 3).max(1),
                _ => self.rng.range(ring / 2, ring).max(1),
            };
            let n = (bytes / e).max(1);
            let zero = self.rng.pct(4);
            t.tag = 1;
            self.shape_dense(&mut t, if zero { 0 } else { n });
            let dense = if zero { 0 } else { n * e };
            return (
                t,
                TInfo {
                    range: None,
                    auto: Some(dense),
                },
            );
        }
        let tag = match self.rng.below(100) {
            0..=34 => 0,
            35..=49 => 1,
            50..=74 => 2,
            75..=89 => 3,
            _ => 4,
        };
        t.tag = tag;
        let bufs: Vec<(u64, u64)> = match ri {
            Some(ri) => self
                .heapbufs
                .iter()
                .filter(|b| b.run == ri && self.frames[b.frame])
                .map(|b| (b.ptr, b.len))
                .collect(),
            None => Vec::new(),
        };
        let (base, len) = if r < 35 && !bufs.is_empty() {
            // Runtime-owned memory is reclaimed once nothing references it: a writer must be
            // INOUT to keep it alive (OUTPUT / OUTPUT_EXISTING would race its reclamation).
            t.tag = match self.rng.below(10) {
                0..=4 => 0,
                5..=8 => 2,
                _ => 4,
            };
            self.rng.pick(&bufs)
        } else {
            (
                HOST_BASE + self.rng.below(HOST_BUFS) * HOST_STRIDE,
                HOST_LEN,
            )
        };
        let elems = len / e;
        if elems == 0 {
            // a heap buffer smaller than one element of this dtype: view it as bytes
            t.dtype = 0;
            return self.finish_view(t, base, 0, len.max(1), 1, t.tag);
        }
        let (o, k) = match self.rng.below(100) {
            0..=39 => (0, elems),
            40..=59 => {
                let h = (elems / 2).max(1);
                if self.rng.pct(50) || elems < 2 {
                    (0, h)
                } else {
                    (h, elems - h)
                }
            }
            60..=69 => {
                let q = (elems / 4).max(1);
                let i = self.rng.below(4).min(elems / q - 1);
                (i * q, q)
            }
            _ => {
                let o = self.rng.below(elems);
                (o, self.rng.range(1, elems - o))
            }
        };
        self.finish_view(t, base, o * e, k, e, t.tag)
    }

    fn finish_view(
        &mut self,
        mut t: Tensor,
        base: u64,
        off: u64,
        n: u64,
        e: u64,
        tag: u32,
    ) -> (Tensor, TInfo) {
        if self.rng.pct(50) {
            t.data = base as *mut c_void;
            t.offset = off;
        } else {
            t.data = (base + off) as *mut c_void;
        }
        let zero = self.rng.pct(4);
        self.shape_dense(&mut t, if zero { 0 } else { n });
        let lo = base + off;
        let range = if zero || tag == 4 {
            None
        } else {
            Some((lo, lo + n * e))
        };
        (t, TInfo { range, auto: None })
    }

    /// Shape `t` as a dense view of `n` elements: 0-D, 1-D, or 2-D (zero strides, or
    /// explicit row-major strides).
    fn shape_dense(&mut self, t: &mut Tensor, n: u64) {
        t.shape = [0; 5];
        t.strides = [0; 5];
        if n == 0 {
            t.ndim = self.rng.range(1, 2) as u32;
            t.shape[0] = 0;
            if t.ndim == 2 {
                t.shape[1] = 3;
            }
            return;
        }
        if n == 1 && self.rng.pct(50) {
            t.ndim = 0;
            return;
        }
        if n % 2 == 0 && n > 2 && self.rng.pct(25) {
            t.ndim = 2;
            t.shape[0] = 2;
            t.shape[1] = n / 2;
            // explicit row-major strides (still dense) only on views with data: an
            // auto-allocated OUTPUT must use the zero-stride form
            if !t.data.is_null() && self.rng.pct(50) {
                t.strides[0] = n / 2;
                t.strides[1] = 1;
            }
            return;
        }
        t.ndim = 1;
        t.shape[0] = n;
    }

    /// Break one tensor: returns the status the defect must produce.
    fn break_tensor(&mut self, t: &mut Tensor, info: &mut TInfo, ring: u64) -> Status {
        *info = TInfo {
            range: None,
            auto: None,
        };
        match self.rng.below(9) {
            0 => {
                t.tag = self.rng.pick(&[5, 77, u32::MAX]);
                Status::InvalidArgument
            }
            1 => {
                t.dtype = self.rng.pick(&[13, 200]);
                Status::InvalidArgument
            }
            2 => {
                t.ndim = self.rng.range(6, 9) as u32;
                Status::InvalidArgument
            }
            3 => {
                t.reserved = 1;
                Status::InvalidArgument
            }
            4 => {
                t.data = std::ptr::null_mut();
                t.offset = 0;
                t.tag = self.rng.pick(&[0, 2, 3, 4]); // OUTPUT_EXISTING included
                Status::InvalidArgument
            }
            5 => {
                t.data = std::ptr::null_mut();
                t.tag = 1;
                t.ndim = 2;
                t.shape = [4, 4, 0, 0, 0];
                if self.rng.pct(50) {
                    t.strides = [1, 8, 0, 0, 0];
                    t.offset = 0;
                } else {
                    t.strides = [0; 5];
                    t.offset = 8;
                }
                Status::InvalidArgument
            }
            6 => {
                t.data = std::ptr::null_mut();
                t.tag = 1;
                t.offset = 0;
                t.ndim = 2;
                t.dtype = 7;
                t.shape = [u64::MAX / 2, 4, 0, 0, 0];
                t.strides = [0; 5];
                Status::InvalidArgument
            }
            7 => {
                t.data = 0xFFFF_FFFF_FFFF_F000usize as *mut c_void;
                t.offset = 0;
                t.tag = self.rng.pick(&[0, 2, 3]);
                t.ndim = 1;
                t.dtype = 7;
                t.shape = [1 << 20, 0, 0, 0, 0];
                t.strides = [0; 5];
                Status::InvalidArgument
            }
            _ => {
                // an auto-allocated OUTPUT that can never fit in a ring
                t.data = std::ptr::null_mut();
                t.tag = 1;
                t.offset = 0;
                t.ndim = 1;
                t.dtype = 0;
                t.shape = [ring + 1 + self.rng.below(4096), 0, 0, 0, 0];
                t.strides = [0; 5];
                Status::HeapExhausted
            }
        }
    }

    fn pick_callable(&mut self, kind: u32) -> Option<(usize, usize, Callable)> {
        let reg = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
        let v: Vec<(usize, usize, Callable)> = reg
            .iter()
            .filter(|(k, _)| k.2 == kind)
            .map(|(_, v)| *v)
            .collect();
        drop(reg);
        if v.is_empty() {
            None
        } else {
            Some(v[self.rng.idx(v.len())])
        }
    }

    fn pick_gate(&mut self) -> Option<usize> {
        let used: Vec<usize> = self
            .nodes
            .iter()
            .filter_map(|n| n.task.as_ref().and_then(|t| t.gate))
            .filter(|&g| !self.gates[g])
            .collect();
        if !used.is_empty() && self.rng.pct(60) {
            return Some(self.rng.pick(&used));
        }
        let fresh = (0..MAX_GATES).find(|&g| {
            !self.gates[g]
                && !self
                    .nodes
                    .iter()
                    .any(|n| n.task.as_ref().is_some_and(|t| t.gate == Some(g)))
        });
        fresh.or_else(|| used.first().copied())
    }

    /// Handles of the current run the model knows (deps for valid submits).
    fn run_handles(&self, ri: usize) -> Vec<TaskHandle> {
        self.handles
            .iter()
            .filter(|(_, n)| self.nodes[*n].run == ri)
            .map(|(h, _)| *h)
            .collect()
    }

    /// A handle that is not valid in run `ri`: foreign, stale or forged.
    fn bad_handle(&mut self, wi: usize, ri: usize, kind: u64) -> TaskHandle {
        let others: Vec<TaskHandle> = self
            .handles
            .iter()
            .filter(|(_, n)| self.nodes[*n].run != ri)
            .map(|(h, _)| *h)
            .collect();
        let cur = self.runs[ri].id;
        match kind {
            // another run (foreign while it is registered somewhere, else stale)
            0 if !others.is_empty() => self.rng.pick(&others),
            // forged: the current run id with a slot that names no task of this run
            1 if cur.is_some() => {
                let idx = |s: u64| s & ((1 << 24) - 1);
                let mine: Vec<u64> = self.run_handles(ri).iter().map(|h| h.slot).collect();
                // The engine tells a never-issued id only from a table entry's last four
                // occupants: the sequence half is taken from one of the four most recent
                // submits, so no entry can have seen four newer tasks since (an older one is
                // indistinguishable from a consumed task and treated as finished).
                let recent = self.workers[wi].next_seq.saturating_sub(4);
                let mut pairs = Vec::new();
                for &a in mine.iter().filter(|&&a| a >> 24 >= recent) {
                    for &b in &mine {
                        if idx(a) != idx(b) {
                            pairs.push((a, b));
                        }
                    }
                }
                let earlier: Vec<u64> = self
                    .handles
                    .iter()
                    .filter(|(_, n)| self.nodes[*n].worker == wi && self.nodes[*n].run < ri)
                    .map(|(h, _)| h.slot)
                    .collect();
                let slot = match self.rng.below(5) {
                    // the sequence number of one task with the table index of another: each
                    // sequence number is issued once, so this id was never issued
                    0 | 1 if !pairs.is_empty() => {
                        let (a, b) = self.rng.pick(&pairs);
                        (a >> 24) << 24 | idx(b)
                    }
                    // a sequence number not issued yet
                    2 => (self.workers[wi].next_seq + self.rng.below(3)) << 24 | self.rng.below(8),
                    // a slot of an earlier run of this worker
                    3 if !earlier.is_empty() => self.rng.pick(&earlier),
                    _ => self.rng.next() | 1 << 62,
                };
                TaskHandle {
                    run_id: cur.unwrap_or(0),
                    slot,
                }
            }
            _ => TaskHandle {
                run_id: self.other_run_id(Some(wi), Some(ri)),
                slot: self.rng.next() & 0xFF_FFFF_FFFF,
            },
        }
    }

    fn op_submit(&mut self) -> R {
        if self.next_rec >= self.rec.nodes.len() {
            return Ok(());
        }
        let oc = self.orch_ctx();
        let ri = if let OState::Ready(r) = oc.st {
            Some(r)
        } else {
            None
        };
        let wi = oc.wi;
        let (nl, nsub, ring) = wi.map_or((vec![0], 1, 1 << 30), |w| {
            (
                self.workers[w].nl.clone(),
                self.workers[w].nsub,
                self.workers[w].ring_size(),
            )
        });
        let mut kinds = Vec::new();
        if !nl.is_empty() {
            kinds.extend([0u64, 0, 1]);
        }
        if nsub > 0 {
            kinds.extend([2u64, 2, 3]);
        }
        let kind = if kinds.is_empty() || self.rng.pct(4) {
            self.rng.below(4)
        } else {
            self.rng.pick(&kinds)
        };
        let group = kind == 1 || kind == 3;
        let sub = kind >= 2;
        let defect = if self.rng.pct(30) {
            self.rng.below(20)
        } else {
            99
        };
        let mut dset: Vec<Status> = Vec::new();
        let mut pre: Vec<Status> = Vec::new(); // checked before the orchestrator's state

        // members and targets
        let mut count: usize = match kind {
            0 | 2 => 1,
            1 => self.rng.range(1, nl.len().clamp(1, 4) as u64) as usize,
            _ => self.rng.range(1, (nsub as usize).clamp(1, 4) as u64) as usize,
        };
        let mut targets: Vec<i32> = Vec::new();
        if !sub {
            let mut pool = nl.clone();
            for _ in 0..count {
                if pool.is_empty() {
                    targets.push(self.rng.pick(&[0, 1, 2]));
                } else {
                    let i = self.rng.idx(pool.len());
                    targets.push(pool.remove(i));
                }
            }
        }
        if sub && nsub == 0 {
            dset.push(Status::UnknownWorker);
        }
        if !sub && nl.is_empty() {
            dset.push(Status::UnknownWorker);
        }
        let mut count0 = false;
        match defect {
            6 if group => {
                count0 = true;
                dset.push(Status::InvalidArgument);
            }
            7 if !sub => {
                let bad: Vec<i32> = [-1, 4242, i32::MIN, i32::MAX]
                    .iter()
                    .copied()
                    .chain(LANE_IDS.iter().copied())
                    .filter(|i| !nl.contains(i))
                    .collect();
                let j = self.rng.idx(targets.len());
                targets[j] = self.rng.pick(&bad);
                dset.push(Status::UnknownWorker);
            }
            7 if kind == 3 => {
                count = nsub as usize + self.rng.range(1, 2) as usize;
                dset.push(if nsub == 0 {
                    Status::UnknownWorker
                } else {
                    Status::InvalidArgument
                });
            }
            8 if kind == 1 && !nl.is_empty() => {
                if count < 2 {
                    count = 2;
                    targets.push(targets[0]);
                } else {
                    let i = self.rng.idx(count);
                    let mut j = self.rng.idx(count);
                    if j == i {
                        j = (i + 1) % count;
                    }
                    targets[j] = targets[i];
                }
                dset.push(Status::DuplicateTarget);
            }
            _ => {}
        }

        // callable
        let task_callable = self.pick_callable(0);
        let (ex, us, mut callable) = task_callable.unwrap_or((
            0,
            0,
            Callable {
                digest: [0; 32],
                kind: 0,
                ns: 0,
            },
        ));
        if task_callable.is_none() {
            dset.push(Status::UnknownCallable);
        }
        let mut callable_null = false;
        match defect {
            0 => {
                callable_null = true;
                pre.push(Status::NullPointer);
            }
            1 => {
                for b in callable.digest.iter_mut() {
                    *b = self.rng.next() as u8;
                }
                dset.push(Status::UnknownCallable);
            }
            2 => {
                if let Some((_, _, c)) = self.pick_callable(1) {
                    callable = c;
                } else {
                    callable.digest[0] ^= 1;
                }
                dset.push(Status::UnknownCallable);
            }
            3 => {
                callable.ns ^= 0x55;
                dset.push(Status::UnknownCallable);
            }
            4 => {
                callable.kind = 1 - callable.kind.min(1);
                dset.push(Status::UnknownCallable);
            }
            _ => {}
        }

        // flags
        let rec = self.next_rec;
        self.next_rec += 1;
        let gate = if ri.is_some()
            && !self.cb_no_gates
            && !self.runs[ri.unwrap_or(0)].no_gates
            && self.rng.pct(12)
        {
            self.pick_gate()
        } else {
            None
        };
        let fail = if self.rng.pct(8) {
            Some((self.rng.idx(count.min(MAXM)), self.rng.range(1, 2)))
        } else {
            None
        };
        let mut flags = (ex as u64) << F_EXEC_SHIFT | (us as u64) << F_USER_SHIFT;
        if let Some(g) = gate {
            flags |= F_GATED | (g as u64) << F_GATE_SHIFT;
        }
        if let Some((m, mode)) = fail {
            flags |= mode | (m as u64) << F_MEMBER_SHIFT;
        } else {
            flags |= 3 << F_MEMBER_SHIFT; // no member matches
        }
        if self.rng.pct(5) {
            flags |= F_PROBE;
        }

        // members
        let rec_addr = Arc::as_ptr(&self.rec) as u64;
        let mut members: Vec<MemberSpec> = Vec::new();
        let cur_handles = ri.map_or(Vec::new(), |r| self.run_handles(r));
        for m in 0..count {
            let nt = match self.rng.below(100) {
                0..=19 => 0,
                20..=54 => 1,
                55..=84 => 2,
                _ => 3,
            };
            let mut tensors = Vec::new();
            let mut info = Vec::new();
            for _ in 0..nt {
                let (t, i) = if self.rng.pct(12) {
                    self.tensor_via_init(wi, ri)?
                } else {
                    self.gen_tensor(wi, ri, true)
                };
                tensors.push(t);
                info.push(i);
            }
            let mut scalars = vec![rec_addr, MAGIC, (rec as u64) << 8 | m as u64, flags];
            for _ in 0..self.rng.below(3) {
                scalars.push(self.rng.next());
            }
            let mut deps = Vec::new();
            if !cur_handles.is_empty() && self.rng.pct(35) {
                for _ in 0..self.rng.range(1, 2) {
                    let recent = &cur_handles[cur_handles.len().saturating_sub(8)..];
                    let h = recent[self.rng.idx(recent.len())];
                    deps.push(Dep {
                        handle: h,
                        kind: self.rng.below(2) as u32,
                        reserved: 0,
                    });
                }
            }
            members.push(MemberSpec {
                tensors,
                info,
                scalars,
                deps,
                reserved: 0,
                null_tensors: false,
                null_scalars: false,
                null_deps: false,
            });
        }
        // member-level defects
        let mut args_null = false;
        let mut workers_null = false;
        let mut forged = false;
        if !members.is_empty() {
            let mi = self.rng.idx(members.len());
            let mm = &mut members[mi];
            match defect {
                5 => {
                    args_null = true;
                    pre.push(Status::NullPointer);
                }
                9 if kind == 1 => {
                    workers_null = true;
                    pre.push(Status::NullPointer);
                }
                10 => {
                    mm.reserved = 1;
                    dset.push(Status::InvalidArgument);
                }
                11 => {
                    if mm.tensors.is_empty() {
                        let (t, i) = self.gen_tensor(wi, ri, false);
                        let mm = &mut members[mi];
                        mm.tensors.push(t);
                        mm.info.push(i);
                    }
                    members[mi].null_tensors = true;
                    dset.push(Status::NullPointer);
                }
                12 => {
                    mm.null_scalars = true;
                    dset.push(Status::NullPointer);
                }
                13 => {
                    if mm.deps.is_empty() {
                        mm.deps.push(Dep {
                            handle: TaskHandle::default(),
                            kind: 0,
                            reserved: 0,
                        });
                    }
                    mm.null_deps = true;
                    dset.push(Status::NullPointer);
                }
                14 | 19 => {
                    let (t, i) = self.gen_tensor(wi, ri, false);
                    let (mut t, mut i) = (t, i);
                    let s = if defect == 19 {
                        t.data = std::ptr::null_mut();
                        t.tag = 1;
                        t.offset = 0;
                        t.ndim = 1;
                        t.dtype = 0;
                        t.shape = [ring + 1 + self.rng.below(4096), 0, 0, 0, 0];
                        t.strides = [0; 5];
                        i = TInfo {
                            range: None,
                            auto: None,
                        };
                        Status::HeapExhausted
                    } else {
                        self.break_tensor(&mut t, &mut i, ring)
                    };
                    let mm = &mut members[mi];
                    let at = self.rng.idx(mm.tensors.len() + 1);
                    mm.tensors.insert(at, t);
                    mm.info.insert(at, i);
                    dset.push(s);
                }
                15 => {
                    let h = cur_handles.last().copied().unwrap_or_default();
                    let (k, r) = if self.rng.pct(50) {
                        (self.rng.range(2, 9) as u32, 0)
                    } else {
                        (0, 1)
                    };
                    mm.deps.push(Dep {
                        handle: h,
                        kind: k,
                        reserved: r,
                    });
                    dset.push(Status::InvalidArgument);
                }
                16..=18 => {
                    if let (Some(w), Some(r)) = (wi, ri) {
                        let h = self.bad_handle(w, r, defect - 16);
                        let c = self.classify_handle(r, &h);
                        let k = self.rng.below(2) as u32;
                        members[mi].deps.push(Dep {
                            handle: h,
                            kind: k,
                            reserved: 0,
                        });
                        if let Some(s) = Self::hclass_status(c) {
                            dset.push(s);
                        }
                        if defect == 17 && Some(h.run_id) == self.runs[r].id {
                            forged = true;
                        }
                    }
                }
                _ => {}
            }
        }
        if count0 {
            count = 0;
        }
        // auto-allocated OUTPUT bytes
        let mut heap_bytes: u64 = 0;
        let mut overflow = false;
        for mm in members.iter().take(count) {
            for (t, i) in mm.tensors.iter().zip(&mm.info) {
                if t.data.is_null() && t.tag == 1 && i.auto.is_some() {
                    match heap_bytes.checked_add(align1024(i.auto.unwrap_or(0))) {
                        Some(v) => heap_bytes = v,
                        None => overflow = true,
                    }
                }
            }
        }
        if heap_bytes > ring {
            dset.push(Status::HeapExhausted);
        }
        if overflow {
            dset.push(Status::InvalidArgument);
        }

        // config
        let cfg = if !sub && self.rng.pct(50) {
            let mut c = CallConfig::default();
            c.user[0] = CFG_MAGIC | rec as u64;
            c.flags = self.rng.below(4) as u32;
            Some(c)
        } else {
            None
        };
        let cfg0 = if sub { 0 } else { cfg.map_or(0, |c| c.user[0]) };

        // expected statuses
        let mut exp: Vec<Status> = pre.clone();
        let mut lv = None;
        let mut start = 0;
        let depth = ri.map_or(1, |r| self.runs[r].frames.len());
        let ring_i = (depth - 1).min(3);
        if let OState::Ready(r) = oc.st {
            exp.extend(dset.iter().copied());
            if exp.is_empty() {
                let w = wi.expect("ready on a worker");
                let l = self.live(w);
                let slot = self.predict_slot(w, &l)?;
                let heap = if heap_bytes > 0 && !matches!(slot, Pred::MustFail) {
                    let (p, s) = self.predict_heap(w, ring_i, heap_bytes, &l)?;
                    start = s;
                    p
                } else {
                    if heap_bytes > 0 {
                        start = self.predict_heap_start(w, ring_i, heap_bytes);
                    }
                    Pred::MustOk
                };
                if (matches!(slot, Pred::MustFail) || matches!(heap, Pred::MustFail))
                    && self.rng.pct(85)
                {
                    self.log(format!("#{:<4}      (skipped a submit the model says must fail with back-pressure)", self.step));
                    self.rejected.push(rec);
                    return Ok(());
                }
                exp = Self::resource_statuses(&slot, &heap);
                lv = Some(l);
                let _ = r;
            }
        } else {
            exp.extend(Self::state_statuses(oc.st));
            if matches!(oc.st, OState::Null) {
                exp.extend(dset.iter().copied());
            }
        }
        exp.sort_by_key(|s| *s as i32);
        exp.dedup();

        // the call
        let use_builder = self.rng.pct(25) && !matches!(defect, 10..=13 | 15);
        let mut builder_ids: Vec<usize> = Vec::new();
        let mut args: Vec<TaskArgs> = Vec::new();
        if use_builder {
            for (m, mm) in members.iter().enumerate() {
                let bi = self.builder_for(m)?;
                self.fill_builder(bi, mm)?;
                let mut v = TaskArgs {
                    tensors: std::ptr::null_mut(),
                    num_tensors: 0,
                    num_scalars: 0,
                    scalars: std::ptr::null(),
                    deps: std::ptr::null(),
                    num_deps: 0,
                    reserved: 0,
                };
                let bp = self.builders[bi].ptr;
                let vp: *mut TaskArgs = &mut v;
                self.call(
                    Th::Main,
                    format!("dagrt_args_view(a{bi}, &v{m})"),
                    &[Status::Ok],
                    || ca::dagrt_args_view(bp, vp),
                )?;
                args.push(v);
                builder_ids.push(bi);
            }
        } else {
            for mm in members.iter_mut() {
                args.push(TaskArgs {
                    tensors: if mm.null_tensors {
                        std::ptr::null_mut()
                    } else {
                        mm.tensors.as_mut_ptr()
                    },
                    num_tensors: mm.tensors.len() as u32,
                    num_scalars: mm.scalars.len() as u32,
                    scalars: if mm.null_scalars {
                        std::ptr::null()
                    } else {
                        mm.scalars.as_ptr()
                    },
                    deps: if mm.null_deps {
                        std::ptr::null()
                    } else {
                        mm.deps.as_ptr()
                    },
                    num_deps: mm.deps.len() as u32,
                    reserved: mm.reserved,
                });
            }
        }
        let argp: *const TaskArgs = if args_null || args.is_empty() {
            std::ptr::null()
        } else {
            args.as_ptr()
        };
        let wkp: *const i32 = if workers_null || targets.is_empty() {
            std::ptr::null()
        } else {
            targets.as_ptr()
        };
        let cfgp: *const CallConfig = cfg
            .as_ref()
            .map_or(std::ptr::null(), |c| c as *const CallConfig);
        let callp: *const Callable = if callable_null {
            std::ptr::null()
        } else {
            &callable
        };
        let out_null = self.rng.pct(12);
        let mut out = TaskHandle {
            run_id: 0xDEAD,
            slot: 0xBEEF,
        };
        let outp: *mut TaskHandle = if out_null {
            std::ptr::null_mut()
        } else {
            &mut out
        };
        let orch = oc.orch;
        let target0 = targets.first().copied().unwrap_or(0);
        let cnt = count as u32;
        let fname = [
            "dagrt_submit_next_level",
            "dagrt_submit_next_level_group",
            "dagrt_submit_sub",
            "dagrt_submit_sub_group",
        ][kind as usize];
        let mut desc = format!(
            "{fname}({}, {}, ",
            Self::orch_name(&oc),
            if callable_null {
                "NULL".into()
            } else {
                fmt_callable(&callable)
            }
        );
        if args_null {
            desc += "NULL";
        } else {
            let ms: Vec<String> = members
                .iter()
                .enumerate()
                .map(|(m, mm)| {
                    let ts: Vec<String> = mm.tensors.iter().map(fmt_tensor).collect();
                    let ds: Vec<String> = mm.deps.iter().map(fmt_dep).collect();
                    format!(
                        "m{m}{}{{rec {rec}{}{}; t[{}]{}; d[{}]{}; sc {}{}{}}}",
                        if use_builder {
                            format!(" via a{}", builder_ids[m])
                        } else {
                            String::new()
                        },
                        if gate.is_some() {
                            format!(" gate{}", gate.unwrap_or(0))
                        } else {
                            String::new()
                        },
                        if fail.is_some_and(|f| f.0 == m) {
                            " FAILS"
                        } else {
                            ""
                        },
                        ts.join("; "),
                        if mm.null_tensors {
                            " (tensors NULL)"
                        } else {
                            ""
                        },
                        ds.join(", "),
                        if mm.null_deps { " (deps NULL)" } else { "" },
                        mm.scalars.len(),
                        if mm.null_scalars { " (NULL)" } else { "" },
                        if mm.reserved != 0 {
                            format!(" reserved {}", mm.reserved)
                        } else {
                            String::new()
                        }
                    )
                })
                .collect();
            desc += &format!("[{}]", ms.join(", "));
        }
        if group {
            desc += &format!(", count {count}");
        }
        if !sub {
            desc += &format!(", cfg {}", if cfg.is_some() { "&c" } else { "NULL" });
            if group {
                desc += &format!(
                    ", workers {}",
                    if workers_null {
                        "NULL".into()
                    } else {
                        format!("{targets:?}")
                    }
                );
            } else {
                desc += &format!(", worker {target0}");
            }
        }
        desc += if out_null { ", NULL)" } else { ", &h)" };
        let orig: Vec<Vec<Tensor>> = members.iter().map(|mm| mm.tensors.clone()).collect();
        let t0 = Instant::now();
        self.hint = if forged {
            Some(
                "forged task handle accepted as a dependency (run id of the run being built, a slot id never issued)"
                    .into(),
            )
        } else {
            self.slot_hint.take()
        };
        let st = self.call(oc.th, desc, &exp, || match kind {
            0 => co::dagrt_submit_next_level(orch, callp, argp, cfgp, target0, outp),
            1 => co::dagrt_submit_next_level_group(orch, callp, argp, cnt, cfgp, wkp, outp),
            2 => co::dagrt_submit_sub(orch, callp, argp, outp),
            _ => co::dagrt_submit_sub_group(orch, callp, argp, cnt, outp),
        })?;
        let el = t0.elapsed();

        // the tensors as the engine left them (auto-allocated addresses written back)
        let mut finals: Vec<Vec<Tensor>> = Vec::new();
        for (m, mm) in members.iter().enumerate() {
            if use_builder {
                let bi = builder_ids[m];
                let mut v = Vec::new();
                for k in 0..mm.tensors.len() {
                    let mut t = mm.tensors[k];
                    let bp = self.builders[bi].ptr;
                    let tp: *mut Tensor = &mut t;
                    let kk = k as u32;
                    let s = ca::dagrt_args_get_tensor(bp, kk, tp);
                    if s != Status::Ok {
                        return self.fatal(
                            "dagrt_args_get_tensor failed",
                            format!("get_tensor(a{bi}, {k}) after a submit: {}", sname(s)),
                        );
                    }
                    v.push(t);
                }
                self.builders[bi].tensors = v.clone();
                finals.push(v);
            } else {
                finals.push(mm.tensors.clone());
            }
        }
        if st != Status::Ok {
            self.rejected.push(rec);
            for (m, ts) in orig.iter().enumerate() {
                for (k, t) in ts.iter().enumerate() {
                    if t.data.is_null() && !finals[m][k].data.is_null() {
                        return self.fatal("auto-allocated address written on a failed submit", format!("member {m} tensor {k}: data {:?} written although the submit failed", finals[m][k].data));
                    }
                }
            }
            self.check(
                out.run_id == 0xDEAD && out.slot == 0xBEEF,
                "submit wrote the handle on failure",
                || "out-parameter written on failure".into(),
            )?;
            if let (Some(w), Status::WindowFull | Status::HeapExhausted) = (wi, st) {
                self.check_backpressure(w, st, el, dset.contains(&Status::HeapExhausted))?;
            }
            return Ok(());
        }

        // success: update the model
        let w = wi.expect("submit succeeded on a worker");
        let ri = ri.expect("submit succeeded with a run");
        let lv = lv.expect("liveness computed for a valid submit");
        let node = self.nodes.len();
        let seq = self.workers[w].next_seq;
        self.workers[w].next_seq += 1;
        if !out_null {
            self.learn_run_id(ri, out.run_id)?;
            self.check(out.slot >> 24 == seq, "slot id sequence", || {
                format!("handle {}: sequence number {}, expected {seq} (one per successful submit/alloc)", fmt_handle(&out), out.slot >> 24)
            })?;
        }
        // heap placement
        let size = self.workers[w].ring_size();
        let mut cursor = 0u64;
        if heap_bytes > 0 {
            let first = finals
                .iter()
                .zip(&orig)
                .flat_map(|(f, o)| f.iter().zip(o.iter()))
                .find(|(_, o)| o.data.is_null() && o.tag == 1)
                .map(|(f, _)| f.data as u64)
                .filter(|&d| d != 0);
            let base = match self.workers[w].base[ring_i] {
                Some(b) => b,
                None => {
                    let b = first.unwrap_or(0).wrapping_sub(start % size);
                    self.learn_base(w, ring_i, b)?;
                    b
                }
            };
            cursor = base + start % size;
            let ring_m = &mut self.workers[w].rings[ring_i];
            ring_m.res.push((start, start + heap_bytes, node));
            ring_m.top = start + heap_bytes;
            let (slo, shi) = (cursor, cursor + heap_bytes);
            self.drop_reallocated(ri, slo, shi);
        }
        for (m, mm) in members.iter_mut().enumerate() {
            for k in 0..mm.tensors.len() {
                if orig[m][k].data.is_null() {
                    let want = if heap_bytes > 0 { cursor } else { 0 };
                    let got = finals[m][k].data as u64;
                    self.check(got == want, "auto-allocated OUTPUT address", || format!("member {m} tensor {k}: written-back address {got:#x}, the ring model expects {want:#x}"))?;
                    let bytes = mm.info[k].auto.unwrap_or(0);
                    if bytes > 0 {
                        self.check(got % 1024 == 0, "auto-allocated OUTPUT alignment", || {
                            format!("address {got:#x} not 1024-aligned")
                        })?;
                        mm.info[k].range = Some((got, got + bytes));
                    }
                    cursor += align1024(bytes);
                }
            }
        }
        // dependencies: explicit deps, then the tag walk in order
        let mut prods: Vec<(usize, bool)> = Vec::new();
        let mut reads: Vec<(u64, u64)> = Vec::new();
        let add = |v: &mut Vec<(usize, bool)>, p: usize, retain: bool| {
            if let Some(e) = v.iter_mut().find(|e| e.0 == p) {
                e.1 |= retain;
            } else {
                v.push((p, retain));
            }
        };
        for mm in &members {
            for d in &mm.deps {
                if let HClass::Valid(p) = self.classify_handle(ri, &d.handle) {
                    add(&mut prods, p, d.kind == 0);
                }
            }
        }
        let frame = *self.runs[ri]
            .frames
            .last()
            .expect("an open run has a frame");
        for (m, mm) in members.iter().enumerate() {
            for (k, i) in mm.info.iter().enumerate() {
                let tag = finals[m][k].tag;
                let Some((lo, hi)) = i.range else { continue };
                if tag == 0 || tag == 2 {
                    reads.push((lo, hi));
                    for e in &self.runs[ri].tmap {
                        if e.0 < hi && lo < e.1 && e.2 != node {
                            add(&mut prods, e.2, true);
                        }
                    }
                }
                if tag == 1 || tag == 2 || tag == 3 {
                    // A dense write replaces what it covers; a dense entry it overlaps only
                    // in part keeps exactly the bytes left over.
                    let tm = &mut self.runs[ri].tmap;
                    let mut next = Vec::with_capacity(tm.len() + 2);
                    for &e in tm.iter() {
                        if e.0 < hi && lo < e.1 {
                            if e.0 < lo {
                                next.push((e.0, lo, e.2));
                            }
                            if hi < e.1 {
                                next.push((hi, e.1, e.2));
                            }
                        } else {
                            next.push(e);
                        }
                    }
                    next.push((lo, hi, node));
                    *tm = next;
                }
                if i.auto.is_some() {
                    self.heapbufs.push(HeapBuf {
                        ptr: lo,
                        len: hi - lo,
                        run: ri,
                        frame,
                    });
                }
            }
        }
        let producers: Vec<EdgeM> = prods
            .iter()
            .map(|&(p, retain)| EdgeM {
                p,
                retain,
                certain: lv.dl[p],
            })
            .collect();
        let thash = finals.iter().map(|f| hash_tensors(f)).collect();
        let shash = members.iter().map(|mm| hash_u64s(&mm.scalars)).collect();
        self.nodes.push(NodeM {
            run: ri,
            worker: w,
            rec,
            seq,
            reads,
            handle: if out_null { None } else { Some(out) },
            frame,
            producers,
            task: Some(TaskM {
                members: count,
                sub,
                targets: targets.clone(),
                gate,
                fail,
                cfg0,
                thash,
                shash,
            }),
            fstate: FState::Normal,
        });
        self.runs[ri].nodes.push(node);
        self.totals.nodes += 1;
        if !out_null {
            self.handles.push((out, node));
            self.hmap.insert((out.run_id, out.slot), node);
        }
        Ok(())
    }

    /// Task `n` (or a task it waits for) reads memory a failed task wrote before that memory
    /// was reclaimed and handed out again: the engine's leftover tombstone may poison it.
    fn stale_poisoned(&self, n: usize) -> bool {
        let mut stack = vec![n];
        let mut seen = Vec::new();
        while let Some(i) = stack.pop() {
            if seen.contains(&i) {
                continue;
            }
            seen.push(i);
            let nd = &self.nodes[i];
            let run = &self.runs[nd.run];
            if nd.reads.iter().any(|&(lo, hi)| {
                run.stale
                    .iter()
                    .any(|e| e.0 < hi && lo < e.1 && self.may_end_failed(e.2))
            }) {
                return true;
            }
            stack.extend(nd.producers.iter().map(|e| e.p));
        }
        false
    }

    fn may_end_failed(&self, n: usize) -> bool {
        let nd = &self.nodes[n];
        self.runs[nd.run].failed.is_some()
            || nd.task.as_ref().is_some_and(|t| t.fail.is_some())
            || nd.producers.iter().any(|e| self.may_end_failed(e.p))
    }

    /// Memory [lo, hi) was just handed out again (an alloc or an auto-allocated OUTPUT):
    /// whatever wrote to it before was reclaimed, so it produces nothing there any more.
    fn drop_reallocated(&mut self, ri: usize, lo: u64, hi: u64) {
        let run = &mut self.runs[ri];
        let (gone, keep): (Vec<_>, Vec<_>) = run.tmap.iter().partition(|e| e.0 < hi && lo < e.1);
        run.tmap = keep;
        run.stale.extend(gone);
    }

    fn predict_heap_start(&self, w: usize, r: usize, bytes: u64) -> u64 {
        let size = self.workers[w].ring_size();
        let top = self.workers[w].rings[r].top;
        let phys = top % size;
        if phys + bytes > size {
            top + (size - phys)
        } else {
            top
        }
    }

    fn learn_base(&mut self, w: usize, r: usize, b: u64) -> R {
        self.check(b % 1024 == 0 && b != 0, "heap ring base", || {
            format!("ring {r}: derived base {b:#x} is not 1024-aligned")
        })?;
        let size = self.workers[w].ring_size();
        for k in 0..4 {
            if let Some(o) = self.workers[w].base[k] {
                let want = o as i128 + (r as i128 - k as i128) * size as i128;
                self.check(b as i128 == want, "heap rings are one mapping", || {
                    format!("ring {r} base {b:#x}, ring {k} base {o:#x}, ring size {size}")
                })?;
            }
        }
        self.workers[w].base[r] = Some(b);
        Ok(())
    }

    /// A tensor made with dagrt_tensor_init / _init_strided (valid arguments).
    fn tensor_via_init(&mut self, wi: Option<usize>, ri: Option<usize>) -> R<(Tensor, TInfo)> {
        let (want, info) = self.gen_tensor(wi, ri, true);
        let mut t = Tensor {
            data: std::ptr::null_mut(),
            offset: 1,
            ndim: 9,
            dtype: 99,
            tag: 99,
            reserved: 9,
            shape: [9; 5],
            strides: [9; 5],
        };
        let tp: *mut Tensor = &mut t;
        let shape = want.shape;
        let strides = want.strides;
        let strided = want.offset != 0 || strides.iter().any(|&s| s != 0);
        let (d, o, dt, nd, tag) = (want.data, want.offset, want.dtype, want.ndim, want.tag);
        let desc = format!(
            "dagrt_tensor_init{}(&t, {:#x}, dt{dt}, nd{nd}, shape, tag{tag})",
            if strided { "_strided" } else { "" },
            d as u64
        );
        self.call(Th::Main, desc, &[Status::Ok], || {
            if strided {
                ca::dagrt_tensor_init_strided(
                    tp,
                    d,
                    o,
                    dt,
                    nd,
                    shape.as_ptr(),
                    strides.as_ptr(),
                    tag,
                )
            } else {
                ca::dagrt_tensor_init(tp, d, dt, nd, shape.as_ptr(), tag)
            }
        })?;
        self.check(
            hash_tensors(&[t]) == hash_tensors(&[want]),
            "dagrt_tensor_init result",
            || format!("got {} expected {}", fmt_tensor(&t), fmt_tensor(&want)),
        )?;
        Ok((t, info))
    }

    /// The builder used for member `m` of a submit (created if needed).
    fn builder_for(&mut self, m: usize) -> R<usize> {
        while self.builders.len() <= m {
            let mut out: *mut dagrt_args_t = std::ptr::null_mut();
            let op: *mut *mut dagrt_args_t = &mut out;
            self.call(Th::Main, "dagrt_args_new(&a)".into(), &[Status::Ok], || {
                ca::dagrt_args_new(op)
            })?;
            self.builders.push(Builder {
                ptr: out,
                tensors: Vec::new(),
                scalars: Vec::new(),
                deps: Vec::new(),
            });
        }
        Ok(m)
    }

    fn fill_builder(&mut self, bi: usize, mm: &MemberSpec) -> R {
        let bp = self.builders[bi].ptr;
        self.call(
            Th::Main,
            format!("dagrt_args_clear(a{bi})"),
            &[Status::Ok],
            || ca::dagrt_args_clear(bp),
        )?;
        // deps first or last: the builder accepts them in any order
        let deps_first = self.rng.pct(50);
        let add_deps = |fz: &mut Fz| -> R {
            for d in &mm.deps {
                let h = d.handle;
                let wait = d.kind == 1;
                fz.call(
                    Th::Main,
                    format!(
                        "dagrt_args_add_dep{}(a{bi}, {})",
                        if wait { "_wait" } else { "" },
                        fmt_handle(&h)
                    ),
                    &[Status::Ok],
                    || {
                        if wait {
                            ca::dagrt_args_add_dep_wait(bp, h)
                        } else {
                            ca::dagrt_args_add_dep(bp, h)
                        }
                    },
                )?;
            }
            Ok(())
        };
        if deps_first {
            add_deps(self)?;
        }
        for t in &mm.tensors {
            let tp: *const Tensor = t;
            self.call(
                Th::Main,
                format!("dagrt_args_add_tensor(a{bi}, {})", fmt_tensor(t)),
                &[Status::Ok],
                || ca::dagrt_args_add_tensor(bp, tp),
            )?;
        }
        for &v in &mm.scalars {
            self.call(
                Th::Main,
                format!("dagrt_args_add_scalar(a{bi}, {v:#x})"),
                &[Status::Ok],
                || ca::dagrt_args_add_scalar(bp, v),
            )?;
        }
        if !deps_first {
            add_deps(self)?;
        }
        let b = &mut self.builders[bi];
        b.tensors = mm.tensors.clone();
        b.scalars = mm.scalars.clone();
        b.deps = mm.deps.clone();
        Ok(())
    }

    fn op_alloc(&mut self) -> R {
        if self.next_rec >= self.rec.nodes.len() {
            return Ok(());
        }
        let oc = self.orch_ctx();
        let ri = if let OState::Ready(r) = oc.st {
            Some(r)
        } else {
            None
        };
        let wi = oc.wi;
        let ring = wi.map_or(1 << 30, |w| self.workers[w].ring_size());
        let r = self.rng.below(100);
        let mut ndim: u32 = self.rng.range(0, 3) as u32;
        let mut dtype: u32 = self.rng.pick(&[0, 2, 4, 6, 7, 10, 11, 12]);
        let mut shape = [1u64; 8];
        let target = match self.rng.below(100) {
            0..=69 => self.rng.range(1, 2000),
            70..=94 => self.rng.range(ring / 8, ring / 3).max(1),
            _ => self.rng.range(ring / 2, ring).max(1),
        };
        let e = esize(dtype);
        let n = (target / e).max(1);
        if ndim == 0 {
            // a single element
        } else {
            shape[0] = n;
            if ndim >= 2 && n % 2 == 0 {
                shape[0] = n / 2;
                shape[1] = 2;
            } else {
                ndim = 1;
            }
        }
        let mut pre = Vec::new();
        let mut dset = Vec::new();
        let null_shape = r < 4 && ndim > 0;
        let null_ptr = (4..8).contains(&r);
        if null_shape || null_ptr {
            pre.push(Status::NullPointer);
        }
        match r {
            8..=11 => {
                ndim = self.rng.range(6, 8) as u32;
                dset.push(Status::InvalidArgument);
            }
            12..=15 => {
                dtype = self.rng.pick(&[13, 99]);
                dset.push(Status::InvalidArgument);
            }
            16..=19 => {
                ndim = ndim.max(1);
                shape[(self.rng.below(ndim as u64)) as usize] = 0;
                dset.push(Status::InvalidArgument);
            }
            20..=22 => {
                ndim = 2;
                dtype = 7;
                shape[0] = u64::MAX / 3;
                shape[1] = 5;
                dset.push(Status::InvalidArgument);
            }
            23..=26 => {
                ndim = 1;
                dtype = 0;
                shape[0] = ring + 1 + self.rng.below(5000);
                dset.push(Status::HeapExhausted);
            }
            _ => {}
        }
        let bytes = if dset.is_empty() {
            esize(dtype) * shape[..ndim as usize].iter().product::<u64>()
        } else {
            0
        };
        let aligned = align1024(bytes);
        let null_handle = self.rng.pct(20);
        let rec = self.next_rec;
        let mut exp = pre.clone();
        let mut lv = None;
        let mut start = 0;
        let depth = ri.map_or(1, |r| self.runs[r].frames.len());
        let ring_i = (depth - 1).min(3);
        if let OState::Ready(_) = oc.st {
            exp.extend(dset.iter().copied());
            if exp.is_empty() {
                let w = wi.expect("ready on a worker");
                let l = self.live(w);
                let slot = self.predict_slot(w, &l)?;
                let heap = if !matches!(slot, Pred::MustFail) {
                    let (p, s) = self.predict_heap(w, ring_i, aligned, &l)?;
                    start = s;
                    p
                } else {
                    start = self.predict_heap_start(w, ring_i, aligned);
                    Pred::MustOk
                };
                if (matches!(slot, Pred::MustFail) || matches!(heap, Pred::MustFail))
                    && self.rng.pct(85)
                {
                    self.log(format!("#{:<4}      (skipped an alloc the model says must fail with back-pressure)", self.step));
                    return Ok(());
                }
                exp = Self::resource_statuses(&slot, &heap);
                lv = Some(l);
            }
        } else {
            exp.extend(Self::state_statuses(oc.st));
            if matches!(oc.st, OState::Null) {
                exp.extend(dset.iter().copied());
            }
        }
        exp.sort_by_key(|s| *s as i32);
        exp.dedup();
        let sentinel = 0xA110_C000usize as *mut c_void;
        let mut p = sentinel;
        let pp: *mut *mut c_void = if null_ptr {
            std::ptr::null_mut()
        } else {
            &mut p
        };
        let mut h = TaskHandle {
            run_id: 0xDEAD,
            slot: 0xBEEF,
        };
        let hp: *mut TaskHandle = if null_handle {
            std::ptr::null_mut()
        } else {
            &mut h
        };
        let sp: *const u64 = if null_shape {
            std::ptr::null()
        } else {
            shape.as_ptr()
        };
        let orch = oc.orch;
        let desc = format!(
            "dagrt_alloc({}, {}, nd{ndim}, dt{dtype}, {}, {})",
            Self::orch_name(&oc),
            if null_shape {
                "NULL".into()
            } else {
                format!("{:?}", &shape[..(ndim as usize).min(8)])
            },
            if null_ptr { "NULL" } else { "&p" },
            if null_handle { "NULL" } else { "&h" }
        );
        let t0 = Instant::now();
        self.hint = self.slot_hint.take();
        let st = self.call(oc.th, desc, &exp, || {
            co::dagrt_alloc(orch, sp, ndim, dtype, pp, hp)
        })?;
        let el = t0.elapsed();
        if st != Status::Ok {
            self.check(
                p == sentinel && h.run_id == 0xDEAD && h.slot == 0xBEEF,
                "dagrt_alloc wrote out on failure",
                || "out-parameter written on failure".into(),
            )?;
            if let (Some(w), Status::WindowFull | Status::HeapExhausted) = (wi, st) {
                self.check_backpressure(w, st, el, dset.contains(&Status::HeapExhausted))?;
            }
            return Ok(());
        }
        self.next_rec += 1;
        let w = wi.expect("alloc succeeded on a worker");
        let ri = ri.expect("alloc succeeded with a run");
        let _ = lv.expect("liveness computed for a valid alloc");
        let node = self.nodes.len();
        let size = self.workers[w].ring_size();
        let ptr = p as u64;
        let base = match self.workers[w].base[ring_i] {
            Some(b) => b,
            None => {
                let b = ptr.wrapping_sub(start % size);
                self.learn_base(w, ring_i, b)?;
                b
            }
        };
        self.check(
            ptr == base + start % size && ptr % 1024 == 0,
            "dagrt_alloc address",
            || {
                format!(
                    "alloc returned {ptr:#x}, the ring model expects {:#x}",
                    base + start % size
                )
            },
        )?;
        let seq = self.workers[w].next_seq;
        self.workers[w].next_seq += 1;
        if !null_handle {
            self.learn_run_id(ri, h.run_id)?;
            self.check(h.slot >> 24 == seq, "slot id sequence", || {
                format!("handle {}: sequence number {}, expected {seq} (one per successful submit/alloc)", fmt_handle(&h), h.slot >> 24)
            })?;
        }
        let rm = &mut self.workers[w].rings[ring_i];
        rm.res.push((start, start + aligned, node));
        rm.top = start + aligned;
        self.drop_reallocated(ri, ptr, ptr + aligned);
        let tm = &mut self.runs[ri].tmap;
        tm.push((ptr, ptr + bytes, node));
        let frame = *self.runs[ri]
            .frames
            .last()
            .expect("an open run has a frame");
        self.heapbufs.push(HeapBuf {
            ptr,
            len: bytes,
            run: ri,
            frame,
        });
        self.nodes.push(NodeM {
            run: ri,
            worker: w,
            rec,
            seq,
            reads: Vec::new(),
            handle: if null_handle { None } else { Some(h) },
            frame,
            producers: Vec::new(),
            task: None,
            fstate: FState::Normal,
        });
        self.runs[ri].nodes.push(node);
        if !null_handle {
            self.handles.push((h, node));
            self.hmap.insert((h.run_id, h.slot), node);
        }
        Ok(())
    }

    fn op_scope_begin(&mut self) -> R {
        let oc = self.orch_ctx();
        let mut exp = Self::state_statuses(oc.st);
        if let OState::Ready(ri) = oc.st {
            exp.push(if self.runs[ri].frames.len() > 64 {
                Status::ScopeTooDeep
            } else {
                Status::Ok
            });
        }
        let orch = oc.orch;
        let st = self.call(
            oc.th,
            format!("dagrt_scope_begin({})", Self::orch_name(&oc)),
            &exp,
            || co::dagrt_scope_begin(orch),
        )?;
        if st == Status::Ok {
            if let OState::Ready(ri) = oc.st {
                let f = self.new_frame();
                self.runs[ri].frames.push(f);
            }
        }
        Ok(())
    }

    fn op_scope_end(&mut self) -> R {
        let oc = self.orch_ctx();
        let mut exp = Self::state_statuses(oc.st);
        if let OState::Ready(ri) = oc.st {
            exp.push(if self.runs[ri].frames.len() <= 1 {
                Status::ScopeUnbalanced
            } else {
                Status::Ok
            });
        }
        let orch = oc.orch;
        let st = self.call(
            oc.th,
            format!("dagrt_scope_end({})", Self::orch_name(&oc)),
            &exp,
            || co::dagrt_scope_end(orch),
        )?;
        if st == Status::Ok {
            if let OState::Ready(ri) = oc.st {
                let f = self.runs[ri].frames.pop().expect("a nested frame");
                self.frames[f] = false;
            }
        }
        Ok(())
    }

    /// Open scopes up to the limit, one more (SCOPE_TOO_DEEP), then end some of them.
    fn op_scope_burst(&mut self) -> R {
        let oc = self.orch_ctx();
        let OState::Ready(ri) = oc.st else {
            return Ok(());
        };
        let orch = oc.orch;
        while self.runs[ri].frames.len() <= 64 {
            self.call(
                oc.th,
                format!(
                    "dagrt_scope_begin(o) [nested {}]",
                    self.runs[ri].frames.len()
                ),
                &[Status::Ok],
                || co::dagrt_scope_begin(orch),
            )?;
            let f = self.new_frame();
            self.runs[ri].frames.push(f);
        }
        self.call(
            oc.th,
            "dagrt_scope_begin(o) [65th nested]".into(),
            &[Status::ScopeTooDeep],
            || co::dagrt_scope_begin(orch),
        )?;
        let k = self.rng.range(1, 64);
        for _ in 0..k {
            self.call(oc.th, "dagrt_scope_end(o)".into(), &[Status::Ok], || {
                co::dagrt_scope_end(orch)
            })?;
            let f = self.runs[ri].frames.pop().expect("a nested frame");
            self.frames[f] = false;
        }
        Ok(())
    }

    /// The run id a close/fail names, and the status that id implies (None: the open run).
    fn pick_close_id(&mut self, oc: &OC) -> (u64, Option<Status>) {
        let cur = if let OState::Ready(ri) = oc.st {
            self.runs[ri].id
        } else {
            oc.wi
                .and_then(|w| self.workers[w].open)
                .and_then(|r| self.runs[r].id)
        };
        if let Some(c) = cur {
            if self.rng.pct(82) {
                return (c, None);
            }
        }
        let cur_ri = cur.and_then(|c| self.run_by_id.get(&c).copied());
        let id = self.other_run_id(oc.wi, cur_ri);
        if Some(id) == cur {
            return (id, None);
        }
        (id, Some(self.foreign_or_stale(id)))
    }

    fn op_close_run(&mut self) -> R {
        let oc = self.orch_ctx();
        let (id, idst) = self.pick_close_id(&oc);
        let mut exp = Self::state_statuses(oc.st);
        if let OState::Ready(ri) = oc.st {
            if let Some(s) = idst {
                exp.push(s);
            } else if self.runs[ri].frames.len() > 1 {
                exp.push(Status::ScopeUnbalanced);
            } else {
                exp.push(Status::Ok);
            }
        }
        let orch = oc.orch;
        let st = self.call(
            oc.th,
            format!("dagrt_close_run_submission({}, {id})", Self::orch_name(&oc)),
            &exp,
            || co::dagrt_close_run_submission(orch, id),
        )?;
        if st == Status::Ok {
            if let OState::Ready(ri) = oc.st {
                self.close_run_model(ri);
            }
        }
        Ok(())
    }

    fn close_run_model(&mut self, ri: usize) {
        for &f in &self.runs[ri].frames {
            self.frames[f] = false;
        }
        self.runs[ri].frames.clear();
        self.runs[ri].closed = true;
        let w = self.runs[ri].worker;
        self.workers[w].open = None;
    }

    fn op_fail_run(&mut self) -> R {
        let oc = self.orch_ctx();
        let (id, idst) = self.pick_close_id(&oc);
        let r = self.rng.below(100);
        let k = self.step;
        let text = format!("fuzz-abort <{k}>\0");
        let bad = [b'x', 0xff, 0];
        let (msgp, shown, expect_text): (*const c_char, String, String) = match r {
            0..=19 => (
                std::ptr::null(),
                "NULL".into(),
                "run submission failed".into(),
            ),
            20..=26 => (bad.as_ptr().cast(), "\"x\\xff\"".into(), String::new()),
            _ => (
                text.as_ptr().cast(),
                format!("{:?}", text.trim_end_matches('\0')),
                text.trim_end_matches('\0').to_string(),
            ),
        };
        let mut exp = Self::state_statuses(oc.st);
        if (20..=26).contains(&r) {
            exp.push(Status::InvalidArgument);
        }
        if let OState::Ready(_) = oc.st {
            if let Some(s) = idst {
                exp.push(s);
            }
            if exp.is_empty() {
                exp.push(Status::Ok);
            }
        }
        let orch = oc.orch;
        let st = self.call(
            oc.th,
            format!(
                "dagrt_fail_run_submission({}, {id}, {shown})",
                Self::orch_name(&oc)
            ),
            &exp,
            || co::dagrt_fail_run_submission(orch, id, msgp),
        )?;
        if st == Status::Ok {
            if let OState::Ready(ri) = oc.st {
                self.close_run_model(ri);
                self.runs[ri].failed = Some(expect_text);
                self.classify_failed_run(ri);
            }
        }
        Ok(())
    }

    /// After a run's submission failed: which of its tasks had started (they run), which
    /// could not have (they never run) and which may go either way.
    fn classify_failed_run(&mut self, ri: usize) {
        let nodes = self.runs[ri].nodes.clone();
        let mut summary = Vec::new();
        for &n in &nodes {
            let s = if self.nodes[n].task.is_none() || self.entered_any(n) {
                FState::Ran
            } else if self.nodes[n].producers.iter().any(|e| {
                let p = &self.nodes[e.p];
                matches!(p.fstate, FState::NotRan | FState::Unknown)
                    || (p.fstate == FState::Ran
                        && p.task.as_ref().is_some_and(|t| t.fail.is_some()))
            }) {
                FState::NotRan
            } else {
                FState::Unknown
            };
            self.nodes[n].fstate = s;
            if self.nodes[n].task.is_some() {
                summary.push(format!(
                    "rec{}:{}",
                    self.nodes[n].rec,
                    match s {
                        FState::Ran => "ran",
                        FState::NotRan => "never",
                        FState::Unknown => "?",
                        FState::Normal => "",
                    }
                ));
            }
        }
        self.log(format!("       (failed run: {})", summary.join(" ")));
    }
}

// ---------------------------------------------------------------------------------------
// Operations: run queries, orchestration callbacks

enum MsgCheck {
    None,
    /// One of these failing tasks' messages (the run's first failure).
    Tokens(Vec<String>),
    Contains(String),
}

fn msg_ok(msg: &str, chk: &MsgCheck) -> bool {
    match chk {
        MsgCheck::None => true,
        MsgCheck::Contains(s) => msg.contains(s.as_str()),
        MsgCheck::Tokens(v) => v.iter().any(|t| match t.strip_prefix("$") {
            Some(suffix) => msg.ends_with(suffix),
            None => msg.contains(t.as_str()),
        }),
    }
}

struct CbCtx {
    fz: *mut Fz,
    wi: usize,
    steps: u64,
    rc: i32,
    provoke: bool,
    run_mode: bool,
    called: bool,
    aborted: bool,
    ri: Option<usize>,
    orch_seen: *mut dagrt_orch_t,
    end_msg: String,
    failures: u32,
}

unsafe extern "C" fn trampoline(orch: *mut dagrt_orch_t, ctx: *mut c_void) -> i32 {
    // SAFETY: ctx is the CbCtx op_worker_submit passed, alive for the whole call.
    let c = unsafe { &mut *(ctx as *mut CbCtx) };
    c.called = true;
    c.orch_seen = orch;
    // SAFETY: fz is the fuzzer that called dagrt_worker_submit/run; it does not touch itself
    // until that call returns, so this is the only live reference.
    let fz = unsafe { &mut *c.fz };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fz.callback_body(c, orch)));
    fz.cb = None;
    fz.cb_no_gates = false;
    match r {
        Ok(Ok(())) => c.rc,
        Ok(Err(Abort)) => {
            c.aborted = true;
            0
        }
        Err(_) => {
            c.aborted = true;
            fz.record_failure(
                "fuzzer panic in the callback".into(),
                "the fuzzer panicked inside the orchestration callback".into(),
            );
            0
        }
    }
}

impl Fz {
    /// The terminal status of a run (and what its message must say).
    fn expected_terminal(&self, ri: usize) -> (Vec<Status>, MsgCheck) {
        let run = &self.runs[ri];
        if let Some(t) = &run.failed {
            return (
                vec![Status::OrchestrationFailed, Status::TaskFailed],
                MsgCheck::Contains(t.clone()),
            );
        }
        let mut ends_failed: HashMap<usize, bool> = HashMap::new();
        let mut tokens = Vec::new();
        for &n in &run.nodes {
            let nd = &self.nodes[n];
            let Some(t) = &nd.task else {
                ends_failed.insert(n, false);
                continue;
            };
            let poisoned = nd
                .producers
                .iter()
                .any(|e| ends_failed.get(&e.p).copied().unwrap_or(false));
            if !poisoned {
                if let Some((_, mode)) = t.fail {
                    tokens.push(if mode == 1 {
                        format!("$failed with code {}", 1000 + nd.rec)
                    } else {
                        format!("fuzz-fail node <{}>", nd.rec)
                    });
                }
            }
            ends_failed.insert(n, poisoned || t.fail.is_some());
        }
        if ends_failed.values().any(|&f| f) {
            (vec![Status::TaskFailed], MsgCheck::Tokens(tokens))
        } else {
            (vec![Status::Ok], MsgCheck::None)
        }
    }

    fn check_terminal_msg(&mut self, ri: usize, st: Status) -> R {
        if st == Status::Ok {
            return Ok(());
        }
        let (_, chk) = self.expected_terminal(ri);
        let msg = self.last_msg.clone();
        self.check(msg_ok(&msg, &chk), "run failure message", || {
            let want = match &chk {
                MsgCheck::None => String::new(),
                MsgCheck::Contains(s) => format!("containing {s:?}"),
                MsgCheck::Tokens(v) => format!("one of {v:?}"),
            };
            format!("run failure message {msg:?}, expected {want}")
        })
    }

    /// The run was observed terminal: check what ran, and its counts.
    fn on_done(&mut self, ri: usize) -> R {
        if self.runs[ri].done_seen {
            return Ok(());
        }
        self.runs[ri].done_seen = true;
        self.check_fates(ri)?;
        self.check_run_stats(ri)
    }

    fn check_run_stats(&mut self, ri: usize) -> R {
        let w = self.runs[ri].worker;
        let Some(id) = self.runs[ri].id else {
            return Ok(());
        };
        if self.workers[w].state != WState::Init || self.runs[ri].released || self.runs[ri].gone {
            return Ok(());
        }
        let mut rs = RunStats::default();
        let st = cr::dagrt_run_stats(self.workers[w].ptr, id, &mut rs);
        if st != Status::Ok {
            return self.fatal(
                "dagrt_run_stats failed on a done run",
                format!("run {id}: {} \"{}\"", sname(st), last_error().0),
            );
        }
        self.log(format!(
            "       (run {id} stats: completed {}, failed {}, cancelled {}, live {}, done {})",
            rs.completed, rs.failed, rs.cancelled, rs.live_slots, rs.done
        ));
        let (mut ok_nodes, mut tasks, mut not_ok) = (0u64, 0u64, 0u64);
        for &n in &self.runs[ri].nodes {
            let nd = &self.nodes[n];
            let Some(t) = &nd.task else { continue };
            tasks += 1;
            let ran = self.rec.nodes[nd.rec].m[0].entered.load(SeqCst) > 0;
            if ran && t.fail.is_none() {
                ok_nodes += 1;
            } else {
                not_ok += 1;
            }
        }
        let failed_run = self.runs[ri].failed.is_some();
        let ok = rs.done == 1
            && rs.live_slots == 0
            && rs.completed == ok_nodes
            && rs.completed + rs.failed + rs.cancelled == tasks
            && (failed_run || (rs.cancelled == 0 && rs.failed == not_ok));
        self.check(ok, "dagrt_run_stats counts", || {
            format!("run {id}: stats {rs:?}, expected done 1, live 0, completed {ok_nodes}, {} of {tasks} tasks", if failed_run { format!("failed + cancelled {not_ok}") } else { format!("failed {not_ok}, cancelled 0") })
        })
    }

    /// What ran matches the model: fates, run-once, lanes, views, dependency order.
    fn check_fates(&mut self, ri: usize) -> R {
        if self.runs[ri].checked {
            return Ok(());
        }
        self.runs[ri].checked = true;
        self.check_executor_errors()?;
        let failed_run = self.runs[ri].failed.is_some();
        let run_id = self.runs[ri].id;
        let nodes = self.runs[ri].nodes.clone();
        let mut ran: HashMap<usize, bool> = HashMap::new();
        let mut ends_failed: HashMap<usize, bool> = HashMap::new();
        for &n in &nodes {
            let (rec, fstate) = (self.nodes[n].rec, self.nodes[n].fstate);
            let Some(t) = &self.nodes[n].task else {
                ran.insert(n, true);
                ends_failed.insert(n, false);
                continue;
            };
            let members = t.members;
            let fails = t.fail.is_some();
            let producers = self.nodes[n].producers.clone();
            let mr = &self.rec.nodes[rec].m;
            let entered: Vec<u32> = (0..members).map(|m| mr[m].entered.load(SeqCst)).collect();
            let exited: Vec<u32> = (0..members).map(|m| mr[m].exited.load(SeqCst)).collect();
            self.check(
                entered == exited,
                "an executor is still running after its run ended",
                || format!("record {rec}: entered {entered:?}, exited {exited:?}"),
            )?;
            self.check(
                entered.iter().all(|&c| c <= 1),
                "a task ran more than once",
                || format!("record {rec}: invocations per member {entered:?}"),
            )?;
            let did = entered.iter().all(|&c| c == 1);
            let none = entered.iter().all(|&c| c == 0);
            self.check(did || none, "a group ran partially", || {
                format!("record {rec}: invocations per member {entered:?}")
            })?;
            let expect = if !failed_run {
                Some(
                    !producers
                        .iter()
                        .any(|e| ends_failed.get(&e.p).copied().unwrap_or(false)),
                )
            } else {
                match fstate {
                    FState::Ran => Some(true),
                    FState::NotRan => Some(false),
                    _ => None,
                }
            };
            let precs: Vec<(usize, Option<bool>)> = producers
                .iter()
                .map(|e| (self.nodes[e.p].rec, ends_failed.get(&e.p).copied()))
                .collect();
            // a task poisoned by a failed writer of memory that was reclaimed and handed
            // out again before it read it
            let stale_poison = self.nodes[n].reads.iter().any(|&(lo, hi)| {
                self.runs[ri].stale.iter().any(|e| {
                    e.0 < hi && lo < e.1 && ends_failed.get(&e.2).copied().unwrap_or(false)
                })
            });
            let sig = match (expect, stale_poison) {
                (Some(true), true) => "a failed task's TensorMap tombstone outlives its memory: a reader of reallocated heap memory is poisoned",
                (Some(true), false) => "a task that must run did not run",
                _ => "a task that must not run ran",
            };
            if let Some(x) = expect {
                self.check(x == did, sig, || {
                    format!(
                        "record {rec} (run {run_id:?}{}): ran = {did}, the model says {x} (producers: {:?})",
                        if failed_run { ", submission failed" } else { "" },
                        precs
                    )
                })?;
            }
            if did {
                for e in &producers {
                    let pr = ran.get(&e.p).copied().unwrap_or(false);
                    let pf = ends_failed.get(&e.p).copied().unwrap_or(true);
                    let prec = self.nodes[e.p].rec;
                    self.check(pr && !pf, "a task ran although a producer failed or never ran", || format!("record {rec} ran; producer record {prec} ran = {pr}, failed = {pf}"))?;
                }
                self.check_views(n)?;
                self.check_order(n)?;
                self.totals.ran += 1;
            }
            ran.insert(n, did);
            ends_failed.insert(n, !did || fails);
        }
        Ok(())
    }

    fn check_views(&mut self, n: usize) -> R {
        let nd = &self.nodes[n];
        let Some(t) = &nd.task else { return Ok(()) };
        let run_id = self.runs[nd.run].id;
        let nsub = self.workers[nd.worker].nsub as i32;
        let mr = &self.rec.nodes[nd.rec].m;
        let mut errs = Vec::new();
        let mut seen_w = Vec::new();
        let slot0 = mr[0].slot.load(SeqCst);
        for (m, r) in mr.iter().enumerate().take(t.members) {
            let wid = r.worker.load(SeqCst);
            if t.sub {
                if !(-nsub..=-1).contains(&wid) {
                    errs.push(format!(
                        "member {m} ran on lane id {wid}, not a SUB lane (-1..-{nsub})"
                    ));
                }
                if seen_w.contains(&wid) {
                    errs.push(format!(
                        "member {m} shares SUB lane {wid} with another member"
                    ));
                }
                seen_w.push(wid);
            } else if wid != t.targets[m] {
                errs.push(format!(
                    "member {m} ran on lane {wid}, its target is {}",
                    t.targets[m]
                ));
            }
            if r.midx.load(SeqCst) != m as u32 || r.gsize.load(SeqCst) != t.members as u32 {
                errs.push(format!(
                    "member {m}: view says member {} of {}",
                    r.midx.load(SeqCst),
                    r.gsize.load(SeqCst)
                ));
            }
            if let Some(id) = run_id {
                if r.run.load(SeqCst) != id {
                    errs.push(format!(
                        "member {m}: view run id {} (run {id})",
                        r.run.load(SeqCst)
                    ));
                }
            }
            let slot = r.slot.load(SeqCst);
            if slot != slot0 || slot >> 24 != nd.seq || nd.handle.is_some_and(|h| h.slot != slot) {
                errs.push(format!(
                    "member {m}: view slot {slot:#x}, handle {:?}, sequence number {}",
                    nd.handle.map(|h| h.slot),
                    nd.seq
                ));
            }
            if r.cfg0.load(SeqCst) != t.cfg0 {
                errs.push(format!(
                    "member {m}: config user[0] {:#x}, expected {:#x}",
                    r.cfg0.load(SeqCst),
                    t.cfg0
                ));
            }
            if r.thash.load(SeqCst) != t.thash[m] {
                errs.push(format!(
                    "member {m}: the executor saw other tensors than submitted"
                ));
            }
            if r.shash.load(SeqCst) != t.shash[m] {
                errs.push(format!(
                    "member {m}: the executor saw other scalars than submitted"
                ));
            }
        }
        let rec = nd.rec;
        self.check(
            errs.is_empty(),
            "executor view does not match the submit",
            || format!("record {rec}: {}", errs.join("; ")),
        )
    }

    fn check_order(&mut self, n: usize) -> R {
        let nd = &self.nodes[n];
        let Some(t) = &nd.task else { return Ok(()) };
        let mr = &self.rec.nodes[nd.rec].m;
        let start = (0..t.members)
            .map(|m| mr[m].start.load(SeqCst))
            .min()
            .unwrap_or(0);
        for e in &nd.producers {
            let p = &self.nodes[e.p];
            let Some(pt) = &p.task else { continue };
            let pm = &self.rec.nodes[p.rec].m;
            let end = (0..pt.members)
                .map(|m| pm[m].end.load(SeqCst))
                .max()
                .unwrap_or(0);
            if end >= start {
                let (c, pr) = (nd.rec, p.rec);
                return self.fatal(
                    "a task started before its producer ended",
                    format!("record {c} started at {start}, producer record {pr} ended at {end}"),
                );
            }
        }
        Ok(())
    }

    fn check_executor_errors(&mut self) -> R {
        let e: Vec<String> =
            std::mem::take(&mut *self.rec.errors.lock().unwrap_or_else(|p| p.into_inner()));
        let mut g: Vec<String> =
            std::mem::take(&mut *GLOBAL_ERRORS.lock().unwrap_or_else(|p| p.into_inner()));
        let panics: Vec<String> =
            std::mem::take(&mut *PANICS.lock().unwrap_or_else(|p| p.into_inner()));
        if !panics.is_empty() {
            let first = panics[0].clone();
            let what = first.split(" panicked: ").nth(1).unwrap_or(&first);
            let sig = format!("PANIC: {}", what.lines().next().unwrap_or(""));
            g.extend(panics);
            return self.fatal(sig, g.join("\n"));
        }
        if e.is_empty() && g.is_empty() {
            return Ok(());
        }
        let all: Vec<String> = e.into_iter().chain(g).collect();
        let sig = all[0]
            .split(':')
            .nth(1)
            .unwrap_or("")
            .trim()
            .chars()
            .take(60)
            .collect::<String>();
        self.fatal(format!("executor-side check: {sig}"), all.join("\n"))
    }

    fn op_query(&mut self) -> R {
        let wi = self.pick_worker();
        let wi = if self.rng.pct(3) { None } else { wi };
        let th = if self.rng.pct(15) {
            Th::Helper
        } else {
            Th::Main
        };
        // which run id
        let mine: Vec<usize> = match wi {
            Some(w) => (0..self.runs.len())
                .filter(|&r| {
                    self.runs[r].worker == w
                        && !self.runs[r].released
                        && !self.runs[r].gone
                        && self.runs[r].id.is_some()
                })
                .collect(),
            None => Vec::new(),
        };
        let closed: Vec<usize> = mine
            .iter()
            .copied()
            .filter(|&r| self.runs[r].closed)
            .collect();
        let id = if !closed.is_empty() && self.rng.pct(60) {
            self.runs[self.rng.pick(&closed)].id.unwrap_or(0)
        } else if !mine.is_empty() && self.rng.pct(40) {
            self.runs[self.rng.pick(&mine)].id.unwrap_or(0)
        } else {
            self.other_run_id(wi, None)
        };
        let state_ok = wi.is_some_and(|w| self.workers[w].state == WState::Init);
        let ri = wi.and_then(|w| self.run_class(w, id));
        let id_status = if ri.is_some() {
            None
        } else {
            Some(self.foreign_or_stale(id))
        };
        let mut base = Vec::new();
        if wi.is_none() {
            base.push(Status::NullPointer);
        } else if !state_ok {
            base.push(Status::WrongState);
        } else if let Some(s) = id_status {
            base.push(s);
        }
        let p = self.wptr(wi);
        let wn = wi.map_or("NULL".into(), |w| format!("w{w}"));
        let lv = ri.map(|r| self.live(self.runs[r].worker));
        let which = self.rng.below(100);
        match which {
            // dagrt_wait_run: only when the model proves the wait finite
            0..=14 => {
                if let (Some(r), Some(l)) = (ri, &lv) {
                    if !self.eventually_done(r, l) {
                        return self.query_wait_for(th, wi, id, base, ri, lv);
                    }
                }
                let exp = if base.is_empty() {
                    self.expected_terminal(ri.unwrap_or(0)).0
                } else {
                    base
                };
                let st = self.call(th, format!("dagrt_wait_run({wn}, {id})"), &exp, || {
                    cr::dagrt_wait_run(p, id)
                })?;
                if let Some(r) = ri {
                    self.check_terminal_msg(r, st)?;
                    self.on_done(r)?;
                }
                Ok(())
            }
            15..=44 => self.query_wait_for(th, wi, id, base, ri, lv),
            45..=59 => {
                let null_out = self.rng.pct(6);
                let mut exp = base.clone();
                if null_out {
                    exp.push(Status::NullPointer);
                }
                if exp.is_empty() {
                    exp.push(Status::Ok);
                }
                let mut done: u32 = 9;
                let dp: *mut u32 = if null_out {
                    std::ptr::null_mut()
                } else {
                    &mut done
                };
                let st = self.call(
                    th,
                    format!(
                        "dagrt_run_done({wn}, {id}, {})",
                        if null_out { "NULL" } else { "&d" }
                    ),
                    &exp,
                    || cr::dagrt_run_done(p, id, dp),
                )?;
                if st != Status::Ok {
                    return self.check(done == 9, "dagrt_run_done wrote out on failure", || {
                        "out-parameter written on failure".into()
                    });
                }
                let r = ri.expect("done on a run");
                let l = lv.expect("liveness");
                self.check(done <= 1, "dagrt_run_done value", || {
                    format!("done = {done}")
                })?;
                if done == 1 {
                    let sig = self.undone_sig(r, &l);
                    self.check(!self.definitely_undone(r, &l), sig, || format!("run {id}: done = 1 but the model has it open or with a definitely unfinished task"))?;
                    self.on_done(r)?;
                } else {
                    self.check(
                        !self.runs[r].done_seen,
                        "a done run reported not done",
                        || format!("run {id}: done = 0 after it was seen done"),
                    )?;
                }
                Ok(())
            }
            60..=74 => {
                let null_out = self.rng.pct(6);
                let mut exp = base.clone();
                if null_out {
                    exp.push(Status::NullPointer);
                }
                if exp.is_empty() {
                    exp.push(Status::Ok);
                }
                let mut rs = RunStats {
                    completed: 77,
                    ..Default::default()
                };
                let rp: *mut RunStats = if null_out {
                    std::ptr::null_mut()
                } else {
                    &mut rs
                };
                let st = self.call(
                    th,
                    format!(
                        "dagrt_run_stats({wn}, {id}, {})",
                        if null_out { "NULL" } else { "&s" }
                    ),
                    &exp,
                    || cr::dagrt_run_stats(p, id, rp),
                )?;
                if st != Status::Ok {
                    return self.check(
                        rs.completed == 77,
                        "dagrt_run_stats wrote out on failure",
                        || "out-parameter written on failure".into(),
                    );
                }
                let r = ri.expect("stats on a run");
                let l = lv.expect("liveness");
                let tasks = self.runs[r]
                    .nodes
                    .iter()
                    .filter(|&&n| self.nodes[n].task.is_some())
                    .count() as u64;
                let dl = self.runs[r].nodes.iter().filter(|&&n| l.dl[n]).count() as i64;
                let ok = rs.done <= 1
                    && rs.completed + rs.failed + rs.cancelled <= tasks
                    && rs.live_slots >= dl
                    && (rs.done == 0 || rs.live_slots == 0);
                self.check(ok, "dagrt_run_stats bounds", || {
                    format!("run {id}: {rs:?} with {tasks} tasks, {dl} slots definitely live")
                })?;
                if rs.done == 1 {
                    let sig = self.undone_sig(r, &l);
                    self.check(!self.definitely_undone(r, &l), sig, || {
                        format!("run {id}: stats done = 1 but the model has it open or unfinished")
                    })?;
                    self.on_done(r)?;
                } else if self.definitely_undone(r, &l) {
                    self.check(rs.done == 0, "run stats done", || "done".into())?;
                }
                Ok(())
            }
            _ => {
                let mut exp = base.clone();
                if exp.is_empty() {
                    let r = ri.expect("release on a run");
                    let l = lv.as_ref().expect("liveness");
                    if self.definitely_undone(r, l) {
                        exp.push(Status::RunNotDone);
                    } else if self.runs[r].done_seen {
                        exp.push(Status::Ok);
                    } else {
                        exp.extend([Status::Ok, Status::RunNotDone]);
                    }
                }
                if let (Some(r), Some(l)) = (ri, lv.as_ref()) {
                    if exp == [Status::RunNotDone]
                        && self.undone_sig(r, l) != "a run reported done while it cannot be"
                    {
                        self.hint = Some(self.undone_sig(r, l).to_string());
                    }
                }
                let st = self.call(th, format!("dagrt_release_run({wn}, {id})"), &exp, || {
                    cr::dagrt_release_run(p, id)
                })?;
                if st == Status::Ok {
                    let r = ri.expect("release on a run");
                    self.runs[r].released = true;
                    self.on_done(r)?;
                    self.log(format!("       (run {id} released)"));
                }
                Ok(())
            }
        }
    }

    fn query_wait_for(
        &mut self,
        th: Th,
        wi: Option<usize>,
        id: u64,
        base: Vec<Status>,
        ri: Option<usize>,
        lv: Option<Live>,
    ) -> R {
        let null_out = self.rng.pct(6);
        let p = self.wptr(wi);
        let wn = wi.map_or("NULL".into(), |w| format!("w{w}"));
        let mut exp = base.clone();
        if null_out {
            exp.push(Status::NullPointer);
        }
        let mut timeout = self.rng.below(4);
        // what done must be on success: Some(0), Some(1), or None (either)
        let mut want: Option<u32> = None;
        if exp.is_empty() {
            let r = ri.expect("wait_for on a run");
            let l = lv.as_ref().expect("liveness");
            if self.definitely_undone(r, l) {
                exp.push(Status::Ok);
                want = Some(0);
            } else if self.eventually_done(r, l) {
                timeout = LONG_WAIT_MS;
                exp = self.expected_terminal(r).0;
                want = Some(1);
            } else {
                exp = self.expected_terminal(r).0;
                exp.push(Status::Ok);
            }
        }
        exp.sort_by_key(|s| *s as i32);
        exp.dedup();
        let mut done: u32 = 9;
        let dp: *mut u32 = if null_out {
            std::ptr::null_mut()
        } else {
            &mut done
        };
        let st = self.call(
            th,
            format!(
                "dagrt_wait_run_for({wn}, {id}, {timeout} ms, {})",
                if null_out { "NULL" } else { "&d" }
            ),
            &exp,
            || cr::dagrt_wait_run_for(p, id, timeout, dp),
        )?;
        let Some(r) = ri.filter(|_| !null_out && base.is_empty()) else {
            return self.check(done == 9, "dagrt_wait_run_for wrote out on failure", || {
                "out-parameter written on failure".into()
            });
        };
        let sig = if want == Some(0) {
            self.undone_sig(r, lv.as_ref().expect("liveness"))
        } else {
            "dagrt_wait_run_for done flag"
        };
        self.check(done <= 1 && want.is_none_or(|w| w == done), sig, || {
            format!("run {id}: done = {done}, expected {want:?}")
        })?;
        if done == 1 {
            let (term, _) = self.expected_terminal(r);
            self.check(
                term.contains(&st),
                "dagrt_wait_run_for status when done",
                || {
                    format!(
                        "run {id}: done with {}, expected {}",
                        sname(st),
                        snames(&term)
                    )
                },
            )?;
            self.check_terminal_msg(r, st)?;
            self.on_done(r)?;
        } else {
            self.check(
                st == Status::Ok,
                "dagrt_wait_run_for timeout status",
                || format!("timed out with {}", sname(st)),
            )?;
            self.check(!self.runs[r].done_seen, "a done run timed out", || {
                format!("run {id}: wait_for timed out after the run was seen done")
            })?;
        }
        Ok(())
    }

    fn op_worker_submit(&mut self) -> R {
        let wi = self.pick_worker();
        let r = self.rng.below(100);
        let wi = if r < 3 { None } else { wi };
        let fn_null = (3..6).contains(&r);
        let run_mode = self.rng.pct(40);
        let out_null = !run_mode && (6..9).contains(&r);
        let mut exp = Vec::new();
        if wi.is_none() || fn_null || out_null {
            exp.push(Status::NullPointer);
        }
        let mut will_call = exp.is_empty();
        if let Some(w) = wi {
            let m = &self.workers[w];
            if m.state != WState::Init {
                exp.push(Status::WrongState);
                will_call = false;
            } else if let Some(ri) = m.open {
                exp.push(if self.runs[ri].builder == Th::Main {
                    Status::WrongState
                } else {
                    Status::WrongThread
                });
                will_call = false;
            } else if m.closing {
                // begin_run fails before the callback: a closing worker takes no new run
                exp.push(Status::WrongState);
                will_call = false;
            }
        }
        let refused_closing = exp == [Status::WrongState]
            && wi.is_some_and(|w| self.workers[w].state == WState::Init && self.workers[w].closing);
        let rc: i32 = if self.rng.pct(22) {
            self.rng.pick(&[1, -3, 7])
        } else {
            0
        };
        let provoke = rc != 0 && self.rng.pct(50);
        let steps = self.rng.range(0, 6);
        if will_call && run_mode {
            if let Some(w) = wi {
                if self.any_blocked(w) {
                    // dagrt_worker_run waits for its run: lanes blocked by other runs' gated
                    // tasks would make that wait infinite.
                    self.open_all_gates();
                }
            }
        }
        let wp = self.wptr(wi);
        let fname = if run_mode {
            "dagrt_worker_run"
        } else {
            "dagrt_worker_submit"
        };
        let desc = format!(
            "{fname}({}, {}, ctx{{{steps} steps, rc {rc}{}}}{})",
            worker_label(wi),
            if fn_null { "NULL" } else { "cb" },
            if provoke { ", provoke" } else { "" },
            if run_mode {
                ""
            } else if out_null {
                ", NULL"
            } else {
                ", &run"
            }
        );
        self.log(format!("#{:<4} main {desc} ...", self.step));
        let fzp: *mut Fz = self;
        let mut ctx = CbCtx {
            fz: fzp,
            wi: wi.unwrap_or(0),
            steps,
            rc,
            provoke,
            run_mode,
            called: false,
            aborted: false,
            ri: None,
            orch_seen: std::ptr::null_mut(),
            end_msg: String::new(),
            failures: 0,
        };
        let ctxp = &mut ctx as *mut CbCtx as *mut c_void;
        let mut out_run: u64 = 0xDEAD_0002;
        let outp: *mut u64 = if out_null {
            std::ptr::null_mut()
        } else {
            &mut out_run
        };
        let f: cw::OrchFn = if fn_null { None } else { Some(trampoline) };
        let before = last_error();
        let t0 = Instant::now();
        // `self` is not used until the call returns: the callback reaches the fuzzer
        // through `fzp`.
        let st = if run_mode {
            cw::dagrt_worker_run(wp, f, ctxp)
        } else {
            cw::dagrt_worker_submit(wp, f, ctxp, outp)
        };
        let after = last_error();
        let el = t0.elapsed();
        if ctx.aborted {
            return Err(Abort);
        }
        if ctx.called != will_call {
            return self.fatal(
                format!("{fname}: callback called = {}", ctx.called),
                format!(
                    "{desc}: the callback was {}called, the model expected {}",
                    if ctx.called { "" } else { "not " },
                    if will_call { "a call" } else { "none" }
                ),
            );
        }
        if !will_call {
            self.note_result(Th::Main, &desc, &exp, st, &before, &after, el)?;
            if refused_closing {
                self.totals.refused_closing += 1;
                self.check(
                    after.0.contains("closing"),
                    &format!("{fname} on a closing worker: message"),
                    || {
                        format!(
                            "WRONG_STATE message {:?} does not say the worker is closing",
                            after.0
                        )
                    },
                )?;
            }
            if !run_mode && !out_null {
                self.check(
                    out_run == 0xDEAD_0002,
                    "dagrt_worker_submit wrote out_run on failure",
                    || "out-parameter written on failure".into(),
                )?;
            }
            return Ok(());
        }
        let w = wi.expect("callback on a worker");
        let ri = ctx.ri.expect("the callback created its run");
        let k = self.workers[w].orch;
        if !k.is_null() {
            self.check(k == ctx.orch_seen, "callback orch handle", || {
                format!(
                    "callback got orch {:?}, the worker's is {k:?}",
                    ctx.orch_seen
                )
            })?;
        }
        // what the call did: close the run (ending nested scopes), or fail it
        self.close_run_model(ri);
        if rc != 0 {
            self.runs[ri].failed = Some(format!("orchestration callback returned {rc}"));
            self.classify_failed_run(ri);
        }
        if !run_mode {
            self.learn_run_id(ri, out_run)?;
        }
        let exp = if rc != 0 {
            vec![Status::OrchestrationFailed]
        } else if run_mode {
            self.expected_terminal(ri).0
        } else {
            vec![Status::Ok]
        };
        // errno-like: a successful call leaves the message of the last failing call, which
        // may be one the callback made
        let before_adj = if ctx.failures > 0 {
            (ctx.end_msg.clone(), after.1)
        } else {
            before
        };
        self.note_result(
            Th::Main,
            &format!("{desc} [after the callback]"),
            &exp,
            st,
            &before_adj,
            &after,
            el,
        )?;
        if rc != 0 {
            let want = format!("orchestration callback returned {rc}");
            self.check(
                after.0.contains(&want),
                "ORCHESTRATION_FAILED message",
                || format!("message {:?} lacks {want:?}", after.0),
            )?;
        } else if run_mode {
            self.check_terminal_msg(ri, st)?;
        }
        if run_mode {
            // dagrt_worker_run released the run: only what ran can be checked
            self.runs[ri].released = true;
            self.on_done(ri)?;
        }
        Ok(())
    }

    fn callback_body(&mut self, c: &mut CbCtx, orch: *mut dagrt_orch_t) -> R {
        let wi = c.wi;
        let f = self.new_frame();
        let ri = self.runs.len();
        self.runs.push(RunM {
            worker: wi,
            id: None,
            builder: Th::Main,
            frames: vec![f],
            closed: false,
            failed: None,
            released: false,
            gone: false,
            nodes: Vec::new(),
            tmap: Vec::new(),
            stale: Vec::new(),
            done_seen: false,
            checked: false,
            no_gates: c.run_mode,
        });
        self.workers[wi].open = Some(ri);
        if self.workers[wi].orch.is_null() {
            self.workers[wi].orch = orch;
        }
        c.ri = Some(ri);
        self.log("       (callback: its run is open)".into());
        self.cb = Some(wi);
        self.cb_no_gates = c.run_mode;
        self.cb_failures = 0;
        for _ in 0..c.steps {
            self.step += 1;
            match self.rng.below(100) {
                0..=54 => self.op_submit()?,
                55..=64 => self.op_alloc()?,
                65..=76 => self.op_scope_begin()?,
                77..=88 => self.op_scope_end()?,
                89..=93 => self.op_begin()?,
                _ => self.op_stats()?,
            }
        }
        if c.provoke {
            let o = self.workers[wi].orch;
            if self.runs[ri].frames.len() <= 1 {
                self.call(
                    Th::Main,
                    "dagrt_scope_end(o) [provoked]".into(),
                    &[Status::ScopeUnbalanced],
                    || co::dagrt_scope_end(o),
                )?;
            } else {
                self.call(
                    Th::Main,
                    "dagrt_close_run_submission(o, 0) [provoked]".into(),
                    &[Status::StaleHandle],
                    || co::dagrt_close_run_submission(o, 0),
                )?;
            }
        }
        c.end_msg = last_error().0;
        c.failures = self.cb_failures;
        self.log(format!("       (callback returns {})", c.rc));
        Ok(())
    }

    fn op_misc(&mut self) -> R {
        let before = last_error();
        let what = self.rng.below(6);
        match what {
            0 => {
                let code = self.rng.pick(&[-1, 0, 1, 7, 13, 18, 19, 20, 99, i32::MIN]);
                let s = cstr(dagrt_status_str(code));
                let want = Status::name(code);
                self.log(format!(
                    "#{:<4} main dagrt_status_str({code}) -> {s}",
                    self.step
                ));
                self.check(s == want, "dagrt_status_str", || {
                    format!("dagrt_status_str({code}) = {s:?}, expected {want:?}")
                })?;
            }
            1 => {
                let v = cstr(dagrt_version());
                self.log(format!("#{:<4} main dagrt_version() -> {v}", self.step));
                self.check(v == env!("CARGO_PKG_VERSION"), "dagrt_version", || {
                    format!("version {v}")
                })?;
            }
            2 => {
                let null_out = self.rng.pct(30);
                let mut c = WorkerConfig {
                    heap_ring_size: 1,
                    task_window: 1,
                    timeout_ms: 1,
                };
                let cp: *mut WorkerConfig = if null_out {
                    std::ptr::null_mut()
                } else {
                    &mut c
                };
                let exp = if null_out {
                    vec![Status::NullPointer]
                } else {
                    vec![Status::Ok]
                };
                let st = self.call(
                    Th::Main,
                    format!(
                        "dagrt_worker_config_default({})",
                        if null_out { "NULL" } else { "&c" }
                    ),
                    &exp,
                    || cw::dagrt_worker_config_default(cp),
                )?;
                if st == Status::Ok {
                    self.check(
                        c == WorkerConfig {
                            heap_ring_size: 1 << 30,
                            task_window: 1 << 20,
                            timeout_ms: 10_000,
                        },
                        "default config",
                        || format!("{c:?}"),
                    )?;
                }
            }
            3 => {
                self.log(format!(
                    "#{:<4} main dagrt_worker_free(NULL); dagrt_args_free(NULL)",
                    self.step
                ));
                cw::dagrt_worker_free(std::ptr::null_mut());
                ca::dagrt_args_free(std::ptr::null_mut());
            }
            4 => {
                // trace calls that must fail before touching any file
                let wi = self.pick_worker();
                let p = self.wptr(wi);
                let inited = wi.is_some_and(|w| self.workers[w].state == WState::Init);
                let path = b"/nonexistent-dagrt-fuzz/x.dot\0";
                match self.rng.below(3) {
                    0 => {
                        self.call(
                            Th::Main,
                            "dagrt_worker_trace_start(w, NULL)".into(),
                            &[Status::NullPointer],
                            || cw::dagrt_worker_trace_start(p, std::ptr::null()),
                        )?;
                    }
                    1 => {
                        let exp = if wi.is_none() {
                            vec![Status::NullPointer]
                        } else if inited {
                            vec![Status::Ok]
                        } else {
                            vec![Status::WrongState]
                        };
                        self.call(
                            Th::Main,
                            "dagrt_worker_trace_stop(w) [no trace]".into(),
                            &exp,
                            || cw::dagrt_worker_trace_stop(p),
                        )?;
                    }
                    _ => {
                        let id = self.other_run_id(wi, None);
                        let exp = if wi.is_none() {
                            vec![Status::NullPointer]
                        } else if inited {
                            vec![Status::InvalidArgument]
                        } else {
                            vec![Status::WrongState]
                        };
                        self.call(
                            Th::Main,
                            format!("dagrt_worker_write_dot(w, {id}, path) [no trace]"),
                            &exp,
                            || cw::dagrt_worker_write_dot(p, id, path.as_ptr().cast()),
                        )?;
                    }
                }
                return Ok(());
            }
            _ => {
                self.call(
                    Th::Main,
                    "dagrt_set_log_hook(NULL, NULL)".into(),
                    &[Status::Ok],
                    || dagrt::capi::dagrt_set_log_hook(None, std::ptr::null_mut()),
                )?;
                return Ok(());
            }
        }
        if what != 2 && last_error() != before {
            self.soft(
                "last_error: an infallible call changed dagrt_last_error()",
                "a status/version/free call changed the last error",
            );
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Sequences

#[derive(Clone, Copy)]
enum Op {
    WorkerNew,
    AddNl,
    AddSub,
    Init,
    Orch,
    Stats,
    CloseW,
    CloseFor,
    FreeW,
    Register,
    Builder,
    TensorInit,
    Begin,
    Submit,
    Alloc,
    ScopeBegin,
    ScopeEnd,
    ScopeBurst,
    CloseRun,
    FailRun,
    Query,
    Gate,
    WorkerSubmit,
    Misc,
}

impl Fz {
    fn setup(&mut self) -> R {
        self.op_register(Some(("fz.a", 0, 0)))?;
        self.register_all()?;
        self.op_worker_new(true)?;
        for _ in 0..self.rng.range(1, 3) {
            self.op_add_nl(true)?;
        }
        for _ in 0..self.rng.range(0, 1) {
            self.op_add_sub(true)?;
        }
        if self.rng.pct(85) {
            self.op_init(true)?;
        }
        Ok(())
    }

    fn one_step(&mut self) -> R {
        let live = self.live_workers();
        let Some(&p) = live.first() else {
            return self.op_worker_new(true);
        };
        // a closed run not seen done yet: the runs a bounded close may have to give up on
        let busy = self
            .runs
            .iter()
            .any(|r| r.worker == p && r.closed && !r.released && !r.gone && !r.done_seen);
        let w = &self.workers[p];
        let two = live.len() >= 2;
        let open = w.open.is_some();
        use Op::*;
        let t: Vec<(u32, Op)> = match w.state {
            WState::New => vec![
                (25, AddNl),
                (15, AddSub),
                (if w.lanes() > 0 { 40 } else { 4 }, Init),
                (4, Register),
                (3, Builder),
                (2, TensorInit),
                (2, Misc),
                (3, Stats),
                (3, Orch),
                (2, CloseW),
                (1, CloseFor),
                (3, Begin),
                (2, Query),
                (2, WorkerSubmit),
                (1, Submit),
            ],
            // close_for ran out of budget: the runs go on (queries, gates, releases),
            // new runs are refused, and another close (bounded or not) finishes the job
            WState::Init if w.closing => vec![
                (6, Begin),
                (4, WorkerSubmit),
                (2, Submit),
                (1, CloseRun),
                (1, FailRun),
                (24, Query),
                (8, Gate),
                (6, CloseFor),
                (3, CloseW),
                (4, Stats),
                (2, Orch),
                (1, Alloc),
                (1, AddNl),
                (1, Init),
                (2, Builder),
                (1, Register),
                (1, Misc),
                (if two { 0 } else { 1 }, WorkerNew),
                (if two { 2 } else { 0 }, FreeW),
            ],
            WState::Init if !open => vec![
                (30, Begin),
                (5, Submit),
                (2, Alloc),
                (2, ScopeBegin),
                (2, ScopeEnd),
                (2, CloseRun),
                (1, FailRun),
                (16, Query),
                (3, Register),
                (4, Builder),
                (4, Gate),
                (10, WorkerSubmit),
                (4, Stats),
                (2, Orch),
                (2, AddNl),
                (1, AddSub),
                (2, Init),
                (2, CloseW),
                (if busy { 8 } else { 2 }, CloseFor),
                (if two { 0 } else { 3 }, WorkerNew),
                (if two { 2 } else { 0 }, FreeW),
                (2, Misc),
                (2, TensorInit),
            ],
            WState::Init => vec![
                (45, Submit),
                (7, Alloc),
                (8, ScopeBegin),
                (7, ScopeEnd),
                (1, ScopeBurst),
                (4, CloseRun),
                (1, FailRun),
                (8, Query),
                (4, Gate),
                (2, Begin),
                (1, WorkerSubmit),
                (3, Builder),
                (1, Register),
                (3, Stats),
                (1, CloseW),
                (1, CloseFor),
                (1, AddNl),
                (1, Misc),
                (1, TensorInit),
                (if two { 0 } else { 1 }, WorkerNew),
                (1, Orch),
            ],
            _ => vec![
                (25, FreeW),
                (5, Init),
                (3, AddNl),
                (3, Begin),
                (5, Query),
                (3, Stats),
                (3, CloseW),
                (2, CloseFor),
                (2, WorkerSubmit),
                (2, Submit),
                (2, Orch),
            ],
        };
        let total: u32 = t.iter().map(|x| x.0).sum();
        let mut k = self.rng.below(total as u64) as u32;
        let mut op = t[0].1;
        for &(wt, o) in &t {
            if k < wt {
                op = o;
                break;
            }
            k -= wt;
        }
        match op {
            WorkerNew => self.op_worker_new(false),
            AddNl => self.op_add_nl(false),
            AddSub => self.op_add_sub(false),
            Init => self.op_init(false),
            Orch => self.op_orch(),
            Stats => self.op_stats(),
            CloseW => self.op_close_worker(false),
            CloseFor => self.op_close_for(false),
            FreeW => self.op_free_worker(),
            Register => self.op_register(None),
            Builder => self.op_builder(),
            TensorInit => self.op_tensor_init(),
            Begin => self.op_begin(),
            Submit => self.op_submit(),
            Alloc => self.op_alloc(),
            ScopeBegin => self.op_scope_begin(),
            ScopeEnd => self.op_scope_end(),
            ScopeBurst => self.op_scope_burst(),
            CloseRun => self.op_close_run(),
            FailRun => self.op_fail_run(),
            Query => self.op_query(),
            Gate => self.op_gate(),
            WorkerSubmit => self.op_worker_submit(),
            Misc => self.op_misc(),
        }
    }

    /// End of a sequence: every run closed, waited for and released; the worker quiescent
    /// (no slot, no TensorMap entry, no run, nothing queued, every ring drained); then
    /// closed and freed.
    fn finish(&mut self) -> R {
        self.step += 1;
        self.log(format!(
            "#{:<4} ---- end of sequence: close, wait, release, check quiescence ----",
            self.step
        ));
        self.open_all_gates();
        for w in self.live_workers() {
            match self.workers[w].state {
                WState::New => {
                    if self.rng.pct(10) {
                        self.close_for_idle(w)?;
                    } else if self.rng.pct(25) {
                        let p = self.workers[w].ptr;
                        self.call(
                            Th::Main,
                            format!("dagrt_worker_close(w{w}) [never initialised]"),
                            &[Status::Ok],
                            || cw::dagrt_worker_close(p),
                        )?;
                    }
                    self.free_worker(w)?;
                }
                WState::Closed => self.free_worker(w)?,
                WState::Init => {
                    if self.rng.pct(8) {
                        self.free_worker(w)?;
                        continue;
                    }
                    let p = self.workers[w].ptr;
                    let o = self.workers[w].orch;
                    if let Some(ri) = self.workers[w].open {
                        let th = self.runs[ri].builder;
                        while self.runs[ri].frames.len() > 1 {
                            self.call(th, "dagrt_scope_end(o)".into(), &[Status::Ok], || {
                                co::dagrt_scope_end(o)
                            })?;
                            let f = self.runs[ri].frames.pop().expect("a nested frame");
                            self.frames[f] = false;
                        }
                        let id = self.runs[ri]
                            .id
                            .expect("an open run outside a callback has an id");
                        self.call(
                            th,
                            format!("dagrt_close_run_submission(o{w}, {id})"),
                            &[Status::Ok],
                            || co::dagrt_close_run_submission(o, id),
                        )?;
                        self.close_run_model(ri);
                    }
                    for ri in 0..self.runs.len() {
                        if self.runs[ri].worker != w || self.runs[ri].released || self.runs[ri].gone
                        {
                            continue;
                        }
                        let id = self.runs[ri].id.expect("a closed run has an id");
                        self.wait_done(w, p, ri, "with every gate open")?;
                        self.call(
                            Th::Main,
                            format!("dagrt_release_run(w{w}, {id})"),
                            &[Status::Ok],
                            || cr::dagrt_release_run(p, id),
                        )?;
                        self.runs[ri].released = true;
                    }
                    let mut s = WorkerStats::default();
                    let sp: *mut WorkerStats = &mut s;
                    self.call(
                        Th::Main,
                        format!("dagrt_worker_stats(w{w}, &s)"),
                        &[Status::Ok],
                        || cw::dagrt_worker_stats(p, sp),
                    )?;
                    self.log(format!("       (stats: live {}, tmap {}, runs {}, queued {}, tops {:?}, tails {:?})", s.live_slots, s.tensormap_entries, s.runs, s.ready_queued, s.heap_top, s.heap_tail));
                    let quiet = s.live_slots == 0
                        && s.tensormap_entries == 0
                        && s.runs == 0
                        && s.heap_tail == s.heap_top;
                    if quiet && s.ready_queued != 0 {
                        // the scheduler refreshes the count at the end of the pass that
                        // consumed the last slot: give it a moment
                        let t0 = Instant::now();
                        while s.ready_queued != 0 && t0.elapsed() < Duration::from_secs(2) {
                            std::thread::sleep(Duration::from_micros(200));
                            let mut s2 = WorkerStats::default();
                            if cw::dagrt_worker_stats(p, &mut s2) == Status::Ok {
                                s.ready_queued = s2.ready_queued;
                            }
                            self.tick();
                        }
                    }
                    if quiet && s.ready_queued != 0 {
                        self.soft(
                            "stats: ready_queued counts tasks although no slot is live and no run is registered",
                            format!("after every run was released: live_slots 0, runs 0, but ready_queued {} (cancelled tasks' queue entries?)", s.ready_queued),
                        );
                    }
                    self.check(quiet, "leak: worker not quiescent after every run was released", || {
                        format!("stats after all runs released: live_slots {}, tensormap_entries {}, runs {}, ready_queued {}, tops {:?}, tails {:?}", s.live_slots, s.tensormap_entries, s.runs, s.ready_queued, s.heap_top, s.heap_tail)
                    })?;
                    self.check_stats(w, &s)?;
                    if self.rng.pct(35) {
                        // every run was released: any budget, even 0, closes the worker
                        self.close_for_idle(w)?;
                    } else {
                        self.call(
                            Th::Main,
                            format!("dagrt_worker_close(w{w})"),
                            &[Status::Ok],
                            || cw::dagrt_worker_close(p),
                        )?;
                    }
                    self.workers[w].state = WState::Closed;
                    self.free_worker(w)?;
                }
                WState::Freed => {}
            }
        }
        for b in std::mem::take(&mut self.builders) {
            ca::dagrt_args_free(b.ptr);
        }
        for &r in &self.rejected {
            let n = self.rec.nodes[r]
                .m
                .iter()
                .map(|m| m.entered.load(SeqCst))
                .sum::<u32>();
            if n != 0 {
                return self.fatal("a rejected submit ran", format!("record {r} was never accepted (or was skipped) but its executor ran {n} time(s)"));
            }
        }
        self.check_executor_errors()
    }

    /// dagrt_worker_close_for on a worker with no registered run (never initialised, or
    /// every run released): OK and closed = 1 whatever the budget.
    fn close_for_idle(&mut self, w: usize) -> R {
        let p = self.workers[w].ptr;
        let (budget, _) = self.close_budget();
        let mut closed: u32 = 7;
        let cp: *mut u32 = &mut closed;
        self.call(
            Th::Main,
            format!("dagrt_worker_close_for(w{w}, {budget} ms, &closed) [no run]"),
            &[Status::Ok],
            || cw::dagrt_worker_close_for(p, budget, cp),
        )?;
        self.check(
            closed == 1,
            "dagrt_worker_close_for: closed = 0 although every run was done or had the time to finish",
            || format!("dagrt_worker_close_for(w{w}, {budget} ms) on a worker without runs set out_closed = {closed}"),
        )
    }

    /// After a failed check: release everything without further checks.
    fn teardown(&mut self) {
        self.open_all_gates();
        for w in self.live_workers() {
            self.log(format!("       (teardown: dagrt_worker_free(w{w}))"));
            cw::dagrt_worker_free(self.workers[w].ptr);
            self.tick();
            self.workers[w].state = WState::Freed;
        }
        for b in std::mem::take(&mut self.builders) {
            ca::dagrt_args_free(b.ptr);
        }
        self.rec
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

fn run_sequence(
    seed: u64,
    steps: usize,
    shared: &Arc<Shared>,
    totals: &mut Totals,
) -> Vec<Failure> {
    let mut fz = Fz::new(seed, steps, shared.clone());
    fz.log(format!("sequence seed {seed:#x}, {steps} steps"));
    let r = (|| -> R {
        fz.setup()?;
        while fz.step < steps {
            fz.step += 1;
            fz.one_step()?;
        }
        fz.finish()
    })();
    if r.is_err() {
        fz.teardown();
    }
    totals.seqs += 1;
    totals.steps += fz.step as u64;
    totals.calls += fz.totals.calls;
    totals.nodes += fz.totals.nodes;
    totals.ran += fz.totals.ran;
    for k in 0..2 {
        totals.close_for[k] += fz.totals.close_for[k];
    }
    totals.refused_closing += fz.totals.refused_closing;
    for (k, v) in &fz.totals.by_status {
        *totals.by_status.entry(k).or_default() += v;
    }
    std::mem::take(&mut fz.failures)
}

#[test]
fn api_sequence_fuzz() {
    let seqs = env_u64("DAGRT_FUZZ_SEQS").unwrap_or(DEFAULT_SEQS);
    let max_steps = env_u64("DAGRT_FUZZ_STEPS").unwrap_or(DEFAULT_STEPS).max(1);
    let base = env_u64("DAGRT_FUZZ_SEED").unwrap_or(DEFAULT_SEED);
    let hang = Duration::from_secs(env_u64("DAGRT_FUZZ_HANG_SECS").unwrap_or(60));
    let shared = Arc::new(Shared {
        progress: AtomicU64::new(0),
        seed: AtomicU64::new(base),
        log: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
    });
    install_panic_hook();
    let dog = start_watchdog(shared.clone(), hang);
    let t0 = Instant::now();
    let mut totals = Totals::default();
    let mut failures: Vec<Failure> = Vec::new();
    for i in 0..seqs {
        let seed = seq_seed(base, i);
        let steps = Rng(seed ^ 0x5157_E905).range((max_steps / 4).max(1), max_steps) as usize;
        failures.extend(run_sequence(seed, steps, &shared, &mut totals));
    }
    shared.stop.store(true, SeqCst);
    let _ = dog.join();
    eprintln!(
        "api_fuzz: {} sequences, {} steps, {} calls, {} tasks submitted, {} ran, {:.1} s (base seed {base:#x})",
        totals.seqs,
        totals.steps,
        totals.calls,
        totals.nodes,
        totals.ran,
        t0.elapsed().as_secs_f64()
    );
    let hist: Vec<String> = totals
        .by_status
        .iter()
        .map(|(k, v)| format!("{}={v}", k.trim_start_matches("DAGRT_STATUS_")))
        .collect();
    eprintln!("api_fuzz: statuses returned: {}", hist.join(" "));
    eprintln!(
        "api_fuzz: dagrt_worker_close_for on initialised workers: {} closed = 0, {} closed = 1; {} new runs refused while closing",
        totals.close_for[0], totals.close_for[1], totals.refused_closing
    );
    if failures.is_empty() {
        return;
    }
    // group by signature: print each distinct failure once, with its shortest sequence log
    let mut by_sig: BTreeMap<String, Vec<&Failure>> = BTreeMap::new();
    for f in &failures {
        by_sig.entry(f.sig.clone()).or_default().push(f);
    }
    let mut report = String::new();
    for (sig, fs) in &by_sig {
        let f = fs.iter().min_by_key(|f| f.log.len()).expect("non-empty");
        let seeds: Vec<String> = fs
            .iter()
            .take(6)
            .map(|f| format!("{:#x}", f.seed))
            .collect();
        report += &format!(
            "\n=== {sig}\n    {} occurrence(s), sequence seeds {}{}\n    {}\n    replay: DAGRT_FUZZ_SEED={:#x} DAGRT_FUZZ_SEQS=1\n    call log of that sequence:\n",
            fs.len(),
            seeds.join(", "),
            if fs.len() > 6 { ", ..." } else { "" },
            f.detail.replace('\n', "\n    "),
            f.seed
        );
        let keep = env_u64("DAGRT_FUZZ_LOG_LINES").unwrap_or(150) as usize;
        let tail = f.log.len().saturating_sub(keep);
        if tail > 0 {
            report += &format!("      ... ({tail} earlier lines)\n");
        }
        for l in &f.log[tail..] {
            report += &format!("      {l}\n");
        }
    }
    eprintln!("{report}");
    panic!(
        "api_fuzz: {} failed check(s), {} distinct: {}",
        failures.len(),
        by_sig.len(),
        by_sig.keys().cloned().collect::<Vec<_>>().join(" | ")
    );
}
