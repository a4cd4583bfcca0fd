//! The stuck rule's look from a spinning idle lane (`sub_placement.rs` covers the parked
//! one): with a spin budget far longer than the test, the idle lane never parks, so only the
//! looks it takes while spinning (every STUCK_SWEEP) can find the jobs queued behind a
//! stalled tiny job. A binary of its own: the spin budget is read once per process.

mod common;

#[test]
fn jobs_queued_behind_a_stalled_tiny_job_move_to_a_spinning_lane() {
    // Before any worker exists in this process: every wait spins for up to 100 s.
    std::env::set_var("DAGRT_SPIN_US", "100000000");
    assert_eq!(
        dagrt::event::spin_budget(),
        std::time::Duration::from_secs(100)
    );
    // Three spinning threads on two cores: the looks are slower to come (about 45 ms here),
    // and the checks of the passes they run would move the jobs without them; only the
    // liveness is checked.
    common::gated::stalled_tiny_job(false, std::time::Duration::from_secs(10), 3, 1);
}
