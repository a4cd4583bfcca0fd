//! While a run is still being built, the scheduler consumes the slots its lanes finish in
//! batches instead of one pass at a time (`Sched::pass`): a scoped stream whose lanes lag
//! behind the submitter shows reclaim batches larger than any one pass could drain, and
//! everything is still reclaimed by the end of the run. The lag is enforced (each task waits
//! for the submitter to be LAG tasks ahead), not presumed from the two threads' speeds.

use dagrt::orchestrator::SubmitKind;
use dagrt::task::{CallConfig, DataType, Dep, DepKind, Tag, TaskArgs, TaskView};
use dagrt::worker::WorkerConfig;
use serde_json::Value;
use std::ffi::c_void;

mod common;
use common::gated::{in_run, rec, submit, submit_after, wait_run, Gate, Rec};
use common::{sub_worker, tensor};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How far the submitter is ahead of the lanes: task i does not finish before task
/// i + LAG has been submitted, so every slot finishes after its scope ended (LAG spans two
/// scopes) and the lanes, not the scope's end, consume it, whatever the host's speed.
const LAG: usize = 512;
/// Tasks submitted so far, and the address of task 0's buffer (task i's is 64 bytes on).
static SUBMITTED: AtomicUsize = AtomicUsize::new(0);
static BASE: AtomicUsize = AtomicUsize::new(0);

/// Wait for the submitter to be LAG tasks ahead (or done), busy a few microseconds, then mark
/// the task's buffer.
unsafe extern "C" fn work(t: *const TaskView, _u: *mut c_void) -> i32 {
    // SAFETY: the runtime passes a valid view whose one tensor points at a live u64.
    let p = unsafe { (*(*t).tensors).data as *mut u64 };
    let i = (p as usize - BASE.load(Ordering::Acquire)) / 64;
    while SUBMITTED.load(Ordering::Acquire) < i + LAG {
        std::hint::spin_loop();
    }
    let until = Instant::now() + Duration::from_micros(3);
    while Instant::now() < until {
        std::hint::spin_loop();
    }
    // SAFETY: as above; each task has its own buffer.
    unsafe { *p += 1 };
    0
}

#[test]
fn lanes_consume_a_scoped_stream_in_batches() {
    const TASKS: usize = 20_000;
    const SCOPE: usize = 256;
    // More completions than one pass can drain: every lane's mailbox, full (at the depth of
    // these short jobs, not tiny ones).
    let one_pass = 2 * dagrt::scheduler::SHORT_JOB_DEPTH;
    // Alone under plain `cargo test` too, as the gated tests are (`in_run`).
    let _one = common::serial();
    let path = std::env::temp_dir().join(format!("dagrt-reclaim-{}.json", std::process::id()));
    let cfg = WorkerConfig {
        heap_ring_size: 1 << 20,
        task_window: 4096,
        timeout_ms: 10_000,
    };
    let (w, c) = sub_worker(cfg, 2, "reclaim.work", work);
    let e = w.engine().unwrap().clone();
    // One cache line per task's buffer, as in the W1 workload.
    let mut bufs = vec![0u64; TASKS * 8];
    BASE.store(bufs.as_ptr() as usize, Ordering::Release);
    e.trace.start(path.clone()).unwrap();
    let run = {
        let mut o = w.orchestrator().unwrap().lock().unwrap();
        let run = o.begin_run().unwrap();
        for i in 0..TASKS {
            if i % SCOPE == 0 {
                if i > 0 {
                    o.scope_end().unwrap();
                }
                o.scope_begin().unwrap();
            }
            let mut t = tensor(
                &mut bufs[i * 8] as *mut u64 as u64,
                0,
                DataType::U64,
                &[1],
                &[],
            );
            t.tag = Tag::Output as u32;
            let a = TaskArgs::of_tensors(std::slice::from_mut(&mut t));
            o.submit(SubmitKind::Sub, &c, &[a], &CallConfig::default(), &[])
                .unwrap();
            SUBMITTED.store(i + 1, Ordering::Release);
        }
        // The last LAG tasks need not wait for submits that never come.
        SUBMITTED.store(TASKS + LAG, Ordering::Release);
        o.scope_end().unwrap();
        o.close_run_submission(run).unwrap();
        run
    };
    assert!(e.runs.get(run).unwrap().wait(Some(Duration::from_secs(60))));
    e.trace.stop().unwrap();
    e.runs.remove_done(run);
    assert_eq!(e.slots.live(), 0, "slots left after the run");
    assert!(
        e.tensormap.is_empty(),
        "TensorMap entries left after the run"
    );
    assert!(
        bufs.iter().step_by(8).all(|&x| x == 1),
        "every task ran once"
    );

    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).expect("valid JSON");
    let _ = std::fs::remove_file(&path);
    let batches: Vec<u64> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["cat"] == "scheduler" && x["name"] == "reclaim")
        .map(|x| x["args"]["count"].as_u64().unwrap())
        .collect();
    let reclaimed: u64 = batches.iter().sum();
    let largest = batches.iter().copied().max().unwrap_or(0);
    assert!(
        reclaimed <= TASKS as u64,
        "{reclaimed} slots reclaimed by the scheduler, more than the {TASKS} tasks"
    );
    assert!(
        reclaimed >= TASKS as u64 / 2,
        "the lanes lag behind the submitter and should consume most slots; the scheduler \
         reclaimed only {reclaimed} of {TASKS}"
    );
    assert!(
        largest > one_pass as u64,
        "no reclaim batch larger than one pass can drain ({one_pass}): largest {largest} \
         in {} batches of {reclaimed} slots",
        batches.len()
    );
    drop(w);
}

/// A pass that placed work holds the slots it consumed for a batch; with nothing else happening
/// (the job it placed runs on, no submit, no completion) the hold must still end: the scheduler
/// thread is woken when a hold begins and its next pass, placing nothing, consumes them
/// (HOLD_MAX bounds a hold through passes that keep placing). Here A's completion releases B,
/// which waits on A without retaining it, and places it; B then runs until the test opens its
/// gate, and A's slot must come back meanwhile. (Fails in 5 s if the scheduler thread ignores
/// the hold.)
#[test]
fn a_held_slot_is_reclaimed_while_the_job_placed_with_it_runs() {
    in_run(|o, c| {
        let e = o.engine().clone();
        let gate_a = Gate::new();
        let a = rec(Some(gate_a.0), Duration::ZERO);
        o.scope_begin().unwrap();
        let ha = submit(o, c, a);
        wait_run("A", a);
        // A's scope reference goes now: its completion is the last thing it waits for.
        o.scope_end().unwrap();
        let gate_b = Gate::new();
        let b = rec(Some(gate_b.0), Duration::ZERO);
        let wait_a = Dep {
            handle: ha,
            kind: DepKind::Wait as u32,
            reserved: 0,
        };
        submit_after(o, c, b, &[wait_a]);
        assert_eq!(e.slots.live(), 2, "A and B in flight");
        drop(gate_a);
        wait_run("B", b);
        let t0 = Instant::now();
        while e.slots.live() > 1 {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "A's slot not reclaimed in 5 s while B runs"
            );
            std::thread::yield_now();
        }
        drop(gate_b);
    });
}

/// A hold must not outlast a long backlog: A's completion lands in a pass that places work from
/// a backlog of queued jobs, so more passes are due for as long as the backlog lasts, and A's
/// slot must come back before half of what was left of it at A's release has run. (The backlog
/// sits in the outer scope, so A is the only slot to reclaim and the batch never fills.) Here
/// a lane's pass that finds no mailbox room ends the hold within microseconds; were every pass
/// to hold, HOLD_MAX is the bound: with the hold condition forced true, this test passes
/// through the scheduler thread's deadline (1-8 ms after A); with that branch removed too it
/// fails (and the worker's teardown then waits for the held slot: nextest's timeout ends it).
#[test]
fn a_hold_ends_while_passes_keep_placing() {
    const BACKLOG: usize = 10_000;
    let ran = |b: &[&Rec]| {
        b.iter()
            .filter(|r| r.lane.load(Ordering::Acquire) != 0)
            .count()
    };
    in_run(|o, c| {
        let e = o.engine().clone();
        let gate_a = Gate::new();
        let a = rec(Some(gate_a.0), Duration::ZERO);
        o.scope_begin().unwrap();
        submit(o, c, a);
        wait_run("A", a);
        o.scope_end().unwrap();
        // 20 us each: about 0.1 s of work for the two lanes, queued far past their mailboxes.
        // They wait at one gate, opened with A's, so the whole backlog is still queued then
        // whatever the host's speed (the other lane starts one and waits in it).
        let go = Gate::new();
        let backlog: Vec<&Rec> = (0..BACKLOG)
            .map(|_| rec(Some(go.0), Duration::from_micros(20)))
            .collect();
        for r in &backlog {
            submit(o, c, r);
        }
        let live = e.slots.live();
        assert_eq!(live, 1 + BACKLOG as i64, "A and the backlog in flight");
        let before = ran(&backlog);
        assert!(
            before <= 1,
            "{before} of {BACKLOG} backlog jobs started while it was submitted, though one \
             lane is held by A and the other by the backlog's gate"
        );
        drop(go);
        drop(gate_a);
        let t0 = Instant::now();
        while e.slots.live() == live {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "A's slot not reclaimed in 10 s"
            );
            std::thread::sleep(Duration::from_micros(50));
        }
        let after = ran(&backlog);
        assert!(
            after - before < (BACKLOG - before) / 2,
            "A's slot was held while {} of the {} backlog jobs left at its release ran ({:?})",
            after - before,
            BACKLOG - before,
            t0.elapsed()
        );
    });
}
