//! Scope begin / end, alone and in bursts (nesting limits, misuse).

use crate::fuzzer::Fz;
use crate::model::R;
use crate::orch::OState;
use dagrt::capi::orch as co;
use dagrt::error::Status;

impl Fz {
    pub(crate) fn op_scope_begin(&mut self) -> R {
        let oc = self.orch_ctx();
        let mut exp = Self::state_statuses(oc.st);
        if let OState::Ready(ri) = oc.st {
            exp.push(if self.runs[ri].frames.len() > 64 {
                Status::ScopeTooDeep
            } else {
                Status::Ok
            });
        }
        let orch = oc.orch;
        let st = self.call(
            oc.th,
            format!("dagrt_scope_begin({})", Self::orch_name(&oc)),
            &exp,
            || co::dagrt_scope_begin(orch),
        )?;
        if st == Status::Ok {
            if let OState::Ready(ri) = oc.st {
                let f = self.new_frame();
                self.runs[ri].frames.push(f);
            }
        }
        Ok(())
    }

    pub(crate) fn op_scope_end(&mut self) -> R {
        let oc = self.orch_ctx();
        let mut exp = Self::state_statuses(oc.st);
        if let OState::Ready(ri) = oc.st {
            exp.push(if self.runs[ri].frames.len() <= 1 {
                Status::ScopeUnbalanced
            } else {
                Status::Ok
            });
        }
        let orch = oc.orch;
        let st = self.call(
            oc.th,
            format!("dagrt_scope_end({})", Self::orch_name(&oc)),
            &exp,
            || co::dagrt_scope_end(orch),
        )?;
        if st == Status::Ok {
            if let OState::Ready(ri) = oc.st {
                let f = self.runs[ri].frames.pop().expect("a nested frame");
                self.frames[f] = false;
            }
        }
        Ok(())
    }

    /// Open scopes up to the limit, one more (SCOPE_TOO_DEEP), then end some of them.
    pub(crate) fn op_scope_burst(&mut self) -> R {
        let oc = self.orch_ctx();
        let OState::Ready(ri) = oc.st else {
            return Ok(());
        };
        let orch = oc.orch;
        while self.runs[ri].frames.len() <= 64 {
            self.call(
                oc.th,
                format!(
                    "dagrt_scope_begin(o) [nested {}]",
                    self.runs[ri].frames.len()
                ),
                &[Status::Ok],
                || co::dagrt_scope_begin(orch),
            )?;
            let f = self.new_frame();
            self.runs[ri].frames.push(f);
        }
        self.call(
            oc.th,
            "dagrt_scope_begin(o) [65th nested]".into(),
            &[Status::ScopeTooDeep],
            || co::dagrt_scope_begin(orch),
        )?;
        let k = self.rng.range(1, 64);
        for _ in 0..k {
            self.call(oc.th, "dagrt_scope_end(o)".into(), &[Status::Ok], || {
                co::dagrt_scope_end(orch)
            })?;
            let f = self.runs[ri].frames.pop().expect("a nested frame");
            self.frames[f] = false;
        }
        Ok(())
    }
}
