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
    /// contiguous slot (which the claim prefetches) instead of four scattered buffers.
    pub tensors: SmallVec<[Tensor; 1]>,
    pub scalars: SmallVec<[u64; 2]>,
    pub members: SmallVec<[MemberArgs; 1]>,
    /// Producers this slot holds a lifetime reference on (released when it finishes).
    pub producers: SmallVec<[SlotId; 2]>,
    /// Group aggregation (scheduler only): members not yet terminal, and the earliest
    /// member failure.
    pub members_left: u32,
    pub member_failure: Option<crate::lane::Failure>,
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
            members_left: 0,
            member_failure: None,
        }
    }
}

impl SlotData {
    /// Reset for reuse, keeping the vectors' capacity (no per-task allocation once warm).
    pub fn clear(&mut self) {
        self.run = crate::run::RunRef::NONE;
        self.entry = None;
        self.tensors.clear();
        self.scalars.clear();
        self.members.clear();
        self.producers.clear();
        self.outputs.clear();
        self.heap = None;
        self.members_left = 0;
        self.member_failure = None;
    }
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
// task; dagrt never dereferences them, only the executor does, on the host's terms.
unsafe impl Send for Slot {}

impl Slot {
    /// The slot's task data.
    ///
    /// # Safety
    /// The caller must be the slot's current owner: the orchestrator while the slot is
    /// BUILDING (or after it claimed it FREE), the scheduler or a lane while it is READY/RUNNING
    /// and dispatched to them (only the scheduler writes, lanes read their member), a failure
    /// propagator reading `producers`/`run` (written before publication), or the thread that
    /// won the CONSUMED transition. These phases are ordered by the slot lock, the ready queue
    /// mutex and the lane mailbox, so no two owners overlap.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn data(&self) -> &mut SlotData {
        // SAFETY: exclusivity is the caller's contract above.
        unsafe { &mut *self.data.get() }
    }
}
