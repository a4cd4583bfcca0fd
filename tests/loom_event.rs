//! Loom models of the wake-up protocol in `src/event.rs` (audit U5): the Dekker handshake on
//! `sleepers` between `notify_cond` and a waiter about to park, the futex word a waker bumps
//! before it wakes, and the scheduler role handoff built on them (`scheduler_main` and
//! `after_completion` in `src/scheduler/mod.rs`). A lost wake-up there is a hang.
//!
//! Run with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release --test loom_event
//! ```
//!
//! Under `--cfg loom`, `Event` is built on loom's atomics and fence (`src/sync.rs`), its futex
//! is a loom mutex and condvar with the futex's semantics, and its clock counts spins (the
//! spin budget lasts one spin, see `clock` in `src/event.rs`). A lost wake-up leaves every
//! thread blocked (the waiter on the emulated futex, the others joined or finished), which
//! loom reports as a deadlock; so each model passing means no interleaving loses one.
//!
//! What the models assume. Loom models SeqCst loads, stores and read-modify-writes as
//! AcqRel, and only SeqCst fences exactly. The shipped code has a SeqCst fence after each of
//! its two SeqCst RMWs that the protocol leans on: after `notify`'s generation advance (there
//! the language's single order of SeqCst operations already suffices; the fence makes it one
//! loom checks) and after the waiter's `sleepers` increment. That second one is needed by
//! the language, not only by loom: without it loom finds the lost wake-up in every model
//! here, since a condition that reads with Acquire (as `Ring::is_empty` and `Mailbox`'s do)
//! may read data older than a notifier published before its fence and its `sleepers` check
//! saw 0. x86 forbids that (LOCK XADD is a full barrier); weaker CPUs do not. The models
//! cannot see a weakened ordering on the two RMWs the fences follow.

//! Each model fails (a loom deadlock) when the protocol is broken: `notify_cond` without its
//! fence, or checking `sleepers` before it: (a), (a'), (c''), (c'); no word bump before the
//! wake, the waiter reading the word after its check, or counting itself a sleeper only
//! after its check: all six; `notify` waking before it advances the generation: (b), (c),
//! (c''), (c'); a wake that reaches one sleeper only: (a'); the lane not notifying when the
//! role is taken: (c''), (c'); a scheduler predicate without `completions_pending`: (c),
//! (c''), (c'); either fence removed: every model that depends on it. ("A wake that reaches
//! one sleeper only" means the emulated futex's: the real `FUTEX_WAKE` call is not compiled
//! under loom, and `event.rs`'s unit test `one_notify_wakes_every_parked_waiter` pins its
//! wake count.)
#![cfg(loom)]

mod loom_model;

use dagrt::event::{spin_budget, Event};
use dagrt::spsc::Ring;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;
use loom_model::model;
use std::sync::TryLockError;
use std::time::Duration;

/// Preemption bounds. A lost wake-up needs only a few preemptions (the waiter between its
/// last condition check and its park, a notifier between its publication and its sleeper
/// check): each mutation listed above is found within these bounds, most at a bound of 1 or
/// 2. Each bound is the largest that keeps its model near a second or two here; one more
/// costs 5-10x (exhaustive exploration of `role_handoff_one_lane` took 136 s).
/// `LOOM_MAX_PREEMPTIONS` overrides them.
const EXHAUSTIVE: Option<usize> = None;
const TWO_WAITERS: Option<usize> = Some(3);
const GENERATION_WAITER: Option<usize> = Some(4);
const HANDOFF_ONE_LANE: Option<usize> = Some(6);
const HANDOFF_TWO_LANES: Option<usize> = Some(3);
const HANDOFF_LONG_JOBS: Option<usize> = Some(4);

/// (a) A producer publishes data and calls `notify_cond`; a waiter waits for the data. The
/// notifier makes no shared write when it sees no sleeper, so only the Dekker handshake (its
/// fence and `sleepers` load against the waiter's `sleepers` increment and re-check) and the
/// futex word keep the waiter from parking after the notifier looked. Release/Acquire on the
/// data, as the real data are published (`Ring::push`/`is_empty`, `Mailbox::stop`).
///
/// The waiter spins first (the spin budget), or parks at once (a zero budget). Both: after a
/// yield, loom does not let a load return again a value it returned before the yield when a
/// newer one exists, so a waiter whose spin yields before it parks cannot read, at its last
/// check, the stale data it spun on: the stale read the protocol must survive is hidden.
#[test]
fn notify_cond_wakes_a_condition_waiter() {
    for budget in [spin_budget(), Duration::ZERO] {
        model(EXHAUSTIVE, move || {
            let ev = Arc::new(Event::default());
            let data = Arc::new(AtomicBool::new(false));
            let producer = {
                let (ev, data) = (ev.clone(), data.clone());
                thread::spawn(move || {
                    data.store(true, Ordering::Release);
                    ev.notify_cond();
                })
            };
            assert!(ev.wait_until_spin(|| data.load(Ordering::Acquire), None, budget));
            producer.join().unwrap();
        });
    }
}

/// (a') Two waiters on one event: `sleepers` counts both, and one wake (the futex word bumped
/// once, every sleeper woken) must reach both, whichever of them parked. One spins first,
/// the other parks at once.
#[test]
fn notify_cond_wakes_every_waiter() {
    model(TWO_WAITERS, || {
        let ev = Arc::new(Event::default());
        let data = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (ev, data) = (ev.clone(), data.clone());
            thread::spawn(move || {
                let met = || data.load(Ordering::Acquire);
                assert!(ev.wait_until_spin(met, None, Duration::ZERO));
            })
        };
        let producer = {
            let (ev, data) = (ev.clone(), data.clone());
            thread::spawn(move || {
                data.store(true, Ordering::Release);
                ev.notify_cond();
            })
        };
        assert!(ev.wait_until(|| data.load(Ordering::Acquire), None));
        producer.join().unwrap();
        waiter.join().unwrap();
    });
}

/// (b) Generation edges: two notifiers race their `notify` against a waiter that waits for
/// the generation to move past what it last saw, as the scheduler thread does (`seen` read
/// before it looks for work, then `wait_until_looking(.. generation() != seen ..)`). Each
/// notify advances the generation and wakes sleepers only if it sees one; the waiter must
/// see both edges, whichever notifier it slept through.
#[test]
fn notify_wakes_a_generation_waiter() {
    model(GENERATION_WAITER, || {
        let ev = Arc::new(Event::default());
        let notifiers: Vec<_> = (0..2)
            .map(|_| {
                let ev = ev.clone();
                thread::spawn(move || ev.notify())
            })
            .collect();
        loop {
            let seen = ev.generation();
            if seen == 2 {
                break;
            }
            assert!(ev.wait_until(|| ev.generation() != seen, None));
        }
        for n in notifiers {
            n.join().unwrap();
        }
    });
}

/// `scheduler::LANE_PASSES`.
const LANE_PASSES: u32 = 4;

/// The parts of `worker::Engine` the handoff touches.
struct Engine {
    /// `Engine::sched`, the scheduler role; the `Sched` in it reduced to what its passes
    /// drained.
    sched: Mutex<Sched>,
    /// Each lane's completion ring (`Lane::done`).
    done: Vec<Ring<u32, 4>>,
    sched_event: Event,
    stop: AtomicBool,
    /// Completions the lanes report in all.
    items: u32,
    /// Every busy lane runs long jobs: the scheduler thread parks without spinning.
    long_jobs: bool,
}

struct Sched {
    drained: u32,
}

impl Engine {
    fn new(lanes: usize, items: u32, long_jobs: bool) -> Engine {
        Engine {
            sched: Mutex::new(Sched { drained: 0 }),
            done: (0..lanes).map(|_| Ring::default()).collect(),
            sched_event: Event::default(),
            stop: AtomicBool::new(false),
            items,
            long_jobs,
        }
    }

    /// `Engine::stopping`.
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// `lane::completions_pending`.
    fn completions_pending(&self) -> bool {
        self.done.iter().any(|d| !d.is_empty())
    }
}

impl Sched {
    /// `Sched::pass`, reduced to draining completions (`on_completion` for each); returns
    /// whether it handled anything.
    fn pass(&mut self, e: &Engine) -> bool {
        let mut done = 0;
        for lane in &e.done {
            while lane.pop().is_some() {
                done += 1;
            }
        }
        self.drained += done;
        done > 0
    }
}

/// `scheduler::after_completion`, run by a lane after each report.
fn after_completion(e: &Engine) {
    // `let mut g = match e.sched.try_lock() { Ok(g) => g, Err(_) => return notify_cond() }`.
    let mut g = match e.sched.try_lock() {
        Ok(g) => g,
        Err(_) => return e.sched_event.notify_cond(),
    };
    // The passes loop: `busy = s.pass() && (completions_pending(e) || !ready_in.is_empty())`.
    let mut busy = true;
    for _ in 0..LANE_PASSES {
        busy = g.pass(e) && e.completions_pending();
        if !busy {
            break;
        }
    }
    // Not in the real code: the host closing the worker once its run is done (worker.rs:
    // `stop.store(true, Release); sched_event.notify()`), here as soon as the last item is
    // drained. It comes only after nothing is left to drain, so it cannot hide a lost item.
    let finished = g.drained == e.items;
    // `drop(g)`, then `else if busy { notify_cond() }` (no stall episodes here).
    drop(g);
    if busy {
        e.sched_event.notify_cond();
    }
    if finished {
        e.stop.store(true, Ordering::Release);
        e.sched_event.notify();
    }
}

/// `scheduler::scheduler_main`'s loop.
fn scheduler_main(e: &Engine) {
    loop {
        // `let seen = e.sched_event.generation();` before the role's try-lock.
        let seen = e.sched_event.generation();
        let held = match e.sched.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        };
        let lane_holds = held.is_none();
        let wait = match held {
            Some(mut g) => {
                let progress = g.pass(e);
                // `stop_lanes_if_done`: stop requested, every lane idle, nothing pending;
                // here, every item drained (whether the stop request came or not: this
                // thread may have drained the last one itself).
                if g.drained == e.items && !e.completions_pending() {
                    return;
                }
                // `(!progress).then(|| s.wait_params())`, whose spin budget is zero while
                // every busy lane runs long jobs; the guard drops with the arm.
                (!progress).then(|| {
                    if e.long_jobs {
                        Duration::ZERO
                    } else {
                        spin_budget()
                    }
                })
            }
            // `None => { std::thread::yield_now(); Some((.., spin_budget())) }`.
            None => {
                thread::yield_now();
                Some(spin_budget())
            }
        };
        if let Some(spin) = wait {
            // The real predicate, without the parts this model has no source for (the
            // reclaim hold, `ready_in` and its doorbell).
            e.sched_event.wait_until_looking(
                |look| {
                    let poll = look || !lane_holds;
                    e.sched_event.generation() != seen
                        || (poll && e.completions_pending())
                        || e.stopping()
                },
                None,
                spin,
            );
        }
    }
}

/// The role handoff: each of `lanes` lane threads reports `per_lane` completions, each
/// followed by `after_completion` (lane/thread.rs `lane_main`: `report(..)`, then
/// `after_completion`): it runs the passes itself when the role is free, else notifies the
/// scheduler thread (this one), which loops trying the role and waiting on `sched_event`.
/// Every completion must be drained: one left in a ring after its lane moved on, while the
/// scheduler thread parks, hangs the model.
fn handoff(lanes: usize, per_lane: u32, long_jobs: bool) {
    let e = Arc::new(Engine::new(lanes, lanes as u32 * per_lane, long_jobs));
    let threads: Vec<_> = (0..lanes)
        .map(|l| {
            let e = e.clone();
            thread::spawn(move || {
                for k in 0..per_lane {
                    // `lane::report`: the completion goes to the lane's ring.
                    e.done[l].push(k).expect("the ring holds every item");
                    after_completion(&e);
                }
            })
        })
        .collect();
    scheduler_main(&e);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(e.sched.lock().unwrap().drained, e.items);
    assert!(!e.completions_pending(), "no completion left behind");
}

/// (c) The role handoff with one lane reporting two completions: the lane and the scheduler
/// thread contend for the role.
#[test]
fn role_handoff_one_lane() {
    model(HANDOFF_ONE_LANE, || handoff(1, 2, false));
}

/// (c') Two lanes reporting one completion each: a lane also finds the role held by the other.
#[test]
fn role_handoff_two_lanes() {
    model(HANDOFF_TWO_LANES, || handoff(2, 1, false));
}

/// (c'') One lane, the scheduler thread parking without spinning (`wait_params` while every
/// busy lane runs long jobs), which (see (a)) leaves its last check free to read stale data.
/// It finds mutations the spinning variant (c) misses.
#[test]
fn role_handoff_one_lane_long_jobs() {
    model(HANDOFF_LONG_JOBS, || handoff(1, 2, true));
}
