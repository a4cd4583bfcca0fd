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
//! printed by a failure). The tests of this file take a common lock: on 2 cores, four workers
//! of spinning lanes competing with each other would only measure the machine.

use dagrt::callable::Callable;
use dagrt::error::Status;
use dagrt::orchestrator::{Orchestrator, SubmitKind};
use dagrt::slot::{state_name, COMPLETED, PENDING};
use dagrt::task::{
    dtype_size, CallConfig, DataType, Dep, DepKind, Tag, TaskArgs, TaskHandle, TaskView, Tensor,
};
use dagrt::worker::{Engine, Worker, WorkerConfig};
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

mod common;
use common::*;

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

// ---------------------------------------------------------------------------------------
// Executor and what it records

#[derive(Default)]
struct MemberRec {
    start: AtomicU64,
    end: AtomicU64,
    count: AtomicU32,
    worker: AtomicI32,
    slot: AtomicU64,
    run: AtomicU64,
    midx: AtomicU32,
    gsize: AtomicU32,
    thash: AtomicU64,
    cfg0: AtomicU64,
}

/// Per-run record, addressed by the executor through scalar 0.
struct RunRec {
    engine: Arc<Engine>,
    /// Executors wait here (after recording their start) until the run's graph is complete.
    gate_open: AtomicBool,
    recs: Vec<MemberRec>,
    /// Per node: slots that must be alive (same task, COMPLETED) while the node runs.
    alive: Vec<Mutex<Vec<u64>>>,
    errors: Mutex<Vec<String>>,
}

impl RunRec {
    fn new(engine: Arc<Engine>, gated: bool) -> RunRec {
        RunRec {
            engine,
            gate_open: AtomicBool::new(!gated),
            recs: (0..MAX_NODES * MAXM)
                .map(|_| MemberRec::default())
                .collect(),
            alive: (0..MAX_NODES).map(|_| Mutex::new(Vec::new())).collect(),
            errors: Mutex::new(Vec::new()),
        }
    }
    fn error(&self, msg: String) {
        self.errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(msg);
    }
}

fn hash_tensors(ts: &[Tensor]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ ts.len() as u64;
    for t in ts {
        let head = [t.data as u64, t.offset, t.ndim as u64, t.dtype as u64];
        for x in head.iter().chain(t.shape.iter()).chain(t.strides.iter()) {
            h = (h ^ x).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// The task executor: scalars are [RunRec address, node index, member index, spin].
unsafe extern "C" fn exec(task: *const TaskView, _user: *mut c_void) -> i32 {
    let start = SEQ.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the lane passes a view that is valid for the duration of this call.
    let v = unsafe { &*task };
    if v.num_scalars != 4 || v.scalars.is_null() {
        return 77;
    }
    // SAFETY: the view carries `num_scalars` scalars, valid during the call.
    let sc = unsafe { std::slice::from_raw_parts(v.scalars, 4) };
    // SAFETY: scalar 0 is the address of this run's RunRec, which the test frees only after
    // the run's fence reached zero (every executor of the run has returned), and leaks when a
    // run fails or hangs.
    let rr = unsafe { &*(sc[0] as *const RunRec) };
    let (node, m) = (sc[1] as usize, sc[2] as usize);
    if node >= MAX_NODES || m >= MAXM {
        return 78;
    }
    let r = &rr.recs[node * MAXM + m];
    r.start.store(start, Ordering::SeqCst);
    r.count.fetch_add(1, Ordering::SeqCst);
    r.worker.store(v.worker_id, Ordering::Relaxed);
    r.slot.store(v.slot, Ordering::Relaxed);
    r.run.store(v.run_id, Ordering::Relaxed);
    r.midx.store(v.member_index, Ordering::Relaxed);
    r.gsize.store(v.group_size, Ordering::Relaxed);
    let ts: &[Tensor] = if v.num_tensors == 0 || v.tensors.is_null() {
        &[]
    } else {
        // SAFETY: the view carries `num_tensors` tensors, valid during the call.
        unsafe { std::slice::from_raw_parts(v.tensors, v.num_tensors as usize) }
    };
    r.thash.store(hash_tensors(ts), Ordering::Relaxed);
    // SAFETY: `config` points at the slot's CallConfig for the duration of the call.
    let cfg0 = unsafe { v.config.as_ref() }.map_or(u64::MAX, |c| c.user[0]);
    r.cfg0.store(cfg0, Ordering::Relaxed);
    {
        let alive = rr.alive[node].lock().unwrap_or_else(|p| p.into_inner());
        for &p in alive.iter() {
            let s = rr.engine.slots.get(p);
            let id = s.core.sync.lock().unwrap_or_else(|x| x.into_inner()).id;
            let st = s.core.state();
            if id != p || st != COMPLETED {
                rr.error(format!(
                    "node n{node} member {m}: producer slot {p} that it retains is not alive \
                     while it runs (table entry holds task {id}, state {})",
                    state_name(st)
                ));
            }
        }
    }
    while !rr.gate_open.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    match sc[3] {
        0 => {}
        SPIN_YIELD => std::thread::yield_now(),
        n => {
            for _ in 0..n {
                std::hint::spin_loop();
            }
        }
    }
    r.end
        .store(SEQ.fetch_add(1, Ordering::SeqCst), Ordering::SeqCst);
    0
}

fn callable() -> Callable {
    static C: OnceLock<Callable> = OnceLock::new();
    *C.get_or_init(|| {
        dagrt::callable::register("tests.random_dags.exec", 7, 0, exec, std::ptr::null_mut())
            .expect("register the test executor")
    })
}

// ---------------------------------------------------------------------------------------
// Workers

struct Env {
    name: &'static str,
    worker: Worker,
    engine: Arc<Engine>,
    lanes: Lanes,
    /// Static buffers: three 8x8 column-major u64 matrices and three 16 x u64 flat buffers.
    statics: Vec<Vec<u64>>,
}

impl Env {
    fn new(name: &'static str, lanes: Lanes, cfg: WorkerConfig) -> Env {
        let mut worker = Worker::new(cfg).expect("Worker::new");
        for &id in &lanes.nl {
            worker.add_next_level_lane(id).expect("add_next_level_lane");
        }
        worker.add_sub_lanes(lanes.subs).expect("add_sub_lanes");
        worker.init().expect("init");
        let engine = worker.engine().expect("engine").clone();
        let statics = static_storage();
        Env {
            name,
            worker,
            engine,
            lanes,
            statics,
        }
    }

    fn orch(&self) -> MutexGuard<'_, Orchestrator> {
        self.worker
            .orchestrator()
            .expect("orchestrator")
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// After every run of this worker finished: nothing may be left behind.
    fn check_reclaimed(&self) -> Result<(), String> {
        let e = &self.engine;
        let mut errs = Vec::new();
        if e.slots.live() != 0 {
            errs.push(format!("{} slots still live", e.slots.live()));
        }
        if !e.tensormap.is_empty() {
            errs.push(format!("{} TensorMap entries left", e.tensormap.len()));
        }
        for (i, r) in e.heap.rings.iter().enumerate() {
            if r.top() != r.tail() {
                errs.push(format!(
                    "heap ring {i}: tail {} != top {}",
                    r.tail(),
                    r.top()
                ));
            }
        }
        let q = dagrt::scheduler::queued(e);
        if q != 0 {
            errs.push(format!("{q} slots still in ready queues"));
        }
        if !e.runs.is_empty() {
            errs.push(format!("{} runs still registered", e.runs.len()));
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "worker {}: not reclaimed after its runs finished: {}",
                self.name,
                errs.join("; ")
            ))
        }
    }
}

fn cfg(window: u32, timeout_ms: u32) -> WorkerConfig {
    WorkerConfig {
        heap_ring_size: 4 << 20,
        task_window: window,
        timeout_ms,
    }
}

// ---------------------------------------------------------------------------------------
// Reference model

struct Member {
    tensors: Vec<Tensor>,
    /// Buffer index per tensor (usize::MAX: auto-allocated OUTPUT).
    bufs: Vec<usize>,
    deps: Vec<Dep>,
    scalars: [u64; 4],
    hash: u64,
}

struct Node {
    kind: Kind,
    slot: u64,
    level: usize,
    frame_open: bool,
    members: Vec<Member>,
    /// Explicit deps: (node, retain).
    deps: Vec<(usize, bool)>,
    /// Required producers: node -> must be retained.
    req: BTreeMap<usize, bool>,
    cfg0: u64,
    /// For allocs: shape and dtype.
    alloc: Option<(Vec<u64>, u32)>,
}

// ---------------------------------------------------------------------------------------
// Building one run

#[derive(Clone, Copy, Default)]
struct Opts {
    /// Tiny task window: keep every slot held by an open scope within the last window-2 ids.
    tiny_window: Option<u64>,
    /// Allow gated runs (executors wait until the graph is complete).
    gating: bool,
    /// Allow the 64-deep scope excursion and the unbalanced-scope checks.
    scope_errors: bool,
}

#[derive(Default)]
struct Totals {
    runs: u64,
    gated: u64,
    nodes: u64,
    groups: u64,
    members: u64,
    allocs: u64,
    autos: u64,
    tensors: u64,
    edges: u64,
    wiring_checks: u64,
    alive_checks: u64,
    deep: u64,
    max_depth: usize,
    error_paths: u64,
}

struct Built {
    seed: u64,
    env_name: &'static str,
    lanes: Lanes,
    run_id: u64,
    gated: bool,
    nodes: Vec<Node>,
    ops: Vec<Op>,
    bufs: Vec<Buf>,
    /// From Box::into_raw; freed by `finish` once the run is done, leaked on failure.
    rr: *const RunRec,
}

struct Builder<'a> {
    rng: Rng,
    env: &'a Env,
    o: MutexGuard<'a, Orchestrator>,
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
}

fn status_of(r: Result<impl Sized, dagrt::error::Error>) -> Result<(), Status> {
    r.map(|_| ()).map_err(|e| e.status)
}

impl<'a> Builder<'a> {
    fn depth(&self) -> usize {
        self.frames.len()
    }

    fn scope_begin(&mut self) -> Result<(), String> {
        self.o
            .scope_begin()
            .map_err(|e| format!("scope_begin at depth {}: {e}", self.depth()))?;
        self.frames.push(Vec::new());
        self.ops.push(Op::Begin(self.depth()));
        self.totals.max_depth = self.totals.max_depth.max(self.depth());
        Ok(())
    }

    fn scope_end(&mut self) -> Result<(), String> {
        let d = self.depth();
        self.o
            .scope_end()
            .map_err(|e| format!("scope_end at depth {d}: {e}"))?;
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

    /// Tiny window: the slot of id `next - window` must be reclaimable without the
    /// orchestrator's help, so every slot an open scope holds must be recent.
    fn make_room(&mut self) -> Result<(), String> {
        let Some(w) = self.opts.tiny_window else {
            return Ok(());
        };
        if let Some(last) = self.last_slot {
            let next = last + 1;
            loop {
                let oldest = self
                    .frames
                    .iter()
                    .flatten()
                    .map(|&i| self.nodes[i].slot)
                    .min();
                match oldest {
                    Some(s) if s + w - 1 <= next => {
                        if self.depth() <= 1 {
                            return Err("tiny window: the outer scope holds a slot".into());
                        }
                        self.scope_end()?;
                    }
                    _ => break,
                }
            }
        }
        if self.depth() == 1 {
            self.scope_begin()?;
        }
        Ok(())
    }

    fn alive_bufs(&self) -> Vec<usize> {
        (0..self.bufs.len())
            .filter(|&i| self.bufs[i].alive)
            .collect()
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

    fn gen_member(&mut self, node: usize, m: usize) -> Member {
        let nt = self.rng.below(5) as usize;
        let mut tensors = Vec::with_capacity(nt);
        let mut bufs = Vec::with_capacity(nt);
        let alive = self.alive_bufs();
        for _ in 0..nt {
            let r = self.rng.below(100);
            if r >= 95 {
                // OUTPUT with a null data pointer: the runtime allocates it.
                let mut t = if self.rng.pct(50) {
                    tensor(0, 0, DataType::U64, &[8, 8], &[])
                } else {
                    tensor(0, 0, DataType::U64, &[16], &[])
                };
                t.tag = Tag::Output as u32;
                tensors.push(t);
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
            let mut t = gen_view(&mut self.rng, b);
            t.tag = tag as u32;
            tensors.push(t);
            bufs.push(bi);
        }
        let mut deps = Vec::new();
        if node > 0 && self.rng.pct(30) {
            for _ in 0..self.rng.range(1, 3) {
                // Biased to recent nodes, but any earlier node of the run can be named.
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
            scalars: [self.rr as *const RunRec as u64, node as u64, m as u64, spin],
            hash: 0,
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

    fn submit_task(&mut self) -> Result<(), String> {
        self.make_room()?;
        let idx = self.nodes.len();
        if idx >= MAX_NODES {
            return Err("generator produced too many nodes".into());
        }
        let kind = self.gen_kind();
        let n = match &kind {
            Kind::NlGroup(ids) => ids.len(),
            Kind::SubGroup(k) => *k,
            _ => 1,
        };
        let mut members: Vec<Member> = (0..n).map(|m| self.gen_member(idx, m)).collect();

        // Reference model: explicit deps first, then each tensor in submission order (a
        // lookup, then an insert), so the node's own earlier writes shadow older writers.
        let mut req: BTreeMap<usize, bool> = BTreeMap::new();
        let mut deps = Vec::new();
        for m in &members {
            for d in &m.deps {
                let p = self
                    .nodes
                    .iter()
                    .position(|x| x.slot == d.handle.slot)
                    .expect("dep");
                let retain = d.kind == DepKind::Retain as u32;
                deps.push((p, retain));
                *req.entry(p).or_insert(false) |= retain;
            }
        }
        for m in &members {
            for (t, &bi) in m.tensors.iter().zip(&m.bufs) {
                self.totals.tensors += 1;
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
        // A retained producer still held by an open scope is alive at submit, so the engine
        // must keep it alive until this node finishes.
        let alive: Vec<u64> = req
            .iter()
            .filter(|&(&p, &retain)| retain && self.nodes[p].frame_open)
            .map(|(&p, _)| self.nodes[p].slot)
            .collect();
        self.totals.alive_checks += alive.len() as u64;
        *self.rr.alive[idx].lock().unwrap_or_else(|p| p.into_inner()) = alive;

        let cfg0 = self.rng.next();
        let mut config = CallConfig {
            flags: self.rng.below(4) as u32,
            block_dim: self.rng.below(64) as u32,
            user: [0; 6],
        };
        config.user[0] = cfg0;
        let args: Vec<TaskArgs> = members
            .iter_mut()
            .map(|m| TaskArgs {
                tensors: m.tensors.as_mut_ptr(),
                num_tensors: m.tensors.len() as u32,
                num_scalars: 4,
                scalars: m.scalars.as_ptr(),
                deps: m.deps.as_ptr(),
                num_deps: m.deps.len() as u32,
                reserved: 0,
            })
            .collect();
        let (sk, workers): (SubmitKind, Vec<i32>) = match &kind {
            Kind::Nl(t) => (SubmitKind::NextLevel, vec![*t]),
            Kind::NlGroup(ids) => (SubmitKind::NextLevelGroup, ids.clone()),
            Kind::Sub => (SubmitKind::Sub, vec![]),
            Kind::SubGroup(_) => (SubmitKind::SubGroup, vec![]),
            Kind::Alloc => unreachable!(),
        };
        let h = self
            .o
            .submit(sk, &callable(), &args, &config, &workers)
            .map_err(|e| format!("submit of node n{idx} ({kind:?}) failed: {e}"))?;
        drop(args);
        if h.run_id != self.run_id {
            return Err(format!(
                "node n{idx}: handle names run {} instead of {}",
                h.run_id, self.run_id
            ));
        }
        self.last_slot = Some(h.slot);
        for (mi, m) in members.iter_mut().enumerate() {
            m.hash = hash_tensors(&m.tensors);
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
                let name = format!("O{idx}.{mi}.{ti}");
                self.new_buf(name, t.data as u64, len, layout, idx);
                m.bufs[ti] = self.bufs.len() - 1;
                self.totals.autos += 1;
            }
        }
        self.totals.nodes += 1;
        self.totals.members += n as u64;
        if matches!(kind, Kind::NlGroup(_) | Kind::SubGroup(_)) {
            self.totals.groups += 1;
        }
        self.totals.edges += req
            .keys()
            .filter(|&&p| !matches!(self.nodes[p].kind, Kind::Alloc))
            .count() as u64;
        self.nodes.push(Node {
            kind,
            slot: h.slot,
            level: self.depth(),
            frame_open: true,
            members,
            deps,
            req,
            cfg0,
            alloc: None,
        });
        self.frames.last_mut().expect("frame").push(idx);
        self.ops.push(Op::Node(idx));
        Ok(())
    }

    fn submit_alloc(&mut self) -> Result<(), String> {
        self.make_room()?;
        let idx = self.nodes.len();
        let (shape, dtype, layout): (Vec<u64>, DataType, Layout) = match self.rng.below(4) {
            0 => (vec![8, 8], DataType::U64, Layout::Mat8),
            1 => (vec![16], DataType::U64, Layout::Flat),
            2 => (vec![32], DataType::U32, Layout::Flat),
            _ => (vec![100], DataType::U8, Layout::Flat),
        };
        let (ptr, h) = self
            .o
            .alloc(&shape, dtype as u32)
            .map_err(|e| format!("alloc of node n{idx} failed: {e}"))?;
        if ptr.is_null() || (ptr as u64) % 1024 != 0 {
            return Err(format!(
                "alloc of node n{idx} returned {ptr:?}, not 1024-aligned"
            ));
        }
        if h.run_id != self.run_id {
            return Err(format!("alloc n{idx}: handle names run {}", h.run_id));
        }
        self.last_slot = Some(h.slot);
        let len = shape.iter().product::<u64>() * dtype_size(dtype as u32).expect("dtype");
        self.new_buf(format!("A{idx}"), ptr as u64, len, layout, idx);
        self.nodes.push(Node {
            kind: Kind::Alloc,
            slot: h.slot,
            level: self.depth(),
            frame_open: true,
            members: Vec::new(),
            deps: Vec::new(),
            req: BTreeMap::new(),
            cfg0: 0,
            alloc: Some((shape, dtype as u32)),
        });
        self.frames.last_mut().expect("frame").push(idx);
        self.ops.push(Op::Node(idx));
        self.totals.allocs += 1;
        Ok(())
    }

    /// Open every remaining level (64 nested scopes), check the 65th is refused, submit a
    /// task at the bottom, then come back.
    fn deep_excursion(&mut self) -> Result<(), String> {
        let back = self.depth();
        while self.depth() < 65 {
            self.scope_begin()?;
        }
        match status_of(self.o.scope_begin()) {
            Err(Status::ScopeTooDeep) => {}
            other => {
                return Err(format!(
                    "scope_begin beyond 64 nested scopes returned {other:?}, expected ScopeTooDeep"
                ))
            }
        }
        self.ops.push(Op::Note("65th nested scope refused".into()));
        self.submit_task()?;
        while self.depth() > back {
            self.scope_end()?;
        }
        self.totals.deep += 1;
        self.totals.error_paths += 1;
        Ok(())
    }

    /// Deterministic inference check of a gated run: nothing has finished yet, so every
    /// required producer that is a task must have the consumer wired on it.
    fn check_wiring(&mut self) -> Vec<String> {
        let e = &self.env.engine;
        let mut errs = Vec::new();
        for (ci, c) in self.nodes.iter().enumerate() {
            if matches!(c.kind, Kind::Alloc) {
                continue;
            }
            let mut any_task = false;
            for (&p, &retain) in &c.req {
                let pn = &self.nodes[p];
                if matches!(pn.kind, Kind::Alloc) {
                    continue;
                }
                any_task = true;
                self.totals.wiring_checks += 1;
                let s = e.slots.get(pn.slot);
                let g = s.core.sync.lock().unwrap_or_else(|x| x.into_inner());
                if g.id != pn.slot {
                    errs.push(format!(
                        "gated: producer n{p} (slot {}) is no longer in its slot (holds {}) before anything finished",
                        pn.slot, g.id
                    ));
                    continue;
                }
                match g.consumers.iter().find(|x| x.slot == c.slot) {
                    None => errs.push(format!(
                        "MISSED EDGE: n{ci} (slot {}) must wait for n{p} (slot {}) but is not among its consumers ({} consumers: {:?})",
                        c.slot, pn.slot, g.consumers.len(),
                        g.consumers.iter().map(|x| x.slot).collect::<Vec<_>>()
                    )),
                    Some(x) if retain && !x.retain => errs.push(format!(
                        "n{ci} (slot {}) is wired on n{p} (slot {}) without retaining it (tensor edge or add_dep)",
                        c.slot, pn.slot
                    )),
                    Some(_) => {}
                }
            }
            let st = e.slots.get(c.slot).core.state();
            if any_task && st != PENDING {
                errs.push(format!(
                    "n{ci} (slot {}) has unfinished required producers but is {}",
                    c.slot,
                    state_name(st)
                ));
            }
        }
        errs
    }
}

/// Build one random run on `env` and close its submission. A gated run's wiring is checked
/// before its gate opens. `foreign`: a handle of another run to try (and fail) a dep on.
fn build(
    env: &Env,
    seed: u64,
    opts: Opts,
    foreign: Option<TaskHandle>,
    totals: &mut Totals,
) -> Result<Built, Box<(String, Option<Built>)>> {
    let mut rng = Rng(seed);
    let gated = opts.gating && rng.pct(25);
    let rr = Box::into_raw(Box::new(RunRec::new(env.engine.clone(), gated)));
    // SAFETY: `rr` was just allocated; it is freed only by `finish` after the run is done.
    let rr_ref: &RunRec = unsafe { &*rr };
    let mut o = env.orch();
    if rng.pct(50) {
        // This run's start renumbers the worker's tasks from 1 if it finds it quiescent.
        o.ids_past_renumbering();
    }
    let run_id = match o.begin_run() {
        Ok(r) => r,
        Err(e) => return Err(Box::new((format!("begin_run: {e}"), None))),
    };
    let statics: Vec<Buf> = static_bufs(&env.statics);
    let mut b = Builder {
        rng,
        env,
        o,
        opts,
        run_id,
        bufs: statics,
        nodes: Vec::new(),
        frames: vec![Vec::new()],
        ops: Vec::new(),
        last_slot: None,
        rr: rr_ref,
        scratch: Vec::new(),
        totals,
    };
    let res = build_body(&mut b, foreign);
    let mut errs = match res {
        Ok(()) => Vec::new(),
        Err(e) => vec![e],
    };
    if errs.is_empty() && gated {
        errs = b.check_wiring();
        rr_ref.gate_open.store(true, Ordering::Release);
    }
    b.totals.runs += 1;
    b.totals.gated += gated as u64;
    let built = Built {
        seed,
        env_name: env.name,
        lanes: env.lanes.clone(),
        run_id,
        gated,
        nodes: b.nodes,
        ops: b.ops,
        bufs: b.bufs,
        rr,
    };
    if errs.is_empty() {
        Ok(built)
    } else {
        rr_ref.gate_open.store(true, Ordering::Release);
        Err(Box::new((errs.join("\n"), Some(built))))
    }
}

fn build_body(b: &mut Builder<'_>, foreign: Option<TaskHandle>) -> Result<(), String> {
    let n_ops = b.rng.range(10, 60);
    let deep_at = if b.opts.scope_errors && b.rng.pct(2) {
        Some(b.rng.below(n_ops))
    } else {
        None
    };
    let foreign_at = foreign.map(|h| (h, b.rng.below(n_ops)));
    let max_depth = if b.rng.pct(50) { 4 } else { 9 };
    for op in 0..n_ops {
        let r = b.rng.below(100);
        if r < 12 && b.depth() < max_depth {
            b.scope_begin()?;
        } else if r < 22 && b.depth() > 1 {
            b.scope_end()?;
        } else if r == 22 && b.depth() == 1 && b.opts.scope_errors {
            match status_of(b.o.scope_end()) {
                Err(Status::ScopeUnbalanced) => b.totals.error_paths += 1,
                other => {
                    return Err(format!(
                    "scope_end with no nested scope returned {other:?}, expected ScopeUnbalanced"
                ))
                }
            }
        }
        if deep_at == Some(op) {
            b.deep_excursion()?;
        }
        if let Some((h, at)) = foreign_at {
            if at == op {
                try_foreign_dep(b, h)?;
            }
        }
        if b.rng.pct(7) {
            b.submit_alloc()?;
        } else {
            b.submit_task()?;
        }
    }
    if b.depth() > 1 && b.opts.scope_errors && b.rng.pct(25) {
        match status_of(b.o.close_run_submission(b.run_id)) {
            Err(Status::ScopeUnbalanced) => b.totals.error_paths += 1,
            other => {
                return Err(format!(
                    "close with {} nested scopes open returned {other:?}, expected ScopeUnbalanced",
                    b.depth() - 1
                ))
            }
        }
        if b.o.current_run() != Some(b.run_id) {
            return Err("a refused close still closed the run".into());
        }
        b.ops
            .push(Op::Note("close refused: nested scopes open".into()));
    }
    while b.depth() > 1 {
        b.scope_end()?;
    }
    b.o.close_run_submission(b.run_id)
        .map_err(|e| format!("close_run_submission: {e}"))?;
    b.close_frame();
    Ok(())
}

/// A dep on a handle of another run (of this worker or another) must be refused before any
/// state changes; the run's own checks then catch anything it left behind.
fn try_foreign_dep(b: &mut Builder<'_>, h: TaskHandle) -> Result<(), String> {
    let dep = Dep {
        handle: h,
        kind: DepKind::Retain as u32,
        reserved: 0,
    };
    // If the engine wrongly accepted it, the task would run: give it a record no node uses.
    let scalars = [b.rr as *const RunRec as u64, MAX_NODES as u64 - 1, 0, 0];
    let args = TaskArgs {
        tensors: std::ptr::null_mut(),
        num_tensors: 0,
        num_scalars: 4,
        scalars: scalars.as_ptr(),
        deps: &dep,
        num_deps: 1,
        reserved: 0,
    };
    let r = b.o.submit(
        SubmitKind::Sub,
        &callable(),
        std::slice::from_ref(&args),
        &CallConfig::default(),
        &[],
    );
    match status_of(r) {
        Err(Status::ForeignHandle | Status::StaleHandle) => {
            b.totals.error_paths += 1;
            b.ops.push(Op::Note(format!(
                "dep on foreign handle {{run {}, slot {}}} refused",
                h.run_id, h.slot
            )));
            Ok(())
        }
        other => Err(format!(
            "a dep on handle {{run {}, slot {}}} of another run returned {other:?}, expected ForeignHandle/StaleHandle",
            h.run_id, h.slot
        )),
    }
}

// ---------------------------------------------------------------------------------------
// Finishing a run: wait, then check everything against the model.

fn describe_tensor(t: &Tensor, bufs: &[Buf], bi: usize) -> String {
    let nd = t.ndim as usize;
    let name = if bi == usize::MAX {
        "auto".to_string()
    } else {
        bufs[bi].name.clone()
    };
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
        "--- run seed {:#x} on worker {} (lanes {:?}), run id {}, gated {}; replay with DAGRT_STRESS_ONLY={:#x}",
        b.seed, b.env_name, b.lanes, b.run_id, b.gated, b.seed
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
                        "n{i} slot {} = alloc(shape {shape:?}, dtype {dtype}) at depth {} -> buffer A{i}",
                        n.slot, n.level
                    );
                    continue;
                }
                let _ = writeln!(
                    s,
                    "n{i} slot {} = {:?} at depth {}; deps {:?}; required {:?}",
                    n.slot,
                    n.kind,
                    n.level,
                    n.deps
                        .iter()
                        .map(|&(p, r)| format!(
                            "{}(n{p})",
                            if r { "add_dep" } else { "add_dep_wait" }
                        ))
                        .collect::<Vec<_>>(),
                    n.req
                        .iter()
                        .map(|(&p, &r)| format!("n{p}{}", if r { "" } else { "(wait)" }))
                        .collect::<Vec<_>>()
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
    s
}

/// Wait for the run and check it. On success the RunRec is freed; on failure it is leaked
/// (a lane may still be running one of the run's tasks).
fn finish(env: &Env, b: &Built) -> Result<(), String> {
    let e = &env.engine;
    let run = e
        .runs
        .get(b.run_id)
        .ok_or_else(|| format!("run {} is not registered", b.run_id))?;
    if !run.wait(Some(RUN_TIMEOUT)) {
        let mut states = Vec::new();
        for (i, n) in b.nodes.iter().enumerate() {
            let st = e.slots.get(n.slot).core.state();
            let id = e
                .slots
                .get(n.slot)
                .core
                .sync
                .lock()
                .unwrap_or_else(|x| x.into_inner())
                .id;
            if id == n.slot {
                states.push(format!("n{i}:{}", state_name(st)));
            }
        }
        return Err(format!(
            "HANG: run did not finish within {RUN_TIMEOUT:?}; live slots {}, nodes still in their slots: {}",
            e.slots.live(),
            states.join(" ")
        ));
    }
    // SAFETY: the run's fence is zero: every slot was consumed, so every executor of the run
    // has returned and no lane reads the RunRec any more.
    let rr = unsafe { &*b.rr };
    let mut errs = rr.errors.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if let Err(m) = run.result() {
        errs.push(format!("run failed: {m:?}"));
    }
    let tasks = b
        .nodes
        .iter()
        .filter(|n| !matches!(n.kind, Kind::Alloc))
        .count() as u64;
    let c = run.counts();
    if c.completed != tasks || c.failed != 0 || c.cancelled != 0 {
        errs.push(format!(
            "run counts {c:?}, expected {tasks} completed and nothing failed or cancelled"
        ));
    }
    // Per node: every member ran exactly once, where and with what it should.
    let mut span = vec![(0u64, 0u64); b.nodes.len()];
    let mut per_lane: BTreeMap<i32, Vec<(u64, u64, usize, usize)>> = BTreeMap::new();
    let subs = env.lanes.subs as i32;
    for (i, n) in b.nodes.iter().enumerate() {
        for m in 0..MAXM {
            let r = &rr.recs[i * MAXM + m];
            let count = r.count.load(Ordering::SeqCst);
            if m >= n.members.len() {
                if count != 0 {
                    errs.push(format!(
                        "n{i}: member {m} ran {count} times but the node has {} members",
                        n.members.len()
                    ));
                }
                continue;
            }
            if count != 1 {
                errs.push(format!(
                    "n{i} ({:?}) member {m} ran {count} times, expected exactly once",
                    n.kind
                ));
                continue;
            }
            let (s0, e0) = (r.start.load(Ordering::SeqCst), r.end.load(Ordering::SeqCst));
            span[i] = if m == 0 {
                (s0, e0)
            } else {
                (span[i].0.min(s0), span[i].1.max(e0))
            };
            let w = r.worker.load(Ordering::Relaxed);
            per_lane.entry(w).or_default().push((s0, e0, i, m));
            let expect_w = match &n.kind {
                Kind::Nl(t) => Some(*t),
                Kind::NlGroup(ids) => Some(ids[m]),
                _ => None,
            };
            match expect_w {
                Some(t) if w != t => errs.push(format!(
                    "n{i} member {m} ran on worker {w}, its target is {t}"
                )),
                None if !(-subs..=-1).contains(&w) => errs.push(format!(
                    "n{i} member {m} (SUB) ran on worker id {w}, not a SUB lane"
                )),
                _ => {}
            }
            let checks = [
                ("slot", r.slot.load(Ordering::Relaxed), n.slot),
                ("run id", r.run.load(Ordering::Relaxed), b.run_id),
                (
                    "member index",
                    r.midx.load(Ordering::Relaxed) as u64,
                    m as u64,
                ),
                (
                    "group size",
                    r.gsize.load(Ordering::Relaxed) as u64,
                    n.members.len() as u64,
                ),
                (
                    "tensor hash",
                    r.thash.load(Ordering::Relaxed),
                    n.members[m].hash,
                ),
                ("config.user[0]", r.cfg0.load(Ordering::Relaxed), n.cfg0),
            ];
            for (what, got, want) in checks {
                if got != want {
                    errs.push(format!(
                        "n{i} member {m}: executor saw {what} {got:#x}, expected {want:#x}"
                    ));
                }
            }
        }
        if let Kind::SubGroup(k) = n.kind {
            let mut ws: Vec<i32> = (0..k)
                .map(|m| rr.recs[i * MAXM + m].worker.load(Ordering::Relaxed))
                .collect();
            ws.sort_unstable();
            ws.dedup();
            if ws.len() != k {
                errs.push(format!(
                    "n{i}: SUB group of {k} members ran on lanes {ws:?}, not {k} distinct lanes"
                ));
            }
        }
    }
    // A lane runs one job at a time.
    for (w, v) in per_lane.iter_mut() {
        v.sort_unstable();
        for x in v.windows(2) {
            if x[0].1 >= x[1].0 {
                errs.push(format!(
                    "lane {w} ran n{} member {} [{}..{}] and n{} member {} [{}..{}] at the same time",
                    x[0].2, x[0].3, x[0].0, x[0].1, x[1].2, x[1].3, x[1].0, x[1].1
                ));
            }
        }
    }
    // Ordering: every required producer ended before any member of the consumer started.
    if errs.is_empty() {
        for (ci, c) in b.nodes.iter().enumerate() {
            for &p in c.req.keys() {
                if matches!(b.nodes[p].kind, Kind::Alloc) {
                    continue;
                }
                if span[p].1 >= span[ci].0 {
                    errs.push(format!(
                        "ORDER VIOLATION: n{ci} (slot {}) started at seq {} but its required producer n{p} (slot {}) ended at seq {} (started {})",
                        c.slot, span[ci].0, b.nodes[p].slot, span[p].1, span[p].0
                    ));
                }
            }
        }
    }
    e.runs.remove_done(b.run_id);
    if errs.is_empty() {
        // SAFETY: allocated by Box::into_raw in `build`; no executor of the run is left (see
        // above) and `b.rr` is not used after this.
        drop(unsafe { Box::from_raw(b.rr as *mut RunRec) });
        Ok(())
    } else {
        errs.truncate(25);
        Err(errs.join("\n"))
    }
}

fn fail(what: &str, msg: &str, built: Option<&Built>, envs: Vec<Env>) -> ! {
    let d = built.map(dump).unwrap_or_default();
    // Leak the workers: dropping them would wait for a run that may never finish.
    std::mem::forget(envs);
    panic!("{what}: {msg}\n{d}");
}

fn report(what: &str, t: &Totals, t0: Instant) {
    println!(
        "{what}: {} runs ({} gated) in {:.2?}: {} nodes ({} groups, {} members), {} allocs, {} auto OUTPUT buffers, {} tensors, {} required producer edges checked by order, {} by wiring, {} retained-alive checks, {} 64-deep excursions, max scope depth {}, {} error paths",
        t.runs, t.gated, t0.elapsed(), t.nodes, t.groups, t.members, t.allocs, t.autos, t.tensors,
        t.edges, t.wiring_checks, t.alive_checks, t.deep, t.max_depth, t.error_paths
    );
}

// ---------------------------------------------------------------------------------------
// Tests

/// One worker (NEXT_LEVEL lanes 3, 17, 42 and 2 SUB lanes), DAGRT_STRESS_RUNS runs.
#[test]
fn random_dags_single_worker() {
    let _g = serial();
    let t0 = Instant::now();
    let env = Env::new("A", lanes_a(), cfg(16384, 10_000));
    let opts = Opts {
        tiny_window: None,
        gating: true,
        scope_errors: true,
    };
    let mut t = Totals::default();
    for seed in run_seeds(1, stress_runs()) {
        let b = match build(&env, seed, opts, None, &mut t) {
            Ok(b) => b,
            Err(x) => fail("random_dags_single_worker", &x.0, x.1.as_ref(), vec![env]),
        };
        if let Err(m) = finish(&env, &b) {
            fail("random_dags_single_worker", &m, Some(&b), vec![env]);
        }
        if let Err(m) = env.check_reclaimed() {
            fail("random_dags_single_worker", &m, Some(&b), vec![env]);
        }
    }
    report("random_dags_single_worker", &t, t0);
}

/// Three workers with different lanes; each round builds 2-5 runs on randomly chosen
/// workers (a worker may have two runs in flight, and one run builds while the others
/// execute), then waits for all of them. Now and then a submit names a handle of another run
/// in flight (same or other worker) or of a released run, and must be refused.
#[test]
fn random_dags_alternating_workers() {
    let _g = serial();
    let t0 = Instant::now();
    let envs = vec![
        Env::new("A", lanes_a(), cfg(16384, 10_000)),
        Env::new(
            "B",
            Lanes {
                nl: vec![5, 9],
                subs: 3,
            },
            cfg(16384, 10_000),
        ),
        Env::new(
            "C",
            Lanes {
                nl: vec![1],
                subs: 1,
            },
            cfg(16384, 10_000),
        ),
    ];
    let opts = Opts {
        tiny_window: None,
        gating: true,
        scope_errors: true,
    };
    let mut t = Totals::default();
    let seeds = run_seeds(2, (stress_runs() / 2).max(1));
    let mut rng = Rng(base_seed() ^ 0x77);
    let mut old_handle: Option<TaskHandle> = None;
    let mut i = 0;
    while i < seeds.len() {
        let k = rng.range(2, 5) as usize;
        let mut inflight: Vec<(usize, Built)> = Vec::new();
        for &seed in seeds.iter().skip(i).take(k) {
            let w = (seed % envs.len() as u64) as usize;
            let foreign = if rng.pct(10) {
                let cands: Vec<TaskHandle> = inflight
                    .iter()
                    .filter_map(|(_, b)| {
                        b.nodes.first().map(|n| TaskHandle {
                            run_id: b.run_id,
                            slot: n.slot,
                        })
                    })
                    .chain(old_handle)
                    .collect();
                (!cands.is_empty()).then(|| cands[rng.below(cands.len() as u64) as usize])
            } else {
                None
            };
            match build(&envs[w], seed, opts, foreign, &mut t) {
                Ok(b) => inflight.push((w, b)),
                Err(x) => fail("random_dags_alternating_workers", &x.0, x.1.as_ref(), envs),
            }
        }
        i += k;
        for (w, b) in &inflight {
            if let Err(m) = finish(&envs[*w], b) {
                fail("random_dags_alternating_workers", &m, Some(b), envs);
            }
        }
        let leftover = envs.iter().find_map(|env| env.check_reclaimed().err());
        if let Some(m) = leftover {
            let b = inflight.last().map(|x| &x.1);
            fail("random_dags_alternating_workers", &m, b, envs);
        }
        if let Some((_, b)) = inflight.last() {
            if let Some(n) = b.nodes.first() {
                old_handle = Some(TaskHandle {
                    run_id: b.run_id,
                    slot: n.slot,
                });
            }
        }
    }
    report("random_dags_alternating_workers", &t, t0);
}

/// A task window of 8 slots: submits block on back-pressure all the time. Every slot held by
/// an open scope is kept among the last 6 ids (the generator ends scopes to keep it so), so
/// the slot a claim waits for is always one the engine can reclaim on its own.
#[test]
fn random_dags_tiny_window() {
    let _g = serial();
    let t0 = Instant::now();
    let env = Env::new("T", lanes_a(), cfg(8, 5_000));
    let opts = Opts {
        tiny_window: Some(8),
        gating: false,
        scope_errors: false,
    };
    let mut t = Totals::default();
    for seed in run_seeds(3, (stress_runs() / 4).max(1)) {
        let b = match build(&env, seed, opts, None, &mut t) {
            Ok(b) => b,
            Err(x) => fail("random_dags_tiny_window", &x.0, x.1.as_ref(), vec![env]),
        };
        if let Err(m) = finish(&env, &b) {
            fail("random_dags_tiny_window", &m, Some(&b), vec![env]);
        }
        if let Err(m) = env.check_reclaimed() {
            fail("random_dags_tiny_window", &m, Some(&b), vec![env]);
        }
    }
    report("random_dags_tiny_window", &t, t0);
}

/// Submit `writer` (blocked at a closed gate) then `reader` on the same static buffer and
/// report whether the reader was wired to wait for the writer, as the reference model says
/// it must (the two views share at least one byte).
fn wired_after(env: &Env, writer: Tensor, reader: Tensor) -> Result<bool, String> {
    let mut bytes_w = Vec::new();
    let mut bytes_r = Vec::new();
    view_bytes(&writer, writer.data as u64, &mut bytes_w);
    view_bytes(&reader, reader.data as u64, &mut bytes_r);
    if !bytes_r.iter().any(|x| bytes_w.contains(x)) {
        return Err("test setup: the views share no byte".into());
    }
    let rr = Box::into_raw(Box::new(RunRec::new(env.engine.clone(), true)));
    // SAFETY: just allocated; freed below after the run finished (leaked on error paths).
    let rr_ref = unsafe { &*rr };
    let mut o = env.orch();
    let run = o.begin_run().map_err(|e| e.to_string())?;
    let mut handles = Vec::new();
    for (i, mut t) in [writer, reader].into_iter().enumerate() {
        let scalars = [rr as u64, i as u64, 0, 0];
        let args = TaskArgs {
            tensors: &mut t,
            num_tensors: 1,
            num_scalars: 4,
            scalars: scalars.as_ptr(),
            deps: std::ptr::null(),
            num_deps: 0,
            reserved: 0,
        };
        let h = o
            .submit(
                SubmitKind::Sub,
                &callable(),
                std::slice::from_ref(&args),
                &CallConfig::default(),
                &[],
            )
            .map_err(|e| e.to_string())?;
        handles.push(h);
    }
    o.close_run_submission(run).map_err(|e| e.to_string())?;
    drop(o);
    let e = &env.engine;
    let wired = {
        let g = e
            .slots
            .get(handles[0].slot)
            .core
            .sync
            .lock()
            .unwrap_or_else(|x| x.into_inner());
        g.consumers.iter().any(|x| x.slot == handles[1].slot)
    };
    let reader_state = e.slots.get(handles[1].slot).core.state();
    rr_ref.gate_open.store(true, Ordering::Release);
    let r = e.runs.get(run).ok_or("run vanished")?;
    if !r.wait(Some(RUN_TIMEOUT)) {
        return Err("run hung".into());
    }
    e.runs.remove_done(run);
    // SAFETY: the run is done: no executor reads the RunRec any more.
    drop(unsafe { Box::from_raw(rr) });
    env.check_reclaimed()?;
    Ok(wired && reader_state == PENDING)
}

/// Regression for a missed edge found by the random test (seed 0x757ae5f1d541298c): a view
/// with two dimensions of the same stride (a sliding window) touches bytes its footprint did
/// not account for, so a reader of those bytes was not ordered after the writer.
#[test]
fn views_with_repeated_strides_are_tracked() {
    let _g = serial();
    let env = Env::new("R", lanes_a(), cfg(64, 5_000));
    let base = env.statics[3].as_ptr() as u64;
    let cases = [
        // u8 shape [2,2] strides [1,1] touches bytes 0,1,2; the reader reads byte 2.
        (
            tensor(base, 0, DataType::U8, &[2, 2], &[1, 1]),
            tensor(base, 2, DataType::U8, &[], &[]),
        ),
        // u64 shape [4,4] strides [1,1]: elements 0..=6; the reader reads element 6.
        (
            tensor(base, 0, DataType::U64, &[4, 4], &[1, 1]),
            tensor(base, 48, DataType::U64, &[], &[]),
        ),
        // the case of the random seed: u8 [3,4] strides [1,1] at 59 (bytes 59..=64) vs a u16
        // read of bytes 64,65,82,83.
        (
            tensor(base, 59, DataType::U8, &[3, 4], &[1, 1]),
            tensor(base, 64, DataType::U16, &[2], &[9]),
        ),
        // A plain 4x4 tile of a column-major u8 matrix (ld 16): its unit-stride dimension has
        // byte stride 1, like the element itself; the reader reads element (2, 0).
        (
            tensor(base, 0, DataType::U8, &[4, 4], &[1, 16]),
            tensor(base, 2, DataType::U8, &[], &[]),
        ),
        // Seed 0xf5392ce3dcc3fa3f: u8 [3,3] strides [9,1] at 64 writes byte 84; a u32 INOUT of
        // bytes 84..88 was not ordered after it.
        (
            tensor(base, 64, DataType::U8, &[3, 3], &[9, 1]),
            tensor(base, 84, DataType::U32, &[], &[]),
        ),
    ];
    let mut bad = Vec::new();
    for (i, (mut w, mut r)) in cases.into_iter().enumerate() {
        w.tag = Tag::OutputExisting as u32;
        r.tag = Tag::Input as u32;
        match wired_after(&env, w, r) {
            Ok(true) => {}
            Ok(false) => bad.push(format!(
                "case {i}: reader {} not ordered after writer {}",
                describe_tensor(&r, &[], usize::MAX),
                describe_tensor(&w, &[], usize::MAX)
            )),
            Err(m) => fail(
                "views_with_repeated_strides_are_tracked",
                &m,
                None,
                vec![env],
            ),
        }
    }
    assert!(bad.is_empty(), "MISSED EDGES:\n{}", bad.join("\n"));
}

/// One long-lived slot (an alloc() buffer in the run's outer scope, the common "scratch
/// buffer, then scoped loops" pattern) must not block the task window once `window` more
/// tasks were submitted, when those tasks are all reclaimable: a window of 8 with at most
/// 3 slots live must keep accepting submits.
#[test]
fn task_window_not_blocked_by_one_long_lived_slot() {
    let _g = serial();
    let env = Env::new("H", lanes_a(), cfg(8, 2_000));
    let rr = Box::into_raw(Box::new(RunRec::new(env.engine.clone(), false)));
    let mut o = env.orch();
    let run = o.begin_run().expect("begin_run");
    let (buf, ah) = o.alloc(&[16], DataType::U64 as u32).expect("alloc");
    let mut failure = None;
    let n = 24;
    for i in 0..n {
        o.scope_begin().expect("scope_begin");
        let mut t = tensor(buf as u64, 0, DataType::U64, &[16], &[]);
        t.tag = Tag::Input as u32;
        let scalars = [rr as u64, i as u64, 0, 0];
        let args = TaskArgs {
            tensors: &mut t,
            num_tensors: 1,
            num_scalars: 4,
            scalars: scalars.as_ptr(),
            deps: std::ptr::null(),
            num_deps: 0,
            reserved: 0,
        };
        let r = o.submit(
            SubmitKind::Sub,
            &callable(),
            std::slice::from_ref(&args),
            &CallConfig::default(),
            &[],
        );
        o.scope_end().expect("scope_end");
        if let Err(e) = r {
            failure = Some(format!(
                "submit {i} (alloc slot {}, window 8) failed after waiting 2 s, with {} slot(s) \
                 live when it gave up: {e}",
                ah.slot,
                env.engine.slots.live()
            ));
            break;
        }
    }
    o.close_run_submission(run).expect("close");
    drop(o);
    let r = env.engine.runs.get(run).expect("run");
    assert!(r.wait(Some(RUN_TIMEOUT)), "run hung");
    env.engine.runs.remove_done(run);
    // SAFETY: the run is done: no executor reads the RunRec any more.
    drop(unsafe { Box::from_raw(rr) });
    env.check_reclaimed().expect("reclaimed");
    if let Some(m) = failure {
        panic!("{m}");
    }
}
