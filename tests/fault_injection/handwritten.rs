//! Helpers for hand-written tasks, shared by the back-pressure and directed tests: members,
//! deps, single SUB submits, waits, and closing and checking a run (`finish_directed`).

use super::*;

// ---------------------------------------------------------------------------------------
// Hand-written tasks for the directed tests

pub(crate) fn member(
    rr: &RunRec,
    node: usize,
    m: usize,
    tensors: Vec<Tensor>,
    deps: Vec<Dep>,
    mode: u64,
    hold: bool,
) -> Member {
    Member {
        bufs: vec![0; tensors.len()],
        tensors,
        deps,
        scalars: [
            rr as *const RunRec as u64,
            node as u64,
            m as u64,
            0,
            mode,
            hold as u64,
        ],
    }
}

pub(crate) fn dep(h: TaskHandle, retain: bool) -> Dep {
    Dep {
        handle: h,
        kind: if retain {
            DepKind::Retain
        } else {
            DepKind::Wait
        } as u32,
        reserved: 0,
    }
}

/// Submit one SUB task of `node` (member 0).
pub(crate) fn sub1(
    o: &mut Orch<'_>,
    rr: &RunRec,
    node: usize,
    tensors: Vec<Tensor>,
    deps: Vec<Dep>,
    mode: u64,
    hold: bool,
) -> Result<TaskHandle, String> {
    let m = member(rr, node, 0, tensors, deps, mode, hold);
    submit1(o, node, m, SubmitKind::Sub, &[])
}

/// Submit one NEXT_LEVEL task of `node` (member 0, no tensors or deps) on lane `lane`.
pub(crate) fn nl1(
    o: &mut Orch<'_>,
    rr: &RunRec,
    node: usize,
    lane: i32,
    hold: bool,
) -> Result<TaskHandle, String> {
    let m = member(rr, node, 0, vec![], vec![], FAIL_NONE, hold);
    submit1(o, node, m, SubmitKind::NextLevel, &[lane])
}

/// Submit `node`'s one member `m` as a task of `kind` (on `lanes`, for NEXT_LEVEL).
fn submit1(
    o: &mut Orch<'_>,
    node: usize,
    mut m: Member,
    kind: SubmitKind,
    lanes: &[i32],
) -> Result<TaskHandle, String> {
    let args = [m.args()];
    o.submit(kind, &callable(), &args, &CallConfig::default(), lanes)
        .map_err(|e| format!("submit of n{node}: {e:?}"))
}

pub(crate) fn ran(rr: &RunRec, node: usize) -> bool {
    rr.rec(node, 0).count.load(Ordering::SeqCst) > 0
}

/// Close, wait, compare (status, completed, failed) and release; on success the RunRec is
/// freed and the worker must be fully reclaimed.
pub(crate) fn finish_directed(
    env: &Env,
    mut o: Orch<'_>,
    run: u64,
    rr: *mut RunRec,
    expect: (Status, u64, u64),
) -> Result<String, String> {
    o.close(run).map_err(|e| format!("close: {e:?}"))?;
    drop(o);
    // SAFETY: `rr` is live until freed below.
    unsafe { &*rr }.open_all();
    let (st, msg) = env.wait(run, RUN_TIMEOUT)?;
    let s = env.run_stats(run).ok_or("run stats unavailable")?;
    if (st, s.completed, s.failed) != expect || s.cancelled != 0 {
        return Err(format!(
            "run ended {st:?} '{msg}' with completed {}, failed {}, cancelled {}; expected {expect:?} and nothing cancelled",
            s.completed, s.failed, s.cancelled
        ));
    }
    env.release(run)?;
    // SAFETY: allocated by Box::into_raw by the caller; the run is done.
    drop(unsafe { Box::from_raw(rr) });
    env.check_reclaimed()?;
    Ok(msg)
}
