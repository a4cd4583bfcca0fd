//! Building one run: `build` sets up the buffers, the model and the run, then opens and closes
//! scopes (`scope_op`), generates each node, runs it on the model and submits it (`submit`).

use super::*;

/// Now and then, before a node, open a scope (below depth 5) or close one (above depth 1).
pub(crate) fn scope_op(
    o: &mut Orchestrator,
    rng: &mut Rng,
    depth: &mut usize,
    ops: &mut Vec<Op>,
) -> Result<(), String> {
    let r = rng.below(100);
    if r < 10 && *depth < 5 {
        o.scope_begin().map_err(|e| format!("scope_begin: {e}"))?;
        *depth += 1;
        ops.push(Op::Begin(*depth));
    } else if r < 18 && *depth > 1 {
        o.scope_end().map_err(|e| format!("scope_end: {e}"))?;
        ops.push(Op::End(*depth));
        *depth -= 1;
    }
    Ok(())
}

/// Submit node `idx` of `kind` with `members`, whose executors record into `rr`.
pub(crate) fn submit(
    o: &mut Orchestrator,
    kind: &Kind,
    members: &mut [Member],
    rr: *const RunRec,
    idx: usize,
) -> dagrt::error::Result<TaskHandle> {
    let scalars: Vec<[u64; NSCALARS]> = members
        .iter()
        .enumerate()
        .map(|(mi, m)| {
            [
                rr as u64,
                idx as u64,
                mi as u64,
                m.seed,
                m.rmask | m.wmask << 8,
            ]
        })
        .collect();
    let args: Vec<TaskArgs> = members
        .iter_mut()
        .zip(&scalars)
        .map(|(m, sc)| task_args(&mut m.tensors, sc, &m.deps))
        .collect();
    let (sk, lanes) = kind.submit_kind();
    let h = o.submit(sk, &callable(), &args, &CallConfig::default(), &lanes);
    drop(args);
    h
}

/// Build and submit one run on `env` from `seed`, keeping the model; the run's submission is
/// closed on return.
pub(crate) fn build(env: &Env, seed: u64, t: &mut Totals) -> Result<Run, (String, Option<Run>)> {
    let mut rng = Rng(seed);
    // Initial contents, the same in the buffers and the model.
    let init: Vec<Vec<u8>> = (0..env.bufs.len())
        .map(|bi| (0..env.len(bi)).map(|_| rng.next() as u8).collect())
        .collect();
    env.fill(&init);
    let mut shadow = init;
    let mut track = Track {
        last: shadow.iter().map(|v| vec![0; v.len()]).collect(),
        readers: shadow.iter().map(|v| vec![0; v.len()]).collect(),
    };
    // How this run sleeps between submissions: never, now and then, or before every one.
    let sleep_mode = rng.below(3);
    let n_ops = rng.range(8, 48) as usize;
    let rr = Box::into_raw(Box::new(RunRec {
        recs: (0..MAX_NODES * MAXM)
            .map(|_| MemberRec::default())
            .collect(),
    }));
    let mut o = env.orch();
    let run_id = o
        .begin_run()
        .map_err(|e| (format!("begin_run: {e}"), None))?;
    let mut run = Run {
        seed,
        run_id,
        nodes: Vec::new(),
        ops: Vec::new(),
        rr,
        shadow: Vec::new(),
    };
    let mut depth = 1usize;
    let mut bytes = Vec::new();
    for _ in 0..n_ops {
        if let Err(e) = scope_op(&mut o, &mut rng, &mut depth, &mut run.ops) {
            return Err((e, Some(run)));
        }
        let idx = run.nodes.len();
        let kind = gen_kind(&mut rng, &env.lanes);
        let mut members = gen_members(&mut rng, env, &kind, t);

        // The model: producers the reads require (inferred), and the earlier readers and
        // writers of the bytes this node writes (named explicitly unless inferred).
        let (inferred, hazards) = track.required(env, &members, &mut bytes);
        let explicit = gen_explicit(&mut rng, &run, idx, &mut members, &inferred, &hazards);
        track.execute(env, &mut shadow, &mut members, idx, &mut bytes);

        let slept_us = match sleep_mode {
            1 if rng.pct(30) => rng.range(20, 600),
            2 => rng.range(20, 400),
            _ => 0,
        };
        if slept_us > 0 {
            std::thread::sleep(Duration::from_micros(slept_us));
            t.sleeps += 1;
        }
        let h = submit(&mut o, &kind, &mut members, rr, idx);
        t.nodes += 1;
        t.members += members.len() as u64;
        t.groups += matches!(kind, Kind::NlGroup(_) | Kind::SubGroup(_)) as u64;
        t.tensors += members.iter().map(|m| m.tensors.len() as u64).sum::<u64>();
        t.inferred += inferred.len() as u64;
        t.explicit += explicit.len() as u64;
        let submit_err = h.as_ref().err().map(|e| e.to_string());
        run.nodes.push(Node {
            kind,
            slot: h.map_or(0, |h| h.slot),
            members,
            inferred,
            explicit,
            slept_us,
        });
        run.ops.push(Op::Node(idx));
        if let Some(e) = submit_err {
            return Err((format!("submit of n{idx} failed: {e}"), Some(run)));
        }
    }
    while depth > 1 {
        if let Err(e) = o.scope_end() {
            return Err((format!("scope_end: {e}"), Some(run)));
        }
        run.ops.push(Op::End(depth));
        depth -= 1;
    }
    if let Err(e) = o.close_run_submission(run_id) {
        return Err((format!("close_run_submission: {e}"), Some(run)));
    }
    t.runs += 1;
    run.shadow = shadow;
    Ok(run)
}
