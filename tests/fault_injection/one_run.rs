//! One random run with failing nodes: build it (`build_failing`), then check it against the
//! model (`check_failing`); the failure dump and the totals report.

use super::*;

// ---------------------------------------------------------------------------------------
// One run: build, then check against the model

pub(crate) struct Built {
    pub(crate) seed: u64,
    pub(crate) what: &'static str,
    pub(crate) env_name: &'static str,
    pub(crate) backend: &'static str,
    pub(crate) run_id: u64,
    pub(crate) gated: bool,
    pub(crate) nodes: Vec<Node>,
    pub(crate) ops: Vec<Op>,
    pub(crate) bufs: Vec<Buf>,
    /// From Box::into_raw; freed once the run is done and checked, leaked on failure.
    pub(crate) rr: *const RunRec,
    /// Gated runs through the Rust API: the engine's wiring before the gate opened.
    pub(crate) eng_edges: Option<Vec<(usize, usize, bool)>>,
}

pub(crate) type BuildErr = Box<(String, Option<Built>)>;

fn dump(b: &Built) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "--- {}: run seed {:#x} on worker {} ({}), run id {}, gated {}; replay with DAGRT_FAULT_ONLY={:#x}",
        b.what, b.seed, b.env_name, b.backend, b.run_id, b.gated, b.seed
    );
    dump_ops(&mut s, &b.ops, |s, i| {
        let n = &b.nodes[i];
        if let Some(alloc) = &n.alloc {
            return dump_alloc(s, i, n.slot, alloc, n.level);
        }
        let extra: Vec<usize> = n
            .may
            .iter()
            .copied()
            .filter(|p| !n.req.contains_key(p))
            .collect();
        let _ = writeln!(
            s,
            "n{i} slot {} = {:?} at depth {}{}{}{}; deps {:?}; required {:?}; may also {:?}{}",
            n.slot,
            n.kind,
            n.level,
            match n.fail {
                Some((m, mode)) => format!(", FAILS (member {m}, mode {mode})"),
                None => String::new(),
            },
            if n.must { ", must be poisoned" } else { "" },
            if n.hold { ", holds" } else { "" },
            dep_names(&n.deps),
            req_names(&n.req),
            extra,
            n.note.as_ref().map_or(String::new(), |x| format!(" [{x}]")),
        );
        let members = n.members.iter().map(|m| (&m.tensors[..], &m.bufs[..]));
        dump_members(s, members, &b.bufs);
    });
    if let Some(edges) = &b.eng_edges {
        let _ = writeln!(
            s,
            "engine wiring: {:?}",
            edges
                .iter()
                .map(|e| format!("n{}->n{}", e.0, e.1))
                .collect::<Vec<_>>()
        );
    }
    s
}

pub(crate) fn fail_test(what: &str, msg: &str, built: Option<&Built>, envs: Vec<Env>) -> ! {
    let d = built.map(dump).unwrap_or_default();
    // Leak the workers: dropping them would wait for a run that may never finish.
    std::mem::forget(envs);
    panic!("{what}: {msg}\n{d}");
}

/// Build one random run with failing nodes (none with `no_fail`) and close its submission.
/// A gated run's wiring is read and checked before its gate opens.
pub(crate) fn build_failing(
    env: &Env,
    seed: u64,
    no_fail: bool,
    sweep: bool,
    totals: &mut Totals,
) -> Result<Built, BuildErr> {
    let mut rng = Rng(seed);
    let gated = sweep || rng.pct(25);
    let fail_pct = if no_fail {
        0
    } else {
        [0, 8, 8, 8, 15, 15, 15, 25, 25, 40][rng.below(10) as usize]
    };
    let opts = Opts {
        fail_pct,
        gated,
        consumed_ops: env.engine().is_some() && !gated && fail_pct > 0,
        hostile_pct: if gated { 5 } else { 2 },
        hostile_sweep: sweep,
        hold_all: false,
        hold_pct: 0,
    };
    let rr = Box::into_raw(Box::new(RunRec::new(gated, true)));
    // SAFETY: `rr` was just allocated; it is freed only after the run is done and checked.
    let rr_ref: &RunRec = unsafe { &*rr };
    let mut o = env.orch();
    let run_id = match o.begin_run() {
        Ok(r) => r,
        Err(e) => return Err(Box::new((format!("begin_run: {e:?}"), None))),
    };
    let _ = rr_ref.probe.set(env.probe(run_id));
    let mut b = Builder::new(env, o, run_id, opts, rr_ref, rng, totals);
    let n_ops = b.rng.range(10, 60);
    let mut errs = match build_ops(&mut b, n_ops, None).and_then(|_| b.close_run()) {
        Ok(()) => Vec::new(),
        Err(e) => vec![e],
    };
    let mut eng_edges = None;
    if errs.is_empty() && gated && env.engine().is_some() {
        match b.read_wiring() {
            Ok(e) => eng_edges = Some(e),
            Err(e) => errs = e,
        }
    }
    rr_ref.open_all();
    b.totals.runs += 1;
    b.totals.gated += gated as u64;
    b.totals.c_runs += env.engine().is_none() as u64;
    let built = Built {
        seed,
        what: "random_failing_dags",
        env_name: env.name,
        backend: env.backend(),
        run_id,
        gated,
        nodes: std::mem::take(&mut b.nodes),
        ops: std::mem::take(&mut b.ops),
        bufs: std::mem::take(&mut b.bufs),
        rr,
        eng_edges,
    };
    if errs.is_empty() {
        Ok(built)
    } else {
        Err(Box::new((errs.join("\n"), Some(built))))
    }
}

/// Strict descendants of `seeds` over `producers_of(consumer)`.
fn closure(n: usize, seeds: &[usize], producers_of: impl Fn(usize) -> Vec<usize>) -> Vec<bool> {
    let mut cons: Vec<Vec<usize>> = vec![Vec::new(); n];
    for c in 0..n {
        for p in producers_of(c) {
            cons[p].push(c);
        }
    }
    let mut reached = vec![false; n];
    let mut stack: Vec<usize> = seeds.to_vec();
    while let Some(p) = stack.pop() {
        for &c in &cons[p] {
            if !reached[c] {
                reached[c] = true;
                stack.push(c);
            }
        }
    }
    reached
}

/// Per task node: did it run (every member exactly once) and its [first start, last end].
pub(crate) fn analyze(
    b: &Built,
    rr: &RunRec,
    errs: &mut Vec<String>,
) -> (Vec<bool>, Vec<(u64, u64)>) {
    let n = b.nodes.len();
    let mut ran = vec![false; n];
    let mut span = vec![(u64::MAX, 0u64); n];
    for (i, nd) in b.nodes.iter().enumerate() {
        if nd.kind.is_alloc() {
            continue;
        }
        let mut counts = Vec::new();
        for m in 0..MAXM {
            let r = rr.rec(i, m);
            let c = r.count.load(Ordering::SeqCst);
            if m >= nd.members.len() {
                if c != 0 {
                    errs.push(format!(
                        "n{i}: member {m} ran but the node has {} members",
                        nd.members.len()
                    ));
                }
                continue;
            }
            counts.push(c);
            if c > 0 {
                span[i].0 = span[i].0.min(r.start.load(Ordering::SeqCst));
                span[i].1 = span[i].1.max(r.end.load(Ordering::SeqCst));
                // Where it ran and what it saw.
                let w = r.worker.load(Ordering::SeqCst);
                let target = match &nd.kind {
                    Kind::Nl(t) => Some(*t),
                    Kind::NlGroup(ids) => Some(ids[m]),
                    _ => None,
                };
                match target {
                    Some(t) if w != t => errs.push(format!(
                        "n{i} member {m} ({:?}) ran on worker {w}, its target is {t}",
                        nd.kind
                    )),
                    None if w >= 0 => errs.push(format!(
                        "n{i} member {m} (SUB) ran on NEXT_LEVEL worker {w}"
                    )),
                    _ => {}
                }
                let seen = r.slot.load(Ordering::SeqCst);
                if seen != nd.slot {
                    errs.push(format!(
                        "n{i} member {m} saw slot {seen}, its slot is {}",
                        nd.slot
                    ));
                }
            }
        }
        if counts.iter().any(|&c| c > 1) {
            errs.push(format!(
                "n{i} ({:?}): member run counts {counts:?}, at most once each",
                nd.kind
            ));
        }
        if let Kind::SubGroup(k) = nd.kind {
            let mut ws: Vec<i32> = (0..k)
                .map(|m| rr.rec(i, m).worker.load(Ordering::SeqCst))
                .collect();
            ws.sort_unstable();
            ws.dedup();
            if counts.iter().all(|&c| c == 1) && ws.len() != k {
                errs.push(format!(
                    "n{i}: SUB group of {k} members ran on lanes {ws:?}, not {k} distinct lanes"
                ));
            }
        }
        if counts.iter().all(|&c| c == 1) {
            ran[i] = true;
        } else if counts.iter().any(|&c| c != 0) {
            errs.push(format!(
                "n{i} ({:?}): only some members ran ({counts:?}): a group runs whole or not at all",
                nd.kind
            ));
        }
    }
    (ran, span)
}

/// A node that ran saw each required task producer end before any of its members started.
pub(crate) fn check_order(b: &Built, ran: &[bool], span: &[(u64, u64)], errs: &mut Vec<String>) {
    for (c, cn) in b.nodes.iter().enumerate() {
        if !ran[c] {
            continue;
        }
        for &p in cn.req.keys() {
            if b.nodes[p].kind.is_alloc() {
                continue;
            }
            if !ran[p] {
                errs.push(format!(
                    "n{c} ran although its required producer n{p} never ran (failed or cancelled)"
                ));
            } else if span[p].1 >= span[c].0 {
                errs.push(format!(
                    "ORDER VIOLATION: n{c} started at seq {} but its required producer n{p} ended at seq {}",
                    span[c].0, span[p].1
                ));
            }
        }
    }
}

/// Wait for a run with failing nodes and check it against the model.
pub(crate) fn check_failing(env: &Env, b: &Built, t: &mut Totals) -> Result<(), String> {
    let (st, msg) = env.wait(b.run_id, RUN_TIMEOUT)?;
    // SAFETY: the run's fence is zero: every slot was consumed, so every executor of the run
    // has returned and no lane reads the RunRec any more.
    let rr = unsafe { &*b.rr };
    let mut errs = lock(&rr.errors).clone();
    let n = b.nodes.len();
    let (ran, span) = analyze(b, rr, &mut errs);
    let task = |i: usize| !b.nodes[i].kind.is_alloc();
    let failing: Vec<usize> = (0..n).filter(|&i| b.nodes[i].fail.is_some()).collect();
    let must = closure(n, &failing, |c| b.nodes[c].req.keys().copied().collect());
    let may = closure(n, &failing, |c| b.nodes[c].may.iter().copied().collect());
    for i in 0..n {
        if must[i] && !may[i] {
            errs.push(format!("test model: n{i} is in MUST but not in MAY"));
        }
        if must[i] != b.nodes[i].must {
            errs.push(format!(
                "test model: n{i} incremental must-fail flag disagrees"
            ));
        }
    }
    let mut extra = Vec::new();
    for i in (0..n).filter(|&i| task(i)) {
        if must[i] && ran[i] {
            let from: Vec<usize> = b.nodes[i]
                .req
                .keys()
                .copied()
                .filter(|&p| b.nodes[p].fail.is_some() || must[p])
                .collect();
            errs.push(format!(
                "MISSED POISONING: n{i} ran although its required producer(s) {from:?} failed or were poisoned"
            ));
        }
        if !may[i] && !ran[i] {
            errs.push(format!(
                "n{i} never ran, yet it does not descend from any failing node even through the superset model"
            ));
        }
        if may[i] && !must[i] && !ran[i] {
            extra.push(i);
        }
    }
    t.poisoned_must += (0..n).filter(|&i| must[i] && task(i)).count() as u64;
    t.poisoned_extra += extra.len() as u64;
    if strict() && !extra.is_empty() {
        errs.push(format!(
            "EXTRA POISONING (DAGRT_FAULT_STRICT): {extra:?} never ran although no required edge leads to them from a failing node"
        ));
    }
    if let Some(edges) = &b.eng_edges {
        let exact = closure(n, &failing, |c| {
            edges.iter().filter(|e| e.1 == c).map(|e| e.0).collect()
        });
        for i in (0..n).filter(|&i| task(i)) {
            t.exact_poison_checks += 1;
            if exact[i] == ran[i] {
                errs.push(format!(
                    "gated: n{i} {} but it {} a descendant of a failing node over the engine's own wiring",
                    if ran[i] { "ran" } else { "never ran" },
                    if exact[i] { "is" } else { "is not" }
                ));
            }
        }
    }
    check_order(b, &ran, &span, &mut errs);
    // Counts.
    let failing_ran: Vec<usize> = failing.iter().copied().filter(|&i| ran[i]).collect();
    let tasks = (0..n).filter(|&i| task(i)).count() as u64;
    let ran_n = (0..n).filter(|&i| task(i) && ran[i]).count() as u64;
    let exp_completed = ran_n - failing_ran.len() as u64;
    let exp_failed = failing_ran.len() as u64 + (tasks - ran_n);
    match env.run_stats(b.run_id) {
        None => errs.push("run stats unavailable before release".into()),
        Some(s) => {
            if (s.completed, s.failed, s.cancelled) != (exp_completed, exp_failed, 0)
                || s.live_slots != 0
                || s.done != 1
            {
                errs.push(format!(
                    "run stats {s:?}, expected completed {exp_completed}, failed {exp_failed} ({} failing nodes ran + {} never ran), cancelled 0, no live slot, done",
                    failing_ran.len(),
                    tasks - ran_n
                ));
            }
        }
    }
    // The first failure.
    t.failing_ran += failing_ran.len() as u64;
    if failing_ran.is_empty() {
        if st != Status::Ok {
            errs.push(format!(
                "no failing node ran, yet the run reports {st:?}: {msg}"
            ));
        }
    } else {
        let mut tickets = Vec::new();
        let mut first = None;
        for &i in &failing_ran {
            let (fm, mode) = b.nodes[i].fail.expect("failing");
            let tk = rr.rec(i, fm).ticket.load(Ordering::SeqCst);
            tickets.push(tk);
            if tk == 0 {
                first = Some((i, fm, mode));
            }
        }
        tickets.sort_unstable();
        if tickets != (0..failing_ran.len() as u32).collect::<Vec<_>>() {
            errs.push(format!(
                "failure tickets {tickets:?} of the failing nodes that ran {failing_ran:?}: expected one each, 0..{}",
                failing_ran.len()
            ));
        }
        if st != Status::TaskFailed {
            errs.push(format!(
                "failing nodes {failing_ran:?} ran, yet the run reports {st:?}: {msg}"
            ));
        } else if let Some((i, fm, mode)) = first {
            if names_failure(&msg, b.run_id, i, fm, mode) {
                t.first_exact += 1;
                if mode == FAIL_RC {
                    t.first_rc += 1;
                } else {
                    t.first_msg += 1;
                }
            } else {
                errs.push(format!(
                    "FIRST FAILURE: the run reports '{msg}', but the first failure recorded was n{i} member {fm} (mode {mode}, slot {})",
                    b.nodes[i].slot
                ));
            }
            for &j in &failing_ran {
                let (jm, jmode) = b.nodes[j].fail.expect("failing");
                if j != i && names_failure(&msg, b.run_id, j, jm, jmode) {
                    errs.push(format!("the run's message '{msg}' names n{j} too"));
                }
            }
        }
    }
    release_checked(env, b, errs)
}

/// The end of a finished run's check: the errors found (the first 25), or else release the
/// run, free its RunRec and check that the worker was left with nothing.
pub(crate) fn release_checked(env: &Env, b: &Built, mut errs: Vec<String>) -> Result<(), String> {
    if !errs.is_empty() {
        errs.truncate(25);
        return Err(errs.join("\n"));
    }
    env.release(b.run_id)?;
    LAST_RELEASED.store(b.run_id, Ordering::Relaxed);
    // SAFETY: allocated by Box::into_raw when the run was built (`build_failing`,
    // `cancelled_run`); the run is done, so no executor of it is left.
    drop(unsafe { Box::from_raw(b.rr as *mut RunRec) });
    env.check_reclaimed()
}

pub(crate) fn report(what: &str, t: &Totals, t0: Instant) {
    println!(
        "{what}: {} runs ({} gated, {} through the C ABI) in {:.2?}: {} nodes ({} tasks, {} groups, {} allocs, {} auto OUTPUTs), max scope depth {}; \
         {} failing nodes ({} ran and failed), {} must-poisoned, {} extra-poisoned (conservative wiring); \
         first failure checked exactly {} times ({} by return code, {} by message); {} wired edges checked, {} exact poison checks; \
         {} consumed-producer consumers ({} by handle, {} through the TensorMap, {} waits timed out); {} hostile submits ({} with stats compared; kinds {:?}); \
         {} cancelled runs ({} tasks cancelled, {} running at cancel) via {:?}; {} follow-up runs",
        t.runs, t.gated, t.c_runs, t0.elapsed(), t.nodes, t.tasks, t.groups, t.allocs, t.autos, t.max_depth,
        t.failing, t.failing_ran, t.poisoned_must, t.poisoned_extra,
        t.first_exact, t.first_rc, t.first_msg, t.wiring_edges, t.exact_poison_checks,
        t.consumed_ops, t.consumed_dep, t.consumed_read, t.consumed_timeouts, t.hostile, t.hostile_snap, t.hostile_kinds,
        t.cancelled_runs, t.cancelled_tasks, t.cancel_running, t.cancel_via, t.follow_ups
    );
}
