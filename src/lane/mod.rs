//! Worker lanes: how a dispatched task reaches its executor.
//!
//! Only the holder of the scheduler role posts work to a lane (seed invariant 5; the role lock
//! orders successive holders, whichever thread they run on). A lane owns
//! a small mailbox ring; the scheduler counts each lane's outstanding jobs and learns of
//! idleness from the lane's completions, so it never overfills a mailbox. Process, custom and nested
//! lanes (DESIGN §4) will take jobs from the same mailbox and report the same completions.

pub mod thread;

use crate::event::Event;
use crate::run::RunId;
use crate::slot::SlotId;
use crate::spsc::Ring;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A dispatch: one member of one slot.
#[derive(Clone, Copy, Debug, Default)]
pub struct Job {
    pub slot: SlotId,
    pub member: u32,
    /// The scheduler claimed the slot READY -> RUNNING when it posted the job (a job posted
    /// to an idle lane). A job queued behind another is claimed by the lane when it starts,
    /// so cancellation still wins over any job that has not begun.
    pub claimed: bool,
}

/// What a lane reports when a job ends.
#[derive(Debug)]
pub struct Completion {
    pub lane: u32,
    pub slot: SlotId,
    pub member: u32,
    pub failure: Option<Failure>,
    /// How long the executor ran, in ns (sizes the lane's mailbox depth); None when the job
    /// was not timed (skipped, or one of a run of tiny jobs: see `lane::thread::TIME_EVERY`).
    pub ns: Option<u64>,
    /// The lane lost the claim of an unclaimed job (it was cancelled): nothing ran.
    pub skipped: bool,
}

/// A job's failure: its message, and the ticket the lane took from `Engine::failure_tickets`
/// when the job failed (`earlier_ticket` orders them).
#[derive(Clone, Debug)]
pub struct Failure {
    pub msg: Arc<str>,
    pub ticket: u32,
}

/// Whether failure ticket `a` was taken before `b` (tickets wrap; the failures compared are
/// never 2^31 tickets apart).
pub fn earlier_ticket(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
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

/// Jobs a lane can hold at once: the one it runs plus the ones queued behind it. The
/// scheduler posts more than one only to a lane whose recent jobs were short (see
/// `LaneBook::has_room`), so a stream of tiny tasks does not pay a scheduler round trip per task,
/// while long tasks keep the seed's one-job-per-idle-lane placement. This many for tiny jobs
/// (short ones hold `scheduler::SHORT_JOB_DEPTH`): against 8, W4 on 2 SUB lanes took 0.90 and
/// 0.91 of the time in 100 interleaved rounds in each order of the two builds, W1 level, W3
/// 0.97 and 1.15 (`scripts/ab_bench.sh`); 64 against 32, 60 rounds each way: W4 0.84-0.90,
/// W3 1.05-1.09.
pub const MAILBOX_DEPTH: u32 = 32;

/// How long a parked idle lane sleeps before it looks around (`scheduler::idle_sweep`);
/// doubled after each look that finds nothing to watch, up to IDLE_NAP_MAX (an idle worker
/// wakes each lane 50 times a second at most), and back to IDLE_NAP while a lane of tiny jobs
/// holds queued ones. A SUB job queued behind a tiny-job lane's job that turns out long
/// waits for the idle lane's first look and a second one (that lane has not reported since),
/// so this bounds how long an idle SUB lane is left idle with work waiting.
const IDLE_NAP: std::time::Duration = std::time::Duration::from_millis(1);
const IDLE_NAP_MAX: std::time::Duration = std::time::Duration::from_millis(20);

/// The scheduler -> lane handoff: a single-producer (the scheduler role's holder, one at a time
/// under the role lock) single-consumer (lane) ring, with the lane's wake-up.
pub struct Mailbox {
    jobs: Ring<Job, { MAILBOX_DEPTH as usize }>,
    /// Close: the lane exits once its mailbox is empty (Release/Acquire with the last jobs).
    stop: AtomicBool,
    wake: Event,
}

impl Default for Mailbox {
    fn default() -> Self {
        Mailbox {
            jobs: Ring::default(),
            stop: AtomicBool::new(false),
            wake: Event::default(),
        }
    }
}

impl Mailbox {
    /// Scheduler: post a job, without waking the lane: `wake_lane` follows the batch's last
    /// post (each wake-up check costs a SeqCst fence, a store-buffer drain). The scheduler
    /// keeps at most MAILBOX_DEPTH outstanding per lane (its lane book), so a full mailbox
    /// is a broken invariant, not back-pressure.
    pub fn post(&self, job: Job) {
        if self.jobs.push(job).is_err() {
            unreachable!("mailbox overflow (slot {})", job.slot);
        }
    }

    /// Scheduler: wake the lane if it is parked, after its jobs are `post`ed.
    pub fn wake_lane(&self) {
        self.wake.notify_cond();
    }

    /// Whether the lane is asleep waiting for a job, not yet woken (a hint).
    pub fn asleep(&self) -> bool {
        self.wake.asleep_unwoken()
    }

    /// Lane: whether a job is queued behind the one it has just run.
    pub fn has_queued(&self) -> bool {
        !self.jobs.is_empty()
    }

    /// Scheduler: ask a lane with nothing outstanding to exit.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.wake.notify_cond();
    }

    /// Lane: wait for the next job, spinning before it parks; `None` means stop. `idle`
    /// runs, while no job waits, at each of the wait's looks (about every 64 spins, and each
    /// time a parked lane wakes): parked, the lane wakes after IDLE_NAP, then twice as long
    /// each time, up to IDLE_NAP_MAX; while `idle` says it is watching (jobs queued behind a
    /// lane that may be stuck), a longer nap ends at that look and the next ones last IDLE_NAP.
    pub fn next(&self, mut idle: impl FnMut() -> bool) -> Option<Job> {
        let mut budget = crate::event::spin_budget();
        let mut nap = IDLE_NAP;
        let ready = || !self.jobs.is_empty() || self.stop.load(Ordering::Acquire);
        loop {
            let mut watching = false;
            let met = self.wake.wait_napping(
                |look| {
                    // Only when there is nothing to run: a job waiting costs no look.
                    if ready() {
                        return true;
                    }
                    if look && idle() {
                        watching = true;
                        if nap > IDLE_NAP {
                            return true;
                        }
                    }
                    ready()
                },
                budget,
                nap,
            );
            if met && ready() {
                return self.jobs.pop();
            }
            budget = std::time::Duration::ZERO;
            nap = if watching {
                IDLE_NAP
            } else {
                (nap * 2).min(IDLE_NAP_MAX)
            };
        }
    }
}

/// Hand a completion to the scheduler. The ring has room for every job a lane can hold (the
/// scheduler keeps at most MAILBOX_DEPTH outstanding, and one leaves its book only when the
/// completion is drained), so a full ring is a broken invariant, not back-pressure.
pub fn report(e: &crate::worker::Engine, c: Completion) {
    if let Err(c) = e.lanes[c.lane as usize].done.push(c) {
        unreachable!(
            "completion ring overflow (lane {}, slot {})",
            c.lane, c.slot
        );
    }
}

/// A lane as the engine sees it (on lines of its own: two lanes' queues never share one).
#[repr(align(64))]
pub struct Lane {
    pub kind: LaneKind,
    pub mailbox: Mailbox,
    /// Its completions, in job order: the lane produces, the scheduler role consumes.
    pub done: Ring<Completion, { MAILBOX_DEPTH as usize }>,
}

/// Whether any lane has a completion waiting.
pub fn completions_pending(e: &crate::worker::Engine) -> bool {
    e.lanes.iter().any(|l| !l.done.is_empty())
}

thread_local! {
    /// The engine (as an address) and run of the task this lane thread is running, while it
    /// runs one; (0, 0) otherwise.
    static RUNNING: std::cell::Cell<(usize, RunId)> = const { std::cell::Cell::new((0, 0)) };
}

/// Mark the calling lane thread as running a task of `run` on `e`, or (None) as between tasks.
pub(crate) fn set_running(task: Option<(&crate::worker::Engine, RunId)>) {
    let v = task.map_or((0, 0), |(e, r)| (e as *const _ as usize, r));
    RUNNING.with(|c| c.set(v));
}

/// The run of the task the calling thread is running on one of `e`'s lanes, if it is one: a
/// task that waited without bound for that run, or for `e` to close, would wait for itself.
pub fn running_on(e: &crate::worker::Engine) -> Option<RunId> {
    let (at, run) = RUNNING.with(|c| c.get());
    (at == e as *const _ as usize).then_some(run)
}
