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

mod common;

use common::*;
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
// What a member computes: the executor runs it on the buffers, the model on shadow copies.

/// Byte offsets, relative to the tensor's data pointer, of the first byte of each element of
/// `t` in iteration order (the element order of `common::view_bytes`).
fn elem_offsets(t: &Tensor, out: &mut Vec<u64>) {
    out.clear();
    let es = elem_size(t.dtype).expect("valid dtype");
    let nd = t.ndim as usize;
    let shape = &t.shape[..nd];
    if shape.contains(&0) {
        return;
    }
    let strides = &t.strides[..nd];
    if strides.iter().all(|&s| s == 0) {
        let n = shape.iter().product::<u64>();
        out.extend((0..n).map(|k| t.offset + k * es));
        return;
    }
    let mut idx = [0u64; 8];
    loop {
        out.push(t.offset + (0..nd).map(|k| idx[k] * strides[k] * es).sum::<u64>());
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

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Byte memory as a member sees it: byte `off` from the data pointer of its tensor `t`.
trait Mem {
    fn load(&self, t: usize, off: u64) -> u8;
    fn store(&mut self, t: usize, off: u64, v: u8);
}

/// A member's work: hash every byte of its read tensors (`rmask`) in tensor order, then write
/// values derived from the hash into every element of its written tensors (`wmask`), in
/// tensor order. Returns the hash.
fn compute(seed: u64, ts: &[Tensor], rmask: u64, wmask: u64, mem: &mut impl Mem) -> u64 {
    let mut h = seed;
    let mut offs = Vec::new();
    for (ti, t) in ts.iter().enumerate().filter(|(ti, _)| rmask >> ti & 1 == 1) {
        let es = elem_size(t.dtype).expect("dtype");
        elem_offsets(t, &mut offs);
        for &o in &offs {
            for b in 0..es {
                h = mix(h ^ mem.load(ti, o + b) as u64).wrapping_add(o);
            }
        }
    }
    for (ti, t) in ts.iter().enumerate().filter(|(ti, _)| wmask >> ti & 1 == 1) {
        let es = elem_size(t.dtype).expect("dtype");
        elem_offsets(t, &mut offs);
        for (k, &o) in offs.iter().enumerate() {
            let v = mix(h ^ ((ti as u64) << 40) ^ k as u64);
            for b in 0..es {
                mem.store(ti, o + b, (v >> (8 * b)) as u8);
            }
        }
    }
    h
}

/// The executor's memory: the tensors' data pointers.
struct Real(Vec<*mut u8>);

impl Mem for Real {
    fn load(&self, t: usize, off: u64) -> u8 {
        // SAFETY: `off` is a byte of the tensor's view, inside its buffer (the generator keeps
        // views within their buffer), and no other task touches it while this one runs
        // (which the ordering under test guarantees; the model check catches a breach).
        unsafe { self.0[t].add(off as usize).read_volatile() }
    }
    fn store(&mut self, t: usize, off: u64, v: u8) {
        // SAFETY: as in `load`.
        unsafe { self.0[t].add(off as usize).write_volatile(v) }
    }
}

/// The model's memory: the shadow copy of each tensor's buffer (`buf_of`).
struct Shadow<'a> {
    shadow: &'a mut [Vec<u8>],
    buf_of: &'a [usize],
}

impl Mem for Shadow<'_> {
    fn load(&self, t: usize, off: u64) -> u8 {
        self.shadow[self.buf_of[t]][off as usize]
    }
    fn store(&mut self, t: usize, off: u64, v: u8) {
        self.shadow[self.buf_of[t]][off as usize] = v;
    }
}

// ---------------------------------------------------------------------------------------
// Executor and what it records

#[derive(Default)]
struct MemberRec {
    count: AtomicU32,
    value: AtomicU64,
}

struct RunRec {
    recs: Vec<MemberRec>,
}

/// Scalars: see `NSCALARS`.
unsafe extern "C" fn exec(task: *const TaskView, _user: *mut c_void) -> i32 {
    // SAFETY: the lane passes a view that is valid for the duration of this call.
    let v = unsafe { &*task };
    if v.num_scalars as usize != NSCALARS || v.scalars.is_null() {
        return 77;
    }
    // SAFETY: the view carries `num_scalars` scalars, valid during the call.
    let sc = unsafe { std::slice::from_raw_parts(v.scalars, NSCALARS) };
    // SAFETY: scalar 0 is the address of this run's RunRec, freed only after the run is done
    // (leaked when a run fails).
    let rr = unsafe { &*(sc[0] as *const RunRec) };
    let (node, m) = (sc[1] as usize, sc[2] as usize);
    if node >= MAX_NODES || m >= MAXM {
        return 78;
    }
    let ts: &[Tensor] = if v.num_tensors == 0 || v.tensors.is_null() {
        &[]
    } else {
        // SAFETY: the view carries `num_tensors` tensors, valid during the call.
        unsafe { std::slice::from_raw_parts(v.tensors, v.num_tensors as usize) }
    };
    let mut mem = Real(ts.iter().map(|t| t.data as *mut u8).collect());
    let h = compute(sc[3], ts, sc[4] & 0xff, sc[4] >> 8, &mut mem);
    let r = &rr.recs[node * MAXM + m];
    r.value.store(h, Ordering::Relaxed);
    r.count.fetch_add(1, Ordering::SeqCst);
    0
}

fn callable() -> dagrt::callable::Callable {
    static C: OnceLock<dagrt::callable::Callable> = OnceLock::new();
    *C.get_or_init(|| {
        dagrt::callable::register(
            "tests.random_dags_idle.exec",
            7,
            0,
            exec,
            std::ptr::null_mut(),
        )
        .expect("register the test executor")
    })
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
        let e = &self.engine;
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
        if errs.is_empty() {
            Ok(())
        } else {
            Err(format!("not reclaimed after the run: {}", errs.join("; ")))
        }
    }
}

// ---------------------------------------------------------------------------------------
// One run: the generator, the model, the submissions

fn reads(tag: Tag) -> bool {
    matches!(tag, Tag::Input | Tag::Inout)
}
fn writes(tag: Tag) -> bool {
    matches!(tag, Tag::Output | Tag::Inout | Tag::OutputExisting)
}

fn gen_tag(rng: &mut Rng) -> Tag {
    match rng.below(100) {
        0..=34 => Tag::Input,
        35..=54 => Tag::Output,
        55..=84 => Tag::Inout,
        _ => Tag::OutputExisting,
    }
}

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

/// The model's per-byte state of a run: last writer (node + 1, 0: none) and readers since.
struct Track {
    last: Vec<Vec<u8>>,
    readers: Vec<Vec<u64>>,
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

/// A member's tensors: 0-3 random views with random tags. In a group, a
/// member's tensor may not touch bytes an earlier member writes, nor write bytes an earlier
/// member touches (`taken_r`/`taken_w`: (buffer, byte)); a view that would is redrawn, and
/// after 6 tries left out.
fn gen_member_tensors(
    rng: &mut Rng,
    env: &Env,
    taken_r: &mut HashSet<(usize, u64)>,
    taken_w: &mut HashSet<(usize, u64)>,
    t: &mut Totals,
) -> (Vec<Tensor>, Vec<usize>, u64, u64) {
    let nt = if rng.pct(8) { 0 } else { rng.range(1, 3) };
    let (mut tensors, mut buf_of, mut rmask, mut wmask) = (Vec::new(), Vec::new(), 0, 0);
    let mut mine_r = Vec::new();
    let mut mine_w = Vec::new();
    let mut bytes = Vec::new();
    for _ in 0..nt {
        let mut placed = false;
        for _ in 0..6 {
            // Mostly the small buffers, so that tasks meet often.
            let bi = match rng.below(10) {
                0..=4 => rng.below(3) as usize,
                5..=7 => 3 + rng.below(3) as usize,
                _ => 6 + rng.below(2) as usize,
            };
            let mut v = gen_view(rng, &env.bufs[bi]);
            let tag = gen_tag(rng);
            v.tag = tag as u32;
            view_bytes(&v, env.bufs[bi].base, &mut bytes);
            let clash = bytes.iter().any(|&b| {
                taken_w.contains(&(bi, b)) || (writes(tag) && taken_r.contains(&(bi, b)))
            });
            if clash {
                continue;
            }
            let k = tensors.len();
            if reads(tag) {
                rmask |= 1 << k;
                mine_r.extend(bytes.iter().map(|&b| (bi, b)));
            }
            if writes(tag) {
                wmask |= 1 << k;
                mine_w.extend(bytes.iter().map(|&b| (bi, b)));
            }
            tensors.push(v);
            buf_of.push(bi);
            placed = true;
            break;
        }
        t.dropped_tensors += !placed as u64;
    }
    taken_r.extend(mine_r);
    taken_w.extend(mine_w);
    (tensors, buf_of, rmask, wmask)
}

/// Build and submit one run on `env` from `seed`, keeping the model; the run's submission is
/// closed on return.
fn build(env: &Env, seed: u64, t: &mut Totals) -> Result<Run, (String, Option<Run>)> {
    let mut rng = Rng(seed);
    // Initial contents, the same in the buffers and the model.
    let init: Vec<Vec<u8>> = (0..env.bufs.len())
        .map(|bi| (0..env.len(bi)).map(|_| rng.next() as u8).collect())
        .collect();
    env.fill(&init);
    let mut shadow = init;
    let mut track = Track {
        last: shadow.iter().map(|v| vec![0; v.len()]).collect(),
        readers: shadow.iter().map(|v| vec![0; v.len()]).collect(),
    };
    // How this run sleeps between submissions: never, now and then, or before every one.
    let sleep_mode = rng.below(3);
    let n_ops = rng.range(8, 48) as usize;
    let rr = Box::into_raw(Box::new(RunRec {
        recs: (0..MAX_NODES * MAXM)
            .map(|_| MemberRec::default())
            .collect(),
    }));
    let mut o = env.orch();
    let run_id = o
        .begin_run()
        .map_err(|e| (format!("begin_run: {e}"), None))?;
    let mut run = Run {
        seed,
        run_id,
        nodes: Vec::new(),
        ops: Vec::new(),
        rr,
        shadow: Vec::new(),
    };
    let mut depth = 1usize;
    let mut bytes = Vec::new();
    for _ in 0..n_ops {
        let r = rng.below(100);
        if r < 10 && depth < 5 {
            if let Err(e) = o.scope_begin() {
                return Err((format!("scope_begin: {e}"), Some(run)));
            }
            depth += 1;
            run.ops.push(Op::Begin(depth));
        } else if r < 18 && depth > 1 {
            if let Err(e) = o.scope_end() {
                return Err((format!("scope_end: {e}"), Some(run)));
            }
            run.ops.push(Op::End(depth));
            depth -= 1;
        }
        let idx = run.nodes.len();
        let kind = gen_kind(&mut rng, &env.lanes);
        let (mut taken_r, mut taken_w) = (HashSet::new(), HashSet::new());
        let mut members: Vec<Member> = (0..kind.members())
            .map(|_| {
                let (tensors, buf_of, rmask, wmask) =
                    gen_member_tensors(&mut rng, env, &mut taken_r, &mut taken_w, t);
                Member {
                    tensors,
                    buf_of,
                    deps: Vec::new(),
                    seed: rng.next(),
                    rmask,
                    wmask,
                    value: 0,
                }
            })
            .collect();

        // The model: producers the reads require (inferred), and the earlier readers and
        // writers of the bytes this node writes (named explicitly unless inferred).
        let mut inferred = BTreeSet::new();
        let mut hazards = BTreeSet::new();
        for m in &members {
            for (k, (ten, &bi)) in m.tensors.iter().zip(&m.buf_of).enumerate() {
                view_bytes(ten, env.bufs[bi].base, &mut bytes);
                for &b in &bytes {
                    let b = b as usize;
                    let w = track.last[bi][b] as usize;
                    if m.rmask >> k & 1 == 1 && w != 0 {
                        inferred.insert(w - 1);
                    }
                    if m.wmask >> k & 1 == 1 {
                        if w != 0 {
                            hazards.insert(w - 1);
                        }
                        let mut rd = track.readers[bi][b];
                        while rd != 0 {
                            hazards.insert(rd.trailing_zeros() as usize);
                            rd &= rd - 1;
                        }
                    }
                }
            }
        }
        let mut explicit: Vec<(usize, bool)> = hazards
            .difference(&inferred)
            .map(|&p| (p, rng.pct(50)))
            .collect();
        if idx > 0 && rng.pct(10) {
            explicit.push((rng.below(idx as u64) as usize, rng.pct(50)));
        }
        for &(p, retain) in &explicit {
            let kind = if retain {
                DepKind::Retain
            } else {
                DepKind::Wait
            };
            let mi = rng.below(members.len() as u64) as usize;
            members[mi].deps.push(Dep {
                handle: TaskHandle {
                    run_id,
                    slot: run.nodes[p].slot,
                },
                kind: kind as u32,
                reserved: 0,
            });
        }
        // The model executes the node: members in order (they touch no byte another one
        // writes), then the per-byte state: reads first, then writes.
        for m in members.iter_mut() {
            let mut mem = Shadow {
                shadow: &mut shadow,
                buf_of: &m.buf_of,
            };
            m.value = compute(m.seed, &m.tensors, m.rmask, m.wmask, &mut mem);
        }
        for pass_writes in [false, true] {
            for m in &members {
                for (k, (ten, &bi)) in m.tensors.iter().zip(&m.buf_of).enumerate() {
                    let mask = if pass_writes { m.wmask } else { m.rmask };
                    if mask >> k & 1 == 0 {
                        continue;
                    }
                    view_bytes(ten, env.bufs[bi].base, &mut bytes);
                    for &b in &bytes {
                        let b = b as usize;
                        if pass_writes {
                            track.last[bi][b] = idx as u8 + 1;
                            track.readers[bi][b] = 0;
                        } else {
                            track.readers[bi][b] |= 1 << idx;
                        }
                    }
                }
            }
        }

        let slept_us = match sleep_mode {
            1 if rng.pct(30) => rng.range(20, 600),
            2 => rng.range(20, 400),
            _ => 0,
        };
        if slept_us > 0 {
            std::thread::sleep(Duration::from_micros(slept_us));
            t.sleeps += 1;
        }
        let scalars: Vec<[u64; NSCALARS]> = members
            .iter()
            .enumerate()
            .map(|(mi, m)| {
                [
                    rr as u64,
                    idx as u64,
                    mi as u64,
                    m.seed,
                    m.rmask | m.wmask << 8,
                ]
            })
            .collect();
        let args: Vec<TaskArgs> = members
            .iter_mut()
            .zip(&scalars)
            .map(|(m, sc)| task_args(&mut m.tensors, sc, &m.deps))
            .collect();
        let (sk, lanes) = kind.submit_kind();
        let h = o.submit(sk, &callable(), &args, &CallConfig::default(), &lanes);
        drop(args);
        t.nodes += 1;
        t.members += members.len() as u64;
        t.groups += matches!(kind, Kind::NlGroup(_) | Kind::SubGroup(_)) as u64;
        t.tensors += members.iter().map(|m| m.tensors.len() as u64).sum::<u64>();
        t.inferred += inferred.len() as u64;
        t.explicit += explicit.len() as u64;
        let submit_err = h.as_ref().err().map(|e| e.to_string());
        run.nodes.push(Node {
            kind,
            slot: h.map_or(0, |h| h.slot),
            members,
            inferred,
            explicit,
            slept_us,
        });
        run.ops.push(Op::Node(idx));
        if let Some(e) = submit_err {
            return Err((format!("submit of n{idx} failed: {e}"), Some(run)));
        }
    }
    while depth > 1 {
        if let Err(e) = o.scope_end() {
            return Err((format!("scope_end: {e}"), Some(run)));
        }
        run.ops.push(Op::End(depth));
        depth -= 1;
    }
    if let Err(e) = o.close_run_submission(run_id) {
        return Err((format!("close_run_submission: {e}"), Some(run)));
    }
    t.runs += 1;
    run.shadow = shadow;
    Ok(run)
}

/// Wait for the run and check it against the model. The RunRec is freed on success.
fn finish(env: &Env, run: &Run) -> Result<(), String> {
    let e = &env.engine;
    let r = e
        .runs
        .get(run.run_id)
        .ok_or_else(|| format!("run {} is not registered", run.run_id))?;
    if !r.wait(Some(RUN_TIMEOUT)) {
        return Err(format!(
            "HANG: the run did not finish within {RUN_TIMEOUT:?} ({} slots live)",
            e.slots.live()
        ));
    }
    let mut errs = Vec::new();
    if let Err(m) = r.result() {
        errs.push(format!("run failed: {m:?}"));
    }
    let c = r.counts();
    let tasks = run.nodes.len() as u64;
    if c.completed != tasks || c.failed != 0 || c.cancelled != 0 {
        errs.push(format!(
            "run counts {c:?}, expected {tasks} completed and nothing failed or cancelled"
        ));
    }
    // SAFETY: the run is done: every executor of it has returned.
    let rr = unsafe { &*run.rr };
    for (i, n) in run.nodes.iter().enumerate() {
        for mi in 0..MAXM {
            let rec = &rr.recs[i * MAXM + mi];
            let count = rec.count.load(Ordering::SeqCst);
            let Some(m) = n.members.get(mi) else {
                if count != 0 {
                    errs.push(format!("n{i}: member {mi} of none ran {count} times"));
                }
                continue;
            };
            if count != 1 {
                errs.push(format!(
                    "n{i} ({:?}) member {mi} ran {count} times, expected exactly once",
                    n.kind
                ));
                continue;
            }
            let got = rec.value.load(Ordering::Relaxed);
            if got != m.value {
                errs.push(format!(
                    "VALUE: n{i} member {mi} read inputs hashing to {got:#x}, the sequential model \
                     to {:#x} (it read bytes a task not yet done or already done should have written)",
                    m.value
                ));
            }
        }
    }
    for (bi, want) in run.shadow.iter().enumerate() {
        let got = env.read(bi);
        let bad: Vec<usize> = (0..want.len()).filter(|&b| got[b] != want[b]).collect();
        if let Some(&b) = bad.first() {
            errs.push(format!(
                "BUFFER {}: {} bytes differ from the sequential model, first at byte {b} \
                 (got {:#04x}, want {:#04x})",
                env.bufs[bi].name,
                bad.len(),
                got[b],
                want[b]
            ));
        }
    }
    e.runs.remove_done(run.run_id);
    if let Err(m) = env.check_reclaimed() {
        errs.push(m);
    }
    if errs.is_empty() {
        // SAFETY: allocated by Box::into_raw in `build`; no executor of the run is left.
        drop(unsafe { Box::from_raw(run.rr as *mut RunRec) });
        Ok(())
    } else {
        errs.truncate(25);
        Err(errs.join("\n"))
    }
}

fn dump(env: &Env, run: &Run) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "--- run seed {:#x}, run id {}; replay with DAGRT_STRESS_ONLY={:#x}",
        run.seed, run.run_id, run.seed
    );
    dump_ops(&mut s, &run.ops, |s, i| {
        let n = &run.nodes[i];
        let _ = writeln!(
            s,
            "n{i} slot {} = {:?} (slept {} us before); inferred {:?}; explicit {}",
            n.slot,
            n.kind,
            n.slept_us,
            n.inferred,
            dep_names(&n.explicit).join(" ")
        );
        let members = n.members.iter().map(|m| (&m.tensors[..], &m.buf_of[..]));
        dump_members(s, members, &env.bufs);
    });
    s
}

fn fail(env: Env, msg: &str, run: Option<&Run>) -> ! {
    let d = run.map(|r| dump(&env, r)).unwrap_or_default();
    // Leak the worker: dropping it would wait for a run that may never finish.
    std::mem::forget(env);
    panic!("random_dags_on_a_parking_worker: {msg}\n{d}");
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
