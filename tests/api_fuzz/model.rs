//! The shadow model's state: workers, runs, tasks, heap rings and the registry as the fuzzer
//! believes them to be.

use crate::ffi::align1024;
use dagrt::callable::Callable;
use dagrt::capi::args::dagrt_args_t;
use dagrt::capi::worker::{dagrt_orch_t, dagrt_worker_t};
use dagrt::task::{Dep, TaskHandle, Tensor};
use dagrt::worker::WorkerConfig;
use std::collections::BTreeMap;
use std::sync::Mutex;

// ---------------------------------------------------------------------------------------
// The shadow model

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Th {
    Main,
    Helper,
}

impl Th {
    pub(crate) fn other(self) -> Th {
        match self {
            Th::Main => Th::Helper,
            Th::Helper => Th::Main,
        }
    }
    pub(crate) fn tag(self) -> &'static str {
        match self {
            Th::Main => "main",
            Th::Helper => "2nd ",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum WState {
    New,
    Init,
    Closed,
    Freed,
}

/// One heap ring of the model: the engine's exact placement (tops are deterministic), and
/// every reservation with the slot that owns it.
#[derive(Clone, Default)]
pub(crate) struct RingM {
    pub(crate) top: u64,
    pub(crate) res: Vec<(u64, u64, usize)>,
}

pub(crate) struct WModel {
    pub(crate) ptr: *mut dagrt_worker_t,
    pub(crate) cfg: WorkerConfig,
    pub(crate) nl: Vec<i32>,
    pub(crate) nsub: u32,
    pub(crate) state: WState,
    pub(crate) orch: *mut dagrt_orch_t,
    pub(crate) open: Option<usize>,
    pub(crate) rings: Vec<RingM>,
    pub(crate) base: [Option<u64>; 4],
    /// Sequence number of the next slot id (the id's high bits): one per successful
    /// submit or alloc, from 1 at init.
    pub(crate) next_seq: u64,
    /// A `dagrt_worker_close_for` ran out of budget (closed = 0): the worker is still
    /// initialised and its runs keep running, but it refuses new runs (`dagrt_begin_run`,
    /// hence `dagrt_worker_submit` / `dagrt_worker_run`, fail WRONG_STATE "the worker is
    /// closing") until a later close tears it down. No run can be open then: close_for
    /// refuses to start while one is.
    pub(crate) closing: bool,
    /// Closed after init: its runs not released keep their results (wait, done, stats and
    /// release still work on them) until released or the worker is freed.
    pub(crate) kept_runs: bool,
}

impl WModel {
    pub(crate) fn ring_size(&self) -> u64 {
        align1024(self.cfg.heap_ring_size.max(1024))
    }
    /// The task window as documented: exactly `task_window` slots.
    pub(crate) fn window(&self) -> u64 {
        self.cfg.task_window as u64
    }
    pub(crate) fn lanes(&self) -> usize {
        self.nl.len() + self.nsub as usize
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum FState {
    /// The run's submission closed normally: the fate is deterministic.
    Normal,
    /// The submission failed and the task had started: it runs (all members, once).
    Ran,
    /// The submission failed before the task could start: it never runs.
    NotRan,
    /// The submission failed while the task may have been about to start: all or nothing.
    Unknown,
}

pub(crate) struct TaskM {
    pub(crate) members: usize,
    pub(crate) sub: bool,
    pub(crate) targets: Vec<i32>,
    pub(crate) gate: Option<usize>,
    /// (failing member, mode 1 = return code, 2 = dagrt_task_fail)
    pub(crate) fail: Option<(usize, u64)>,
    pub(crate) cfg0: u64,
    pub(crate) thash: Vec<u64>,
    pub(crate) shash: Vec<u64>,
}

#[derive(Clone, Copy)]
pub(crate) struct EdgeM {
    pub(crate) p: usize,
    pub(crate) retain: bool,
    /// The producer was definitely live at submit: the engine charged the reference.
    pub(crate) certain: bool,
}

pub(crate) struct NodeM {
    pub(crate) run: usize,
    pub(crate) worker: usize,
    pub(crate) rec: usize,
    /// Sequence number of its slot id.
    pub(crate) seq: u64,
    /// Byte ranges its INPUT/INOUT tensors look up.
    pub(crate) reads: Vec<(u64, u64)>,
    pub(crate) handle: Option<TaskHandle>,
    pub(crate) frame: usize,
    pub(crate) producers: Vec<EdgeM>,
    pub(crate) task: Option<TaskM>,
    pub(crate) fstate: FState,
}

pub(crate) struct RunM {
    pub(crate) worker: usize,
    pub(crate) id: Option<u64>,
    pub(crate) builder: Th,
    pub(crate) frames: Vec<usize>,
    pub(crate) closed: bool,
    /// The submission failed: the text the run's failure message must contain.
    pub(crate) failed: Option<String>,
    pub(crate) released: bool,
    /// The worker was closed or freed: the run no longer exists.
    pub(crate) gone: bool,
    pub(crate) nodes: Vec<usize>,
    /// TensorMap model: (lo, hi, owner node).
    pub(crate) tmap: Vec<(u64, u64, usize)>,
    /// Entries dropped because their memory was reclaimed and handed out again (the
    /// engine may still hold them: used to name a mismatch).
    pub(crate) stale: Vec<(u64, u64, usize)>,
    pub(crate) done_seen: bool,
    pub(crate) checked: bool,
    /// Built by a dagrt_worker_run callback: never gated.
    pub(crate) no_gates: bool,
}

pub(crate) struct HeapBuf {
    pub(crate) ptr: u64,
    pub(crate) len: u64,
    pub(crate) run: usize,
    pub(crate) frame: usize,
    /// The node whose slab it lies in (the OUTPUT's task, or the alloc).
    pub(crate) node: usize,
}

pub(crate) struct Builder {
    pub(crate) ptr: *mut dagrt_args_t,
    pub(crate) tensors: Vec<Tensor>,
    pub(crate) scalars: Vec<u64>,
    pub(crate) deps: Vec<Dep>,
}

impl Builder {
    /// The model of a builder `dagrt_args_new` just returned: empty.
    pub(crate) fn new(ptr: *mut dagrt_args_t) -> Builder {
        Builder {
            ptr,
            tensors: Vec::new(),
            scalars: Vec::new(),
            deps: Vec::new(),
        }
    }
}

/// Process-wide callable registry model: (name, ns, kind) -> (executor, user, identity).
type RegKey = (String, u32, u32);
pub(crate) static REGISTRY: Mutex<BTreeMap<RegKey, (usize, usize, Callable)>> =
    Mutex::new(BTreeMap::new());

pub(crate) const NAMES: [&str; 5] = ["fz.a", "fz.b", "fz.c", "fz.orch", "fz.é"];
pub(crate) const NSS: [u32; 3] = [0, 1, 0xFFFF_FFFF];
pub(crate) const LANE_IDS: [i32; 9] = [0, 1, 2, 3, 5, 7, 17, 42, 1000];
pub(crate) const HOST_BASE: u64 = 0x0000_1000_0000_0000;
pub(crate) const HOST_BUFS: u64 = 6;
pub(crate) const HOST_LEN: u64 = 4096;
pub(crate) const HOST_STRIDE: u64 = 0x1_0000;

/// The executor and user pointer a name is bound to (so re-registration is idempotent).
pub(crate) fn binding(name: &str, ns: u32, kind: u32) -> (usize, usize) {
    let h = (name.len() as u32)
        .wrapping_add(ns.wrapping_mul(7))
        .wrapping_add(kind.wrapping_mul(3));
    ((h % 2) as usize, (h % 3) as usize)
}

#[derive(Debug)]
pub(crate) struct Abort;
pub(crate) type R<T = ()> = Result<T, Abort>;

pub(crate) struct Failure {
    pub(crate) sig: String,
    pub(crate) detail: String,
    pub(crate) seed: u64,
    pub(crate) log: Vec<String>,
}

#[derive(Default)]
pub(crate) struct Totals {
    pub(crate) seqs: u64,
    pub(crate) steps: u64,
    pub(crate) calls: u64,
    pub(crate) by_status: BTreeMap<&'static str, u64>,
    pub(crate) nodes: u64,
    pub(crate) ran: u64,
    /// dagrt_worker_close_for outcomes on initialised workers (closed = 0, closed = 1), and
    /// new runs refused while closing.
    pub(crate) close_for: [u64; 2],
    pub(crate) refused_closing: u64,
}

/// The liveness picture of one worker (indexed by node).
pub(crate) struct Live {
    /// Possibly unfinished while the gates stay closed.
    pub(crate) pb: Vec<bool>,
    /// Slot definitely not reclaimable during the next call.
    pub(crate) dl: Vec<bool>,
    /// Slot possibly never reclaimed while the gates stay closed.
    pub(crate) pl: Vec<bool>,
}

pub(crate) enum Pred {
    MustOk,
    MustFail,
    Maybe,
}
