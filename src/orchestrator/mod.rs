//! The Orchestrator (Orchestrator seed §1-8b): builds a run's DAG on one thread.
//!
//! Every submit follows the seed's 7 steps: validate everything that can be validated
//! before any state changes, claim a slot (and its heap slab) from the Ring, charge it to the
//! run (the ownership boundary), register and charge its scope reference, collect explicit
//! deps and walk the tags against the TensorMap, wire onto each producer under that
//! producer's lock, then publish the live-fanin count together with the transition out of
//! BUILDING.

use crate::callable::Entry;
use crate::error::{err, Error, Result, Status};
use crate::ring::{first_id_of_seq, LAST_SEQ};
use crate::run::{Run, RunId, RunRef};
use crate::scheduler::completion::{consume_all, retire};
use crate::scope::{Scope, ScopeError, MAX_SCOPE_DEPTH};
use crate::slot::{Claim, SlotId};
use crate::view::Footprint;
use crate::worker::Engine;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod submit;
mod validate;

/// A per-thread token: identifies the thread building a run.
pub(crate) fn thread_token() -> u64 {
    // Token source: distinct per thread, never 0 (0 means "no builder").
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local!(static TOKEN: u64 = NEXT.fetch_add(1, Ordering::Relaxed));
    TOKEN.with(|t| *t)
}

/// Which kind of submit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitKind {
    NextLevel,
    NextLevelGroup,
    Sub,
    SubGroup,
}

pub struct Orchestrator {
    e: Arc<Engine>,
    run: Option<Arc<Run>>,
    owner: u64,
    scope: Scope,
    /// Sequence number of the next slot id (the id's high bits).
    next_seq: u64,
    /// Scratch: (producer, retain) of the submit in progress, deduplicated.
    producers: Vec<(SlotId, bool)>,
    /// Scratch for the submit: owners of the heap slabs its reads touch (held, not waited for).
    holds: Vec<SlotId>,
    /// Scratch: footprint of each tensor of the submit in progress (None: touches nothing).
    footprints: Vec<Option<Footprint>>,
    /// Scratch: target lane indexes of the submit in progress.
    targets: Vec<u32>,
    /// Resolved callables (registry entries are never removed, so the cache never goes stale).
    callables: crate::callable::DigestMap<&'static Entry>,
    /// Scratch: slots this thread consumed, reclaimed in one batch.
    reclaim: Vec<SlotId>,
    /// The callable of the previous submit: graphs mostly repeat a few callables in runs.
    last_callable: Option<&'static Entry>,
    /// Free slot-table indexes taken from the shared free list in one go (the orchestrator
    /// is the only claimer).
    free_cache: Vec<u32>,
    /// Spare lifetime references on one COMPLETED producer that consumer after consumer
    /// retains (a fan-out, like W3's 10000 readers of X): charged CREDIT at a time under its
    /// lock and handed out without it. Per consumer, the submitting thread took the lock
    /// line the lanes take to release the same producer; retention cost W3 a fifth of its
    /// time (10 interleaved rounds without it, as an experiment: 0.80). Only a producer its
    /// scope still holds gets a credit, and the credit is given back at every scope end and
    /// at close: the spare references never keep a slot a moment longer than its scope
    /// reference does.
    credit: Option<(SlotId, i32)>,
    /// The last producer a retaining consumer found COMPLETED: found again by the next
    /// one, it gets a credit.
    last_done: SlotId,
}

/// Sequence numbers after which `begin_run` renumbers the tasks from 1 if it finds the worker
/// quiescent: half of what a slot id can carry, so a worker that is never quiescent for that
/// long still has the other half before it refuses submits (`ring::LAST_SEQ`).
const RENUMBER_AFTER: u64 = LAST_SEQ / 2;

/// References charged to a fan-out's producer at a time (see `Orchestrator::credit`).
const CREDIT: i32 = 64;

impl Orchestrator {
    pub fn new(e: Arc<Engine>) -> Orchestrator {
        Orchestrator {
            e,
            run: None,
            owner: 0,
            scope: Scope::default(),
            next_seq: 1,
            producers: Vec::new(),
            holds: Vec::new(),
            footprints: Vec::new(),
            targets: Vec::new(),
            callables: Default::default(),
            last_callable: None,
            reclaim: Vec::new(),
            free_cache: Vec::new(),
            credit: None,
            last_done: 0,
        }
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.e
    }

    /// The run being built, checked against the calling thread. Uncounted: `self.run` holds
    /// it for as long as the orchestrator builds it, and a submit is one counted clone and
    /// drop fewer on a line the run's other users read.
    fn building(&self) -> Result<RunRef> {
        match &self.run {
            None => err(
                Status::WrongState,
                "no run is open for submission (call dagrt_begin_run first)",
            ),
            Some(r) if self.owner != thread_token() => err(
                Status::WrongThread,
                format!(
                    "run {} is being built on another thread; the orchestrator is single-threaded",
                    r.id
                ),
            ),
            Some(r) => Ok(RunRef::of(r)),
        }
    }

    pub fn current_run(&self) -> Option<RunId> {
        self.run.as_ref().map(|r| r.id)
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.e.cfg.timeout_ms as u64)
    }

    /// Open a run: its fence, its outer scope, this thread as its builder.
    pub fn begin_run(&mut self) -> Result<RunId> {
        if let Some(r) = &self.run {
            // Another thread's run, begun while this call waited for the orchestrator lock
            // (the lock-free builder check in front of it saw none yet).
            if self.owner != thread_token() {
                return err(
                    Status::WrongThread,
                    format!(
                        "run {} is being built on another thread; the orchestrator is \
                         single-threaded",
                        r.id
                    ),
                );
            }
            return err(
                Status::WrongState,
                format!("run {} is still open for submission; close it first", r.id),
            );
        }
        // (A close sets `closing` before `stop`.)
        if self.e.closing.load(Ordering::Acquire) {
            return err(Status::WrongState, "the worker is closing");
        }
        if self.next_seq > RENUMBER_AFTER {
            self.renumber_if_quiescent();
        }
        let run = Arc::new(Run::new(
            first_id_of_seq(self.next_seq),
            self.e.run_event.clone(),
            self.e.runs.in_flight.clone(),
        ));
        self.e.runs.insert(run.clone());
        self.scope.open_outer();
        self.owner = thread_token();
        self.e.builder.store(self.owner, Ordering::Release);
        let id = run.id;
        self.run = Some(run);
        Ok(id)
    }

    /// Orchestrator seed §5: task ids are unique within a compaction interval, and a
    /// globally quiescent worker (no registered run, no live slot) may start over. Ids then
    /// restart from 1 and every table entry forgets the ids it held; a handle of an earlier
    /// run names a released run and is refused before its slot is looked at. Nothing that
    /// names an old id may remain: the role's queues hold only cancelled tasks' entries by
    /// then, and are dropped. Not quiescent: tried again at the next `begin_run`.
    fn renumber_if_quiescent(&mut self) {
        let e = self.e.clone();
        if !e.runs.is_empty() || e.slots.live() != 0 {
            return;
        }
        // The role's lock keeps the scheduler's passes out while its queues are dropped. (No
        // role state yet: the scheduler thread has not started, and nothing names an id.)
        let mut role = e.sched.lock().unwrap_or_else(|p| p.into_inner());
        // (No slot can turn live meanwhile: this thread is the only claimer.)
        if role.as_mut().is_some_and(|s| !s.forget_dead_work()) {
            return;
        }
        for slot in e.slots.iter() {
            slot.core.forget_ids();
        }
        self.next_seq = 1;
        self.last_done = 0;
        debug_assert!(self.credit.is_none());
    }

    /// For stress tests: move the task ids past the point where `begin_run` renumbers a
    /// quiescent worker, so that path is taken at every quiescent run start.
    #[doc(hidden)]
    pub fn ids_past_renumbering(&mut self) {
        self.next_seq = self.next_seq.max(RENUMBER_AFTER + 1);
    }

    fn check_run_id(&self, run_id: RunId) -> Result<Arc<Run>> {
        let id = self.building()?.id;
        if id != run_id {
            return self.foreign_run(run_id, id);
        }
        Ok(self.run.clone().expect("building() saw it"))
    }

    fn foreign_run<T>(&self, run_id: RunId, current: RunId) -> Result<T> {
        if self.e.runs.get(run_id).is_some() {
            err(
                Status::ForeignHandle,
                format!("run {run_id} is not the run being built (run {current})"),
            )
        } else if crate::run::is_live_anywhere(run_id) {
            err(
                Status::ForeignHandle,
                format!("run {run_id} belongs to another worker (building run {current})"),
            )
        } else {
            err(
                Status::StaleHandle,
                format!("run {run_id} is not a live run (released, or never begun)"),
            )
        }
    }

    /// Close submission: end the outer scope (releasing its references) and drop the run's
    /// submission hold on its fence.
    pub fn close_run_submission(&mut self, run_id: RunId) -> Result<()> {
        let run = self.check_run_id(run_id)?;
        if self.scope.depth() > 1 {
            return err(
                Status::ScopeUnbalanced,
                format!(
                    "{} nested scope(s) still open at close of run {run_id}",
                    self.scope.depth() - 1
                ),
            );
        }
        let e = self.e.clone();
        // Nothing pushed may wait for a doorbell the orchestrator would ring at its next push.
        e.ready_in.ring();
        run.seal();
        let _ = self.end_scope(true);
        run.close(|| e.tensormap.lock().drop_run(run.id));
        self.run = None;
        self.owner = 0;
        self.e.builder.store(0, Ordering::Release);
        Ok(())
    }

    /// Fail submission (the seed's cancel_unstarted_run): `msg` becomes the run's failure;
    /// every slot of the run that has not started is claimed FAILED and counted cancelled,
    /// running tasks finish, and submission is closed so the run's fence can resolve.
    pub fn fail_run_submission(&mut self, run_id: RunId, msg: &str) -> Result<()> {
        let run = self.check_run_id(run_id)?;
        let msg: Arc<str> = Arc::from(msg);
        run.record_submission_failure(&msg);
        self.cancel_unstarted(&run, &msg);
        self.end_open_scopes();
        self.close_run_submission(run_id)
    }

    /// Claim every unstarted slot of `run`. All claims (and the takeover of a failure claimed
    /// while BUILDING) happen first; only then the non-repeatable reference releases. The
    /// consumers of a cancelled slot are later slots of the same run (edges never cross runs),
    /// so this same pass claims them; a consumer that a completing producer poisons first is
    /// retired by that path instead.
    fn cancel_unstarted(&mut self, run: &Run, msg: &Arc<str>) {
        let mut claimed = Vec::new();
        let mut edges = Vec::new();
        for slot in self.e.slots.iter() {
            let (id, owner) = slot.core.ident();
            if owner != run.id {
                continue;
            }
            let core = &slot.core;
            match core.claim_failure(id, msg, &mut edges) {
                Claim::Won => claimed.push(id),
                Claim::Building => {
                    if core.take_pending_propagation(&mut edges) {
                        claimed.push(id);
                    }
                }
                Claim::Lost => {
                    if core.take_pending_propagation(&mut edges) {
                        claimed.push(id);
                    }
                }
            }
            edges.clear();
        }
        for &id in &claimed {
            run.count_cancelled();
            retire(&self.e, id, &mut self.reclaim);
        }
        consume_all(&self.e, &mut self.reclaim);
        // Cancelled READY slots may still sit in the scheduler's queues: a pass drops them
        // (and releases any reservation a cancelled group head held).
        self.e.sched_event.notify();
    }

    /// Fail the open run, whatever thread built it (the worker is being freed).
    pub fn abandon_open_run(&mut self, msg: &str) {
        if let Some(run) = self.run.clone() {
            self.owner = thread_token();
            let _ = self.fail_run_submission(run.id, msg);
        }
    }

    /// End every nested scope still open (used when an orchestration callback returns).
    pub fn end_open_scopes(&mut self) {
        while self.scope.depth() > 1 {
            let _ = self.end_scope(false);
        }
    }

    /// End the innermost scope (`outer`: the run's outer scope, at close), releasing its
    /// slots' scope references. The fan-out credit goes back first: its producer may be one
    /// of them, and a credit never outlives its producer's scope (`Orchestrator::credit`).
    fn end_scope(&mut self, outer: bool) -> std::result::Result<(), ScopeError> {
        let (e, reclaim) = (&self.e, &mut self.reclaim);
        return_credit(e, &mut self.credit, reclaim);
        let release = |sid, ahead| release_scope_ref(e, sid, ahead, reclaim);
        let ended = if outer {
            self.scope.end_outer(release);
            Ok(())
        } else {
            self.scope.end(release)
        };
        consume_all(e, reclaim);
        ended
    }

    pub fn scope_begin(&mut self) -> Result<()> {
        self.building()?;
        self.scope.begin().map_err(|_| {
            Error::new(
                Status::ScopeTooDeep,
                format!("scope_begin: more than {MAX_SCOPE_DEPTH} nested scopes"),
            )
        })
    }

    pub fn scope_end(&mut self) -> Result<()> {
        self.building()?;
        self.end_scope(false).map_err(|x| match x {
            ScopeError::Unbalanced => Error::new(
                Status::ScopeUnbalanced,
                "scope_end without a matching scope_begin",
            ),
            ScopeError::TooDeep => Error::new(Status::ScopeTooDeep, "scope too deep"),
        })
    }
}

/// A scope's release of `sid`, warming `ahead` (released a few calls later) and consuming in
/// batches small enough that the slots just released are still in cache.
fn release_scope_ref(e: &Engine, sid: SlotId, ahead: Option<SlotId>, reclaim: &mut Vec<SlotId>) {
    if let Some(a) = ahead {
        e.slots.prefetch_id(a);
    }
    if e.slots.get(sid).core.release_scope_ref() {
        reclaim.push(sid);
    }
    if reclaim.len() >= 32 {
        consume_all(e, reclaim);
    }
}

/// Give back the unused references of a credit (`Orchestrator::credit`), consuming its
/// producer if they were the last.
fn return_credit(e: &Engine, credit: &mut Option<(SlotId, i32)>, reclaim: &mut Vec<SlotId>) {
    if let Some((p, n)) = credit.take() {
        if n > 0 && e.slots.get(p).core.release_refs(n) {
            reclaim.push(p);
            consume_all(e, reclaim);
        }
    }
}
