//! Thread lane: the registered executor runs on a lane thread of this process.

use super::{Completion, Job};
use crate::ring::SlotKind;
use crate::task::TaskView;
use crate::worker::Engine;
use std::ffi::c_void;
use std::sync::Arc;

/// A lane whose last timed job was tiny (under `PACK_JOB_NS`) times one job in this many.
/// Clock reads (two per job, one per wait) took 16% of the lanes' CPU samples on W1 with 2
/// lanes (perf, cpu-clock), 0.4% with this and the wait's lazy start. The scheduler's
/// job-length estimate only needs to follow a change of regime, and a job that turns out
/// long among tiny ones is the stuck rule's to find, which reads no job time.
const TIME_EVERY: u32 = 8;

/// Which of a lane's jobs are timed (see TIME_EVERY).
#[derive(Default)]
struct JobClock {
    /// The last timed job's length (None until one is).
    last_ns: Option<u64>,
    /// Jobs run untimed since.
    untimed: u32,
}

impl JobClock {
    /// Whether to time the next job.
    fn timed(&self) -> bool {
        let tiny = self
            .last_ns
            .is_some_and(|ns| ns < crate::scheduler::PACK_JOB_NS);
        !tiny || self.untimed + 1 >= TIME_EVERY
    }

    /// A job ran: `ns` is its length if it was timed.
    fn record(&mut self, ns: Option<u64>) {
        match ns {
            Some(_) => (self.last_ns, self.untimed) = (ns, 0),
            None => self.untimed += 1,
        }
    }

    /// Run `job`, timed if its turn; returns its result and its length if timed.
    fn run<T>(&mut self, job: impl FnOnce() -> T) -> (T, Option<u64>) {
        let (r, ns) = if self.timed() {
            let t0 = std::time::Instant::now();
            let r = job();
            (r, Some(t0.elapsed().as_nanos() as u64))
        } else {
            (job(), None)
        };
        self.record(ns);
        (r, ns)
    }
}

/// Body of a lane thread: run jobs until told to stop.
pub fn lane_main(e: Arc<Engine>, idx: u32) {
    let lane = &e.lanes[idx as usize];
    crate::trace::set_lane_thread(&e.trace, idx);
    let mut clock = JobClock::default();
    // An idle lane looks for jobs queued behind another lane's stalled one every
    // STUCK_SWEEP while it spins: with nothing else happening, no pass would (see
    // `scheduler::idle_sweep`).
    let mut looked = std::time::Instant::now();
    let idle = |looked: &mut std::time::Instant| {
        if looked.elapsed() < crate::scheduler::STUCK_SWEEP {
            return false;
        }
        *looked = std::time::Instant::now();
        crate::scheduler::idle_sweep(&e)
    };
    // Whether the last job was long enough to have evicted what the next one reads.
    let mut cold = true;
    // Spin for the next job whatever the jobs' length: a lane of long jobs holds only its
    // running one (see `LONG_JOB_DEPTH`), so its next one comes from the pass its report
    // runs, or another thread's, microseconds later; parked, it would wait for a wake-up.
    while let Some(job) = lane.mailbox.next(|| idle(&mut looked)) {
        if cold {
            e.slots.prefetch_job(job.slot);
        }
        // A job queued behind another is claimed now; losing the claim (it was cancelled or
        // moved to another lane) means it is reported skipped, unrun.
        let ran = job.claimed || e.slots.get(job.slot).core.try_claim_running_id(job.slot);
        let (failure, ns) = if ran {
            clock.run(|| run_job(&e, idx, job))
        } else {
            (None, None)
        };
        let failure = failure.map(|msg| super::Failure {
            msg,
            ticket: e
                .failure_tickets
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        });
        // After a job long enough to have evicted them, warm what the pass this lane runs
        // next touches first: the scheduler role and this slot (see `complete_task`). After
        // tiny jobs they are still warm, and asking for the role's lines could take them
        // from the other lane in the middle of its pass.
        cold = crate::scheduler::left_caches_cold(ns);
        if cold {
            crate::prefetch::write_all(&*e.sched);
            e.slots.prefetch_id(job.slot);
        }
        let failed = failure.is_some();
        crate::lane::report(
            &e,
            Completion {
                lane: idx,
                slot: job.slot,
                member: job.member,
                failure,
                ns,
                skipped: !ran,
            },
        );
        // After a tiny job with another queued behind it, the pass waits for the mailbox to
        // drain: one pass then handles the batch's completions and refills it, instead of a
        // pass per job (W1 ran a pass per task: the lane and scheduler threads' 1762 -> 1139
        // instructions a task, callgrind). The queued job may turn out long (and so may this
        // one, untimed: 7 in 8 tiny-lane jobs are), and the consumers the deferred
        // completion releases must not wait for it: a parked scheduler thread is woken to
        // run the pass (a spinning one sees the completion at its next look).
        if cold || failed || !lane.mailbox.has_queued() {
            crate::scheduler::after_completion(&e, cold);
        } else {
            e.sched_event.notify_cond();
        }
    }
}

/// Where `dagrt_task_fail` leaves its message: the first one given. Locked because threads
/// the executor runs (an OpenMP region inside a kernel) may fail the task at the same time.
pub struct FailSlot {
    pub msg: std::sync::Mutex<Option<String>>,
}

fn run_job(e: &Engine, idx: u32, job: Job) -> Option<Arc<str>> {
    let slot = e.slots.get(job.slot);
    // SAFETY: the slot is RUNNING and dispatched to this lane; while it runs, its data is
    // only read (a group's other lanes too), but for the group book's own cell.
    let d = unsafe { slot.data_ref() };
    debug_assert!(d.kind != SlotKind::Alloc);
    let entry = d.entry?;
    let m = d.members[job.member as usize];
    let tensors = &d.tensors[m.tensor_start as usize..(m.tensor_start + m.tensor_len) as usize];
    let scalars = &d.scalars[m.scalar_start as usize..(m.scalar_start + m.scalar_len) as usize];
    let fail = FailSlot {
        msg: std::sync::Mutex::new(None),
    };
    let view = TaskView {
        tensors: tensors.as_ptr(),
        num_tensors: m.tensor_len,
        num_scalars: m.scalar_len,
        scalars: scalars.as_ptr(),
        config: &d.config,
        worker_id: e.lanes[idx as usize].kind.view_id(),
        member_index: job.member,
        group_size: d.members.len() as u32,
        reserved: 0,
        run_id: d.run.id,
        slot: job.slot,
        private_: &fail as *const FailSlot as *mut c_void,
    };
    let traced = e.trace.on();
    let t0 = if traced { e.trace.now() } else { 0 };
    // The task's own calls into the API can tell that it runs here (`lane::running_on`).
    crate::lane::set_running(Some((e, view.run_id)));
    // SAFETY: the executor was registered for exactly this call shape; `view` and everything
    // it points to outlive the call.
    let rc = unsafe { (entry.exec)(&view, entry.user) };
    crate::lane::set_running(None);
    // The executor has returned, and with it every call it made or waited for.
    let fail_msg = fail.msg.into_inner().unwrap_or_else(|p| p.into_inner());
    if traced {
        let failed = rc != 0 || fail_msg.is_some();
        e.trace.task(
            idx,
            &entry.name,
            view.run_id,
            job.slot,
            job.member,
            t0,
            e.trace.now(),
            failed,
        );
    }
    match (rc, fail_msg) {
        (0, None) => None,
        (_, Some(m)) => Some(Arc::from(format!(
            "task '{}' (slot {}) failed: {m}",
            entry.name, job.slot
        ))),
        (rc, None) => Some(Arc::from(format!(
            "task '{}' (slot {}) failed with code {rc}",
            entry.name, job.slot
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After a tiny job, one job in TIME_EVERY is timed; after a longer one (or before any),
    /// every job is, so a change from tiny to longer jobs shows within TIME_EVERY jobs.
    #[test]
    fn tiny_jobs_are_timed_one_in_time_every() {
        let mut c = JobClock::default();
        // Drive the clock with job lengths: returns which jobs were timed.
        let jobs = |c: &mut JobClock, lengths: &[u64]| -> Vec<bool> {
            lengths
                .iter()
                .map(|&ns| {
                    let t = c.timed();
                    c.record(t.then_some(ns));
                    t
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(jobs(&mut c, &[100]), [true], "the first job is timed");
        let n = TIME_EVERY as usize;
        let every = |k: usize| (1..=k).map(|i| i % n == 0).collect::<Vec<_>>();
        assert_eq!(jobs(&mut c, &vec![100; 2 * n]), every(2 * n));
        // Tiny jobs turn long: the next timed one finds it, then every job is timed.
        let long = crate::scheduler::SHORT_JOB_NS;
        assert_eq!(jobs(&mut c, &vec![long; n]), every(n));
        assert_eq!(jobs(&mut c, &[long, 100]), [true, true]);
        // Just under PACK_JOB_NS counts as tiny again.
        let pack = crate::scheduler::PACK_JOB_NS;
        assert_eq!(jobs(&mut c, &[pack - 1, pack - 1]), [false, false]);
        // The real clock: a timed job reports its length.
        let mut c = JobClock::default();
        let ((), ns) = c.run(|| std::thread::sleep(std::time::Duration::from_millis(1)));
        assert!(ns.is_some_and(|ns| ns >= 1_000_000), "{ns:?}");
    }
}
