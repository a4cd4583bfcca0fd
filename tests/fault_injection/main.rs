//! Fault injection: failing tasks, failing orchestration, and submits that fail part-way.
//!
//! 1. `random_failing_dags`: thousands of random graphs (the generator and byte-level
//!    reference model of `random_dags`: random views over static matrices and flat
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
//!      in `directed.rs` for why they exist);
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
    CallConfig, DataType, Dep, DepKind, Tag, TaskArgs, TaskHandle, TaskView, Tensor,
};
use dagrt::worker::{Engine, Worker, WorkerConfig};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{c_void, CStr, CString};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

#[path = "../common/mod.rs"]
mod common;
use common::*;

mod backpressure;
mod directed;
mod executor;
mod handwritten;
mod hostile;
mod model;
mod one_run;
mod orchestration_failure;
mod random_tests;
mod workers;

use executor::*;
use handwritten::*;
use hostile::*;
use model::*;
use one_run::*;
use orchestration_failure::*;
use random_tests::*;
use workers::*;

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
