//! Random DAGs on a worker whose threads keep parking, checked by value against a sequential
//! reference model.
//!
//! The other random tests submit back to back, so the scheduler thread and the lanes rarely
//! sleep. Here the spin budget is 10 us (`DAGRT_SPIN_US`, read once per process: a binary of
//! its own, set before any worker exists), the test sleeps 1-4 ms between runs, and two thirds
//! of the runs sleep between submissions (some before every one), so a submission often makes
//! a task READY at once while the scheduler thread and a lane are both asleep: the path where
//! the submitting thread runs the scheduler's pass itself (`scheduler::pass_for_parked`).
//!
//! Each run submits 8-48 tasks (NEXT_LEVEL singles and groups, SUB singles and groups, inside
//! random nested scopes) over the static buffers of `common` (8x8 and 32x32 column-major u64
//! matrices, flat buffers), with random views (tiles, rows, columns, transposed tiles,
//! diagonals, arbitrary strided and overlapping views of any element size) tagged INPUT,
//! OUTPUT, INOUT or OUTPUT_EXISTING. A member's executor hashes every byte it reads (its
//! INPUT and INOUT tensors, in tensor order) into a value, records it, and writes values
//! derived from it into every element of its OUTPUT, INOUT and OUTPUT_EXISTING tensors.
//!
//! dagrt infers read-after-write edges from the tags; it does not order a write after earlier
//! readers or writers of the same bytes. The generator therefore names those (write after
//! read, write after write) as explicit deps (`add_dep` or `add_dep_wait`, at random) unless
//! the tags already require them, and keeps the members of a group from touching bytes
//! another member writes. Every conflicting pair of accesses is then ordered, the read-after-
//! write ones by inference alone, and the outcome is that of executing the tasks one after
//! the other in submission order, which the reference model does on shadow copies.
//!
//! Checks per run: every member ran exactly once and recorded the value the model computed;
//! every byte of every buffer equals the model's; the run succeeded with completed == tasks
//! and nothing failed or cancelled; afterwards no slot is live, the TensorMap is empty, no
//! ready queue holds work and no run is registered.
//!
//! Environment (as `random_dags`): DAGRT_STRESS_RUNS (this test runs an eighth of it),
//! DAGRT_STRESS_SEED (base seed, decimal or 0x-hex), DAGRT_STRESS_ONLY (replay one run seed
//! printed by a failure).

#[path = "../common/mod.rs"]
mod common;

mod build_run;
mod check;
mod gen;
mod record;
mod values;

use build_run::*;
use check::*;
use common::*;
use gen::*;
use record::*;
use values::*;

use dagrt::orchestrator::Orchestrator;
use dagrt::task::{CallConfig, Dep, DepKind, Tag, TaskArgs, TaskHandle, TaskView, Tensor};
use dagrt::worker::{Engine, Worker, WorkerConfig};
use std::collections::{BTreeSet, HashSet};
use std::ffi::c_void;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The spin budget of every wait in this process, in microseconds.
const SPIN_US: u64 = 10;
const DEFAULT_SEED: u64 = 0x5EED_DA6A_1D1E_0001;
/// Tasks per run at most (the model keeps each byte's readers as a 64-bit mask).
const MAX_NODES: usize = 64;
/// Scalars of a member: [RunRec address, node, member, value seed, read mask | write mask << 8].
const NSCALARS: usize = 5;

fn run_seeds() -> Vec<u64> {
    if let Some(s) = env_u64("DAGRT_STRESS_ONLY") {
        return vec![s];
    }
    let n = (env_u64("DAGRT_STRESS_RUNS").unwrap_or(DEFAULT_RUNS) / 8).max(1);
    let base = env_u64("DAGRT_STRESS_SEED").unwrap_or(DEFAULT_SEED);
    (0..n)
        .map(|i| Rng(base ^ i.wrapping_mul(0xA24B_AED4_963E_E407)).next())
        .collect()
}

// ---------------------------------------------------------------------------------------
// A run as the test built it: its nodes and members, with what the model expects of them

struct Member {
    tensors: Vec<Tensor>,
    buf_of: Vec<usize>,
    deps: Vec<Dep>,
    seed: u64,
    rmask: u64,
    wmask: u64,
    /// The value the model computed.
    value: u64,
}

struct Node {
    kind: Kind,
    slot: u64,
    members: Vec<Member>,
    /// Producers the tags require (read after write): left to inference.
    inferred: BTreeSet<usize>,
    /// Explicit deps (node, retain): write after read / write, and a few random ones.
    explicit: Vec<(usize, bool)>,
    /// Slept before its submit, in microseconds.
    slept_us: u64,
}

#[derive(Default)]
struct Totals {
    runs: u64,
    nodes: u64,
    groups: u64,
    members: u64,
    tensors: u64,
    inferred: u64,
    explicit: u64,
    sleeps: u64,
    dropped_tensors: u64,
}

struct Run {
    seed: u64,
    run_id: u64,
    nodes: Vec<Node>,
    ops: Vec<Op>,
    rr: *const RunRec,
    /// The model's buffers after the run.
    shadow: Vec<Vec<u8>>,
}

// ---------------------------------------------------------------------------------------
// The worker and its buffers

struct Env {
    worker: Worker,
    engine: Arc<Engine>,
    lanes: Lanes,
    /// The static buffers (`common::static_buffers`); after setup, touched only through
    /// `bases` (by the executors while a run is in flight, by the test between runs).
    _storage: Vec<Vec<u64>>,
    bases: Vec<*mut u8>,
    /// `common::Buf` records of the buffers, for the view generators.
    bufs: Vec<Buf>,
}

impl Env {
    fn new() -> Env {
        let lanes = lanes_a();
        let cfg = WorkerConfig {
            heap_ring_size: 1 << 20,
            task_window: 4096,
            timeout_ms: 10_000,
        };
        let (worker, engine) = started_worker(cfg, &lanes);
        let mut storage = static_storage();
        let bases = storage
            .iter_mut()
            .map(|v| v.as_mut_ptr() as *mut u8)
            .collect();
        let bufs = static_bufs(&storage);
        Env {
            worker,
            engine,
            lanes,
            _storage: storage,
            bases,
            bufs,
        }
    }

    fn orch(&self) -> std::sync::MutexGuard<'_, Orchestrator> {
        lock(self.worker.orchestrator().expect("orchestrator"))
    }

    fn len(&self, bi: usize) -> usize {
        self.bufs[bi].len as usize
    }

    /// Between runs: the buffers get `init`.
    fn fill(&self, init: &[Vec<u8>]) {
        for (bi, v) in init.iter().enumerate() {
            // SAFETY: no run is in flight; the buffer holds `len` bytes.
            unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), self.bases[bi], v.len()) };
        }
    }

    /// Between runs: a copy of buffer `bi`.
    fn read(&self, bi: usize) -> Vec<u8> {
        // SAFETY: the run is done (its executors returned before its fence reached zero).
        unsafe { std::slice::from_raw_parts(self.bases[bi], self.len(bi)).to_vec() }
    }

    fn check_reclaimed(&self) -> Result<(), String> {
        let errs = leftovers(&self.engine);
        if errs.is_empty() {
            Ok(())
        } else {
            Err(format!("not reclaimed after the run: {}", errs.join("; ")))
        }
    }
}

#[test]
fn random_dags_on_a_parking_worker() {
    // Before any worker exists in this process: every wait spins for 10 us, then parks.
    std::env::set_var("DAGRT_SPIN_US", SPIN_US.to_string());
    assert_eq!(dagrt::event::spin_budget(), Duration::from_micros(SPIN_US));
    let t0 = Instant::now();
    let env = Env::new();
    let mut t = Totals::default();
    let mut pause = Rng(env_u64("DAGRT_STRESS_SEED").unwrap_or(DEFAULT_SEED) ^ 0x1D1E);
    for seed in run_seeds() {
        // Idle between runs: the scheduler thread and the lanes park.
        std::thread::sleep(Duration::from_micros(pause.range(1000, 4000)));
        let run = match build(&env, seed, &mut t) {
            Ok(r) => r,
            Err((m, r)) => fail(env, &m, r.as_ref()),
        };
        if let Err(m) = finish(&env, &run) {
            fail(env, &m, Some(&run));
        }
    }
    println!(
        "random_dags_on_a_parking_worker: {} runs in {:.2?}: {} tasks ({} groups, {} members), {} tensors ({} left out of groups), {} inferred edges, {} explicit deps, {} sleeps between submissions",
        t.runs, t0.elapsed(), t.nodes, t.groups, t.members, t.tensors, t.dropped_tensors, t.inferred, t.explicit, t.sleeps
    );
}
