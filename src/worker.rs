//! The Worker: composes Orchestrator, Scheduler and lanes. `init` runs fork hygiene, maps
//! the heap rings, then starts lane threads and finally the scheduler thread; `close` drains
//! and joins them.

use crate::error::{err, Error, Result, Status};
use crate::event::Event;
use crate::lane::{Lane, LaneKind, Mailbox};
use crate::orchestrator::Orchestrator;
use crate::ring::{HeapRings, SlotTable};
use crate::run::RunRegistry;
use crate::spsc::Padded;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Worker construction parameters.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerConfig {
    /// Bytes per heap ring (four rings are mapped). Default 1 GiB; pages are lazy.
    pub heap_ring_size: u64,
    /// Task window: slots in flight at once (1..=16777216). Default 1048576; slot memory
    /// grows with the slots actually in flight, in chunks of 4096.
    pub task_window: u32,
    /// Back-pressure timeout of a submit or alloc, in ms: it fails once it has waited this
    /// long with no progress (no slot freed, no reservation of its heap ring reclaimed):
    /// the slot it waited for is progress, so its heap wait then has a window of its own.
    /// Default 10000.
    pub timeout_ms: u32,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            heap_ring_size: 1 << 30,
            task_window: 1 << 20,
            timeout_ms: 10_000,
        }
    }
}

/// The state the orchestrator, scheduler and lanes share.
pub struct Engine {
    pub cfg: WorkerConfig,
    pub slots: SlotTable,
    pub heap: HeapRings,
    /// (The TensorMap lock, the ready inbox's counters, the wake edge and the scheduler role
    /// each sit on a line of their own: they are written per task by different threads,
    /// beside fields every thread reads per task.)
    pub tensormap: Padded<crate::tensormap::TensorMap>,
    /// Slots made READY off the scheduler thread (immediately-ready submits), on their way
    /// to the scheduler's own ready queues. Single producer (the orchestrator, under its
    /// lock), single consumer (the scheduler role's holder).
    pub ready_in: crate::spsc::Inbox<(crate::slot::SlotId, crate::slot::Route)>,
    /// The scheduler's wake edge.
    pub sched_event: Padded<Event>,
    /// The scheduler role: its queues and lane books. Whoever holds this lock is the single
    /// progress owner for that pass: the scheduler thread, or a lane that just completed a
    /// job and would otherwise have to wake the parked scheduler thread.
    pub sched: Padded<std::sync::Mutex<Option<crate::scheduler::Sched>>>,
    /// Notified when a run's fence reaches zero.
    pub run_event: Arc<Event>,
    /// Shared with the `Worker`, which keeps it past `close`: the runs' results outlive the
    /// engine (Orchestrator seed: repeated waits replay the same terminal result).
    pub runs: Arc<RunRegistry>,
    pub lanes: Vec<Lane>,
    sub_lanes: usize,
    /// Stable NEXT_LEVEL worker id -> lane index; frozen at init.
    pub lane_by_worker: HashMap<i32, u32>,
    /// Threads exit (run lifecycle: close stops them only once every run is terminal);
    /// Release/Acquire, so a thread that sees it also sees the drained runs.
    pub stop: AtomicBool,
    /// A close is draining the runs (its budget may have run out): new runs are refused.
    pub closing: AtomicBool,
    /// Jobs taken back from a SUB lane's mailbox for an idle lane (a count for tests: written
    /// by the scheduler role only, on that rare path).
    pub sub_moves: std::sync::atomic::AtomicU64,
    /// Thread token of the thread building the open run (0: none). Read without the
    /// orchestrator lock so another thread is rejected without ever contending for it.
    pub builder: std::sync::atomic::AtomicU64,
    /// The scheduler role holds consumed slots back for a batch (`Sched::reclaim_or_hold`): while set,
    /// the scheduler thread's waits are timed, so none waits longer than the hold's bound.
    pub reclaim_held: AtomicBool,
    /// Failure tickets, taken by a lane when a job fails: orders a group's member failures
    /// by when they happened, not by which lane's completions a pass drains first (the
    /// Scheduler seed: "the first member failure determines the stored failure").
    pub failure_tickets: AtomicU32,
    /// Timeline trace (off unless started).
    pub trace: crate::trace::Trace,
}

impl Engine {
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
    /// Counted once at start: every SUB submit checks it, and walking the lanes would read
    /// lines their mailboxes keep moving between cores.
    pub fn sub_lane_count(&self) -> usize {
        self.sub_lanes
    }
}

pub struct Worker {
    cfg: WorkerConfig,
    specs: Vec<LaneKind>,
    /// Lane i runs on `lane_cpus[i % len]` (empty: unpinned).
    lane_cpus: Vec<u32>,
    engine: Option<Arc<Engine>>,
    /// The single orchestrator (seed: one builder thread per run); the lock only orders calls
    /// between runs, as `with_orch` turns away other threads while a run is being built.
    orch: Option<std::sync::Mutex<Orchestrator>>,
    threads: Vec<JoinHandle<()>>,
    /// Closed for good: a worker is configured and initialised once.
    closed: bool,
    /// After `close`: the runs it had not released, which keep their results until they are
    /// released or the worker is freed.
    closed_runs: Option<Arc<RunRegistry>>,
    /// The fork generation its threads started in (None before init): see `check_process`.
    born: Option<u32>,
}

impl Worker {
    pub fn new(cfg: WorkerConfig) -> Result<Worker> {
        if cfg.task_window == 0 || cfg.task_window > (1 << 24) {
            return err(
                Status::InvalidArgument,
                format!("task_window {} must be in 1..=16777216", cfg.task_window),
            );
        }
        if cfg.heap_ring_size == 0 {
            return err(Status::InvalidArgument, "heap_ring_size must be positive");
        }
        Ok(Worker {
            cfg,
            specs: Vec::new(),
            lane_cpus: Vec::new(),
            engine: None,
            orch: None,
            threads: Vec::new(),
            closed: false,
            closed_runs: None,
            born: None,
        })
    }

    fn not_started(&self, what: &str) -> Result<()> {
        if self.closed {
            return err(Status::WrongState, format!("{what}: the worker is closed"));
        }
        if self.engine.is_some() {
            return err(
                Status::WrongState,
                format!("{what}: the worker is already initialised"),
            );
        }
        Ok(())
    }

    /// Add a NEXT_LEVEL thread lane with a stable, non-negative worker id.
    pub fn add_next_level_lane(&mut self, worker_id: i32) -> Result<()> {
        self.not_started("add_next_level_lane")?;
        if worker_id < 0 {
            return err(
                Status::InvalidArgument,
                format!("worker id {worker_id} must be non-negative"),
            );
        }
        if self.specs.contains(&LaneKind::NextLevel(worker_id)) {
            return err(
                Status::DuplicateTarget,
                format!("worker id {worker_id} is already a lane of this worker"),
            );
        }
        self.specs.push(LaneKind::NextLevel(worker_id));
        Ok(())
    }

    /// Add `n` SUB thread lanes.
    pub fn add_sub_lanes(&mut self, n: u32) -> Result<()> {
        self.not_started("add_sub_lanes")?;
        let have = self
            .specs
            .iter()
            .filter(|k| matches!(k, LaneKind::Sub(_)))
            .count() as u32;
        if n == 0 || n > 1024 - have {
            return err(
                Status::InvalidArgument,
                format!("SUB lane count {n} out of range (1..=1024 in total)"),
            );
        }
        for k in 0..n {
            self.specs.push(LaneKind::Sub(have + k));
        }
        Ok(())
    }

    /// Pin lane threads: lane i (in the order lanes were added) runs on `cpus[i % len]`;
    /// empty unpins. Each CPU must be in the calling thread's affinity mask.
    pub fn set_lane_cpus(&mut self, cpus: &[i32]) -> Result<()> {
        self.not_started("set_lane_cpus")?;
        self.lane_cpus = crate::affinity::check_cpus(cpus)?;
        Ok(())
    }

    /// Fork hygiene, heap mapping (before any dagrt thread starts), lanes, then scheduler.
    pub fn init(&mut self) -> Result<()> {
        self.not_started("init")?;
        if self.specs.is_empty() {
            return err(Status::WrongState, "init: the worker has no lanes");
        }
        crate::fork::hygiene_once();
        self.born = Some(crate::fork::generation());
        let slots = SlotTable::new(self.cfg.task_window).map_err(|x| {
            Error::new(
                Status::System,
                format!(
                    "reserving a task window of {} slots ({} MiB of address space) failed: {x}; \
                     a smaller task_window needs less",
                    self.cfg.task_window,
                    SlotTable::bytes_for(self.cfg.task_window) >> 20
                ),
            )
        })?;
        let heap = HeapRings::new(self.cfg.heap_ring_size).map_err(|x| {
            Error::new(
                Status::System,
                format!(
                    "mmap of 4 heap rings of {} bytes failed: {x}",
                    self.cfg.heap_ring_size
                ),
            )
        })?;
        let lanes: Vec<Lane> = self
            .specs
            .iter()
            .map(|&kind| Lane {
                kind,
                mailbox: Mailbox::default(),
                done: Default::default(),
            })
            .collect();
        let lane_by_worker = self
            .specs
            .iter()
            .enumerate()
            .filter_map(|(i, k)| match k {
                LaneKind::NextLevel(id) => Some((*id, i as u32)),
                LaneKind::Sub(_) => None,
            })
            .collect();
        let e = Arc::new(Engine {
            cfg: self.cfg,
            slots,
            heap,
            tensormap: Default::default(),
            ready_in: Default::default(),
            sched_event: Default::default(),
            sched: Padded(std::sync::Mutex::new(None)),
            run_event: Arc::new(Event::default()),
            runs: Arc::default(),
            sub_lanes: lanes
                .iter()
                .filter(|l| matches!(l.kind, LaneKind::Sub(_)))
                .count(),
            lanes,
            lane_by_worker,
            stop: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            sub_moves: std::sync::atomic::AtomicU64::new(0),
            builder: std::sync::atomic::AtomicU64::new(0),
            reclaim_held: AtomicBool::new(false),
            failure_tickets: AtomicU32::new(0),
            trace: crate::trace::Trace::new(
                self.specs
                    .iter()
                    .enumerate()
                    .map(|(i, k)| match k {
                        LaneKind::NextLevel(id) => format!("lane {i}: NEXT_LEVEL worker {id}"),
                        LaneKind::Sub(n) => format!("lane {i}: SUB {n}"),
                    })
                    .collect(),
            ),
        });
        if let Some(p) = std::env::var_os("DAGRT_TRACE").filter(|p| !p.is_empty()) {
            // Every worker of the process reads the same variable: each gets a file of its own.
            static TRACED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let k = TRACED.fetch_add(1, Ordering::Relaxed);
            let forked = (crate::fork::generation() > 0).then(std::process::id);
            let p = crate::trace::env_trace_path(p.into(), k, forked);
            if k > 0 || forked.is_some() {
                let msg = format!("DAGRT_TRACE: this worker records into {}", p.display());
                crate::log::emit(crate::log::LogLevel::Info, &msg);
            }
            // A diagnostic the environment asked for: the worker runs without it, and says so
            // now rather than when the trace would have been written.
            if let Err(x) = e.trace.start(p) {
                crate::log::emit(crate::log::LogLevel::Error, &format!("DAGRT_TRACE: {x}"));
            }
        }
        for i in 0..e.lanes.len() {
            let e2 = e.clone();
            let cpu =
                (!self.lane_cpus.is_empty()).then(|| self.lane_cpus[i % self.lane_cpus.len()]);
            let h = std::thread::Builder::new()
                .name(format!("dagrt-lane-{i}"))
                .spawn(move || {
                    if let Some(c) = cpu {
                        // Checked against the mask at configuration; a mask changed since
                        // costs the pinning, not the lane.
                        if let Err(x) = crate::affinity::pin_current_thread(c) {
                            crate::log::emit(
                                crate::log::LogLevel::Warn,
                                &format!("lane {i}: pinning to CPU {c} failed ({x}); unpinned"),
                            );
                        }
                    }
                    crate::lane::thread::lane_main(e2, i as u32)
                })
                .map_err(|x| Error::new(Status::System, format!("spawning lane thread: {x}")));
            match h {
                Ok(h) => self.threads.push(h),
                Err(x) => {
                    self.shutdown_threads(&e);
                    return Err(x);
                }
            }
        }
        let e2 = e.clone();
        match std::thread::Builder::new()
            .name("dagrt-scheduler".into())
            .spawn(move || crate::scheduler::scheduler_main(e2))
        {
            Ok(h) => self.threads.push(h),
            Err(x) => {
                for l in e.lanes.iter() {
                    l.mailbox.stop();
                }
                self.shutdown_threads(&e);
                return err(Status::System, format!("spawning scheduler thread: {x}"));
            }
        }
        self.orch = Some(std::sync::Mutex::new(Orchestrator::new(e.clone())));
        self.engine = Some(e);
        Ok(())
    }

    fn shutdown_threads(&mut self, e: &Engine) {
        for l in e.lanes.iter() {
            l.mailbox.stop();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    pub fn engine(&self) -> Option<&Arc<Engine>> {
        self.engine.as_ref()
    }

    /// The runs of a closed worker (None while it runs, or if it was never initialised).
    pub fn closed_runs(&self) -> Option<&Arc<RunRegistry>> {
        self.closed_runs.as_ref()
    }

    pub fn orchestrator(&self) -> Result<&std::sync::Mutex<Orchestrator>> {
        self.check_process()?;
        self.orch.as_ref().ok_or_else(|| self.not_running())
    }

    /// A worker initialised before a fork is refused in the child: its lanes and scheduler
    /// thread were not copied (fork copies only the calling thread), so a run would never
    /// end, and its locks may have been held by threads the child does not have.
    pub fn check_process(&self) -> Result<()> {
        if self.inherited() {
            return err(
                Status::WrongState,
                "the worker was initialised before this process was forked from its parent: \
                 its threads were not copied, so the child cannot use it (create a new worker \
                 in the child; dagrt_worker_free there releases nothing)",
            );
        }
        Ok(())
    }

    /// Whether this is a forked child's copy of a worker initialised in an ancestor.
    pub fn inherited(&self) -> bool {
        self.born.is_some_and(|g| g != crate::fork::generation())
    }

    /// Why a call that needs the engine finds none: closed, or not initialised yet.
    pub fn not_running(&self) -> Error {
        Error::new(
            Status::WrongState,
            if self.closed {
                "the worker is closed"
            } else {
                "the worker is not initialised (call dagrt_worker_init)"
            },
        )
    }

    /// Stop: every run must have closed submission; waits for them to finish, then stops the
    /// scheduler and lanes. Idempotent.
    pub fn close(&mut self) -> Result<()> {
        self.close_within(None).map(|_| ())
    }

    /// Fails with WRONG_THREAD when the caller is a task running on one of this worker's
    /// lanes: a close or a free (`what`) would wait for that task to end, and the C API's
    /// configuration calls would take the worker exclusively while its host thread may be
    /// inside a call on it.
    pub fn refuse_own_task(&self, what: &str) -> Result<()> {
        if self
            .engine
            .as_ref()
            .is_some_and(|e| crate::lane::running_on(e).is_some())
        {
            return err(
                Status::WrongThread,
                format!(
                    "{what}: called from a task running on this worker's lane; a worker is not \
                     configured, closed or freed from its own tasks (a close would wait for the \
                     task; call it from another thread)"
                ),
            );
        }
        Ok(())
    }

    /// `close` with a cleanup budget (Orchestrator seed, Worker.close): new runs are refused
    /// from the start; if the closed runs are still running when the budget runs out, returns
    /// false and tears nothing down, so a later close retries (the runs keep running).
    pub fn close_within(&mut self, budget: Option<std::time::Duration>) -> Result<bool> {
        let Some(e) = self.engine.clone() else {
            // Never initialised: closed all the same, so a later init is refused as it is
            // after closing a started worker.
            self.closed = true;
            return Ok(true);
        };
        // With a budget too: the task's own run cannot end while it waits, and a timed-out
        // close would leave the worker refusing new runs.
        self.refuse_own_task("close")?;
        if let Some(o) = &self.orch {
            let o = o.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(r) = o.current_run() {
                return err(
                    Status::WrongState,
                    format!("close: run {r} is still open for submission"),
                );
            }
            // Under the orchestrator's lock, so no begin_run is half-way past its check.
            e.closing.store(true, Ordering::Release);
        }
        let deadline = crate::event::deadline_after(budget);
        for r in e.runs.all() {
            let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
            if !r.wait(left) {
                return Ok(false);
            }
        }
        e.stop.store(true, Ordering::Release);
        e.sched_event.notify();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Err((p, x)) = e.trace.stop() {
            crate::log::emit(
                crate::log::LogLevel::Error,
                &format!("writing the trace {} failed: {x}", p.display()),
            );
        }
        self.orch = None;
        self.closed_runs = Some(e.runs.clone());
        self.engine = None;
        self.closed = true;
        Ok(true)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.inherited() {
            // A forked child's copy: the threads and runs are the parent's. Nothing here is
            // this process's to tear down (joining would wait forever), so it is forgotten.
            std::mem::forget(std::mem::take(&mut self.threads));
            std::mem::forget(self.orch.take());
            std::mem::forget(self.engine.take());
            return;
        }
        if let Err(x) = self.refuse_own_task("dropping the worker") {
            // Leave the threads running (they hold the engine) rather than hang.
            crate::log::emit(
                crate::log::LogLevel::Error,
                &format!("{}; it is left running, not closed", x.msg),
            );
            return;
        }
        if let Some(o) = &self.orch {
            let mut o = o.lock().unwrap_or_else(|p| p.into_inner());
            o.abandon_open_run("worker freed while the run was open");
            // In the same hold: a task beginning a run between the abandon and the close
            // would make the close refuse, and the drop return with the threads running.
            if let Some(e) = &self.engine {
                e.closing.store(true, Ordering::Release);
            }
        }
        if let Err(x) = self.close() {
            crate::log::emit(
                crate::log::LogLevel::Error,
                &format!("freeing the worker: {}; it is left running", x.msg),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orchestrator::SubmitKind;
    use crate::task::{CallConfig, TaskArgs, TaskView};
    use std::ffi::{c_char, c_void, CStr};
    use std::sync::Mutex;
    use std::time::Duration;

    static LOGGED: Mutex<Vec<String>> = Mutex::new(Vec::new());
    static LANE_MASK: Mutex<Option<Vec<u32>>> = Mutex::new(None);

    /// # Safety
    /// `msg` must be a NUL-terminated string valid during the call (the log hook contract).
    unsafe extern "C" fn keep(_level: u32, msg: *const c_char, _user: *mut c_void) {
        // SAFETY: the runtime passes a NUL-terminated message valid during the call.
        let m = unsafe { CStr::from_ptr(msg) }
            .to_string_lossy()
            .into_owned();
        LOGGED.lock().unwrap().push(m);
    }

    /// A started worker of one SUB lane (pinned to `cpus`, unchecked, if any) running a run of
    /// one task of `exec`, closed for submission; returns the worker and the run.
    fn one_task_run(
        cpus: Vec<u32>,
        name: &str,
        ns: u32,
        exec: crate::callable::Executor,
    ) -> (Worker, crate::run::RunId) {
        let mut w = Worker::new(WorkerConfig::default()).unwrap();
        w.add_sub_lanes(1).unwrap();
        w.lane_cpus = cpus;
        w.init().unwrap();
        let kind = crate::callable::CallableKind::Task as u32;
        let c = crate::callable::register(name, ns, kind, exec, std::ptr::null_mut()).unwrap();
        let run = {
            let mut o = w.orchestrator().unwrap().lock().unwrap();
            let run = o.begin_run().unwrap();
            let a = TaskArgs::of_tensors(&mut []);
            o.submit(SubmitKind::Sub, &c, &[a], &CallConfig::default(), &[])
                .unwrap();
            o.close_run_submission(run).unwrap();
            run
        };
        (w, run)
    }

    static HELD: Mutex<Option<Worker>> = Mutex::new(None);
    /// The log hook is process-wide: tests that install it run one at a time.
    static HOOK_USERS: Mutex<()> = Mutex::new(());

    /// What `close_within` with a budget returned from the worker's own task.
    static CLOSE_FROM_TASK: Mutex<Option<Status>> = Mutex::new(None);

    /// Closes (with a budget), then drops, the worker parked in HELD, once the host has
    /// parked it there.
    ///
    /// # Safety
    /// None: `unsafe` only to match `Executor`; it reads neither argument.
    unsafe extern "C" fn drop_held(_t: *const TaskView, _u: *mut c_void) -> i32 {
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < until {
            let w = HELD.lock().unwrap().take();
            if let Some(mut w) = w {
                let closed = w.close_within(Some(Duration::ZERO));
                *CLOSE_FROM_TASK.lock().unwrap() =
                    Some(closed.err().map_or(Status::Ok, |x| x.status));
                drop(w);
                return 0;
            }
            std::thread::yield_now();
        }
        1
    }

    /// The Rust API's `Worker` closed with a budget, then dropped, by a task running on its
    /// own lane: closing would wait for that task, so the close is refused, and the drop logs
    /// an error and leaves the threads running (they hold the engine) instead of hanging the
    /// lane. The run still completes.
    #[test]
    fn a_worker_dropped_from_its_own_lane_is_left_running() {
        let _one = HOOK_USERS.lock().unwrap_or_else(|p| p.into_inner());
        crate::log::set_hook(Some(keep), std::ptr::null_mut());
        let (w, run) = one_task_run(vec![], "worker.tests.drop_held", 8, drop_held);
        let e = w.engine().unwrap().clone();
        *HELD.lock().unwrap() = Some(w);
        // The task completed (so the lane went on after the drop returned), successfully
        // (so it found the worker and dropped it).
        let r = e.runs.get(run).unwrap();
        assert!(r.wait(Some(Duration::from_secs(20))));
        assert!(r.result().is_ok(), "{:?}", r.result());
        assert!(HELD.lock().unwrap().is_none());
        // A close with a budget was refused too (it would have timed out waiting for the
        // task, and left the worker refusing new runs).
        assert_eq!(*CLOSE_FROM_TASK.lock().unwrap(), Some(Status::WrongThread));
        assert!(!e.closing.load(Ordering::Acquire));
        assert!(
            !e.stop.load(Ordering::Acquire),
            "the threads were left running"
        );
        crate::log::set_hook(None, std::ptr::null_mut());
        let logged = LOGGED.lock().unwrap().clone();
        assert!(
            logged
                .iter()
                .any(|m| m.contains("dropping the worker") && m.contains("left running")),
            "{logged:?}"
        );
        // What close would have done, from here: stop the detached threads.
        e.stop.store(true, Ordering::Release);
        e.sched_event.notify();
    }

    /// # Safety
    /// None: `unsafe` only to match `Executor`; it reads neither argument.
    unsafe extern "C" fn read_mask(_t: *const TaskView, _u: *mut c_void) -> i32 {
        *LANE_MASK.lock().unwrap() = crate::affinity::allowed_cpus().ok();
        0
    }

    /// A lane CPU checked at configuration can be gone by the time the lane starts (a mask
    /// or cpuset changed in between): the lane warns through the log hook and runs unpinned
    /// on the mask it inherited. Here the CPU is one this machine does not have, put in
    /// behind `set_lane_cpus`'s check.
    #[test]
    fn a_lane_that_cannot_be_pinned_warns_and_runs_unpinned() {
        // SAFETY: sysconf only reads a system constant.
        let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
        let missing = u32::try_from(configured).expect("a CPU count");
        assert!((missing as usize) < libc::CPU_SETSIZE as usize);
        let mine = crate::affinity::allowed_cpus().unwrap();
        let _one = HOOK_USERS.lock().unwrap_or_else(|p| p.into_inner());
        crate::log::set_hook(Some(keep), std::ptr::null_mut());
        let (w, run) = one_task_run(vec![missing], "worker.tests.read_mask", 7, read_mask);
        let e = w.engine().unwrap().clone();
        assert!(e.runs.get(run).unwrap().wait(Some(Duration::from_secs(10))));
        drop(w);
        crate::log::set_hook(None, std::ptr::null_mut());
        let want = format!("lane 0: pinning to CPU {missing} failed");
        let logged = LOGGED.lock().unwrap().clone();
        assert!(logged.iter().any(|m| m.contains(&want)), "{logged:?}");
        assert_eq!(LANE_MASK.lock().unwrap().as_ref(), Some(&mine));
    }
}
