//! Completion handling, dependency release, failure poisoning and consumption (Scheduler
//! seed §5-6, Orchestrator seed §8). These run on the scheduler thread, and also on the
//! orchestrator thread for the paths the seed gives it (scope_end releases, a submit that
//! wired onto a failed producer).

use crate::lane::Failure;
use crate::run::RunRef;
use crate::scheduler::queues::ReadyQueues;
use crate::slot::{Claim, Edge, Route, SlotId, ROUTE_GROUP, ROUTE_SINGLE};
use crate::worker::Engine;
use smallvec::SmallVec;
use std::sync::Arc;

/// A slot became READY on a thread other than the scheduler (an immediately-ready submit):
/// hand it to the scheduler, which routes it, and advance its wake generation.
pub fn enqueue_ready(e: &Engine, sid: SlotId, route: Route) {
    e.ready_in.push((sid, route));
    // The scheduler's wait condition reads `ready_in` itself: the queue is the edge. A
    // parked scheduler thread gets the doorbell rung (a spinning one rings it itself) and is
    // woken; if a lane is asleep too, it would then wake that lane, two wake-ups in series
    // (55 us from an idle worker's submit to its task here): the pass runs on this thread
    // first instead, waking only the lane. (With every lane busy the task waits for one of
    // them anyway, and the pass would only slow the submitter: a scheduler thread parks while
    // lanes hold the role.) The scheduler thread is woken as before, not made to spin: it
    // finds what is left, as when a lane's pass took the submission first.
    let mut stall = false;
    e.sched_event.notify_cond_with(|| {
        e.ready_in.ring();
        if e.sched_event.asleep_unwoken() && e.lanes.iter().any(|l| l.mailbox.asleep()) {
            stall = crate::scheduler::pass_for_parked(e);
        }
    });
    if stall {
        e.sched_event.notify();
    }
}

/// The single READY router (scheduler thread): a slot goes to its exact target's FIFO, the
/// group FIFO or the shared SUB FIFO, in the partition of its run. Routing reads only the
/// route captured at publication, never slot data (the slot may already be cancelled).
pub fn route(q: &mut ReadyQueues, sid: SlotId, route: Route) {
    match route.kind {
        ROUTE_SINGLE => {
            let lane = route.lane as usize;
            q.singles[lane].push(sid, route)
        }
        ROUTE_GROUP => q.group.push(sid, route),
        _ => q.sub.push(sid, route),
    }
}

/// Aggregate completion of a dispatched slot: COMPLETED or FAILED, consumers released (the
/// ones this made READY go to `ready`, for the router) or poisoned, producer references
/// released, then the self-release. Slots that reach CONSUMED go to `reclaim`. `cold`: the
/// job was long enough to have evicted the slots this touches.
pub fn complete_task(
    e: &Engine,
    sid: SlotId,
    cold: bool,
    failure: Option<Failure>,
    edges: &mut Vec<Edge>,
    ready: &mut Vec<(SlotId, Route)>,
    reclaim: &mut Vec<SlotId>,
) {
    let slot = e.slots.get(sid);
    slot.core.finish(failure.as_ref().map(|f| &f.msg), edges);
    // SAFETY: the slot is terminal and only this thread finishes it; `run` and `producers`
    // are immutable.
    let d = unsafe { slot.data() };
    // Every slot this completion locks next, asked for at once: after a kernel they are all
    // cold, and one by one each lock would wait out its own miss. (After a tiny job they
    // are warm, and a consumer's line is as likely the submitting thread's, mid-publish.)
    if cold {
        for edge in edges.iter() {
            e.slots.prefetch_core(edge.slot);
        }
        for &p in d.producers.iter() {
            e.slots.prefetch_id(p);
        }
    }
    let run = d.run.get();
    match &failure {
        None => {
            if let Some(r) = run {
                r.count_completed();
            }
            for edge in edges.drain(..) {
                if let Some(r) = e.slots.get(edge.slot).core.release_fanin_route(edge.slot) {
                    ready.push((edge.slot, r));
                }
            }
        }
        Some(f) => {
            if let Some(r) = run {
                r.count_failed();
                r.record_failure(&f.msg, Some(f.ticket));
            }
            let consumers: Vec<SlotId> = edges.drain(..).map(|x| x.slot).collect();
            poison(e, consumers, &f.msg, reclaim);
        }
    }
    retire(e, sid, reclaim);
}

/// Failure propagation: claim every not-yet-running descendant FAILED (never dispatched),
/// then retire each one.
pub fn poison(e: &Engine, mut stack: Vec<SlotId>, msg: &Arc<str>, reclaim: &mut Vec<SlotId>) {
    let mut edges = Vec::new();
    while let Some(c) = stack.pop() {
        let core = &e.slots.get(c).core;
        if core.claim_failure(c, msg, &mut edges) == Claim::Won {
            // SAFETY: `run` was written before publication; we won the claim.
            if let Some(r) = unsafe { e.slots.get(c).data() }.run.get() {
                r.count_failed();
                r.record_failure(msg, None);
            }
            stack.extend(edges.drain(..).map(|x| x.slot));
            retire(e, c, reclaim);
        }
    }
}

/// The submitting thread's half of a failure claimed while the slot was BUILDING.
pub fn propagate_pending(e: &Engine, sid: SlotId, reclaim: &mut Vec<SlotId>) {
    let mut edges = Vec::new();
    let core = &e.slots.get(sid).core;
    if !core.take_pending_propagation(&mut edges) {
        return;
    }
    let msg = core.failure().unwrap_or_else(|| Arc::from("failed"));
    // SAFETY: the submitting thread still owns the slot's data.
    if let Some(r) = unsafe { e.slots.get(sid).data() }.run.get() {
        r.count_failed();
        r.record_failure(&msg, None);
    }
    poison(
        e,
        edges.into_iter().map(|x| x.slot).collect(),
        &msg,
        reclaim,
    );
    retire(e, sid, reclaim);
}

/// A terminal slot gives back what it holds: its references on producers, then its own
/// self-release.
pub(crate) fn retire(e: &Engine, sid: SlotId, reclaim: &mut Vec<SlotId>) {
    // SAFETY: the slot is terminal; its producer list is no longer written.
    let d = unsafe { e.slots.get(sid).data() };
    for i in 0..d.producers.len() {
        release_ref(e, d.producers[i], reclaim);
    }
    release_ref(e, sid, reclaim);
}

/// Release one lifetime reference on `sid`; at the threshold it is CONSUMED and goes to
/// `reclaim`.
pub fn release_ref(e: &Engine, sid: SlotId, reclaim: &mut Vec<SlotId>) {
    if e.slots.get(sid).core.release_ref() {
        reclaim.push(sid);
    }
}

/// Whether consumed slot `sid` belongs to a run whose submission is still going on (not
/// sealed): consuming it erases TensorMap entries a later submit could otherwise find.
/// The caller won the slot's CONSUMED transition and has not reclaimed it yet.
pub fn run_building(e: &Engine, sid: SlotId) -> bool {
    // SAFETY: the caller owns the CONSUMED slot's data until `consume_all` frees it.
    let d = unsafe { e.slots.get(sid).data() };
    d.run.get().is_some_and(|r| !r.is_sealed())
}

/// on_consumed for a batch of CONSUMED slots: erase the TensorMap entries each still owns
/// (one lock for the batch), release heap slabs, free the slots (one free-list lock), then
/// count each off its run's fence. Leaves `reclaim` empty.
pub fn consume_all(e: &Engine, reclaim: &mut Vec<SlotId>) {
    if reclaim.is_empty() {
        return;
    }
    {
        let mut tm = None;
        for &sid in reclaim.iter() {
            let slot = e.slots.get(sid);
            // SAFETY: this thread won the CONSUMED transition of every slot in the batch.
            let d = unsafe { slot.data() };
            let Some(r) = d.run.get() else { continue };
            // A sealed run's entries go with its map at the end of the run, and its failed
            // slots need no tombstones: no submit of that run will read them again.
            if r.is_sealed() {
                continue;
            }
            if let Some(h) = d.heap.as_ref() {
                tm.get_or_insert_with(|| e.tensormap.lock())
                    .erase_range(r.id, h.lo, h.hi);
            }
            match slot.core.failure() {
                // A failed slot leaves its TensorMap entries as tombstones until the run
                // ends, so later readers of its outputs are poisoned, not released onto
                // garbage.
                Some(msg) => r.remember_failed(sid, msg),
                None if !d.outputs.is_empty() => tm
                    .get_or_insert_with(|| e.tensormap.lock())
                    .erase(r.id, sid, &d.outputs),
                None => {}
            }
        }
    }
    // Fence counts are dropped after the slots are free, one decrement per run in the batch
    // (consecutive slots almost always share a run).
    // Slots consumed per run; a batch almost always has one run, kept inline.
    let mut runs: SmallVec<[(RunRef, i64); 2]> = SmallVec::new();
    for &sid in reclaim.iter() {
        // SAFETY: as above.
        let d = unsafe { e.slots.get(sid).data() };
        if let Some(h) = d.heap.take() {
            e.heap.rings[h.ring].release(h.seq);
        }
        let r = std::mem::replace(&mut d.run, RunRef::NONE);
        if !r.is_none() {
            match runs.iter_mut().find(|x| x.0.id == r.id) {
                Some(x) => x.1 += 1,
                None => runs.push((r, 1)),
            }
        }
        // The rest of `d` is reset by the entry's next claim (`SlotData::clear`), which
        // writes those lines anyway.
    }
    e.slots.free_all(reclaim);
    for (r, n) in runs {
        let id = r.id;
        // The run is alive until this drops its fence (RunRef's rule); `slots_consumed`
        // touches nothing of it after marking it done.
        if let Some(run) = r.get() {
            run.slots_consumed(n, || e.tensormap.lock().drop_run(id));
        }
    }
    reclaim.clear();
}
