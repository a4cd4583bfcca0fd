//! Runs whose orchestration fails at a random op (`cancelled_run`, three ways to fail
//! it) and the checks that unstarted tasks are cancelled (`check_cancelled`).

use super::*;

// ---------------------------------------------------------------------------------------
// Orchestration failure: cancellation of unstarted tasks

#[derive(Clone, Copy, Debug)]
pub(crate) enum CancelVia {
    /// `Orchestrator::fail_run_submission`.
    RustFail,
    /// `dagrt_fail_run_submission`.
    CFail,
    /// A `dagrt_worker_submit` callback returning non-zero.
    CCallback,
}

/// What a build leaves for the checks: nodes, ops, buffers and the run id.
type Parts = (Vec<Node>, Vec<Op>, Vec<Buf>, u64);

struct CbCtx<'a> {
    env: &'a Env,
    seed: u64,
    opts: Opts,
    rr: *const RunRec,
    n_ops: u64,
    stop_at: u64,
    rc: i32,
    deliberate: bool,
    totals: Totals,
    parts: Option<Parts>,
    err: Option<String>,
    captured: String,
    fail_seq: u64,
}

/// The orchestration callback: build random ops, then fail at op `stop_at`.
unsafe extern "C" fn orch_cb(orch: *mut dagrt_orch_t, ctx: *mut c_void) -> i32 {
    // SAFETY: `ctx` is the CbCtx that `cancelled_run` passed to dagrt_worker_submit; it
    // outlives this call and nothing else touches it meanwhile.
    let cx = unsafe { &mut *(ctx as *mut CbCtx<'_>) };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: the RunRec outlives the run (freed only after the run is checked).
        let rr = unsafe { &*cx.rr };
        let mut totals = std::mem::take(&mut cx.totals);
        let mut b = Builder::new(
            cx.env,
            Orch::C(orch),
            0,
            cx.opts,
            rr,
            Rng(cx.seed),
            &mut totals,
        );
        let res = build_ops(&mut b, cx.n_ops, Some(cx.stop_at));
        let mut err = res.as_ref().err().cloned();
        if err.is_none() && cx.deliberate {
            // A failing dagrt call right before returning: its message is what the callback
            // "saw", and the run's failure must carry it.
            let mut m = Member {
                tensors: vec![],
                bufs: vec![],
                deps: vec![],
                scalars: [cx.rr as u64, 0, 0, 0, 0, 0],
            };
            let args = [m.args()];
            match b.o.submit(
                SubmitKind::NextLevel,
                &callable(),
                &args,
                &CallConfig::default(),
                &[999],
            ) {
                Err((Status::UnknownWorker, _)) => {}
                other => {
                    err = Some(format!(
                        "submit to unknown worker 999 returned {other:?}, expected UnknownWorker"
                    ))
                }
            }
        }
        cx.captured = last_error();
        let run_id = b.run_id;
        let parts = (
            std::mem::take(&mut b.nodes),
            std::mem::take(&mut b.ops),
            std::mem::take(&mut b.bufs),
            run_id,
        );
        drop(b);
        cx.totals = totals;
        (parts, err, res.unwrap_or(false))
    }));
    cx.fail_seq = SEQ.load(Ordering::SeqCst);
    match r {
        Ok((parts, err, stopped)) => {
            cx.parts = Some(parts);
            cx.err = err;
            if stopped {
                cx.rc
            } else {
                0
            }
        }
        Err(_) => {
            cx.err = Some("panic inside the orchestration callback".into());
            1
        }
    }
}

/// One run whose orchestration fails at a random op; then a successful run on the same
/// worker, checked completely.
pub(crate) fn cancelled_run(
    env: &Env,
    seed: u64,
    via: CancelVia,
    totals: &mut Totals,
) -> Result<(), BuildErr> {
    let mut rng = Rng(seed);
    let hold_all = rng.pct(40);
    let fail_pct = if rng.pct(30) { 10 } else { 0 };
    let opts = Opts {
        fail_pct,
        gated: false,
        consumed_ops: false,
        hostile_pct: 2,
        hostile_sweep: false,
        hold_all,
        hold_pct: if hold_all { 0 } else { 20 },
    };
    let rr = Box::into_raw(Box::new(RunRec::new(false, false)));
    // SAFETY: just allocated; freed after the run is checked (leaked on failure).
    let rr_ref: &RunRec = unsafe { &*rr };
    let n_ops = rng.range(3, 50);
    let stop_at = rng.below(n_ops + 1);
    let custom = format!("<orchestration fault of seed {seed:#x}>");
    let build_seed = rng.next();
    let mut errs = Vec::new();
    let (nodes, ops, bufs, run_id): Parts;
    let fail_seq: u64;
    let expect_msg: Box<dyn Fn(&str) -> bool>;
    match via {
        CancelVia::RustFail | CancelVia::CFail => {
            let mut o = env.orch();
            let run = match o.begin_run() {
                Ok(r) => r,
                Err(e) => return Err(Box::new((format!("begin_run: {e:?}"), None))),
            };
            let mut b = Builder::new(env, o, run, opts, rr_ref, Rng(build_seed), totals);
            match build_ops(&mut b, n_ops, Some(stop_at)) {
                Ok(true) => {}
                Ok(false) => errs.push("build did not stop at the failure point".into()),
                Err(e) => errs.push(e),
            }
            let fs = SEQ.load(Ordering::SeqCst);
            if let Err(e) = b.o.fail(run, &custom) {
                errs.push(format!("fail_run_submission: {e:?}"));
            }
            // Submission is closed: the orchestrator refuses further calls for this run.
            match b.o.scope_begin() {
                Err((Status::WrongState, _)) => {}
                other => errs.push(format!(
                    "scope_begin after a failed submission returned {other:?}, expected WrongState"
                )),
            }
            nodes = std::mem::take(&mut b.nodes);
            ops = std::mem::take(&mut b.ops);
            bufs = std::mem::take(&mut b.bufs);
            run_id = run;
            fail_seq = fs;
            let c2 = custom.clone();
            expect_msg = Box::new(move |m: &str| m == c2);
        }
        CancelVia::CCallback => {
            let mut cx = CbCtx {
                env,
                seed: build_seed,
                opts,
                rr,
                n_ops,
                stop_at,
                rc: rng.range(1, 1 << 30) as i32,
                deliberate: rng.pct(50),
                totals: std::mem::take(totals),
                parts: None,
                err: None,
                captured: String::new(),
                fail_seq: 0,
            };
            let mut run = 0;
            let st = capi::worker::dagrt_worker_submit(
                env.cw,
                Some(orch_cb),
                &mut cx as *mut CbCtx<'_> as *mut c_void,
                &mut run,
            );
            let submit_msg = last_error();
            *totals = std::mem::take(&mut cx.totals);
            if let Some(e) = cx.err.take() {
                errs.push(e);
            }
            if st != Status::OrchestrationFailed || run == 0 {
                errs.push(format!(
                    "dagrt_worker_submit with a callback returning {} gave {st:?} ({submit_msg}), run {run}",
                    cx.rc
                ));
            }
            // The run's message carries the last error the callback itself caused; an error
            // left over from before the callback is not the callback's (only the deliberate
            // failing call is certain to have happened inside it).
            let (rc, captured) = (cx.rc, cx.captured.clone());
            let must_carry = cx.deliberate;
            if !contains_int(&submit_msg, rc as i64)
                || (must_carry && !submit_msg.contains(&captured))
            {
                errs.push(format!(
                    "dagrt_worker_submit's message '{submit_msg}' does not carry the callback's code {rc} and last error '{captured}'"
                ));
            }
            let (n, o2, bf, _) = cx.parts.take().unwrap_or_default();
            nodes = n;
            ops = o2;
            bufs = bf;
            run_id = run;
            fail_seq = cx.fail_seq;
            expect_msg = Box::new(move |m: &str| m == submit_msg);
        }
    }
    rr_ref.open_all();
    totals.cancelled_runs += 1;
    *totals
        .cancel_via
        .entry(match via {
            CancelVia::RustFail => "Orchestrator::fail_run_submission",
            CancelVia::CFail => "dagrt_fail_run_submission",
            CancelVia::CCallback => "dagrt_worker_submit callback",
        })
        .or_insert(0) += 1;
    let built = Built {
        seed,
        what: "orchestration_failure_cancels_unstarted",
        env_name: env.name,
        backend: env.backend(),
        run_id,
        gated: false,
        nodes,
        ops,
        bufs,
        rr,
        eng_edges: None,
    };
    if !errs.is_empty() {
        return Err(Box::new((errs.join("\n"), Some(built))));
    }
    match check_cancelled(env, &built, fail_seq, hold_all, &*expect_msg, totals) {
        Ok(()) => {}
        Err(m) => return Err(Box::new((m, Some(built)))),
    }
    // The worker stays usable: a successful random run right after.
    let b2 = build_failing(env, rng.next(), true, false, totals)?;
    totals.follow_ups += 1;
    check_failing(env, &b2, totals).map_err(|m| Box::new((m, Some(b2))))
}

fn check_cancelled(
    env: &Env,
    b: &Built,
    fail_seq: u64,
    hold_all: bool,
    expect_msg: &dyn Fn(&str) -> bool,
    t: &mut Totals,
) -> Result<(), String> {
    let (st, msg) = env.wait(b.run_id, RUN_TIMEOUT)?;
    // SAFETY: the run is done: no executor reads the RunRec any more.
    let rr = unsafe { &*b.rr };
    let mut errs = lock(&rr.errors).clone();
    if st != Status::OrchestrationFailed || !expect_msg(&msg) {
        errs.push(format!(
            "the run reports {st:?} '{msg}', expected ORCHESTRATION_FAILED with the orchestration's message"
        ));
    }
    let n = b.nodes.len();
    let (ran, span) = analyze(b, rr, &mut errs);
    let tasks: Vec<usize> = (0..n).filter(|&i| !b.nodes[i].kind.is_alloc()).collect();
    let ran_n = tasks.iter().filter(|&&i| ran[i]).count() as u64;
    let failing_ran = tasks
        .iter()
        .filter(|&&i| ran[i] && b.nodes[i].fail.is_some())
        .count() as u64;
    let any_failing = tasks.iter().any(|&i| b.nodes[i].fail.is_some());
    // Running tasks finish: a member that started before the failure ran to its end.
    for &i in &tasks {
        let started = (0..b.nodes[i].members.len()).any(|m| {
            let s = rr.rec(i, m).start.load(Ordering::SeqCst);
            s != 0 && s < fail_seq
        });
        if started {
            t.cancel_running += 1;
            if !ran[i] {
                errs.push(format!(
                    "n{i} was running at the failure but did not finish"
                ));
            }
        }
    }
    check_order(b, &ran, &span, &mut errs);
    if hold_all {
        // Nothing could finish before the failure: at most one member per lane ran, and only
        // tasks that had no task producer.
        let lanes = env.lanes.nl.len() + env.lanes.subs as usize;
        let members: usize = tasks
            .iter()
            .filter(|&&i| ran[i])
            .map(|&i| b.nodes[i].members.len())
            .sum();
        if members > lanes {
            errs.push(format!(
                "{members} members ran although nothing could finish before the failure and there are {lanes} lanes"
            ));
        }
        for &i in &tasks {
            if ran[i] {
                if let Some(p) = b.nodes[i]
                    .req
                    .keys()
                    .find(|&&p| !b.nodes[p].kind.is_alloc())
                {
                    errs.push(format!(
                        "n{i} ran after the failure although its producer n{p} could not have finished before it"
                    ));
                }
            }
        }
    }
    match env.run_stats(b.run_id) {
        None => errs.push("run stats unavailable".into()),
        Some(s) => {
            let total = s.completed + s.failed + s.cancelled;
            let exp_completed = ran_n - failing_ran;
            let ok = s.completed == exp_completed
                && total == tasks.len() as u64
                && s.live_slots == 0
                && s.done == 1
                && if any_failing {
                    s.failed >= failing_ran
                } else {
                    s.failed == 0 && s.cancelled == tasks.len() as u64 - ran_n
                };
            if !ok {
                errs.push(format!(
                    "run stats {s:?}: expected completed {exp_completed} (ran and did not fail), completed + failed + cancelled = {} tasks, {}",
                    tasks.len(),
                    if any_failing {
                        format!("failed >= {failing_ran}")
                    } else {
                        format!("failed 0 and cancelled {} (never ran)", tasks.len() as u64 - ran_n)
                    }
                ));
            }
            t.cancelled_tasks += s.cancelled;
        }
    }
    release_checked(env, b, errs)
}
