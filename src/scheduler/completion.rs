//! Completion handling, dependency release, failure poisoning and consumption (Scheduler
//! seed §5-6, Orchestrator seed §8). These run on the scheduler thread, and also on the
//! orchestrator thread for the paths the seed gives it (scope_end releases, a submit that
//! wired onto a failed producer).

use crate::ring::SlotKind;
use crate::slot::{Claim, Edge, SlotId};
use crate::worker::Engine;
use std::sync::Arc;

/// The single READY router: a slot goes to its exact target's FIFO, the group FIFO or the
/// shared SUB FIFO. `notify` wakes the scheduler (the scheduler itself passes false).
pub fn enqueue_ready(e: &Engine, sid: SlotId, notify: bool) {
    // SAFETY: kind, group flag, targets and run were written while BUILDING and are immutable
    // until the slot is consumed, which cannot happen while it is READY.
    let d = unsafe { e.slots.get(sid).data() };
    let run = d.run.as_ref().map_or(0, |r| r.id);
    {
        let mut q = crate::sync::lock(&e.ready);
        match d.kind {
            SlotKind::NextLevel if !d.group => q.singles[d.targets[0] as usize].push(run, sid),
            SlotKind::NextLevel => q.group.push(run, sid),
            SlotKind::Sub => q.sub.push(run, sid),
            SlotKind::Alloc => unreachable!("alloc slots are never READY"),
        }
    }
    if notify {
        e.sched_event.notify();
    }
}

/// Aggregate completion of a dispatched slot: COMPLETED or FAILED, consumers released or
/// poisoned, producer references released, then the self-release.
pub fn complete_task(e: &Engine, sid: SlotId, failure: Option<Arc<str>>, edges: &mut Vec<Edge>) {
    let slot = e.slots.get(sid);
    slot.core.finish(failure.as_ref(), edges);
    // SAFETY: the slot is terminal and only this thread finishes it; `run` is immutable.
    let run = unsafe { slot.data() }.run.clone();
    match &failure {
        None => {
            if let Some(r) = &run {
                r.count_completed();
            }
            for edge in edges.drain(..) {
                if e.slots.get(edge.slot).core.release_fanin(edge.slot) {
                    enqueue_ready(e, edge.slot, false);
                }
            }
        }
        Some(msg) => {
            if let Some(r) = &run {
                r.count_failed();
                r.record_failure(msg);
            }
            let consumers: Vec<SlotId> = edges.drain(..).map(|x| x.slot).collect();
            poison(e, consumers, msg);
        }
    }
    retire(e, sid);
}

/// Failure propagation: claim every not-yet-running descendant FAILED (never dispatched),
/// then retire each one.
pub fn poison(e: &Engine, mut stack: Vec<SlotId>, msg: &Arc<str>) {
    let mut edges = Vec::new();
    while let Some(c) = stack.pop() {
        let core = &e.slots.get(c).core;
        if core.claim_failure(c, msg, &mut edges) == Claim::Won {
            // SAFETY: `run` was written before publication; we won the claim.
            if let Some(r) = &unsafe { e.slots.get(c).data() }.run {
                r.count_failed();
                r.record_failure(msg);
            }
            stack.extend(edges.drain(..).map(|x| x.slot));
            retire(e, c);
        }
    }
}

/// The submitting thread's half of a failure claimed while the slot was BUILDING.
pub fn propagate_pending(e: &Engine, sid: SlotId) {
    let mut edges = Vec::new();
    let core = &e.slots.get(sid).core;
    if !core.take_pending_propagation(&mut edges) {
        return;
    }
    let msg = core.failure().unwrap_or_else(|| Arc::from("failed"));
    // SAFETY: the submitting thread still owns the slot's data.
    if let Some(r) = &unsafe { e.slots.get(sid).data() }.run {
        r.count_failed();
        r.record_failure(&msg);
    }
    poison(e, edges.into_iter().map(|x| x.slot).collect(), &msg);
    retire(e, sid);
}

/// A terminal slot gives back what it holds: its references on producers, then its own
/// self-release.
pub(crate) fn retire(e: &Engine, sid: SlotId) {
    // SAFETY: the slot is terminal; its producer list is no longer written.
    let d = unsafe { e.slots.get(sid).data() };
    for i in 0..d.producers.len() {
        release_ref(e, d.producers[i]);
    }
    release_ref(e, sid);
}

/// Release one lifetime reference on `sid`; consume it at the threshold.
pub fn release_ref(e: &Engine, sid: SlotId) {
    if e.slots.get(sid).core.release_ref() {
        on_consumed(e, sid);
    }
}

/// CONSUMED: erase the TensorMap entries still owned, release the heap slab, free the slot
/// and count it off its run's fence.
fn on_consumed(e: &Engine, sid: SlotId) {
    let slot = e.slots.get(sid);
    // SAFETY: this thread won the CONSUMED transition; nobody else touches the data now.
    let d = unsafe { slot.data() };
    let run = d.run.take();
    match (&run, slot.core.failure()) {
        // A failed slot leaves its TensorMap entries as tombstones until the run ends, so
        // later readers of its outputs are poisoned, not released onto garbage.
        (Some(r), Some(msg)) => r.remember_failed(sid, msg),
        (Some(r), None) if !d.outputs.is_empty() => e.tensormap.lock().erase(r.id, sid, &d.outputs),
        _ => {}
    }
    if let Some(h) = d.heap.take() {
        e.heap.rings[h.ring].release(h.seq);
    }
    d.clear();
    e.slots.free(sid);
    if let Some(r) = run {
        r.slot_consumed(|| e.tensormap.lock().drop_run(r.id));
    }
}
