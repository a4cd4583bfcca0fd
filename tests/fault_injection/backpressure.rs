//! Part 3: submits and allocs that fail on a full heap ring or task window leave nothing
//! behind, and the caller recovers.

use super::*;

// ---------------------------------------------------------------------------------------
// Part 3: back-pressure failures leave nothing behind and are recoverable

#[derive(Default, Debug)]
struct BpStats {
    cases: u64,
    same_run: u64,
    new_run: u64,
    cross_ring: u64,
    retries: u64,
    calls: BTreeMap<&'static str, u64>,
}

/// The call that hits the full heap ring / task window: built fresh for each attempt.
#[derive(Clone, Copy, Debug)]
enum BpCall {
    /// SUB task: INPUT on a static buffer, a dep on a blocked task, an auto OUTPUT.
    Sub,
    /// NEXT_LEVEL group: valid members, the last one with the auto OUTPUT.
    NlGroup,
    /// SUB group of two members, each with an auto OUTPUT.
    SubGroup,
    Alloc,
}

fn bp_call(
    o: &mut Orch<'_>,
    env: &Env,
    rr: &RunRec,
    node: usize,
    call: BpCall,
    holder: Option<TaskHandle>,
) -> (Result<(), ApiErr>, bool) {
    let st = |i: usize| env.statics[i].as_ptr() as u64;
    let auto = || tagged(tensor(0, 0, DataType::U8, &[1000], &[]), Tag::Output);
    let input = tagged(tensor(st(3), 8, DataType::U64, &[4], &[]), Tag::Input);
    let deps: Vec<Dep> = holder.map(|h| dep(h, true)).into_iter().collect();
    let (kind, workers, mut ms) = match call {
        BpCall::Alloc => {
            let r = o.alloc(&[777], DataType::U8 as u32).map(|_| ());
            return (r, true);
        }
        BpCall::Sub => (
            SubmitKind::Sub,
            vec![],
            vec![member(
                rr,
                node,
                0,
                vec![input, auto()],
                deps,
                FAIL_NONE,
                false,
            )],
        ),
        BpCall::NlGroup => (
            SubmitKind::NextLevelGroup,
            vec![42, 3],
            vec![
                member(rr, node, 0, vec![input], deps.clone(), FAIL_NONE, false),
                member(rr, node, 1, vec![input, auto()], deps, FAIL_NONE, false),
            ],
        ),
        BpCall::SubGroup => (
            SubmitKind::SubGroup,
            vec![],
            vec![
                member(rr, node, 0, vec![auto()], deps, FAIL_NONE, false),
                member(rr, node, 1, vec![input, auto()], vec![], FAIL_NONE, false),
            ],
        ),
    };
    let args: Vec<TaskArgs> = ms.iter_mut().map(|m| m.args()).collect();
    let r = o
        .submit(kind, &callable(), &args, &CallConfig::default(), &workers)
        .map(|_| ());
    drop(args);
    // Out-parameters are written only on success.
    let untouched = ms.iter().all(|m| {
        m.tensors
            .iter()
            .filter(|t| t.tag == Tag::Output as u32)
            .all(|t| t.data.is_null() == r.is_err())
    });
    (r, untouched)
}

/// Fill a heap ring (`window` false: 8 KiB rings) or the task window (`window` true: 8
/// slots) with blocked work in a nested scope, hit the limit with a random call, check it
/// waited, failed with the seed's message and changed nothing, then recover.
fn backpressure_case(env: &Env, seed: u64, window: bool, bs: &mut BpStats) -> Result<(), String> {
    let mut rng = Rng(seed);
    let rr_p = Box::into_raw(Box::new(RunRec::new(true, false)));
    // SAFETY: just allocated; freed by `finish_directed` (leaked on failure).
    let rr = unsafe { &*rr_p };
    let mut node = 0usize;
    let mut o = env.orch();
    let run = o.begin_run().map_err(|e| format!("begin_run: {e:?}"))?;
    let d = rng.below(4) as usize;
    for _ in 0..=d {
        o.scope_begin().map_err(|e| format!("{e:?}"))?;
    }
    let ring = (d + 1).min(3);
    let mut ok_tasks = 0u64;
    let mut holders = Vec::new();
    let auto = |n: u64| tagged(tensor(0, 0, DataType::U8, &[n], &[]), Tag::Output);
    let cap = 8usize;
    let mut used = 0usize;
    // The heap ring is circular: a reservation never straddles its end, so multi-slab
    // submits must fit before the wrap point (slab position `pos`).
    let mut pos = (env.stats().heap_top[ring] % 8192 / 1024) as usize;
    while used < cap {
        let room = if window {
            cap - used
        } else {
            (cap - used).min(8 - pos)
        };
        let lane = lanes_a().nl[rng.below(3) as usize];
        let (kind, workers, mut ms, units, alloc_first) = match rng.below(5) {
            0 => {
                let t = if window && rng.pct(50) {
                    vec![]
                } else {
                    vec![auto(rng.range(1, 1024))]
                };
                (
                    SubmitKind::Sub,
                    vec![],
                    vec![member(rr, node, 0, t, vec![], FAIL_NONE, false)],
                    1,
                    false,
                )
            }
            1 => {
                let t = if window { vec![] } else { vec![auto(1024)] };
                (
                    SubmitKind::NextLevel,
                    vec![lane],
                    vec![member(rr, node, 0, t, vec![], FAIL_NONE, false)],
                    1,
                    false,
                )
            }
            2 => {
                let g = if window {
                    rng.range(1, 3)
                } else {
                    rng.range(1, room.min(3) as u64)
                } as usize;
                let ms = (0..g)
                    .map(|m| {
                        let t = if window {
                            vec![]
                        } else {
                            vec![auto(rng.range(1, 1024))]
                        };
                        member(rr, node, m, t, vec![], FAIL_NONE, false)
                    })
                    .collect::<Vec<_>>();
                let ws = lanes_a().nl[..g].to_vec();
                (
                    SubmitKind::NextLevelGroup,
                    ws,
                    ms,
                    if window { 1 } else { g },
                    false,
                )
            }
            3 if !window || room >= 2 => (
                SubmitKind::Sub,
                vec![],
                vec![],
                if window { 2 } else { 1 },
                true,
            ),
            _ if !window && room >= 2 => (
                SubmitKind::Sub,
                vec![],
                vec![member(
                    rr,
                    node,
                    0,
                    vec![auto(1024), auto(1)],
                    vec![],
                    FAIL_NONE,
                    false,
                )],
                2,
                false,
            ),
            _ => continue,
        };
        if alloc_first {
            // An alloc() buffer kept alive by a blocked INOUT writer.
            let (p, _) = o
                .alloc(&[rng.range(1, 1024)], DataType::U8 as u32)
                .map_err(|e| format!("alloc: {e:?}"))?;
            ms = vec![member(
                rr,
                node,
                0,
                vec![tagged(
                    tensor(p as u64, 0, DataType::U8, &[1], &[]),
                    Tag::Inout,
                )],
                vec![],
                FAIL_NONE,
                false,
            )];
        }
        let args: Vec<TaskArgs> = ms.iter_mut().map(|m| m.args()).collect();
        let h = o
            .submit(kind, &callable(), &args, &CallConfig::default(), &workers)
            .map_err(|e| format!("filling: submit of n{node}: {e:?}"))?;
        holders.push(h);
        node += 1;
        ok_tasks += 1;
        used += units;
        pos = (pos + units) % 8;
    }
    let s = env.stats();
    if window {
        if s.live_slots != cap as i64 {
            return Err(format!(
                "test setup: {} live slots, expected the window of {cap} full",
                s.live_slots
            ));
        }
    } else if s.heap_top[ring] - s.heap_tail[ring] != 8192 {
        return Err(format!(
            "test setup: heap ring {ring} holds {} bytes, expected 8192",
            s.heap_top[ring] - s.heap_tail[ring]
        ));
    }
    let call = [
        BpCall::Sub,
        BpCall::NlGroup,
        BpCall::SubGroup,
        BpCall::Alloc,
    ][rng.below(4) as usize];
    *bs.calls
        .entry(match call {
            BpCall::Sub => "sub",
            BpCall::NlGroup => "next_level_group",
            BpCall::SubGroup => "sub_group",
            BpCall::Alloc => "alloc",
        })
        .or_insert(0) += 1;
    let holder = holders
        .get(rng.below(holders.len() as u64) as usize)
        .copied();
    let (want, words) = if window {
        (Status::WindowFull, "task window full")
    } else {
        (Status::HeapExhausted, "HeapRing exhausted")
    };
    let before = snap(env, run);
    let t0 = Instant::now();
    let (r, untouched) = bp_call(&mut o, env, rr, node, call, holder);
    let waited = t0.elapsed();
    let after = snap(env, run);
    match &r {
        Err((st, msg)) if *st == want && msg.contains(words) => {}
        other => {
            return Err(format!(
                "{call:?} against a full {}: {other:?}, expected {want:?} '{words} ...'",
                if window { "task window" } else { "heap ring" }
            ))
        }
    }
    if waited < Duration::from_millis(40) {
        return Err(format!(
            "{call:?} failed after {waited:?}, before the 50 ms back-pressure timeout"
        ));
    }
    if !untouched {
        return Err(format!(
            "{call:?} failed but wrote an auto-allocated address back"
        ));
    }
    if before != after {
        return Err(format!("LEFT BEHIND: {call:?} failed with {want:?} but changed the stats:\n  before {before:?}\n  after  {after:?}"));
    }
    if !window && ring < 3 {
        // Back-pressure is per ring: a deeper scope's ring still has room.
        o.scope_begin().map_err(|e| format!("{e:?}"))?;
        let h = sub1(
            &mut o,
            rr,
            node + 1,
            vec![auto(1024)],
            vec![],
            FAIL_NONE,
            false,
        )
        .map_err(|e| {
            format!(
                "heap ring {} should have room while ring {ring} is full: {e}",
                ring + 1
            )
        })?;
        let _ = h;
        o.scope_end().map_err(|e| format!("{e:?}"))?;
        ok_tasks += 1;
        bs.cross_ring += 1;
    }
    let node = node + 2;
    let is_task = !matches!(call, BpCall::Alloc);
    if rng.pct(50) {
        // Let the blocked work drain and submit again in the same run.
        o.scope_end().map_err(|e| format!("{e:?}"))?;
        rr.open_all();
        let t1 = Instant::now();
        loop {
            o.scope_begin().map_err(|e| format!("{e:?}"))?;
            let (r, untouched) = bp_call(&mut o, env, rr, node, call, holder);
            o.scope_end().map_err(|e| format!("{e:?}"))?;
            if !untouched {
                return Err(format!(
                    "retry of {call:?}: out-parameters inconsistent with {r:?}"
                ));
            }
            match r {
                Ok(()) => break,
                Err((st, _)) if st == want && t1.elapsed() < Duration::from_secs(10) => {
                    bs.retries += 1
                }
                Err(e) => {
                    return Err(format!(
                        "retry of {call:?} after the blocked work drained: {e:?}"
                    ))
                }
            }
        }
        for _ in 0..d {
            o.scope_end().map_err(|e| format!("{e:?}"))?;
        }
        ok_tasks += is_task as u64;
        finish_directed(env, o, run, rr_p, (Status::Ok, ok_tasks, 0))?;
        bs.same_run += 1;
    } else {
        // Close the run and start another.
        for _ in 0..=d {
            o.scope_end().map_err(|e| format!("{e:?}"))?;
        }
        drop(o);
        let o = env.orch();
        let rr2 = Box::into_raw(Box::new(RunRec::new(false, false)));
        finish_directed(env, o, run, rr_p, (Status::Ok, ok_tasks, 0))?;
        let mut o = env.orch();
        let run2 = o.begin_run().map_err(|e| format!("begin_run: {e:?}"))?;
        for _ in 0..=d {
            o.scope_begin().map_err(|e| format!("{e:?}"))?;
        }
        // SAFETY: just allocated; freed by `finish_directed`.
        let (r, _) = bp_call(&mut o, env, unsafe { &*rr2 }, 0, call, None);
        r.map_err(|e| format!("{call:?} in a new run after the full one closed: {e:?}"))?;
        for _ in 0..=d {
            o.scope_end().map_err(|e| format!("{e:?}"))?;
        }
        finish_directed(env, o, run2, rr2, (Status::Ok, is_task as u64, 0))?;
        bs.new_run += 1;
    }
    bs.cases += 1;
    Ok(())
}

/// Heap rings of 8 KiB, 50 ms timeout.
#[test]
fn heap_exhaustion_leaves_nothing_and_recovers() {
    let _g = serial();
    let t0 = Instant::now();
    let env = Env::new_c("H", lanes_a(), cfg(8192, 4096, 50));
    let mut bs = BpStats::default();
    for seed in run_seeds(4, (fault_runs() / 200).clamp(4, 40)) {
        if let Err(m) = backpressure_case(&env, seed, false, &mut bs) {
            fail_test(
                "heap_exhaustion_leaves_nothing_and_recovers",
                &format!("seed {seed:#x} (replay with DAGRT_FAULT_ONLY={seed:#x}): {m}"),
                None,
                vec![env],
            );
        }
    }
    println!(
        "heap_exhaustion_leaves_nothing_and_recovers: {bs:?} in {:.2?}",
        t0.elapsed()
    );
    if !replaying() {
        assert!(bs.same_run > 0 && bs.new_run > 0 && bs.cross_ring > 0);
    }
}

/// A task window of 8 slots, 50 ms timeout.
#[test]
fn window_full_leaves_nothing_and_recovers() {
    let _g = serial();
    let t0 = Instant::now();
    let env = Env::new_c("W", lanes_a(), cfg(4 << 20, 8, 50));
    let mut bs = BpStats::default();
    for seed in run_seeds(5, (fault_runs() / 200).clamp(4, 40)) {
        if let Err(m) = backpressure_case(&env, seed, true, &mut bs) {
            fail_test(
                "window_full_leaves_nothing_and_recovers",
                &format!("seed {seed:#x} (replay with DAGRT_FAULT_ONLY={seed:#x}): {m}"),
                None,
                vec![env],
            );
        }
    }
    println!(
        "window_full_leaves_nothing_and_recovers: {bs:?} in {:.2?}",
        t0.elapsed()
    );
    if !replaying() {
        assert!(bs.same_run > 0 && bs.new_run > 0);
    }
}
