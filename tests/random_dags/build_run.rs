//! Building one run: `build` (set up, build, check a gated run's wiring), `build_body` (the
//! random op loop) and `try_foreign_dep` (a dep on another run's handle must be refused).

use super::*;

// ---------------------------------------------------------------------------------------
// Building one run: set up, the random op loop, and deps on foreign handles

/// Build one random run on `env` and close its submission. A gated run's wiring is checked
/// before its gate opens. `foreign`: a handle of another run to try (and fail) a dep on.
pub(crate) fn build(
    env: &Env,
    seed: u64,
    opts: Opts,
    foreign: Option<TaskHandle>,
    totals: &mut Totals,
) -> Result<Built, Box<(String, Option<Built>)>> {
    let mut rng = Rng(seed);
    let gated = opts.gating && rng.pct(25);
    let rr = Box::into_raw(Box::new(RunRec::new(env.engine.clone(), gated)));
    // SAFETY: `rr` was just allocated; it is freed only by `finish` after the run is done.
    let rr_ref: &RunRec = unsafe { &*rr };
    let mut o = env.orch();
    if rng.pct(50) {
        // This run's start renumbers the worker's tasks from 1 if it finds it quiescent.
        o.ids_past_renumbering();
    }
    let run_id = match o.begin_run() {
        Ok(r) => r,
        Err(e) => return Err(Box::new((format!("begin_run: {e}"), None))),
    };
    let statics: Vec<Buf> = static_bufs(&env.statics);
    let mut b = Builder {
        rng,
        env,
        o,
        opts,
        run_id,
        bufs: statics,
        nodes: Vec::new(),
        frames: vec![Vec::new()],
        ops: Vec::new(),
        last_slot: None,
        rr: rr_ref,
        scratch: Vec::new(),
        totals,
    };
    let res = build_body(&mut b, foreign);
    let mut errs = match res {
        Ok(()) => Vec::new(),
        Err(e) => vec![e],
    };
    if errs.is_empty() && gated {
        errs = b.check_wiring();
        rr_ref.gate_open.store(true, Ordering::Release);
    }
    b.totals.runs += 1;
    b.totals.gated += gated as u64;
    let built = Built {
        seed,
        env_name: env.name,
        lanes: env.lanes.clone(),
        run_id,
        gated,
        nodes: b.nodes,
        ops: b.ops,
        bufs: b.bufs,
        rr,
    };
    if errs.is_empty() {
        Ok(built)
    } else {
        rr_ref.gate_open.store(true, Ordering::Release);
        Err(Box::new((errs.join("\n"), Some(built))))
    }
}

fn build_body(b: &mut Builder<'_>, foreign: Option<TaskHandle>) -> Result<(), String> {
    let n_ops = b.rng.range(10, 60);
    let deep_at = if b.opts.scope_errors && b.rng.pct(2) {
        Some(b.rng.below(n_ops))
    } else {
        None
    };
    let foreign_at = foreign.map(|h| (h, b.rng.below(n_ops)));
    let max_depth = if b.rng.pct(50) { 4 } else { 9 };
    for op in 0..n_ops {
        let r = b.rng.below(100);
        if r < 12 && b.depth() < max_depth {
            b.scope_begin()?;
        } else if r < 22 && b.depth() > 1 {
            b.scope_end()?;
        } else if r == 22 && b.depth() == 1 && b.opts.scope_errors {
            match status_of(b.o.scope_end()) {
                Err(Status::ScopeUnbalanced) => b.totals.error_paths += 1,
                other => {
                    return Err(format!(
                    "scope_end with no nested scope returned {other:?}, expected ScopeUnbalanced"
                ))
                }
            }
        }
        if deep_at == Some(op) {
            b.deep_excursion()?;
        }
        if let Some((h, at)) = foreign_at {
            if at == op {
                try_foreign_dep(b, h)?;
            }
        }
        if b.rng.pct(7) {
            b.submit_alloc()?;
        } else {
            b.submit_task()?;
        }
    }
    if b.depth() > 1 && b.opts.scope_errors && b.rng.pct(25) {
        match status_of(b.o.close_run_submission(b.run_id)) {
            Err(Status::ScopeUnbalanced) => b.totals.error_paths += 1,
            other => {
                return Err(format!(
                    "close with {} nested scopes open returned {other:?}, expected ScopeUnbalanced",
                    b.depth() - 1
                ))
            }
        }
        if b.o.current_run() != Some(b.run_id) {
            return Err("a refused close still closed the run".into());
        }
        b.ops
            .push(Op::Note("close refused: nested scopes open".into()));
    }
    while b.depth() > 1 {
        b.scope_end()?;
    }
    b.o.close_run_submission(b.run_id)
        .map_err(|e| format!("close_run_submission: {e}"))?;
    b.close_frame();
    Ok(())
}

/// A dep on a handle of another run (of this worker or another) must be refused before any
/// state changes; the run's own checks then catch anything it left behind.
fn try_foreign_dep(b: &mut Builder<'_>, h: TaskHandle) -> Result<(), String> {
    let dep = Dep {
        handle: h,
        kind: DepKind::Retain as u32,
        reserved: 0,
    };
    // If the engine wrongly accepted it, the task would run: give it a record no node uses.
    let scalars = [b.rr as *const RunRec as u64, MAX_NODES as u64 - 1, 0, 0];
    let args = TaskArgs {
        tensors: std::ptr::null_mut(),
        num_tensors: 0,
        num_scalars: 4,
        scalars: scalars.as_ptr(),
        deps: &dep,
        num_deps: 1,
        reserved: 0,
    };
    let r = b.o.submit(
        SubmitKind::Sub,
        &callable(),
        std::slice::from_ref(&args),
        &CallConfig::default(),
        &[],
    );
    match status_of(r) {
        Err(Status::ForeignHandle | Status::StaleHandle) => {
            b.totals.error_paths += 1;
            b.ops.push(Op::Note(format!(
                "dep on foreign handle {{run {}, slot {}}} refused",
                h.run_id, h.slot
            )));
            Ok(())
        }
        other => Err(format!(
            "a dep on handle {{run {}, slot {}}} of another run returned {other:?}, expected ForeignHandle/StaleHandle",
            h.run_id, h.slot
        )),
    }
}
