//! Back-pressure fails only after `timeout_ms` without progress (Orchestrator seed: "if
//! timeout_ms elapses with no progress, it throws"). A submit that first waits for a slot and
//! then for heap space gets a full window for the heap wait: the slot that came free was
//! progress. (It once got only what the slot wait had left, and failed while the ring was
//! about to be reclaimed.)

use dagrt::orchestrator::SubmitKind;
use dagrt::task::{CallConfig, DataType, Tag, TaskArgs, TaskView, Tensor};
use dagrt::worker::WorkerConfig;
use std::ffi::c_void;
use std::time::{Duration, Instant};

mod common;

/// Sleeps for its one scalar, in ms.
unsafe extern "C" fn sleeper(t: *const TaskView, _u: *mut c_void) -> i32 {
    // SAFETY: the runtime passes a valid view; each task here has one scalar.
    let ms = unsafe { *(*t).scalars };
    std::thread::sleep(Duration::from_millis(ms));
    0
}

#[test]
fn a_slot_freed_restarts_the_heap_wait() {
    const TIMEOUT_MS: u64 = 2000;
    let cfg = WorkerConfig {
        heap_ring_size: 64 * 1024,
        task_window: 2,
        timeout_ms: TIMEOUT_MS as u32,
    };
    let (w, c) = common::sub_worker(cfg, 2, "backpressure_progress.sleeper", sleeper);
    let e = w.engine().unwrap().clone();
    let mut o = w.orchestrator().unwrap().lock().unwrap();
    let run = o.begin_run().unwrap();
    let cc = CallConfig::default();
    let sub = |o: &mut dagrt::orchestrator::Orchestrator, ts: &mut [Tensor], ms: &[u64; 1]| {
        let mut a = TaskArgs::of_tensors(ts);
        a.scalars = ms.as_ptr();
        a.num_scalars = 1;
        o.submit(SubmitKind::Sub, &c, &[a], &cc, &[])
    };
    let auto = |bytes: u64| {
        Tensor::strided(
            std::ptr::null_mut(),
            0,
            DataType::U8,
            &[bytes],
            &[],
            Tag::Output as u32,
        )
    };
    // A nested scope (heap ring 1): A takes the whole ring for 2.5 s, B a slot for 1.5 s,
    // which fills the window of 2.
    o.scope_begin().unwrap();
    sub(&mut o, &mut [auto(64 * 1024)], &[2500]).unwrap();
    sub(&mut o, &mut [], &[1500]).unwrap();
    o.scope_end().unwrap();
    // Ring 1 again: S waits about 1.5 s for B's slot, then about 1 s for A's bytes. Neither
    // wait reaches the 2 s without progress.
    o.scope_begin().unwrap();
    let t0 = Instant::now();
    let r = sub(&mut o, &mut [auto(1024)], &[0]);
    let took = t0.elapsed();
    o.scope_end().unwrap();
    o.close_run_submission(run).unwrap();
    drop(o);
    assert!(e.runs.get(run).unwrap().wait(Some(Duration::from_secs(30))));
    if let Err(x) = r {
        panic!(
            "the submit failed after {took:?} ({:?}: {}), though a slot came free at about \
             1.5 s and the ring at about 2.5 s, each within {TIMEOUT_MS} ms",
            x.status, x.msg
        );
    }
    // It did wait for both: the slot, then the ring.
    assert!(
        took >= Duration::from_millis(2300),
        "no wait for the ring: {took:?}"
    );
}
