//! Single-producer single-consumer queues for the per-task handoffs that have exactly one
//! writer and one reader at a time: the orchestrator's immediately-READY slots to the
//! scheduler role (`Inbox`), the scheduler role's jobs to a lane and a lane's completions back
//! (`Ring`, in `lane::Mailbox` and `lane::Lane::done`).
//!
//! Each side owns its index and publishes it with a plain Release store, so a push or a pop
//! costs no locked instruction. The crossbeam MPMC queues these replace paid two per item on
//! lines both cores write, which was a fifth of W1's profile. "One at a time" is the callers'
//! contract: the orchestrator lock orders successive builders, the scheduler role lock
//! successive role holders, and a lane is one thread.

use crate::sync::{AtomicPtr, AtomicU64, Ordering, UnsafeCell};
use std::mem::MaybeUninit;
use std::ptr;

/// A value on a cache line of its own: each side of a queue writes its own index, and two
/// indexes on one line would move it between cores on every push and every pop.
#[repr(align(64))]
#[derive(Default)]
pub struct Padded<T>(pub T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A bounded ring; the producer never holds more than its capacity outstanding (a lane's
/// completions are bounded by the jobs it was posted).
pub struct Ring<T, const N: usize> {
    /// Items pushed (producer-owned; Release after the item is written).
    tail: Padded<AtomicU64>,
    /// Items popped (consumer-owned; Release after the item was moved out).
    head: Padded<AtomicU64>,
    items: [UnsafeCell<MaybeUninit<T>>; N],
}

// SAFETY: item i is written only by the producer while it is outside [head, tail) and moved
// out only by the consumer while inside it, after the Acquire load of `tail` that published it.
unsafe impl<T: Send, const N: usize> Sync for Ring<T, N> {}
// SAFETY: as above; the items themselves are Send.
unsafe impl<T: Send, const N: usize> Send for Ring<T, N> {}

impl<T, const N: usize> Default for Ring<T, N> {
    fn default() -> Self {
        Ring {
            tail: Padded(AtomicU64::new(0)),
            head: Padded(AtomicU64::new(0)),
            items: std::array::from_fn(|_| UnsafeCell::new(MaybeUninit::uninit())),
        }
    }
}

impl<T, const N: usize> Ring<T, N> {
    /// Producer: append; gives the item back when the ring is full.
    pub fn push(&self, v: T) -> Result<(), T> {
        let t = self.tail.load(Ordering::Relaxed);
        if t - self.head.load(Ordering::Acquire) >= N as u64 {
            return Err(v);
        }
        self.items[(t % N as u64) as usize].with_mut(|p| {
            // SAFETY: slot t is outside [head, tail): the consumer does not touch it.
            unsafe { (*p).write(v) };
        });
        self.tail.store(t + 1, Ordering::Release);
        Ok(())
    }

    /// Consumer: the oldest item, if any.
    pub fn pop(&self) -> Option<T> {
        let h = self.head.load(Ordering::Relaxed);
        if h == self.tail.load(Ordering::Acquire) {
            return None;
        }
        let v = self.items[(h % N as u64) as usize].with(|p| {
            // SAFETY: slot h is inside [head, tail), written before the tail we read.
            unsafe { (*p).assume_init_read() }
        });
        self.head.store(h + 1, Ordering::Release);
        Some(v)
    }

    /// Any thread: whether nothing is waiting (a hint unless called by the consumer).
    pub fn is_empty(&self) -> bool {
        self.head.load(Ordering::Acquire) == self.tail.load(Ordering::Acquire)
    }
}

impl<T, const N: usize> Drop for Ring<T, N> {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

#[cfg(not(loom))]
const BLOCK: usize = 256;
/// Small under loom, so a model crosses block boundaries (link, retire, spare reuse).
#[cfg(loom)]
const BLOCK: usize = 2;

struct Block<T> {
    items: [UnsafeCell<MaybeUninit<T>>; BLOCK],
    /// Set by the producer before it publishes the first item past this block.
    next: AtomicPtr<Block<T>>,
}

impl<T> Block<T> {
    fn alloc() -> *mut Block<T> {
        Box::into_raw(Box::new(Block {
            items: std::array::from_fn(|_| UnsafeCell::new(MaybeUninit::uninit())),
            next: AtomicPtr::new(ptr::null_mut()),
        }))
    }
}

/// An unbounded queue of blocks of 256 items. The consumer hands a drained block back through
/// `spare`, so a steady stream allocates nothing.
///
/// Items are published twice. `pushed` counts every push; the `doorbell` is raised to it every
/// `DOORBELL` pushes, and whenever anyone rings it (`ring`, `ring_any`). Consumers pop and
/// poll up to the doorbell only: a consumer polling a counter the producer writes per item
/// pulls that line back and forth once per item (a fifth of W1's submit). The producer rings
/// when the consumer sleeps and when its run closes; a waiting consumer rings for it every few
/// microseconds (`ring_any` reads `pushed`), so no item waits on the producer's next call.
pub struct Inbox<T> {
    /// Items pushed (Release after the item, and any new block's link, are written).
    pushed: Padded<AtomicU64>,
    /// Items any consumer may pop: at most `pushed`, only ever raised (monotonic).
    doorbell: Padded<AtomicU64>,
    /// Items popped (consumer-owned; Release after the item was moved out, so `is_empty` and
    /// `ring_any` on other threads never count an item still being taken as gone).
    popped: Padded<AtomicU64>,
    /// Producer-owned: the block holding item `pushed`.
    tail: UnsafeCell<*mut Block<T>>,
    /// Consumer-owned: the block holding item `popped`.
    head: UnsafeCell<*mut Block<T>>,
    /// One drained block kept for reuse (swapped, so either side may find it empty).
    spare: AtomicPtr<Block<T>>,
}

/// Pushes between two rings of the doorbell by the producer itself.
#[cfg(not(loom))]
const DOORBELL: u64 = 16;
#[cfg(loom)]
const DOORBELL: u64 = 2;

// SAFETY: `tail` is touched only by the producer and `head` only by the consumer (one of each
// at a time, the callers' contract); items are handed over through `pushed` and `doorbell`
// (Release/Acquire, the doorbell raised only to a value of `pushed` its raiser acquired).
unsafe impl<T: Send> Sync for Inbox<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Inbox<T> {}

impl<T> Default for Inbox<T> {
    fn default() -> Self {
        let b = Block::alloc();
        Inbox {
            pushed: Padded(AtomicU64::new(0)),
            doorbell: Padded(AtomicU64::new(0)),
            popped: Padded(AtomicU64::new(0)),
            tail: UnsafeCell::new(b),
            head: UnsafeCell::new(b),
            spare: AtomicPtr::new(ptr::null_mut()),
        }
    }
}

impl<T> Inbox<T> {
    /// Producer: append (visible to consumers at the next ring of the doorbell).
    pub fn push(&self, v: T) {
        let n = self.pushed.load(Ordering::Relaxed);
        let i = (n % BLOCK as u64) as usize;
        self.tail.with_mut(|tail| {
            // SAFETY: the producer owns `tail`.
            let tail = unsafe { &mut *tail };
            if i == 0 && n > 0 {
                // The current block is full: link a fresh one (the consumer follows `next`
                // only after it has seen item n published, which this link precedes).
                let mut b = self.spare.swap(ptr::null_mut(), Ordering::Acquire);
                if b.is_null() {
                    b = Block::alloc();
                }
                // SAFETY: `*tail` is live (the consumer frees a block only after leaving it,
                // and it cannot leave the block the producer is still filling).
                unsafe { (**tail).next.store(b, Ordering::Relaxed) };
                *tail = b;
            }
            // SAFETY: `*tail` is live (as above).
            unsafe { &(**tail).items[i] }.with_mut(|p| {
                // SAFETY: item n is beyond `pushed`: the consumer does not read it yet.
                unsafe { (*p).write(v) };
            });
        });
        self.pushed.store(n + 1, Ordering::Release);
        if (n + 1) % DOORBELL == 0 {
            self.raise_doorbell(n + 1);
        }
    }

    /// Producer: make every item pushed so far poppable.
    pub fn ring(&self) {
        self.raise_doorbell(self.pushed.load(Ordering::Relaxed));
    }

    /// Any thread, on the producer's behalf: make every item pushed so far poppable. Returns
    /// whether any item is waiting to be popped. Reads the line the producer writes per push:
    /// for occasional calls (a waiting consumer's periodic look), not for polling.
    pub fn ring_any(&self) -> bool {
        let n = self.pushed.load(Ordering::Acquire);
        self.raise_doorbell(n);
        self.popped.load(Ordering::Acquire) < n
    }

    /// Make the first `n` items poppable; `n` was read from `pushed` by this thread (the
    /// producer's own count, or an Acquire load of it).
    fn raise_doorbell(&self, n: u64) {
        let mut cur = self.doorbell.load(Ordering::Relaxed);
        // Release (and Acquire, for a raiser that is not the producer): whoever acquires the
        // doorbell value also acquires the items below it. A compare-exchange loop rather
        // than `fetch_max`, which x86 compiles to such a loop anyway: ThreadSanitizer does
        // not instrument an atomic max, and reported every handover as a race.
        while cur < n {
            match self
                .doorbell
                .compare_exchange_weak(cur, n, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
    }

    /// Consumer: the oldest item, if any.
    pub fn pop(&self) -> Option<T> {
        let n = self.popped.load(Ordering::Relaxed);
        if n >= self.doorbell.load(Ordering::Acquire) {
            return None;
        }
        let i = (n % BLOCK as u64) as usize;
        let v = self.head.with_mut(|head| {
            // SAFETY: the consumer owns `head`.
            let head = unsafe { &mut *head };
            if i == 0 && n > 0 {
                // Item n is in the next block, linked before item n was published.
                // SAFETY: `*head` is live until this consumer retires it here.
                let next = unsafe { (**head).next.load(Ordering::Relaxed) };
                self.retire(std::mem::replace(head, next));
            }
            // SAFETY: `*head` is live (as above).
            unsafe { &(**head).items[i] }.with(|p| {
                // SAFETY: item n was written before the `pushed` value we read.
                unsafe { (*p).assume_init_read() }
            })
        });
        self.popped.store(n + 1, Ordering::Release);
        Some(v)
    }

    /// Any thread: whether nothing is poppable (a hint unless called by the consumer).
    pub fn is_empty(&self) -> bool {
        self.popped.load(Ordering::Acquire) >= self.doorbell.load(Ordering::Acquire)
    }

    /// A drained block: keep it as the spare, or free it if there is one.
    fn retire(&self, b: *mut Block<T>) {
        // SAFETY: `b` is drained and unreachable from the queue: the producer moved past it.
        unsafe { (*b).next.store(ptr::null_mut(), Ordering::Relaxed) };
        let old = self.spare.swap(b, Ordering::Release);
        if !old.is_null() {
            // SAFETY: a spare is owned by the queue alone; swapping it out transferred it here.
            drop(unsafe { Box::from_raw(old) });
        }
    }
}

impl<T> Drop for Inbox<T> {
    fn drop(&mut self) {
        // Exclusive access: every item pushed is poppable, rung in or not.
        self.ring();
        while self.pop().is_some() {}
        // SAFETY: exclusive access; after draining, head == tail is the only live block.
        self.head.with_mut(|h| drop(unsafe { Box::from_raw(*h) }));
        let s = self.spare.swap(ptr::null_mut(), Ordering::Relaxed);
        if !s.is_null() {
            // SAFETY: a spare is owned by the queue alone.
            drop(unsafe { Box::from_raw(s) });
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn inbox_hands_over_every_item_in_order_across_blocks() {
        let q = Arc::new(Inbox::<(u64, Arc<u64>)>::default());
        // A multiple of DOORBELL: the producer never rings for a last partial batch. Under
        // Miri (see the README), a few blocks' worth.
        const N: u64 = if cfg!(miri) {
            4 * BLOCK as u64
        } else {
            200_000
        };
        let p = {
            let q = q.clone();
            std::thread::spawn(move || {
                for i in 0..N {
                    q.push((i, Arc::new(i)));
                }
            })
        };
        let mut next = 0;
        while next < N {
            match q.pop() {
                Some((i, a)) => {
                    assert_eq!((i, *a), (next, next));
                    next += 1;
                }
                None => std::hint::spin_loop(),
            }
        }
        p.join().unwrap();
        assert!(q.pop().is_none() && q.is_empty());
    }

    #[test]
    fn inbox_items_pop_once_the_doorbell_rings() {
        let q = Inbox::default();
        for i in 0..(DOORBELL + 5) {
            q.push(i);
        }
        // The producer rang itself once, after DOORBELL items.
        for i in 0..DOORBELL {
            assert_eq!(q.pop(), Some(i));
        }
        assert_eq!(q.pop(), None, "the last 5 wait for a ring");
        assert!(q.is_empty());
        assert!(q.ring_any(), "pushed items are waiting");
        for i in DOORBELL..(DOORBELL + 5) {
            assert_eq!(q.pop(), Some(i));
        }
        assert!(!q.ring_any() && q.pop().is_none());
        q.push(99);
        q.ring();
        assert_eq!(q.pop(), Some(99));
    }

    #[test]
    fn inbox_drop_releases_unpopped_items() {
        let a = Arc::new(0u8);
        {
            let q = Inbox::default();
            for _ in 0..(BLOCK * 3 + 7) {
                q.push(a.clone());
            }
            for _ in 0..BLOCK + 1 {
                drop(q.pop());
            }
        }
        assert_eq!(Arc::strong_count(&a), 1);
    }

    #[test]
    fn ring_is_bounded_fifo_between_two_threads() {
        let q = Arc::new(Ring::<u64, 8>::default());
        for i in 0..8 {
            q.push(i).unwrap();
        }
        assert_eq!(q.push(99), Err(99));
        for i in 0..8 {
            assert_eq!(q.pop(), Some(i));
        }
        const N: u64 = if cfg!(miri) { 2_000 } else { 200_000 };
        let p = {
            let q = q.clone();
            std::thread::spawn(move || {
                for i in 0..N {
                    let mut v = i;
                    while let Err(x) = q.push(v) {
                        v = x;
                        std::hint::spin_loop();
                    }
                }
            })
        };
        let mut next = 0;
        while next < N {
            if let Some(i) = q.pop() {
                assert_eq!(i, next);
                next += 1;
            }
        }
        p.join().unwrap();
        assert!(q.is_empty());
    }
}
