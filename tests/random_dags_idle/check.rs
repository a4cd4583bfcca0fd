//! Finishing a run: `finish` waits for it and checks every member and buffer against the
//! model; the failure dump (`dump`) and `fail`.

use super::*;

/// Wait for the run and check it against the model. The RunRec is freed on success.
pub(crate) fn finish(env: &Env, run: &Run) -> Result<(), String> {
    let e = &env.engine;
    let r = e
        .runs
        .get(run.run_id)
        .ok_or_else(|| format!("run {} is not registered", run.run_id))?;
    if !r.wait(Some(RUN_TIMEOUT)) {
        return Err(format!(
            "HANG: the run did not finish within {RUN_TIMEOUT:?} ({} slots live)",
            e.slots.live()
        ));
    }
    let mut errs = Vec::new();
    if let Err(m) = r.result() {
        errs.push(format!("run failed: {m:?}"));
    }
    let c = r.counts();
    let tasks = run.nodes.len() as u64;
    if c.completed != tasks || c.failed != 0 || c.cancelled != 0 {
        errs.push(format!(
            "run counts {c:?}, expected {tasks} completed and nothing failed or cancelled"
        ));
    }
    // SAFETY: the run is done: every executor of it has returned.
    let rr = unsafe { &*run.rr };
    for (i, n) in run.nodes.iter().enumerate() {
        for mi in 0..MAXM {
            let rec = &rr.recs[i * MAXM + mi];
            let count = rec.count.load(Ordering::SeqCst);
            let Some(m) = n.members.get(mi) else {
                if count != 0 {
                    errs.push(format!("n{i}: member {mi} of none ran {count} times"));
                }
                continue;
            };
            if count != 1 {
                errs.push(format!(
                    "n{i} ({:?}) member {mi} ran {count} times, expected exactly once",
                    n.kind
                ));
                continue;
            }
            let got = rec.value.load(Ordering::Relaxed);
            if got != m.value {
                errs.push(format!(
                    "VALUE: n{i} member {mi} read inputs hashing to {got:#x}, the sequential model \
                     to {:#x} (it read bytes a task not yet done or already done should have written)",
                    m.value
                ));
            }
        }
    }
    for (bi, want) in run.shadow.iter().enumerate() {
        let got = env.read(bi);
        let bad: Vec<usize> = (0..want.len()).filter(|&b| got[b] != want[b]).collect();
        if let Some(&b) = bad.first() {
            errs.push(format!(
                "BUFFER {}: {} bytes differ from the sequential model, first at byte {b} \
                 (got {:#04x}, want {:#04x})",
                env.bufs[bi].name,
                bad.len(),
                got[b],
                want[b]
            ));
        }
    }
    e.runs.remove_done(run.run_id);
    if let Err(m) = env.check_reclaimed() {
        errs.push(m);
    }
    if errs.is_empty() {
        // SAFETY: allocated by Box::into_raw in `build`; no executor of the run is left.
        drop(unsafe { Box::from_raw(run.rr as *mut RunRec) });
        Ok(())
    } else {
        errs.truncate(25);
        Err(errs.join("\n"))
    }
}

pub(crate) fn dump(env: &Env, run: &Run) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "--- run seed {:#x}, run id {}; replay with DAGRT_STRESS_ONLY={:#x}",
        run.seed, run.run_id, run.seed
    );
    dump_ops(&mut s, &run.ops, |s, i| {
        let n = &run.nodes[i];
        let _ = writeln!(
            s,
            "n{i} slot {} = {:?} (slept {} us before); inferred {:?}; explicit {}",
            n.slot,
            n.kind,
            n.slept_us,
            n.inferred,
            dep_names(&n.explicit).join(" ")
        );
        let members = n.members.iter().map(|m| (&m.tensors[..], &m.buf_of[..]));
        dump_members(s, members, &env.bufs);
    });
    s
}

pub(crate) fn fail(env: Env, msg: &str, run: Option<&Run>) -> ! {
    let d = run.map(|r| dump(&env, r)).unwrap_or_default();
    // Leak the worker: dropping it would wait for a run that may never finish.
    std::mem::forget(env);
    panic!("random_dags_on_a_parking_worker: {msg}\n{d}");
}
