//! Test workers (`Env`): a worker with its lanes and static buffers, its orchestrator, and the
//! check that its runs left nothing behind (`check_reclaimed`).

use super::*;

// ---------------------------------------------------------------------------------------
// Workers

pub(crate) struct Env {
    pub(crate) name: &'static str,
    worker: Worker,
    pub(crate) engine: Arc<Engine>,
    pub(crate) lanes: Lanes,
    /// Static buffers: three 8x8 column-major u64 matrices and three 16 x u64 flat buffers.
    pub(crate) statics: Vec<Vec<u64>>,
}

impl Env {
    pub(crate) fn new(name: &'static str, lanes: Lanes, cfg: WorkerConfig) -> Env {
        let (worker, engine) = started_worker(cfg, &lanes);
        let statics = static_storage();
        Env {
            name,
            worker,
            engine,
            lanes,
            statics,
        }
    }

    pub(crate) fn orch(&self) -> MutexGuard<'_, Orchestrator> {
        self.worker
            .orchestrator()
            .expect("orchestrator")
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// After every run of this worker finished: nothing may be left behind.
    pub(crate) fn check_reclaimed(&self) -> Result<(), String> {
        let e = &self.engine;
        let mut errs = leftovers(e);
        for (i, r) in e.heap.rings.iter().enumerate() {
            if r.top() != r.tail() {
                errs.push(format!(
                    "heap ring {i}: tail {} != top {}",
                    r.tail(),
                    r.top()
                ));
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "worker {}: not reclaimed after its runs finished: {}",
                self.name,
                errs.join("; ")
            ))
        }
    }
}

pub(crate) fn cfg(window: u32, timeout_ms: u32) -> WorkerConfig {
    WorkerConfig {
        heap_ring_size: 4 << 20,
        task_window: window,
        timeout_ms,
    }
}
