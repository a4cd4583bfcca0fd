//! A fan-out's producer (consumer after consumer retaining one COMPLETED task) gets spare
//! references charged in advance, which the submitting thread hands out without taking the
//! producer's lock (`Orchestrator::credit`). The spares must never keep the producer a moment
//! longer than the seed's references would: only a producer its scope still holds gets them,
//! and they go back when a scope ends.

use dagrt::callable::Callable;
use dagrt::orchestrator::{Orchestrator, SubmitKind};
use dagrt::task::{CallConfig, DataType, Tag, TaskArgs, TaskView, Tensor};
use dagrt::worker::{Engine, Worker, WorkerConfig};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

mod common;
use common::{serial, sub_worker, tensor};

/// Held until the test opens it (or drops the guard).
static GATE: AtomicBool = AtomicBool::new(true);

/// A task that waits for GATE when its first tensor is a 1-byte U8 view, else does nothing.
unsafe extern "C" fn body(t: *const TaskView, _u: *mut c_void) -> i32 {
    // SAFETY: the runtime passes a valid view with at least one tensor.
    let gated = unsafe { (*(*t).tensors).dtype == DataType::U8 as u32 };
    while gated && !GATE.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
    0
}

struct Open;
impl Drop for Open {
    fn drop(&mut self) {
        GATE.store(true, Ordering::Release);
    }
}

fn t(p: *const u64, tag: Tag) -> Tensor {
    let mut x = tensor(p as u64, 0, DataType::U64, &[8], &[]);
    x.tag = tag as u32;
    x
}

fn sub(o: &mut Orchestrator, c: &Callable, ts: &mut [Tensor]) {
    let a = TaskArgs::of_tensors(ts);
    o.submit(SubmitKind::Sub, c, &[a], &CallConfig::default(), &[])
        .unwrap();
}

fn poll(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(5), "{what} within 5 s");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn completed(e: &Arc<Engine>, run: u64) -> u64 {
    e.runs.get(run).unwrap().counts().completed
}

/// One test's worker (2 SUB lanes, one callable), with `n` 64-byte buffers, run alone.
struct Fixture {
    _one: std::sync::MutexGuard<'static, ()>,
    w: Worker,
    c: Callable,
    e: Arc<Engine>,
    bufs: Vec<u64>,
}

impl Fixture {
    fn new(n: usize) -> Fixture {
        let _one = serial();
        let cfg = WorkerConfig {
            timeout_ms: 5_000,
            ..WorkerConfig::default()
        };
        let (w, c) = sub_worker(cfg, 2, "credit.body", body);
        let e = w.engine().unwrap().clone();
        Fixture {
            _one,
            w,
            c,
            e,
            bufs: vec![0u64; 8 * n],
        }
    }

    /// Buffer `i`.
    fn p(&self, i: usize) -> *const u64 {
        self.bufs[8 * i..].as_ptr()
    }

    /// Open a run and a nested scope, and submit the producer (OUTPUT buffer 0); returns once
    /// it has completed.
    fn begin_with_producer(&self, o: &mut Orchestrator) -> u64 {
        let run = o.begin_run().unwrap();
        o.scope_begin().unwrap();
        sub(o, &self.c, &mut [t(self.p(0), Tag::Output)]);
        poll("the producer completing", || completed(&self.e, run) == 1);
        run
    }

    /// Close the run's submission and wait for it to end.
    fn close_and_wait(&self, mut o: MutexGuard<'_, Orchestrator>, run: u64) {
        o.close_run_submission(run).unwrap();
        drop(o);
        assert!(self
            .e
            .runs
            .get(run)
            .unwrap()
            .wait(Some(Duration::from_secs(10))));
    }
}

/// Producer and consumers in one nested scope: once the scope ends and they finish, all of
/// them are reclaimed while the run stays open, the producer included (its spare references
/// went back at the scope end).
#[test]
fn a_scope_end_gives_the_spare_references_back() {
    let f = Fixture::new(17);
    let (c, e) = (&f.c, &f.e);
    let mut o = f.w.orchestrator().unwrap().lock().unwrap();
    let run = f.begin_with_producer(&mut o);
    for i in 1..=16 {
        sub(
            &mut o,
            c,
            &mut [t(f.p(0), Tag::Input), t(f.p(i), Tag::Output)],
        );
    }
    o.scope_end().unwrap();
    poll("the scope's 17 tasks completing", || {
        completed(e, run) == 17
    });
    poll("every slot of the ended scope reclaimed", || {
        e.slots.live() == 0
    });
    f.close_and_wait(o, run);
}

/// A producer whose scope has ended gets no credit: kept alive by a retaining consumer, then
/// retained by two more, it is reclaimed as soon as they finish, while the run is open and no
/// scope ends (a credit would have held it until the next scope end).
#[test]
fn a_producer_past_its_scope_gets_no_spare_references() {
    let f = Fixture::new(4);
    let (c, e) = (&f.c, &f.e);
    let gate = [0u8; 64];
    let mut o = f.w.orchestrator().unwrap().lock().unwrap();
    let run = f.begin_with_producer(&mut o);
    // A gated consumer keeps it alive past its scope.
    GATE.store(false, Ordering::Release);
    let open = Open;
    let mut g = tensor(gate.as_ptr() as u64, 0, DataType::U8, &[1], &[]);
    g.tag = Tag::Output as u32;
    sub(&mut o, c, &mut [g, t(f.p(0), Tag::Input)]);
    o.scope_end().unwrap();
    // Two retaining consumers in the outer scope: the second finds the same COMPLETED
    // producer again, which is where a credit would be charged.
    for i in 1..=2 {
        sub(
            &mut o,
            c,
            &mut [t(f.p(0), Tag::Input), t(f.p(i), Tag::Output)],
        );
    }
    assert_eq!(e.slots.live(), 4);
    drop(open);
    poll("the consumers completing", || completed(e, run) == 4);
    // The outer scope holds the two consumers; the producer and the gated one are gone.
    poll("the producer reclaimed", || e.slots.live() == 2);
    f.close_and_wait(o, run);
    e.runs.remove_done(run);
    assert_eq!(e.slots.live(), 0);
}
