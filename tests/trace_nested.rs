//! A submit that finds the scheduler thread and a lane asleep runs the scheduler's pass on the
//! submitting thread. Its trace slices go on a track of their own; here the submitting thread
//! is a lane of another worker (a task building runs on an inner worker, DESIGN §4's nested
//! workers), and the inner worker's trace must not credit those passes to a lane of its own
//! (it once showed "scheduler passes on lane 2", a lane it does not have).

use dagrt::callable::{register, CallableKind};
use dagrt::orchestrator::SubmitKind;
use dagrt::task::{CallConfig, TaskArgs, TaskView};
use dagrt::worker::{Worker, WorkerConfig};
use serde_json::Value;
use std::ffi::c_void;
use std::time::Duration;

unsafe extern "C" fn nop(_t: *const TaskView, _u: *mut c_void) -> i32 {
    0
}

/// The outer task: builds runs on the inner worker (`u` is `&Worker`), one task at a time
/// with pauses, so the inner scheduler thread and its lane park between submits.
unsafe extern "C" fn drive_inner(_t: *const TaskView, u: *mut c_void) -> i32 {
    // SAFETY: the test passes a Worker that outlives the outer run.
    let inner = unsafe { &*(u as *const Worker) };
    let e = inner.engine().unwrap().clone();
    let c = register(
        "hostpass.nop",
        0,
        CallableKind::Task as u32,
        nop,
        std::ptr::null_mut(),
    )
    .unwrap();
    let mut o = inner.orchestrator().unwrap().lock().unwrap();
    let run = o.begin_run().unwrap();
    for _ in 0..10 {
        // Longer than every spin budget and the lane's longest nap: both are asleep.
        std::thread::sleep(Duration::from_millis(30));
        let a = TaskArgs::of_tensors(&mut []);
        o.submit(SubmitKind::Sub, &c, &[a], &CallConfig::default(), &[])
            .unwrap();
    }
    o.close_run_submission(run).unwrap();
    drop(o);
    assert!(e.runs.get(run).unwrap().wait(Some(Duration::from_secs(30))));
    0
}

#[test]
fn inner_worker_trace_names_only_its_own_threads() {
    let path = std::env::temp_dir().join(format!("dagrt-hostpass-{}.json", std::process::id()));
    // Inner worker: one SUB lane, traced.
    let mut inner = Worker::new(WorkerConfig::default()).unwrap();
    inner.add_sub_lanes(1).unwrap();
    inner.init().unwrap();
    inner.engine().unwrap().trace.start(path.clone()).unwrap();
    // Outer worker: NEXT_LEVEL lanes 0, 1, 2; the driving task runs on lane index 2.
    let mut outer = Worker::new(WorkerConfig::default()).unwrap();
    for id in 0..3 {
        outer.add_next_level_lane(id).unwrap();
    }
    outer.init().unwrap();
    let drive = register(
        "hostpass.drive",
        0,
        CallableKind::Task as u32,
        drive_inner,
        &inner as *const Worker as *mut c_void,
    )
    .unwrap();
    let oe = outer.engine().unwrap().clone();
    let run = {
        let mut o = outer.orchestrator().unwrap().lock().unwrap();
        let run = o.begin_run().unwrap();
        let a = TaskArgs::of_tensors(&mut []);
        o.submit(
            SubmitKind::NextLevel,
            &drive,
            &[a],
            &CallConfig::default(),
            &[2],
        )
        .unwrap();
        o.close_run_submission(run).unwrap();
        run
    };
    assert!(oe
        .runs
        .get(run)
        .unwrap()
        .wait(Some(Duration::from_secs(60))));
    assert!(oe.runs.get(run).unwrap().result().is_ok());
    drop(outer);
    inner.engine().unwrap().trace.stop().unwrap();
    drop(inner);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let names: Vec<String> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["name"] == "thread_name")
        .map(|x| x["args"]["name"].as_str().unwrap().to_string())
        .collect();
    eprintln!("inner worker's tracks: {names:?}");
    for n in &names {
        if let Some(who) = n.strip_prefix("scheduler passes on ") {
            assert!(
                who == "lane 0: SUB 0" || who == "the submitting thread",
                "the inner worker (one lane, 'lane 0: SUB 0') shows passes of a thread it does \
                 not have: {names:?}"
            );
        }
    }
    assert!(
        names
            .iter()
            .any(|n| n == "scheduler passes on the submitting thread"),
        "no pass ran on the submitting thread: {names:?}"
    );
    let _ = std::fs::remove_file(&path);
}
