//! Runs: one submission of a graph, its fence (live slots + the open-submission hold), its
//! terminal result, and the registry that validates run ids handed out to C.

use crate::event::{deadline_after, Event};
use crate::spsc::Padded;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Run ids are unique in the process (not only per worker), so a handle or run id from
/// another worker can never name a run of this one.
pub type RunId = u64;

/// Process-wide run id source: ids never repeat, which is what makes a stale run id detectable.
static NEXT_RUN_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunCounts {
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
}

/// A run's recorded failure: the message, why, and the failed job's ticket when it is a
/// task's own failure.
struct Recorded {
    msg: Arc<str>,
    kind: FailureKind,
    ticket: Option<u32>,
}

/// Why a run failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// A task (or an endpoint) failed.
    Task,
    /// The orchestration callback failed; unstarted tasks were cancelled.
    Orchestration,
}

pub struct Run {
    pub id: RunId,
    /// First slot id of this run: handles below it name an earlier run.
    pub first_slot: u64,
    /// The fence: live slots of the run plus one while submission is open. Terminal at 0.
    /// (Its own line: the orchestrator charges it per submit while lanes count completions
    /// and the submitter reads `id` through the Arc, whose counts share the first line.)
    active: Padded<AtomicI64>,
    /// Submission closed: the hold was dropped (at most once, by the swap in `close`).
    closed: AtomicBool,
    /// Submission is ending: no lookup will read this run's TensorMap again, so consumption
    /// leaves its entries to `drop_run` at the end of the run instead of erasing each one.
    sealed: AtomicBool,
    /// Set once the fence reached zero and the end-of-run cleanup ran.
    finished: AtomicBool,
    /// Per-run task counts (statistics only; no invariant rests on them).
    completed: Padded<AtomicU64>,
    failed: AtomicU64,
    cancelled: AtomicU64,
    /// First failure of the run, reported by every wait; `orchestration` when the run's
    /// submission failed (that message wins over task failures). A task's own failure
    /// carries its ticket (`Engine::failure_tickets`): one that failed earlier but reached
    /// the scheduler later (a pass drains lane by lane) still becomes the message.
    failure: Mutex<Option<Recorded>>,
    /// Worker-wide run event, notified when any run's fence reaches zero.
    done_event: Arc<Event>,
    /// The worker's count of runs begun and not yet finished (`RunRegistry::in_flight`).
    in_flight: Arc<AtomicUsize>,
    /// Failed slots of this run that were already consumed, with their messages: a later
    /// consumer naming one (by handle, or through the TensorMap tombstone it left) is poisoned
    /// rather than treated as satisfied.
    failed_slots: Mutex<HashMap<u64, Arc<str>>>,
}

impl Run {
    pub fn new(first_slot: u64, done_event: Arc<Event>, in_flight: Arc<AtomicUsize>) -> Run {
        in_flight.fetch_add(1, Ordering::AcqRel);
        Run {
            id: NEXT_RUN_ID.fetch_add(1, Ordering::Relaxed),
            first_slot,
            active: Padded(AtomicI64::new(1)),
            closed: AtomicBool::new(false),
            sealed: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            completed: Padded(AtomicU64::new(0)),
            failed: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            failure: Mutex::new(None),
            done_event,
            in_flight,
            failed_slots: Mutex::new(HashMap::new()),
        }
    }

    /// A slot was charged to this run (the ownership boundary of a submit).
    pub fn register_slot(&self) {
        self.active.fetch_add(1, Ordering::AcqRel);
    }

    /// `n` slots of this run reached CONSUMED and were freed (a reclaim batch). `at_end` runs
    /// if that ended the run, before anyone can observe it as done.
    pub fn slots_consumed(&self, n: i64, at_end: impl FnOnce()) {
        self.drop_holds(n, at_end);
    }

    fn drop_hold(&self, at_end: impl FnOnce()) {
        self.drop_holds(1, at_end);
    }

    fn drop_holds(&self, n: i64, at_end: impl FnOnce()) {
        if self.active.fetch_sub(n, Ordering::AcqRel) == n {
            at_end();
            // Once `finished` is visible the run may be released and freed (slots hold it
            // by `RunRef`, not by count): nothing of `self` is touched after the store.
            let ev = Arc::clone(&self.done_event);
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            self.finished.store(true, Ordering::Release);
            ev.notify_cond();
        }
    }

    /// Close submission: drop the submission hold; idempotent. `at_end` as above.
    pub fn close(&self, at_end: impl FnOnce()) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            self.drop_hold(at_end);
        }
    }

    /// No further submit will look up this run's TensorMap (set before the outer scope's
    /// releases, which consume most of a run's slots at once).
    pub fn seal(&self) {
        self.sealed.store(true, Ordering::Release);
    }

    pub fn is_sealed(&self) -> bool {
        self.sealed.load(Ordering::Acquire)
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub fn live_slots(&self) -> i64 {
        let a = self.active.load(Ordering::Acquire);
        if self.is_closed() {
            a
        } else {
            a - 1
        }
    }

    /// Terminal: every slot consumed, submission closed, end-of-run cleanup done.
    pub fn done(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Record a task failure; the first one is the run's message. `ticket`: the failed
    /// job's, when this is its own failure (None for a consumer poisoned by it).
    ///
    /// A poisoned consumer's record can come first: its submit may see the producer FAILED
    /// before the completion that failed it records the producer's own ticket. It holds the
    /// place only until a ticketed record arrives (the producer's own comes in any case), so
    /// an earlier job's failure drained later still wins.
    pub fn record_failure(&self, msg: &Arc<str>, ticket: Option<u32>) {
        let mut f = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        let earlier = match (&*f, ticket) {
            (None, _) => true,
            (
                Some(Recorded {
                    kind: FailureKind::Task,
                    ticket: None,
                    ..
                }),
                Some(_),
            ) => true,
            (
                Some(Recorded {
                    kind: FailureKind::Task,
                    ticket: Some(had),
                    ..
                }),
                Some(t),
            ) => crate::lane::earlier_ticket(t, *had),
            _ => false,
        };
        if earlier {
            *f = Some(Recorded {
                msg: msg.clone(),
                kind: FailureKind::Task,
                ticket,
            });
        }
    }

    /// Record the failure of the run's submission: it becomes the run's message.
    pub fn record_submission_failure(&self, msg: &Arc<str>) {
        let mut f = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        *f = Some(Recorded {
            msg: msg.clone(),
            kind: FailureKind::Orchestration,
            ticket: None,
        });
    }

    /// A failed slot of this run is being consumed.
    pub fn remember_failed(&self, slot: u64, msg: Arc<str>) {
        self.failed_slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(slot, msg);
    }

    /// The failure of a consumed slot of this run, if it failed.
    pub fn consumed_failure(&self, slot: u64) -> Option<Arc<str>> {
        self.failed_slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&slot)
            .cloned()
    }

    pub fn count_completed(&self) {
        self.completed.fetch_add(1, Ordering::Relaxed);
    }
    pub fn count_failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }
    pub fn count_cancelled(&self) {
        self.cancelled.fetch_add(1, Ordering::Relaxed);
    }

    pub fn counts(&self) -> RunCounts {
        RunCounts {
            completed: self.completed.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            cancelled: self.cancelled.load(Ordering::Relaxed),
        }
    }

    /// The terminal result: the first failure message, if any.
    pub fn result(&self) -> Result<(), (Arc<str>, FailureKind)> {
        match &*self.failure.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(r) => Err((r.msg.clone(), r.kind)),
            None => Ok(()),
        }
    }

    /// Wait for the fence; `None` waits forever. True when the run is terminal.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        let deadline = deadline_after(timeout);
        self.done_event.wait_until(|| self.done(), deadline)
    }
}

/// A slot's run, without a reference count: slots are created and consumed at task rate on
/// two threads, and counting them on the run's header would bounce its cache line between
/// them. The fence counts the slot instead, which keeps the run alive: a run leaves the
/// registry only once `done()`, and it is done only after its last slot was consumed.
#[derive(Clone, Copy)]
pub struct RunRef {
    ptr: *const Run,
    pub id: RunId,
}

impl RunRef {
    pub const NONE: RunRef = RunRef {
        ptr: std::ptr::null(),
        id: 0,
    };

    pub fn of(run: &Arc<Run>) -> RunRef {
        RunRef {
            ptr: Arc::as_ptr(run),
            id: run.id,
        }
    }

    /// The run, for a slot that is not yet consumed (callers hold such a slot), or for the
    /// orchestrator while the run is open (it holds the run's `Arc`).
    pub fn get(&self) -> Option<&Run> {
        // SAFETY: non-null only while the slot holding it is charged to the run's fence
        // (set at submit after `register_slot`, cleared when the slot is consumed), and the
        // run is not freed before its fence reaches zero (see the type's comment); or taken
        // by the orchestrator from the `Arc` it keeps while the run is open.
        unsafe { self.ptr.as_ref() }
    }

    pub fn is_none(&self) -> bool {
        self.ptr.is_null()
    }
}

/// Run ids registered by any worker of the process (to tell "another worker's run" from
/// "released").
fn live_anywhere() -> &'static Mutex<std::collections::HashSet<RunId>> {
    static S: std::sync::OnceLock<Mutex<std::collections::HashSet<RunId>>> =
        std::sync::OnceLock::new();
    S.get_or_init(|| {
        crate::fork::register_once();
        Default::default()
    })
}

/// The live run ids' lock, held across a fork (`crate::fork`).
pub(crate) fn hold_for_fork() -> Box<dyn std::any::Any> {
    Box::new(live_anywhere().lock().unwrap_or_else(|p| p.into_inner()))
}

/// Is `id` a registered run of some worker of this process?
pub fn is_live_anywhere(id: RunId) -> bool {
    live_anywhere()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains(&id)
}

/// Runs of one worker, by id. A released run is gone: its id becomes stale.
#[derive(Default)]
pub struct RunRegistry {
    /// Guards the set of live (not yet released) runs: an id found here is a valid run handle.
    runs: Mutex<HashMap<RunId, Arc<Run>>>,
    /// Runs begun and not finished: with more than one, SUB singles go to idle lanes only
    /// (a job packed into a busy lane's mailbox would leave its run's ready partition, and a
    /// later run's job packed there would start ahead of an earlier run's task released
    /// after it: Scheduler seed §1, runs never interleave in a ready queue).
    pub in_flight: Arc<AtomicUsize>,
}

impl RunRegistry {
    pub fn insert(&self, run: Arc<Run>) {
        live_anywhere()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(run.id);
        self.lock().insert(run.id, run);
    }
    pub fn get(&self, id: RunId) -> Option<Arc<Run>> {
        self.lock().get(&id).cloned()
    }
    /// Forget a finished run. A run that is not done stays: its live slots name it by
    /// `RunRef`, uncounted, so it must outlive them (returns whether it was removed).
    pub fn remove_done(&self, id: RunId) -> bool {
        let mut runs = self.lock();
        if !runs.get(&id).is_some_and(|r| r.done()) {
            return false;
        }
        // Out of the process-wide set under the run map's lock: a lookup that misses the map
        // must not then find the id live elsewhere and call this worker's run another's.
        live_anywhere()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        runs.remove(&id);
        true
    }
    pub fn len(&self) -> usize {
        self.lock().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn all(&self) -> Vec<Arc<Run>> {
        self.lock().values().cloned().collect()
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, Arc<Run>>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for RunRegistry {
    fn drop(&mut self) {
        let mut live = live_anywhere().lock().unwrap_or_else(|p| p.into_inner());
        for id in self.lock().keys() {
            live.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> Run {
        Run::new(0, Arc::new(Event::default()), Arc::new(AtomicUsize::new(0)))
    }

    fn message(r: &Run) -> String {
        r.result().unwrap_err().0.to_string()
    }

    /// The first failure in time wins, whatever order the records arrive in, also when a
    /// consumer poisoned by a later failure was recorded before any job's own failure.
    #[test]
    fn first_failure_by_ticket_whatever_the_record_order() {
        let (p, q) = (Arc::from("p failed"), Arc::from("q failed"));
        let r = run();
        r.record_failure(&p, None); // a consumer of p, poisoned at its submit
        r.record_failure(&q, Some(5)); // q failed first, drained after
        r.record_failure(&p, Some(9)); // p's own record
        assert_eq!(message(&r), "q failed");
        let r = run();
        r.record_failure(&q, Some(5));
        r.record_failure(&p, None);
        r.record_failure(&p, Some(9));
        assert_eq!(message(&r), "q failed");
        let r = run();
        r.record_failure(&p, Some(9));
        r.record_failure(&q, Some(5));
        r.record_failure(&q, None);
        assert_eq!(message(&r), "q failed");
    }

    /// A submission failure is the run's message whatever task failures come after it.
    #[test]
    fn submission_failure_stays() {
        let r = run();
        r.record_submission_failure(&Arc::from("callback failed"));
        r.record_failure(&Arc::from("p failed"), Some(1));
        assert_eq!(
            r.result().unwrap_err(),
            (Arc::from("callback failed"), FailureKind::Orchestration)
        );
    }
}
