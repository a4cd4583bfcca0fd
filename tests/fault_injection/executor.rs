//! The task executor every test submits and what it records per run (`RunRec`): start and
//! end sequence numbers, run counts, failure tickets; the failure modes and their messages.

use super::*;

// ---------------------------------------------------------------------------------------
// The executor and what it records

/// Failure modes of a member (scalar 4).
pub(crate) const FAIL_NONE: u64 = 0;
/// Return a non-zero code (`fault_rc`).
pub(crate) const FAIL_RC: u64 = 1;
/// `dagrt_task_fail(fault_msg)`, then return 0.
const FAIL_MSG: u64 = 2;
/// `dagrt_task_fail(fault_msg)`, then return the code.
const FAIL_MSG_RC: u64 = 3;

/// The code a failing member returns: negative and large, so it cannot be confused with a
/// slot or run id in a message.
pub(crate) fn fault_rc(node: usize, m: usize) -> i32 {
    -(0x2000_0000 + (node * MAXM + m) as i32)
}

fn fault_msg(run: u64, node: usize, m: usize) -> String {
    format!("<injected fault in n{node} member {m} of run {run}>")
}

/// Does `msg` contain the integer `n` as a whole token?
pub(crate) fn contains_int(msg: &str, n: i64) -> bool {
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
pub(crate) fn names_failure(msg: &str, run: u64, node: usize, m: usize, mode: u64) -> bool {
    if mode == FAIL_RC {
        contains_int(msg, fault_rc(node, m) as i64)
    } else {
        msg.contains(&fault_msg(run, node, m))
    }
}

pub(crate) struct MemberRec {
    pub(crate) start: AtomicU64,
    pub(crate) end: AtomicU64,
    pub(crate) count: AtomicU32,
    /// Failure ticket taken by a failing member (u32::MAX: none).
    pub(crate) ticket: AtomicU32,
    pub(crate) worker: AtomicI32,
    pub(crate) slot: AtomicU64,
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
pub(crate) enum Probe {
    Rust(Arc<Run>),
    /// (dagrt_worker_t address, run id)
    C(usize, u64),
}

impl Probe {
    pub(crate) fn failure_recorded(&self) -> bool {
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
pub(crate) struct RunRec {
    /// Executors wait here (after recording their start) until the run's graph is complete.
    gate_open: AtomicBool,
    /// Members with the hold flag (scalar 5) wait here after the gate.
    pub(crate) hold_open: AtomicBool,
    /// Sequence failures: every ticket but the first waits for a recorded failure.
    sequence: bool,
    pub(crate) probe: OnceLock<Probe>,
    tickets: AtomicU32,
    recs: Vec<MemberRec>,
    pub(crate) errors: Mutex<Vec<String>>,
}

impl RunRec {
    pub(crate) fn new(gated: bool, sequence: bool) -> RunRec {
        RunRec::sized(gated, sequence, MAX_NODES)
    }
    pub(crate) fn sized(gated: bool, sequence: bool, nodes: usize) -> RunRec {
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
        lock(&self.errors).push(msg);
    }
    pub(crate) fn rec(&self, node: usize, m: usize) -> &MemberRec {
        &self.recs[node * MAXM + m]
    }
    pub(crate) fn open_all(&self) {
        self.gate_open.store(true, Ordering::Release);
        self.hold_open.store(true, Ordering::Release);
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

pub(crate) fn callable() -> Callable {
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
pub(crate) fn last_error() -> String {
    // SAFETY: dagrt_last_error returns a NUL-terminated string owned by this thread, valid
    // until the next failing dagrt call on it; it is copied at once.
    unsafe { CStr::from_ptr(capi::dagrt_last_error()) }
        .to_string_lossy()
        .into_owned()
}
