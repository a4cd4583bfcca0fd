//! Closing and freeing workers, bounded or not, and what the model does with their runs.

use crate::config::LONG_WAIT_MS;
use crate::ffi::{out_arg, out_ptr};
use crate::fuzzer::Fz;
use crate::model::{Th, WState, R};
use crate::workers::worker_label;
use dagrt::capi::run as cr;
use dagrt::capi::worker::{self as cw, dagrt_worker_t};
use dagrt::error::Status;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

impl Fz {
    /// Close a worker: waits for its closed runs (gates are opened first, now or shortly
    /// after the call started), then its runs are gone.
    pub(crate) fn op_close_worker(&mut self, valid: bool) -> R {
        let wi = if valid {
            self.primary()
        } else {
            self.pick_worker()
        };
        let wi = if !valid && self.rng.pct(3) { None } else { wi };
        let mut exp = vec![Status::Ok];
        if let Some(w) = wi {
            if self.workers[w].state == WState::Init && self.workers[w].open.is_some() {
                exp = vec![Status::WrongState];
            }
        } else {
            exp = vec![Status::NullPointer];
        }
        let mut opener = None;
        if exp == [Status::Ok]
            && wi.is_some_and(|w| self.workers[w].state == WState::Init && self.any_blocked(w))
        {
            if self.rng.pct(50) {
                self.open_all_gates();
            } else {
                // Close while tasks are blocked: a second thread opens the gates a little later.
                opener = Some(self.open_gates_during_close());
            }
        }
        let p = self.wptr(wi);
        let st = self.call(
            Th::Main,
            format!("dagrt_worker_close({})", worker_label(wi)),
            &exp,
            || cw::dagrt_worker_close(p),
        );
        if let Some(o) = opener {
            let _ = o.join();
            self.open_all_gates();
        }
        let st = st?;
        if st == Status::Ok {
            self.closed_model(wi.expect("close on a worker"))?;
        }
        Ok(())
    }

    /// A budget for `dagrt_worker_close_for`: (timeout_ms, large). 0 and small budgets (1-20
    /// ms, three orders of magnitude below GATE_LIMIT, how long a gated task can be held)
    /// let the model say a blocked run cannot finish in time; a large one (LONG_WAIT_MS, or
    /// u64::MAX, which overflows any deadline and so waits without bound) must see every
    /// run finish, so it is only used once no task can stay blocked.
    pub(crate) fn close_budget(&mut self) -> (u64, bool) {
        match self.rng.below(100) {
            0..=24 => (0, false),
            25..=64 => (self.rng.range(1, 20), false),
            65..=94 => (LONG_WAIT_MS, true),
            _ => (u64::MAX, true),
        }
    }

    /// dagrt_worker_close_for: close within a cleanup budget. Defects: a NULL worker, a NULL
    /// out_closed (checked first; the header names no order, so with two defects either
    /// status), a run open for submission (WRONG_STATE; nothing changes, the worker does not
    /// start closing). A never-initialised worker is closed at once, as dagrt_worker_close
    /// does (OK, closed = 1, and it stays closed: init and lanes are then refused), and
    /// so is a closed one (idempotent). On an initialised worker the model predicts
    /// out_closed from its registered runs (begun, not released):
    /// - 1 when every one was seen done (or there is none), and with a large budget, which
    ///   is only used once every gate is open (now, or by a second thread 5 ms into the
    ///   call: close_for must keep waiting for the runs it refused to tear down);
    /// - 0 when one is definitely unfinished (a task blocked on a closed gate, or behind
    ///   one) and the budget is 0 or small: nothing opens a gate during the call;
    /// - either otherwise (a task may not have finished yet).
    ///
    /// closed = 1 tears the worker down as dagrt_worker_close does (its runs are gone).
    /// closed = 0 must come no earlier than the budget and leaves everything standing
    /// (stats still answer, exact) but puts the worker in the closing state
    /// (`WModel::closing`): from then on only new runs are refused.
    pub(crate) fn op_close_for(&mut self, valid: bool) -> R {
        let wi = if valid {
            self.primary()
        } else {
            self.pick_worker()
        };
        let r = if valid { 99 } else { self.rng.below(100) };
        let wi = if r < 3 { None } else { wi };
        let null_out = (3..9).contains(&r);
        let (mut budget, mut large) = self.close_budget();
        if large && wi.is_some_and(|w| self.any_blocked(w)) && self.rng.pct(60) {
            // A blocked task is what lets a budget run out: use it more often than not.
            budget = self.rng.range(0, 20);
            large = false;
        }
        let mut exp = Vec::new();
        if null_out {
            exp.push(Status::NullPointer);
        }
        match wi {
            None => exp.push(Status::NullPointer),
            Some(w) => {
                if self.workers[w].state == WState::Init && self.workers[w].open.is_some() {
                    exp.push(Status::WrongState);
                }
            }
        }
        if exp.is_empty() {
            exp.push(Status::Ok);
        }
        let waits =
            exp == [Status::Ok] && wi.is_some_and(|w| self.workers[w].state == WState::Init);
        let mut opener = None;
        let mut want: Vec<u32> = vec![1];
        let mut undone = None;
        if waits {
            let w = wi.expect("close_for on a worker");
            if large && self.any_blocked(w) {
                if self.rng.pct(50) {
                    self.open_all_gates();
                } else {
                    // The budget is far beyond the gates' opening: every run finishes.
                    opener = Some(self.open_gates_during_close());
                }
            }
            let mine: Vec<usize> = (0..self.runs.len())
                .filter(|&ri| {
                    self.runs[ri].worker == w && !self.runs[ri].released && !self.runs[ri].gone
                })
                .collect();
            if !large
                && !self.any_blocked(w)
                && mine.iter().any(|&ri| !self.runs[ri].done_seen)
                && self.rng.pct(30)
            {
                // Let every run finish first (none can stay blocked): then even budget 0
                // must close the worker.
                self.settle_runs(w, &mine)?;
            }
            let lv = self.live(w);
            undone = mine
                .iter()
                .copied()
                .find(|&ri| self.definitely_undone(ri, &lv));
            want = if large || mine.iter().all(|&ri| self.runs[ri].done_seen) {
                vec![1]
            } else if undone.is_some() {
                vec![0]
            } else {
                vec![0, 1]
            };
            if let Some(ri) = undone.filter(|_| want == [1]) {
                // Only with a large budget and the gates opening: name the run for the log.
                self.log(format!(
                    "       (run {} is blocked until the gates open)",
                    self.runs[ri].id.unwrap_or(0)
                ));
            }
        }
        let mut closed: u32 = 7;
        let cp = out_ptr(null_out, &mut closed);
        let p = self.wptr(wi);
        let t0 = Instant::now();
        let st = self.call(
            Th::Main,
            format!(
                "dagrt_worker_close_for({}, {budget} ms, {})",
                worker_label(wi),
                out_arg(null_out, "&closed")
            ),
            &exp,
            || cw::dagrt_worker_close_for(p, budget, cp),
        );
        let el = t0.elapsed();
        if let Some(o) = opener {
            let _ = o.join();
            self.open_all_gates();
        }
        let st = st?;
        if st != Status::Ok {
            return self.check(
                closed == 7,
                "dagrt_worker_close_for wrote out_closed on failure",
                || format!("out_closed = {closed} after a failed call (was 7)"),
            );
        }
        let w = wi.expect("close_for succeeded on a worker");
        self.log(format!(
            "       (closed = {closed}, expected {})",
            want.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join("|")
        ));
        if !want.contains(&closed) {
            let sig = match (closed, undone) {
                (1, Some(ri)) => {
                    let lv = self.live(w);
                    match self.undone_sig(ri, &lv) {
                        "a run reported done while it cannot be" => {
                            "dagrt_worker_close_for: closed = 1 while a run cannot be done"
                        }
                        x => x,
                    }
                }
                (0, _) => {
                    "dagrt_worker_close_for: closed = 0 although every run was done or had the time to finish"
                }
                _ => "dagrt_worker_close_for: out_closed is neither 0 nor 1",
            };
            return self.fatal(
                sig,
                format!(
                    "dagrt_worker_close_for(w{w}, {budget} ms) set out_closed = {closed} after {} ms, the model expected {want:?}",
                    el.as_millis()
                ),
            );
        }
        if waits {
            self.totals.close_for[closed as usize] += 1;
        }
        if closed == 1 {
            return self.closed_model(w);
        }
        // closed = 0: the budget ran out with a run still running
        if el + Duration::from_millis(1) < Duration::from_millis(budget) {
            self.soft(
                "dagrt_worker_close_for gave up before its budget",
                format!(
                    "closed = 0 after {:.3} ms of a {budget} ms budget",
                    el.as_micros() as f64 / 1000.0
                ),
            );
        }
        if el > Duration::from_millis(budget) + Duration::from_secs(5) {
            self.soft(
                "dagrt_worker_close_for overran its budget",
                format!(
                    "closed = 0 after {} ms of a {budget} ms budget",
                    el.as_millis()
                ),
            );
        }
        if !self.workers[w].closing {
            self.log(format!("       (w{w} is closing: new runs are refused)"));
        }
        self.workers[w].closing = true;
        // nothing was torn down: the worker answers, with its runs still registered
        self.check_stats_exact(w)
    }

    /// Worker `w` was closed (torn down, if it had started): its unreleased runs' tasks ran
    /// as the model says, and the runs are gone.
    fn closed_model(&mut self, w: usize) -> R {
        if self.workers[w].state == WState::New {
            // Nothing to tear down, but closed all the same: no init, no lanes after it.
            self.workers[w].state = WState::Closed;
        }
        if self.workers[w].state == WState::Init {
            // Every run is terminal (the close waited for them) and keeps its result: wait,
            // done, stats and release still work on it until released or the worker is freed.
            for ri in 0..self.runs.len() {
                if self.runs[ri].worker == w && !self.runs[ri].released && !self.runs[ri].gone {
                    self.check_fates(ri)?;
                    self.runs[ri].done_seen = true;
                    for f in std::mem::take(&mut self.runs[ri].frames) {
                        self.frames[f] = false;
                    }
                }
            }
            self.workers[w].open = None;
            self.workers[w].state = WState::Closed;
            self.workers[w].closing = false;
            self.workers[w].kept_runs = true;
        }
        Ok(())
    }

    /// A thread that opens every gate 5 ms from now (join it after the close it races).
    fn open_gates_during_close(&mut self) -> std::thread::JoinHandle<()> {
        let rec = self.rec.clone();
        self.log("       (gates open in 5 ms, during the close)".into());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            for g in rec.gates.iter() {
                g.store(true, SeqCst);
            }
        })
    }

    /// Wait for every run in `runs` (closed, none possibly blocked) and check it as done.
    fn settle_runs(&mut self, w: usize, runs: &[usize]) -> R {
        let p = self.workers[w].ptr;
        for &ri in runs {
            if self.runs[ri].done_seen {
                continue;
            }
            self.wait_done(w, p, ri, "with no task blocked")?;
        }
        Ok(())
    }

    /// Wait (bounded) for closed run `ri` of worker `w`, which nothing blocks (`why` says
    /// why not), and check it finished with the terminal status and message it must have.
    pub(crate) fn wait_done(
        &mut self,
        w: usize,
        p: *mut dagrt_worker_t,
        ri: usize,
        why: &str,
    ) -> R {
        let id = self.runs[ri].id.expect("a closed run has an id");
        let (exp, _) = self.expected_terminal(ri);
        let mut done: u32 = 9;
        let dp: *mut u32 = &mut done;
        let st = self.call(
            Th::Main,
            format!("dagrt_wait_run_for(w{w}, {id}, {LONG_WAIT_MS} ms, &d)"),
            &exp,
            || cr::dagrt_wait_run_for(p, id, LONG_WAIT_MS, dp),
        )?;
        self.check(done == 1, "a run did not finish", || {
            format!("run {id} not done after {LONG_WAIT_MS} ms {why}")
        })?;
        self.check_terminal_msg(ri, st)?;
        self.on_done(ri)
    }

    fn drop_worker_runs(&mut self, w: usize) {
        for r in self.runs.iter_mut() {
            if r.worker == w && !r.released {
                r.gone = true;
                for &f in &r.frames {
                    self.frames[f] = false;
                }
                r.frames.clear();
            }
        }
        self.workers[w].open = None;
    }

    /// Free a worker (dagrt_worker_free cannot fail). An open run is abandoned (its
    /// submission fails), closed runs are waited for: gates are opened first.
    pub(crate) fn free_worker(&mut self, w: usize) -> R {
        self.open_all_gates();
        let p = self.workers[w].ptr;
        let open = self.workers[w].open;
        self.log(format!("#{:<4} main dagrt_worker_free(w{w})", self.step));
        cw::dagrt_worker_free(p);
        self.tick();
        if self.workers[w].state == WState::Init {
            if let Some(ri) = open {
                for &f in &self.runs[ri].frames {
                    self.frames[f] = false;
                }
                self.runs[ri].frames.clear();
                self.runs[ri].closed = true;
                self.runs[ri].failed = Some("worker freed while the run was open".into());
                self.classify_failed_run(ri);
            }
            for ri in 0..self.runs.len() {
                if self.runs[ri].worker == w && !self.runs[ri].released && !self.runs[ri].gone {
                    self.check_fates(ri)?;
                }
            }
        }
        self.drop_worker_runs(w);
        self.workers[w].state = WState::Freed;
        Ok(())
    }

    pub(crate) fn op_free_worker(&mut self) -> R {
        let live = self.live_workers();
        if live.is_empty() {
            return Ok(());
        }
        let p = live[0];
        let w = if live.len() > 1 && (self.workers[p].state == WState::Init || self.rng.pct(50)) {
            live[1 + self.rng.idx(live.len() - 1)]
        } else {
            p
        };
        self.free_worker(w)
    }
}
