//! The task executor (`exec`, registered by `callable()`) and what it records per run
//! (`RunRec`): each member's start and end sequence, lane, slot, run id, tensors and config.

use super::*;

// ---------------------------------------------------------------------------------------
// Executor and what it records

#[derive(Default)]
pub(crate) struct MemberRec {
    pub(crate) start: AtomicU64,
    pub(crate) end: AtomicU64,
    pub(crate) count: AtomicU32,
    pub(crate) worker: AtomicI32,
    pub(crate) slot: AtomicU64,
    pub(crate) run: AtomicU64,
    pub(crate) midx: AtomicU32,
    pub(crate) gsize: AtomicU32,
    pub(crate) thash: AtomicU64,
    pub(crate) cfg0: AtomicU64,
}

/// Per-run record, addressed by the executor through scalar 0.
pub(crate) struct RunRec {
    engine: Arc<Engine>,
    /// Executors wait here (after recording their start) until the run's graph is complete.
    pub(crate) gate_open: AtomicBool,
    pub(crate) recs: Vec<MemberRec>,
    /// Per node: slots that must be alive (same task, COMPLETED) while the node runs.
    pub(crate) alive: Vec<Mutex<Vec<u64>>>,
    pub(crate) errors: Mutex<Vec<String>>,
}

impl RunRec {
    pub(crate) fn new(engine: Arc<Engine>, gated: bool) -> RunRec {
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
        lock(&self.errors).push(msg);
    }
}

pub(crate) fn hash_tensors(ts: &[Tensor]) -> u64 {
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
        let alive = lock(&rr.alive[node]);
        for &p in alive.iter() {
            let s = rr.engine.slots.get(p);
            let id = s.core.lock_sync().id;
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
    spin(sc[3]);
    r.end
        .store(SEQ.fetch_add(1, Ordering::SeqCst), Ordering::SeqCst);
    0
}

pub(crate) fn callable() -> Callable {
    static C: OnceLock<Callable> = OnceLock::new();
    *C.get_or_init(|| {
        dagrt::callable::register("tests.random_dags.exec", 7, 0, exec, std::ptr::null_mut())
            .expect("register the test executor")
    })
}
