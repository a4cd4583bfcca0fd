//! A wake-up event: a generation counter that waiters spin on briefly and then park on.
//!
//! Waking a parked thread costs about 45 us on these machines, a spinning handoff about 56 ns
//! (DESIGN §6), so every wait on the hot path spins for a bounded time first, yielding its
//! core to the threads that have work (there are only two cores), and parks only when the
//! wait outlasts the spin budget. A notifier makes the wake syscall only when someone is parked.
//!
//! Under `--cfg loom` (`tests/loom_event.rs`) the atomics and the fence are loom's, the futex is
//! emulated with a loom mutex and condvar, and no clock is read (see `clock`).

use crate::sync::{fence, yield_now, AtomicBool, AtomicU32, AtomicU64, Ordering};
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
    /// Set by a waiter before it sleeps, cleared by a wake: `asleep_unwoken`. A woken waiter
    /// is off its core for tens of microseconds; callers seeing `sleepers` still counting it
    /// must not take it for one that needs its first wake. Not part of the wake protocol.
    asleep: AtomicBool,
    /// The futex of `word`, emulated for loom (see `futex_wait`): the lock stands for the
    /// kernel's futex bucket lock, the condvar for its wait queue.
    #[cfg(loom)]
    futex: (crate::sync::Mutex<()>, crate::sync::Condvar),
}

impl Default for Event {
    fn default() -> Self {
        Event {
            gen: AtomicU64::new(0),
            sleepers: AtomicU32::new(0),
            word: AtomicU32::new(0),
            asleep: AtomicBool::new(false),
            #[cfg(loom)]
            futex: Default::default(),
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
        // The advance and the `sleepers` load below are SeqCst, and so are a waiter's
        // increment of `sleepers` and its load of the generation: their single order already
        // lets no waiter miss the advance. Loom models SeqCst accesses as AcqRel (its README,
        // "Unsupported features") and SeqCst fences exactly, so the fence makes that order
        // one `tests/loom_event.rs` checks; notify is rare (a run's close, a stall episode).
        fence(Ordering::SeqCst);
        self.wake_sleepers();
    }

    /// The caller has published the data a `wait_until` condition reads: wake sleepers. A
    /// spinning waiter sees the data itself, so this costs no shared write when nobody parked.
    pub fn notify_cond(&self) {
        self.notify_cond_with(|| ());
    }

    /// Whether a waiter is asleep and no wake has been sent to it since it went to sleep: a
    /// hint (no fence, and a waiter between its wake and its next look reads as awake) for a
    /// caller choosing which thread does some work, never for whether to notify.
    pub fn asleep_unwoken(&self) -> bool {
        self.asleep.load(Ordering::Relaxed)
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
            self.asleep.store(false, Ordering::Relaxed);
            self.word.fetch_add(1, Ordering::SeqCst);
            self.futex_wake_all();
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
        deadline: Option<Instant>,
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
            #[cfg_attr(loom, allow(clippy::modulo_one))] // LOOK_EVERY is 1 under loom
            let look = i % clock::LOOK_EVERY == 0;
            if look {
                let now = clock::now(i);
                if clock::expired(deadline, now) {
                    return cond(true);
                }
                if now.duration_since(*start.get_or_insert(now)) >= budget {
                    break;
                }
                yield_now();
            } else {
                std::hint::spin_loop();
            }
            if cond(look) {
                return true;
            }
        }
        let deadline = clock::park_deadline(deadline, nap);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        // Dekker with `notify_cond`'s fence: no load of `cond` below may read a value older
        // than a notifier's publication that came before its `sleepers` check saw no sleeper.
        // The language promises that to a SeqCst increment followed by a SeqCst load, not to
        // a `cond` that loads with Acquire, as the lanes' and the scheduler's do
        // (`Ring::is_empty`); x86's LOCK XADD happens to be a full barrier, weaker CPUs need
        // the fence (loom finds the lost wake-up without it: `tests/loom_event.rs`). One
        // fence per park, next to a futex call.
        fence(Ordering::SeqCst);
        let met = loop {
            let seen = self.word.load(Ordering::SeqCst);
            if cond(true) {
                break true;
            }
            let timeout = match deadline {
                None => None,
                Some(d) => {
                    let now = clock::park_now();
                    if now >= d {
                        break false;
                    }
                    Some(d - now)
                }
            };
            self.asleep.store(true, Ordering::Relaxed);
            self.futex_wait(seen, timeout);
            self.asleep.store(false, Ordering::Relaxed);
        };
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        met
    }
}

/// The waits' view of time. The normal build reads the clock at a wait's looks (every 64th
/// spin) and before each timed park. Under loom no time passes and a model must not depend on
/// the host's clock: every spin is a look, a wait's clock counts its spins, and the spin
/// budget, whatever its length, is spent after `LOOM_SPINS` of them (at once if zero), which
/// keeps a model's state space small. A deadline (or a nap) passes when the wait would park,
/// the earliest a real one can time out: a timed wait never blocks in a model (a loop of naps,
/// as in `Mailbox::next`, spins), which checks the untimed waits, the ones a lost wake-up
/// would hang.
#[cfg(not(loom))]
mod clock {
    use std::time::{Duration, Instant};

    /// A wait reads the clock and yields every LOOK_EVERY spins.
    pub(super) const LOOK_EVERY: u32 = 64;

    /// The time at a look, `spins` into the wait.
    #[inline(always)]
    pub(super) fn now(_spins: u32) -> Instant {
        Instant::now()
    }

    /// At a look: whether the caller's deadline has passed.
    #[inline(always)]
    pub(super) fn expired(deadline: Option<Instant>, now: Instant) -> bool {
        deadline.is_some_and(|d| now >= d)
    }

    /// The parked wait's deadline: the caller's, else the nap's end (read from the clock only
    /// now: a wait met while spinning reads none for it).
    #[inline(always)]
    pub(super) fn park_deadline(
        deadline: Option<Instant>,
        nap: Option<Duration>,
    ) -> Option<Instant> {
        match nap {
            Some(n) => deadline.or_else(|| Instant::now().checked_add(n)),
            None => deadline,
        }
    }

    /// Before a timed park: the time.
    #[inline(always)]
    pub(super) fn park_now() -> Instant {
        Instant::now()
    }
}

/// See the normal build's `clock` above.
#[cfg(loom)]
mod clock {
    use std::time::{Duration, Instant};

    /// Every spin is a look (and a loom yield): 64 spins per look would only multiply the
    /// interleavings of one condition check.
    pub(super) const LOOK_EVERY: u32 = 1;
    /// Spins a nonzero budget lasts.
    const LOOM_SPINS: u32 = 1;

    /// A wait's spin count, as its clock.
    #[derive(Clone, Copy)]
    pub(super) struct Spins(u32);

    impl Spins {
        /// Measured against a spin budget: nothing before LOOM_SPINS spins (so only a zero
        /// budget is spent at the first look), everything after.
        pub(super) fn duration_since(self, start: Spins) -> Duration {
            if self.0 - start.0 >= LOOM_SPINS {
                Duration::MAX
            } else {
                Duration::ZERO
            }
        }
    }

    pub(super) fn now(spins: u32) -> Spins {
        Spins(spins)
    }

    /// No time passes while a model spins.
    pub(super) fn expired(_deadline: Option<Instant>, _now: Spins) -> bool {
        false
    }

    /// A timed park's deadline, which has passed by the time the wait parks.
    #[derive(Clone, Copy, PartialEq, PartialOrd)]
    pub(super) struct Passed;

    impl std::ops::Sub for Passed {
        type Output = Duration;
        fn sub(self, _: Passed) -> Duration {
            unreachable!("a timed wait times out before it parks")
        }
    }

    pub(super) fn park_deadline(
        deadline: Option<Instant>,
        nap: Option<Duration>,
    ) -> Option<Passed> {
        (deadline.is_some() || nap.is_some()).then_some(Passed)
    }

    pub(super) fn park_now() -> Passed {
        Passed
    }
}

#[cfg(not(loom))]
impl Event {
    /// Sleep while `word` still holds `seen` (or until `timeout`); spurious returns are fine,
    /// callers re-check.
    fn futex_wait(&self, seen: u32, timeout: Option<Duration>) {
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
                self.word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                seen,
                tsp,
                std::ptr::null::<u32>(),
                0u32,
            );
        }
    }

    fn futex_wake_all(&self) {
        // SAFETY: `word` is a live, aligned u32; FUTEX_WAKE does not access other memory.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
                std::ptr::null::<libc::timespec>(),
                std::ptr::null::<u32>(),
                0u32,
            );
        }
    }
}

/// The futex, emulated with loom's mutex and condvar (the same semantics, as the waits use
/// them): FUTEX_WAIT compares the word under the futex's bucket lock, which FUTEX_WAKE takes
/// too, so a waker that changed the word and then wakes either is seen by the comparison or
/// finds the waiter queued. Loom's condvar has no spurious wake-ups; a real futex's spurious
/// returns only add re-checks.
#[cfg(loom)]
impl Event {
    fn futex_wait(&self, seen: u32, timeout: Option<Duration>) {
        let (lock, queue) = &self.futex;
        let g = crate::sync::lock(lock);
        // A timed park returns at once (unreached: a timed wait times out before it parks,
        // see `clock`). The lock orders the read after any wake that took it first, as the
        // bucket lock does.
        if timeout.is_none() && self.word.load(Ordering::Relaxed) == seen {
            let _g = queue.wait(g);
        }
    }

    fn futex_wake_all(&self) {
        let _g = crate::sync::lock(&self.futex.0);
        self.futex.1.notify_all();
    }
}

/// A deadline `timeout` from now (None for an unbounded wait).
pub fn deadline_after(timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| Instant::now().checked_add(t))
}

/// The real futex (loom emulates it, so `tests/loom_event.rs` does not reach these calls):
/// one notify wakes every parked waiter.
#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// The hint a submission reads to run the scheduler's pass itself
    /// (`completion::enqueue_ready`): set while a waiter sleeps, cleared by the wake that
    /// notify sends, before the woken thread has run (`sleepers` still counts it then).
    #[test]
    fn asleep_unwoken_clears_at_the_wake_not_when_the_waiter_runs() {
        let ev = Arc::new(Event::default());
        let flag = Arc::new(AtomicBool::new(false));
        assert!(!ev.asleep_unwoken());
        let waiter = {
            let (ev, flag) = (ev.clone(), flag.clone());
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(10);
                ev.wait_until_spin(
                    || flag.load(Ordering::SeqCst),
                    Some(deadline),
                    Duration::ZERO,
                )
            })
        };
        let asleep = Instant::now() + Duration::from_secs(10);
        while !ev.asleep_unwoken() && Instant::now() < asleep {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(ev.asleep_unwoken(), "the waiter did not go to sleep");
        // The condition holds before the wake: the woken waiter does not go back to sleep.
        flag.store(true, Ordering::SeqCst);
        ev.notify();
        assert!(
            !ev.asleep_unwoken(),
            "a sent wake must clear the hint at once"
        );
        assert!(waiter.join().unwrap());
        assert!(!ev.asleep_unwoken());
    }

    #[test]
    fn one_notify_wakes_every_parked_waiter() {
        let ev = Arc::new(Event::default());
        let flag = Arc::new(AtomicBool::new(false));
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let (ev, flag) = (ev.clone(), flag.clone());
                std::thread::spawn(move || {
                    let t0 = Instant::now();
                    let deadline = Instant::now() + Duration::from_secs(10);
                    let met = ev.wait_until(|| flag.load(Ordering::SeqCst), Some(deadline));
                    (met, t0.elapsed())
                })
            })
            .collect();
        // Every waiter is parked: past the spin budget, and counted.
        let parked = Instant::now() + Duration::from_secs(10);
        while ev.sleepers.load(Ordering::SeqCst) < 4 && Instant::now() < parked {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            ev.sleepers.load(Ordering::SeqCst),
            4,
            "the waiters did not park"
        );
        std::thread::sleep(Duration::from_millis(50)); // counted, then into the futex wait
        flag.store(true, Ordering::SeqCst);
        ev.notify();
        for w in waiters {
            let (met, took) = w.join().unwrap();
            assert!(met, "a waiter timed out");
            assert!(
                took < Duration::from_secs(5),
                "a parked waiter slept through the notify ({took:?})"
            );
        }
    }
}
