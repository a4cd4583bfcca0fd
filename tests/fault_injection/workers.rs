//! Test workers (`Env`) and their orchestrators (`Orch`) through the Rust API or the C
//! ABI, and the stats snapshot (`Snap`) that a failed call must leave unchanged.

use super::*;

// ---------------------------------------------------------------------------------------
// Workers: the same checks through the Rust API or the C ABI

pub(crate) fn cfg(heap: u64, window: u32, timeout_ms: u32) -> WorkerConfig {
    WorkerConfig {
        heap_ring_size: heap,
        task_window: window,
        timeout_ms,
    }
}

pub(crate) struct Env {
    pub(crate) name: &'static str,
    pub(crate) lanes: Lanes,
    rust: Option<(Worker, Arc<Engine>)>,
    pub(crate) cw: *mut dagrt_worker_t,
    corch: *mut dagrt_orch_t,
    /// Static buffers: three 8x8 column-major u64 matrices and three 16 x u64 flat buffers.
    pub(crate) statics: Vec<Vec<u64>>,
}

pub(crate) type ApiErr = (Status, String);

fn c_res(st: Status) -> Result<(), ApiErr> {
    if st == Status::Ok {
        Ok(())
    } else {
        Err((st, last_error()))
    }
}

fn rs_err(e: dagrt::error::Error) -> ApiErr {
    (e.status, e.msg)
}

impl Env {
    pub(crate) fn new_rust(name: &'static str, lanes: Lanes, cfg: WorkerConfig) -> Env {
        let (worker, engine) = started_worker(cfg, &lanes);
        Env {
            name,
            lanes,
            rust: Some((worker, engine)),
            cw: std::ptr::null_mut(),
            corch: std::ptr::null_mut(),
            statics: static_storage(),
        }
    }

    pub(crate) fn new_c(name: &'static str, lanes: Lanes, cfg: WorkerConfig) -> Env {
        let mut w = std::ptr::null_mut();
        assert_eq!(capi::worker::dagrt_worker_new(&cfg, &mut w), Status::Ok);
        for &id in &lanes.nl {
            assert_eq!(
                capi::worker::dagrt_worker_add_next_level_lane(w, id),
                Status::Ok
            );
        }
        assert_eq!(
            capi::worker::dagrt_worker_add_sub_lanes(w, lanes.subs),
            Status::Ok
        );
        assert_eq!(capi::worker::dagrt_worker_init(w), Status::Ok);
        let mut o = std::ptr::null_mut();
        assert_eq!(capi::worker::dagrt_worker_orch(w, &mut o), Status::Ok);
        Env {
            name,
            lanes,
            rust: None,
            cw: w,
            corch: o,
            statics: static_storage(),
        }
    }

    pub(crate) fn backend(&self) -> &'static str {
        if self.rust.is_some() {
            "Rust API"
        } else {
            "C ABI"
        }
    }

    pub(crate) fn engine(&self) -> Option<&Arc<Engine>> {
        self.rust.as_ref().map(|r| &r.1)
    }

    pub(crate) fn orch(&self) -> Orch<'_> {
        match &self.rust {
            Some((w, _)) => Orch::Rust(
                w.orchestrator()
                    .expect("orchestrator")
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()),
            ),
            None => Orch::C(self.corch),
        }
    }

    pub(crate) fn probe(&self, run: u64) -> Probe {
        match self.engine() {
            Some(e) => Probe::Rust(e.runs.get(run).expect("run registered")),
            None => Probe::C(self.cw as usize, run),
        }
    }

    pub(crate) fn stats(&self) -> WorkerStats {
        match self.engine() {
            Some(e) => {
                let mut s = WorkerStats {
                    live_slots: e.slots.live(),
                    tensormap_entries: e.tensormap.len() as u64,
                    runs: e.runs.len() as u64,
                    ready_queued: dagrt::scheduler::queued(e) as u64,
                    ..Default::default()
                };
                for (i, r) in e.heap.rings.iter().enumerate() {
                    s.heap_top[i] = r.top();
                    s.heap_tail[i] = r.tail();
                }
                s
            }
            None => {
                let mut s = WorkerStats::default();
                assert_eq!(
                    capi::worker::dagrt_worker_stats(self.cw, &mut s),
                    Status::Ok
                );
                s
            }
        }
    }

    pub(crate) fn run_stats(&self, run: u64) -> Option<RunStats> {
        match self.engine() {
            Some(e) => {
                let r = e.runs.get(run)?;
                let c = r.counts();
                Some(RunStats {
                    completed: c.completed,
                    failed: c.failed,
                    cancelled: c.cancelled,
                    live_slots: r.live_slots(),
                    done: r.done() as u32,
                    reserved: 0,
                })
            }
            None => {
                let mut s = RunStats::default();
                (capi::run::dagrt_run_stats(self.cw, run, &mut s) == Status::Ok).then_some(s)
            }
        }
    }

    /// Wait for the run: its terminal (status, message), Err on a hang (or, through the C
    /// ABI, when the blocking wait and the bounded wait disagree).
    pub(crate) fn wait(&self, run: u64, timeout: Duration) -> Result<(Status, String), String> {
        match self.engine() {
            Some(e) => {
                let r = e
                    .runs
                    .get(run)
                    .ok_or_else(|| format!("run {run} is not registered"))?;
                if !r.wait(Some(timeout)) {
                    return Err(format!("HANG: run {run} did not finish within {timeout:?}"));
                }
                Ok(match r.result() {
                    Ok(()) => (Status::Ok, String::new()),
                    Err((m, FailureKind::Task)) => (Status::TaskFailed, m.to_string()),
                    Err((m, FailureKind::Orchestration)) => {
                        (Status::OrchestrationFailed, m.to_string())
                    }
                })
            }
            None => {
                let mut done = 0u32;
                let st = capi::run::dagrt_wait_run_for(
                    self.cw,
                    run,
                    timeout.as_millis() as u64,
                    &mut done,
                );
                if st == Status::Ok && done == 0 {
                    return Err(format!("HANG: run {run} did not finish within {timeout:?}"));
                }
                let msg = if st == Status::Ok {
                    String::new()
                } else {
                    last_error()
                };
                if done != 1 {
                    return Err(format!(
                        "dagrt_wait_run_for returned {st:?} ({msg}) with out_done = {done}"
                    ));
                }
                let st2 = capi::run::dagrt_wait_run(self.cw, run);
                let msg2 = if st2 == Status::Ok {
                    String::new()
                } else {
                    last_error()
                };
                if (st2, &msg2) != (st, &msg) {
                    return Err(format!(
                        "dagrt_wait_run gave {st2:?} '{msg2}' after dagrt_wait_run_for gave {st:?} '{msg}'"
                    ));
                }
                Ok((st, msg))
            }
        }
    }

    pub(crate) fn release(&self, run: u64) -> Result<(), String> {
        match self.engine() {
            Some(e) => {
                let r = e.runs.get(run).ok_or("run vanished before release")?;
                if !r.done() {
                    return Err(format!("run {run} is not done at release"));
                }
                e.runs.remove_done(run);
                Ok(())
            }
            None => c_res(capi::run::dagrt_release_run(self.cw, run))
                .map_err(|(s, m)| format!("dagrt_release_run: {s:?} {m}")),
        }
    }

    /// After every run of this worker finished and was released: nothing may be left behind.
    pub(crate) fn check_reclaimed(&self) -> Result<(), String> {
        let s = self.stats();
        let mut errs = Vec::new();
        if s.live_slots != 0 {
            errs.push(format!("{} slots still live", s.live_slots));
        }
        if s.tensormap_entries != 0 {
            errs.push(format!("{} TensorMap entries left", s.tensormap_entries));
        }
        for i in 0..4 {
            if s.heap_top[i] != s.heap_tail[i] {
                errs.push(format!(
                    "heap ring {i}: tail {} != top {}",
                    s.heap_tail[i], s.heap_top[i]
                ));
            }
        }
        if s.ready_queued != 0 {
            errs.push(format!("{} slots still in ready queues", s.ready_queued));
        }
        if s.runs != 0 {
            errs.push(format!("{} runs still registered after release", s.runs));
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "worker {} ({}): not reclaimed after its runs finished: {}",
                self.name,
                self.backend(),
                errs.join("; ")
            ))
        }
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if !self.cw.is_null() {
            capi::worker::dagrt_worker_free(self.cw);
        }
    }
}

/// The orchestrator of a run being built, through either API.
pub(crate) enum Orch<'a> {
    Rust(MutexGuard<'a, Orchestrator>),
    C(*mut dagrt_orch_t),
}

impl Orch<'_> {
    pub(crate) fn begin_run(&mut self) -> Result<u64, ApiErr> {
        match self {
            // Every run start of a quiescent Rust-API worker renumbers its tasks from 1 (the
            // queues' entries of cancelled tasks dropped, the entries' id histories forgotten).
            Orch::Rust(o) => {
                o.ids_past_renumbering();
                o.begin_run().map_err(rs_err)
            }
            Orch::C(p) => {
                let mut r = 0;
                c_res(capi::orch::dagrt_begin_run(*p, &mut r))?;
                Ok(r)
            }
        }
    }
    pub(crate) fn close(&mut self, run: u64) -> Result<(), ApiErr> {
        match self {
            Orch::Rust(o) => o.close_run_submission(run).map_err(rs_err),
            Orch::C(p) => c_res(capi::orch::dagrt_close_run_submission(*p, run)),
        }
    }
    pub(crate) fn fail(&mut self, run: u64, msg: &str) -> Result<(), ApiErr> {
        match self {
            Orch::Rust(o) => o.fail_run_submission(run, msg).map_err(rs_err),
            Orch::C(p) => {
                let m = CString::new(msg).expect("no NUL");
                c_res(capi::orch::dagrt_fail_run_submission(*p, run, m.as_ptr()))
            }
        }
    }
    pub(crate) fn scope_begin(&mut self) -> Result<(), ApiErr> {
        match self {
            Orch::Rust(o) => o.scope_begin().map_err(rs_err),
            Orch::C(p) => c_res(capi::orch::dagrt_scope_begin(*p)),
        }
    }
    pub(crate) fn scope_end(&mut self) -> Result<(), ApiErr> {
        match self {
            Orch::Rust(o) => o.scope_end().map_err(rs_err),
            Orch::C(p) => c_res(capi::orch::dagrt_scope_end(*p)),
        }
    }
    /// Single kinds take exactly one member; groups any number (the C path reads
    /// `members.len()` targets from `workers` for NEXT_LEVEL groups).
    pub(crate) fn submit(
        &mut self,
        kind: SubmitKind,
        callable: &Callable,
        members: &[TaskArgs],
        cfg: &CallConfig,
        workers: &[i32],
    ) -> Result<TaskHandle, ApiErr> {
        match self {
            Orch::Rust(o) => o
                .submit(kind, callable, members, cfg, workers)
                .map_err(rs_err),
            Orch::C(p) => {
                let mut h = TaskHandle { run_id: 0, slot: 0 };
                let st = match kind {
                    SubmitKind::NextLevel => {
                        assert_eq!(members.len(), 1);
                        capi::orch::dagrt_submit_next_level(
                            *p,
                            callable,
                            members.as_ptr(),
                            cfg,
                            workers[0],
                            &mut h,
                        )
                    }
                    SubmitKind::NextLevelGroup => {
                        assert_eq!(members.len(), workers.len());
                        capi::orch::dagrt_submit_next_level_group(
                            *p,
                            callable,
                            members.as_ptr(),
                            members.len() as u32,
                            cfg,
                            workers.as_ptr(),
                            &mut h,
                        )
                    }
                    SubmitKind::Sub => {
                        assert_eq!(members.len(), 1);
                        capi::orch::dagrt_submit_sub(*p, callable, members.as_ptr(), &mut h)
                    }
                    SubmitKind::SubGroup => capi::orch::dagrt_submit_sub_group(
                        *p,
                        callable,
                        members.as_ptr(),
                        members.len() as u32,
                        &mut h,
                    ),
                };
                c_res(st).map(|_| h)
            }
        }
    }
    pub(crate) fn alloc(
        &mut self,
        shape: &[u64],
        dtype: u32,
    ) -> Result<(*mut u8, TaskHandle), ApiErr> {
        match self {
            Orch::Rust(o) => o.alloc(shape, dtype).map_err(rs_err),
            Orch::C(p) => {
                let mut h = TaskHandle { run_id: 0, slot: 0 };
                let mut ptr: *mut c_void = std::ptr::null_mut();
                c_res(capi::orch::dagrt_alloc(
                    *p,
                    shape.as_ptr(),
                    shape.len() as u32,
                    dtype,
                    &mut ptr,
                    &mut h,
                ))?;
                Ok((ptr.cast(), h))
            }
        }
    }
}

/// Worker and run counters that a failed call must leave unchanged (the ready-queue length
/// is left out: the scheduler pops concurrently).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) struct Snap {
    live_slots: i64,
    tensormap_entries: u64,
    heap_top: [u64; 4],
    heap_tail: [u64; 4],
    run_live: i64,
    run_counts: (u64, u64, u64),
}

pub(crate) fn snap(env: &Env, run: u64) -> Snap {
    let s = env.stats();
    let r = env.run_stats(run).unwrap_or_default();
    Snap {
        live_slots: s.live_slots,
        tensormap_entries: s.tensormap_entries,
        heap_top: s.heap_top,
        heap_tail: s.heap_tail,
        run_live: r.live_slots,
        run_counts: (r.completed, r.failed, r.cancelled),
    }
}
