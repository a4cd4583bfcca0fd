//! A submit (Orchestrator seed §2-4, the 7-step flow) and `alloc`: claim a slot and its heap
//! slab, move the task data in, walk the tags against the TensorMap, wire onto the producers
//! and publish.

use super::validate::heap_error;
use super::{return_credit, Orchestrator, SubmitKind, CREDIT};
use crate::callable::Callable;
use crate::error::{err, Error, Result, Status};
use crate::ring::{
    align_up, ClaimError, HeapClaim, HeapError, HeapRings, MemberArgs, SlotKind, LAST_SEQ,
};
use crate::run::RunRef;
use crate::scheduler::completion::{consume_all, enqueue_ready, propagate_pending};
use crate::slot::{Attach, Claim, Publish, Route, SlotId, ROUTE_GROUP, ROUTE_SINGLE, ROUTE_SUB};
use crate::task::{
    dense_bytes, dtype_size, CallConfig, DepKind, Tag, TaskArgs, TaskHandle, MAX_TENSOR_DIMS,
};
use crate::view::Footprint;
use std::sync::Arc;

impl Orchestrator {
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
        // Step 4, ahead of everything that could fail or make the slot visible: the scope
        // reference (charged by the claim) is registered with the scope that releases it. Every
        // slot holds one until its scope ends, so a producer named later in the same scope is
        // still there to be retained; a long stream bounds its slots in flight by ending
        // nested scopes as it goes.
        self.scope.register(sid);
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
        let (mut written, mut read_after_write) = (false, false);
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
                    // A zero-size one keeps NULL (and no footprint): the address of another
                    // buffer, or of none when the slab is empty, would be a pointer to nothing
                    // that differs by what else the task allocates.
                    if n > 0 {
                        t.data = cursor.cast();
                        // SAFETY: the slab holds the sum of these aligned sizes.
                        cursor = unsafe { cursor.add(n as usize) };
                        self.footprints[flat] = Footprint::of(t);
                    }
                }
                // A read listed after a pure write (OUTPUT, OUTPUT_EXISTING) of the task.
                read_after_write |= written && (t.tag == INPUT || t.tag == INOUT);
                written |= t.tag == OUTPUT || t.tag == OUTPUT_EXISTING;
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
        self.holds.clear();
        {
            let mut tm = self.e.tensormap.lock();
            let heap = &self.e.heap;
            let producers = &mut self.producers;
            let mut found = |p| {
                if p != sid {
                    producers.push((p, true))
                }
            };
            let holds = &mut self.holds;
            let mut hold = |p| {
                if p != sid {
                    holds.push(p)
                }
            };
            // Tags are consumed here (Orchestrator seed, invariant 2: nothing after submit
            // sees them): the slot's copies, which the executor's view shows, read NO_DEP.
            if read_after_write {
                let tagged = d.tensors.iter().zip(self.footprints.iter());
                reads_first(
                    &mut tm,
                    heap,
                    run.id,
                    sid,
                    tagged,
                    (&mut found, &mut hold),
                    &mut d.outputs,
                );
                for t in d.tensors.iter_mut() {
                    t.tag = NO_DEP;
                }
            } else {
                // No write ahead of a read: each tensor's lookup and insert in one step (an
                // INOUT's insert replaces only entries its own lookup has just found).
                for (t, fp) in d.tensors.iter_mut().zip(self.footprints.iter()) {
                    let tag = tag_of(t);
                    t.tag = NO_DEP;
                    let Some(fp) = fp else { continue };
                    let looks_up = tag.looks_up();
                    if looks_up {
                        heap.owners_in(fp.lo, fp.hi, run.id, &mut hold);
                    }
                    match (looks_up, tag.inserts()) {
                        (true, true) => d
                            .outputs
                            .push(tm.lookup_insert(run.id, fp, sid, &mut found)),
                        (true, false) => tm.lookup(run.id, fp, &mut found),
                        (false, true) => d.outputs.push(tm.insert(run.id, fp, sid)),
                        (false, false) => {}
                    }
                }
            }
        }

        dedup_producers(&mut self.producers);

        // Step 5: wire onto producers under their locks; count the live ones.
        room_for(&mut d.producers, self.producers.len() + self.holds.len());
        let mut live = 0;
        let mut poisoned: Option<Arc<str>> = None;
        let mut fan_out = None;
        // Producers' cores are usually the lanes' lines (they ran them): asked for a few
        // ahead of their attach, the misses overlap instead of being waited out in turn.
        for &(p, _) in self.producers.iter().take(ATTACH_AHEAD) {
            self.e.slots.prefetch_core(p);
        }
        for (i, &(p, retain)) in self.producers.iter().enumerate() {
            if let Some(&(q, _)) = self.producers.get(i + ATTACH_AHEAD) {
                self.e.slots.prefetch_core(q);
            }
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
        if !self.holds.is_empty() {
            hold_slab_owners(&self.e, &mut self.holds, &self.producers, &mut d.producers);
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
                format!("alloc: {}", crate::task::dtype_refused(dtype)),
            );
        }
        let mut sh = [0u64; MAX_TENSOR_DIMS];
        sh[..shape.len()].copy_from_slice(shape);
        // An empty shape (a zero extent) gets no slab (`claim_slot` of 0 bytes): a null
        // buffer, owned by a synthetic task all the same (seed §5: "nullptr when alloc(0)").
        let (bytes, aligned) = dense_bytes(shape.len() as u32, &sh, dtype)
            .and_then(|b| Some((b, align_up(b)?)))
            .ok_or_else(|| {
                Error::new(
                    Status::InvalidArgument,
                    "alloc: the shape's size in bytes overflows",
                )
            })?;
        if aligned > self.e.heap.rings[0].size() {
            return Err(heap_error(
                HeapError::TooLarge,
                aligned,
                self.e.cfg.heap_ring_size,
            ));
        }
        let (sid, ptr) = self.claim_slot(rr, aligned)?;
        self.scope.register(sid); // step 4, as in `submit`
        let slot = self.e.slots.get(sid);
        // SAFETY: BUILDING, owned by this thread.
        let d = unsafe { slot.data() };
        d.kind = SlotKind::Alloc;
        if self.e.trace.on() {
            self.e.trace.node(rr.id, sid, "alloc", "alloc");
        }
        if bytes > 0 {
            let fp = Footprint::dense(ptr as u64, bytes);
            let key = self.e.tensormap.lock().insert(rr.id, &fp, sid);
            d.outputs.push(key);
        }
        slot.core.complete_synthetic(0); // scope reference charged by the claim
        Ok((
            ptr,
            TaskHandle {
                run_id: rr.id,
                slot: sid,
            },
        ))
    }

    /// Step 1 of a submit or an alloc: a slot for `run` and, when `bytes > 0`, a heap slab in
    /// the ring of the current scope depth (both may wait: see `timeout_ms`). Then the
    /// ownership boundary: the sequence number is issued, the slot is charged to the run and
    /// records it and its slab; the caller registers it with the current scope next (step
    /// 4). A failure leaves nothing behind. Returns the slab (or null).
    fn claim_slot(&mut self, rr: RunRef, bytes: u64) -> Result<(SlotId, *mut u8)> {
        let run = rr.get().expect("the open run");
        if self.next_seq > LAST_SEQ {
            return Err(self.ids_exhausted());
        }
        let timeout = self.timeout();
        // Back-pressure fails after timeout_ms with no progress. A slot that came free is
        // progress, so the slab's wait after it starts a window of its own, as does each
        // reservation the ring reclaims meanwhile.
        let sid = match self
            .e
            .slots
            .claim(&mut self.free_cache, self.next_seq, run.id, timeout)
        {
            Ok(sid) => sid,
            Err(ClaimError::Full) => return Err(self.window_full()),
            Err(ClaimError::Grow(x)) => return Err(self.window_grow(x)),
        };
        let ring = HeapRings::for_depth(self.scope.current_depth());
        let mut slab = (std::ptr::null_mut(), None);
        if bytes > 0 {
            match self.e.heap.rings[ring].alloc(bytes, timeout, (sid, run.id)) {
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

    #[cold]
    fn ids_exhausted(&self) -> Error {
        Error::new(
            Status::WrongState,
            format!(
                "this worker has issued all {LAST_SEQ} task ids it can tell apart without \
                 being quiescent once (every run released), when it would renumber them; \
                 release its runs, or submit to a new worker"
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

/// How far ahead of its attach a producer's core line is asked for.
const ATTACH_AHEAD: usize = 8;

/// Room for `n` items in a slot's just-cleared vector: one allocation, not one per doubling,
/// when a fresh slot's inline room is too small (a reused slot's, or the inline room, is
/// checked against a constant first).
#[inline]
fn room_for<A: smallvec::Array>(v: &mut smallvec::SmallVec<A>, n: usize) {
    if n > v.inline_size() && n > v.capacity() {
        v.reserve_exact(n);
    }
}

const INPUT: u32 = Tag::Input as u32;
const INOUT: u32 = Tag::Inout as u32;
const OUTPUT: u32 = Tag::Output as u32;
const OUTPUT_EXISTING: u32 = Tag::OutputExisting as u32;
const NO_DEP: u32 = Tag::NoDep as u32;

/// The tag walk of a task that lists a pure write before a read: every lookup before any
/// insert. Its reads depend on the writers before it, whatever the order of its tensors (and
/// members): had a write listed first replaced them in the map, a later read of the same
/// bytes would find only this task. Rare, and kept out of the common walk's code.
#[cold]
#[inline(never)]
fn reads_first<'a>(
    tm: &mut crate::tensormap::Inner,
    heap: &HeapRings,
    run: crate::run::RunId,
    sid: SlotId,
    tagged: impl Iterator<Item = (&'a crate::task::Tensor, &'a Option<Footprint>)> + Clone,
    (found, hold): (&mut impl FnMut(SlotId), &mut impl FnMut(SlotId)),
    outputs: &mut smallvec::SmallVec<[crate::tensormap::MapKey; 1]>,
) {
    for (t, fp) in tagged.clone() {
        let (Some(fp), true) = (fp, tag_of(t).looks_up()) else {
            continue;
        };
        heap.owners_in(fp.lo, fp.hi, run, hold);
        tm.lookup(run, fp, &mut *found);
    }
    for (t, fp) in tagged {
        let (Some(fp), true) = (fp, tag_of(t).inserts()) else {
            continue;
        };
        outputs.push(tm.insert(run, fp, sid));
    }
}

/// A read (INPUT, INOUT) of a runtime-owned slab of its run holds the slab's owner, whatever
/// writer the TensorMap finds for those bytes: an in-place writer of the buffer holds the
/// owner only until it completes, and a reader behind it would otherwise hold nothing that
/// keeps the bytes. A hold is a lifetime reference, not an edge: the bytes read may come from
/// another writer (an OUTPUT_EXISTING over the buffer), so the reader neither waits for the
/// owner nor is poisoned by it. An owner that is also a producer keeps its edge. (Pure
/// writes stay unwired, as the seed's tag table says.)
#[cold]
#[inline(never)]
fn hold_slab_owners(
    e: &crate::worker::Engine,
    holds: &mut Vec<SlotId>,
    producers: &[(SlotId, bool)],
    held: &mut smallvec::SmallVec<[SlotId; 4]>,
) {
    holds.sort_unstable();
    holds.dedup();
    for &h in holds.iter() {
        let is_producer = producers.binary_search_by_key(&h, |p| p.0).is_ok();
        if !is_producer && e.slots.get(h).core.hold(h) {
            held.push(h);
        }
    }
}

fn tag_of(t: &crate::task::Tensor) -> Tag {
    Tag::from_u32(t.tag).expect("validated")
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

#[cfg(test)]
mod tests {
    use super::super::RENUMBER_AFTER;
    use super::*;
    use crate::callable::CallableKind;
    use crate::ring::first_id_of_seq;
    use crate::task::{DataType, TaskView};
    use crate::worker::{Worker, WorkerConfig};
    use std::time::Duration;

    /// # Safety
    /// None: `unsafe` only to match `Executor`; it reads neither argument.
    unsafe extern "C" fn nop(_t: *const TaskView, _u: *mut std::ffi::c_void) -> i32 {
        0
    }

    fn worker_and_callable() -> (Worker, Callable) {
        let mut w = Worker::new(WorkerConfig::default()).unwrap();
        w.add_sub_lanes(1).unwrap();
        w.init().unwrap();
        let c = crate::callable::register(
            "orchestrator.tests.nop",
            0,
            CallableKind::Task as u32,
            nop,
            std::ptr::null_mut(),
        )
        .unwrap();
        (w, c)
    }

    /// A worker that is never quiescent (a run stays registered, so it cannot renumber)
    /// issues task ids up to LAST_SEQ; past it ids would wrap and the stale-handle checks
    /// break, so a submit or an alloc fails cleanly (nothing claimed) and the run still
    /// completes.
    #[test]
    fn a_worker_refuses_submits_past_its_last_task_id() {
        let (w, c) = worker_and_callable();
        let e = w.engine().unwrap().clone();
        let run = {
            let mut o = w.orchestrator().unwrap().lock().unwrap();
            let registered = o.begin_run().unwrap();
            o.close_run_submission(registered).unwrap();
            o.next_seq = LAST_SEQ;
            let run = o.begin_run().unwrap();
            let cfg = CallConfig::default();
            let a = TaskArgs::of_tensors(&mut []);
            let last = o.submit(SubmitKind::Sub, &c, &[a], &cfg, &[]).unwrap();
            assert_eq!(last.slot >> crate::ring::INDEX_BITS, LAST_SEQ);
            let x = o.submit(SubmitKind::Sub, &c, &[a], &cfg, &[]).unwrap_err();
            assert_eq!(x.status, Status::WrongState);
            assert!(x.msg.contains("task ids"), "{}", x.msg);
            let x = o.alloc(&[64], DataType::U8 as u32).unwrap_err();
            assert_eq!(x.status, Status::WrongState);
            // The last id stays below the bound the handle checks use.
            assert!(last.slot < first_id_of_seq(o.next_seq));
            o.close_run_submission(run).unwrap();
            run
        };
        assert!(e.runs.get(run).unwrap().wait(Some(Duration::from_secs(10))));
        assert!(e.runs.get(run).unwrap().result().is_ok());
    }

    /// Past half the id space, a `begin_run` that finds the worker quiescent (every run
    /// released, no slot live) renumbers the tasks from 1; one that does not (a run still
    /// registered) leaves the ids alone. Handles of the earlier runs stay refused.
    #[test]
    fn a_quiescent_worker_renumbers_its_tasks() {
        let (w, c) = worker_and_callable();
        let e = w.engine().unwrap().clone();
        let cfg = CallConfig::default();
        let a = TaskArgs::of_tensors(&mut []);
        let mut o = w.orchestrator().unwrap().lock().unwrap();
        let one_run = |o: &mut Orchestrator, deps: &[crate::task::Dep]| {
            let run = o.begin_run().unwrap();
            let seq = o.next_seq;
            let mut m = a;
            m.deps = deps.as_ptr();
            m.num_deps = deps.len() as u32;
            let h = o.submit(SubmitKind::Sub, &c, &[m], &cfg, &[]);
            o.close_run_submission(run).unwrap();
            assert!(e.runs.get(run).unwrap().wait(Some(Duration::from_secs(10))));
            (run, seq, h)
        };
        o.next_seq = RENUMBER_AFTER + 1;
        let (r1, seq, h1) = one_run(&mut o, &[]);
        assert_eq!(seq, 1, "quiescent past half the id space: renumbered");
        let h1 = h1.unwrap();
        assert_eq!(h1.slot >> crate::ring::INDEX_BITS, 1);
        // r1 still registered: not quiescent, no renumbering.
        o.next_seq = RENUMBER_AFTER + 1;
        let (r2, seq, _) = one_run(&mut o, &[]);
        assert_eq!(seq, RENUMBER_AFTER + 1);
        assert!(e.runs.remove_done(r1) && e.runs.remove_done(r2));
        let (_, seq, h) = one_run(&mut o, &[]);
        assert_eq!(seq, 1, "quiescent again: renumbered");
        // The new task may well have h1's slot id: h1 is refused by its run all the same.
        assert_eq!(h.unwrap().slot >> crate::ring::INDEX_BITS, 1);
        let dep = crate::task::Dep {
            handle: h1,
            kind: 0,
            reserved: 0,
        };
        let (_, seq, h) = one_run(&mut o, &[dep]);
        assert_eq!(seq, 2, "a registered run: no renumbering");
        let x = h.unwrap_err();
        assert_eq!(x.status, Status::StaleHandle, "{}", x.msg);
    }
}
