//! Loom models of the slot protocol in `src/slot.rs` (Orchestrator seed §8: the BUILDING
//! publication rule, the failure claim, the fanout-release threshold; Scheduler seed §5:
//! exactly one PENDING -> READY transition, READY -> RUNNING by compare-exchange).
//!
//! Run with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release --test loom_slot
//! ```
//!
//! Under `--cfg loom`, `SlotCore` is built on loom's `Mutex` and `AtomicU8` (`src/sync.rs`),
//! so every interleaving of its lock sections and atomic operations is explored. Each model
//! drives `SlotCore` the way the orchestrator (`src/orchestrator/submit.rs`, submit steps 5-6) and
//! the scheduler (`src/scheduler/completion.rs`, `src/scheduler/mod.rs`) do, with one loom
//! thread per real thread, and checks the protocol's invariants after joining.
#![cfg(loom)]

mod loom_model;

use dagrt::slot::{
    Attach, Claim, Edge, Publish, SlotCore, SlotId, CONSUMED, FAILED, PENDING, READY, RUNNING,
};
use loom::sync::Arc;
use loom::thread::{self, JoinHandle};
use loom_model::model;
use std::sync::Arc as StdArc;

/// Preemption bound for the three-thread models with several lock sections per thread
/// (exhaustive exploration of one did not finish in 5 minutes). Each race they target needs
/// one or two preemptions, so a bound of 3 covers them with margin.
const BOUNDED: Option<usize> = Some(3);
/// The other models are small enough to explore exhaustively.
const EXHAUSTIVE: Option<usize> = None;

fn msg(s: &str) -> StdArc<str> {
    StdArc::from(s)
}

/// A slot for task `id`, published with no fanin: READY.
fn ready(id: SlotId) -> Arc<SlotCore> {
    let s = Arc::new(SlotCore::default());
    s.begin_building(id);
    assert_eq!(s.publish(0), Publish::Ready);
    s
}

/// A slot for task `id`, published with no fanin and claimed by dispatch: RUNNING.
fn running(id: SlotId) -> Arc<SlotCore> {
    let s = ready(id);
    assert!(s.try_claim_running());
    s
}

/// An alloc() slot for `id` (`complete_synthetic(scope_ref)`) with one retaining consumer,
/// task 2, wired on it.
fn synthetic(id: SlotId, scope_ref: i32) -> Arc<SlotCore> {
    let p = Arc::new(SlotCore::default());
    p.begin_building(id);
    p.complete_synthetic(scope_ref);
    assert_eq!(p.attach(id, 2, true), Attach::Done);
    p
}

/// The orchestrator's submit steps 5-6 for consumer `c` (id `cid`) on `producers`, as
/// `Orchestrator::submit` does them. Returns the publication result and whether this thread
/// took over a failure propagation (`propagate_pending` found the debt).
fn submit(c: &SlotCore, cid: SlotId, producers: &[(&SlotCore, SlotId)]) -> (Publish, bool) {
    c.begin_building(cid);
    let mut live = 0;
    let mut poisoned: Option<StdArc<str>> = None;
    for &(p, pid) in producers {
        match p.attach(pid, cid, true) {
            Attach::Live => live += 1,
            Attach::Done | Attach::Gone => {}
            Attach::Failed(m) => {
                poisoned.get_or_insert(m);
            }
        }
    }
    if let Some(m) = poisoned {
        // Won from BUILDING, or Lost because a producer's failure claimed us already.
        let claim = c.claim_failure(cid, &m, &mut Vec::new());
        assert_ne!(claim, Claim::Won, "a BUILDING slot cannot be won outright");
    }
    let publish = c.publish(live);
    let propagated = match publish {
        Publish::Claimed => {
            let mut out = Vec::new();
            c.take_pending_propagation(&mut out)
        }
        _ => false,
    };
    (publish, propagated)
}

/// The scheduler's successful completion of producer `p`: finish, then release each
/// consumer in the snapshot. Returns how many consumers this call moved PENDING -> READY
/// (each of which the scheduler would enqueue), checking the edge names `cid`.
fn complete_ok(p: &SlotCore, c: &SlotCore, cid: SlotId) -> usize {
    let mut edges = Vec::new();
    p.finish(None, &mut edges);
    assert!(edges.len() <= 1);
    let mut enqueued = 0;
    for e in edges {
        assert_eq!(
            e,
            Edge {
                slot: cid,
                retain: true
            }
        );
        if c.release_fanin(e.slot) {
            enqueued += 1;
        }
    }
    enqueued
}

/// The scheduler's failed completion of producer `p`: finish with `m`, then claim every
/// consumer in the snapshot (`poison`). Returns how many claims were won outright
/// (`Claim::Won`: this thread propagates).
fn complete_failed(p: &SlotCore, c: &SlotCore, cid: SlotId, m: &StdArc<str>) -> usize {
    let mut edges = Vec::new();
    p.finish(Some(m), &mut edges);
    assert!(edges.len() <= 1);
    let mut won = 0;
    for e in edges {
        assert_eq!(e.slot, cid);
        let mut out = Vec::new();
        match c.claim_failure(e.slot, m, &mut out) {
            Claim::Won => won += 1,
            // Claimed while BUILDING: the submitting thread propagates. Lost: someone else
            // (the submitter's own claim, or another producer's) already owns it.
            Claim::Building | Claim::Lost => {}
        }
    }
    won
}

// The threads of the models. Each clones the slots it uses on the spawning thread (producers
// first, then the consumer) and runs one of the protocol steps above on a new loom thread.

/// A thread running `submit` of consumer `c` (id `cid`) on `producers`.
fn spawn_submit(
    c: &Arc<SlotCore>,
    cid: SlotId,
    producers: &[(&Arc<SlotCore>, SlotId)],
) -> JoinHandle<(Publish, bool)> {
    let ps: Vec<(Arc<SlotCore>, SlotId)> =
        producers.iter().map(|&(p, id)| (p.clone(), id)).collect();
    let c = c.clone();
    // The closure names `c` before the producers, and drops what it captured in that order:
    // loom explores each Arc drop, so `c` must go first, then each producer, as it always did.
    thread::spawn(move || {
        submit(
            &c,
            cid,
            &ps.iter().map(|(p, id)| (&**p, *id)).collect::<Vec<_>>(),
        )
    })
}

/// A thread running `complete_ok` of producer `p` with consumer `c` (id `cid`).
fn spawn_complete_ok(p: &Arc<SlotCore>, c: &Arc<SlotCore>, cid: SlotId) -> JoinHandle<usize> {
    let (p, c) = (p.clone(), c.clone());
    thread::spawn(move || complete_ok(&p, &c, cid))
}

/// A thread running `complete_failed` of producer `p` with `m`, consumer `c` (id `cid`).
fn spawn_complete_failed(
    p: &Arc<SlotCore>,
    c: &Arc<SlotCore>,
    cid: SlotId,
    m: &StdArc<str>,
) -> JoinHandle<usize> {
    let (p, c, m) = (p.clone(), c.clone(), m.clone());
    thread::spawn(move || complete_failed(&p, &c, cid, &m))
}

// ---------------------------------------------------------------------------------------
// 1. BUILDING publication vs concurrent producer completion.
// ---------------------------------------------------------------------------------------

/// Thread A submits consumer C on running producer P (attach Live or Done, then publish);
/// thread B completes P and releases its consumers. Exactly one of {publish returned Ready,
/// release_fanin returned true} happens, and C ends READY and dispatchable.
#[test]
fn publication_vs_one_producer_completion() {
    model(EXHAUSTIVE, || {
        const P: SlotId = 1;
        const C: SlotId = 2;
        let p = running(P);
        let c = Arc::new(SlotCore::default());

        let a = spawn_submit(&c, C, &[(&p, P)]);
        let b = spawn_complete_ok(&p, &c, C);
        let (publish, propagated) = a.join().unwrap();
        let released = b.join().unwrap();

        assert!(!propagated);
        assert_ne!(publish, Publish::Claimed);
        let enqueues = usize::from(publish == Publish::Ready) + released;
        assert_eq!(
            enqueues, 1,
            "publish {publish:?}, release enqueues {released}"
        );
        assert_eq!(c.state(), READY);
        assert!(
            c.try_claim_running(),
            "the one enqueue must be dispatchable"
        );
    });
}

/// As above with C wired onto two producers completing on two scheduler threads.
#[test]
fn publication_vs_two_producer_completions() {
    model(BOUNDED, || {
        const P1: SlotId = 1;
        const P2: SlotId = 2;
        const C: SlotId = 3;
        let p1 = running(P1);
        let p2 = running(P2);
        let c = Arc::new(SlotCore::default());

        let a = spawn_submit(&c, C, &[(&p1, P1), (&p2, P2)]);
        let b1 = spawn_complete_ok(&p1, &c, C);
        let b2 = spawn_complete_ok(&p2, &c, C);
        let (publish, propagated) = a.join().unwrap();
        let r1 = b1.join().unwrap();
        let r2 = b2.join().unwrap();

        assert!(!propagated);
        assert_ne!(publish, Publish::Claimed);
        let enqueues = usize::from(publish == Publish::Ready) + r1 + r2;
        assert_eq!(enqueues, 1, "publish {publish:?}, releases {r1} + {r2}");
        assert_eq!(c.state(), READY);
        assert!(c.try_claim_running());
    });
}

// ---------------------------------------------------------------------------------------
// 2. The failure claim vs publication.
// ---------------------------------------------------------------------------------------

/// Thread B fails producer P and claims each consumer in its snapshot; thread A wires C onto
/// P and publishes. C ends FAILED in every interleaving and its propagation happens exactly
/// once: B won from PENDING/READY, or A saw Failed/Claimed and took the pending debt.
#[test]
fn failure_claim_vs_publication() {
    model(EXHAUSTIVE, || {
        const P: SlotId = 1;
        const C: SlotId = 2;
        let p = running(P);
        let c = Arc::new(SlotCore::default());
        let m = msg("boom");

        let a = spawn_submit(&c, C, &[(&p, P)]);
        let b = spawn_complete_failed(&p, &c, C, &m);
        let (publish, a_propagated) = a.join().unwrap();
        let b_won = b.join().unwrap();

        assert_eq!(c.state(), FAILED, "publish {publish:?}");
        assert_ne!(publish, Publish::Ready, "a poisoned consumer was enqueued");
        assert_eq!(
            usize::from(a_propagated) + b_won,
            1,
            "propagation ran {} times (submitter {a_propagated}, producer {b_won})",
            usize::from(a_propagated) + b_won
        );
        // A Claimed publication always finds the debt; no debt is left behind.
        assert_eq!(publish == Publish::Claimed, a_propagated);
        assert!(!c.take_pending_propagation(&mut Vec::new()));
        assert_eq!(c.failure().as_deref(), Some("boom"));
        assert!(!c.try_claim_running(), "a FAILED slot was dispatched");
    });
}

/// C wired onto P1 (which fails) and P2 (which completes), on three threads. C is never
/// enqueued, ends FAILED, and is propagated exactly once.
#[test]
fn failure_claim_vs_publication_and_release() {
    model(BOUNDED, || {
        const P1: SlotId = 1;
        const P2: SlotId = 2;
        const C: SlotId = 3;
        let p1 = running(P1);
        let p2 = running(P2);
        let c = Arc::new(SlotCore::default());
        let m = msg("boom");

        let a = spawn_submit(&c, C, &[(&p1, P1), (&p2, P2)]);
        let b1 = spawn_complete_failed(&p1, &c, C, &m);
        let b2 = spawn_complete_ok(&p2, &c, C);
        let (publish, a_propagated) = a.join().unwrap();
        let b1_won = b1.join().unwrap();
        let b2_enqueued = b2.join().unwrap();

        assert_eq!(c.state(), FAILED);
        assert_ne!(publish, Publish::Ready);
        assert_eq!(
            b2_enqueued, 0,
            "a consumer of a failed producer was enqueued"
        );
        assert_eq!(usize::from(a_propagated) + b1_won, 1);
        assert!(!c.take_pending_propagation(&mut Vec::new()));
    });
}

// ---------------------------------------------------------------------------------------
// 3. The failure claim vs the dispatch claim.
// ---------------------------------------------------------------------------------------

/// C is READY; thread A (scheduler dispatch) claims RUNNING while thread B (poisoning)
/// claims FAILED. Exactly one wins and the final state matches the winner.
#[test]
fn failure_claim_vs_dispatch_claim() {
    model(EXHAUSTIVE, || {
        const C: SlotId = 7;
        let c = ready(C);
        let m = msg("boom");

        let a = {
            let c = c.clone();
            thread::spawn(move || c.try_claim_running())
        };
        let b = {
            let (c, m) = (c.clone(), m.clone());
            thread::spawn(move || {
                let mut out = Vec::new();
                let claim = c.claim_failure(C, &m, &mut out);
                assert!(out.is_empty());
                claim
            })
        };
        let dispatched = a.join().unwrap();
        let claim = b.join().unwrap();

        assert!(matches!(claim, Claim::Won | Claim::Lost), "{claim:?}");
        let failed = claim == Claim::Won;
        assert!(
            dispatched ^ failed,
            "dispatched {dispatched}, claim {claim:?}"
        );
        assert_eq!(c.state(), if dispatched { RUNNING } else { FAILED });
        if dispatched {
            assert!(c.failure().is_none(), "a loser wrote the failure message");
        }
    });
}

/// C is PENDING on one producer. The last release (A: release_fanin, then dispatch if it
/// enqueued) races a failure claim (B). Exactly one of {dispatched, claim won}.
#[test]
fn failure_claim_vs_release_and_dispatch() {
    model(EXHAUSTIVE, || {
        const C: SlotId = 7;
        let c = Arc::new(SlotCore::default());
        c.begin_building(C);
        assert_eq!(c.publish(1), Publish::Pending);
        let m = msg("boom");

        let a = {
            let c = c.clone();
            thread::spawn(move || c.release_fanin(C) && c.try_claim_running())
        };
        let b = {
            let (c, m) = (c.clone(), m.clone());
            thread::spawn(move || c.claim_failure(C, &m, &mut Vec::new()))
        };
        let dispatched = a.join().unwrap();
        let claim = b.join().unwrap();

        let failed = claim == Claim::Won;
        assert!(
            dispatched ^ failed,
            "dispatched {dispatched}, claim {claim:?}"
        );
        assert_eq!(c.state(), if dispatched { RUNNING } else { FAILED });
    });
}

// ---------------------------------------------------------------------------------------
// 4. The fanout-release threshold.
// ---------------------------------------------------------------------------------------

/// Release one reference that the calling thread holds: the slot cannot be CONSUMED while
/// this reference is outstanding (that would be an early consumption).
fn release_held(p: &SlotCore) -> bool {
    assert_ne!(
        p.state(),
        CONSUMED,
        "consumed while a reference was still held"
    );
    p.release_ref()
}

/// A thread running `release_held` on `p`.
fn spawn_release_held(p: &Arc<SlotCore>) -> JoinHandle<bool> {
    let p = p.clone();
    thread::spawn(move || release_held(&p))
}

/// A COMPLETED slot with two retaining consumers (fanout_total 2) and its self-release still
/// due: three threads release once each; exactly one consumes it.
#[test]
fn threshold_three_releases() {
    model(EXHAUSTIVE, || {
        const P: SlotId = 1;
        let p = running(P);
        assert_eq!(p.attach(P, 2, true), Attach::Live);
        assert_eq!(p.attach(P, 3, true), Attach::Live);
        let mut edges = Vec::new();
        p.finish(None, &mut edges);
        assert_eq!(edges.len(), 2);

        let hs: Vec<_> = (0..3).map(|_| spawn_release_held(&p)).collect();
        let consumed = hs.into_iter().map(|h| h.join().unwrap()).filter(|&x| x);
        assert_eq!(consumed.count(), 1);
        assert_eq!(p.state(), CONSUMED);
        assert_eq!(p.attach(P, 4, true), Attach::Gone);
    });
}

/// P is still RUNNING with one retaining consumer and a scope reference. Thread A finishes it
/// and emits the self-release; thread B is the consumer retiring early (it was poisoned by
/// another producer); thread C is scope_end. Exactly one release consumes, never early.
#[test]
fn threshold_releases_vs_finish() {
    model(BOUNDED, || {
        const P: SlotId = 1;
        let p = Arc::new(SlotCore::default());
        p.begin_building(P);
        p.charge_ref();
        assert_eq!(p.publish(0), Publish::Ready);
        assert!(p.try_claim_running());
        assert_eq!(p.attach(P, 2, true), Attach::Live);

        let a = {
            let p = p.clone();
            thread::spawn(move || {
                let mut edges = Vec::new();
                p.finish(None, &mut edges);
                release_held(&p)
            })
        };
        let b = spawn_release_held(&p);
        let s = spawn_release_held(&p);
        let n = [a, b, s]
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|&x| x)
            .count();
        assert_eq!(n, 1);
        assert_eq!(p.state(), CONSUMED);
    });
}

/// An alloc() slot (complete_synthetic with a scope reference) with one retaining consumer:
/// the scope release races the consumer's release. Exactly one consumes.
#[test]
fn threshold_synthetic_scope_vs_consumer() {
    model(EXHAUSTIVE, || {
        const P: SlotId = 1;
        let p = synthetic(P, 1);

        let a = spawn_release_held(&p);
        let b = spawn_release_held(&p);
        let n = usize::from(a.join().unwrap()) + usize::from(b.join().unwrap());
        assert_eq!(n, 1);
        assert_eq!(p.state(), CONSUMED);
    });
}

/// An alloc() slot outside any scope with one retaining consumer: the orchestrator wires a
/// second retaining consumer (and later releases it) while the first consumer releases. If
/// the attach lands first it charges a reference, otherwise the slot is gone; either way the
/// slot is consumed exactly once and never while a reference is held.
#[test]
fn threshold_synthetic_attach_vs_release() {
    model(EXHAUSTIVE, || {
        const P: SlotId = 1;
        let p = synthetic(P, 0);

        let a = {
            let p = p.clone();
            thread::spawn(move || match p.attach(P, 3, true) {
                Attach::Done => release_held(&p),
                Attach::Gone => false,
                other => panic!("attach on a synthetic slot: {other:?}"),
            })
        };
        let b = spawn_release_held(&p);
        let n = usize::from(a.join().unwrap()) + usize::from(b.join().unwrap());
        assert_eq!(n, 1);
        assert_eq!(p.state(), CONSUMED);
    });
}

// ---------------------------------------------------------------------------------------
// 5. Exactly one PENDING -> READY.
// ---------------------------------------------------------------------------------------

/// C is PENDING on two producers; both complete on two scheduler threads. Exactly one
/// release_fanin returns true and C ends READY.
#[test]
fn one_pending_to_ready_with_two_producers() {
    model(EXHAUSTIVE, || {
        const P1: SlotId = 1;
        const P2: SlotId = 2;
        const C: SlotId = 3;
        let p1 = running(P1);
        let p2 = running(P2);
        let c = Arc::new(SlotCore::default());
        let (publish, _) = submit(&c, C, &[(&p1, P1), (&p2, P2)]);
        assert_eq!(publish, Publish::Pending);
        assert_eq!(c.state(), PENDING);

        let b1 = spawn_complete_ok(&p1, &c, C);
        let b2 = spawn_complete_ok(&p2, &c, C);
        let n = b1.join().unwrap() + b2.join().unwrap();
        assert_eq!(n, 1);
        assert_eq!(c.state(), READY);
    });
}

// ---------------------------------------------------------------------------------------
// 6. Stale edges vs slot reuse.
// ---------------------------------------------------------------------------------------

/// C (task 10) was wired onto P1, poisoned by another producer, consumed and freed; the
/// orchestrator reuses the slot for task 11 (wired onto P2, which stays RUNNING) while P1
/// completes and releases its stale edge to task 10. A freed slot keeps its last id, so a
/// release landing while the slot is FREE passes the id check; it must be inert there (no
/// transition, and begin_building resets the count), and one landing after begin_building
/// fails the id check. Either way task 11 stays PENDING and nothing enqueues it.
#[test]
fn stale_release_vs_slot_reuse() {
    model(EXHAUSTIVE, || {
        const P1: SlotId = 1;
        const P2: SlotId = 2;
        const OLD: SlotId = 10;
        const NEW: SlotId = 11;
        let p1 = running(P1);
        let p2 = running(P2);
        let c = Arc::new(SlotCore::default());
        assert_eq!(submit(&c, OLD, &[(&p1, P1)]).0, Publish::Pending);
        assert_eq!(
            c.claim_failure(OLD, &msg("other"), &mut Vec::new()),
            Claim::Won
        );
        assert!(
            c.release_ref(),
            "the self-release consumes a FAILED slot with no refs"
        );
        c.free();

        let a = spawn_submit(&c, NEW, &[(&p2, P2)]);
        let b = {
            let (p1, c) = (p1.clone(), c.clone());
            thread::spawn(move || {
                let mut edges = Vec::new();
                p1.finish(None, &mut edges);
                assert_eq!(
                    edges,
                    vec![Edge {
                        slot: OLD,
                        retain: true
                    }]
                );
                c.release_fanin(OLD)
            })
        };
        let (publish, _) = a.join().unwrap();
        let stale = b.join().unwrap();

        assert!(!stale, "a stale edge moved the reused slot to READY");
        assert_eq!(publish, Publish::Pending);
        assert_eq!(c.state(), PENDING);
    });
}
