//! The Orchestrator (Orchestrator seed §1-8b): builds a run's DAG on one thread.
//!
//! Every submit follows the seed's 7 steps: validate everything that can be validated
//! before any state changes, claim a slot (and its heap slab) from the Ring, charge it to the
//! run (the ownership boundary), register and charge its scope reference, collect explicit
//! deps and walk the tags against the TensorMap, wire onto each producer under that
//! producer's lock, then publish the live-fanin count together with the transition out of
//! BUILDING.

use crate::callable::Callable;
use crate::callable::{self, CallableKind, Entry};
use crate::error::{err, Error, Result, Status};
use crate::ring::{
    align_up, first_id_of_seq, ClaimError, HeapClaim, HeapError, HeapRings, MemberArgs, SlotKind,
};
use crate::run::{Run, RunId, RunRef};
use crate::scheduler::completion::{consume_all, enqueue_ready, propagate_pending, retire};
use crate::scope::{Scope, ScopeError, MAX_SCOPE_DEPTH};
use crate::slot::{Attach, Claim, Publish, Route, SlotId, ROUTE_GROUP, ROUTE_SINGLE, ROUTE_SUB};
use crate::task::{
    dense_bytes, dtype_size, CallConfig, DepKind, Tag, TaskArgs, TaskHandle, Tensor,
    MAX_TENSOR_DIMS,
};
use crate::view::Footprint;
use crate::worker::Engine;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
    /// Scratch: footprint of each tensor of the submit in progress (None: touches nothing).
    footprints: Vec<Option<Footprint>>,
    /// Scratch: target lane indexes of the submit in progress.
    targets: Vec<u32>,
    /// Resolved callables (registry entries are never removed, so the cache never goes stale).
    callables: std::collections::HashMap<[u8; 32], &'static Entry>,
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
            footprints: Vec::new(),
            targets: Vec::new(),
            callables: std::collections::HashMap::new(),
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
            return err(
                Status::WrongState,
                format!("run {} is still open for submission; close it first", r.id),
            );
        }
        if self.e.stopping() {
            return err(Status::WrongState, "the worker is closing");
        }
        let run = Arc::new(Run::new(
            first_id_of_seq(self.next_seq),
            self.e.run_event.clone(),
        ));
        self.e.runs.insert(run.clone());
        self.scope.open_outer();
        self.owner = thread_token();
        self.e.builder.store(self.owner, Ordering::Release);
        let id = run.id;
        self.run = Some(run);
        Ok(id)
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

    /// Submit one task or group. `members` are the per-member args; `workers` the NEXT_LEVEL
    /// targets (one per member; empty for SUB). Auto-allocated OUTPUT addresses are written
    /// back into the members' tensors on success.
    pub fn submit(
        &mut self,
        kind: SubmitKind,
        callable: &Callable,
        members: &[TaskArgs],
        config: &CallConfig,
        workers: &[i32],
    ) -> Result<TaskHandle> {
        let rr = self.building()?;
        let run = rr.get().expect("the open run");
        let (entry, heap_bytes) = self.validate(kind, callable, members, workers, run)?;

        // Step 1: slot and heap slab (the only blocking point); the slot is the run's after.
        let (sid, slab) = self.claim_slot(rr, heap_bytes)?;
        let slot = self.e.slots.get(sid);
        // SAFETY: the slot is BUILDING and owned by this thread.
        let d = unsafe { slot.data() };
        d.kind = if matches!(kind, SubmitKind::Sub | SubmitKind::SubGroup) {
            SlotKind::Sub
        } else {
            SlotKind::NextLevel
        };
        d.group = matches!(kind, SubmitKind::NextLevelGroup | SubmitKind::SubGroup);
        d.entry = Some(entry);
        d.config = *config;

        // Step 2: move the task data into the slot, carving auto-allocated OUTPUT slabs.
        let mut cursor = slab;
        let mut flat = 0;
        room_for(&mut d.tensors, self.footprints.len());
        for m in members {
            let tensor_start = d.tensors.len() as u32;
            let scalar_start = d.scalars.len() as u32;
            for i in 0..m.num_tensors as usize {
                // SAFETY: validated non-null with num_tensors elements.
                let t = unsafe { &mut *m.tensors.add(i) };
                if t.data.is_null() {
                    let n =
                        align_up(dense_bytes(t.ndim, &t.shape, t.dtype).unwrap_or(0)).unwrap_or(0);
                    t.data = cursor.cast();
                    // SAFETY: the slab holds the sum of these aligned sizes.
                    cursor = unsafe { cursor.add(n as usize) };
                    self.footprints[flat] = Footprint::of(t);
                }
                d.tensors.push(*t);
                flat += 1;
            }
            if m.num_scalars > 0 {
                // SAFETY: validated non-null with num_scalars elements.
                d.scalars.extend_from_slice(unsafe {
                    std::slice::from_raw_parts(m.scalars, m.num_scalars as usize)
                });
            }
            d.members.push(MemberArgs {
                tensor_start,
                tensor_len: m.num_tensors,
                scalar_start,
                scalar_len: m.num_scalars,
            });
        }

        // Step 4 (ahead of output publication, per the ownership rules): scope reference.
        // Every slot holds one until its scope ends, so a producer named later in the same
        // scope is still there to be retained; a long stream bounds its slots in flight by
        // ending nested scopes as it goes.
        // (The scope reference was charged by the claim.)
        self.scope.register(sid);

        // Step 3: explicit deps, then the tag walk.
        self.producers.clear();
        for m in members {
            for i in 0..m.num_deps as usize {
                // SAFETY: validated non-null with num_deps elements.
                let dep = unsafe { &*m.deps.add(i) };
                self.producers
                    .push((dep.handle.slot, dep.kind == DepKind::Retain as u32));
            }
        }
        {
            let mut tm = self.e.tensormap.lock();
            for (t, fp) in d.tensors.iter().zip(self.footprints.iter()) {
                let Some(fp) = fp else { continue };
                let tag = Tag::from_u32(t.tag).expect("validated");
                let producers = &mut self.producers;
                let found = |p| {
                    if p != sid {
                        producers.push((p, true))
                    }
                };
                match (tag.looks_up(), tag.inserts()) {
                    (true, true) => d.outputs.push(tm.lookup_insert(run.id, fp, sid, found)),
                    (true, false) => tm.lookup(run.id, fp, found),
                    (false, true) => d.outputs.push(tm.insert(run.id, fp, sid)),
                    (false, false) => {}
                }
            }
        }

        dedup_producers(&mut self.producers);

        // Step 5: wire onto producers under their locks; count the live ones.
        room_for(&mut d.producers, self.producers.len());
        let mut live = 0;
        let mut poisoned: Option<Arc<str>> = None;
        let mut fan_out = None;
        for &(p, retain) in &self.producers {
            if let Some((c, n)) = self.credit.as_mut().filter(|_| retain) {
                if *c == p && *n > 0 {
                    // COMPLETED, and held there by the credit's own references.
                    *n -= 1;
                    d.producers.push(p);
                    continue;
                }
            }
            match self.e.slots.get(p).core.attach(p, sid, retain) {
                Attach::Live => {
                    live += 1;
                    if retain {
                        d.producers.push(p);
                    }
                }
                Attach::Done => {
                    if retain {
                        d.producers.push(p);
                        if p == self.last_done {
                            fan_out = Some(p);
                        }
                        self.last_done = p;
                    }
                }
                Attach::Failed(m) => {
                    poisoned.get_or_insert(m);
                }
                Attach::Gone => {
                    if let Some(m) = run.consumed_failure(p) {
                        poisoned.get_or_insert(m);
                    }
                }
            }
        }
        if let Some(m) = poisoned {
            let _: Claim = slot.core.claim_failure(sid, &m, &mut Vec::new());
        }
        if let Some(p) = fan_out {
            // This slot's own reference keeps p COMPLETED until it is published.
            return_credit(&self.e, &mut self.credit, &mut self.reclaim);
            if self.e.slots.get(p).core.charge_completed(p, CREDIT) {
                self.credit = Some((p, CREDIT));
            }
        }

        if self.e.trace.on() {
            let label = match kind {
                SubmitKind::NextLevel => "next_level",
                SubmitKind::NextLevelGroup => "next_level_group",
                SubmitKind::Sub => "sub",
                SubmitKind::SubGroup => "sub_group",
            };
            self.e.trace.node(run.id, sid, &entry.name, label);
            for &(p, retain) in &self.producers {
                self.e.trace.edge(run.id, p, sid, retain);
            }
        }

        // Step 6: publication, with the route the scheduler will use.
        let route = Route {
            kind: match kind {
                SubmitKind::NextLevel => ROUTE_SINGLE,
                SubmitKind::NextLevelGroup => ROUTE_GROUP,
                SubmitKind::Sub | SubmitKind::SubGroup => ROUTE_SUB,
            },
            members: members.len() as u32,
            run: run.id,
            lane: self.targets.first().copied().unwrap_or(0),
            targets: (kind == SubmitKind::NextLevelGroup).then(|| Arc::from(&self.targets[..])),
        };
        match slot.core.publish_routed(live, route.clone()) {
            Publish::Ready => enqueue_ready(&self.e, sid, route),
            Publish::Pending => {}
            Publish::Claimed => {
                propagate_pending(&self.e, sid, &mut self.reclaim);
                consume_all(&self.e, &mut self.reclaim);
            }
        }
        Ok(TaskHandle {
            run_id: run.id,
            slot: sid,
        })
    }

    /// Validate a submit completely before any state changes. Returns the executor, the
    /// target lane indexes and the heap bytes to reserve for auto-allocated OUTPUTs; leaves
    /// each tensor's footprint in `self.footprints`.
    fn validate(
        &mut self,
        kind: SubmitKind,
        callable: &Callable,
        members: &[TaskArgs],
        workers: &[i32],
        run: &Run,
    ) -> Result<(&'static Entry, u64)> {
        let cached = match self.last_callable {
            Some(e) if e.ident == *callable => Some(e),
            _ => self
                .callables
                .get(&callable.digest)
                .copied()
                .filter(|e| e.ident == *callable),
        };
        let entry =
            match cached.or_else(|| callable::resolve(callable)) {
                Some(e) if e.ident.kind == CallableKind::Task as u32 => e,
                Some(e) => {
                    return err(
                        Status::UnknownCallable,
                        format!(
                            "callable '{}' is not a task callable (kind {})",
                            e.name, e.ident.kind
                        ),
                    )
                }
                None => return err(
                    Status::UnknownCallable,
                    "callable is not registered in this process (digest/kind/namespace unknown)",
                ),
            };
        if cached.is_none() {
            self.callables.insert(callable.digest, entry);
        }
        self.last_callable = Some(entry);
        if members.is_empty() {
            return err(Status::InvalidArgument, "a group needs at least one member");
        }
        let targets = &mut self.targets;
        targets.clear();
        match kind {
            SubmitKind::NextLevel | SubmitKind::NextLevelGroup => {
                if workers.len() != members.len() {
                    return err(
                        Status::InvalidArgument,
                        format!(
                            "{} members but {} target workers",
                            members.len(),
                            workers.len()
                        ),
                    );
                }
                for (i, &w) in workers.iter().enumerate() {
                    let Some(&lane) = self.e.lane_by_worker.get(&w) else {
                        return err(Status::UnknownWorker, format!("target worker id {w} (member {i}) is not a registered NEXT_LEVEL lane"));
                    };
                    if workers[..i].contains(&w) {
                        return err(
                            Status::DuplicateTarget,
                            format!("target worker id {w} appears twice in the group (member {i})"),
                        );
                    }
                    targets.push(lane);
                }
            }
            SubmitKind::Sub | SubmitKind::SubGroup => {
                let n = self.e.sub_lane_count();
                if n == 0 {
                    return err(Status::UnknownWorker, "the worker has no SUB lanes");
                }
                if members.len() > n {
                    return err(
                        Status::InvalidArgument,
                        format!(
                            "SUB group of {} members but only {n} SUB lanes",
                            members.len()
                        ),
                    );
                }
            }
        }
        self.footprints.clear();
        let mut heap = 0u64;
        for (mi, m) in members.iter().enumerate() {
            if m.reserved != 0 {
                return err(
                    Status::InvalidArgument,
                    format!("member {mi}: reserved field must be zero"),
                );
            }
            if m.num_tensors > 0 && m.tensors.is_null() {
                return err(
                    Status::NullPointer,
                    format!(
                        "member {mi}: tensors is null but num_tensors = {}",
                        m.num_tensors
                    ),
                );
            }
            if m.num_scalars > 0 && m.scalars.is_null() {
                return err(
                    Status::NullPointer,
                    format!(
                        "member {mi}: scalars is null but num_scalars = {}",
                        m.num_scalars
                    ),
                );
            }
            if m.num_deps > 0 && m.deps.is_null() {
                return err(
                    Status::NullPointer,
                    format!("member {mi}: deps is null but num_deps = {}", m.num_deps),
                );
            }
            for i in 0..m.num_tensors as usize {
                // SAFETY: non-null with num_tensors elements, per the API contract.
                let t = unsafe { &*m.tensors.add(i) };
                let bytes = validate_tensor(t, &mut self.footprints).map_err(|msg| {
                    Error::new(
                        Status::InvalidArgument,
                        format!("member {mi}, tensor {i}: {msg}"),
                    )
                })?;
                heap = heap
                    .checked_add(bytes)
                    .ok_or_else(|| Error::new(Status::InvalidArgument, "OUTPUT sizes overflow"))?;
            }
            for i in 0..m.num_deps as usize {
                // SAFETY: non-null with num_deps elements.
                let dep = unsafe { &*m.deps.add(i) };
                if dep.kind > DepKind::Wait as u32 || dep.reserved != 0 {
                    return err(
                        Status::InvalidArgument,
                        format!(
                            "member {mi}, dep {i}: kind {} is not a dagrt_dep_kind",
                            dep.kind
                        ),
                    );
                }
                self.check_handle(&dep.handle, run).map_err(|x| {
                    Error::new(x.status, format!("member {mi}, dep {i}: {}", x.msg))
                })?;
            }
        }
        if heap > self.e.heap.rings[0].size() {
            return Err(heap_error(
                HeapError::TooLarge,
                heap,
                self.e.cfg.heap_ring_size,
            ));
        }
        Ok((entry, heap))
    }

    /// A handle must belong to the run being built and name a task already submitted in it.
    fn check_handle(&self, h: &TaskHandle, run: &Run) -> Result<()> {
        if h.run_id != run.id {
            return self.foreign_run(h.run_id, run.id).map_err(|x| {
                Error::new(
                    x.status,
                    format!(
                        "task handle {{run {}, slot {}}}: {}",
                        h.run_id, h.slot, x.msg
                    ),
                )
            });
        }
        let never = || {
            err(
                Status::StaleHandle,
                format!(
                    "task handle {{run {}, slot {}}} names no task submitted in this run",
                    h.run_id, h.slot
                ),
            )
        };
        if h.slot < run.first_slot
            || h.slot >= first_id_of_seq(self.next_seq)
            || !self.e.slots.contains(h.slot)
        {
            return never();
        }
        // Ids at one table entry only grow, and the entry remembers its last occupants: an id
        // it never held is refused. (An id older than that history cannot be told from one
        // consumed long ago; it is treated as a finished producer.)
        if self.e.slots.get(h.slot).core.issued(h.slot) == Some(false) {
            return never();
        }
        Ok(())
    }

    /// `alloc()`: a runtime-owned buffer as a synthetic COMPLETED slot that owns a heap slab;
    /// INPUT/INOUT tensors on the buffer resolve to it, and it is reclaimed once CONSUMED.
    pub fn alloc(&mut self, shape: &[u64], dtype: u32) -> Result<(*mut u8, TaskHandle)> {
        let rr = self.building()?;
        if shape.len() > MAX_TENSOR_DIMS {
            return err(
                Status::InvalidArgument,
                format!("alloc: ndim {} exceeds {MAX_TENSOR_DIMS}", shape.len()),
            );
        }
        if dtype_size(dtype).is_none() {
            return err(
                Status::InvalidArgument,
                format!("alloc: dtype {dtype} is not a dagrt_dtype"),
            );
        }
        let mut sh = [0u64; MAX_TENSOR_DIMS];
        sh[..shape.len()].copy_from_slice(shape);
        let bytes = dense_bytes(shape.len() as u32, &sh, dtype)
            .filter(|&b| b > 0)
            .ok_or_else(|| {
                Error::new(Status::InvalidArgument, "alloc: empty or overflowing shape")
            })?;
        let aligned = align_up(bytes)
            .ok_or_else(|| Error::new(Status::InvalidArgument, "alloc: size overflows"))?;
        if aligned > self.e.heap.rings[0].size() {
            return Err(heap_error(
                HeapError::TooLarge,
                aligned,
                self.e.cfg.heap_ring_size,
            ));
        }
        let (sid, ptr) = self.claim_slot(rr, aligned)?;
        let slot = self.e.slots.get(sid);
        // SAFETY: BUILDING, owned by this thread.
        let d = unsafe { slot.data() };
        d.kind = SlotKind::Alloc;
        self.scope.register(sid);
        let fp = Footprint::dense(ptr as u64, bytes);
        let key = self.e.tensormap.lock().insert(rr.id, &fp, sid);
        d.outputs.push(key);
        slot.core.complete_synthetic(0); // scope reference charged by the claim
        Ok((
            ptr,
            TaskHandle {
                run_id: rr.id,
                slot: sid,
            },
        ))
    }
}

impl Orchestrator {
    /// Step 1 of a submit or an alloc: a slot for `run` and, when `bytes > 0`, a heap slab in
    /// the ring of the current scope depth (both may wait, up to the timeout). Then the
    /// ownership boundary: the sequence number is issued, the slot is charged to the run and
    /// records it and its slab. A failure leaves nothing behind. Returns the slab (or null).
    fn claim_slot(&mut self, rr: RunRef, bytes: u64) -> Result<(SlotId, *mut u8)> {
        let run = rr.get().expect("the open run");
        let deadline = self.timeout();
        let sid = match self
            .e
            .slots
            .claim(&mut self.free_cache, self.next_seq, run.id, deadline)
        {
            Ok(sid) => sid,
            Err(ClaimError::Full) => return Err(self.window_full()),
            Err(ClaimError::Grow(x)) => return Err(self.window_grow(x)),
        };
        let ring = HeapRings::for_depth(self.scope.current_depth());
        let mut slab = (std::ptr::null_mut(), None);
        if bytes > 0 {
            match self.e.heap.rings[ring].alloc(bytes, deadline) {
                Ok((ptr, seq)) => {
                    let lo = ptr as u64;
                    slab = (
                        ptr,
                        Some(HeapClaim {
                            ring,
                            seq,
                            lo,
                            hi: lo + bytes,
                        }),
                    );
                }
                Err(x) => {
                    self.e.slots.unclaim(sid);
                    return Err(heap_error(x, bytes, self.e.cfg.heap_ring_size));
                }
            }
        }
        self.next_seq += 1;
        run.register_slot();
        // SAFETY: the slot is BUILDING and owned by this thread.
        let d = unsafe { self.e.slots.get(sid).data() };
        // The previous occupant's data is reset here, not when it was consumed (see SlotData).
        d.clear();
        d.run = rr;
        d.heap = slab.1;
        Ok((sid, slab.0))
    }

    /// The slots in use reached a chunk of the table not yet built, and the system would not
    /// commit its memory (the submit leaves nothing behind, so the caller may retry).
    #[cold]
    fn window_grow(&self, x: std::io::Error) -> Error {
        Error::new(
            Status::System,
            format!(
                "task window: no memory for more slots ({} in use of {}): {x}",
                self.e.slots.live(),
                self.e.slots.window()
            ),
        )
    }

    fn window_full(&self) -> Error {
        Error::new(
            Status::WindowFull,
            format!(
                "task window full (all {} slots in flight for {} ms)",
                self.e.slots.window(),
                self.e.cfg.timeout_ms
            ),
        )
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

/// Room for `n` items in a slot's just-cleared vector: one allocation, not one per doubling,
/// when a fresh slot's inline room is too small (a reused slot's, or the inline room, is
/// checked against a constant first).
#[inline]
fn room_for<A: smallvec::Array>(v: &mut smallvec::SmallVec<A>, n: usize) {
    if n > v.inline_size() && n > v.capacity() {
        v.reserve_exact(n);
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

/// Repeated producers collapse to one edge; retention wins if any path asked for it.
fn dedup_producers(v: &mut Vec<(SlotId, bool)>) {
    if v.len() < 2 {
        return;
    }
    // A merge sort: producers arrive as a few ascending runs (ids grow with submission, and
    // tensors tend to be listed in the order they were written), which it merges in linear
    // time. W3's reducer lists its 10000 producers as two runs (c[n-1] first); the quicksort
    // of `sort_unstable` spent 1.5 million instructions on them, this about 0.1 million.
    v.sort_by_key(|e| e.0);
    let mut w = 0;
    for r in 0..v.len() {
        if w > 0 && v[w - 1].0 == v[r].0 {
            v[w - 1].1 |= v[r].1;
        } else {
            v[w] = v[r];
            w += 1;
        }
    }
    v.truncate(w);
}

fn heap_error(x: HeapError, bytes: u64, ring_size: u64) -> Error {
    match x {
        HeapError::Exhausted => Error::new(Status::HeapExhausted, format!("HeapRing exhausted, increase heap_ring_size on Worker (needed {bytes} bytes; heap_ring_size = {ring_size})")),
        HeapError::TooLarge => Error::new(Status::HeapExhausted, format!("HeapRing exhausted, increase heap_ring_size on Worker ({bytes} bytes can never fit; heap_ring_size = {ring_size})")),
    }
}

/// Check one tensor; pushes its footprint onto `fps` (None: touches nothing, NO_DEP, or an
/// auto-allocated OUTPUT whose footprint is known only after allocation) and returns the heap
/// bytes it needs. (In place: a footprint is 168 bytes, and a submit of several tensors
/// would otherwise move each one through two results.)
fn validate_tensor(
    t: &Tensor,
    fps: &mut Vec<Option<Footprint>>,
) -> std::result::Result<u64, String> {
    let tag = Tag::from_u32(t.tag).ok_or_else(|| format!("tag {} is not a dagrt_tag", t.tag))?;
    if t.ndim as usize > MAX_TENSOR_DIMS {
        return Err(format!("ndim {} exceeds {MAX_TENSOR_DIMS}", t.ndim));
    }
    if dtype_size(t.dtype).is_none() {
        return Err(format!("dtype {} is not a dagrt_dtype", t.dtype));
    }
    if t.reserved != 0 {
        return Err("reserved field must be zero".into());
    }
    if t.data.is_null() {
        if tag != Tag::Output {
            return Err("null data pointer (only an OUTPUT tensor may be auto-allocated)".into());
        }
        if t.strides[..t.ndim as usize].iter().any(|&s| s != 0) || t.offset != 0 {
            return Err("an auto-allocated OUTPUT must be dense (zero strides and offset)".into());
        }
        let n = dense_bytes(t.ndim, &t.shape, t.dtype).ok_or("OUTPUT size overflows")?;
        let bytes = align_up(n).ok_or("OUTPUT size overflows")?;
        fps.push(None); // computed after allocation
        return Ok(bytes);
    }
    if tag == Tag::NoDep {
        fps.push(None);
        return Ok(0);
    }
    fps.push(Footprint::of(t));
    // No footprint for a view with elements: its extent overflows the address space.
    if fps.last() == Some(&None) && t.shape[..t.ndim as usize].iter().all(|&s| s > 0) {
        return Err("view extent overflows the address space".into());
    }
    Ok(0)
}
