//! A group's stored failure is its first member failure in time (the Scheduler seed: "the
//! first member failure determines the stored failure"), even when a pass drains the later
//! failure's completion first. A pass drains the lanes' completion rings in lane order, so
//! the test makes the member on the second lane fail first and the member on the first lane
//! fail second while it holds the scheduler role, then lets one pass take both.

use dagrt::orchestrator::SubmitKind;
use dagrt::task::{CallConfig, TaskArgs, TaskView};
use dagrt::worker::{Worker, WorkerConfig};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Per member: started, and allowed to fail.
static STARTED: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];
static GO: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];
static RAN: AtomicU32 = AtomicU32::new(0);

/// Member m fails with code 10 + m once the test lets it.
unsafe extern "C" fn member(t: *const TaskView, _u: *mut c_void) -> i32 {
    // SAFETY: the runtime passes a valid view for the duration of the call.
    let m = unsafe { (*t).member_index } as usize;
    STARTED[m].store(true, Ordering::Release);
    while !GO[m].load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    RAN.fetch_add(1, Ordering::Relaxed);
    10 + m as i32
}

fn wait_until(what: &str, f: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(10), "timed out: {what}");
        std::thread::yield_now();
    }
}

#[test]
fn a_group_stores_its_earliest_member_failure() {
    let mut w = Worker::new(WorkerConfig::default()).unwrap();
    // Lane 0 targets worker 10, lane 1 worker 20.
    w.add_next_level_lane(10).unwrap();
    w.add_next_level_lane(20).unwrap();
    w.init().unwrap();
    let c = dagrt::callable::register(
        "group_failure.member",
        7,
        dagrt::callable::CallableKind::Task as u32,
        member,
        std::ptr::null_mut(),
    )
    .unwrap();
    let e = w.engine().unwrap().clone();
    let run = {
        let mut o = w.orchestrator().unwrap().lock().unwrap();
        let run = o.begin_run().unwrap();
        let args = [TaskArgs::of_tensors(&mut []), TaskArgs::of_tensors(&mut [])];
        o.submit(
            SubmitKind::NextLevelGroup,
            &c,
            &args,
            &CallConfig::default(),
            &[10, 20],
        )
        .unwrap();
        o.close_run_submission(run).unwrap();
        run
    };
    wait_until("both members start", || {
        STARTED.iter().all(|s| s.load(Ordering::Acquire))
    });
    {
        // Hold the scheduler role: no pass runs until both completions are queued.
        let role = e.sched.lock().unwrap();
        GO[1].store(true, Ordering::Release);
        wait_until("member 1's completion", || !e.lanes[1].done.is_empty());
        GO[0].store(true, Ordering::Release);
        wait_until("member 0's completion", || !e.lanes[0].done.is_empty());
        drop(role);
    }
    // Nothing else would start a pass: the lanes' own attempts failed while the role was
    // held, and the scheduler thread was woken for them.
    assert!(e.runs.get(run).unwrap().wait(Some(Duration::from_secs(10))));
    assert_eq!(RAN.load(Ordering::Relaxed), 2);
    let (msg, _) = e
        .runs
        .get(run)
        .unwrap()
        .result()
        .expect_err("the group failed");
    assert!(
        msg.contains("code 11"),
        "member 1 failed first (code 11), member 0 second (code 10); the run reports: {msg}"
    );
    e.runs.remove_done(run);
}
