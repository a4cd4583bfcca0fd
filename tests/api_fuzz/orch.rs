//! The orchestrator as a call sees it (which worker, which thread, which run), handle
//! classification, and beginning a run.

use crate::ffi::{ok_if_none, out_arg, out_ptr};
use crate::format::fmt_handle;
use crate::fuzzer::Fz;
use crate::model::{RunM, Th, WState, R};
use dagrt::capi::orch as co;
use dagrt::capi::worker::dagrt_orch_t;
use dagrt::error::Status;
use dagrt::task::{Dep, TaskHandle, Tensor};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum OState {
    /// NULL orch handle.
    Null,
    /// The worker is closed: no orchestrator.
    Closed,
    /// No run open for submission.
    NoRun,
    /// A run is open, built by the other thread.
    WrongThread,
    /// The run is open and this thread builds it.
    Ready(usize),
}

pub(crate) struct OC {
    pub(crate) wi: Option<usize>,
    pub(crate) orch: *mut dagrt_orch_t,
    pub(crate) th: Th,
    pub(crate) st: OState,
}

impl OC {
    /// The run this thread builds, if the call can go ahead in it.
    pub(crate) fn ready_run(&self) -> Option<usize> {
        if let OState::Ready(r) = self.st {
            Some(r)
        } else {
            None
        }
    }
}

/// The tensors of one member as generated, and what the model needs to know about them.
#[derive(Clone, Copy)]
pub(crate) struct TInfo {
    /// Footprint of a tensor with data (None: zero extent or NO_DEP).
    pub(crate) range: Option<(u64, u64)>,
    /// Dense bytes of an auto-allocated OUTPUT (data NULL).
    pub(crate) auto: Option<u64>,
}

pub(crate) struct MemberSpec {
    pub(crate) tensors: Vec<Tensor>,
    pub(crate) info: Vec<TInfo>,
    pub(crate) scalars: Vec<u64>,
    pub(crate) deps: Vec<Dep>,
    pub(crate) reserved: u32,
    pub(crate) null_tensors: bool,
    pub(crate) null_scalars: bool,
    pub(crate) null_deps: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum HClass {
    Valid(usize),
    Foreign,
    Stale,
}

impl Fz {
    pub(crate) fn orch_ctx(&mut self) -> OC {
        let cands: Vec<usize> = match self.cb {
            Some(c) => vec![c],
            None => self
                .live_workers()
                .into_iter()
                .filter(|&w| !self.workers[w].orch.is_null())
                .collect(),
        };
        if cands.is_empty() || (self.cb.is_none() && self.rng.pct(2)) {
            return OC {
                wi: cands.first().copied(),
                orch: std::ptr::null_mut(),
                th: Th::Main,
                st: OState::Null,
            };
        }
        let p = self.primary();
        let wi = if self.cb.is_none() && p.is_some_and(|p| cands.contains(&p)) && self.rng.pct(85) {
            p.unwrap_or(cands[0])
        } else {
            cands[self.rng.idx(cands.len())]
        };
        let w = &self.workers[wi];
        let builder = w.open.map(|r| self.runs[r].builder);
        let th = if self.cb.is_some() {
            if self.rng.pct(6) {
                Th::Helper
            } else {
                Th::Main
            }
        } else {
            match builder {
                Some(b) => {
                    if self.rng.pct(7) {
                        b.other()
                    } else {
                        b
                    }
                }
                None => {
                    if self.rng.pct(4) {
                        Th::Helper
                    } else {
                        Th::Main
                    }
                }
            }
        };
        let st = if w.state != WState::Init {
            OState::Closed
        } else {
            match (w.open, builder) {
                (Some(r), Some(b)) if b == th => OState::Ready(r),
                (Some(_), _) => OState::WrongThread,
                _ => OState::NoRun,
            }
        };
        OC {
            wi: Some(wi),
            orch: w.orch,
            th,
            st,
        }
    }

    /// Statuses of a call that needs an open run, for a context that does not have one.
    pub(crate) fn state_statuses(st: OState) -> Vec<Status> {
        match st {
            OState::Null => vec![Status::NullPointer],
            OState::Closed | OState::NoRun => vec![Status::WrongState],
            OState::WrongThread => vec![Status::WrongThread],
            OState::Ready(_) => vec![],
        }
    }

    pub(crate) fn orch_name(oc: &OC) -> String {
        match (oc.orch.is_null(), oc.wi) {
            (true, _) => "NULL".into(),
            (false, Some(w)) => format!("o{w}"),
            _ => "o?".into(),
        }
    }

    pub(crate) fn classify_handle(&self, ri: usize, h: &TaskHandle) -> HClass {
        if self.runs[ri].id == Some(h.run_id) {
            return match self.hmap.get(&(h.run_id, h.slot)) {
                Some(&n) if self.nodes[n].run == ri => HClass::Valid(n),
                _ => HClass::Stale,
            };
        }
        match self.run_by_id.get(&h.run_id) {
            Some(&r) if !self.runs[r].released && !self.runs[r].gone => HClass::Foreign,
            _ => HClass::Stale,
        }
    }

    pub(crate) fn hclass_status(c: HClass) -> Option<Status> {
        match c {
            HClass::Valid(_) => None,
            HClass::Foreign => Some(Status::ForeignHandle),
            HClass::Stale => Some(Status::StaleHandle),
        }
    }

    /// A run id that is not the current run's: (id, description).
    pub(crate) fn other_run_id(&mut self, wi: Option<usize>, cur: Option<usize>) -> u64 {
        let mut pool: Vec<u64> = Vec::new();
        for (i, r) in self.runs.iter().enumerate() {
            if Some(i) == cur {
                continue;
            }
            if let Some(id) = r.id {
                pool.push(id);
            }
        }
        let _ = wi;
        if !pool.is_empty() && self.rng.pct(70) {
            self.rng.pick(&pool)
        } else {
            match self.rng.below(3) {
                0 => 0,
                1 => (1 << 48) | self.rng.next(),
                _ => self.run_by_id.keys().max().copied().unwrap_or(0) + 1_000_000,
            }
        }
    }

    pub(crate) fn run_class(&self, wi: usize, id: u64) -> Option<usize> {
        match self.run_by_id.get(&id) {
            Some(&r)
                if !self.runs[r].released && !self.runs[r].gone && self.runs[r].worker == wi =>
            {
                Some(r)
            }
            _ => None,
        }
    }

    /// Status of a run-id argument naming another run than the one being built.
    pub(crate) fn foreign_or_stale(&self, id: u64) -> Status {
        match self.run_by_id.get(&id) {
            Some(&r) if !self.runs[r].released && !self.runs[r].gone => Status::ForeignHandle,
            _ => Status::StaleHandle,
        }
    }

    pub(crate) fn op_begin(&mut self) -> R {
        let oc = self.orch_ctx();
        let null_out = self.rng.pct(5);
        // A worker whose close_for ran out of budget refuses new runs (it has no open run:
        // close_for does not start while one is open, and nothing can begin one after).
        let closing = oc.st == OState::NoRun && oc.wi.is_some_and(|w| self.workers[w].closing);
        let mut exp = match oc.st {
            OState::Null => vec![Status::NullPointer],
            OState::Closed | OState::Ready(_) => vec![Status::WrongState],
            OState::WrongThread => vec![Status::WrongThread, Status::WrongState],
            OState::NoRun if closing => vec![Status::WrongState],
            OState::NoRun => vec![],
        };
        if null_out {
            exp.push(Status::NullPointer);
        }
        ok_if_none(&mut exp);
        let mut id: u64 = 0xDEAD_0001;
        let idp = out_ptr(null_out, &mut id);
        let orch = oc.orch;
        let st = self.call(
            oc.th,
            format!(
                "dagrt_begin_run({}, {})",
                Self::orch_name(&oc),
                out_arg(null_out, "&run")
            ),
            &exp,
            || co::dagrt_begin_run(orch, idp),
        )?;
        if st != Status::Ok {
            if closing && st == Status::WrongState {
                self.totals.refused_closing += 1;
                let msg = self.last_msg.clone();
                self.check(
                    msg.contains("closing"),
                    "dagrt_begin_run on a closing worker: message",
                    || format!("WRONG_STATE message {msg:?} does not say the worker is closing"),
                )?;
            }
            return self.check_out_untouched(id == 0xDEAD_0001, "dagrt_begin_run");
        }
        let wi = oc.wi.expect("begin on a worker");
        self.check(
            id != 0 && !self.run_by_id.contains_key(&id),
            "run ids are unique",
            || format!("dagrt_begin_run returned run id {id}, already seen"),
        )?;
        self.log(format!(
            "       (run {id} open, built by the {} thread)",
            if oc.th == Th::Main { "main" } else { "helper" }
        ));
        self.open_run(wi, Some(id), oc.th, false);
        Ok(())
    }

    /// A run opens on worker `wi`, built by thread `builder` (`no_gates`: its tasks are never
    /// gated), with its outermost frame; `id` once the run's id is known. Returns the run.
    pub(crate) fn open_run(
        &mut self,
        wi: usize,
        id: Option<u64>,
        builder: Th,
        no_gates: bool,
    ) -> usize {
        let f = self.new_frame();
        let ri = self.runs.len();
        self.runs.push(RunM {
            worker: wi,
            id,
            builder,
            frames: vec![f],
            closed: false,
            failed: None,
            released: false,
            gone: false,
            nodes: Vec::new(),
            tmap: Vec::new(),
            stale: Vec::new(),
            done_seen: false,
            checked: false,
            no_gates,
        });
        if let Some(id) = id {
            self.run_by_id.insert(id, ri);
        }
        self.workers[wi].open = Some(ri);
        ri
    }

    pub(crate) fn learn_run_id(&mut self, ri: usize, id: u64) -> R {
        match self.runs[ri].id {
            Some(k) => self.check(k == id, "run id of a handle", || {
                format!("a handle names run {id}, the run being built is {k}")
            }),
            None => {
                self.check(
                    id != 0 && !self.run_by_id.contains_key(&id),
                    "run ids are unique",
                    || format!("the callback's run has id {id}, already seen"),
                )?;
                self.runs[ri].id = Some(id);
                self.run_by_id.insert(id, ri);
                self.log(format!("       (the callback's run is run {id})"));
                Ok(())
            }
        }
    }

    /// A successful submit or alloc on worker `w` in run `ri` takes the worker's next
    /// sequence number; its handle (None: the out-parameter was NULL) names the run and
    /// carries that number. Returns the number.
    pub(crate) fn take_seq(&mut self, w: usize, ri: usize, h: Option<TaskHandle>) -> R<u64> {
        let seq = self.workers[w].next_seq;
        self.workers[w].next_seq += 1;
        if let Some(h) = h {
            self.learn_run_id(ri, h.run_id)?;
            self.check(h.slot >> 24 == seq, "slot id sequence", || {
                format!("handle {}: sequence number {}, expected {seq} (one per successful submit/alloc)", fmt_handle(&h), h.slot >> 24)
            })?;
        }
        Ok(seq)
    }

    /// Node `node`'s handle, if the call returned one, becomes a handle later calls may name.
    pub(crate) fn add_handle(&mut self, h: Option<TaskHandle>, node: usize) {
        if let Some(h) = h {
            self.handles.push((h, node));
            self.hmap.insert((h.run_id, h.slot), node);
        }
    }
}
