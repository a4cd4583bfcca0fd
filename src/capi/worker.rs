//! Worker lifecycle, the orchestration-callback convenience calls and introspection.

use super::{boundary, error_count, last_error_string, need_mut, slice};
use crate::error::{err, Error, Result, Status};
use crate::ring::MAX_RING_DEPTH;
use crate::run::RunId;
use crate::worker::{Worker, WorkerConfig};

/// An engine instance: Orchestrator + Scheduler + lanes. Created by `dagrt_worker_new`, freed
/// by `dagrt_worker_free`. Configuration calls (add lanes, init, close, free) must not run
/// concurrently with any other call on the same worker; run calls (wait, done, release,
/// stats) are thread-safe. Using a worker after `dagrt_worker_free` is undefined behaviour.
pub struct dagrt_worker_t {
    pub(crate) worker: Worker,
    pub(crate) orch: dagrt_orch_t,
}

/// The worker's orchestrator: the DAG builder. Borrowed from its worker (never freed by the
/// caller). Single-threaded: only the thread that began a run may submit to it; a call from
/// another thread is rejected with DAGRT_STATUS_WRONG_THREAD.
pub struct dagrt_orch_t {
    pub(crate) worker: *const dagrt_worker_t,
}

/// An orchestration callback: builds a graph on `orch`. Return 0 on success; any other value
/// fails the run's submission.
/// NULL is rejected. As for executors, an exception must not escape it (dagrt aborts the
/// process) nor a `longjmp` leave it.
pub type OrchFn =
    Option<unsafe extern "C" fn(orch: *mut dagrt_orch_t, ctx: *mut std::ffi::c_void) -> i32>;
type OrchCallback =
    unsafe extern "C" fn(orch: *mut dagrt_orch_t, ctx: *mut std::ffi::c_void) -> i32;

/// Counters for tests and operators.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct WorkerStats {
    /// Slots not FREE (building, pending, ready, running, terminal but referenced).
    pub live_slots: i64,
    /// Entries in the TensorMap, all runs.
    pub tensormap_entries: u64,
    /// Runs registered (not yet released).
    pub runs: u64,
    /// Tasks READY and waiting for a lane.
    pub ready_queued: u64,
    /// Per heap ring: monotonic top and tail byte positions (equal when the ring is empty).
    pub heap_top: [u64; 4],
    pub heap_tail: [u64; 4],
    /// Per heap ring: its first byte's address and its size in bytes (the configured
    /// `heap_ring_size` rounded up to 1024). A position `p` of the ring is the byte at
    /// `heap_base[r] + p % heap_size[r]`.
    pub heap_base: [usize; 4],
    pub heap_size: [u64; 4],
}

/// The engine of an initialised worker.
fn engine_of(w: &dagrt_worker_t) -> Result<&std::sync::Arc<crate::worker::Engine>> {
    w.worker.engine().ok_or_else(|| w.worker.not_running())
}

/// Every call that may overlap another on the same worker takes it shared: run queries and
/// stats from other threads, and the orchestration path, whose callback re-enters the API
/// through the orch handle (which reaches the worker by its own pointer), so an exclusive
/// reference held across the callback would be aliased.
pub(crate) fn worker_ref<'a>(w: *const dagrt_worker_t) -> Result<&'a dagrt_worker_t> {
    let w: &dagrt_worker_t = super::need(w, "worker")?;
    w.worker.check_process()?;
    Ok(w)
}

/// Exclusive: only the configuration and lifecycle calls (add lanes, init, close, free),
/// which the API documents as not racing with other calls on the worker. Refused inside the
/// worker's own orchestration callback, whose caller holds the worker shared, and from a task
/// running on one of its lanes, whose host thread may be inside a call on the worker (a wait)
/// while the task runs. `what` names the call in the latter's message.
fn worker_mut<'a>(w: *mut dagrt_worker_t, what: &str) -> Result<&'a mut dagrt_worker_t> {
    not_in_callback(w)?;
    worker_ref(w)?.worker.refuse_own_task(what)?;
    need_mut(w, "worker")
}

/// How deeply orchestration callbacks may nest on one thread (a callback running another
/// worker's callback, and so on).
const MAX_NESTED_CALLBACKS: usize = 16;

type CallbackStack = ([(usize, u32); MAX_NESTED_CALLBACKS], usize);

thread_local! {
    /// The workers whose orchestration callbacks (`dagrt_worker_submit` / `_run`) this thread
    /// is running, as addresses with the fork generation they were entered in, innermost
    /// last (with the depth): a callback may run another worker's, and is still inside its
    /// own while that one runs. A child forked inside a callback is in none (the worker is
    /// its parent's, and a worker of its own may get the freed handle's address).
    /// Fixed-size and `Copy`, so it has no destructor: a worker closed or freed from a
    /// thread-local destructor or an `atexit` handler still finds it (a `Vec` here is torn
    /// down before those run, and reading it then panics).
    static IN_CALLBACK: std::cell::Cell<CallbackStack> =
        const { std::cell::Cell::new(([(0, 0); MAX_NESTED_CALLBACKS], 0)) };
}

/// Whether this thread is inside `w`'s orchestration callback, however deeply nested.
pub(super) fn in_callback_of(w: *const dagrt_worker_t) -> bool {
    let me = (w as usize, crate::fork::generation());
    let (stack, depth) = IN_CALLBACK.with(|c| c.get());
    !w.is_null() && stack[..depth].contains(&me)
}

/// Marks the calling thread as inside `w`'s callback until dropped.
struct InCallback;

impl InCallback {
    fn enter(w: &dagrt_worker_t) -> Result<InCallback> {
        let me = (
            w as *const dagrt_worker_t as usize,
            crate::fork::generation(),
        );
        let (mut stack, depth) = IN_CALLBACK.with(|c| c.get());
        if depth == MAX_NESTED_CALLBACKS {
            return err(
                Status::WrongState,
                format!(
                    "orchestration callbacks nest more than {MAX_NESTED_CALLBACKS} deep on \
                     this thread"
                ),
            );
        }
        stack[depth] = me;
        IN_CALLBACK.with(|c| c.set((stack, depth + 1)));
        Ok(InCallback)
    }
}

impl Drop for InCallback {
    fn drop(&mut self) {
        IN_CALLBACK.with(|c| {
            let (stack, depth) = c.get();
            c.set((stack, depth - 1));
        });
    }
}

/// A worker must not be reconfigured, closed or freed from inside its own orchestration
/// callback: the call that runs the callback goes on using it when the callback returns.
/// Nor from inside the log hook, which init and close call on the host thread midway.
fn not_in_callback(w: *const dagrt_worker_t) -> Result<()> {
    if in_callback_of(w) {
        return err(
            Status::WrongState,
            "called from inside this worker's orchestration callback, which goes on using \
             the worker when the callback returns",
        );
    }
    if crate::log::in_hook() {
        return err(
            Status::WrongState,
            "called from inside the log hook: a worker is not configured, closed or freed \
             there (init and close call the hook midway)",
        );
    }
    Ok(())
}

/// Fill `out` with the default configuration (1 GiB per heap ring, 1048576-slot task window,
/// 10 s back-pressure timeout). Thread-safe.
#[no_mangle]
pub extern "C" fn dagrt_worker_config_default(out: *mut WorkerConfig) -> Status {
    boundary(|| {
        *need_mut(out, "out")? = WorkerConfig::default();
        Ok(())
    })
}

/// Create a worker (not yet started) from `config` (NULL: defaults). Free with
/// `dagrt_worker_free`.
#[no_mangle]
pub extern "C" fn dagrt_worker_new(
    config: *const WorkerConfig,
    out: *mut *mut dagrt_worker_t,
) -> Status {
    boundary(|| {
        let out = need_mut(out, "out")?;
        // SAFETY: a non-null config points at a dagrt_worker_config.
        let cfg = unsafe { config.as_ref() }.copied().unwrap_or_default();
        let worker = Worker::new(cfg)?;
        let b = Box::into_raw(Box::new(dagrt_worker_t {
            worker,
            orch: dagrt_orch_t {
                worker: std::ptr::null(),
            },
        }));
        // SAFETY: b was just allocated; the orchestrator handle points back at its worker.
        unsafe { (*b).orch.worker = b };
        *out = b;
        Ok(())
    })
}

/// Add a NEXT_LEVEL thread lane with stable id `worker_id` (>= 0, unique). Before init only.
#[no_mangle]
pub extern "C" fn dagrt_worker_add_next_level_lane(
    worker: *mut dagrt_worker_t,
    worker_id: i32,
) -> Status {
    boundary(|| {
        worker_mut(worker, "dagrt_worker_add_next_level_lane")?
            .worker
            .add_next_level_lane(worker_id)
    })
}

/// Add `count` SUB thread lanes: 1 or more, and no more than bring the lanes added so far to
/// 1024 (DAGRT_STATUS_INVALID_ARGUMENT otherwise). Before init only.
#[no_mangle]
pub extern "C" fn dagrt_worker_add_sub_lanes(worker: *mut dagrt_worker_t, count: u32) -> Status {
    boundary(|| {
        worker_mut(worker, "dagrt_worker_add_sub_lanes")?
            .worker
            .add_sub_lanes(count)
    })
}

/// Pin the lane threads to CPUs: lane i, in the order lanes were added, runs on
/// `cpus[i % count]`; `count` 0 (`cpus` may then be NULL) leaves them unpinned, the default.
/// Every CPU must be in the calling thread's affinity mask, and `count` at most 1024
/// (DAGRT_STATUS_INVALID_ARGUMENT otherwise). Pinning suits long kernels, which keep their data in one core's caches; with
/// tiny tasks and no spare core it keeps the submitting thread off a lane's core. Before init
/// only.
#[no_mangle]
pub extern "C" fn dagrt_worker_set_lane_cpus(
    worker: *mut dagrt_worker_t,
    cpus: *const i32,
    count: u32,
) -> Status {
    boundary(|| {
        let w = worker_mut(worker, "dagrt_worker_set_lane_cpus")?;
        let cpus = slice(cpus, count, "cpus")?;
        w.worker.set_lane_cpus(cpus)
    })
}

/// Start the worker: fork hygiene, map the heap rings, start lanes, then the scheduler.
/// Fork hygiene, on the process's first init only: each of OMP_NUM_THREADS,
/// OPENBLAS_NUM_THREADS, MKL_NUM_THREADS and BLIS_NUM_THREADS that is unset is set to "1"
/// (setenv), so a BLAS or OpenMP pool linked into task code starts one thread per lane rather
/// than one per core per lane; values already set are kept. setenv is not safe beside a
/// concurrent getenv/setenv on another thread: call the first init before starting threads
/// that read the environment, or set these variables yourself.
/// fork(): a child has only the forking thread, so a worker initialised before the fork is
/// the parent's: in the child every call on it returns DAGRT_STATUS_WRONG_STATE, and
/// `dagrt_worker_free` releases the handle only. The child may register callables, set the
/// log hook and create workers of its own (dagrt's process-wide locks are taken around a
/// fork, so none is inherited held).
#[no_mangle]
pub extern "C" fn dagrt_worker_init(worker: *mut dagrt_worker_t) -> Status {
    boundary(|| worker_mut(worker, "dagrt_worker_init")?.worker.init())
}

/// Stop the worker: waits for every closed run to finish, however long that takes (see
/// `dagrt_worker_close_for` for a bounded close), then joins its threads. Fails with
/// DAGRT_STATUS_WRONG_STATE if a run is still open for submission, and with
/// DAGRT_STATUS_WRONG_THREAD when called from a task running on one of the worker's lanes
/// (it would wait for that task). Idempotent. A worker closed before it was initialised
/// stays closed: init and adding lanes then fail with DAGRT_STATUS_WRONG_STATE. The runs it
/// ran keep their results: `dagrt_wait_run`, `_wait_run_for`, `_run_done`, `_run_stats` and
/// `_release_run` work on them as before, until they are released or the worker is freed;
/// the other calls fail with DAGRT_STATUS_WRONG_STATE ("the worker is closed").
#[no_mangle]
pub extern "C" fn dagrt_worker_close(worker: *mut dagrt_worker_t) -> Status {
    boundary(|| worker_mut(worker, "dagrt_worker_close")?.worker.close())
}

/// Stop the worker within a cleanup budget of `timeout_ms`: as `dagrt_worker_close`, but when
/// the budget runs out with closed runs still running, `*out_closed` = 0 (status OK) and
/// nothing is torn down: the worker keeps running them and refuses new runs
/// (`dagrt_begin_run` fails with DAGRT_STATUS_WRONG_STATE); close it again later.
/// `*out_closed` = 1 once it is closed. Fails with DAGRT_STATUS_WRONG_STATE if a run is still
/// open for submission, and with DAGRT_STATUS_WRONG_THREAD when called from a task running on
/// one of the worker's lanes (as do the calls that add lanes, pin them, or init).
#[no_mangle]
pub extern "C" fn dagrt_worker_close_for(
    worker: *mut dagrt_worker_t,
    timeout_ms: u64,
    out_closed: *mut u32,
) -> Status {
    boundary(|| {
        let out = need_mut(out_closed, "out_closed")?;
        let budget = std::time::Duration::from_millis(timeout_ms);
        *out = worker_mut(worker, "dagrt_worker_close_for")?
            .worker
            .close_within(Some(budget))? as u32;
        Ok(())
    })
}

/// Close (failing any open run's submission) and free the worker. NULL is a no-op. Like
/// `dagrt_worker_close` it waits for the closed runs' tasks to end: bound that with
/// `dagrt_worker_close_for` first. Called from a task running on one of the worker's lanes it
/// frees nothing (that would wait for the task) and leaves DAGRT_STATUS_WRONG_THREAD in
/// `dagrt_last_error`; from inside the worker's own orchestration callback or the log hook,
/// likewise with DAGRT_STATUS_WRONG_STATE. In a forked child, on a worker initialised before
/// the fork, it releases the handle only: the threads and runs are the parent's.
#[no_mangle]
pub extern "C" fn dagrt_worker_free(worker: *mut dagrt_worker_t) {
    let _ = boundary(|| {
        if worker.is_null() {
            return Ok(());
        }
        // SAFETY: a non-null handle from dagrt_worker_new (caller contract).
        if unsafe { &*worker }.worker.inherited() {
            // A forked child's copy of a worker from before the fork: only the handle goes
            // (the worker's Drop forgets what belongs to the parent).
            // SAFETY: as below.
            drop(unsafe { Box::from_raw(worker) });
            return Ok(());
        }
        // Refused as any exclusive use is; nothing is freed then, and the handle stays valid
        // for a later free.
        worker_mut(worker, "dagrt_worker_free")?;
        // SAFETY: the pointer came from dagrt_worker_new and is freed once (caller contract).
        drop(unsafe { Box::from_raw(worker) });
        Ok(())
    });
}

/// The worker's orchestrator handle (borrowed; valid until the worker is freed). The worker
/// must be initialised.
#[no_mangle]
pub extern "C" fn dagrt_worker_orch(
    worker: *mut dagrt_worker_t,
    out: *mut *mut dagrt_orch_t,
) -> Status {
    boundary(|| {
        let w = worker_ref(worker)?;
        w.worker.orchestrator()?;
        // Handed out as *mut for the C API's sake; nothing writes through it (see with_orch).
        *need_mut(out, "out")? = &w.orch as *const dagrt_orch_t as *mut dagrt_orch_t;
        Ok(())
    })
}

/// Begin a run, call `orch_fn(orch, ctx)` to build its graph on this thread, then close
/// submission (ending any nested scope the callback left open) and write the run id. If the
/// callback returns non-zero, the run's submission fails with the callback's message (the
/// last dagrt error the callback saw, if any); the run id is still written, and the status is
/// DAGRT_STATUS_ORCHESTRATION_FAILED. The callback may fail its run itself with
/// `dagrt_fail_run_submission` (the status is then ORCHESTRATION_FAILED with that message,
/// whatever the callback returns); closing it there is refused. Wait for the run with
/// `dagrt_wait_run`; release it with `dagrt_release_run`. A callback may submit to another
/// worker, whose callback may do the same, up to 16 deep on one thread; the 17th is refused
/// with DAGRT_STATUS_WRONG_STATE and begins no run, as is a call for this worker from inside
/// its own callback (even after the callback failed its run).
#[no_mangle]
pub extern "C" fn dagrt_worker_submit(
    worker: *mut dagrt_worker_t,
    orch_fn: OrchFn,
    ctx: *mut std::ffi::c_void,
    out_run: *mut RunId,
) -> Status {
    boundary(|| {
        let w = worker_ref(worker)?;
        let f = orch_fn.ok_or_else(|| Error::new(Status::NullPointer, "orch_fn is NULL"))?;
        let out_run = need_mut(out_run, "out_run")?;
        submit(w, f, ctx, out_run)
    })
}

fn submit(
    w: &dagrt_worker_t,
    f: OrchCallback,
    ctx: *mut std::ffi::c_void,
    out_run: &mut RunId,
) -> Result<()> {
    if in_callback_of(w) {
        return err(
            Status::WrongState,
            "called from inside this worker's orchestration callback, which builds the run \
             the outer call began (even after failing it)",
        );
    }
    // Entered before the run begins: a callback nested too deep is refused with no run left
    // open.
    let inside = InCallback::enter(w)?;
    let run = super::orch::with_orch(&w.orch, |o| o.begin_run())?;
    // Held across the callback: it may fail the run, wait for it and release it.
    let held = engine_of(w)?.runs.get(run);
    let errors_before = error_count();
    // SAFETY: the host's callback, called with its own context and our orchestrator handle.
    let rc = unsafe { f(&w.orch as *const dagrt_orch_t as *mut dagrt_orch_t, ctx) };
    drop(inside);
    *out_run = run;
    // The callback may have failed its run itself (dagrt_fail_run_submission; closing it is
    // refused): the run's own message is the answer, whatever the callback returned. Asked
    // of the run, not the orchestrator, which another thread may be building on by now.
    if let Some(r) = held.filter(|r| r.is_closed()) {
        return err(
            Status::OrchestrationFailed,
            match r.result() {
                Err((m, _)) => m.to_string(),
                Ok(()) => format!("run {run} was closed inside its orchestration callback"),
            },
        );
    }
    if rc != 0 {
        let seen = if error_count() > errors_before {
            last_error_string()
        } else {
            String::new()
        };
        let msg = if seen.is_empty() {
            format!("orchestration callback returned {rc}")
        } else {
            format!("orchestration callback returned {rc}: {seen}")
        };
        super::orch::with_orch(&w.orch, |o| o.fail_run_submission(run, &msg))?;
        return err(Status::OrchestrationFailed, msg);
    }
    super::orch::with_orch(&w.orch, |o| {
        o.end_open_scopes();
        o.close_run_submission(run)
    })
}

/// `dagrt_worker_submit`, then wait for the run and release it. Returns the run's terminal
/// status (DAGRT_STATUS_TASK_FAILED with the first failure message when a task failed).
/// Called from a task running on this worker's lane: DAGRT_STATUS_WRONG_THREAD (the wait
/// could need the lane the task holds).
#[no_mangle]
pub extern "C" fn dagrt_worker_run(
    worker: *mut dagrt_worker_t,
    orch_fn: OrchFn,
    ctx: *mut std::ffi::c_void,
) -> Status {
    boundary(|| {
        let w = worker_ref(worker)?;
        let f = orch_fn.ok_or_else(|| Error::new(Status::NullPointer, "orch_fn is NULL"))?;
        if engine_of(w).is_ok_and(|e| crate::lane::running_on(e).is_some()) {
            return err(
                Status::WrongThread,
                "dagrt_worker_run from a task running on this worker's lane: the run would be \
                 waited for while the task holds a lane it may need (use dagrt_worker_submit \
                 and dagrt_wait_run_for, or another worker)",
            );
        }
        let mut run = 0;
        let r = submit(w, f, ctx, &mut run);
        if run == 0 {
            return r;
        }
        let e = engine_of(w)?.clone();
        let res = super::run::wait(&e, run, None).map(|_| ());
        e.runs.remove_done(run);
        r.and(res)
    })
}

/// Introspection counters (thread-safe). The worker must be initialised.
#[no_mangle]
pub extern "C" fn dagrt_worker_stats(
    worker: *const dagrt_worker_t,
    out: *mut WorkerStats,
) -> Status {
    boundary(|| {
        let w = worker_ref(worker)?;
        let out = need_mut(out, "out")?;
        let e = engine_of(w)?;
        let mut s = WorkerStats {
            live_slots: e.slots.live(),
            tensormap_entries: e.tensormap.len() as u64,
            runs: e.runs.len() as u64,
            ready_queued: crate::scheduler::queued(e) as u64,
            ..Default::default()
        };
        for r in 0..MAX_RING_DEPTH {
            s.heap_top[r] = e.heap.rings[r].top();
            s.heap_tail[r] = e.heap.rings[r].tail();
            s.heap_base[r] = e.heap.rings[r].base() as usize;
            s.heap_size[r] = e.heap.rings[r].size();
        }
        *out = s;
        Ok(())
    })
}

/// Start recording a timeline trace, written to `path` (Chrome trace-event JSON, opens in
/// Perfetto or chrome://tracing) by `dagrt_worker_trace_stop` or at close: one track per lane,
/// one slice per task with its callable name, run id and slot, flow arrows for dependency
/// edges, and the scheduler's passes (completions, dispatch, reclaim). The file is opened
/// now, created if missing: DAGRT_STATUS_SYSTEM if it cannot be, DAGRT_STATUS_WRONG_STATE if
/// a trace is already being recorded (stop it first). A new trace drops the events of an earlier one, including
/// the graph of a run still being built or running: start a trace before building the runs it
/// should show (their flow arrows and DOT export come from the recorded graph). Setting the
/// DAGRT_TRACE environment variable to a path starts a trace at init (a path that cannot be
/// created is logged as an error, and the worker runs untraced); with several workers in the
/// process, the first one records into that path and the k-th later one into the path with
/// `.k` before its extension (`t.json`, `t.1.json`, ...), and in a forked child, whose count
/// goes on from its parent's, with `.pid<N>` first (`t.pid77.json`, `t.pid77.2.json`); such
/// a file is written when the worker is closed or freed, so a process that exits without
/// freeing its workers leaves it empty, or as it was if it existed, and leaves the
/// temporary file beside it. The trace replaces the file whole when it stops (written under
/// a temporary name beside it, made at the start, then renamed; a symlink's target is
/// replaced and the link kept; a pipe or device is written directly). The worker must be initialised.
/// Thread-safe, like `dagrt_worker_trace_stop` and `dagrt_worker_write_dot`: tracing calls
/// from several threads take turns.
#[no_mangle]
pub extern "C" fn dagrt_worker_trace_start(
    worker: *mut dagrt_worker_t,
    path: *const std::ffi::c_char,
) -> Status {
    boundary(|| {
        let p = super::need_path(path, "path")?;
        let w = worker_ref(worker)?;
        let e = engine_of(w)?;
        e.trace.start(p).map_err(|x| {
            let status = match x {
                crate::trace::StartError::Recording(_) => Status::WrongState,
                crate::trace::StartError::Create(..) => Status::System,
            };
            Error::new(status, x.to_string())
        })
    })
}

/// Stop recording and write the trace file started by `dagrt_worker_trace_start` (or
/// DAGRT_TRACE). A no-op when no trace is being recorded. DAGRT_STATUS_SYSTEM, naming the
/// file, if writing it fails (the recording is over either way). A worker closed or freed
/// while recording writes its file then (a failure is logged).
#[no_mangle]
pub extern "C" fn dagrt_worker_trace_stop(worker: *mut dagrt_worker_t) -> Status {
    boundary(|| {
        let w = worker_ref(worker)?;
        let e = engine_of(w)?;
        e.trace.stop().map_err(|(p, x)| {
            Error::new(
                Status::System,
                format!("writing the trace {}: {x}", p.display()),
            )
        })?;
        Ok(())
    })
}

/// Write the DAG of `run` (tasks and dependency edges recorded while a trace was being
/// recorded) to `path` in Graphviz DOT. Dashed edges are ordering-only (add_dep_wait).
/// DAGRT_STATUS_INVALID_ARGUMENT if no graph of `run` is recorded (no trace was recording
/// while it was built, or a trace started since dropped it), DAGRT_STATUS_SYSTEM if `path`
/// cannot be written. The file is replaced whole, as the trace file is (see
/// `dagrt_worker_trace_start`), so concurrent exports to one path leave one whole document.
/// The worker must be initialised. Control characters in callable names are shown as '?'.
#[no_mangle]
pub extern "C" fn dagrt_worker_write_dot(
    worker: *mut dagrt_worker_t,
    run: RunId,
    path: *const std::ffi::c_char,
) -> Status {
    boundary(|| {
        let p = super::need_path(path, "path")?;
        let w = worker_ref(worker)?;
        let e = engine_of(w)?;
        let dot = e.trace.dot(run).ok_or_else(|| {
            Error::new(
                Status::InvalidArgument,
                format!(
                    "no graph was recorded for run {run}: it has no tasks, or no trace was \
                     recording while it was built (start one before building it)"
                ),
            )
        })?;
        let system = |p: &std::path::Path, x| {
            Error::new(Status::System, format!("writing {}: {x}", p.display()))
        };
        let f = crate::wholefile::WholeFile::open(&p).map_err(|(p, x)| system(&p, x))?;
        f.commit(|mut f| {
            std::io::Write::write_all(&mut f, dot.as_bytes())?;
            Ok(f)
        })
        .map_err(|x| system(&p, x))
    })
}
