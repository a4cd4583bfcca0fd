//! Directed tests: consumers of failed producers already consumed, a failed writer poisons
//! only the readers of its data, and cancellation leaves no ready-queue entry behind.

use super::*;

// ---------------------------------------------------------------------------------------
// Directed: consumers of failed producers that were already consumed

/// A producer in a nested scope fails; the scope ends and the engine consumes it; only then
/// are its consumers submitted. Through the TensorMap (INPUT / INOUT of its output), by
/// handle (`add_dep`, `add_dep_wait`) and transitively they must be poisoned; a task on
/// other data runs. Both APIs, with and without a heap slab on the producer.
#[test]
fn consumer_of_consumed_failed_producer_is_poisoned() {
    let _g = serial();
    let envs = rust_and_c_envs();
    let mut cases = 0;
    for env in &envs {
        for with_heap in [false, true] {
            let r = (|| -> Result<(), String> {
                let rr_p = Box::into_raw(Box::new(RunRec::new(false, false)));
                // SAFETY: just allocated; freed by `finish_directed` (leaked on failure).
                let rr = unsafe { &*rr_p };
                let f0 = env.statics[3].as_ptr() as u64;
                let f1 = env.statics[4].as_ptr() as u64;
                let mut o = env.orch();
                let run = o.begin_run().map_err(|e| format!("{e:?}"))?;
                o.scope_begin().map_err(|e| format!("{e:?}"))?;
                let mut pt = vec![tagged(
                    tensor(f0, 0, DataType::U64, &[8], &[]),
                    Tag::OutputExisting,
                )];
                if with_heap {
                    pt.push(tagged(tensor(0, 0, DataType::U64, &[16], &[]), Tag::Output));
                }
                let p = sub1(&mut o, rr, 0, pt, vec![], FAIL_RC, false)?;
                o.scope_end().map_err(|e| format!("{e:?}"))?;
                wait_for(
                    "the failed producer to be consumed",
                    Duration::from_secs(10),
                    || {
                        env.run_stats(run)
                            .is_some_and(|s| s.failed == 1 && s.live_slots == 0)
                    },
                )?;
                let rd = |off: u64, n: u64, tag: Tag| {
                    tagged(tensor(f0, off, DataType::U64, &[n], &[]), tag)
                };
                let c1 = sub1(
                    &mut o,
                    rr,
                    1,
                    vec![rd(16, 2, Tag::Input)],
                    vec![],
                    FAIL_NONE,
                    false,
                )?;
                sub1(&mut o, rr, 2, vec![], vec![dep(p, true)], FAIL_NONE, false)?;
                sub1(&mut o, rr, 3, vec![], vec![dep(p, false)], FAIL_NONE, false)?;
                let other = tagged(tensor(f1, 0, DataType::U64, &[16], &[]), Tag::Input);
                sub1(&mut o, rr, 4, vec![other], vec![], FAIL_NONE, false)?;
                sub1(&mut o, rr, 5, vec![], vec![dep(c1, true)], FAIL_NONE, false)?;
                sub1(
                    &mut o,
                    rr,
                    6,
                    vec![rd(56, 1, Tag::Inout)],
                    vec![],
                    FAIL_NONE,
                    false,
                )?;
                let msg = finish_directed(env, o, run, rr_p, (Status::TaskFailed, 1, 6))?;
                if !contains_int(&msg, fault_rc(0, 0) as i64) {
                    return Err(format!(
                        "the run's message '{msg}' is not the producer's failure"
                    ));
                }
                Ok(())
            })();
            if let Err(m) = r {
                fail_test(
                    "consumer_of_consumed_failed_producer_is_poisoned",
                    &format!(
                        "{} API, producer {} a heap slab: {m}",
                        env.backend(),
                        if with_heap { "with" } else { "without" }
                    ),
                    None,
                    envs,
                );
            }
            cases += 1;
        }
    }
    assert_eq!(cases, 4);
}

/// A consumer submitted right as its failed producer is being consumed (the producer's scope
/// already ended): whatever the interleaving, the consumer must never run. The consumer is
/// submitted a random 0-10 us (mostly 0.5-3.5 us) after the producer's executor returned,
/// which lands some attaches between the producer's CONSUMED transition and the bookkeeping
/// that remembers its failure.
#[test]
fn consumer_racing_consumption_of_failed_producer_is_poisoned() {
    let _g = serial();
    let t0 = Instant::now();
    // Leaked if the test panics: dropping it would wait for a run that may never finish.
    let env = std::mem::ManuallyDrop::new(Env::new_rust("X", lanes_a(), std_cfg()));
    let iters = (3 * fault_runs()).max(200);
    let per_run = 200u64;
    let mut rng = Rng(base_seed() ^ 0x4ACE);
    let mut escaped = Vec::new();
    let mut done = 0u64;
    let f2 = env.statics[5].as_ptr() as u64;
    while done < iters {
        let n = per_run.min(iters - done);
        let rr_p = Box::into_raw(Box::new(RunRec::sized(false, false, 2 * n as usize)));
        // SAFETY: just allocated; freed by `finish_directed` (leaked on failure).
        let rr = unsafe { &*rr_p };
        let mut o = env.orch();
        let run = o.begin_run().expect("begin_run");
        let mut variants = Vec::new();
        for i in 0..n as usize {
            let byte = (i % 128) as u64;
            let cell = |tag| tagged(tensor(f2, byte, DataType::U8, &[], &[]), tag);
            o.scope_begin().expect("scope_begin");
            let mut m = member(
                rr,
                2 * i,
                0,
                vec![cell(Tag::OutputExisting)],
                vec![],
                FAIL_RC,
                false,
            );
            m.scalars[3] = rng.range(0, 3000);
            let args = [m.args()];
            let p = o
                .submit(
                    SubmitKind::Sub,
                    &callable(),
                    &args,
                    &CallConfig::default(),
                    &[],
                )
                .expect("producer");
            o.scope_end().expect("scope_end");
            let end = &rr.rec(2 * i, 0).end;
            if let Err(m) = wait_for("the producer to run", Duration::from_secs(10), || {
                end.load(Ordering::SeqCst) != 0
            }) {
                panic!("consumer_racing_consumption_of_failed_producer_is_poisoned: {m}");
            }
            // Most delays where the window was observed on this machine (0.8-3.5 us).
            let delay = Duration::from_nanos(if rng.pct(75) {
                rng.range(500, 3500)
            } else {
                rng.below(10_000)
            });
            let t = Instant::now();
            while t.elapsed() < delay {
                std::hint::spin_loop();
            }
            let v = rng.below(4);
            let (tensors, deps) = match v {
                0 => (vec![], vec![dep(p, true)]),
                1 => (vec![], vec![dep(p, false)]),
                2 => (vec![cell(Tag::Input)], vec![]),
                _ => (vec![cell(Tag::Inout)], vec![dep(p, false)]),
            };
            if let Err(m) = sub1(&mut o, rr, 2 * i + 1, tensors, deps, FAIL_NONE, false) {
                panic!("consumer_racing_consumption_of_failed_producer_is_poisoned: {m}");
            }
            variants.push((v, delay));
        }
        o.close(run).expect("close");
        drop(o);
        let res = env.wait(run, RUN_TIMEOUT);
        for (i, &(v, delay)) in variants.iter().enumerate() {
            if ran(rr, 2 * i + 1) {
                escaped.push(format!(
                    "run {run} iteration {i}: consumer by {} submitted {delay:?} after the producer returned RAN",
                    ["add_dep", "add_dep_wait", "INPUT of its output", "INOUT + add_dep_wait"][v as usize]
                ));
            }
        }
        match res {
            Ok((Status::TaskFailed, _)) => {}
            other => panic!(
                "consumer_racing_consumption_of_failed_producer_is_poisoned: run {run} ended {other:?}"
            ),
        }
        let s = env.run_stats(run).expect("stats");
        env.release(run).expect("release");
        // SAFETY: the run is done; no executor reads the RunRec any more.
        drop(unsafe { Box::from_raw(rr_p) });
        if escaped.is_empty() && (s.completed, s.failed) != (0, 2 * n) {
            panic!(
                "consumer_racing_consumption_of_failed_producer_is_poisoned: run {run}: stats {s:?}, expected 0 completed and {} failed",
                2 * n
            );
        }
        done += n;
    }
    if let Err(m) = env.check_reclaimed() {
        panic!("consumer_racing_consumption_of_failed_producer_is_poisoned: {m}");
    }
    println!(
        "consumer_racing_consumption_of_failed_producer_is_poisoned: {iters} producer/consumer pairs in {:.2?}, {} consumers escaped",
        t0.elapsed(),
        escaped.len()
    );
    assert!(
        escaped.is_empty(),
        "MISSED POISONING: {} of {iters} consumers of a failed producer ran:\n{}",
        escaped.len(),
        escaped
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    drop(std::mem::ManuallyDrop::into_inner(env));
}

// ---------------------------------------------------------------------------------------
// Directed: a failed writer poisons the readers of its data, and only them

/// Which of `nodes` ran, as a readable list.
fn ran_list(rr: &RunRec, nodes: &[(usize, &str)]) -> String {
    nodes
        .iter()
        .map(|&(n, name)| format!("{name}: {}", if ran(rr, n) { "ran" } else { "never ran" }))
        .collect::<Vec<_>>()
        .join(", ")
}

/// W writes F0[0..64) and fails; later V rewrites F0[0..32) and succeeds. R reads F0[0..32):
/// every byte it reads was written by V, so R must run (element-set model); Rc reads
/// F0[32..40), which W wrote, and must not. Once with W already failed when V, R, Rc are
/// submitted, once with W still running.
#[test]
fn failed_writer_overwritten_does_not_poison_readers_of_new_data() {
    let _g = serial();
    let env = Env::new_c("O", lanes_a(), std_cfg());
    let f0 = env.statics[3].as_ptr() as u64;
    let v = |off: u64, n: u64, tag: Tag| tagged(tensor(f0, off, DataType::U64, &[n], &[]), tag);
    let mut bad = Vec::new();
    for w_done in [true, false] {
        let rr_p = Box::into_raw(Box::new(RunRec::new(false, false)));
        // SAFETY: just allocated; freed by `finish_directed` (leaked on failure).
        let rr = unsafe { &*rr_p };
        let mut o = env.orch();
        let run = o.begin_run().expect("begin_run");
        sub1(
            &mut o,
            rr,
            0,
            vec![v(0, 8, Tag::OutputExisting)],
            vec![],
            FAIL_RC,
            !w_done,
        )
        .expect("W");
        if w_done {
            wait_for("W to fail", Duration::from_secs(10), || {
                env.run_stats(run).is_some_and(|s| s.failed == 1)
            })
            .expect("W fails");
        }
        sub1(
            &mut o,
            rr,
            1,
            vec![v(0, 4, Tag::OutputExisting)],
            vec![],
            FAIL_NONE,
            false,
        )
        .expect("V");
        sub1(
            &mut o,
            rr,
            2,
            vec![v(0, 4, Tag::Input)],
            vec![],
            FAIL_NONE,
            false,
        )
        .expect("R");
        sub1(
            &mut o,
            rr,
            3,
            vec![v(32, 1, Tag::Input)],
            vec![],
            FAIL_NONE,
            false,
        )
        .expect("Rc");
        let r = finish_directed(&env, o, run, rr_p, (Status::TaskFailed, 2, 2));
        if let Err(m) = r {
            bad.push(format!(
                "W {} when V, R, Rc were submitted: {m}; {}",
                if w_done {
                    "already failed"
                } else {
                    "still running"
                },
                ran_list(rr, &[(0, "W"), (1, "V"), (2, "R"), (3, "Rc")])
            ));
        }
    }
    if !bad.is_empty() {
        fail_test(
            "failed_writer_overwritten_does_not_poison_readers_of_new_data",
            &format!(
                "EXTRA POISONING: expected W failed, V ran, R ran (it reads only bytes V rewrote), Rc poisoned\n{}",
                bad.join("\n")
            ),
            None,
            vec![env],
        );
    }
}

/// W writes bytes {0, 3} of F0 (u8, stride 3) and fails; R reads bytes {1, 5} (u8, stride 4
/// from offset 1): no byte in common, so R must run; Rc reads byte 3 and must not.
///
/// Known limitation, kept as a target: strides 3 and 4 do not divide each other, so the
/// overlap test cannot decide these views exactly and answers "overlap" (an extra edge,
/// never a missing one, as the engine issue allows), which poisons R.
#[test]
#[ignore = "conservative overlap for non-dividing strides: an extra edge poisons R"]
fn failed_writer_does_not_poison_disjoint_interleaved_reader() {
    let _g = serial();
    let env = Env::new_c("I", lanes_a(), std_cfg());
    let f0 = env.statics[3].as_ptr() as u64;
    let rr_p = Box::into_raw(Box::new(RunRec::new(false, false)));
    // SAFETY: just allocated; freed by `finish_directed` (leaked on failure).
    let rr = unsafe { &*rr_p };
    let mut o = env.orch();
    let run = o.begin_run().expect("begin_run");
    let w = tagged(tensor(f0, 0, DataType::U8, &[2], &[3]), Tag::OutputExisting);
    let r = tagged(tensor(f0, 1, DataType::U8, &[2], &[4]), Tag::Input);
    let rc = tagged(tensor(f0, 3, DataType::U8, &[], &[]), Tag::Input);
    sub1(&mut o, rr, 0, vec![w], vec![], FAIL_RC, true).expect("W");
    sub1(&mut o, rr, 1, vec![r], vec![], FAIL_NONE, false).expect("R");
    sub1(&mut o, rr, 2, vec![rc], vec![], FAIL_NONE, false).expect("Rc");
    if let Err(m) = finish_directed(&env, o, run, rr_p, (Status::TaskFailed, 1, 2)) {
        let l = ran_list(rr, &[(0, "W"), (1, "R"), (2, "Rc")]);
        fail_test(
            "failed_writer_does_not_poison_disjoint_interleaved_reader",
            &format!("EXTRA POISONING: expected W failed, R ran (bytes 1,5 vs W's 0,3), Rc poisoned: {m}; {l}"),
            None,
            vec![env],
        );
    }
}

/// Heap rings of one 1 KiB slab. In a nested scope, A = alloc(1 KiB) and W writes A's upper
/// half (INOUT, so A lives until W ends) and fails; the scope ends and both are consumed, so
/// A's slab is free. In a new scope B = alloc(768 B) reuses the slab; R reads B[512..520):
/// a fresh buffer only B produced, so R must run. The control run has W succeed.
#[test]
fn failed_writer_on_reclaimed_heap_does_not_poison_new_buffer() {
    let _g = serial();
    // Leaked if the test panics: dropping it would wait for a run that may never finish.
    let env = std::mem::ManuallyDrop::new(Env::new_c("M", lanes_a(), cfg(1024, 1024, 2_000)));
    let mut bad = Vec::new();
    for w_fails in [false, true] {
        let rr_p = Box::into_raw(Box::new(RunRec::new(false, false)));
        // SAFETY: just allocated; freed by `finish_directed` (leaked on failure).
        let rr = unsafe { &*rr_p };
        let mut o = env.orch();
        let run = o.begin_run().expect("begin_run");
        o.scope_begin().expect("scope_begin");
        let (a, _) = o.alloc(&[128], DataType::U64 as u32).expect("alloc A");
        let w = tagged(tensor(a as u64, 512, DataType::U64, &[64], &[]), Tag::Inout);
        let mode = if w_fails { FAIL_RC } else { FAIL_NONE };
        sub1(&mut o, rr, 0, vec![w], vec![], mode, false).expect("W");
        o.scope_end().expect("scope_end");
        wait_for("A and W to be consumed", Duration::from_secs(10), || {
            env.run_stats(run).is_some_and(|s| s.live_slots == 0) && {
                let s = env.stats();
                s.heap_top[1] == s.heap_tail[1]
            }
        })
        .expect("reclaimed");
        o.scope_begin().expect("scope_begin");
        let (b, _) = o.alloc(&[96], DataType::U64 as u32).expect("alloc B");
        assert_eq!(b, a, "test setup: B did not reuse A's slab");
        let r = tagged(tensor(b as u64, 512, DataType::U64, &[], &[]), Tag::Input);
        sub1(&mut o, rr, 1, vec![r], vec![], FAIL_NONE, false).expect("R");
        o.scope_end().expect("scope_end");
        let expect = if w_fails {
            (Status::TaskFailed, 1, 1)
        } else {
            (Status::Ok, 2, 0)
        };
        if let Err(m) = finish_directed(&env, o, run, rr_p, expect) {
            bad.push(format!(
                "W {}: {m}; {}",
                if w_fails {
                    "fails"
                } else {
                    "succeeds (control)"
                },
                ran_list(rr, &[(0, "W"), (1, "R")])
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "EXTRA POISONING: R reads only the new buffer B and must run whatever W did\n{}",
        bad.join("\n")
    );
    drop(std::mem::ManuallyDrop::into_inner(env));
}

// ---------------------------------------------------------------------------------------
// Directed: cancellation leaves no ready-queue entry that can dispatch another task

/// Submit a group of two members of `node` (no tensors or deps) of `kind` on `workers`.
fn group2(
    o: &mut Orch<'_>,
    rr: &RunRec,
    node: usize,
    kind: SubmitKind,
    workers: &[i32],
) -> Result<TaskHandle, String> {
    let mut g: Vec<Member> = (0..2)
        .map(|m| member(rr, node, m, vec![], vec![], FAIL_NONE, false))
        .collect();
    let args: Vec<TaskArgs> = g.iter_mut().map(|m| m.args()).collect();
    o.submit(kind, &callable(), &args, &CallConfig::default(), workers)
        .map_err(|e| format!("submit of n{node}: {e:?}"))
}

/// The end of a test of a cancelled run 1 and a run 2 after it, given how each ended (`r1`,
/// `r2`): run 1 must have ended ORCHESTRATION_FAILED and run 2 OK; both are released and the
/// worker must be left with nothing. Any error (`errs`, or one found here) fails the test,
/// leaking the RunRecs `recs` and the worker; otherwise they are freed.
fn check_cancelled_then_ok(
    env: std::mem::ManuallyDrop<Env>,
    (run1, r1): (u64, Result<(Status, String), String>),
    (run2, r2): (u64, Result<(Status, String), String>),
    mut errs: Vec<String>,
    recs: &[*mut RunRec],
) {
    if !matches!(r1, Ok((Status::OrchestrationFailed, _))) || !matches!(r2, Ok((Status::Ok, _))) {
        errs.push(format!(
            "run 1 ended {r1:?} (expected ORCHESTRATION_FAILED), run 2 {r2:?} (expected OK)"
        ));
    }
    if errs.is_empty() {
        for run in [run1, run2] {
            env.release(run).expect("release");
        }
        if let Err(m) = env.check_reclaimed() {
            errs.push(m);
        }
    }
    assert!(errs.is_empty(), "{}", errs.join("\n"));
    for &rr in recs {
        // SAFETY: each was made by Box::into_raw above and is freed once here; both runs are
        // done, so no executor reads these records any more.
        drop(unsafe { Box::from_raw(rr) });
    }
    drop(std::mem::ManuallyDrop::into_inner(env));
}

/// Run 1: T0 holds lane 17, T1 holds lane 3, T2 (lane 3) waits READY in lane 3's FIFO; the
/// submission fails, so T2 is cancelled and its slot freed. Run 2: T3 (lane 17) takes the
/// freed table entry and waits READY behind T0. T1 is released, lane 3 becomes idle. T3 must
/// run on lane 17 (its target), once, seeing its own slot id, after T0.
#[test]
fn cancelled_ready_task_leaves_no_queue_entry_behind() {
    let _g = serial();
    // Leaked if the test panics: dropping it would wait for a run that may never finish.
    let env = std::mem::ManuallyDrop::new(Env::new_rust(
        "Q",
        Lanes {
            nl: vec![3, 17],
            subs: 1,
        },
        std_cfg(),
    ));
    let e = env.engine().expect("Rust API").clone();
    let ra = Box::into_raw(Box::new(RunRec::new(false, false)));
    let rb = Box::into_raw(Box::new(RunRec::new(false, false)));
    let rc = Box::into_raw(Box::new(RunRec::new(false, false)));
    // SAFETY: allocated above, freed at the end once every run is done (leaked on failure).
    let (a, b, c) = unsafe { (&*ra, &*rb, &*rc) };
    let mut o = env.orch();
    let run1 = o.begin_run().expect("begin_run");
    nl1(&mut o, a, 0, 17, true).expect("submit");
    nl1(&mut o, b, 0, 3, true).expect("submit");
    wait_for("T0 and T1 to start", Duration::from_secs(10), || {
        ran(a, 0) && ran(b, 0)
    })
    .expect("lanes busy");
    let t2 = nl1(&mut o, c, 2, 3, false).expect("submit");
    o.fail(run1, "cancel T2").expect("fail_run_submission");
    let queued_after_cancel = dagrt::scheduler::queued(&e);
    let run2 = o.begin_run().expect("begin_run");
    let t3 = nl1(&mut o, c, 3, 17, false).expect("submit");
    o.close(run2).expect("close");
    drop(o);
    let reused = (t3.slot & ((1 << 24) - 1)) == (t2.slot & ((1 << 24) - 1));
    b.hold_open.store(true, Ordering::Release);
    wait_for("T1 to end", Duration::from_secs(10), || {
        b.rec(0, 0).end.load(Ordering::SeqCst) != 0
    })
    .expect("T1 ends");
    std::thread::sleep(Duration::from_millis(20));
    let early = ran(c, 3);
    a.hold_open.store(true, Ordering::Release);
    let r1 = env.wait(run1, RUN_TIMEOUT);
    let r2 = env.wait(run2, RUN_TIMEOUT);
    let rec = c.rec(3, 0);
    let (w, seen, count) = (
        rec.worker.load(Ordering::SeqCst),
        rec.slot.load(Ordering::SeqCst),
        rec.count.load(Ordering::SeqCst),
    );
    let mut errs = Vec::new();
    if !reused {
        errs.push(format!(
            "test setup: T3 (slot {}) did not reuse T2's table entry (slot {})",
            t3.slot, t2.slot
        ));
    }
    if early {
        errs.push(format!(
            "T3 (target lane 17, busy with T0) ran while T0 was still running: dispatched through T2's stale entry in lane 3's FIFO \
             ({queued_after_cancel} ready-queue entries were left after the cancellation)"
        ));
    }
    if count != 1 || w != 17 || seen != t3.slot {
        errs.push(format!(
            "T3 ran {count} time(s) on worker {w} seeing slot {seen}; expected once on worker 17 seeing its slot {} (T2's was {})",
            t3.slot, t2.slot
        ));
    }
    check_cancelled_then_ok(env, (run1, r1), (run2, r2), errs, &[ra, rb, rc]);
}

/// Cancelled group entries must not hold back later runs. Run 1: H holds NEXT_LEVEL lane 3
/// and SUB lane A; group G1 = [3, 17] and SUB group G2 (2 lanes) wait READY at the heads of
/// the group and SUB FIFOs; the submission fails, so both are cancelled. Run 2: S1 targets
/// the idle lane 17 and S2 is a SUB single with SUB lane B idle: both must run while H is
/// still holding, since nothing that is still alive is queued ahead of them.
#[test]
fn cancelled_group_entries_do_not_block_later_runs() {
    let _g = serial();
    // Leaked if the test panics: dropping it would wait for a run that may never finish.
    let env = std::mem::ManuallyDrop::new(Env::new_c(
        "G",
        Lanes {
            nl: vec![3, 17],
            subs: 2,
        },
        std_cfg(),
    ));
    let ra = Box::into_raw(Box::new(RunRec::new(false, false)));
    let rb = Box::into_raw(Box::new(RunRec::new(false, false)));
    // SAFETY: allocated above, freed at the end once every run is done (leaked on failure).
    let (a, b) = unsafe { (&*ra, &*rb) };
    let mut o = env.orch();
    let run1 = o.begin_run().expect("begin_run");
    nl1(&mut o, a, 0, 3, true).expect("H on lane 3");
    sub1(&mut o, a, 1, vec![], vec![], FAIL_NONE, true).expect("H on a SUB lane");
    wait_for("H to start on both lanes", Duration::from_secs(10), || {
        ran(a, 0) && ran(a, 1)
    })
    .expect("H runs");
    group2(&mut o, b, 2, SubmitKind::NextLevelGroup, &[3, 17]).expect("G1");
    group2(&mut o, b, 3, SubmitKind::SubGroup, &[]).expect("G2");
    o.fail(run1, "cancel the groups")
        .expect("fail_run_submission");
    let run2 = o.begin_run().expect("begin_run");
    nl1(&mut o, b, 4, 17, false).expect("S1 on lane 17");
    sub1(&mut o, b, 5, vec![], vec![], FAIL_NONE, false).expect("S2");
    o.close(run2).expect("close");
    drop(o);
    let mut errs = Vec::new();
    let started = wait_for("S1 and S2 to run", Duration::from_secs(2), || {
        ran(b, 4) && ran(b, 5)
    });
    let queued = env.stats().ready_queued;
    if started.is_err() {
        errs.push(format!(
            "while H holds lane 3 and one SUB lane, S1 (idle lane 17) {} and S2 (one SUB lane idle) {}; \
             {queued} entries queued: the cancelled groups G1/G2 still head their FIFOs",
            if ran(b, 4) { "ran" } else { "did not run" },
            if ran(b, 5) { "ran" } else { "did not run" },
        ));
    }
    a.hold_open.store(true, Ordering::Release);
    let r1 = env.wait(run1, RUN_TIMEOUT);
    let r2 = env.wait(run2, RUN_TIMEOUT);
    if ran(b, 2) || ran(b, 3) {
        errs.push("a cancelled group ran".into());
    }
    check_cancelled_then_ok(env, (run1, r1), (run2, r2), errs, &[ra, rb]);
}
