//! Gated tasks for the scheduling tests (`sub_placement*.rs`, `reclaim_batch.rs`): a task
//! records the lane that ran it and may then wait on a gate the test opens, so a test can
//! hold a lane busy for as long as it likes and see where each task ran.

use super::{sub_worker, tensor};
use dagrt::callable::Callable;
use dagrt::orchestrator::{Orchestrator, SubmitKind};
use dagrt::task::{CallConfig, DataType, Dep, Tag, TaskArgs, TaskHandle, TaskView};
use dagrt::worker::WorkerConfig;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// What one task records: the lane that ran it (its view id, 0 until run), and the gate it
/// waits on (if any) once it has recorded that.
#[repr(align(64))]
pub struct Rec {
    pub lane: AtomicI32,
    gate: Option<&'static AtomicBool>,
    busy: Duration,
}

/// The task body: record the lane, wait for the gate, stay busy for `busy`.
pub unsafe extern "C" fn record(t: *const TaskView, _u: *mut c_void) -> i32 {
    // SAFETY: the runtime passes a valid view whose one tensor points at a live Rec.
    let (r, lane) = unsafe { (&*((*(*t).tensors).data as *const Rec), (*t).worker_id) };
    r.lane.store(lane, Ordering::Release);
    if let Some(g) = r.gate {
        // No deadline that matters: a test's Gate opens when it is dropped, also on a panic.
        let _ = super::wait_for("the gate", Duration::from_secs(3600), || {
            g.load(Ordering::Acquire)
        });
    }
    // No clock reads for a job with no busy time: it is to look tiny (PACK_JOB_NS) to the
    // scheduler, also in a debug build on a slow host.
    if !r.busy.is_zero() {
        let t0 = Instant::now();
        while t0.elapsed() < r.busy {
            std::hint::spin_loop();
        }
    }
    0
}

/// Opens its gate when dropped: a failing assertion must not leave a lane spinning in a
/// blocked task (the worker's teardown would wait for it forever).
pub struct Gate(pub &'static AtomicBool);

impl Gate {
    pub fn new() -> Gate {
        Gate(Box::leak(Box::new(AtomicBool::new(false))))
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

pub fn rec(gate: Option<&'static AtomicBool>, busy: Duration) -> &'static Rec {
    Box::leak(Box::new(Rec {
        lane: AtomicI32::new(0),
        gate,
        busy,
    }))
}

pub fn submit(o: &mut Orchestrator, c: &Callable, r: &'static Rec) -> TaskHandle {
    submit_after(o, c, r, &[])
}

/// `submit`, with explicit dependencies besides the task's one OUTPUT.
pub fn submit_after(
    o: &mut Orchestrator,
    c: &Callable,
    r: &'static Rec,
    deps: &[Dep],
) -> TaskHandle {
    let mut t = tensor(r as *const Rec as u64, 0, DataType::U8, &[64], &[]);
    t.tag = Tag::Output as u32;
    let mut a = TaskArgs::of_tensors(std::slice::from_mut(&mut t));
    a.deps = deps.as_ptr();
    a.num_deps = deps.len() as u32;
    o.submit(SubmitKind::Sub, c, &[a], &CallConfig::default(), &[])
        .unwrap()
}

/// A SUB group with one member per Rec (each member's one OUTPUT on its Rec).
pub fn submit_group(o: &mut Orchestrator, c: &Callable, members: &[&'static Rec]) -> TaskHandle {
    let mut ts: Vec<_> = members
        .iter()
        .map(|&r| {
            let mut t = tensor(r as *const Rec as u64, 0, DataType::U8, &[64], &[]);
            t.tag = Tag::Output as u32;
            t
        })
        .collect();
    let args: Vec<TaskArgs> = ts
        .iter_mut()
        .map(|t| TaskArgs::of_tensors(std::slice::from_mut(t)))
        .collect();
    o.submit(SubmitKind::SubGroup, c, &args, &CallConfig::default(), &[])
        .unwrap()
}

pub fn wait_run(what: &str, r: &Rec) -> i32 {
    let mut lane = 0;
    super::wait_for(&format!("{what} to run"), Duration::from_secs(10), || {
        lane = r.lane.load(Ordering::Acquire);
        lane != 0
    })
    .unwrap_or_else(|m| panic!("{m}"));
    lane
}

/// A run on a fresh 2-SUB-lane worker: `body` submits into it; then the run is closed and
/// waited for. (A gate `body` holds opens as it returns or unwinds, before the teardown.)
pub fn in_run(body: impl FnOnce(&mut Orchestrator, &Callable)) {
    // One at a time under `cargo test` too (nextest runs these binaries alone): another
    // test's lanes on the same cores would make these jobs look long.
    let _one = super::serial();
    let (w, c) = sub_worker(WorkerConfig::default(), 2, "gated.record", record);
    let e = w.engine().unwrap().clone();
    let mut o = w.orchestrator().unwrap().lock().unwrap();
    let run = o.begin_run().unwrap();
    body(&mut o, &c);
    o.close_run_submission(run).unwrap();
    drop(o);
    assert!(e.runs.get(run).unwrap().wait(Some(Duration::from_secs(30))));
}

/// Tasks one at a time (each waited for), so the lanes' recent job lengths are `busy`.
pub fn warm(o: &mut Orchestrator, c: &Callable, n: usize, busy: Duration) {
    for i in 0..n {
        let r = rec(None, busy);
        submit(o, c, r);
        wait_run(&format!("warm-up task {i}"), r);
    }
}

/// A task that runs until the returned gate opens, started: its gate and its lane.
pub fn blocker(o: &mut Orchestrator, c: &Callable) -> (Gate, i32) {
    let gate = Gate::new();
    let r = rec(Some(gate.0), Duration::ZERO);
    submit(o, c, r);
    (gate, wait_run("the blocking task", r))
}

/// `queued` jobs submitted behind a tiny-job lane's stalled job all run on the idle lane with
/// nothing else happening (`park_first`: once the idle lane has parked), all of them `within`
/// of the last one's submission. An attempt counts only if at least `packed` of them were
/// queued behind the blocker (the engine's `sub_moves` count shows they were taken back); a
/// loaded machine can make the lanes' averages not tiny for a moment, and the jobs then
/// spread: tried again, up to 20 times.
pub fn stalled_tiny_job(park_first: bool, within: Duration, queued: usize, packed: u64) {
    in_run(|o, c| {
        for attempt in 1.. {
            warm(o, c, 200, Duration::ZERO);
            let (gate, held) = blocker(o, c);
            if park_first {
                // Well past the spin budget: the other lane and the scheduler thread park.
                std::thread::sleep(Duration::from_millis(20));
            }
            let moves = o.engine().sub_moves.load(Ordering::Relaxed);
            // Packed behind the blocker; then nothing else happens: the idle lane's looks
            // find the blocked lane silent and the jobs move to the idle lane.
            let queued: Vec<&Rec> = (0..queued).map(|_| rec(None, Duration::ZERO)).collect();
            for r in &queued {
                submit(o, c, r);
            }
            let t0 = Instant::now();
            for r in &queued {
                let ran = wait_run("a task queued behind the blocker", r);
                assert_ne!(ran, held, "ran behind the blocker");
            }
            let took = t0.elapsed();
            drop(gate);
            let moved = o.engine().sub_moves.load(Ordering::Relaxed) - moves;
            if moved < packed {
                // Under ThreadSanitizer (DAGRT_TSAN) no job is tiny: they spread every time.
                if attempt >= 20 && std::env::var_os("DAGRT_TSAN").is_some() {
                    eprintln!("DAGRT_TSAN: the jobs never queued behind the blocker; not asserted");
                    return;
                }
                assert!(
                    attempt < 20,
                    "20 attempts, and {packed} jobs never queued behind the blocker"
                );
                continue;
            }
            assert!(
                took < within,
                "the queued jobs took {took:?} to move to the idle lane"
            );
            return;
        }
    });
}
