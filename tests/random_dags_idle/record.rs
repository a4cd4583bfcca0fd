//! The task executor (`exec`, registered by `callable()`) and what it records per run
//! (`RunRec`): each member's run count and the value it computed.

use super::*;

// ---------------------------------------------------------------------------------------
// Executor and what it records

#[derive(Default)]
pub(crate) struct MemberRec {
    pub(crate) count: AtomicU32,
    pub(crate) value: AtomicU64,
}

pub(crate) struct RunRec {
    pub(crate) recs: Vec<MemberRec>,
}

/// Scalars: see `NSCALARS`.
pub(crate) unsafe extern "C" fn exec(task: *const TaskView, _user: *mut c_void) -> i32 {
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

pub(crate) fn callable() -> dagrt::callable::Callable {
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
