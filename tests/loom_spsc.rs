//! Loom models of the single-producer single-consumer handoffs in `src/spsc.rs`: the
//! orchestrator's READY slots to the scheduler role (`Inbox`, blocks of 2 under loom so the
//! models cross block boundaries: link, retire, spare reuse) and the ring that holds a lane's
//! mailbox and its completions (`Ring`). Each model checks that every item arrives once, in order, whatever the
//! interleaving, and that loom sees no unsynchronised access to an item's cell.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release --test loom_spsc
//! ```
#![cfg(loom)]

use dagrt::spsc::{Inbox, Ring};
use loom::sync::Arc;
use loom::thread;

/// Pop `n` items, yielding while the queue is empty; they must be 0..n in order.
fn drain(n: u64, mut pop: impl FnMut() -> Option<u64>) {
    let mut next = 0;
    while next < n {
        match pop() {
            Some(v) => {
                assert_eq!(v, next, "items arrive once and in order");
                next += 1;
            }
            None => thread::yield_now(),
        }
    }
    assert_eq!(pop(), None, "nothing beyond what was pushed");
}

#[test]
fn inbox_hands_items_over_across_blocks() {
    loom::model(|| {
        let q = Arc::new(Inbox::<u64>::default());
        let p = {
            let q = q.clone();
            // 5 items: three blocks of 2, so two links and a retired block reused as spare;
            // the doorbell rings itself at 2 and 4, the producer rings the fifth in.
            thread::spawn(move || {
                (0..5).for_each(|i| q.push(i));
                q.ring();
            })
        };
        drain(5, || q.pop());
        p.join().unwrap();
        assert!(q.is_empty());
    });
}

/// A consumer rings the doorbell on the producer's behalf (the scheduler thread's periodic
/// look): items the producer never rang in still arrive once, in order, across blocks.
#[test]
fn inbox_consumer_rings_for_the_producer() {
    loom::model(|| {
        let q = Arc::new(Inbox::<u64>::default());
        let p = {
            let q = q.clone();
            // 3 items: the doorbell rings itself at 2 only.
            thread::spawn(move || (0..3).for_each(|i| q.push(i)))
        };
        drain(3, || {
            q.pop().or_else(|| {
                q.ring_any();
                q.pop()
            })
        });
        p.join().unwrap();
        assert!(q.is_empty());
    });
}

#[test]
fn inbox_drop_releases_items_never_popped() {
    loom::model(|| {
        let item = Arc::new(());
        {
            let q = Arc::new(Inbox::<Arc<()>>::default());
            let p = {
                let (q, item) = (q.clone(), item.clone());
                thread::spawn(move || (0..3).for_each(|_| q.push(item.clone())))
            };
            // Pop what has arrived so far; the rest is dropped with the queue.
            while q.pop().is_some() {}
            p.join().unwrap();
        }
        assert_eq!(
            Arc::strong_count(&item),
            1,
            "every pushed item dropped once"
        );
    });
}

#[test]
fn ring_bounds_the_producer_and_keeps_order() {
    loom::model(|| {
        let q = Arc::new(Ring::<u64, 2>::default());
        let p = {
            let q = q.clone();
            thread::spawn(move || {
                for i in 0..3 {
                    let mut v = i;
                    // The producer waits for room: a third item must not overwrite the first.
                    while let Err(x) = q.push(v) {
                        v = x;
                        thread::yield_now();
                    }
                }
            })
        };
        drain(3, || q.pop());
        p.join().unwrap();
        assert!(q.is_empty());
    });
}
