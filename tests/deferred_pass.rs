//! A lane that has just run a tiny job with another queued behind it leaves the scheduling
//! pass for later (`lane::thread::lane_main`), so a stream of tiny jobs pays one pass per
//! mailbox, not one per job. The job queued behind may turn out long; the consumers the
//! deferred completion releases must not wait for it to end, also when the scheduler thread
//! has parked.

use dagrt::slot::PENDING;
use dagrt::task::Dep;
use dagrt::worker::WorkerConfig;
use std::time::Duration;

mod common;
use common::gated::{rec, record, submit, submit_after, wait_run, warm, Gate};

/// Scenes run: in each, the deferral happens unless the tiny job was one of the one in 8 a
/// lane of tiny jobs times (a timed job that long is "cold" and gets its pass at once), so
/// without the wake-up all of them passing is a 1 in 8^4 chance.
const SCENES: usize = 4;

#[test]
fn a_deferred_completion_releases_its_consumer_while_the_next_job_runs() {
    let _one = common::serial();
    // One SUB lane: no idle lane whose looks would run a pass instead.
    let (w, c) = common::sub_worker(WorkerConfig::default(), 1, "deferred.record", record);
    let e = w.engine().unwrap().clone();
    let mut o = w.orchestrator().unwrap().lock().unwrap();
    let run = o.begin_run().unwrap();
    for scene in 0..SCENES {
        // Tiny jobs, one at a time: the lane's jobs are tiny, so it is posted several at once.
        warm(&mut o, &c, 200, Duration::ZERO);
        // A holds the lane until its gate opens; B is posted behind it, and holds the lane
        // in turn; C waits for A only.
        let (ga, gb) = (Gate::new(), Gate::new());
        let a = rec(Some(ga.0), Duration::ZERO);
        let ha = submit(&mut o, &c, a);
        wait_run("A", a);
        let b = rec(Some(gb.0), Duration::ZERO);
        submit(&mut o, &c, b);
        let dep = Dep {
            handle: ha,
            kind: 0,
            reserved: 0,
        };
        let hc = submit_after(&mut o, &c, rec(None, Duration::ZERO), &[dep]);
        // Well past the spin budget: the scheduler thread parks.
        std::thread::sleep(Duration::from_millis(20));
        let core = &e.slots.get(hc.slot).core;
        assert_eq!(core.state(), PENDING, "scene {scene}: C before A ended");
        drop(ga);
        wait_run("B", b);
        common::wait_for("C to be released", Duration::from_secs(5), || {
            core.state() != PENDING
        })
        .unwrap_or_else(|m| panic!("scene {scene}, while B runs: {m}"));
        drop(gb);
    }
    o.close_run_submission(run).unwrap();
    drop(o);
    assert!(e.runs.get(run).unwrap().wait(Some(Duration::from_secs(30))));
}
