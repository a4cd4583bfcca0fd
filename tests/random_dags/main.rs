//! Randomized DAG stress test: thousands of random graphs run on the real engine and checked
//! against a sequential reference model of the seed's dependency rules.
//!
//! Each run submits 10-60 random nodes: NEXT_LEVEL singles (random target among lanes with
//! stable ids such as 3, 17, 42), NEXT_LEVEL groups (distinct targets), SUB singles and SUB
//! groups, and `alloc()` buffers, inside randomly nested scopes (sometimes deeper than 4, and
//! now and then all 64 levels deep). Tensors are random views (dense, 4x4 and arbitrary
//! tiles, rows, columns, transposed tiles, diagonals, every-other grids, 3-D boxes, arbitrary
//! strided byte/u16/u32/u64 views, zero extents) over 8x8 column-major u64 matrices, small
//! flat buffers, `alloc()` buffers and auto-allocated OUTPUT buffers, with random tags
//! (INPUT, OUTPUT, INOUT, OUTPUT_EXISTING, NO_DEP) and random explicit deps (`add_dep`
//! retaining and `add_dep_wait` ordering-only) on earlier nodes of the same run.
//!
//! The reference model walks the submission sequence byte by byte: for INPUT and INOUT the
//! last writer (OUTPUT / INOUT / OUTPUT_EXISTING / alloc) of every byte the view touches, plus
//! every explicit dep, is a required producer; OUTPUT, OUTPUT_EXISTING and NO_DEP require
//! nothing. dagrt may add edges but never miss one. Checks:
//! - every member of every node ran exactly once, on the right lane, with its own tensors,
//!   scalars, config, member index, group size, run id and slot;
//! - every required producer ended (global atomic sequence) before any member of the consumer
//!   started; a lane never runs two jobs at once;
//! - a producer the consumer must retain (tensor edge or `add_dep`, producer still held by an
//!   open scope at submit) is alive (same task, COMPLETED) while the consumer runs;
//! - in "gated" runs no executor can finish before the whole graph is submitted, so right
//!   after close every required producer that is a task must list the consumer among its
//!   consumers (retaining where required) and the consumer must be PENDING: a deterministic
//!   check of inference that does not depend on timing;
//! - each run succeeds with completed == number of task nodes; afterwards no slot is live, the
//!   TensorMap is empty, every heap ring's tail equals its top and no ready queue holds work.
//!
//! Environment: DAGRT_STRESS_RUNS (runs of the main test; the others scale from it),
//! DAGRT_STRESS_SEED (base seed, decimal or 0x-hex), DAGRT_STRESS_ONLY (replay one run seed
//! printed by a failure). The tests of this binary take a common lock: on 2 cores, four workers
//! of spinning lanes competing with each other would only measure the machine.

use dagrt::callable::Callable;
use dagrt::error::Status;
use dagrt::orchestrator::{Orchestrator, SubmitKind};
use dagrt::slot::{state_name, COMPLETED, PENDING};
use dagrt::task::{
    CallConfig, DataType, Dep, DepKind, Tag, TaskArgs, TaskHandle, TaskView, Tensor,
};
use dagrt::worker::{Engine, Worker, WorkerConfig};
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

#[path = "../common/mod.rs"]
mod common;
use common::*;

mod build_run;
mod builder;
mod directed;
mod executor;
mod finish_run;
mod model;
mod random_tests;
mod workers;

use build_run::*;
use builder::*;
use executor::*;
use finish_run::*;
use model::*;
use workers::*;

// ---------------------------------------------------------------------------------------
// Configuration

const DEFAULT_SEED: u64 = 0x5EED_DA6A_0000_0001;
/// Nodes per run at most (60 ops, plus the task of a deep excursion).
const MAX_NODES: usize = 72;
fn stress_runs() -> u64 {
    env_u64("DAGRT_STRESS_RUNS").unwrap_or(DEFAULT_RUNS)
}

fn base_seed() -> u64 {
    env_u64("DAGRT_STRESS_SEED").unwrap_or(DEFAULT_SEED)
}

/// The run seeds a test executes: `n` seeds derived from the base seed, or only the replayed one.
fn run_seeds(salt: u64, n: u64) -> Vec<u64> {
    if let Some(s) = env_u64("DAGRT_STRESS_ONLY") {
        return vec![s];
    }
    let base = base_seed() ^ salt.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    (0..n)
        .map(|i| Rng(base ^ i.wrapping_mul(0xA24B_AED4_963E_E407)).next())
        .collect()
}
