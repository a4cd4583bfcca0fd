//! The random tests: one worker, three workers with several runs in flight, and a task window
//! of 8 slots.

use super::*;

// ---------------------------------------------------------------------------------------
// Tests

/// The runs of `seeds` one after the other on `env`, built with `opts`: each is finished and
/// checked, and the worker must be left with nothing; the first failure ends test `what` with
/// the run's dump. Then the totals are reported (timed from `t0`).
fn runs_on_one_worker(what: &str, t0: Instant, env: Env, seeds: Vec<u64>, opts: Opts) {
    let mut t = Totals::default();
    for seed in seeds {
        let b = match build(&env, seed, opts, None, &mut t) {
            Ok(b) => b,
            Err(x) => fail(what, &x.0, x.1.as_ref(), vec![env]),
        };
        if let Err(m) = finish(&env, &b) {
            fail(what, &m, Some(&b), vec![env]);
        }
        if let Err(m) = env.check_reclaimed() {
            fail(what, &m, Some(&b), vec![env]);
        }
    }
    report(what, &t, t0);
}

/// One worker (NEXT_LEVEL lanes 3, 17, 42 and 2 SUB lanes), DAGRT_STRESS_RUNS runs.
#[test]
fn random_dags_single_worker() {
    let _g = serial();
    let t0 = Instant::now();
    let env = Env::new("A", lanes_a(), cfg(16384, 10_000));
    let opts = Opts {
        tiny_window: None,
        gating: true,
        scope_errors: true,
    };
    let seeds = run_seeds(1, stress_runs());
    runs_on_one_worker("random_dags_single_worker", t0, env, seeds, opts);
}

/// Three workers with different lanes; each round builds 2-5 runs on randomly chosen
/// workers (a worker may have two runs in flight, and one run builds while the others
/// execute), then waits for all of them. Now and then a submit names a handle of another run
/// in flight (same or other worker) or of a released run, and must be refused.
#[test]
fn random_dags_alternating_workers() {
    let _g = serial();
    let t0 = Instant::now();
    let envs = vec![
        Env::new("A", lanes_a(), cfg(16384, 10_000)),
        Env::new(
            "B",
            Lanes {
                nl: vec![5, 9],
                subs: 3,
            },
            cfg(16384, 10_000),
        ),
        Env::new(
            "C",
            Lanes {
                nl: vec![1],
                subs: 1,
            },
            cfg(16384, 10_000),
        ),
    ];
    let opts = Opts {
        tiny_window: None,
        gating: true,
        scope_errors: true,
    };
    let mut t = Totals::default();
    let seeds = run_seeds(2, (stress_runs() / 2).max(1));
    let mut rng = Rng(base_seed() ^ 0x77);
    let mut old_handle: Option<TaskHandle> = None;
    let mut i = 0;
    while i < seeds.len() {
        let k = rng.range(2, 5) as usize;
        let mut inflight: Vec<(usize, Built)> = Vec::new();
        for &seed in seeds.iter().skip(i).take(k) {
            let w = (seed % envs.len() as u64) as usize;
            let foreign = if rng.pct(10) {
                let cands: Vec<TaskHandle> = inflight
                    .iter()
                    .filter_map(|(_, b)| {
                        b.nodes.first().map(|n| TaskHandle {
                            run_id: b.run_id,
                            slot: n.slot,
                        })
                    })
                    .chain(old_handle)
                    .collect();
                (!cands.is_empty()).then(|| cands[rng.below(cands.len() as u64) as usize])
            } else {
                None
            };
            match build(&envs[w], seed, opts, foreign, &mut t) {
                Ok(b) => inflight.push((w, b)),
                Err(x) => fail("random_dags_alternating_workers", &x.0, x.1.as_ref(), envs),
            }
        }
        i += k;
        for (w, b) in &inflight {
            if let Err(m) = finish(&envs[*w], b) {
                fail("random_dags_alternating_workers", &m, Some(b), envs);
            }
        }
        let leftover = envs.iter().find_map(|env| env.check_reclaimed().err());
        if let Some(m) = leftover {
            let b = inflight.last().map(|x| &x.1);
            fail("random_dags_alternating_workers", &m, b, envs);
        }
        if let Some((_, b)) = inflight.last() {
            if let Some(n) = b.nodes.first() {
                old_handle = Some(TaskHandle {
                    run_id: b.run_id,
                    slot: n.slot,
                });
            }
        }
    }
    report("random_dags_alternating_workers", &t, t0);
}

/// A task window of 8 slots: submits block on back-pressure all the time. Every slot held by
/// an open scope is kept among the last 6 ids (the generator ends scopes to keep it so), so
/// the slot a claim waits for is always one the engine can reclaim on its own.
#[test]
fn random_dags_tiny_window() {
    let _g = serial();
    let t0 = Instant::now();
    let env = Env::new("T", lanes_a(), cfg(8, 5_000));
    let opts = Opts {
        tiny_window: Some(8),
        gating: false,
        scope_errors: false,
    };
    let seeds = run_seeds(3, (stress_runs() / 4).max(1));
    runs_on_one_worker("random_dags_tiny_window", t0, env, seeds, opts);
}
