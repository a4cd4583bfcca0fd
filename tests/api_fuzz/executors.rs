//! The executors the fuzzer registers: what they record per task member, so the model can
//! check every invocation after the fact.

use crate::config::GATE_LIMIT;
use crate::ffi::{hash_tensors, hash_u64s, last_error, sname};
use dagrt::capi::callable as cc;
use dagrt::error::Status;
use dagrt::task::TaskView;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// Executors and what they record

pub(crate) const MAGIC: u64 = 0xF022_A11D_A6F2_0001;
pub(crate) const CFG_MAGIC: u64 = 0xC0F1_0000_0000_0000;
pub(crate) const MAXM: usize = 4;
pub(crate) const MAX_GATES: usize = 64;

// Flags (scalar 3).
const F_MODE_MASK: u64 = 3; // 0 no failure, 1 return code, 2 dagrt_task_fail
pub(crate) const F_MEMBER_SHIFT: u64 = 2; // 2 bits: the failing member
pub(crate) const F_GATED: u64 = 1 << 4;
pub(crate) const F_PROBE: u64 = 1 << 5; // probe dagrt_task_fail misuse (must not fail the task)
pub(crate) const F_GATE_SHIFT: u64 = 8; // 8 bits
pub(crate) const F_EXEC_SHIFT: u64 = 16; // 2 bits: expected executor
pub(crate) const F_USER_SHIFT: u64 = 18; // 2 bits: expected user pointer

/// A global clock: every executor start and end takes one number.
static CLOCK: AtomicU64 = AtomicU64::new(1);
/// Executor anomalies that cannot be attributed to a sequence.
pub(crate) static GLOBAL_ERRORS: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// Distinct addresses used as callable user pointers (index 2 is NULL).
static USER_MARKS: [u8; 2] = [1, 2];

pub(crate) fn user_ptr(i: usize) -> *mut c_void {
    match i {
        0 | 1 => &USER_MARKS[i] as *const u8 as *mut c_void,
        _ => std::ptr::null_mut(),
    }
}

/// Panics on any thread (a dagrt thread that panics dies, and everything waiting on it hangs).
pub(crate) static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Record every panic, and print it at once on the real stderr: libtest captures the output
/// of the threads the test spawns, and a hang would never show it.
pub(crate) fn install_panic_hook() {
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
pub(crate) struct MemberRec {
    pub(crate) entered: AtomicU32,
    pub(crate) exited: AtomicU32,
    pub(crate) start: AtomicU64,
    pub(crate) end: AtomicU64,
    pub(crate) worker: AtomicI32,
    pub(crate) run: AtomicU64,
    pub(crate) slot: AtomicU64,
    pub(crate) midx: AtomicU32,
    pub(crate) gsize: AtomicU32,
    pub(crate) cfg0: AtomicU64,
    pub(crate) thash: AtomicU64,
    pub(crate) shash: AtomicU64,
}

pub(crate) struct NodeRec {
    pub(crate) m: [MemberRec; MAXM],
}

/// Per-sequence record, addressed by executors through scalar 0. It outlives every worker
/// of its sequence (the workers are freed, joining their lanes, before it is dropped).
pub(crate) struct SeqRec {
    pub(crate) nodes: Vec<NodeRec>,
    pub(crate) gates: Vec<AtomicBool>,
    pub(crate) errors: Mutex<Vec<String>>,
}

impl SeqRec {
    pub(crate) fn new(n: usize) -> SeqRec {
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
pub(crate) const EXECS: [Exec; 2] = [exec_a, exec_b];

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
    // (A message that is not UTF-8 is no misuse: it fails the task, shown with U+FFFD.)
    let cases: [(&str, Status, Status); 3] = [
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
