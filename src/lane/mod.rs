//! Worker lanes: how a dispatched task reaches its executor.
//!
//! The scheduler is the only thread that posts work to a lane (seed invariant 5). A lane owns
//! a one-task mailbox: the scheduler posts only to a lane it knows is idle, the lane marks
//! itself idle *before* it pushes its completion, so the scheduler learns of idleness from
//! the completion itself and never posts over unfinished work. Process, custom and nested
//! lanes (DESIGN §4) will implement the same `Endpoint` contract.

pub mod thread;

use crate::event::Event;
use crate::slot::SlotId;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// A dispatch: one member of one slot.
#[derive(Clone, Copy, Debug, Default)]
pub struct Job {
    pub slot: SlotId,
    pub member: u32,
}

/// What a lane reports when a job ends.
#[derive(Debug)]
pub struct Completion {
    pub lane: u32,
    pub slot: SlotId,
    pub member: u32,
    pub failure: Option<Arc<str>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneKind {
    /// Directed: only tasks targeting this stable worker id run here.
    NextLevel(i32),
    /// Shared: any READY SUB task may run here.
    Sub(u32),
}

impl LaneKind {
    /// The id an executor sees: the stable id, or -1-k for SUB lane k.
    pub fn view_id(self) -> i32 {
        match self {
            LaneKind::NextLevel(id) => id,
            LaneKind::Sub(k) => -1 - k as i32,
        }
    }
}

const IDLE: u32 = 0;
const WORK: u32 = 1;
const STOP: u32 = 2;

/// The scheduler -> lane handoff.
pub struct Mailbox {
    /// IDLE/WORK/STOP. WORK is stored (Release) only by the scheduler after writing `job`;
    /// IDLE only by the lane after it stopped reading `job`.
    state: AtomicU32,
    job: UnsafeCell<Job>,
    wake: Event,
}

// SAFETY: `job` is written by the scheduler only while `state` is IDLE and read by the lane
// only after it observed WORK (Acquire), per the protocol above.
unsafe impl Sync for Mailbox {}

impl Default for Mailbox {
    fn default() -> Self {
        Mailbox {
            state: AtomicU32::new(IDLE),
            job: UnsafeCell::new(Job::default()),
            wake: Event::default(),
        }
    }
}

impl Mailbox {
    /// Scheduler: post a job to an idle lane.
    pub fn post(&self, job: Job) {
        debug_assert_eq!(self.state.load(Ordering::Acquire), IDLE);
        // SAFETY: the lane is idle (the scheduler saw its completion), so nobody reads `job`.
        unsafe { *self.job.get() = job };
        self.state.store(WORK, Ordering::Release);
        self.wake.notify_cond();
    }

    /// Scheduler: ask an idle lane to exit.
    pub fn stop(&self) {
        self.state.store(STOP, Ordering::Release);
        self.wake.notify_cond();
    }

    /// Lane: wait for the next job; `None` means stop.
    pub fn next(&self) -> Option<Job> {
        self.wake
            .wait_until(|| self.state.load(Ordering::Acquire) != IDLE, None);
        match self.state.load(Ordering::Acquire) {
            // SAFETY: WORK observed with Acquire: the scheduler's write of `job` is visible
            // and it will not write again until we store IDLE.
            WORK => Some(unsafe { *self.job.get() }),
            _ => None,
        }
    }

    /// Lane: done with the job (before pushing its completion).
    pub fn set_idle(&self) {
        self.state.store(IDLE, Ordering::Release);
    }
}

/// A lane as the engine sees it.
pub struct Lane {
    pub kind: LaneKind,
    pub mailbox: Mailbox,
}
