//! The first failure is the first in time, whatever order a pass drains the completions in:
//! a group stores its earliest member failure (the Scheduler seed: "the first member failure
//! determines the stored failure") and a run reports its earliest task failure. A pass drains
//! the lanes' completion rings in lane order (0, 1, 2), so each test makes the tasks fail in
//! the order lane 1, lane 2, lane 0 while it holds the scheduler role, then lets one pass take
//! all three: keeping the first failure drained would report lane 0's, keeping the last
//! drained lane 2's; only the earliest in time is lane 1's.

mod common;

use common::wait_for;
use dagrt::orchestrator::SubmitKind;
use dagrt::task::{CallConfig, TaskArgs, TaskView};
use dagrt::worker::{Worker, WorkerConfig};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

const LANES: usize = 3;
/// The order in time in which the lanes' tasks fail.
const FAIL_ORDER: [usize; LANES] = [1, 2, 0];

/// What the tasks of one test do; the task on lane i runs on worker 10 * (i + 1).
struct Script {
    started: [AtomicBool; LANES],
    go: [AtomicBool; LANES],
    ran: AtomicU32,
}

impl Script {
    const fn new() -> Script {
        Script {
            started: [const { AtomicBool::new(false) }; LANES],
            go: [const { AtomicBool::new(false) }; LANES],
            ran: AtomicU32::new(0),
        }
    }
}

/// The worker id of lane `i`.
fn worker_of(i: usize) -> i32 {
    10 * (i as i32 + 1)
}

/// The task on lane i fails with code 10 + i, once the test lets it.
unsafe extern "C" fn task(t: *const TaskView, u: *mut c_void) -> i32 {
    // SAFETY: `u` is the test's static Script; the view is valid during the call.
    let (s, worker) = unsafe { (&*(u as *const Script), (*t).worker_id) };
    let i = (0..LANES)
        .find(|&i| worker_of(i) == worker)
        .expect("a test lane");
    s.started[i].store(true, Ordering::Release);
    while !s.go[i].load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    s.ran.fetch_add(1, Ordering::Relaxed);
    10 + i as i32
}

/// Lets every task of a Script go when dropped: a failed check must not leave a lane held,
/// which would hang the worker's teardown instead of reporting the failure.
struct GoOnDrop(&'static Script);

impl Drop for GoOnDrop {
    fn drop(&mut self) {
        for g in &self.0.go {
            g.store(true, Ordering::Release);
        }
    }
}

/// Submit with `submit`, let the tasks fail in FAIL_ORDER while holding the scheduler role,
/// and return the run's message.
fn fail_out_of_lane_order(
    s: &'static Script,
    name: &str,
    submit: impl FnOnce(&mut dagrt::orchestrator::Orchestrator, &dagrt::callable::Callable),
) -> String {
    let mut w = Worker::new(WorkerConfig::default()).unwrap();
    for i in 0..LANES {
        w.add_next_level_lane(worker_of(i)).unwrap();
    }
    w.init().unwrap();
    // Dropped before `w` (declared after it), also on a panic.
    let _go = GoOnDrop(s);
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
    wait_for("every task to start", Duration::from_secs(10), || {
        s.started.iter().all(|x| x.load(Ordering::Acquire))
    })
    .unwrap();
    {
        // Hold the scheduler role: no pass runs until every completion is queued.
        let role = e.sched.lock().unwrap();
        for i in FAIL_ORDER {
            s.go[i].store(true, Ordering::Release);
            let what = format!("lane {i}'s completion");
            wait_for(&what, Duration::from_secs(10), || {
                !e.lanes[i].done.is_empty()
            })
            .unwrap();
        }
        drop(role);
    }
    // The lanes' own attempts at a pass failed while the role was held; they woke the
    // scheduler thread, whose pass takes all three.
    let r = e.runs.get(run).unwrap();
    assert!(r.wait(Some(Duration::from_secs(10))));
    assert_eq!(s.ran.load(Ordering::Relaxed), LANES as u32);
    let (msg, _) = r.result().expect_err("the run failed");
    e.runs.remove_done(run);
    msg.to_string()
}

/// The run's message names the code of the task that failed first in time.
fn assert_earliest(msg: &str) {
    let first = FAIL_ORDER[0];
    assert!(
        msg.contains(&format!("code {}", 10 + first)),
        "the task on lane {first} failed first (code {}), then lanes {:?}; the run reports: \
         {msg}",
        10 + first,
        &FAIL_ORDER[1..]
    );
}

#[test]
fn a_group_stores_its_earliest_member_failure() {
    static S: Script = Script::new();
    let msg = fail_out_of_lane_order(&S, "first_failure.group", |o, c| {
        let args = [TaskArgs::of_tensors(&mut []); LANES];
        let targets: Vec<i32> = (0..LANES).map(worker_of).collect();
        o.submit(
            SubmitKind::NextLevelGroup,
            c,
            &args,
            &CallConfig::default(),
            &targets,
        )
        .unwrap();
    });
    assert_earliest(&msg);
}

#[test]
fn a_run_reports_its_earliest_task_failure() {
    static S: Script = Script::new();
    let msg = fail_out_of_lane_order(&S, "first_failure.single", |o, c| {
        for target in (0..LANES).map(worker_of) {
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
    assert_earliest(&msg);
}
