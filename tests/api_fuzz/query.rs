//! Run queries (wait, wait_for, done, stats, release) on runs in any state.

use crate::config::LONG_WAIT_MS;
use crate::ffi::{ok_if_none, out_arg, out_ptr, sname, snames};
use crate::fuzzer::Fz;
use crate::model::{Live, Th, WState, R};
use crate::workers::worker_label;
use dagrt::capi::run::{self as cr, RunStats};
use dagrt::error::Status;

impl Fz {
    pub(crate) fn op_query(&mut self) -> R {
        let wi = self.pick_worker();
        let wi = if self.rng.pct(3) { None } else { wi };
        let th = if self.rng.pct(15) {
            Th::Helper
        } else {
            Th::Main
        };
        // which run id
        let mine: Vec<usize> = match wi {
            Some(w) => (0..self.runs.len())
                .filter(|&r| {
                    self.runs[r].worker == w
                        && !self.runs[r].released
                        && !self.runs[r].gone
                        && self.runs[r].id.is_some()
                })
                .collect(),
            None => Vec::new(),
        };
        let closed: Vec<usize> = mine
            .iter()
            .copied()
            .filter(|&r| self.runs[r].closed)
            .collect();
        let id = if !closed.is_empty() && self.rng.pct(60) {
            self.runs[self.rng.pick(&closed)].id.unwrap_or(0)
        } else if !mine.is_empty() && self.rng.pct(40) {
            self.runs[self.rng.pick(&mine)].id.unwrap_or(0)
        } else {
            self.other_run_id(wi, None)
        };
        let state_ok = wi.is_some_and(|w| {
            let w = &self.workers[w];
            w.state == WState::Init || (w.state == WState::Closed && w.kept_runs)
        });
        let ri = wi.and_then(|w| self.run_class(w, id));
        let id_status = if ri.is_some() {
            None
        } else {
            Some(self.foreign_or_stale(id))
        };
        let mut base = Vec::new();
        if wi.is_none() {
            base.push(Status::NullPointer);
        } else if !state_ok {
            base.push(Status::WrongState);
        } else if let Some(s) = id_status {
            base.push(s);
        }
        let p = self.wptr(wi);
        let wn = worker_label(wi);
        let lv = ri.map(|r| self.live(self.runs[r].worker));
        let which = self.rng.below(100);
        match which {
            // dagrt_wait_run: only when the model proves the wait finite
            0..=14 => {
                if let (Some(r), Some(l)) = (ri, &lv) {
                    if !self.eventually_done(r, l) {
                        return self.query_wait_for(th, wi, id, base, ri, lv);
                    }
                }
                let exp = if base.is_empty() {
                    self.expected_terminal(ri.unwrap_or(0)).0
                } else {
                    base
                };
                let st = self.call(th, format!("dagrt_wait_run({wn}, {id})"), &exp, || {
                    cr::dagrt_wait_run(p, id)
                })?;
                if let Some(r) = ri {
                    self.check_terminal_msg(r, st)?;
                    self.on_done(r)?;
                }
                Ok(())
            }
            15..=44 => self.query_wait_for(th, wi, id, base, ri, lv),
            45..=59 => {
                let null_out = self.rng.pct(6);
                let mut exp = base.clone();
                if null_out {
                    exp.push(Status::NullPointer);
                }
                ok_if_none(&mut exp);
                let mut done: u32 = 9;
                let dp = out_ptr(null_out, &mut done);
                let st = self.call(
                    th,
                    format!("dagrt_run_done({wn}, {id}, {})", out_arg(null_out, "&d")),
                    &exp,
                    || cr::dagrt_run_done(p, id, dp),
                )?;
                if st != Status::Ok {
                    return self.check_out_untouched(done == 9, "dagrt_run_done");
                }
                let r = ri.expect("done on a run");
                let l = lv.expect("liveness");
                self.check(done <= 1, "dagrt_run_done value", || {
                    format!("done = {done}")
                })?;
                if done == 1 {
                    let sig = self.undone_sig(r, &l);
                    self.check(!self.definitely_undone(r, &l), sig, || format!("run {id}: done = 1 but the model has it open or with a definitely unfinished task"))?;
                    self.on_done(r)?;
                } else {
                    self.check(
                        !self.runs[r].done_seen,
                        "a done run reported not done",
                        || format!("run {id}: done = 0 after it was seen done"),
                    )?;
                }
                Ok(())
            }
            60..=74 => {
                let null_out = self.rng.pct(6);
                let mut exp = base.clone();
                if null_out {
                    exp.push(Status::NullPointer);
                }
                ok_if_none(&mut exp);
                let mut rs = RunStats {
                    completed: 77,
                    ..Default::default()
                };
                let rp = out_ptr(null_out, &mut rs);
                let st = self.call(
                    th,
                    format!("dagrt_run_stats({wn}, {id}, {})", out_arg(null_out, "&s")),
                    &exp,
                    || cr::dagrt_run_stats(p, id, rp),
                )?;
                if st != Status::Ok {
                    return self.check_out_untouched(rs.completed == 77, "dagrt_run_stats");
                }
                let r = ri.expect("stats on a run");
                let l = lv.expect("liveness");
                let tasks = self.runs[r]
                    .nodes
                    .iter()
                    .filter(|&&n| self.nodes[n].task.is_some())
                    .count() as u64;
                let dl = self.runs[r].nodes.iter().filter(|&&n| l.dl[n]).count() as i64;
                let ok = rs.done <= 1
                    && rs.completed + rs.failed + rs.cancelled <= tasks
                    && rs.live_slots >= dl
                    && (rs.done == 0 || rs.live_slots == 0);
                self.check(ok, "dagrt_run_stats bounds", || {
                    format!("run {id}: {rs:?} with {tasks} tasks, {dl} slots definitely live")
                })?;
                if rs.done == 1 {
                    let sig = self.undone_sig(r, &l);
                    self.check(!self.definitely_undone(r, &l), sig, || {
                        format!("run {id}: stats done = 1 but the model has it open or unfinished")
                    })?;
                    self.on_done(r)?;
                } else if self.definitely_undone(r, &l) {
                    self.check(rs.done == 0, "run stats done", || "done".into())?;
                }
                Ok(())
            }
            _ => {
                let mut exp = base.clone();
                if exp.is_empty() {
                    let r = ri.expect("release on a run");
                    let l = lv.as_ref().expect("liveness");
                    if self.definitely_undone(r, l) {
                        exp.push(Status::RunNotDone);
                    } else if self.runs[r].done_seen {
                        exp.push(Status::Ok);
                    } else {
                        exp.extend([Status::Ok, Status::RunNotDone]);
                    }
                }
                if let (Some(r), Some(l)) = (ri, lv.as_ref()) {
                    if exp == [Status::RunNotDone]
                        && self.undone_sig(r, l) != "a run reported done while it cannot be"
                    {
                        self.hint = Some(self.undone_sig(r, l).to_string());
                    }
                }
                let st = self.call(th, format!("dagrt_release_run({wn}, {id})"), &exp, || {
                    cr::dagrt_release_run(p, id)
                })?;
                if st == Status::Ok {
                    let r = ri.expect("release on a run");
                    self.runs[r].released = true;
                    self.on_done(r)?;
                    self.log(format!("       (run {id} released)"));
                }
                Ok(())
            }
        }
    }

    fn query_wait_for(
        &mut self,
        th: Th,
        wi: Option<usize>,
        id: u64,
        base: Vec<Status>,
        ri: Option<usize>,
        lv: Option<Live>,
    ) -> R {
        let null_out = self.rng.pct(6);
        let p = self.wptr(wi);
        let wn = worker_label(wi);
        let mut exp = base.clone();
        if null_out {
            exp.push(Status::NullPointer);
        }
        let mut timeout = self.rng.below(4);
        // what done must be on success: Some(0), Some(1), or None (either)
        let mut want: Option<u32> = None;
        if exp.is_empty() {
            let r = ri.expect("wait_for on a run");
            let l = lv.as_ref().expect("liveness");
            if self.definitely_undone(r, l) {
                exp.push(Status::Ok);
                want = Some(0);
            } else if self.eventually_done(r, l) {
                timeout = LONG_WAIT_MS;
                exp = self.expected_terminal(r).0;
                want = Some(1);
            } else {
                exp = self.expected_terminal(r).0;
                exp.push(Status::Ok);
            }
        }
        exp.sort_by_key(|s| *s as i32);
        exp.dedup();
        let mut done: u32 = 9;
        let dp = out_ptr(null_out, &mut done);
        let st = self.call(
            th,
            format!(
                "dagrt_wait_run_for({wn}, {id}, {timeout} ms, {})",
                out_arg(null_out, "&d")
            ),
            &exp,
            || cr::dagrt_wait_run_for(p, id, timeout, dp),
        )?;
        let Some(r) = ri.filter(|_| !null_out && base.is_empty()) else {
            return self.check_out_untouched(done == 9, "dagrt_wait_run_for");
        };
        let sig = if want == Some(0) {
            self.undone_sig(r, lv.as_ref().expect("liveness"))
        } else {
            "dagrt_wait_run_for done flag"
        };
        self.check(done <= 1 && want.is_none_or(|w| w == done), sig, || {
            format!("run {id}: done = {done}, expected {want:?}")
        })?;
        if done == 1 {
            let (term, _) = self.expected_terminal(r);
            self.check(
                term.contains(&st),
                "dagrt_wait_run_for status when done",
                || {
                    format!(
                        "run {id}: done with {}, expected {}",
                        sname(st),
                        snames(&term)
                    )
                },
            )?;
            self.check_terminal_msg(r, st)?;
            self.on_done(r)?;
        } else {
            self.check(
                st == Status::Ok,
                "dagrt_wait_run_for timeout status",
                || format!("timed out with {}", sname(st)),
            )?;
            self.check(!self.runs[r].done_seen, "a done run timed out", || {
                format!("run {id}: wait_for timed out after the run was seen done")
            })?;
        }
        Ok(())
    }
}
