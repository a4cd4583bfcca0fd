//! dagrt_worker_submit / dagrt_worker_run, and the orchestration callback that makes random
//! calls of its own.

use crate::ffi::last_error;
use crate::fuzzer::Fz;
use crate::model::{Abort, Th, WState, R};
use crate::workers::worker_label;
use dagrt::capi::orch as co;
use dagrt::capi::worker::{self as cw, dagrt_orch_t};
use dagrt::error::Status;
use std::ffi::c_void;
use std::time::Instant;

struct CbCtx {
    fz: *mut Fz,
    wi: usize,
    steps: u64,
    rc: i32,
    provoke: bool,
    run_mode: bool,
    called: bool,
    aborted: bool,
    ri: Option<usize>,
    orch_seen: *mut dagrt_orch_t,
    end_msg: String,
    failures: u32,
}

unsafe extern "C" fn trampoline(orch: *mut dagrt_orch_t, ctx: *mut c_void) -> i32 {
    // SAFETY: ctx is the CbCtx op_worker_submit passed, alive for the whole call.
    let c = unsafe { &mut *(ctx as *mut CbCtx) };
    c.called = true;
    c.orch_seen = orch;
    // SAFETY: fz is the fuzzer that called dagrt_worker_submit/run; it does not touch itself
    // until that call returns, so this is the only live reference.
    let fz = unsafe { &mut *c.fz };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fz.callback_body(c, orch)));
    fz.cb = None;
    fz.cb_no_gates = false;
    match r {
        Ok(Ok(())) => c.rc,
        Ok(Err(Abort)) => {
            c.aborted = true;
            0
        }
        Err(_) => {
            c.aborted = true;
            fz.record_failure(
                "fuzzer panic in the callback".into(),
                "the fuzzer panicked inside the orchestration callback".into(),
            );
            0
        }
    }
}

impl Fz {
    pub(crate) fn op_worker_submit(&mut self) -> R {
        let wi = self.pick_worker();
        let r = self.rng.below(100);
        let wi = if r < 3 { None } else { wi };
        let fn_null = (3..6).contains(&r);
        let run_mode = self.rng.pct(40);
        let out_null = !run_mode && (6..9).contains(&r);
        let mut exp = Vec::new();
        if wi.is_none() || fn_null || out_null {
            exp.push(Status::NullPointer);
        }
        let mut will_call = exp.is_empty();
        if let Some(w) = wi {
            let m = &self.workers[w];
            if m.state != WState::Init {
                exp.push(Status::WrongState);
                will_call = false;
            } else if let Some(ri) = m.open {
                exp.push(if self.runs[ri].builder == Th::Main {
                    Status::WrongState
                } else {
                    Status::WrongThread
                });
                will_call = false;
            } else if m.closing {
                // begin_run fails before the callback: a closing worker takes no new run
                exp.push(Status::WrongState);
                will_call = false;
            }
        }
        let refused_closing = exp == [Status::WrongState]
            && wi.is_some_and(|w| self.workers[w].state == WState::Init && self.workers[w].closing);
        let rc: i32 = if self.rng.pct(22) {
            self.rng.pick(&[1, -3, 7])
        } else {
            0
        };
        let provoke = rc != 0 && self.rng.pct(50);
        let steps = self.rng.range(0, 6);
        if will_call && run_mode {
            if let Some(w) = wi {
                if self.any_blocked(w) {
                    // dagrt_worker_run waits for its run: lanes blocked by other runs' gated
                    // tasks would make that wait infinite.
                    self.open_all_gates();
                }
            }
        }
        let wp = self.wptr(wi);
        let fname = if run_mode {
            "dagrt_worker_run"
        } else {
            "dagrt_worker_submit"
        };
        let desc = format!(
            "{fname}({}, {}, ctx{{{steps} steps, rc {rc}{}}}{})",
            worker_label(wi),
            if fn_null { "NULL" } else { "cb" },
            if provoke { ", provoke" } else { "" },
            if run_mode {
                ""
            } else if out_null {
                ", NULL"
            } else {
                ", &run"
            }
        );
        self.log(format!("#{:<4} main {desc} ...", self.step));
        let fzp: *mut Fz = self;
        let mut ctx = CbCtx {
            fz: fzp,
            wi: wi.unwrap_or(0),
            steps,
            rc,
            provoke,
            run_mode,
            called: false,
            aborted: false,
            ri: None,
            orch_seen: std::ptr::null_mut(),
            end_msg: String::new(),
            failures: 0,
        };
        let ctxp = &mut ctx as *mut CbCtx as *mut c_void;
        let mut out_run: u64 = 0xDEAD_0002;
        let outp: *mut u64 = if out_null {
            std::ptr::null_mut()
        } else {
            &mut out_run
        };
        let f: cw::OrchFn = if fn_null { None } else { Some(trampoline) };
        let before = last_error();
        let t0 = Instant::now();
        // `self` is not used until the call returns: the callback reaches the fuzzer
        // through `fzp`.
        let st = if run_mode {
            cw::dagrt_worker_run(wp, f, ctxp)
        } else {
            cw::dagrt_worker_submit(wp, f, ctxp, outp)
        };
        let after = last_error();
        let el = t0.elapsed();
        if ctx.aborted {
            return Err(Abort);
        }
        if ctx.called != will_call {
            return self.fatal(
                format!("{fname}: callback called = {}", ctx.called),
                format!(
                    "{desc}: the callback was {}called, the model expected {}",
                    if ctx.called { "" } else { "not " },
                    if will_call { "a call" } else { "none" }
                ),
            );
        }
        if !will_call {
            self.note_result(Th::Main, &desc, &exp, st, &before, &after, el)?;
            if refused_closing {
                self.totals.refused_closing += 1;
                self.check(
                    after.0.contains("closing"),
                    &format!("{fname} on a closing worker: message"),
                    || {
                        format!(
                            "WRONG_STATE message {:?} does not say the worker is closing",
                            after.0
                        )
                    },
                )?;
            }
            if !run_mode && !out_null {
                self.check(
                    out_run == 0xDEAD_0002,
                    "dagrt_worker_submit wrote out_run on failure",
                    || "out-parameter written on failure".into(),
                )?;
            }
            return Ok(());
        }
        let w = wi.expect("callback on a worker");
        let ri = ctx.ri.expect("the callback created its run");
        let k = self.workers[w].orch;
        if !k.is_null() {
            self.check(k == ctx.orch_seen, "callback orch handle", || {
                format!(
                    "callback got orch {:?}, the worker's is {k:?}",
                    ctx.orch_seen
                )
            })?;
        }
        // what the call did: close the run (ending nested scopes), or fail it
        self.close_run_model(ri);
        if rc != 0 {
            self.runs[ri].failed = Some(format!("orchestration callback returned {rc}"));
            self.classify_failed_run(ri);
        }
        if !run_mode {
            self.learn_run_id(ri, out_run)?;
        }
        let exp = if rc != 0 {
            vec![Status::OrchestrationFailed]
        } else if run_mode {
            self.expected_terminal(ri).0
        } else {
            vec![Status::Ok]
        };
        // errno-like: a successful call leaves the message of the last failing call, which
        // may be one the callback made
        let before_adj = if ctx.failures > 0 {
            (ctx.end_msg.clone(), after.1)
        } else {
            before
        };
        self.note_result(
            Th::Main,
            &format!("{desc} [after the callback]"),
            &exp,
            st,
            &before_adj,
            &after,
            el,
        )?;
        if rc != 0 {
            let want = format!("orchestration callback returned {rc}");
            self.check(
                after.0.contains(&want),
                "ORCHESTRATION_FAILED message",
                || format!("message {:?} lacks {want:?}", after.0),
            )?;
        } else if run_mode {
            self.check_terminal_msg(ri, st)?;
        }
        if run_mode {
            // dagrt_worker_run released the run: only what ran can be checked
            self.runs[ri].released = true;
            self.on_done(ri)?;
        }
        Ok(())
    }

    fn callback_body(&mut self, c: &mut CbCtx, orch: *mut dagrt_orch_t) -> R {
        let wi = c.wi;
        let ri = self.open_run(wi, None, Th::Main, c.run_mode);
        if self.workers[wi].orch.is_null() {
            self.workers[wi].orch = orch;
        }
        c.ri = Some(ri);
        self.log("       (callback: its run is open)".into());
        self.cb = Some(wi);
        self.cb_no_gates = c.run_mode;
        self.cb_failures = 0;
        for _ in 0..c.steps {
            self.step += 1;
            match self.rng.below(100) {
                0..=54 => self.op_submit()?,
                55..=64 => self.op_alloc()?,
                65..=76 => self.op_scope_begin()?,
                77..=88 => self.op_scope_end()?,
                89..=93 => self.op_begin()?,
                _ => self.op_stats()?,
            }
        }
        if c.provoke {
            let o = self.workers[wi].orch;
            if self.runs[ri].frames.len() <= 1 {
                self.call(
                    Th::Main,
                    "dagrt_scope_end(o) [provoked]".into(),
                    &[Status::ScopeUnbalanced],
                    || co::dagrt_scope_end(o),
                )?;
            } else {
                self.call(
                    Th::Main,
                    "dagrt_close_run_submission(o, 0) [provoked]".into(),
                    &[Status::StaleHandle],
                    || co::dagrt_close_run_submission(o, 0),
                )?;
            }
        }
        c.end_msg = last_error().0;
        c.failures = self.cb_failures;
        self.log(format!("       (callback returns {})", c.rc));
        Ok(())
    }
}
