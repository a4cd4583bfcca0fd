//! The scheduler's view of each lane: the jobs it posted and has not heard back about, in
//! mailbox order, and how long the lane's recent jobs ran.
//!
//! A lane may hold more than one job (the running one plus queued ones). Queued SUB jobs are
//! not claimed yet, so when another SUB lane goes idle with nothing left in the SUB FIFO the
//! scheduler can take one back: it claims the slot READY -> RUNNING itself and posts it to the
//! idle lane. The original lane then loses the claim and reports the job skipped. That keeps
//! prefetching (which hides the scheduler's wake-up latency behind the running job) from
//! stranding a critical task behind a long one. Jobs queued behind tiny ones are left where
//! they are (they start within microseconds) until that lane stops reporting
//! (`LaneBook::may_steal_from`).

use crate::slot::SlotId;
use std::collections::VecDeque;

/// Jobs shorter than this (moving average per lane) are short enough that the handoff
/// dominates: such a lane gets up to SHORT_JOB_DEPTH jobs at once (MAILBOX_DEPTH if tiny).
pub const SHORT_JOB_NS: u64 = 20_000;

/// Jobs shorter than this (moving average) cost less than handing them to another core:
/// singles go to the first SUB lane with room rather than the least loaded, and are not
/// taken back while that lane makes progress, so a second lane takes them only when the
/// first has a full mailbox. Spread over two lanes, each completion would release
/// consumers queued on the other one and the lanes would trade slot lines (W4 on 2 SUB
/// lanes, interleaved A/Bs: packed took 0.62-0.84 of the time in five of six, 0.95 in one;
/// W1-W3 within noise).
pub const PACK_JOB_NS: u64 = 2_000;

/// Whether a job that ran for `ns` (None: untimed, which only tiny jobs are) was long enough
/// to have evicted what the scheduler's next steps touch from its core's caches: they are
/// then worth prefetching (see `crate::prefetch`).
pub fn left_caches_cold(ns: Option<u64>) -> bool {
    ns.is_some_and(|ns| ns >= PACK_JOB_NS)
}

/// Rebalancing checks without a completion from a lane of tiny jobs after which its
/// running job counts as stuck (a long one among tiny ones), and the jobs queued behind it
/// may be taken back. Checks, not time: a pass reads no clock.
const STUCK_CHECKS: u32 = 32;

/// When nothing else happens (no pass to count checks), an idle lane looks at a lane of tiny
/// jobs holding queued ones this often (`scheduler::idle_sweep`); a lane that has reported
/// nothing between two looks is stuck.
pub const STUCK_SWEEP: std::time::Duration = std::time::Duration::from_micros(50);

/// Jobs a lane running long (or not yet timed) jobs may hold: only the running one, as the
/// seeds dispatch (a single goes to an idle worker). A job queued behind a long one would
/// start out of FIFO order: behind a later job that another lane took from the FIFO, and
/// ahead of a group head that reserves this lane. The lane asks for its next job itself when
/// it reports (`scheduler::after_completion`) and spins for it (`lane_main`), so it does not
/// wait for the scheduler thread to wake (~50 us here).
const LONG_JOB_DEPTH: u32 = 1;

/// Jobs a lane of short but not tiny jobs (PACK_JOB_NS to SHORT_JOB_NS, e.g. some of a b = 64
/// Cholesky's tiles) may hold: the depth all short jobs had before MAILBOX_DEPTH was raised
/// for tiny ones, where it was measured; deeper, a job released later (the next panel's)
/// could queue behind a longer run of such jobs on one lane.
pub const SHORT_JOB_DEPTH: u32 = 8;

#[derive(Clone, Copy)]
struct Posted {
    slot: SlotId,
    /// The scheduler claimed it when posting (the lane will run it).
    claimed: bool,
    /// Taken back and posted elsewhere: the lane will skip it.
    stolen: bool,
}

pub struct LaneBook {
    posted: VecDeque<Posted>,
    stolen: u32,
    /// Moving average of recent job durations (ns; u64::MAX until known). It is fed the
    /// shorter of each two consecutive timed jobs: one job stretched by preemption (a
    /// millisecond on this host) would otherwise count a lane of sub-microsecond jobs as
    /// long for some 300 jobs, and singles would spread instead of packing. A real change
    /// to long jobs shows one job later (after a long one, the lane times every job).
    pub job_ns: u64,
    /// The last timed job's length (u64::MAX before the first).
    last_ns: u64,
    /// Completions so far, and as of the last `may_steal_from` check (`stale_checks`
    /// counts the checks since the count last moved).
    completed: u64,
    seen: u64,
    stale_checks: u32,
    /// Completions as of the last `sweep`.
    swept: u64,
    /// A NEXT_LEVEL lane: it holds only its running job whatever their length (see
    /// `LaneBook::new`).
    directed: bool,
}

impl Default for LaneBook {
    fn default() -> Self {
        LaneBook::new(false)
    }
}

impl LaneBook {
    /// A NEXT_LEVEL lane (`directed`) never holds a job queued behind its running one: its
    /// singles leave their FIFO only when it is idle, as the seed dispatches. A lane's job
    /// length is known only from its past jobs, and a single queued behind one that turns out
    /// long would start ahead of a group head that reserves the lane, and ahead of an older
    /// run's task released meanwhile (the run partition). No other lane can take it back.
    pub fn new(directed: bool) -> Self {
        LaneBook {
            posted: VecDeque::with_capacity(crate::lane::MAILBOX_DEPTH as usize),
            stolen: 0,
            job_ns: u64::MAX,
            last_ns: u64::MAX,
            completed: 0,
            seen: 0,
            stale_checks: 0,
            swept: 0,
            directed,
        }
    }

    /// Entries in the lane's mailbox ring (bounds further posts).
    pub fn occupancy(&self) -> u32 {
        self.posted.len() as u32
    }

    /// Jobs the lane will actually run.
    pub fn load(&self) -> u32 {
        self.occupancy() - self.stolen
    }

    pub fn idle(&self) -> bool {
        self.load() == 0
    }

    /// Whether one more job may be posted: up to the depth its job lengths allow.
    pub fn has_room(&self) -> bool {
        let depth = if self.directed || self.job_ns >= SHORT_JOB_NS {
            LONG_JOB_DEPTH
        } else if self.tiny_jobs() {
            crate::lane::MAILBOX_DEPTH
        } else {
            SHORT_JOB_DEPTH
        };
        self.load() < depth && self.occupancy() < crate::lane::MAILBOX_DEPTH
    }

    /// Runs tiny jobs (known, under PACK_JOB_NS).
    pub fn tiny_jobs(&self) -> bool {
        self.job_ns < PACK_JOB_NS
    }

    /// Whether singles may be packed onto the first lane with room: its jobs are tiny or
    /// still unknown (an unknown lane holds at most LONG_JOB_DEPTH anyway).
    pub fn packs(&self) -> bool {
        self.tiny_jobs() || self.job_ns == u64::MAX
    }

    pub fn long_jobs(&self) -> bool {
        self.job_ns >= SHORT_JOB_NS && self.job_ns != u64::MAX
    }

    pub fn post(&mut self, slot: SlotId, claimed: bool) {
        self.posted.push_back(Posted {
            slot,
            claimed,
            stolen: false,
        });
    }

    /// The lane reported the job at the head of its mailbox; returns whether it was one the
    /// scheduler took back.
    pub fn complete(&mut self, slot: SlotId, ns: Option<u64>) -> bool {
        let p = self
            .posted
            .pop_front()
            .expect("completion without a posted job");
        debug_assert_eq!(p.slot, slot, "lane completions arrive in mailbox order");
        if p.stolen {
            self.stolen -= 1;
        }
        self.completed += 1;
        if let Some(ns) = ns {
            let sample = ns.min(self.last_ns);
            self.last_ns = ns;
            self.job_ns = match self.job_ns {
                u64::MAX => sample,
                avg => (avg * 7 + sample) / 8,
            };
        }
        p.stolen
    }

    /// Whether the jobs queued on this lane may be taken back for an idle one: its jobs are
    /// not tiny, or it has reported nothing for STUCK_CHECKS calls (each call counts one).
    pub fn may_steal_from(&mut self) -> bool {
        if !self.tiny_jobs() {
            return true;
        }
        if self.completed != self.seen {
            self.seen = self.completed;
            self.stale_checks = 0;
        }
        self.stale_checks = self.stale_checks.saturating_add(1);
        self.stale_checks > STUCK_CHECKS
    }

    /// Whether jobs wait behind this lane's running one while it runs tiny jobs: what the
    /// stuck rule watches.
    pub fn queues_tiny(&self) -> bool {
        self.tiny_jobs() && self.load() > 1
    }

    /// An idle lane's look (at most every STUCK_SWEEP while `queues_tiny` and another lane
    /// idles): no completion since the last look makes the next `may_steal_from` true. The
    /// first look of an episode (`first`) only notes where the lane is.
    pub fn sweep(&mut self, first: bool) {
        if !first && self.completed == self.swept {
            self.seen = self.completed;
            self.stale_checks = STUCK_CHECKS;
        }
        self.swept = self.completed;
    }

    /// Take back the first queued job that `claim` (READY -> RUNNING) still wins; the lane
    /// will skip it. A job whose claim fails has started (or was cancelled): left alone.
    pub fn steal(&mut self, mut claim: impl FnMut(SlotId) -> bool) -> Option<SlotId> {
        for p in self.posted.iter_mut().filter(|p| !p.claimed && !p.stolen) {
            if claim(p.slot) {
                p.stolen = true;
                self.stolen += 1;
                return Some(p.slot);
            }
        }
        None
    }
}

/// Where a SUB single goes, among `sub` lanes with room: while every one runs tiny jobs (or
/// none has run yet) the first, otherwise the one with the fewest jobs outstanding. With
/// `one_run` false (several runs in flight) only an idle lane, as the seed dispatches: a job
/// queued in a mailbox has left its run's ready partition. The flag says the lane was
/// chosen as the first with room (packing): it stays the choice for the next singles until
/// it has no room left, whatever is posted to it (no lane before it gains room in a pass).
pub fn sub_lane_for_single(books: &[LaneBook], sub: &[u32], one_run: bool) -> Option<(u32, bool)> {
    if !one_run {
        return sub
            .iter()
            .copied()
            .find(|&l| books[l as usize].idle())
            .map(|l| (l, false));
    }
    let mut with_room = sub
        .iter()
        .copied()
        .filter(|&l| books[l as usize].has_room());
    if sub.iter().all(|&l| books[l as usize].packs()) {
        return with_room.next().map(|l| (l, true));
    }
    with_room
        .min_by_key(|&l| books[l as usize].load())
        .map(|l| (l, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book(jobs_ns: &[u64], outstanding: u64) -> LaneBook {
        let mut b = LaneBook::default();
        for (i, &ns) in jobs_ns.iter().enumerate() {
            b.post(i as SlotId, true);
            b.complete(i as SlotId, Some(ns));
        }
        for i in 0..outstanding {
            b.post(1000 + i, false);
        }
        b
    }

    #[test]
    fn tiny_jobs_pack_onto_the_first_lane_with_room() {
        // Lane 0 busy with tiny jobs, lane 1 never ran: lane 0 takes more, up to a full
        // mailbox; then lane 1.
        let books = [book(&[300; 8], 3), book(&[], 0)];
        assert_eq!(sub_lane_for_single(&books, &[0, 1], true), Some((0, true)));
        let full = crate::lane::MAILBOX_DEPTH as u64;
        let books = [book(&[300; 8], full), book(&[], 0)];
        assert_eq!(sub_lane_for_single(&books, &[0, 1], true), Some((1, true)));
    }

    /// A lane holds up to the depth of its jobs' length: MAILBOX_DEPTH for tiny ones,
    /// SHORT_JOB_DEPTH for short ones, LONG_JOB_DEPTH for long or untimed ones.
    #[test]
    fn a_lanes_depth_follows_its_jobs_length() {
        let depth = |ns: &[u64]| (0..).find(|&n| !book(ns, n).has_room()).unwrap() as u32;
        assert_eq!(depth(&[300; 8]), crate::lane::MAILBOX_DEPTH);
        assert_eq!(depth(&[5_000; 8]), SHORT_JOB_DEPTH);
        assert_eq!(depth(&[3_000_000]), LONG_JOB_DEPTH);
        assert_eq!(depth(&[]), LONG_JOB_DEPTH);
    }

    #[test]
    fn longer_jobs_spread_to_the_least_loaded_lane() {
        let books = [book(&[5_000; 8], 1), book(&[300], 0)];
        assert_eq!(sub_lane_for_single(&books, &[0, 1], true), Some((1, false)));
        let books = [book(&[3_000_000], 1), book(&[], 0)];
        assert_eq!(sub_lane_for_single(&books, &[0, 1], true), Some((1, false)));
        // Unknown lengths hold LONG_JOB_DEPTH, so packing them never queues a job behind
        // another.
        let books = [book(&[], LONG_JOB_DEPTH as u64), book(&[], 0)];
        assert_eq!(sub_lane_for_single(&books, &[0, 1], true), Some((1, true)));
    }

    #[test]
    fn one_stretched_job_does_not_make_a_lane_of_tiny_jobs_long() {
        let mut b = book(&[300; 8], 0);
        b.post(2000, true);
        b.complete(2000, Some(5_000_000));
        assert!(
            b.tiny_jobs(),
            "one preempted job: still tiny ({} ns)",
            b.job_ns
        );
        for (i, ns) in [300, 5_000_000, 300].into_iter().enumerate() {
            b.post(2001 + i as SlotId, true);
            b.complete(2001 + i as SlotId, Some(ns));
            assert!(
                b.tiny_jobs(),
                "isolated long jobs: still tiny ({} ns)",
                b.job_ns
            );
        }
        // Two long jobs in a row are a change of regime.
        for i in 0..2 {
            b.post(3000 + i, true);
            b.complete(3000 + i, Some(50_000_000));
        }
        assert!(
            b.long_jobs(),
            "two long jobs in a row: long ({} ns)",
            b.job_ns
        );
    }

    #[test]
    fn a_lane_of_tiny_jobs_is_robbed_only_when_it_stops_reporting() {
        let mut long = book(&[50_000], 2);
        assert!(long.may_steal_from());
        let mut b = book(&[300; 8], 3);
        for _ in 0..STUCK_CHECKS {
            assert!(!b.may_steal_from());
        }
        assert!(b.may_steal_from(), "no completion for STUCK_CHECKS checks");
        // A completion is progress: the count starts over.
        b.complete(1000, Some(300));
        assert!(!b.may_steal_from());
    }

    #[test]
    fn two_sweeps_without_a_completion_mark_a_lane_stuck() {
        let mut b = book(&[300; 8], 3);
        b.sweep(true);
        assert!(!b.may_steal_from(), "one look is no interval");
        b.complete(1000, Some(300));
        b.sweep(false);
        assert!(!b.may_steal_from(), "a completion between the looks");
        b.sweep(false);
        assert!(b.may_steal_from(), "nothing between two looks");
    }
}
