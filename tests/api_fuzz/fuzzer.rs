//! The per-sequence fuzzer state, and the one place calls are made, logged and checked
//! against the model's predicted statuses.

use crate::executors::{SeqRec, MAX_GATES};
use crate::ffi::{last_error, short, sname, snames};
use crate::helper::Helper;
use crate::model::{Abort, Builder, Failure, HeapBuf, NodeM, RunM, Th, Totals, WModel, R};
use crate::rng::Rng;
use crate::watchdog::Shared;
use dagrt::error::Status;
use dagrt::task::TaskHandle;
use std::collections::HashMap;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) struct Fz {
    pub(crate) rng: Rng,
    seed: u64,
    shared: Arc<Shared>,
    pub(crate) rec: Arc<SeqRec>,
    pub(crate) next_rec: usize,
    pub(crate) rejected: Vec<usize>,
    pub(crate) step: usize,
    helper: Helper,
    pub(crate) workers: Vec<WModel>,
    pub(crate) runs: Vec<RunM>,
    pub(crate) run_by_id: HashMap<u64, usize>,
    pub(crate) nodes: Vec<NodeM>,
    pub(crate) frames: Vec<bool>,
    pub(crate) gates: Vec<bool>,
    pub(crate) handles: Vec<(TaskHandle, usize)>,
    pub(crate) hmap: HashMap<(u64, u64), usize>,
    pub(crate) heapbufs: Vec<HeapBuf>,
    pub(crate) builders: Vec<Builder>,
    pub(crate) failures: Vec<Failure>,
    /// Worker of the orchestration callback being run (its steps stay on it).
    pub(crate) cb: Option<usize>,
    pub(crate) cb_no_gates: bool,
    /// Failing calls made on the main thread inside the current callback.
    pub(crate) cb_failures: u32,
    /// dagrt_last_error() right after the last call, on the thread that made it.
    pub(crate) last_msg: String,
    /// Names a known kind of mismatch for the next call's failure signature.
    pub(crate) hint: Option<String>,
    /// The hint of the last slot prediction.
    pub(crate) slot_hint: Option<String>,
    pub(crate) totals: Totals,
}

impl Fz {
    pub(crate) fn new(seed: u64, steps: usize, shared: Arc<Shared>) -> Fz {
        shared.seed.store(seed, SeqCst);
        shared.log.lock().unwrap_or_else(|p| p.into_inner()).clear();
        Fz {
            rng: Rng(seed),
            seed,
            shared,
            rec: Arc::new(SeqRec::new(steps * 12 + 64)),
            next_rec: 0,
            rejected: Vec::new(),
            step: 0,
            helper: Helper::new(),
            workers: Vec::new(),
            runs: Vec::new(),
            run_by_id: HashMap::new(),
            nodes: Vec::new(),
            frames: Vec::new(),
            gates: vec![false; MAX_GATES],
            handles: Vec::new(),
            hmap: HashMap::new(),
            heapbufs: Vec::new(),
            builders: Vec::new(),
            failures: Vec::new(),
            cb: None,
            cb_no_gates: false,
            cb_failures: 0,
            last_msg: String::new(),
            hint: None,
            slot_hint: None,
            totals: Totals::default(),
        }
    }

    // ----- logging and failures

    pub(crate) fn log(&self, line: String) {
        self.shared
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(line);
    }

    pub(crate) fn tick(&self) {
        self.shared.progress.fetch_add(1, SeqCst);
    }

    pub(crate) fn record_failure(&mut self, sig: String, detail: String) {
        self.log(format!("!!! CHECK FAILED: {detail}"));
        let log = self
            .shared
            .log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        self.failures.push(Failure {
            sig,
            detail,
            seed: self.seed,
            log,
        });
    }

    /// A failed check the model cannot continue past: the sequence stops.
    pub(crate) fn fatal<T>(&mut self, sig: impl Into<String>, detail: impl Into<String>) -> R<T> {
        self.record_failure(sig.into(), detail.into());
        Err(Abort)
    }

    /// A failed check that does not invalidate the model: the sequence goes on.
    pub(crate) fn soft(&mut self, sig: impl Into<String>, detail: impl Into<String>) {
        let sig = sig.into();
        if self.failures.iter().any(|f| f.sig == sig) {
            self.log(format!("!!! CHECK FAILED (again): {sig}"));
            return;
        }
        self.record_failure(sig, detail.into());
    }

    pub(crate) fn check(&mut self, cond: bool, sig: &str, detail: impl FnOnce() -> String) -> R {
        if cond {
            Ok(())
        } else {
            let d = detail();
            self.fatal(sig.to_string(), d)
        }
    }

    /// A failed call `fname` must leave its out-parameters as they were (`untouched`).
    pub(crate) fn check_out_untouched(&mut self, untouched: bool, fname: &str) -> R {
        self.check(untouched, &format!("{fname} wrote out on failure"), || {
            "out-parameter written on failure".into()
        })
    }

    // ----- calls

    fn run_on<T>(&self, th: Th, f: impl FnOnce() -> T) -> T {
        match th {
            Th::Main => f(),
            Th::Helper => self.helper.run(f),
        }
    }

    /// Make one call on thread `th` and check its status against `exp` and the errno-like
    /// behaviour of dagrt_last_error().
    pub(crate) fn call(
        &mut self,
        th: Th,
        desc: String,
        exp: &[Status],
        f: impl FnOnce() -> Status,
    ) -> R<Status> {
        let main_before = last_error();
        let t0 = Instant::now();
        let (st, before, after) = self.run_on(th, move || {
            let b = last_error();
            let st = f();
            (st, b, last_error())
        });
        let el = t0.elapsed();
        self.note_result(th, &desc, exp, st, &before, &after, el)?;
        if th == Th::Helper {
            let main_after = last_error();
            if main_after != main_before {
                self.soft(
                    "last_error: a call on another thread changed the main thread's dagrt_last_error()",
                    format!("{desc} on the helper thread changed the main thread's last error from {:?} to {:?}", main_before.0, main_after.0),
                );
            }
        }
        Ok(st)
    }

    /// Log and check a call's result (status set, last error behaviour).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn note_result(
        &mut self,
        th: Th,
        desc: &str,
        exp: &[Status],
        st: Status,
        before: &(String, usize),
        after: &(String, usize),
        el: Duration,
    ) -> R {
        self.tick();
        self.last_msg = after.0.clone();
        self.totals.calls += 1;
        *self.totals.by_status.entry(sname(st)).or_default() += 1;
        let msg = if st == Status::Ok {
            String::new()
        } else {
            format!(" \"{}\"", after.0)
        };
        let slow = if el > Duration::from_millis(5) {
            format!(" [{} ms]", el.as_millis())
        } else {
            String::new()
        };
        self.log(format!(
            "#{:<4} {} {desc} -> {}{msg}{slow}   (expect {})",
            self.step,
            th.tag(),
            short(st),
            snames(exp)
        ));
        if th == Th::Main && st != Status::Ok && self.cb.is_some() {
            self.cb_failures += 1;
        }
        let fname = desc.split('(').next().unwrap_or(desc).to_string();
        if st == Status::Panic {
            return self.fatal(
                format!("{fname}: PANIC caught at the C boundary"),
                format!("{desc} returned DAGRT_STATUS_PANIC: {}", after.0),
            );
        }
        let hint = self.hint.take();
        if !exp.contains(&st) {
            let sig = match hint {
                Some(h) => h,
                None => format!("{fname}: expected {} got {}", snames(exp), short(st)),
            };
            return self.fatal(
                sig,
                format!(
                    "{desc} returned {} \"{}\", the model expected {}",
                    sname(st),
                    after.0,
                    snames(exp)
                ),
            );
        }
        let cb_call =
            fname.starts_with("dagrt_worker_submit") || fname.starts_with("dagrt_worker_run");
        if st == Status::Ok {
            if cb_call && after != before {
                self.soft(
                    "last_error: a successful dagrt_worker_submit/run clears dagrt_last_error() (new buffer, old text gone)",
                    format!("{desc} succeeded but dagrt_last_error() went from {:?} at {:#x} to {:?} at {:#x} (the header: the message of the last *failed* call; the pointer stays valid until the next failing call)", before.0, before.1, after.0, after.1),
                );
            } else if after.0 != before.0 {
                self.soft(
                    format!("last_error: successful {fname} changed dagrt_last_error()"),
                    format!("{desc} succeeded but dagrt_last_error() changed from {:?} to {:?} (the header: the message of the last *failed* call)", before.0, after.0),
                );
            } else if after.1 != before.1 {
                self.soft(
                    format!("last_error: successful {fname} moved the dagrt_last_error() buffer"),
                    format!("{desc} succeeded but dagrt_last_error() now returns {:#x} instead of {:#x} (the header: the pointer stays valid until the next failing call)", after.1, before.1),
                );
            }
        } else if after.0.is_empty() {
            return self.fatal(
                format!("{fname}: {} without a message", short(st)),
                format!(
                    "{desc} failed with {} but dagrt_last_error() is empty",
                    sname(st)
                ),
            );
        }
        Ok(())
    }
}
