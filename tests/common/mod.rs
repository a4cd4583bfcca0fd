//! Pieces shared by the integration tests (`random_dags/`, `fault_injection/`,
//! `first_failure.rs`, `doorbell.rs`, `reclaim_batch.rs`, `sub_placement*.rs`): the RNG, run
//! settings, lanes, a started worker with one callable, buffers, tensors, generators of strided
//! tensor views, a bounded wait, and (`gated`) tasks that record their lane and can be held on
//! a gate. Each test binary compiles its own copy; not every binary uses every item.
#![allow(dead_code, unused_imports)]

pub mod gated;

use dagrt::callable::Callable;
use dagrt::error::Status;
use dagrt::orchestrator::{Orchestrator, SubmitKind};
use dagrt::slot::{state_name, COMPLETED, PENDING};
use dagrt::task::{
    CallConfig, DataType, Dep, DepKind, Tag, TaskArgs, TaskHandle, TaskView, Tensor,
    MAX_TENSOR_DIMS,
};
use dagrt::worker::{Engine, Worker, WorkerConfig};
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

pub const DEFAULT_RUNS: u64 = 4000;

/// Members per node at most (NEXT_LEVEL groups use up to 3 lanes, SUB groups up to 3).
pub const MAXM: usize = 4;

/// Bound on a run's execution before it is reported as hung.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(30);

pub fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// The tests of this file run one at a time (see the module doc).
pub fn serial() -> MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    lock(&L)
}

/// Poll `cond` until it holds; after `within`, an error naming `what`. It spins for the
/// first few thousand looks, then yields its core at each look: a task held at a gate, or
/// the test thread waiting for one to start, must not keep a core from the threads under
/// test (there are 2).
pub fn wait_for(
    what: &str,
    within: Duration,
    mut cond: impl FnMut() -> bool,
) -> Result<(), String> {
    let deadline = Instant::now() + within;
    let mut looks = 0u32;
    while !cond() {
        looks = looks.saturating_add(1);
        if looks < 4096 {
            std::hint::spin_loop();
            continue;
        }
        if Instant::now() > deadline {
            return Err(format!("timed out after {within:?} waiting for {what}"));
        }
        std::thread::yield_now();
    }
    Ok(())
}

/// Lock `m`, ignoring poisoning (a failed check panics while the data stays consistent).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Clone)]
pub struct Rng(pub u64);

/// splitmix64.
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Uniform in lo..=hi.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    pub fn pct(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}

/// Global sequence: every executor start and end takes one number.
pub static SEQ: AtomicU64 = AtomicU64::new(1);

/// Spin value meaning "yield the core once instead of spinning".
pub const SPIN_YIELD: u64 = u64::MAX;

/// An executor's busy time (scalar 3, see `gen_spin`): `n` spin rounds, or one yield.
pub fn spin(n: u64) {
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

#[derive(Clone, Debug)]
pub struct Lanes {
    pub nl: Vec<i32>,
    pub subs: u32,
}

pub fn lanes_a() -> Lanes {
    Lanes {
        nl: vec![3, 17, 42],
        subs: 2,
    }
}

/// A started worker (through the Rust API) with the NEXT_LEVEL and SUB lanes of `lanes`, and
/// its engine.
pub fn started_worker(cfg: WorkerConfig, lanes: &Lanes) -> (Worker, Arc<Engine>) {
    let mut worker = Worker::new(cfg).expect("Worker::new");
    for &id in &lanes.nl {
        worker.add_next_level_lane(id).expect("add_next_level_lane");
    }
    worker.add_sub_lanes(lanes.subs).expect("add_sub_lanes");
    worker.init().expect("init");
    let engine = worker.engine().expect("engine").clone();
    (worker, engine)
}

pub fn tensor(base: u64, offset: u64, dtype: DataType, shape: &[u64], strides: &[u64]) -> Tensor {
    Tensor::strided(base as *mut c_void, offset, dtype, shape, strides, 0)
}

/// A started worker with `subs` SUB lanes, and `exec` registered as task callable `name`.
pub fn sub_worker(
    cfg: WorkerConfig,
    subs: u32,
    name: &str,
    exec: dagrt::callable::Executor,
) -> (Worker, Callable) {
    let mut w = Worker::new(cfg).unwrap();
    w.add_sub_lanes(subs).unwrap();
    w.init().unwrap();
    let c = dagrt::callable::register(
        name,
        7,
        dagrt::callable::CallableKind::Task as u32,
        exec,
        std::ptr::null_mut(),
    )
    .unwrap();
    (w, c)
}

/// The model's own element sizes (the header's `dagrt_dtype` list), not the engine's table:
/// a wrong size there must show up as a missed or extra dependency.
const DTYPE_SIZES: [(DataType, u64); 13] = {
    use DataType::*;
    [
        (U8, 1),
        (I8, 1),
        (Bool, 1),
        (U16, 2),
        (I16, 2),
        (F16, 2),
        (Bf16, 2),
        (U32, 4),
        (I32, 4),
        (F32, 4),
        (U64, 8),
        (I64, 8),
        (F64, 8),
    ]
};

/// Element size of `dtype` in the model (None: not a dtype).
pub fn elem_size(dtype: u32) -> Option<u64> {
    DTYPE_SIZES
        .iter()
        .find(|(d, _)| *d as u32 == dtype)
        .map(|&(_, s)| s)
}

/// One of the dtypes of element size `es`, by `pick` (any number): the generators use them
/// all.
pub fn dtype_of(es: u64, pick: u64) -> DataType {
    let of: Vec<DataType> = DTYPE_SIZES
        .iter()
        .filter(|&&(_, s)| s == es)
        .map(|&(d, _)| d)
        .collect();
    of[(pick % of.len() as u64) as usize]
}

/// The model's own tag semantics (Orchestrator seed: INPUT and INOUT look up their
/// producers; OUTPUT, INOUT and OUTPUT_EXISTING become the producer), not `Tag`'s methods.
pub fn model_looks_up(tag: Tag) -> bool {
    matches!(tag, Tag::Input | Tag::Inout)
}
pub fn model_inserts(tag: Tag) -> bool {
    matches!(tag, Tag::Output | Tag::Inout | Tag::OutputExisting)
}

/// Highest byte (exclusive) a view reaches, relative to its data pointer.
pub fn view_reach(t: &Tensor) -> u64 {
    let mut v = Vec::new();
    view_bytes(t, t.data as u64, &mut v);
    v.iter().max().map_or(0, |m| m + 1)
}

/// Any strided view inside `len` bytes: random element size, 1-3 dims, strides 0..=11
/// (occasionally a zero extent or a broadcast stride 0).
pub fn gen_generic(rng: &mut Rng, base: u64, len: u64) -> Tensor {
    for _ in 0..32 {
        let es = [1u64, 2, 4, 8][rng.below(4) as usize];
        if es > len {
            continue;
        }
        let nd = rng.range(1, 3) as usize;
        let mut shape = [0u64; 3];
        let mut strides = [0u64; 3];
        for k in 0..nd {
            shape[k] = if rng.pct(2) { 0 } else { rng.range(1, 4) };
            strides[k] = if rng.pct(3) { 0 } else { rng.range(1, 11) };
        }
        let offset = rng.below(len / es) * es;
        let t = tensor(
            base,
            offset,
            dtype_of(es, rng.below(12)),
            &shape[..nd],
            &strides[..nd],
        );
        if view_reach(&t) <= len {
            return t;
        }
    }
    tensor(base, 0, DataType::U8, &[len], &[])
}

pub fn gen_mat_view(rng: &mut Rng, base: u64) -> Tensor {
    let u = DataType::U64;
    let at = |r: u64, c: u64| (r + 8 * c) * 8;
    match rng.below(15) {
        0 => tensor(base, 0, u, &[8, 8], &[]),
        1 => tensor(base, 0, u, &[64], &[1]),
        2..=4 => {
            let (r0, c0) = (4 * rng.below(2), 4 * rng.below(2));
            tensor(base, at(r0, c0), u, &[4, 4], &[1, 8])
        }
        5 | 6 => {
            let (h, w) = (rng.range(1, 8), rng.range(1, 8));
            let (r0, c0) = (rng.below(9 - h), rng.below(9 - w));
            tensor(base, at(r0, c0), u, &[h, w], &[1, 8])
        }
        7 => {
            let c = rng.below(8);
            if rng.pct(50) {
                tensor(base, at(0, c), u, &[8], &[1])
            } else {
                tensor(base, at(0, c), u, &[8], &[])
            }
        }
        8 => tensor(base, at(rng.below(8), 0), u, &[8], &[8]),
        9 => {
            let (h, w) = (rng.range(1, 8), rng.range(1, 8));
            let (r0, c0) = (rng.below(9 - h), rng.below(9 - w));
            tensor(base, at(r0, c0), u, &[w, h], &[8, 1])
        }
        10 => {
            if rng.pct(50) {
                tensor(base, 0, u, &[8], &[9])
            } else {
                tensor(base, at(7, 0), u, &[8], &[7])
            }
        }
        11 => tensor(base, at(rng.below(8), rng.below(8)), u, &[], &[]),
        12 => {
            let (a, b) = (rng.range(1, 4), rng.range(1, 4));
            let (r0, c0) = (rng.below(8 - 2 * (a - 1)), rng.below(8 - 2 * (b - 1)));
            tensor(base, at(r0, c0), u, &[a, b], &[2, 16])
        }
        13 => {
            let (r0, c0) = (rng.below(7), rng.below(3));
            tensor(base, at(r0, c0), u, &[2, 2, 2], &[1, 8, 32])
        }
        _ => {
            if rng.pct(50) {
                let c0 = rng.below(8);
                let k = rng.range(1, 8 - c0);
                tensor(base, at(0, c0), u, &[8, k], &[1, 8])
            } else {
                gen_generic(rng, base, 512)
            }
        }
    }
}

/// Elements of a `Layout::Mat32` buffer.
pub const MAT32_ELEMS: usize = 32 * 32;

/// The static buffers of a random run: three 8x8 matrices, three flat buffers, two 32x32
/// matrices (name, layout, u64 elements).
pub fn static_buffers() -> Vec<(String, Layout, usize)> {
    (0..8)
        .map(|i| match i {
            0..=2 => (format!("M{i}"), Layout::Mat8, 64),
            3..=5 => (format!("F{}", i - 3), Layout::Flat, 16),
            _ => (format!("B{}", i - 6), Layout::Mat32, MAT32_ELEMS),
        })
        .collect()
}

/// Zeroed storage for `static_buffers()`, one vector each (a test environment keeps it).
pub fn static_storage() -> Vec<Vec<u64>> {
    static_buffers()
        .into_iter()
        .map(|(_, _, n)| vec![0u64; n])
        .collect()
}

/// The model's records of `static_storage()`'s buffers at the start of a run.
pub fn static_bufs(storage: &[Vec<u64>]) -> Vec<Buf> {
    storage
        .iter()
        .zip(static_buffers())
        .map(|(v, (name, layout, _))| Buf {
            name,
            base: v.as_ptr() as u64,
            len: v.len() as u64 * 8,
            layout,
            level: 0,
            alive: true,
            last: vec![0; v.len() * 8],
            owner: None,
        })
        .collect()
}

/// A random view of buffer `b`, by its layout.
pub fn gen_view(rng: &mut Rng, b: &Buf) -> Tensor {
    match b.layout {
        Layout::Mat8 => gen_mat_view(rng, b.base),
        Layout::Mat32 => gen_mat32_view(rng, b.base),
        Layout::Flat => gen_flat_view(rng, b.base, b.len),
    }
}

/// A view of a 32x32 column-major u64 matrix: mostly tiles of one tiling (4, 8 or 16), as a
/// tiled algorithm makes them; rectangles anywhere, including ones whose columns run on into
/// the next column; column blocks; rows; and blocks of every other column (another stride).
pub fn gen_mat32_view(rng: &mut Rng, base: u64) -> Tensor {
    const N: u64 = 32;
    let u = DataType::U64;
    let at = |r: u64, c: u64| (r + N * c) * 8;
    match rng.below(8) {
        0..=3 => {
            let b = [4, 8, 16][rng.below(3) as usize];
            let (i, j) = (rng.below(N / b), rng.below(N / b));
            tensor(base, at(i * b, j * b), u, &[b, b], &[1, N])
        }
        4 => {
            let (h, w) = (rng.range(1, N), rng.range(1, N));
            let start = rng.below(N * N - ((w - 1) * N + h) + 1);
            tensor(base, start * 8, u, &[h, w], &[1, N])
        }
        5 => {
            let c0 = rng.below(N);
            let k = rng.range(1, N - c0);
            tensor(base, at(0, c0), u, &[N, k], &[1, N])
        }
        6 => {
            let (r, c0) = (rng.below(N), rng.below(N / 2));
            tensor(base, at(r, c0), u, &[N - c0], &[N])
        }
        _ => {
            let (h, w) = (rng.range(1, N), rng.range(1, N / 2));
            let (r0, c0) = (rng.below(N + 1 - h), rng.below(N + 2 - 2 * w));
            tensor(base, at(r0, c0), u, &[h, w], &[1, 2 * N])
        }
    }
}

pub fn gen_flat_view(rng: &mut Rng, base: u64, len: u64) -> Tensor {
    let n8 = len / 8;
    match rng.below(6) {
        0 if n8 * 8 == len => tensor(base, 0, DataType::U64, &[n8], &[]),
        0 => tensor(base, 0, DataType::U8, &[len], &[]),
        1 if n8 > 0 => {
            let a = rng.below(n8);
            let k = rng.range(1, n8 - a);
            tensor(base, a * 8, DataType::U64, &[k], &[])
        }
        2 if len >= 4 => tensor(base, rng.below(len / 4) * 4, DataType::U32, &[], &[]),
        _ => gen_generic(rng, base, len),
    }
}

/// A failure dump's description of a member's tensor: tag, buffer (`bufs[bi]`, "auto" for
/// an auto-allocated OUTPUT or any index past `bufs`), offset, element size, shape, strides.
pub fn describe_tensor(t: &Tensor, bufs: &[Buf], bi: usize) -> String {
    let nd = (t.ndim as usize).min(MAX_TENSOR_DIMS);
    let name = bufs.get(bi).map_or("auto".to_string(), |b| b.name.clone());
    format!(
        "{} {}[+{} {:?} shape {:?} strides {:?}]",
        tag_name(t.tag),
        name,
        t.offset,
        elem_size(t.dtype).unwrap_or(0),
        &t.shape[..nd],
        &t.strides[..nd]
    )
}

pub fn tag_name(t: u32) -> &'static str {
    match Tag::from_u32(t) {
        Some(Tag::Input) => "IN",
        Some(Tag::Output) => "OUT",
        Some(Tag::Inout) => "INOUT",
        Some(Tag::OutputExisting) => "OUT_EXISTING",
        Some(Tag::NoDep) => "NO_DEP",
        None => "?",
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Layout {
    /// 8x8 column-major u64, leading dimension 8.
    Mat8,
    /// 32x32 column-major u64, leading dimension 32: its tiles span enough granules to be
    /// indexed by the TensorMap's grids (and, when they fit none, its ordered index).
    Mat32,
    /// A flat byte range.
    Flat,
}

pub struct Buf {
    pub name: String,
    pub base: u64,
    pub len: u64,
    pub layout: Layout,
    /// Scope depth (1-based) whose end kills it; 0 for static buffers.
    pub level: usize,
    pub alive: bool,
    /// Per byte: last writer node + 1 (0: none in this run).
    pub last: Vec<u32>,
    /// The node whose heap slab it is (runtime-owned buffers): a read of it holds that node.
    pub owner: Option<usize>,
}

impl Buf {
    /// A runtime-owned buffer written whole by node `writer`, dying with the scope at `level`.
    pub fn owned(
        name: String,
        base: u64,
        len: u64,
        layout: Layout,
        level: usize,
        writer: usize,
    ) -> Buf {
        Buf {
            name,
            base,
            len,
            layout,
            level,
            alive: true,
            last: vec![writer as u32 + 1; len as usize],
            owner: Some(writer),
        }
    }
}

/// The model side of a scope begin: a new innermost frame in `frames`, and its op. Returns
/// the new depth.
pub fn begin_frame(frames: &mut Vec<Vec<usize>>, ops: &mut Vec<Op>) -> usize {
    frames.push(Vec::new());
    ops.push(Op::Begin(frames.len()));
    frames.len()
}

/// The model side of a scope end: the innermost frame of `frames` (per open scope, the nodes
/// it holds a reference on) is popped and returned, and the buffers it owned die.
pub fn end_frame(frames: &mut Vec<Vec<usize>>, bufs: &mut [Buf]) -> Vec<usize> {
    let d = frames.len();
    for b in bufs.iter_mut().filter(|b| b.level == d) {
        b.alive = false;
    }
    frames.pop().expect("open frame")
}

/// A random alloc() request: its shape, dtype, and the layout of the buffer it makes.
pub fn gen_alloc(rng: &mut Rng) -> (Vec<u64>, DataType, Layout) {
    match rng.below(4) {
        0 => (vec![8, 8], DataType::U64, Layout::Mat8),
        1 => (vec![16], DataType::U64, Layout::Flat),
        2 => (vec![32], DataType::U32, Layout::Flat),
        _ => (vec![100], DataType::U8, Layout::Flat),
    }
}

/// The buffer `A<idx>` that alloc() node `idx` returned at `ptr` (which must be 1024-aligned,
/// not NULL), dying with the scope at `level`.
pub fn alloc_buf(
    idx: usize,
    ptr: *mut u8,
    shape: &[u64],
    dtype: DataType,
    layout: Layout,
    level: usize,
) -> Result<Buf, String> {
    if ptr.is_null() || (ptr as u64) % 1024 != 0 {
        return Err(format!(
            "alloc of node n{idx} returned {ptr:?}, not 1024-aligned"
        ));
    }
    let len = shape.iter().product::<u64>() * elem_size(dtype as u32).expect("dtype");
    let name = format!("A{idx}");
    Ok(Buf::owned(name, ptr as u64, len, layout, level, idx))
}

/// After the submit of node `idx` (at scope depth `level`): each auto-allocated OUTPUT of
/// its member `mi` (`buf_of[t] == usize::MAX`) must have been written back, and becomes a
/// buffer the node wrote whole, recorded in `buf_of`. Returns how many there were.
pub fn adopt_autos(
    bufs: &mut Vec<Buf>,
    tensors: &[Tensor],
    buf_of: &mut [usize],
    idx: usize,
    mi: usize,
    level: usize,
) -> Result<u64, String> {
    let mut n = 0;
    for ti in 0..tensors.len() {
        if buf_of[ti] != usize::MAX {
            continue;
        }
        let t = tensors[ti];
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
        bufs.push(Buf::owned(name, t.data as u64, len, layout, level, idx));
        buf_of[ti] = bufs.len() - 1;
        n += 1;
    }
    Ok(n)
}

#[derive(Clone, Debug)]
pub enum Kind {
    Alloc,
    Nl(i32),
    NlGroup(Vec<i32>),
    Sub,
    SubGroup(usize),
}

impl Kind {
    /// Members of a task of this kind (an alloc has none).
    pub fn members(&self) -> usize {
        match self {
            Kind::NlGroup(ids) => ids.len(),
            Kind::SubGroup(k) => *k,
            Kind::Alloc => 0,
            _ => 1,
        }
    }
    /// How a task of this kind is submitted, and to which NEXT_LEVEL lanes.
    pub fn submit_kind(&self) -> (SubmitKind, Vec<i32>) {
        match self {
            Kind::Nl(t) => (SubmitKind::NextLevel, vec![*t]),
            Kind::NlGroup(ids) => (SubmitKind::NextLevelGroup, ids.clone()),
            Kind::Sub => (SubmitKind::Sub, vec![]),
            Kind::SubGroup(_) => (SubmitKind::SubGroup, vec![]),
            Kind::Alloc => unreachable!("alloc is not submitted"),
        }
    }
    pub fn is_alloc(&self) -> bool {
        matches!(self, Kind::Alloc)
    }
}

/// The arguments of a member with `tensors`, `scalars` and `deps`.
pub fn task_args(tensors: &mut [Tensor], scalars: &[u64], deps: &[Dep]) -> TaskArgs {
    TaskArgs {
        tensors: tensors.as_mut_ptr(),
        num_tensors: tensors.len() as u32,
        num_scalars: scalars.len() as u32,
        scalars: scalars.as_ptr(),
        deps: deps.as_ptr(),
        num_deps: deps.len() as u32,
        reserved: 0,
    }
}

pub enum Op {
    Begin(usize),
    End(usize),
    Node(usize),
    Note(String),
}

impl Op {
    /// A failure dump's line for a scope op or a note; None for a node (each dump prints its
    /// nodes its own way).
    pub fn dump_line(&self) -> Option<String> {
        match self {
            Op::Begin(d) => Some(format!("scope_begin -> depth {d}")),
            Op::End(d) => Some(format!("scope_end   <- depth {d}")),
            Op::Note(n) => Some(format!("# {n}")),
            Op::Node(_) => None,
        }
    }
}

/// A failure dump's lines for `ops`: scope ops and notes by `Op::dump_line`, each node by
/// `node` (given its index).
pub fn dump_ops(s: &mut String, ops: &[Op], mut node: impl FnMut(&mut String, usize)) {
    for op in ops {
        match op {
            Op::Node(i) => node(s, *i),
            _ => {
                if let Some(line) = op.dump_line() {
                    let _ = writeln!(s, "{line}");
                }
            }
        }
    }
}

/// A failure dump's line per member of a node: `(tensors, buffer of each tensor)`, each
/// tensor by `describe_tensor`.
pub fn dump_members<'a>(
    s: &mut String,
    members: impl Iterator<Item = (&'a [Tensor], &'a [usize])>,
    bufs: &[Buf],
) {
    for (mi, (tensors, buf_of)) in members.enumerate() {
        let ts: Vec<String> = tensors
            .iter()
            .zip(buf_of)
            .map(|(t, &bi)| describe_tensor(t, bufs, bi))
            .collect();
        let _ = writeln!(s, "    member {mi}: {}", ts.join(", "));
    }
}

/// A failure dump's line for alloc() node `i` (slot `slot`, `(shape, dtype)`, at scope depth
/// `level`), whose buffer is `A<i>`.
pub fn dump_alloc(s: &mut String, i: usize, slot: u64, alloc: &(Vec<u64>, u32), level: usize) {
    let (shape, dtype) = alloc;
    let _ = writeln!(
        s,
        "n{i} slot {slot} = alloc(shape {shape:?}, dtype {dtype}) at depth {level} -> buffer A{i}"
    );
}

/// A node's explicit deps `(node, retain)` as a failure dump names them.
pub fn dep_names(deps: &[(usize, bool)]) -> Vec<String> {
    deps.iter()
        .map(|&(p, r)| format!("{}(n{p})", if r { "add_dep" } else { "add_dep_wait" }))
        .collect()
}

/// What a worker still holds once its runs have finished and been released: live slots,
/// TensorMap entries, ready-queue entries, registered runs (empty when all was reclaimed).
pub fn leftovers(e: &Engine) -> Vec<String> {
    let mut errs = Vec::new();
    if e.slots.live() != 0 {
        errs.push(format!("{} slots still live", e.slots.live()));
    }
    if !e.tensormap.is_empty() {
        errs.push(format!("{} TensorMap entries left", e.tensormap.len()));
    }
    let q = dagrt::scheduler::queued(e);
    if q != 0 {
        errs.push(format!("{q} slots still in ready queues"));
    }
    if !e.runs.is_empty() {
        errs.push(format!("{} runs still registered", e.runs.len()));
    }
    errs
}

/// A node's required producers (node -> retained) as a failure dump names them.
pub fn req_names(req: &BTreeMap<usize, bool>) -> Vec<String> {
    req.iter()
        .map(|(&p, &r)| format!("n{p}{}", if r { "" } else { "(wait)" }))
        .collect()
}

/// Byte offsets (relative to `base`) a view touches, with the header's semantics: all-zero
/// strides mean dense row-major; `ndim == 0` is one element.
pub fn view_bytes(t: &Tensor, base: u64, out: &mut Vec<u64>) {
    out.clear();
    let es = elem_size(t.dtype).expect("valid dtype");
    let nd = t.ndim as usize;
    let shape = &t.shape[..nd];
    if shape.contains(&0) {
        return;
    }
    let off = (t.data as u64).wrapping_sub(base) + t.offset;
    let strides = &t.strides[..nd];
    if strides.iter().all(|&s| s == 0) {
        let n = shape.iter().product::<u64>() * es;
        out.extend(off..off + n);
        return;
    }
    let mut idx = [0u64; MAX_TENSOR_DIMS];
    loop {
        let e = off + (0..nd).map(|k| idx[k] * strides[k] * es).sum::<u64>();
        out.extend(e..e + es);
        let mut k = 0;
        loop {
            if k == nd {
                return;
            }
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
            k += 1;
        }
    }
}

/// A member's random tensors (the generator `random_dags` and `fault_injection` share): up to
/// four, each an auto-allocated OUTPUT (5%) or a random view of a live buffer with a random
/// tag. Returns the tensors and, per tensor, its buffer (usize::MAX: auto-allocated).
pub fn gen_tensors(rng: &mut Rng, bufs: &[Buf]) -> (Vec<Tensor>, Vec<usize>) {
    let nt = rng.below(5) as usize;
    let mut tensors = Vec::with_capacity(nt);
    let mut buf_of = Vec::with_capacity(nt);
    let alive: Vec<usize> = (0..bufs.len()).filter(|&i| bufs[i].alive).collect();
    for _ in 0..nt {
        let r = rng.below(100);
        if r >= 95 {
            // OUTPUT with a null data pointer: the runtime allocates it.
            let mut t = if rng.pct(50) {
                tensor(0, 0, DataType::U64, &[8, 8], &[])
            } else {
                tensor(0, 0, DataType::U64, &[16], &[])
            };
            t.tag = Tag::Output as u32;
            tensors.push(t);
            buf_of.push(usize::MAX);
            continue;
        }
        let tag = match r {
            0..=32 => Tag::Input,
            33..=47 => Tag::Output,
            48..=72 => Tag::Inout,
            73..=84 => Tag::OutputExisting,
            _ => Tag::NoDep,
        };
        let bi = alive[rng.below(alive.len() as u64) as usize];
        let mut t = gen_view(rng, &bufs[bi]);
        t.tag = tag as u32;
        tensors.push(t);
        buf_of.push(bi);
    }
    (tensors, buf_of)
}

/// Explicit dependencies for node `node` of run `run_id` (30% of members name one or two
/// earlier nodes, biased to recent ones); `slot_of` gives a node's slot.
pub fn gen_deps(
    rng: &mut Rng,
    node: usize,
    run_id: u64,
    slot_of: impl Fn(usize) -> u64,
) -> Vec<Dep> {
    let mut deps = Vec::new();
    if node > 0 && rng.pct(30) {
        for _ in 0..rng.range(1, 3) {
            // Biased to recent nodes, but any earlier node of the run can be named.
            let back = if rng.pct(70) {
                rng.below(node.min(6) as u64)
            } else {
                rng.below(node as u64)
            } as usize;
            let p = node - 1 - back;
            let kind = if rng.pct(50) {
                DepKind::Retain
            } else {
                DepKind::Wait
            };
            deps.push(Dep {
                handle: TaskHandle {
                    run_id,
                    slot: slot_of(p),
                },
                kind: kind as u32,
                reserved: 0,
            });
        }
    }
    deps
}

/// How long an executor spins (scalar 3): mostly not at all, sometimes up to 8000 rounds,
/// sometimes a yield.
pub fn gen_spin(rng: &mut Rng) -> u64 {
    match rng.below(100) {
        0..=59 => 0,
        60..=84 => rng.range(1, 300),
        85..=96 => rng.range(300, 8000),
        _ => SPIN_YIELD,
    }
}

/// A random task kind over lanes `l`: NEXT_LEVEL single or group, SUB single or group.
pub fn gen_kind(rng: &mut Rng, l: &Lanes) -> Kind {
    match rng.below(100) {
        0..=34 => Kind::Nl(l.nl[rng.below(l.nl.len() as u64) as usize]),
        35..=49 => {
            let mut ids = l.nl.clone();
            for i in (1..ids.len()).rev() {
                ids.swap(i, rng.below(i as u64 + 1) as usize);
            }
            ids.truncate(rng.range(1, l.nl.len() as u64) as usize);
            Kind::NlGroup(ids)
        }
        50..=84 => Kind::Sub,
        _ => Kind::SubGroup(rng.range(1, l.subs as u64) as usize),
    }
}

/// A member as the reference model reads it: its explicit deps, tensors and, per tensor, its
/// buffer (usize::MAX: auto-allocated).
pub type MemberRefs<'a> = (&'a [Dep], &'a [Tensor], &'a [usize]);

/// Reference model of node `idx`, byte-exact: explicit deps first (each names node
/// `node_of(slot)`; retained if any path asks for it), then every lookup of every member's
/// tensors, then every insert (a node's reads see the writers before it, whatever the order
/// of its tensors): the last writer of any byte a lookup touches is required; an insert
/// makes the node the last writer.
/// Returns the required producers (node -> retained) and the explicit deps in order.
pub fn model_required(
    bufs: &mut [Buf],
    scratch: &mut Vec<u64>,
    members: &[MemberRefs<'_>],
    idx: usize,
    node_of: impl Fn(u64) -> usize,
) -> (BTreeMap<usize, bool>, Vec<(usize, bool)>) {
    let mut req: BTreeMap<usize, bool> = BTreeMap::new();
    let mut deps = Vec::new();
    for &(member_deps, _, _) in members {
        for d in member_deps {
            let p = node_of(d.handle.slot);
            let retain = d.kind == DepKind::Retain as u32;
            deps.push((p, retain));
            *req.entry(p).or_insert(false) |= retain;
        }
    }
    for inserting in [false, true] {
        for &(_, tensors, buf_of) in members {
            for (t, &bi) in tensors.iter().zip(buf_of) {
                let tag = Tag::from_u32(t.tag).expect("tag");
                let acts = if inserting {
                    model_inserts(tag)
                } else {
                    model_looks_up(tag)
                };
                if bi == usize::MAX || tag == Tag::NoDep || !acts {
                    continue;
                }
                let b = &mut bufs[bi];
                view_bytes(t, b.base, scratch);
                for &x in scratch.iter() {
                    if inserting {
                        b.last[x as usize] = idx as u32 + 1;
                        continue;
                    }
                    let w = b.last[x as usize];
                    if w != 0 && w as usize - 1 != idx {
                        req.insert(w as usize - 1, true);
                    }
                }
            }
        }
    }
    (req, deps)
}
