//! The orchestrator hands ready tasks to the scheduler through a queue whose consumers see a
//! push only once its doorbell rings (every few pushes, or when rung; `spsc::Inbox`). A host
//! that submits a few tasks and then waits on their effects without calling dagrt again must
//! still see them run, whether the scheduler thread is spinning or parked at the time.

use dagrt::orchestrator::SubmitKind;
use dagrt::task::{CallConfig, DataType, Tag, TaskArgs, TaskView};
use dagrt::worker::WorkerConfig;
use std::ffi::c_void;

mod common;
use common::{sub_worker, tensor};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

unsafe extern "C" fn set(t: *const TaskView, _u: *mut c_void) -> i32 {
    // SAFETY: the runtime passes a valid view whose one tensor points at a live AtomicU64.
    unsafe {
        let p = (*(*t).tensors).data as *const AtomicU64;
        (*p).fetch_add(1, Ordering::Release);
    }
    0
}

#[test]
fn tasks_submitted_last_run_without_another_call() {
    let (w, c) = sub_worker(WorkerConfig::default(), 2, "doorbell.set", set);
    let e = w.engine().unwrap().clone();
    let flags: Vec<AtomicU64> = (0..40 * 40 * 8).map(|_| AtomicU64::new(0)).collect();
    let mut o = w.orchestrator().unwrap().lock().unwrap();
    let run = o.begin_run().unwrap();
    let mut next = 0;
    // Batches of 1 to 40 tasks (fewer and more than a doorbell's worth); before some, the
    // host sleeps long enough for the scheduler thread to park.
    for round in 0..40 {
        if round % 3 == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let batch = 1 + (round * 7) % 40;
        let first = next;
        for _ in 0..batch {
            let mut t = tensor(
                &flags[next * 8] as *const AtomicU64 as u64,
                0,
                DataType::U64,
                &[1],
                &[],
            );
            t.tag = Tag::Output as u32;
            next += 1;
            let a = TaskArgs::of_tensors(std::slice::from_mut(&mut t));
            o.submit(SubmitKind::Sub, &c, &[a], &CallConfig::default(), &[])
                .unwrap();
        }
        // No dagrt call until every task of the batch has run.
        let t0 = Instant::now();
        while (first..next).any(|i| flags[i * 8].load(Ordering::Acquire) == 0) {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "round {round}: {} of {batch} tasks still not run after 10 s",
                (first..next)
                    .filter(|&i| flags[i * 8].load(Ordering::Acquire) == 0)
                    .count()
            );
            std::hint::spin_loop();
        }
    }
    o.close_run_submission(run).unwrap();
    drop(o);
    assert!(e.runs.get(run).unwrap().wait(Some(Duration::from_secs(30))));
    assert!((0..next).all(|i| flags[i * 8].load(Ordering::Acquire) == 1));
}
