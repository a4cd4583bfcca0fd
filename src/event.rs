//! A wake-up event: a generation counter that waiters spin on briefly and then park on.
//!
//! Waking a parked thread costs about 45 us on these machines, a spinning handoff about 56 ns
//! (DESIGN §6), so every wait on the hot path spins for a bounded time first, yielding its
//! core to the threads that have work (there are only two cores), and parks only when the
//! wait outlasts the spin budget. A notifier makes the wake syscall only when someone is parked.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
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
    /// The futex word parked waiters sleep on: a waker bumps it before waking them, so a
    /// waiter that read it before re-checking its condition cannot sleep through the wake.
    word: AtomicU32,
}

impl Default for Event {
    fn default() -> Self {
        Event {
            gen: AtomicU64::new(0),
            sleepers: AtomicU32::new(0),
            word: AtomicU32::new(0),
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
        self.notify_cond_with(|| ());
    }

    /// `notify_cond`, running `before_wake` first if anyone is parked (it can publish more
    /// for the sleepers to find, at no cost when nobody sleeps).
    pub fn notify_cond_with(&self, before_wake: impl FnOnce()) {
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            before_wake();
            self.wake_sleepers();
        }
    }

    /// One futex wake, no lock: a mutex + condvar wake costs two here (the woken waiter
    /// contends for the mutex the waker still holds), and each is a ~15 us VM exit when the
    /// sleeper's CPU is idle.
    fn wake_sleepers(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            self.word.fetch_add(1, Ordering::SeqCst);
            futex_wake_all(&self.word);
        }
    }

    /// Wait until `cond()` holds or `deadline` passes; returns the final `cond()`. Spins
    /// (yielding) for the spin budget, then parks on the futex word; the word is read before
    /// each re-check of `cond()`, and every waker bumps it, so no wake-up is lost.
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
        self.wait_until_looking(|_| cond(), deadline, budget)
    }

    /// `wait_until_spin` with a condition told when to look harder (`cond(true)`): at the
    /// first check, about every 64th check while spinning, and every check once parking
    /// (after this waiter counts itself a sleeper, so a notifier that saw no sleeper is
    /// seen). For conditions with a part too costly to poll on every spin.
    pub fn wait_until_looking(
        &self,
        cond: impl FnMut(bool) -> bool,
        deadline: Option<Instant>,
        budget: Duration,
    ) -> bool {
        self.wait_inner(cond, deadline, budget, None)
    }

    /// `wait_until_looking` without a deadline, parked for at most `nap` once the spin budget
    /// is spent (the park's timeout is set only then: a wait met while spinning reads no clock
    /// for it). False when the nap ran out first.
    pub fn wait_napping(
        &self,
        cond: impl FnMut(bool) -> bool,
        budget: Duration,
        nap: Duration,
    ) -> bool {
        self.wait_inner(cond, None, budget, Some(nap))
    }

    fn wait_inner(
        &self,
        mut cond: impl FnMut(bool) -> bool,
        mut deadline: Option<Instant>,
        budget: Duration,
        nap: Option<Duration>,
    ) -> bool {
        if cond(true) {
            return true;
        }
        // The budget runs from the first look, not from entry: most waits of a lane fed tiny
        // jobs end within 64 spins, and need no clock read (see `lane::thread::TIME_EVERY`
        // for what clock reads cost such a lane).
        let mut start = None;
        let mut i = 0u32;
        loop {
            i = i.wrapping_add(1);
            let look = i % 64 == 0;
            if look {
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    return cond(true);
                }
                if now.duration_since(*start.get_or_insert(now)) >= budget {
                    break;
                }
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            if cond(look) {
                return true;
            }
        }
        if let Some(n) = nap {
            deadline = deadline.or_else(|| Instant::now().checked_add(n));
        }
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let met = loop {
            let seen = self.word.load(Ordering::SeqCst);
            if cond(true) {
                break true;
            }
            let timeout = match deadline {
                None => None,
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break false;
                    }
                    Some(d - now)
                }
            };
            futex_wait(&self.word, seen, timeout);
        };
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        met
    }
}

/// Sleep while `word` still holds `seen` (or until `timeout`); spurious returns are fine,
/// callers re-check.
fn futex_wait(word: &AtomicU32, seen: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a live, aligned u32 for the duration of the call; `tsp` is null or
    // points to a timespec that outlives it. FUTEX_WAIT only reads them.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            seen,
            tsp,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

fn futex_wake_all(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned u32; FUTEX_WAKE does not access other memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// A deadline `timeout` from now (None for an unbounded wait).
pub fn deadline_after(timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| Instant::now().checked_add(t))
}
