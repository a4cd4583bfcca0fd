//! Closing and failing a run's submission, and what the model concludes about its tasks.

use crate::ffi::ok_if_none;
use crate::fuzzer::Fz;
use crate::model::{FState, R};
use crate::orch::{OState, OC};
use dagrt::capi::orch as co;
use dagrt::error::Status;
use std::ffi::c_char;

impl Fz {
    /// The run id a close/fail names, and the status that id implies (None: the open run).
    fn pick_close_id(&mut self, oc: &OC) -> (u64, Option<Status>) {
        let cur = if let OState::Ready(ri) = oc.st {
            self.runs[ri].id
        } else {
            oc.wi
                .and_then(|w| self.workers[w].open)
                .and_then(|r| self.runs[r].id)
        };
        if let Some(c) = cur {
            if self.rng.pct(82) {
                return (c, None);
            }
        }
        let cur_ri = cur.and_then(|c| self.run_by_id.get(&c).copied());
        let id = self.other_run_id(oc.wi, cur_ri);
        if Some(id) == cur {
            return (id, None);
        }
        (id, Some(self.foreign_or_stale(id)))
    }

    pub(crate) fn op_close_run(&mut self) -> R {
        let oc = self.orch_ctx();
        let (id, idst) = self.pick_close_id(&oc);
        let mut exp = Self::state_statuses(oc.st);
        if let OState::Ready(ri) = oc.st {
            if let Some(s) = idst {
                exp.push(s);
            } else if self.runs[ri].frames.len() > 1 {
                exp.push(Status::ScopeUnbalanced);
            } else {
                exp.push(Status::Ok);
            }
        }
        let orch = oc.orch;
        let st = self.call(
            oc.th,
            format!("dagrt_close_run_submission({}, {id})", Self::orch_name(&oc)),
            &exp,
            || co::dagrt_close_run_submission(orch, id),
        )?;
        if st == Status::Ok {
            if let OState::Ready(ri) = oc.st {
                self.close_run_model(ri);
            }
        }
        Ok(())
    }

    pub(crate) fn close_run_model(&mut self, ri: usize) {
        for &f in &self.runs[ri].frames {
            self.frames[f] = false;
        }
        self.runs[ri].frames.clear();
        self.runs[ri].closed = true;
        let w = self.runs[ri].worker;
        self.workers[w].open = None;
    }

    pub(crate) fn op_fail_run(&mut self) -> R {
        let oc = self.orch_ctx();
        let (id, idst) = self.pick_close_id(&oc);
        let r = self.rng.below(100);
        let k = self.step;
        let text = format!("fuzz-abort <{k}>\0");
        let bad = [b'x', 0xff, 0];
        let (msgp, shown, expect_text): (*const c_char, String, String) = match r {
            0..=19 => (
                std::ptr::null(),
                "NULL".into(),
                "run submission failed".into(),
            ),
            // not UTF-8: taken all the same, the byte shown as U+FFFD
            20..=26 => (bad.as_ptr().cast(), "\"x\\xff\"".into(), "x\u{fffd}".into()),
            _ => (
                text.as_ptr().cast(),
                format!("{:?}", text.trim_end_matches('\0')),
                text.trim_end_matches('\0').to_string(),
            ),
        };
        let mut exp = Self::state_statuses(oc.st);
        if let OState::Ready(_) = oc.st {
            if let Some(s) = idst {
                exp.push(s);
            }
            ok_if_none(&mut exp);
        }
        let orch = oc.orch;
        let st = self.call(
            oc.th,
            format!(
                "dagrt_fail_run_submission({}, {id}, {shown})",
                Self::orch_name(&oc)
            ),
            &exp,
            || co::dagrt_fail_run_submission(orch, id, msgp),
        )?;
        if st == Status::Ok {
            if let OState::Ready(ri) = oc.st {
                self.close_run_model(ri);
                self.runs[ri].failed = Some(expect_text);
                self.classify_failed_run(ri);
            }
        }
        Ok(())
    }

    /// After a run's submission failed: which of its tasks had started (they run), which
    /// could not have (they never run) and which may go either way.
    pub(crate) fn classify_failed_run(&mut self, ri: usize) {
        let nodes = self.runs[ri].nodes.clone();
        let mut summary = Vec::new();
        for &n in &nodes {
            let s = if self.nodes[n].task.is_none() || self.entered_any(n) {
                FState::Ran
            } else if self.nodes[n].producers.iter().any(|e| {
                let p = &self.nodes[e.p];
                matches!(p.fstate, FState::NotRan | FState::Unknown)
                    || (p.fstate == FState::Ran
                        && p.task.as_ref().is_some_and(|t| t.fail.is_some()))
            }) {
                FState::NotRan
            } else {
                FState::Unknown
            };
            self.nodes[n].fstate = s;
            if self.nodes[n].task.is_some() {
                summary.push(format!(
                    "rec{}:{}",
                    self.nodes[n].rec,
                    match s {
                        FState::Ran => "ran",
                        FState::NotRan => "never",
                        FState::Unknown => "?",
                        FState::Normal => "",
                    }
                ));
            }
        }
        self.log(format!("       (failed run: {})", summary.join(" ")));
    }
}
