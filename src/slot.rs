//! The task slot state machine (Orchestrator seed §8): states, fanin/fanout counters, the
//! BUILDING publication rule, the single failure claim and the fanout-release threshold.
//!
//! Everything here is the part of a slot that several threads touch. Each transition that
//! depends on a counter happens under the slot's `fanout_mu` (`sync`), so a count and the
//! state it implies are one decision. Two transitions are taken without the lock: the
//! scheduler's READY -> RUNNING claim, a compare-exchange that loses to any failure claim,
//! and CONSUMED -> FREE, which nothing else can race.
//! This module is model-checked by `tests/loom_slot.rs` with `--cfg loom`.

use crate::sync::{lock, AtomicU8, Mutex, MutexGuard, Ordering};
use std::sync::Arc;

/// Monotonic task slot id; the table index is `id & mask`.
pub type SlotId = u64;

pub const FREE: u8 = 0;
pub const BUILDING: u8 = 1;
pub const PENDING: u8 = 2;
pub const READY: u8 = 3;
pub const RUNNING: u8 = 4;
pub const COMPLETED: u8 = 5;
pub const FAILED: u8 = 6;
pub const CONSUMED: u8 = 7;

pub fn state_name(s: u8) -> &'static str {
    [
        "FREE",
        "BUILDING",
        "PENDING",
        "READY",
        "RUNNING",
        "COMPLETED",
        "FAILED",
        "CONSUMED",
    ]
    .get(s as usize)
    .copied()
    .unwrap_or("?")
}

/// A consumer registered on a producer: notified when the producer finishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edge {
    pub slot: SlotId,
    /// The consumer holds a lifetime reference on the producer (tensor edges and `add_dep`).
    pub retain: bool,
}

/// Where a READY slot goes and what dispatch needs to know, captured while the slot is
/// BUILDING. The scheduler routes and dispatches from this copy, never from slot data it
/// does not own yet (a READY slot can be cancelled and consumed by another thread).
#[derive(Clone, Debug, Default)]
pub struct Route {
    /// 0: NEXT_LEVEL single, 1: NEXT_LEVEL group, 2: SUB (single or group).
    pub kind: u8,
    /// Members (1 for a single).
    pub members: u32,
    /// Run partition.
    pub run: u64,
    /// Target lane index of a NEXT_LEVEL single.
    pub lane: u32,
    /// Target lane indexes of a NEXT_LEVEL group.
    pub targets: Option<Arc<[u32]>>,
}

pub const ROUTE_SINGLE: u8 = 0;
pub const ROUTE_GROUP: u8 = 1;
pub const ROUTE_SUB: u8 = 2;

/// The counters and lists guarded by `fanout_mu`. Ordered so the fields every reference
/// release and state change reads (id, run, the four counts, the failure) share the lock's
/// cache line; the consumer list, route and id history follow.
#[derive(Default)]
#[repr(C)]
pub struct SlotSync {
    /// Id of the task occupying the slot; checked by `attach` so a stale id is "gone".
    pub id: SlotId,
    /// Run of the task occupying the slot (for cancellation's sweep).
    pub run: u64,
    pub fanin_count: i32,
    pub fanin_released: i32,
    /// Lifetime references charged: retaining consumers + the scope reference. Only grows
    /// while the slot lives, one per retaining consumer, so a producer read by a long stream
    /// (a weights buffer in the outer scope) passes 2^31 within an hour: 64 bits.
    pub fanout_total: i64,
    /// Releases so far, including the slot's own self-release.
    pub fanout_released: i64,
    pub failure: Option<Arc<str>>,
    /// Failure was claimed while BUILDING: the submitting thread (or cancellation) propagates.
    pub failure_propagation_pending: bool,
    /// The scope reference is still outstanding (the task's scope has not ended).
    pub scope_held: bool,
    pub consumers: Vec<Edge>,
    /// Routing and dispatch facts, set before publication.
    pub route: Route,
    /// Ids of the last occupants (most recent last) and the largest id that fell out of
    /// this history: with ids at one entry only growing, a handle id above that and not in
    /// the history was never issued here.
    pub history: [SlotId; 4],
    pub evicted: SlotId,
    /// `evicted` before the latest claim, so a claim that never reaches the user can be
    /// taken back out of the history (`unissue`).
    pub evicted_before: SlotId,
}

/// The shared part of a slot.
#[repr(C)]
pub struct SlotCore {
    /// The slot state; every change except READY -> RUNNING and CONSUMED -> FREE happens
    /// under `sync`.
    pub state: AtomicU8,
    /// `fanout_mu`: publication rule, failure claim and fanout-release threshold.
    pub sync: Mutex<SlotSync>,
}

/// Result of wiring a consumer onto a producer (submit step 5).
#[derive(Debug, PartialEq, Eq)]
pub enum Attach {
    /// The producer has not finished: one live fanin.
    Live,
    /// The producer completed: satisfied; the reference was charged if `retain`.
    Done,
    /// The producer failed: the consumer must poison itself.
    Failed(Arc<str>),
    /// The producer was consumed (or the id is stale): already satisfied, nothing charged.
    Gone,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Publish {
    Ready,
    Pending,
    /// A failure claim won while BUILDING: the submitter must propagate.
    Claimed,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// The slot was already running, terminal or consumed.
    Lost,
    /// Won from BUILDING: the submitting thread (or cancellation) propagates.
    Building,
    /// Won from PENDING/READY: the claimant propagates; consumers appended to `out`.
    Won,
}

impl Default for SlotCore {
    fn default() -> Self {
        SlotCore {
            state: AtomicU8::new(FREE),
            sync: Mutex::new(SlotSync::default()),
        }
    }
}

impl SlotCore {
    pub fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }

    /// The slot's `sync`, locked (for inspection: tests read the consumer lists and the id
    /// with it, under loom's mutex as well as std's).
    pub fn lock_sync(&self) -> MutexGuard<'_, SlotSync> {
        lock(&self.sync)
    }

    /// FREE -> BUILDING for task `id` (orchestrator thread only).
    pub fn begin_building(&self, id: SlotId) {
        self.begin_building_for(id, 0, 0);
    }

    /// FREE -> BUILDING for task `id` of `run`, charged `refs` lifetime references up front
    /// (the scope reference: one lock for the claim instead of two).
    pub fn begin_building_for(&self, id: SlotId, run: u64, refs: i32) {
        let mut s = lock(&self.sync);
        s.evicted_before = s.evicted;
        if s.history[0] != 0 {
            s.evicted = s.history[0];
        }
        let h = s.history;
        s.history = [h[1], h[2], h[3], id];
        s.id = id;
        s.run = run;
        s.fanin_count = 0;
        s.fanin_released = 0;
        s.fanout_total = refs.into();
        s.fanout_released = 0;
        s.consumers.clear();
        s.failure = None;
        s.failure_propagation_pending = false;
        s.scope_held = refs > 0;
        self.state.store(BUILDING, Ordering::Release);
    }

    /// Undo `begin_building_for(id)` for a claim rolled back before its handle was returned:
    /// the id was never issued, so a handle forged with it must still be rejected.
    pub fn unissue(&self, id: SlotId) {
        let mut s = lock(&self.sync);
        debug_assert_eq!(s.history[3], id);
        // The entry that fell out was non-zero exactly when the claim moved `evicted`.
        let out = if s.evicted != s.evicted_before {
            s.evicted
        } else {
            0
        };
        let h = s.history;
        s.history = [out, h[0], h[1], h[2]];
        s.evicted = s.evicted_before;
        s.id = s.history[3];
    }

    /// Charge one lifetime reference (the scope reference) to a slot being built.
    pub fn charge_ref(&self) {
        lock(&self.sync).fanout_total += 1;
    }

    /// Wire `consumer` onto this producer (which must be task `id`), under `fanout_mu`.
    pub fn attach(&self, id: SlotId, consumer: SlotId, retain: bool) -> Attach {
        let mut s = lock(&self.sync);
        if s.id != id {
            return Attach::Gone;
        }
        match self.state.load(Ordering::Acquire) {
            // A failed producer being (or already) reclaimed still poisons: its failure
            // stays with the id until the slot's next occupant begins.
            FREE | CONSUMED => match &s.failure {
                Some(f) => Attach::Failed(f.clone()),
                None => Attach::Gone,
            },
            FAILED => Attach::Failed(s.failure.clone().unwrap_or_else(|| Arc::from("failed"))),
            COMPLETED => {
                if retain {
                    s.fanout_total += 1;
                }
                Attach::Done
            }
            _ => {
                s.consumers.push(Edge {
                    slot: consumer,
                    retain,
                });
                if retain {
                    s.fanout_total += 1;
                }
                Attach::Live
            }
        }
    }

    /// A lifetime reference on slot `id` without an edge (a reader of the heap slab it owns,
    /// whose bytes another writer may have produced): the reader neither waits for it nor is
    /// poisoned by it, but the slab stays allocated until the reader releases the reference.
    /// False when the slot is no longer `id`'s or is being reclaimed (nothing charged).
    pub fn hold(&self, id: SlotId) -> bool {
        let mut s = lock(&self.sync);
        if s.id != id || matches!(self.state.load(Ordering::Acquire), FREE | CONSUMED) {
            return false;
        }
        s.fanout_total += 1;
        true
    }

    /// Submit step 6: publish `live` fanins together with the transition out of BUILDING.
    pub fn publish(&self, live: i32) -> Publish {
        self.publish_with(live, None)
    }

    /// `publish`, recording the slot's route under the same lock.
    pub fn publish_routed(&self, live: i32, route: Route) -> Publish {
        self.publish_with(live, Some(route))
    }

    fn publish_with(&self, live: i32, route: Option<Route>) -> Publish {
        let mut s = lock(&self.sync);
        if let Some(r) = route {
            s.route = r;
        }
        s.fanin_count = live;
        let ready = s.fanin_released >= live;
        let to = if ready { READY } else { PENDING };
        match self
            .state
            .compare_exchange(BUILDING, to, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) if ready => Publish::Ready,
            Ok(_) => Publish::Pending,
            Err(_) => Publish::Claimed,
        }
    }

    /// A producer completed: count the release; true if this call moved PENDING -> READY
    /// (exactly one caller ever sees true, and the caller enqueues).
    pub fn release_fanin(&self, id: SlotId) -> bool {
        self.release_fanin_route(id).is_some()
    }

    /// `release_fanin`, returning the slot's route (read under the same lock) when this call
    /// made it READY.
    pub fn release_fanin_route(&self, id: SlotId) -> Option<Route> {
        let mut s = lock(&self.sync);
        if s.id != id {
            return None;
        }
        s.fanin_released += 1;
        if s.fanin_released >= s.fanin_count && self.state.load(Ordering::Acquire) == PENDING {
            self.state.store(READY, Ordering::Release);
            return Some(s.route.clone());
        }
        None
    }

    /// The failure claim: the only way a not-yet-running slot becomes FAILED. The winner
    /// writes the message; on `Won` the consumer snapshot is appended to `out`.
    pub fn claim_failure(&self, id: SlotId, msg: &Arc<str>, out: &mut Vec<Edge>) -> Claim {
        let mut s = lock(&self.sync);
        if s.id != id {
            return Claim::Lost;
        }
        let cur = self.state.load(Ordering::Acquire);
        if !matches!(cur, BUILDING | PENDING | READY) {
            return Claim::Lost;
        }
        if self
            .state
            .compare_exchange(cur, FAILED, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // Only READY -> RUNNING can race us outside the lock, and it won.
            return Claim::Lost;
        }
        s.failure = Some(msg.clone());
        if cur == BUILDING {
            s.failure_propagation_pending = true;
            return Claim::Building;
        }
        out.append(&mut s.consumers);
        Claim::Won
    }

    /// Take over propagation of a failure claimed while BUILDING (submitter or cancellation).
    /// Appends the consumer snapshot; false if nothing was pending.
    pub fn take_pending_propagation(&self, out: &mut Vec<Edge>) -> bool {
        let mut s = lock(&self.sync);
        if !s.failure_propagation_pending {
            return false;
        }
        s.failure_propagation_pending = false;
        out.append(&mut s.consumers);
        true
    }

    /// Scheduler dispatch claim: READY -> RUNNING. A lost claim means the slot is owned by a
    /// failure path.
    pub fn try_claim_running(&self) -> bool {
        self.state
            .compare_exchange(READY, RUNNING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The dispatch claim for a queue entry naming task `id`: a stale entry (the slot was
    /// cancelled, consumed and reused) loses.
    pub fn try_claim_running_id(&self, id: SlotId) -> bool {
        let s = lock(&self.sync);
        s.id == id && self.try_claim_running()
    }

    /// RUNNING -> COMPLETED (or FAILED with `failure`), taking the consumer snapshot under the
    /// same lock so a consumer wiring concurrently is either in the snapshot or sees the
    /// terminal state.
    pub fn finish(&self, failure: Option<&Arc<str>>, out: &mut Vec<Edge>) {
        let mut s = lock(&self.sync);
        match failure {
            None => self.state.store(COMPLETED, Ordering::Release),
            Some(m) => {
                s.failure = Some(m.clone());
                self.state.store(FAILED, Ordering::Release);
            }
        }
        out.append(&mut s.consumers);
    }

    /// Release one lifetime reference (a consumer's or the self-release; the scope's goes
    /// through `release_scope_ref`). True when this call took the slot COMPLETED/FAILED ->
    /// CONSUMED: the caller runs on_consumed.
    pub fn release_ref(&self) -> bool {
        self.release_refs(1)
    }

    /// Release `n` lifetime references at once; true when this made the slot CONSUMED.
    pub fn release_refs(&self, n: i32) -> bool {
        self.release_with(n, |_| {})
    }

    /// The release of the scope reference (its scope ended); true when this made the slot
    /// CONSUMED.
    pub fn release_scope_ref(&self) -> bool {
        self.release_with(1, |s| s.scope_held = false)
    }

    /// Release `n` references, updating the rest of `s` with `also` under the same lock.
    fn release_with(&self, n: i32, also: impl FnOnce(&mut SlotSync)) -> bool {
        let mut s = lock(&self.sync);
        also(&mut s);
        s.fanout_released += i64::from(n);
        self.consume_if_due(&s)
    }

    /// Charge `n` lifetime references to task `id` if it has COMPLETED and its scope still
    /// holds it: the orchestrator's spare references for consumers still to come, which so
    /// never keep the slot beyond its scope's end (they are given back then). False,
    /// nothing charged, in any other case.
    pub fn charge_completed(&self, id: SlotId, n: i32) -> bool {
        let mut s = lock(&self.sync);
        if s.id != id || !s.scope_held || self.state.load(Ordering::Acquire) != COMPLETED {
            return false;
        }
        s.fanout_total += i64::from(n);
        true
    }

    fn consume_if_due(&self, s: &SlotSync) -> bool {
        if s.fanout_released < s.fanout_total + 1 {
            return false;
        }
        let cur = self.state.load(Ordering::Acquire);
        if cur != COMPLETED && cur != FAILED {
            return false;
        }
        // A plain store: every transition out of a terminal state is taken under `sync`,
        // which the caller holds (the unlocked READY -> RUNNING claim cannot apply here).
        self.state.store(CONSUMED, Ordering::Release);
        true
    }

    /// `alloc()`'s synthetic slot: no fanin, the scope reference (if any) charged, the
    /// self-release pre-counted, straight to COMPLETED.
    pub fn complete_synthetic(&self, scope_ref: i32) {
        let mut s = lock(&self.sync);
        s.fanout_total += i64::from(scope_ref);
        s.fanout_released = 1;
        self.state.store(COMPLETED, Ordering::Release);
    }

    /// CONSUMED -> FREE once on_consumed finished its cleanup.
    ///
    /// Without the lock: a CONSUMED slot has no transition left but this one, and every
    /// reader treats CONSUMED and FREE alike (gone). `id` and `run` keep the last occupant:
    /// ids at one table entry only grow, which lets a handle that was never issued be told
    /// apart (see Orchestrator::check_handle); `ident` reports a FREE slot's run as 0.
    pub fn free(&self) {
        self.state.store(FREE, Ordering::Release);
    }

    /// Forget the ids this FREE entry held (the worker renumbers its tasks from 1: see
    /// `Orchestrator::renumber_if_quiescent`), so the stale-handle check judges new ids by
    /// the new ones only.
    pub fn forget_ids(&self) {
        let mut s = lock(&self.sync);
        debug_assert_eq!(self.state.load(Ordering::Acquire), FREE);
        s.id = 0;
        s.history = [0; 4];
        s.evicted = 0;
        s.evicted_before = 0;
    }

    /// Is task `id` still READY in this slot (a queue entry naming it is live)?
    pub fn is_ready(&self, id: SlotId) -> bool {
        let s = lock(&self.sync);
        s.id == id && self.state.load(Ordering::Acquire) == READY
    }

    /// Was task `id` ever issued at this entry? `None` when it is too old to tell.
    pub fn issued(&self, id: SlotId) -> Option<bool> {
        let s = lock(&self.sync);
        if s.history.contains(&id) {
            Some(true)
        } else if id <= s.evicted {
            None
        } else {
            Some(false)
        }
    }

    /// (task id, run) of the occupant (for a FREE slot: the last occupant's id, run 0).
    pub fn ident(&self) -> (SlotId, u64) {
        let s = lock(&self.sync);
        let free = self.state.load(Ordering::Acquire) == FREE;
        (s.id, if free { 0 } else { s.run })
    }

    pub fn failure(&self) -> Option<Arc<str>> {
        lock(&self.sync).failure.clone()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A producer in an outer scope read by a long stream of retaining consumers: its
    /// lifetime counts only grow, past i32::MAX, and it stays held while its scope and its
    /// last readers do (with 32-bit counts the total wrapped negative and the next release
    /// consumed the slot under its readers).
    #[test]
    fn lifetime_counts_pass_i32_max() {
        let p = SlotCore::default();
        p.begin_building_for(7, 1, 1);
        assert_eq!(p.publish(0), Publish::Ready);
        assert!(p.try_claim_running_id(7));
        p.finish(None, &mut Vec::new());
        assert!(!p.release_ref(), "the scope still holds it");
        {
            // What about 2^31 finished readers leave: each charged one reference at its
            // attach and released it when it retired.
            let mut s = p.lock_sync();
            let n = i64::from(i32::MAX) - 1 - s.fanout_total;
            s.fanout_total += n;
            s.fanout_released += n;
        }
        for consumer in 100..103 {
            assert_eq!(p.attach(7, consumer, true), Attach::Done);
        }
        assert!(p.lock_sync().fanout_total > i64::from(i32::MAX));
        assert!(!p.release_ref(), "two readers and the scope still hold it");
        assert!(!p.release_ref());
        assert!(!p.release_ref());
        assert_eq!(p.state(), COMPLETED);
        assert!(p.release_scope_ref(), "the last reference consumes it");
        assert_eq!(p.state(), CONSUMED);
    }
}
