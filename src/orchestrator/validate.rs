//! A submit's step 0: everything that can be checked is checked before any state changes
//! (callable, lane targets, tensors and their footprints, explicit deps, heap bytes).

use super::{Orchestrator, SubmitKind};
use crate::callable;
use crate::callable::{Callable, CallableKind, Entry};
use crate::error::{err, Error, Result, Status};
use crate::ring::{align_up, first_id_of_seq, HeapError};
use crate::run::Run;
use crate::task::{
    dense_bytes, dtype_refused, dtype_size, tag_refused, DepKind, Tag, TaskArgs, TaskHandle,
    Tensor, MAX_TENSOR_DIMS,
};
use crate::view::Footprint;

impl Orchestrator {
    /// Validate a submit completely before any state changes. Returns the executor, the
    /// target lane indexes and the heap bytes to reserve for auto-allocated OUTPUTs; leaves
    /// each tensor's footprint in `self.footprints`.
    pub(super) fn validate(
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
            return err(
                Status::InvalidArgument,
                "count is 0: a group needs at least one member",
            );
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
        let mut auto_in = false;
        for (mi, m) in members.iter().enumerate() {
            if m.reserved != 0 {
                return err(
                    Status::InvalidArgument,
                    format!("member {mi}: reserved field must be zero"),
                );
            }
            if (m.num_tensors > 0 && m.tensors.is_null())
                | (m.num_scalars > 0 && m.scalars.is_null())
                | (m.num_deps > 0 && m.deps.is_null())
            {
                return Err(null_array(mi, m));
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
                auto_in |= bytes > 0;
            }
            for i in 0..m.num_deps as usize {
                // SAFETY: non-null with num_deps elements.
                let dep = unsafe { &*m.deps.add(i) };
                if dep.kind > DepKind::Wait as u32 {
                    return err(
                        Status::InvalidArgument,
                        format!(
                            "member {mi}, dep {i}: kind {} is not a dagrt_dep_kind",
                            dep.kind
                        ),
                    );
                }
                if dep.reserved != 0 {
                    return err(
                        Status::InvalidArgument,
                        format!("member {mi}, dep {i}: reserved field must be zero"),
                    );
                }
                self.check_handle(&dep.handle, run).map_err(|x| {
                    Error::new(x.status, format!("member {mi}, dep {i}: {}", x.msg))
                })?;
            }
        }
        if auto_in && members.len() > 1 {
            shared_auto_array(members)?;
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
}

pub(super) fn heap_error(x: HeapError, bytes: u64, ring_size: u64) -> Error {
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
    let tag = Tag::from_u32(t.tag).ok_or_else(|| tag_refused(t.tag))?;
    if t.ndim as usize > MAX_TENSOR_DIMS {
        return Err(format!("ndim {} exceeds {MAX_TENSOR_DIMS}", t.ndim));
    }
    if dtype_size(t.dtype).is_none() {
        return Err(dtype_refused(t.dtype));
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

/// Group members whose tensors arrays overlap, one of them with an auto-allocated OUTPUT:
/// the address written back for one member would replace the other's (the submit carves a
/// buffer per member, and the array is where the host learns it), so the group is refused.
#[cold]
fn shared_auto_array(members: &[TaskArgs]) -> Result<()> {
    let range = |m: &TaskArgs| {
        let a = m.tensors as usize;
        (
            a,
            a + m.num_tensors as usize * std::mem::size_of::<Tensor>(),
        )
    };
    // Zero-size ones keep their NULL (nothing is written back), so sharing them is harmless.
    let has_auto = |m: &TaskArgs| {
        (0..m.num_tensors as usize).any(|i| {
            // SAFETY: validated non-null with num_tensors elements.
            let t = unsafe { &*m.tensors.add(i) };
            t.data.is_null() && dense_bytes(t.ndim, &t.shape, t.dtype).is_some_and(|n| n > 0)
        })
    };
    for (i, a) in members.iter().enumerate() {
        for (j, b) in members.iter().enumerate().take(i) {
            let ((a0, a1), (b0, b1)) = (range(a), range(b));
            if a0 < b1 && b0 < a1 && (has_auto(a) || has_auto(b)) {
                return err(
                    Status::InvalidArgument,
                    format!(
                        "members {j} and {i} share a tensors array holding an auto-allocated \
                         OUTPUT: each member's allocated address is written back into its own \
                         array, so give each member its own"
                    ),
                );
            }
        }
    }
    Ok(())
}

/// The error for a member with a null array of non-zero length (the first such array).
#[cold]
fn null_array(mi: usize, m: &TaskArgs) -> Error {
    let arrays = [
        ("tensors", m.tensors.is_null(), m.num_tensors),
        ("scalars", m.scalars.is_null(), m.num_scalars),
        ("deps", m.deps.is_null(), m.num_deps),
    ];
    let (name, _, n) = arrays
        .into_iter()
        .find(|&(_, null, n)| null && n > 0)
        .expect("a null array of non-zero length");
    Error::new(
        Status::NullPointer,
        format!("member {mi}: {name} is null but num_{name} = {n}"),
    )
}
