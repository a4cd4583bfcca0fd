//! The scheduler's view of each lane: the jobs it posted and has not heard back about, in
//! mailbox order, and how long the lane's recent jobs ran.
//!
//! A lane may hold more than one job (the running one plus queued ones). Queued SUB jobs are
//! not claimed yet, so when another SUB lane goes idle with nothing left in the SUB FIFO the
//! scheduler can take one back: it claims the slot READY -> RUNNING itself and posts it to the
//! idle lane. The original lane then loses the claim and reports the job skipped. That keeps
//! prefetching (which hides the scheduler's wake-up latency behind the running job) from
//! stranding a critical task behind a long one.

use crate::slot::SlotId;
use std::collections::VecDeque;

/// Jobs shorter than this (moving average per lane) are short enough that the handoff
/// dominates: such a lane gets up to MAILBOX_DEPTH jobs at once.
pub const SHORT_JOB_NS: u64 = 20_000;

/// Jobs a lane running long jobs may hold: the running one and the next, so the lane starts
/// the next one without waiting for the scheduler to wake up (~50 us on these machines).
const LONG_JOB_DEPTH: u32 = 2;

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
    /// Moving average of recent job durations (ns; u64::MAX until known).
    pub job_ns: u64,
}

impl Default for LaneBook {
    fn default() -> Self {
        LaneBook {
            posted: VecDeque::with_capacity(crate::lane::MAILBOX_DEPTH as usize),
            stolen: 0,
            job_ns: u64::MAX,
        }
    }
}

impl LaneBook {
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
        let depth = if self.job_ns < SHORT_JOB_NS {
            crate::lane::MAILBOX_DEPTH
        } else {
            LONG_JOB_DEPTH
        };
        self.load() < depth && self.occupancy() < crate::lane::MAILBOX_DEPTH
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
        if let Some(ns) = ns {
            self.job_ns = match self.job_ns {
                u64::MAX => ns,
                avg => (avg * 7 + ns) / 8,
            };
        }
        p.stolen
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
