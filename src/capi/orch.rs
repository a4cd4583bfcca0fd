//! The orchestrator calls: run begin/close/fail, submits, alloc, scopes.

use super::worker::dagrt_orch_t;
use super::{boundary, need, need_mut, slice};
use crate::callable::Callable;
use crate::error::{Error, Result, Status};
use crate::orchestrator::thread_token;
use crate::orchestrator::{Orchestrator, SubmitKind};
use crate::run::RunId;
use crate::task::{CallConfig, TaskArgs, TaskHandle};
use std::ffi::{c_char, c_void};
use std::sync::atomic::Ordering;
use std::sync::TryLockError;

/// Run `f` on the orchestrator behind `orch`. While a run is being built, a call from another
/// thread is rejected (WRONG_THREAD) without touching the lock; otherwise calls take turns.
pub(crate) fn with_orch<T>(
    orch: *const dagrt_orch_t,
    f: impl FnOnce(&mut Orchestrator) -> Result<T>,
) -> Result<T> {
    let o = need(orch, "orch")?;
    // SAFETY: an orchestrator handle points into its live worker (caller contract).
    let w = unsafe { o.worker.as_ref() }.ok_or_else(|| {
        Error::new(
            Status::InvalidArgument,
            "orch is not an orchestrator handle",
        )
    })?;
    let m = w.worker.orchestrator()?;
    // A run being built belongs to its builder thread: anyone else is turned away without
    // touching the lock, so a rejected thread can never delay the builder.
    refuse_other_builder(w)?;
    // No run open and another thread is in a call (e.g. beginning a run): wait our turn, but
    // never blocked on the lock: a run that call begins is that thread's, and it may hold the
    // lock through a back-pressure wait for the lane this thread (a task) holds.
    let mut spins = 0u32;
    let mut g = loop {
        match m.try_lock() {
            Ok(g) => break g,
            Err(TryLockError::Poisoned(p)) => break p.into_inner(),
            Err(TryLockError::WouldBlock) => {}
        }
        refuse_other_builder(w)?;
        spins += 1;
        if spins < 64 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    };
    // The run may have begun while this thread waited.
    refuse_other_builder(w)?;
    f(&mut g)
}

/// WRONG_THREAD when a run is being built by another thread.
fn refuse_other_builder(w: &super::worker::dagrt_worker_t) -> Result<()> {
    let builder = w
        .worker
        .engine()
        .map_or(0, |e| e.builder.load(Ordering::Acquire));
    if builder != 0 && builder != thread_token() {
        return Err(Error::new(
            Status::WrongThread,
            "a run is being built on another thread; the orchestrator is single-threaded",
        ));
    }
    Ok(())
}

fn write_handle(out: *mut TaskHandle, h: TaskHandle) {
    // SAFETY: a non-null out-pointer is writable (caller contract).
    if let Some(o) = unsafe { out.as_mut() } {
        *o = h;
    }
}

/// Begin a run on this thread: opens its outer scope; this thread becomes its builder (only
/// it can close the run: a thread that ends with its run open leaves the worker to
/// `dagrt_worker_free`, which abandons the run).
/// DAGRT_STATUS_WRONG_STATE if this thread's run is still open, the worker is closing, or
/// this is the worker's orchestration callback (its run is the callback's to build);
/// DAGRT_STATUS_WRONG_THREAD if another thread is building a run.
#[no_mangle]
pub extern "C" fn dagrt_begin_run(orch: *mut dagrt_orch_t, out_run: *mut RunId) -> Status {
    boundary(|| {
        let out = need_mut(out_run, "out_run")?;
        if super::worker::in_callback_of(need(orch, "orch")?.worker) {
            return Err(Error::new(
                Status::WrongState,
                "called from inside this worker's orchestration callback, which builds the \
                 run dagrt_worker_submit began (even after failing it)",
            ));
        }
        *out = with_orch(orch, |o| o.begin_run())?;
        Ok(())
    })
}

/// Close the run's submission: ends its outer scope and lets its fence resolve. Nested
/// scopes must have been ended (else DAGRT_STATUS_SCOPE_UNBALANCED, the run stays open).
/// Inside `dagrt_worker_submit`'s callback: DAGRT_STATUS_WRONG_STATE (the call closes the
/// run when the callback returns, or fails it if the callback returns non-zero).
#[no_mangle]
pub extern "C" fn dagrt_close_run_submission(orch: *mut dagrt_orch_t, run: RunId) -> Status {
    boundary(|| {
        let in_callback = super::worker::in_callback_of(need(orch, "orch")?.worker);
        with_orch(orch, |o| {
            if in_callback && o.current_run() == Some(run) {
                return Err(Error::new(
                    Status::WrongState,
                    "called from inside this worker's orchestration callback: its run is \
                     closed when the callback returns (return non-zero, or call \
                     dagrt_fail_run_submission, to fail it)",
                ));
            }
            o.close_run_submission(run)
        })
    })
}

/// Fail the run's submission with `msg` (NULL: a generic message; invalid UTF-8 is replaced
/// with U+FFFD): the run will end with this failure, and submission is closed (open nested
/// scopes are ended). Allowed inside `dagrt_worker_submit`'s callback, which then returns
/// DAGRT_STATUS_ORCHESTRATION_FAILED with this message.
#[no_mangle]
pub extern "C" fn dagrt_fail_run_submission(
    orch: *mut dagrt_orch_t,
    run: RunId,
    msg: *const c_char,
) -> Status {
    boundary(|| {
        let m = if msg.is_null() {
            "run submission failed".to_owned()
        } else {
            super::need_text(msg, "msg")?
        };
        with_orch(orch, |o| o.fail_run_submission(run, &m))
    })
}

/// Submit one NEXT_LEVEL task to the lane with stable id `worker`. `config` may be NULL
/// (zeroed config). `out` (may be NULL) receives the task handle. The args' arrays are read
/// during the call only; auto-allocated OUTPUT addresses are written back into `args->tensors`.
#[no_mangle]
pub extern "C" fn dagrt_submit_next_level(
    orch: *mut dagrt_orch_t,
    callable: *const Callable,
    args: *const TaskArgs,
    config: *const CallConfig,
    worker: i32,
    out: *mut TaskHandle,
) -> Status {
    boundary(|| {
        let c = need(callable, "callable")?;
        let a = need(args, "args")?;
        // SAFETY: a non-null config points at a dagrt_call_config.
        let cfg = unsafe { config.as_ref() }.copied().unwrap_or_default();
        let h = with_orch(orch, |o| {
            o.submit(
                SubmitKind::NextLevel,
                c,
                std::slice::from_ref(a),
                &cfg,
                &[worker],
            )
        })?;
        write_handle(out, h);
        Ok(())
    })
}

/// Submit a NEXT_LEVEL group: one DAG node whose `count` members run at once, member i on
/// the lane with stable id `workers[i]` (unique, registered). Validated before any
/// dependency work. Members may share tensors arrays, except one holding an auto-allocated
/// OUTPUT (each member's allocated address is written back into its own array):
/// DAGRT_STATUS_INVALID_ARGUMENT.
#[no_mangle]
pub extern "C" fn dagrt_submit_next_level_group(
    orch: *mut dagrt_orch_t,
    callable: *const Callable,
    args_list: *const TaskArgs,
    count: u32,
    config: *const CallConfig,
    workers: *const i32,
    out: *mut TaskHandle,
) -> Status {
    boundary(|| {
        let c = need(callable, "callable")?;
        let a = slice(args_list, count, "args_list")?;
        let w = slice(workers, count, "workers")?;
        // SAFETY: as above.
        let cfg = unsafe { config.as_ref() }.copied().unwrap_or_default();
        let h = with_orch(orch, |o| {
            o.submit(SubmitKind::NextLevelGroup, c, a, &cfg, w)
        })?;
        write_handle(out, h);
        Ok(())
    })
}

/// Submit one SUB task: any idle SUB lane runs it. SUB tasks share one FIFO: long tasks
/// start in the order they became ready; of short ones (under about 20 us) a lane may hold
/// a few queued, which can start a few microseconds out of that order.
#[no_mangle]
pub extern "C" fn dagrt_submit_sub(
    orch: *mut dagrt_orch_t,
    callable: *const Callable,
    args: *const TaskArgs,
    out: *mut TaskHandle,
) -> Status {
    boundary(|| {
        let c = need(callable, "callable")?;
        let a = need(args, "args")?;
        let h = with_orch(orch, |o| {
            o.submit(
                SubmitKind::Sub,
                c,
                std::slice::from_ref(a),
                &CallConfig::default(),
                &[],
            )
        })?;
        write_handle(out, h);
        Ok(())
    })
}

/// Submit a SUB group: `count` members on distinct idle SUB lanes, one DAG node. Members'
/// tensors arrays as for `dagrt_submit_next_level_group`.
#[no_mangle]
pub extern "C" fn dagrt_submit_sub_group(
    orch: *mut dagrt_orch_t,
    callable: *const Callable,
    args_list: *const TaskArgs,
    count: u32,
    out: *mut TaskHandle,
) -> Status {
    boundary(|| {
        let c = need(callable, "callable")?;
        let a = slice(args_list, count, "args_list")?;
        let h = with_orch(orch, |o| {
            o.submit(SubmitKind::SubGroup, c, a, &CallConfig::default(), &[])
        })?;
        write_handle(out, h);
        Ok(())
    })
}

/// Allocate a runtime-owned buffer of `shape[0..ndim]` elements of `dtype` from the heap ring
/// of the current scope: a synthetic completed task owns it, later INPUT/INOUT tensors on it
/// depend on it and hold it, and it is reclaimed once its scope has ended and they are done
/// (tag a writer INOUT to keep it alive while writing: OUTPUT and OUTPUT_EXISTING do not
/// hold it). `out_ptr` receives the 1024-aligned address, `out_handle` (may
/// be NULL) the synthetic task's handle. A shape with a zero extent takes no heap space:
/// `out_ptr` receives NULL, and the synthetic task (a handle to depend on) is made as usual.
#[no_mangle]
pub extern "C" fn dagrt_alloc(
    orch: *mut dagrt_orch_t,
    shape: *const u64,
    ndim: u32,
    dtype: u32,
    out_ptr: *mut *mut c_void,
    out_handle: *mut TaskHandle,
) -> Status {
    boundary(|| {
        let s = slice(shape, ndim, "shape")?;
        let out = need_mut(out_ptr, "out_ptr")?;
        let (p, h) = with_orch(orch, |o| o.alloc(s, dtype))?;
        *out = p.cast();
        write_handle(out_handle, h);
        Ok(())
    })
}

/// Open a nested scope (up to 64 on top of the run's outer scope). Tasks submitted inside it
/// use the heap ring of its depth (the outer scope is depth 0; there are 4 rings, and depths
/// 3 and deeper share the fourth) and are released for reclamation at `dagrt_scope_end`.
#[no_mangle]
pub extern "C" fn dagrt_scope_begin(orch: *mut dagrt_orch_t) -> Status {
    boundary(|| with_orch(orch, |o| o.scope_begin()))
}

/// End the innermost nested scope without waiting: each of its tasks gives up its scope
/// reference. DAGRT_STATUS_SCOPE_UNBALANCED if no nested scope is open.
#[no_mangle]
pub extern "C" fn dagrt_scope_end(orch: *mut dagrt_orch_t) -> Status {
    boundary(|| with_orch(orch, |o| o.scope_end()))
}
