//! Where SUB singles go (`scheduler::book::sub_lane_for_single`): while the SUB lanes run
//! tiny jobs, onto the first lane with room, where they queue behind its running job rather
//! than go to another lane; longer jobs spread to the least loaded lane. A tiny-job lane
//! whose running job turns out long stops reporting, and the jobs queued behind it are taken
//! back for the idle lane, also when nothing else happens.

use std::time::Duration;

mod common;
use common::gated::{blocker, in_run, rec, stalled_tiny_job, submit, wait_run, warm, Rec};

#[test]
fn tiny_jobs_submitted_together_run_on_one_lane() {
    in_run(|o, c| {
        // A lane preempted in the middle of a warm-up task has a long average for the next
        // few dozen, and one preempted with jobs queued is robbed: on a loaded machine an
        // attempt may spread. The old policy (always the least loaded lane) spreads every
        // attempt.
        for attempt in 1.. {
            warm(o, c, 200, Duration::ZERO);
            let burst: Vec<&Rec> = (0..4).map(|_| rec(None, Duration::ZERO)).collect();
            for r in &burst {
                submit(o, c, r);
            }
            let lanes: Vec<i32> = burst.iter().map(|r| wait_run("a burst task", r)).collect();
            if lanes.iter().all(|&l| l == lanes[0]) {
                break;
            }
            assert!(
                attempt < 5,
                "a burst of tiny tasks spread over lanes {lanes:?} (5 attempts)"
            );
        }
    });
}

#[test]
fn jobs_queued_behind_a_stalled_tiny_job_move_to_the_idle_lane() {
    stalled_tiny_job(false);
}

/// The same with the idle lane parked first: it wakes to look from time to time.
#[test]
fn jobs_queued_behind_a_stalled_tiny_job_move_to_a_parked_lane() {
    stalled_tiny_job(true);
}

#[test]
fn longer_jobs_go_to_the_idle_lane() {
    in_run(|o, c| {
        warm(o, c, 8, Duration::from_micros(200));
        let (_gate, held) = blocker(o, c);
        let next = rec(None, Duration::ZERO);
        submit(o, c, next);
        let ran = wait_run("the task after the blocker", next);
        assert_ne!(ran, held);
    });
}
