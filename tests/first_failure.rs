//! The first failure is the first in time, even when a pass drains the later failure's
//! completion first: a group stores its earliest member failure (the Scheduler seed: "the
//! first member failure determines the stored failure") and a run reports its earliest task
//! failure. A pass drains the lanes' completion rings in lane order, so each test makes the
//! task on the second lane fail first and the one on the first lane fail second while it
//! holds the scheduler role, then lets one pass take both.

use dagrt::orchestrator::SubmitKind;
use dagrt::task::{CallConfig, TaskArgs, TaskView};
use dagrt::worker::{Worker, WorkerConfig};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// What the two tasks of one test do; index 0 runs on lane 0 (worker 10), 1 on lane 1 (20).
struct Script {
    started: [AtomicBool; 2],
    go: [AtomicBool; 2],
    ran: AtomicU32,
}

impl Script {
    const fn new() -> Script {
        Script {
            started: [AtomicBool::new(false), AtomicBool::new(false)],
            go: [AtomicBool::new(false), AtomicBool::new(false)],
            ran: AtomicU32::new(0),
        }
    }
}

/// The task on worker 10 fails with code 10, the one on worker 20 with code 11, each once
/// the test lets it.
unsafe extern "C" fn task(t: *const TaskView, u: *mut c_void) -> i32 {
    // SAFETY: `u` is the test's static Script; the view is valid during the call.
    let (s, worker) = unsafe { (&*(u as *const Script), (*t).worker_id) };
    let i = usize::from(worker == 20);
    s.started[i].store(true, Ordering::Release);
    while !s.go[i].load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    s.ran.fetch_add(1, Ordering::Relaxed);
    10 + i as i32
}

fn wait_until(what: &str, f: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(10), "timed out: {what}");
        std::thread::yield_now();
    }
}

/// Submit with `submit`, let the task on lane 1 fail before the one on lane 0 while holding
/// the scheduler role, and return the run's message.
fn second_lane_fails_first(
    s: &'static Script,
    name: &str,
    submit: impl FnOnce(&mut dagrt::orchestrator::Orchestrator, &dagrt::callable::Callable),
) -> String {
    let mut w = Worker::new(WorkerConfig::default()).unwrap();
    w.add_next_level_lane(10).unwrap();
    w.add_next_level_lane(20).unwrap();
    w.init().unwrap();
    let c = dagrt::callable::register(
        name,
        7,
        dagrt::callable::CallableKind::Task as u32,
        task,
        s as *const Script as *mut c_void,
    )
    .unwrap();
    let e = w.engine().unwrap().clone();
    let run = {
        let mut o = w.orchestrator().unwrap().lock().unwrap();
        let run = o.begin_run().unwrap();
        submit(&mut o, &c);
        o.close_run_submission(run).unwrap();
        run
    };
    wait_until("both tasks start", || {
        s.started.iter().all(|x| x.load(Ordering::Acquire))
    });
    {
        // Hold the scheduler role: no pass runs until both completions are queued.
        let role = e.sched.lock().unwrap();
        s.go[1].store(true, Ordering::Release);
        wait_until("lane 1's completion", || !e.lanes[1].done.is_empty());
        s.go[0].store(true, Ordering::Release);
        wait_until("lane 0's completion", || !e.lanes[0].done.is_empty());
        drop(role);
    }
    // The lanes' own attempts at a pass failed while the role was held; they woke the
    // scheduler thread, whose pass takes both.
    let r = e.runs.get(run).unwrap();
    assert!(r.wait(Some(Duration::from_secs(10))));
    assert_eq!(s.ran.load(Ordering::Relaxed), 2);
    let (msg, _) = r.result().expect_err("the run failed");
    e.runs.remove_done(run);
    msg.to_string()
}

#[test]
fn a_group_stores_its_earliest_member_failure() {
    static S: Script = Script::new();
    let msg = second_lane_fails_first(&S, "first_failure.group", |o, c| {
        let args = [TaskArgs::of_tensors(&mut []), TaskArgs::of_tensors(&mut [])];
        o.submit(
            SubmitKind::NextLevelGroup,
            c,
            &args,
            &CallConfig::default(),
            &[10, 20],
        )
        .unwrap();
    });
    assert!(
        msg.contains("code 11"),
        "the member on lane 1 failed first (code 11), lane 0's second (code 10); the run \
         reports: {msg}"
    );
}

#[test]
fn a_run_reports_its_earliest_task_failure() {
    static S: Script = Script::new();
    let msg = second_lane_fails_first(&S, "first_failure.single", |o, c| {
        for target in [10, 20] {
            let args = [TaskArgs::of_tensors(&mut [])];
            o.submit(
                SubmitKind::NextLevel,
                c,
                &args,
                &CallConfig::default(),
                &[target],
            )
            .unwrap();
        }
    });
    assert!(
        msg.contains("code 11"),
        "the task on lane 1 failed first (code 11), lane 0's second (code 10); the run \
         reports: {msg}"
    );
}
