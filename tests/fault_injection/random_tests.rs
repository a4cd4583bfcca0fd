//! The random tests of parts 1 and 2, `random_failing_dags` and
//! `orchestration_failure_cancels_unstarted`, and `late_invalid_arguments_leave_nothing`.

use super::*;

// ---------------------------------------------------------------------------------------
// Tests: parts 1 and 2

pub(crate) fn std_cfg() -> WorkerConfig {
    cfg(4 << 20, 16384, 10_000)
}

/// Two workers with `lanes_a()` and `std_cfg()`: "R" through the Rust API, "C" through the C ABI.
pub(crate) fn rust_and_c_envs() -> Vec<Env> {
    vec![
        Env::new_rust("R", lanes_a(), std_cfg()),
        Env::new_c("C", lanes_a(), std_cfg()),
    ]
}

/// Build one random run with failing nodes (`build_failing`) and check it (`check_failing`);
/// on failure, the message and, if it was built, the run for the dump.
fn build_and_check(
    env: &Env,
    seed: u64,
    no_fail: bool,
    sweep: bool,
    t: &mut Totals,
) -> Result<(), BuildErr> {
    let b = build_failing(env, seed, no_fail, sweep, t)?;
    check_failing(env, &b, t).map_err(|m| Box::new((m, Some(b))))
}

/// Part 1: random graphs with failing nodes, half through the Rust API (gated wiring checks,
/// consumed-producer consumers), half through the C ABI.
#[test]
fn random_failing_dags() {
    let _g = serial();
    let t0 = Instant::now();
    let envs = rust_and_c_envs();
    let mut t = Totals::default();
    let runs = fault_runs();
    for seed in run_seeds(1, runs) {
        let env = &envs[(seed >> 7) as usize % 2];
        if let Err(x) = build_and_check(env, seed, false, false, &mut t) {
            fail_test("random_failing_dags", &x.0, x.1.as_ref(), envs);
        }
    }
    report("random_failing_dags", &t, t0);
    if !replaying() && runs >= 300 {
        // The interesting paths were taken (else the checks above proved little).
        assert!(
            t.failing_ran > 0 && t.poisoned_must > 0,
            "no failure was propagated"
        );
        assert!(
            t.first_rc > 0 && t.first_msg > 0,
            "first failure not checked both ways"
        );
        assert!(
            t.consumed_dep > 0 && t.consumed_read > 0,
            "no consumer of a consumed failed producer"
        );
        assert!(
            t.exact_poison_checks > 0 && t.hostile_snap > 0,
            "no gated run"
        );
        assert!(t.c_runs > 0 && t.c_runs < t.runs);
    }
}

/// Part 2: orchestration failing at a random op, through the three ways to fail it; each
/// failed run is followed by a successful one on the same worker.
#[test]
fn orchestration_failure_cancels_unstarted() {
    let _g = serial();
    let t0 = Instant::now();
    let envs = rust_and_c_envs();
    let mut t = Totals::default();
    for seed in run_seeds(2, (fault_runs() / 4).max(1)) {
        let via = match seed % 3 {
            0 => CancelVia::RustFail,
            1 => CancelVia::CFail,
            _ => CancelVia::CCallback,
        };
        let env = &envs[matches!(via, CancelVia::CFail | CancelVia::CCallback) as usize];
        if let Err(x) = cancelled_run(env, seed, via, &mut t) {
            fail_test(
                "orchestration_failure_cancels_unstarted",
                &x.0,
                x.1.as_ref(),
                envs,
            );
        }
    }
    report("orchestration_failure_cancels_unstarted", &t, t0);
    if !replaying() && fault_runs() >= 300 {
        assert!(t.cancelled_tasks > 0 && t.cancel_running > 0 && t.cancel_via.len() == 3);
    }
}

/// Part 3 (late invalid arguments): in gated runs, every corruption of several random
/// tasks is refused with the right status and leaves worker and run stats untouched; the
/// run then completes normally with exact counts.
#[test]
fn late_invalid_arguments_leave_nothing() {
    let _g = serial();
    let t0 = Instant::now();
    let envs = rust_and_c_envs();
    let mut t = Totals::default();
    for seed in run_seeds(3, (fault_runs() / 30).max(2)) {
        let env = &envs[(seed & 1) as usize];
        if let Err(x) = build_and_check(env, seed, true, true, &mut t) {
            fail_test(
                "late_invalid_arguments_leave_nothing",
                &x.0,
                x.1.as_ref(),
                envs,
            );
        }
    }
    report("late_invalid_arguments_leave_nothing", &t, t0);
    if !replaying() {
        assert_eq!(
            t.hostile_kinds.len(),
            ALL_CORRUPT.len(),
            "corruptions tried: {:?}",
            t.hostile_kinds
        );
    }
}
