//! A runtime-owned buffer (an auto-allocated OUTPUT, or `alloc`) outlives every task that
//! names it and was submitted before its scope ended. A reader that follows an in-place
//! writer (INOUT) finds only that writer in the TensorMap, and the writer lets go of the
//! buffer's owner when it completes; the reader holds the owner itself (`HeapRings::owners_in`),
//! so the slab is not reclaimed, and handed to the next allocation, under the reader.

use dagrt::orchestrator::{Orchestrator, SubmitKind};
use dagrt::slot::{state_name, COMPLETED, CONSUMED, FREE};
use dagrt::task::{CallConfig, DataType, Tag, TaskArgs, TaskView, Tensor};
use dagrt::worker::WorkerConfig;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

mod common;
use common::{serial, sub_worker, tensor, wait_for};

static STARTED: AtomicBool = AtomicBool::new(false);
static GO: AtomicBool = AtomicBool::new(false);
static READ: AtomicBool = AtomicBool::new(false);

/// Scalar 0: 1 fills the buffer with scalar 1; 2 reads it and waits for GO; 3 waits for GO,
/// then fails; 4 reads it and records that it ran.
unsafe extern "C" fn exec(t: *const TaskView, _u: *mut c_void) -> i32 {
    // SAFETY: the runtime passes a valid view; each task here has one tensor of 1024 bytes
    // and two scalars.
    let (s, p) = unsafe { ((*t).scalars, (*(*t).tensors).data as *mut u8) };
    // SAFETY: as above.
    let (role, v) = unsafe { (*s, *s.add(1)) };
    match role {
        // SAFETY: the buffer has 1024 bytes.
        1 => unsafe { std::ptr::write_bytes(p, v as u8, 1024) },
        3 => {
            let _ = wait_for("GO", Duration::from_secs(30), || GO.load(Ordering::SeqCst));
            return 1;
        }
        4 => READ.store(true, Ordering::SeqCst),
        _ => {
            STARTED.store(true, Ordering::SeqCst);
            let _ = wait_for("GO", Duration::from_secs(30), || GO.load(Ordering::SeqCst));
        }
    }
    0
}

fn submit(
    o: &mut Orchestrator,
    c: &dagrt::callable::Callable,
    t: &mut Tensor,
    tag: Tag,
    role: u64,
) -> u64 {
    t.tag = tag as u32;
    let sc = [role, 7];
    let mut a = TaskArgs::of_tensors(std::slice::from_mut(t));
    a.scalars = sc.as_ptr();
    a.num_scalars = 2;
    o.submit(SubmitKind::Sub, c, &[a], &CallConfig::default(), &[])
        .unwrap()
        .slot
}

/// The state of `owner` while the reader (role 2) runs, once `writer` has completed and the
/// scope has ended, so that only the reader can still hold it; then the reader is let go.
fn owner_state_under_the_reader(e: &dagrt::worker::Engine, writer: u64, owner: u64) -> u8 {
    wait_for("the reader to start", Duration::from_secs(10), || {
        STARTED.load(Ordering::SeqCst)
    })
    .unwrap();
    wait_for("the writer to complete", Duration::from_secs(10), || {
        e.slots.get(writer).core.state() == COMPLETED
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let held = e.slots.get(owner).core.state();
    GO.store(true, Ordering::SeqCst);
    held
}

#[test]
fn a_reader_behind_an_in_place_writer_holds_the_buffer() {
    let _one = serial();
    for via_alloc in [false, true] {
        STARTED.store(false, Ordering::SeqCst);
        GO.store(false, Ordering::SeqCst);
        let cfg = WorkerConfig {
            heap_ring_size: 1024, // one slab a ring: the next allocation would reuse X's
            ..WorkerConfig::default()
        };
        let (w, c) = sub_worker(cfg, 2, "heap_lifetime.exec", exec);
        let e = w.engine().unwrap().clone();
        let mut o = w.orchestrator().unwrap().lock().unwrap();
        let run = o.begin_run().unwrap();
        o.scope_begin().unwrap();
        let mut x = tensor(0, 0, DataType::U8, &[1024], &[]);
        let owner = if via_alloc {
            let (p, h) = o.alloc(&[1024], DataType::U8 as u32).unwrap();
            x.data = p.cast();
            h.slot
        } else {
            submit(&mut o, &c, &mut x, Tag::Output, 1)
        };
        let writer = submit(&mut o, &c, &mut x.clone(), Tag::Inout, 1);
        submit(&mut o, &c, &mut x.clone(), Tag::Input, 2);
        o.scope_end().unwrap();
        let held = owner_state_under_the_reader(&e, writer, owner);
        o.close_run_submission(run).unwrap();
        drop(o);
        assert!(e.runs.get(run).unwrap().wait(Some(Duration::from_secs(30))));
        assert_eq!(
            state_name(held),
            "COMPLETED",
            "alloc {via_alloc}: the buffer's owner was reclaimed while a reader still ran"
        );
        let after = e.slots.get(owner).core.state();
        assert!(
            after == CONSUMED || after == FREE,
            "alloc {via_alloc}: the owner is {} after the run",
            state_name(after)
        );
    }
}

/// A read that runs on from one slab into the next (here from ring 0's last slab into ring
/// 1's first: the rings lie back to back) holds both slabs' owners, not only the first's.
#[test]
fn a_reader_spanning_two_slabs_holds_both() {
    let _one = serial();
    STARTED.store(false, Ordering::SeqCst);
    GO.store(false, Ordering::SeqCst);
    let cfg = WorkerConfig {
        heap_ring_size: 1024, // one slab a ring
        ..WorkerConfig::default()
    };
    let (w, c) = sub_worker(cfg, 2, "heap_lifetime.exec", exec);
    let e = w.engine().unwrap().clone();
    let mut o = w.orchestrator().unwrap().lock().unwrap();
    let run = o.begin_run().unwrap();
    let (a, _) = o.alloc(&[1024], DataType::U8 as u32).unwrap(); // ring 0
    o.scope_begin().unwrap();
    let (y, hy) = o.alloc(&[1024], DataType::U8 as u32).unwrap(); // ring 1
    assert_eq!(a as u64 + 1024, y as u64, "ring 1 starts where ring 0 ends");
    let mut ty = tensor(y as u64, 0, DataType::U8, &[1024], &[]);
    let writer = submit(&mut o, &c, &mut ty, Tag::Inout, 1);
    let mut span = tensor(a as u64, 0, DataType::U8, &[2048], &[]);
    submit(&mut o, &c, &mut span, Tag::Input, 2);
    o.scope_end().unwrap();
    let held = owner_state_under_the_reader(&e, writer, hy.slot);
    o.close_run_submission(run).unwrap();
    drop(o);
    assert!(e.runs.get(run).unwrap().wait(Some(Duration::from_secs(30))));
    assert_eq!(
        state_name(held),
        "COMPLETED",
        "the second slab's owner was reclaimed while a reader of its bytes still ran"
    );
}

/// The hold is a lifetime reference, not an edge: a reader of an auto-allocated buffer whose
/// bytes a later pure overwrite (OUTPUT_EXISTING) produced neither waits for the task that
/// allocated it nor is poisoned when that task fails.
#[test]
fn a_held_owner_is_not_waited_for() {
    let _one = serial();
    GO.store(false, Ordering::SeqCst);
    READ.store(false, Ordering::SeqCst);
    let cfg = WorkerConfig {
        heap_ring_size: 4096,
        ..WorkerConfig::default()
    };
    let (w, c) = sub_worker(cfg, 2, "heap_lifetime.exec", exec);
    let e = w.engine().unwrap().clone();
    let mut o = w.orchestrator().unwrap().lock().unwrap();
    let run = o.begin_run().unwrap();
    let mut x = tensor(0, 0, DataType::U8, &[1024], &[]);
    let owner = submit(&mut o, &c, &mut x, Tag::Output, 3); // fails once GO is set
    submit(&mut o, &c, &mut x.clone(), Tag::OutputExisting, 1);
    submit(&mut o, &c, &mut x.clone(), Tag::Input, 4);
    o.close_run_submission(run).unwrap();
    drop(o);
    let read = wait_for("the reader to run", Duration::from_secs(10), || {
        READ.load(Ordering::SeqCst)
    });
    let owner_state = e.slots.get(owner).core.state();
    GO.store(true, Ordering::SeqCst);
    let r = e.runs.get(run).unwrap();
    assert!(r.wait(Some(Duration::from_secs(30))));
    assert!(read.is_ok(), "the reader waited for the buffer's owner");
    assert_eq!(state_name(owner_state), "RUNNING");
    assert!(r.result().is_err(), "the owner's failure is the run's");
    assert_eq!(
        r.counts().completed,
        2,
        "the reader was poisoned by the owner"
    );
}
