//! Finishing a run: `finish` waits for it and checks every member against the model; the
//! failure dump (`dump`, `fail`) and the totals report.

use super::*;

// ---------------------------------------------------------------------------------------
// Finishing a run: wait, then check everything against the model.

fn dump(b: &Built) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "--- run seed {:#x} on worker {} (lanes {:?}), run id {}, gated {}; replay with DAGRT_STRESS_ONLY={:#x}",
        b.seed, b.env_name, b.lanes, b.run_id, b.gated, b.seed
    );
    dump_ops(&mut s, &b.ops, |s, i| {
        let n = &b.nodes[i];
        if let Some(alloc) = &n.alloc {
            return dump_alloc(s, i, n.slot, alloc, n.level);
        }
        let _ = writeln!(
            s,
            "n{i} slot {} = {:?} at depth {}; deps {:?}; required {:?}",
            n.slot,
            n.kind,
            n.level,
            dep_names(&n.deps),
            req_names(&n.req)
        );
        let members = n.members.iter().map(|m| (&m.tensors[..], &m.bufs[..]));
        dump_members(s, members, &b.bufs);
    });
    s
}

/// Wait for the run and check it. On success the RunRec is freed; on failure it is leaked
/// (a lane may still be running one of the run's tasks).
pub(crate) fn finish(env: &Env, b: &Built) -> Result<(), String> {
    let e = &env.engine;
    let run = e
        .runs
        .get(b.run_id)
        .ok_or_else(|| format!("run {} is not registered", b.run_id))?;
    if !run.wait(Some(RUN_TIMEOUT)) {
        let mut states = Vec::new();
        for (i, n) in b.nodes.iter().enumerate() {
            let st = e.slots.get(n.slot).core.state();
            let id = e.slots.get(n.slot).core.lock_sync().id;
            if id == n.slot {
                states.push(format!("n{i}:{}", state_name(st)));
            }
        }
        return Err(format!(
            "HANG: run did not finish within {RUN_TIMEOUT:?}; live slots {}, nodes still in their slots: {}",
            e.slots.live(),
            states.join(" ")
        ));
    }
    // SAFETY: the run's fence is zero: every slot was consumed, so every executor of the run
    // has returned and no lane reads the RunRec any more.
    let rr = unsafe { &*b.rr };
    let mut errs = lock(&rr.errors).clone();
    if let Err(m) = run.result() {
        errs.push(format!("run failed: {m:?}"));
    }
    let tasks = b
        .nodes
        .iter()
        .filter(|n| !matches!(n.kind, Kind::Alloc))
        .count() as u64;
    let c = run.counts();
    if c.completed != tasks || c.failed != 0 || c.cancelled != 0 {
        errs.push(format!(
            "run counts {c:?}, expected {tasks} completed and nothing failed or cancelled"
        ));
    }
    // Per node: every member ran exactly once, where and with what it should.
    let mut span = vec![(0u64, 0u64); b.nodes.len()];
    let mut per_lane: BTreeMap<i32, Vec<(u64, u64, usize, usize)>> = BTreeMap::new();
    let subs = env.lanes.subs as i32;
    for (i, n) in b.nodes.iter().enumerate() {
        for m in 0..MAXM {
            let r = &rr.recs[i * MAXM + m];
            let count = r.count.load(Ordering::SeqCst);
            if m >= n.members.len() {
                if count != 0 {
                    errs.push(format!(
                        "n{i}: member {m} ran {count} times but the node has {} members",
                        n.members.len()
                    ));
                }
                continue;
            }
            if count != 1 {
                errs.push(format!(
                    "n{i} ({:?}) member {m} ran {count} times, expected exactly once",
                    n.kind
                ));
                continue;
            }
            let (s0, e0) = (r.start.load(Ordering::SeqCst), r.end.load(Ordering::SeqCst));
            span[i] = if m == 0 {
                (s0, e0)
            } else {
                (span[i].0.min(s0), span[i].1.max(e0))
            };
            let w = r.worker.load(Ordering::Relaxed);
            per_lane.entry(w).or_default().push((s0, e0, i, m));
            let expect_w = match &n.kind {
                Kind::Nl(t) => Some(*t),
                Kind::NlGroup(ids) => Some(ids[m]),
                _ => None,
            };
            match expect_w {
                Some(t) if w != t => errs.push(format!(
                    "n{i} member {m} ran on worker {w}, its target is {t}"
                )),
                None if !(-subs..=-1).contains(&w) => errs.push(format!(
                    "n{i} member {m} (SUB) ran on worker id {w}, not a SUB lane"
                )),
                _ => {}
            }
            let checks = [
                ("slot", r.slot.load(Ordering::Relaxed), n.slot),
                ("run id", r.run.load(Ordering::Relaxed), b.run_id),
                (
                    "member index",
                    r.midx.load(Ordering::Relaxed) as u64,
                    m as u64,
                ),
                (
                    "group size",
                    r.gsize.load(Ordering::Relaxed) as u64,
                    n.members.len() as u64,
                ),
                (
                    "tensor hash",
                    r.thash.load(Ordering::Relaxed),
                    n.members[m].hash,
                ),
                ("config.user[0]", r.cfg0.load(Ordering::Relaxed), n.cfg0),
            ];
            for (what, got, want) in checks {
                if got != want {
                    errs.push(format!(
                        "n{i} member {m}: executor saw {what} {got:#x}, expected {want:#x}"
                    ));
                }
            }
        }
        if let Kind::SubGroup(k) = n.kind {
            let mut ws: Vec<i32> = (0..k)
                .map(|m| rr.recs[i * MAXM + m].worker.load(Ordering::Relaxed))
                .collect();
            ws.sort_unstable();
            ws.dedup();
            if ws.len() != k {
                errs.push(format!(
                    "n{i}: SUB group of {k} members ran on lanes {ws:?}, not {k} distinct lanes"
                ));
            }
        }
    }
    // A lane runs one job at a time.
    for (w, v) in per_lane.iter_mut() {
        v.sort_unstable();
        for x in v.windows(2) {
            if x[0].1 >= x[1].0 {
                errs.push(format!(
                    "lane {w} ran n{} member {} [{}..{}] and n{} member {} [{}..{}] at the same time",
                    x[0].2, x[0].3, x[0].0, x[0].1, x[1].2, x[1].3, x[1].0, x[1].1
                ));
            }
        }
    }
    // Ordering: every required producer ended before any member of the consumer started.
    if errs.is_empty() {
        for (ci, c) in b.nodes.iter().enumerate() {
            for &p in c.req.keys() {
                if matches!(b.nodes[p].kind, Kind::Alloc) {
                    continue;
                }
                if span[p].1 >= span[ci].0 {
                    errs.push(format!(
                        "ORDER VIOLATION: n{ci} (slot {}) started at seq {} but its required producer n{p} (slot {}) ended at seq {} (started {})",
                        c.slot, span[ci].0, b.nodes[p].slot, span[p].1, span[p].0
                    ));
                }
            }
        }
    }
    e.runs.remove_done(b.run_id);
    if errs.is_empty() {
        // SAFETY: allocated by Box::into_raw in `build`; no executor of the run is left (see
        // above) and `b.rr` is not used after this.
        drop(unsafe { Box::from_raw(b.rr as *mut RunRec) });
        Ok(())
    } else {
        errs.truncate(25);
        Err(errs.join("\n"))
    }
}

pub(crate) fn fail(what: &str, msg: &str, built: Option<&Built>, envs: Vec<Env>) -> ! {
    let d = built.map(dump).unwrap_or_default();
    // Leak the workers: dropping them would wait for a run that may never finish.
    std::mem::forget(envs);
    panic!("{what}: {msg}\n{d}");
}

pub(crate) fn report(what: &str, t: &Totals, t0: Instant) {
    println!(
        "{what}: {} runs ({} gated) in {:.2?}: {} nodes ({} groups, {} members), {} allocs, {} auto OUTPUT buffers, {} tensors, {} required producer edges checked by order, {} by wiring, {} retained-alive checks, {} 64-deep excursions, max scope depth {}, {} error paths",
        t.runs, t.gated, t0.elapsed(), t.nodes, t.groups, t.members, t.allocs, t.autos, t.tensors,
        t.edges, t.wiring_checks, t.alive_checks, t.deep, t.max_depth, t.error_paths
    );
}
