//! Run calls: wait, bounded wait, done, counts, release. All thread-safe.

use super::worker::worker_ref;
use super::{boundary, need_mut};
use crate::error::{err, Error, Result, Status};
use crate::run::{FailureKind, Run, RunCounts, RunId, RunRegistry};
use crate::worker::Engine;
use std::sync::Arc;
use std::time::Duration;

/// Per-run task counts.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RunStats {
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    /// Slots of the run not yet consumed.
    pub live_slots: i64,
    /// 1 once the run is terminal.
    pub done: u32,
    pub reserved: u32,
}

/// Where a worker's runs are: with its engine while it runs; after `dagrt_worker_close`, in
/// the registry the worker kept, so that their results can still be read and released.
enum Runs {
    Running(Arc<Engine>),
    Closed(Arc<RunRegistry>),
}

impl Runs {
    fn registry(&self) -> &RunRegistry {
        match self {
            Runs::Running(e) => &e.runs,
            Runs::Closed(r) => r,
        }
    }
}

fn runs(w: *const super::worker::dagrt_worker_t) -> Result<Runs> {
    let w = &worker_ref(w)?.worker;
    if let Some(e) = w.engine() {
        return Ok(Runs::Running(e.clone()));
    }
    w.closed_runs()
        .map(|r| Runs::Closed(r.clone()))
        .ok_or_else(|| w.not_running())
}

fn run(runs: &RunRegistry, id: RunId) -> Result<Arc<Run>> {
    runs.get(id).ok_or_else(|| {
        if crate::run::is_live_anywhere(id) {
            Error::new(
                Status::ForeignHandle,
                format!("run {id} belongs to another worker"),
            )
        } else {
            Error::new(
                Status::StaleHandle,
                format!("run {id} is not a live run (released, or never begun)"),
            )
        }
    })
}

/// Wait (None: forever). Ok(true) when terminal and successful, Ok(false) on timeout.
pub(crate) fn wait(e: &Arc<Engine>, id: RunId, timeout: Option<Duration>) -> Result<bool> {
    wait_in(&Runs::Running(e.clone()), id, timeout)
}

fn wait_in(runs: &Runs, id: RunId, timeout: Option<Duration>) -> Result<bool> {
    let r = run(runs.registry(), id)?;
    // (A closed worker's runs are all terminal, and no task or builder of it is left.)
    if let (None, Runs::Running(e)) = (timeout, runs) {
        refuse_unbounded_wait(e, &r)?;
    }
    if !r.wait(timeout) {
        return Ok(false);
    }
    match r.result() {
        Ok(()) => Ok(true),
        Err((m, FailureKind::Task)) => err(Status::TaskFailed, m.to_string()),
        Err((m, FailureKind::Orchestration)) => err(Status::OrchestrationFailed, m.to_string()),
    }
}

/// The unbounded waits that could never return: from a task, on its own run or on another
/// unfinished run of its worker (which may need the lane the task holds); by the builder, on
/// its run still open (only it can close the run, and the fence resolves after the close).
fn refuse_unbounded_wait(e: &Engine, r: &Run) -> Result<()> {
    let id = r.id;
    match crate::lane::running_on(e) {
        Some(own) if own == id => err(
            Status::WrongThread,
            format!(
                "waiting for run {id} from one of its own tasks, which would wait for itself \
                 (a timed wait or dagrt_run_done can ask)"
            ),
        ),
        Some(_) if !r.done() => err(
            Status::WrongThread,
            format!(
                "waiting without bound for run {id} from a task on a lane of the same worker, \
                 which the run may need (dagrt_wait_run_for can ask)"
            ),
        ),
        _ if !r.is_closed()
            && e.builder.load(std::sync::atomic::Ordering::Acquire)
                == crate::orchestrator::thread_token() =>
        {
            err(
                Status::WrongState,
                format!(
                    "run {id} is still open for submission on this thread, so it cannot end \
                     while this thread waits: close it first (dagrt_close_run_submission)"
                ),
            )
        }
        _ => Ok(()),
    }
}

/// Block until the run is terminal. DAGRT_STATUS_ORCHESTRATION_FAILED (message: the
/// submission's) if the run's submission failed, even after a task failure; else
/// DAGRT_STATUS_TASK_FAILED (message: the run's first failure, the earliest by when its task
/// failed) if any task failed. Repeatable: every wait
/// reports the same result. Called from one of the run's own tasks: DAGRT_STATUS_WRONG_THREAD
/// (the run cannot end while the task waits; `dagrt_wait_run_for` and `dagrt_run_done` can
/// be asked there); likewise from a task of another run of the same worker unless the run
/// has ended (it may need the lane the task holds). Called by the thread building the run
/// before it closed its submission: DAGRT_STATUS_WRONG_STATE (the run cannot end before
/// that close).
#[no_mangle]
pub extern "C" fn dagrt_wait_run(
    worker: *const super::worker::dagrt_worker_t,
    run: RunId,
) -> Status {
    boundary(|| wait_in(&runs(worker)?, run, None).map(|_| ()))
}

/// Wait at most `timeout_ms`. `*out_done` = 0 on timeout (status OK; the run is unaffected),
/// 1 when terminal, with the same status `dagrt_wait_run` gives; not written on any other
/// error (an unknown run, or one released meanwhile). Repeatable.
#[no_mangle]
pub extern "C" fn dagrt_wait_run_for(
    worker: *const super::worker::dagrt_worker_t,
    run: RunId,
    timeout_ms: u64,
    out_done: *mut u32,
) -> Status {
    boundary(|| {
        let out = need_mut(out_done, "out_done")?;
        let r = wait_in(&runs(worker)?, run, Some(Duration::from_millis(timeout_ms)));
        // Written for the run's own outcome only: on any other error (a run released
        // meanwhile by another thread: STALE_HANDLE) it is left alone, as out-parameters are.
        match &r {
            Ok(done) => *out = u32::from(*done),
            Err(x) if matches!(x.status, Status::TaskFailed | Status::OrchestrationFailed) => {
                *out = 1
            }
            Err(_) => {}
        }
        r.map(|_| ())
    })
}

/// `*out_done` = 1 if the run is terminal, else 0. Never blocks.
#[no_mangle]
pub extern "C" fn dagrt_run_done(
    worker: *const super::worker::dagrt_worker_t,
    run: RunId,
    out_done: *mut u32,
) -> Status {
    boundary(|| {
        let out = need_mut(out_done, "out_done")?;
        *out = self::run(runs(worker)?.registry(), run)?.done() as u32;
        Ok(())
    })
}

/// Per-run counts of completed, failed and cancelled tasks.
#[no_mangle]
pub extern "C" fn dagrt_run_stats(
    worker: *const super::worker::dagrt_worker_t,
    run: RunId,
    out: *mut RunStats,
) -> Status {
    boundary(|| {
        let out = need_mut(out, "out")?;
        let r = self::run(runs(worker)?.registry(), run)?;
        // `done` first: the counts are final before a run is marked done, so a snapshot that
        // says done also has the final counts (read the other way round, a run ending between
        // the reads was reported done with counts from before its end).
        let done = r.done();
        let RunCounts {
            completed,
            failed,
            cancelled,
        } = r.counts();
        *out = RunStats {
            completed,
            failed,
            cancelled,
            live_slots: if done { 0 } else { r.live_slots() },
            done: done as u32,
            reserved: 0,
        };
        Ok(())
    })
}

/// Forget a terminal run: its id (and its task handles) become stale.
/// DAGRT_STATUS_RUN_NOT_DONE if it has not finished.
#[no_mangle]
pub extern "C" fn dagrt_release_run(
    worker: *const super::worker::dagrt_worker_t,
    run: RunId,
) -> Status {
    boundary(|| {
        let runs = runs(worker)?;
        let r = self::run(runs.registry(), run)?;
        if !r.done() {
            return err(
                Status::RunNotDone,
                format!("run {run} has not finished; wait for it before releasing it"),
            );
        }
        if !runs.registry().remove_done(run) {
            return err(
                Status::StaleHandle,
                format!("run {run} was released by another call"),
            );
        }
        Ok(())
    })
}
