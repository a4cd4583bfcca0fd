//! A wake-up event: a generation counter that waiters spin on briefly and then park on.
//!
//! Waking a parked thread costs about 45 us on these machines, a spinning handoff about 56 ns
//! (DESIGN §6), so every wait on the hot path spins for a bounded time first, yielding its
//! core to the threads that have work (there are only two cores), and parks only when the
//! wait outlasts the spin budget. A notifier touches the mutex only when someone is parked.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a waiter spins before parking. `scripts/spin_bound.sh` measures it: with no spin
/// the W2 chain parks at every handoff (80 us per task here); from 20 us to 5 ms W1, W2 and
/// W4 stay within noise of each other (1.1-2.0 us per task), so the default sits inside that
/// plateau, well above a scheduler round trip. `DAGRT_SPIN_US` overrides it.
pub fn spin_budget() -> Duration {
    static B: OnceLock<Duration> = OnceLock::new();
    *B.get_or_init(|| {
        let us = std::env::var("DAGRT_SPIN_US")
            .ok()
            .and_then(|v| v.parse::<u64>().ok());
        Duration::from_micros(us.unwrap_or(200))
    })
}

pub struct Event {
    /// Advanced by every notify; a waiter waits for it to differ from what it saw.
    gen: AtomicU64,
    /// Parked waiters; SeqCst against the waited-on data (Dekker): a notifier that reads 0
    /// here is guaranteed that any waiter about to park will see its data first.
    sleepers: AtomicU32,
    /// Parked waiters re-check their condition under it and notifiers take it before waking
    /// them: no wake-up is lost between the check and the park.
    mu: Mutex<()>,
    cv: Condvar,
}

impl Default for Event {
    fn default() -> Self {
        Event {
            gen: AtomicU64::new(0),
            sleepers: AtomicU32::new(0),
            mu: Mutex::new(()),
            cv: Condvar::new(),
        }
    }
}

impl Event {
    pub fn generation(&self) -> u64 {
        self.gen.load(Ordering::SeqCst)
    }

    /// An edge for generation waiters (`wait`): advance the generation and wake sleepers.
    pub fn notify(&self) {
        self.gen.fetch_add(1, Ordering::SeqCst);
        self.wake_sleepers();
    }

    /// The caller has published the data a `wait_until` condition reads: wake sleepers. A
    /// spinning waiter sees the data itself, so this costs no shared write when nobody parked.
    pub fn notify_cond(&self) {
        fence(Ordering::SeqCst);
        self.wake_sleepers();
    }

    fn wake_sleepers(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = self.mu.lock().unwrap_or_else(|p| p.into_inner());
            self.cv.notify_all();
        }
    }

    /// Wait until `cond()` holds or `deadline` passes; returns the final `cond()`. Spins
    /// (yielding) for the spin budget, then parks; a parked waiter re-checks `cond()` under
    /// the event mutex, which every notifier takes before waking, so no wake-up is lost.
    pub fn wait_until(&self, cond: impl FnMut() -> bool, deadline: Option<Instant>) -> bool {
        self.wait_until_spin(cond, deadline, spin_budget())
    }

    /// `wait_until` with a relative timeout, read from the clock only if the condition does
    /// not already hold (the uncontended path costs no clock read).
    pub fn wait_until_timeout(&self, mut cond: impl FnMut() -> bool, timeout: Duration) -> bool {
        if cond() {
            return true;
        }
        self.wait_until(cond, deadline_after(Some(timeout)))
    }

    /// `wait_until` with an explicit spin budget: a waiter that knows what it waits for is
    /// long (a kernel that runs for milliseconds) parks at once instead of taking CPU from it.
    pub fn wait_until_spin(
        &self,
        mut cond: impl FnMut() -> bool,
        deadline: Option<Instant>,
        budget: Duration,
    ) -> bool {
        if cond() {
            return true;
        }
        let start = Instant::now();
        let mut i = 0u32;
        loop {
            i = i.wrapping_add(1);
            if i % 64 == 0 {
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    return cond();
                }
                if now.duration_since(start) >= budget {
                    break;
                }
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            if cond() {
                return true;
            }
        }
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let mut g = self.mu.lock().unwrap_or_else(|p| p.into_inner());
        let met = loop {
            if cond() {
                break true;
            }
            match deadline {
                None => g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break false;
                    }
                    g = self
                        .cv
                        .wait_timeout(g, d - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
        };
        drop(g);
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        met
    }
}

/// A deadline `timeout` from now (None for an unbounded wait).
pub fn deadline_after(timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| Instant::now().checked_add(t))
}
