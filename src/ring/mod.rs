//! The Ring (Orchestrator seed §5): the bounded task window of slots and the four heap rings.
//!
//! Slot ids are monotonic (a sequence number above the table index, see `INDEX_BITS`); the
//! window is the number of table entries, and a submit waits only when every entry is in
//! use (any free entry takes the next id). Heap rings are MAP_SHARED anonymous mappings taken when the
//! Worker initialises, before any dagrt thread (or forked lane) starts, so forked children see
//! them at the same address; each ring reclaims in FIFO order as its oldest slab is released.

mod heap;
mod table;

pub use heap::{HeapError, HeapRing, HeapRings};
pub use table::{first_id_of_seq, ClaimError, SlotTable, INDEX_BITS, LAST_SEQ};

use crate::callable::Entry;
use crate::slot::{SlotCore, SlotId};
use crate::task::{CallConfig, Tensor};
use smallvec::SmallVec;
use std::cell::UnsafeCell;

pub const MAX_RING_DEPTH: usize = 4;
pub const HEAP_ALIGN: u64 = 1024;

pub fn align_up(n: u64) -> Option<u64> {
    n.checked_add(HEAP_ALIGN - 1).map(|v| v & !(HEAP_ALIGN - 1))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotKind {
    NextLevel,
    Sub,
    /// `alloc()`'s synthetic slot: never dispatched.
    Alloc,
}

/// Where one group member's tensors and scalars live in the slot's flat arrays.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemberArgs {
    pub tensor_start: u32,
    pub tensor_len: u32,
    pub scalar_start: u32,
    pub scalar_len: u32,
}

/// A heap reservation: ring index and its position in that ring's FIFO.
#[derive(Clone, Copy, Debug)]
pub struct HeapClaim {
    pub ring: usize,
    pub seq: u64,
    /// The slab's address range: TensorMap entries inside it die with it.
    pub lo: u64,
    pub hi: u64,
}

/// The single-owner part of a slot. Written by the orchestrator while BUILDING, read by the
/// scheduler and lanes after publication; reset by the next claim of the entry, not when it
/// is consumed, so consuming a slot (a scope's release sweep) reads only the fields on its
/// first line (`run`, `heap`, the output journal). Line-aligned, so the core that follows it
/// in a `Slot` starts on a line of its own.
#[repr(C, align(64))]
pub struct SlotData {
    pub run: crate::run::RunRef,
    pub heap: Option<HeapClaim>,
    /// Output journal: the TensorMap keys this slot published (erased owner-checked).
    pub outputs: SmallVec<[crate::tensormap::MapKey; 1]>,
    pub kind: SlotKind,
    /// Submitted as a group (all-or-nothing dispatch through the group FIFO).
    pub group: bool,
    pub entry: Option<&'static Entry>,
    pub config: CallConfig,
    /// Task data, inline for the common small task: a stream of submits then writes one
    /// contiguous slot (which the claim prefetches) instead of four scattered buffers. Room
    /// for four producers (a GEMM tile has three; with room for two, each spilled in a fresh
    /// entry, a malloc on fresh heap pages) in the same 640 bytes. Room for three tensors
    /// too cut a tiled Cholesky's first build by a tenth of its instructions, but made every
    /// slot 896 bytes, tensors or not (docs/performance.md, session 36).
    pub tensors: SmallVec<[Tensor; 1]>,
    pub scalars: SmallVec<[u64; 2]>,
    pub members: SmallVec<[MemberArgs; 1]>,
    /// Producers this slot holds a lifetime reference on (released when it finishes).
    pub producers: SmallVec<[SlotId; 4]>,
    /// Group aggregation, written by the scheduler role while the group's members run.
    pub group_book: GroupCell,
}

/// A group's aggregation: members not yet terminal, and the earliest member failure.
#[derive(Default)]
pub struct GroupBook {
    pub members_left: u32,
    pub member_failure: Option<crate::lane::Failure>,
}

/// The one part of a slot's data written while lanes hold shared references to the rest (the
/// members of a running group read their arguments while the scheduler counts the others'
/// completions): a cell of its own, so those writes alias nothing the lanes read.
#[derive(Default)]
pub struct GroupCell(UnsafeCell<GroupBook>);

impl GroupCell {
    /// # Safety
    /// Only the scheduler role's holder may call this, for a group it launched and whose
    /// completion it has not handled yet (the role lock orders its calls).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get(&self) -> &mut GroupBook {
        // SAFETY: the caller's contract above: one role holder at a time.
        unsafe { &mut *self.0.get() }
    }

    fn clear(&mut self) {
        *self.0.get_mut() = GroupBook::default();
    }
}

impl Default for SlotData {
    fn default() -> Self {
        SlotData {
            run: crate::run::RunRef::NONE,
            kind: SlotKind::Sub,
            group: false,
            entry: None,
            config: CallConfig::default(),
            tensors: SmallVec::new(),
            scalars: SmallVec::new(),
            members: SmallVec::new(),
            producers: SmallVec::new(),
            outputs: SmallVec::new(),
            heap: None,
            group_book: GroupCell::default(),
        }
    }
}

impl SlotData {
    /// Reset for reuse, keeping the vectors' capacity (no per-task allocation once warm).
    pub fn clear(&mut self) {
        self.run = crate::run::RunRef::NONE;
        self.entry = None;
        empty(&mut self.tensors);
        empty(&mut self.scalars);
        empty(&mut self.members);
        empty(&mut self.producers);
        empty(&mut self.outputs);
        self.heap = None;
        self.group_book.clear();
    }
}

/// Empty a vector of plain values, keeping its capacity. `clear` drops the items one by one,
/// a loop per vector that a slot reset paid five times (about 20 instructions a W1 submit).
#[inline]
fn empty<A: smallvec::Array>(v: &mut SmallVec<A>)
where
    A::Item: Copy,
{
    // SAFETY: 0 is within the length, and `Copy` items have no drop glue to skip.
    unsafe { v.set_len(0) }
}

/// Data first: its first line (run, heap, journal) and the core's first line (state, lock,
/// reference counts) are all that consuming a slot touches.
#[repr(C, align(64))]
pub struct Slot {
    data: UnsafeCell<SlotData>,
    pub core: SlotCore,
}

// SAFETY: `data` follows the single-owner protocol documented on `Slot::data`; everything
// else in a slot is atomics and mutexes.
unsafe impl Sync for Slot {}
// SAFETY: the raw pointers in a slot's tensors are addresses the host handed over for the
// task; dagrt never dereferences them, only the executor does, on the host's terms. The
// run pointer in `run` (`RunRef`) is valid until the slot drops the run's fence, on
// whichever thread does (RunRef's rule).
unsafe impl Send for Slot {}

impl Slot {
    /// The slot's task data.
    ///
    /// # Safety
    /// The caller must be the slot's current owner: the orchestrator while the slot is
    /// BUILDING (or after it claimed it FREE), the scheduler while it is READY or RUNNING as
    /// a single task, a failure propagator reading `producers`/`run` (written before
    /// publication), or the thread that won the CONSUMED transition. These phases are
    /// ordered by the slot lock, the scheduler role's lock and the lane mailbox, so no two
    /// owners overlap. Lanes running a job, and the scheduler while a group runs, use
    /// `data_ref` instead.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn data(&self) -> &mut SlotData {
        // SAFETY: exclusivity is the caller's contract above.
        unsafe { &mut *self.data.get() }
    }

    /// The slot's task data, shared: what the lanes running a task (several at once for a
    /// group) and the scheduler counting a group's member completions (through the group
    /// book's own cell) hold.
    ///
    /// # Safety
    /// The slot must be RUNNING and dispatched to the caller's lane, or the caller must hold
    /// the scheduler role for a group it launched: nobody holds `data()` meanwhile.
    pub unsafe fn data_ref(&self) -> &SlotData {
        // SAFETY: the caller's contract above: only shared references while the task runs.
        unsafe { &*self.data.get() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tile kernel's task (up to four producers: a GEMM tile's three, or a reduction's)
    /// fits a table entry's producer list as built: a worker's first run allocates none.
    #[test]
    fn four_producers_fit_a_fresh_entry() {
        let mut d = SlotData::default();
        d.producers.extend([1, 2, 3, 4]);
        assert!(!d.producers.spilled());
    }

    /// A running group's lanes read the slot data while the scheduler role counts member
    /// completions in the group book: shared references plus the book's own cell, which Miri
    /// (Stacked Borrows) accepts across threads. (Two `data()` borrows at once, as lanes and
    /// the scheduler took before, are what it would reject.)
    #[test]
    fn group_lanes_read_while_the_role_counts() {
        let slot = Slot {
            data: UnsafeCell::new(SlotData::default()),
            core: SlotCore::default(),
        };
        // SAFETY: no other reference exists yet (the orchestrator builds the slot).
        unsafe { slot.data() }.scalars.extend([7, 8]);
        // SAFETY: as above; the role launches the group.
        unsafe { slot.data_ref().group_book.get() }.members_left = 2;
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    // SAFETY: the slot runs the group: only shared references.
                    let d = unsafe { slot.data_ref() };
                    assert_eq!(d.scalars.iter().sum::<u64>(), 15);
                });
            }
            s.spawn(|| {
                // SAFETY: this thread plays the role, the only one to touch the book.
                let g = unsafe { slot.data_ref().group_book.get() };
                g.members_left -= 1;
                g.members_left -= 1;
            });
        });
        // SAFETY: the threads are done.
        assert_eq!(unsafe { slot.data_ref().group_book.get() }.members_left, 0);
    }
}
