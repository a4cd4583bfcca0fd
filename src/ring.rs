//! The Ring (Orchestrator seed §5): the bounded task window of slots and the four heap rings.
//!
//! Slot ids are monotonic (a sequence number above the table index, see `INDEX_BITS`); the
//! window is the number of table entries, and a submit waits only when every entry is in
//! use (any free entry takes the next id). Heap rings are MAP_SHARED anonymous mappings taken when the
//! Worker initialises, before any dagrt thread (or forked lane) starts, so forked children see
//! them at the same address; each ring reclaims in FIFO order as its oldest slab is released.

use crate::callable::Entry;
use crate::event::Event;
use crate::slot::{SlotCore, SlotId};
use crate::spsc::Padded;
use crate::task::{CallConfig, Tensor};
use smallvec::SmallVec;
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    /// Group aggregation (scheduler only): members not yet terminal, and the first failure.
    pub members_left: u32,
    pub member_failure: Option<Arc<str>>,
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

/// Ask for the line at `p` in exclusive state: its next access is a write, and its last
/// writer was usually a thread on the other core.
#[inline]
fn prefetchw(p: *const u8) {
    // SAFETY: prefetching is a hint that never faults; callers pass addresses inside a slot.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!(
            "prefetchw byte ptr [{0}]",
            in(reg) p,
            options(nostack, preserves_flags, readonly)
        )
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Table entries are built in chunks of this many as claims first reach them (the first
/// when the table is made), so a large window costs memory only up to the high-water mark
/// of slots in flight.
const CHUNK: usize = 4096;

/// Low bits of a slot id: the table index. The high bits are a per-worker monotonic
/// sequence number, so ids are monotonic and never repeat, while any free table entry can
/// take the next id (one long-lived slot never blocks the window).
pub const INDEX_BITS: u32 = 24;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

/// The last sequence number a slot id can carry (2^40 - 1): a worker issues at most this
/// many task ids. Beyond it ids would wrap and stop growing, and the stale-handle checks
/// rely on their growth, so the next submit fails instead (`Orchestrator::claim_slot`).
pub const LAST_SEQ: u64 = (1 << (64 - INDEX_BITS)) - 1;

/// The slot id of sequence number `seq` (used to bound a run's ids); past LAST_SEQ, an id
/// above every issued one.
pub fn first_id_of_seq(seq: u64) -> SlotId {
    if seq > LAST_SEQ {
        SlotId::MAX
    } else {
        seq << INDEX_BITS
    }
}

struct FreeList {
    /// Freed table indexes, reused most recent first.
    stack: Vec<u32>,
    /// Indexes below this have been handed out at least once.
    fresh: u32,
}

/// Why `SlotTable::claim` returned no slot.
#[derive(Debug)]
pub enum ClaimError {
    /// Every entry stayed in use until the timeout.
    Full,
    /// A free entry's chunk could not be made accessible (out of memory).
    Grow(std::io::Error),
}

pub struct SlotTable {
    /// `window` entries' address space, reserved as one inaccessible anonymous mapping and
    /// made accessible a chunk at a time as entries are built (so the window is not charged
    /// to the commit limit). An entry's address is one multiply-add away: a task's life looks
    /// up its slot some twenty times, on every thread.
    base: NonNull<Slot>,
    /// Entries `[0, built)` are built (a prefix: fresh indexes are handed out in order and
    /// chunks are built in order under `grow`). Raised with Release after the entries are
    /// written; every lookup checks its index against it (Acquire), so even a forged id
    /// never reaches an unbuilt entry.
    built: AtomicUsize,
    /// Serialises building (see `ensure_built`).
    grow: Mutex<()>,
    /// Entries per chunk (a power of two).
    chunk: usize,
    window: u32,
    /// Free table entries (the task window's capacity).
    /// (This and `cached` on lines of their own: every slot lookup reads the fields above.)
    free: Padded<Mutex<FreeList>>,
    /// Free indexes held in the claimer's private cache (for `live`; written only by the
    /// claimer, so a plain store).
    cached: Padded<AtomicU32>,
    /// Notified when a slot is freed (task-window back-pressure).
    pub freed: Event,
}

// SAFETY: the table owns its mapping; the entries in it are `Slot`s, which are Send and Sync,
// and the only other state is atomics and mutexes.
unsafe impl Send for SlotTable {}
// SAFETY: as above.
unsafe impl Sync for SlotTable {}

impl SlotTable {
    /// A table of `window` slots (at most 2^24); fails if the address space for it cannot
    /// be reserved.
    pub fn new(window: u32) -> std::io::Result<SlotTable> {
        let window = window.clamp(1, 1 << INDEX_BITS);
        let chunk = (window as usize).next_power_of_two().min(CHUNK);
        let len = SlotTable::bytes_for(window);
        // SAFETY: anonymous mapping, no fd, kernel chooses the (page-aligned, so Slot-aligned)
        // address.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let t = SlotTable {
            base: NonNull::new(map.cast()).ok_or_else(std::io::Error::last_os_error)?,
            built: AtomicUsize::new(0),
            grow: Mutex::new(()),
            chunk,
            window,
            free: Padded(Mutex::new(FreeList {
                stack: Vec::new(),
                fresh: 0,
            })),
            cached: Padded(AtomicU32::new(0)),
            freed: Event::default(),
        };
        // The first chunk now, while the worker starts: a first run would otherwise fault in
        // its pages (about 2.6 MB) on the submitting thread, with lanes already waiting.
        t.ensure_built(0)?;
        Ok(t)
    }

    /// The address space a table of `window` slots reserves.
    pub fn bytes_for(window: u32) -> usize {
        window as usize * std::mem::size_of::<Slot>()
    }

    /// Build the entries up to the chunk of index `i`, in order, if they are not yet; fails
    /// if the chunk's memory cannot be committed (the entries stay unbuilt).
    #[inline]
    fn ensure_built(&self, i: usize) -> std::io::Result<()> {
        if i >= self.built.load(Ordering::Acquire) {
            return self.build_up_to(i);
        }
        Ok(())
    }

    #[cold]
    fn build_up_to(&self, i: usize) -> std::io::Result<()> {
        let _g = self.grow.lock().unwrap_or_else(|p| p.into_inner());
        let mut b = self.built.load(Ordering::Relaxed);
        while b <= i {
            let end = (b + self.chunk).min(self.window as usize);
            let size = std::mem::size_of::<Slot>();
            // SAFETY: [b, end) lies in the mapping, and its start is page-aligned: b is 0 or a
            // multiple of CHUNK, and CHUNK entries (multiples of 64 bytes) span whole pages.
            let rc = unsafe {
                libc::mprotect(
                    self.base.as_ptr().add(b).cast(),
                    (end - b) * size,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            };
            if rc != 0 {
                // The commit limit or RLIMIT_DATA refused the chunk: the caller reports it.
                return Err(std::io::Error::last_os_error());
            }
            for k in b..end {
                // SAFETY: k < window lies in the mapping; entries at or above `built` are
                // unbuilt and unreachable (every lookup checks `built`), so this is their only
                // writer.
                unsafe {
                    self.base.as_ptr().add(k).write(Slot {
                        core: SlotCore::default(),
                        data: UnsafeCell::new(SlotData::default()),
                    })
                };
            }
            b = end;
            // Publication of the entries just written (lookups read it with Acquire).
            self.built.store(b, Ordering::Release);
        }
        Ok(())
    }

    pub fn window(&self) -> u64 {
        self.window as u64
    }

    /// The slot of `id`. Ids reach here after `claim` built their entry; a caller-supplied
    /// id is checked with `contains` first (a forged one that is not panics here, it never
    /// reads an unbuilt entry).
    #[inline]
    pub fn get(&self, id: SlotId) -> &Slot {
        let i = (id & INDEX_MASK) as usize;
        assert!(
            i < self.built.load(Ordering::Acquire),
            "slot {id:#x}: no such table entry"
        );
        // SAFETY: entries below `built` were written before it was raised (Release, read
        // with Acquire above) and live until the table is dropped.
        unsafe { &*self.base.as_ptr().add(i) }
    }

    /// Whether `id` names a built table entry (a forged or foreign id may not).
    pub fn contains(&self, id: SlotId) -> bool {
        ((id & INDEX_MASK) as usize) < self.built.load(Ordering::Acquire)
    }

    /// Claim a free table entry for sequence number `seq`, waiting up to `timeout` for
    /// one; returns the new slot id (BUILDING, for `run`, holding its scope reference).
    /// Fails with `Full` if none came free in time, and with `Grow` if the entry's chunk
    /// could not be built (the entry goes back to `cache`, so a later claim retries it).
    /// `cache` is the claimer's private stack of free indexes: it takes the shared free
    /// list wholesale when empty, so a claim costs no lock in the steady state.
    pub fn claim(
        &self,
        cache: &mut Vec<u32>,
        seq: u64,
        run: u64,
        timeout: Duration,
    ) -> Result<SlotId, ClaimError> {
        let mut index = cache.pop();
        if index.is_none() {
            let got = self.freed.wait_until_timeout(
                || {
                    let mut f = self.free.lock().unwrap_or_else(|p| p.into_inner());
                    if !f.stack.is_empty() {
                        // Same order: the most recently freed (cache-warm) pops first.
                        std::mem::swap(cache, &mut f.stack);
                        index = cache.pop();
                    } else if f.fresh < self.window {
                        f.fresh += 1;
                        index = Some(f.fresh - 1);
                    }
                    self.cached.store(cache.len() as u32, Ordering::Relaxed);
                    index.is_some()
                },
                timeout,
            );
            if !got {
                return Err(ClaimError::Full);
            }
        } else {
            self.cached.store(cache.len() as u32, Ordering::Relaxed);
        }
        let i = index.ok_or(ClaimError::Full)? as usize;
        if let Err(x) = self.ensure_built(i) {
            cache.push(i as u32);
            self.cached.store(cache.len() as u32, Ordering::Relaxed);
            return Err(ClaimError::Grow(x));
        }
        let id = (seq << INDEX_BITS) | i as u64;
        self.get(id).core.begin_building_for(id, run, 1);
        if let Some(&next) = cache.last() {
            self.prefetch(next as usize);
        }
        Ok(id)
    }

    /// Warm the two lines a reference release and consumption of slot `id` touch (the
    /// data's first line and the core's), ahead of a walk over many cold slots (a scope's
    /// releases).
    pub fn prefetch_id(&self, id: SlotId) {
        if let Some(p) = self.slot_addr((id & INDEX_MASK) as usize) {
            prefetchw(p);
            // SAFETY: the core lies inside the slot.
            prefetchw(unsafe { p.add(std::mem::offset_of!(Slot, core)) });
        }
    }

    /// Warm the next entry the claimer will take: a stream of submits walks the table in
    /// free-list order, and each entry's lines are usually cold by then.
    fn prefetch(&self, i: usize) {
        if let Some(p) = self.slot_addr(i) {
            for off in (0..std::mem::size_of::<Slot>()).step_by(64) {
                // SAFETY: `off` is inside the slot.
                prefetchw(unsafe { p.add(off) });
            }
        }
    }

    /// The address of table entry `i`, if it is built (for prefetching).
    fn slot_addr(&self, i: usize) -> Option<*const u8> {
        (i < self.built.load(Ordering::Relaxed))
            .then(|| self.base.as_ptr().wrapping_add(i) as *const u8)
    }

    /// Return an entry to FREE (after on_consumed).
    pub fn free(&self, id: SlotId) {
        self.free_all(&[id]);
    }

    /// Roll back a claim whose handle never reached the user: the id is not issued.
    pub fn unclaim(&self, id: SlotId) {
        self.get(id).core.unissue(id);
        self.free(id);
    }

    /// `free` for a batch: one free-list lock and one wake-up.
    pub fn free_all(&self, ids: &[SlotId]) {
        for &id in ids {
            self.get(id).core.free();
        }
        {
            let mut f = self.free.lock().unwrap_or_else(|p| p.into_inner());
            f.stack
                .extend(ids.iter().map(|&id| (id & INDEX_MASK) as u32));
        }
        self.freed.notify_cond();
    }

    /// Slots not FREE: entries handed out minus entries returned (read under the free-list
    /// lock, so the hot path keeps no shared counter for it).
    pub fn live(&self) -> i64 {
        let f = self.free.lock().unwrap_or_else(|p| p.into_inner());
        f.fresh as i64 - f.stack.len() as i64 - self.cached.load(Ordering::Relaxed) as i64
    }

    /// Every built slot (for cancellation's sweep).
    pub fn iter(&self) -> impl Iterator<Item = &Slot> + '_ {
        // SAFETY: as in `get`: entries below `built` are built and live as long as the table.
        (0..self.built.load(Ordering::Acquire)).map(|i| unsafe { &*self.base.as_ptr().add(i) })
    }
}

impl Drop for SlotTable {
    fn drop(&mut self) {
        let built = *self.built.get_mut();
        // SAFETY: entries below `built` are built and nothing borrows the table any more
        // (`&mut self`); then the mapping is exactly what mmap returned in `new`.
        unsafe {
            std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(
                self.base.as_ptr(),
                built,
            ));
            libc::munmap(self.base.as_ptr().cast(), SlotTable::bytes_for(self.window));
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum HeapError {
    /// Back-pressure outlasted the timeout.
    Exhausted,
    /// The request can never fit in one ring.
    TooLarge,
}

struct RingState {
    /// Monotonic byte positions: `top` is the next free byte, `tail` the oldest live one;
    /// the physical offset is the position modulo the ring size.
    top: u64,
    tail: u64,
    /// FIFO of reservations in allocation order: (end position, released).
    fifo: VecDeque<(u64, bool)>,
    /// Sequence number of `fifo[0]`.
    head_seq: u64,
}

/// One heap ring: a slab region reclaimed strictly in allocation order.
pub struct HeapRing {
    base: *mut u8,
    size: u64,
    /// Guards top/tail/fifo (ring.mu in the seed).
    st: Mutex<RingState>,
    /// Notified when the tail advances (heap back-pressure).
    freed: Event,
}

// SAFETY: `base` is a process-wide mapping that outlives the ring; all mutable state is
// behind `st`.
unsafe impl Send for HeapRing {}
// SAFETY: as above.
unsafe impl Sync for HeapRing {}

impl HeapRing {
    fn lock(&self) -> std::sync::MutexGuard<'_, RingState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserve `bytes` (already aligned), waiting up to `timeout` for reclamation.
    pub fn alloc(&self, bytes: u64, timeout: Duration) -> Result<(*mut u8, u64), HeapError> {
        if bytes > self.size {
            return Err(HeapError::TooLarge);
        }
        let mut out = None;
        let ok = self.freed.wait_until_timeout(
            || {
                let mut st = self.lock();
                let phys = st.top % self.size;
                let start = if phys + bytes > self.size {
                    st.top + (self.size - phys)
                } else {
                    st.top
                };
                // Nothing live: the gap up to the wrap point belongs to nobody.
                let tail = if st.fifo.is_empty() { start } else { st.tail };
                if start + bytes - tail > self.size {
                    return false;
                }
                st.tail = tail;
                st.top = start + bytes;
                let seq = st.head_seq + st.fifo.len() as u64;
                st.fifo.push_back((start + bytes, false));
                // SAFETY: `start % size + bytes <= size`, inside the mapping.
                out = Some((unsafe { self.base.add((start % self.size) as usize) }, seq));
                true
            },
            timeout,
        );
        match (ok, out) {
            (true, Some(r)) => Ok(r),
            _ => Err(HeapError::Exhausted),
        }
    }

    /// Release reservation `seq`; the tail advances over every released head.
    pub fn release(&self, seq: u64) {
        let mut st = self.lock();
        let idx = (seq - st.head_seq) as usize;
        st.fifo[idx].1 = true;
        let mut advanced = false;
        while let Some(&(end, true)) = st.fifo.front() {
            st.fifo.pop_front();
            st.head_seq += 1;
            st.tail = end;
            advanced = true;
        }
        if st.fifo.is_empty() {
            st.tail = st.top;
        }
        drop(st);
        if advanced {
            self.freed.notify_cond();
        }
    }

    pub fn top(&self) -> u64 {
        self.lock().top
    }
    pub fn tail(&self) -> u64 {
        self.lock().tail
    }
    pub fn size(&self) -> u64 {
        self.size
    }
}

/// The four heap rings, carved from one mapping.
pub struct HeapRings {
    pub rings: Vec<HeapRing>,
    map: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is owned by this struct and only unmapped in Drop.
unsafe impl Send for HeapRings {}
// SAFETY: as above; the rings synchronise themselves.
unsafe impl Sync for HeapRings {}

impl HeapRings {
    /// Map `MAX_RING_DEPTH * ring_size` bytes, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE:
    /// virtual address space only, physical pages on first touch.
    pub fn new(ring_size: u64) -> std::io::Result<HeapRings> {
        let ring_size = align_up(ring_size.max(HEAP_ALIGN)).unwrap_or(!(HEAP_ALIGN - 1));
        let len = ring_size
            .checked_mul(MAX_RING_DEPTH as u64)
            .filter(|&l| l <= isize::MAX as u64)
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOMEM))?
            as usize;
        // SAFETY: anonymous mapping, no fd, kernel chooses the address.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let rings = (0..MAX_RING_DEPTH)
            .map(|i| HeapRing {
                // SAFETY: i * ring_size < len.
                base: unsafe { (map as *mut u8).add(i * ring_size as usize) },
                size: ring_size,
                st: Mutex::new(RingState {
                    top: 0,
                    tail: 0,
                    fifo: VecDeque::new(),
                    head_seq: 0,
                }),
                freed: Event::default(),
            })
            .collect();
        Ok(HeapRings { rings, map, len })
    }

    /// Ring for a 0-based scope depth, clamped to the last ring.
    pub fn for_depth(depth: usize) -> usize {
        depth.min(MAX_RING_DEPTH - 1)
    }
}

impl Drop for HeapRings {
    fn drop(&mut self) {
        // SAFETY: `map`/`len` are exactly what mmap returned; nothing references the rings now.
        unsafe {
            libc::munmap(self.map, self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table builds entries a chunk at a time as claims reach them; ids past the built
    /// prefix are not contained, and looking one up panics rather than read unbuilt memory.
    #[test]
    fn the_table_grows_a_chunk_at_a_time_and_lookups_stay_inside_it() {
        let t = SlotTable::new(3 * CHUNK as u32).expect("reserve");
        assert_eq!(
            t.built.load(Ordering::Relaxed),
            CHUNK,
            "the first chunk at start"
        );
        let far = (2 * CHUNK) as SlotId;
        assert!(!t.contains(far));
        let forged = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            t.get(far);
        }));
        assert!(
            forged.is_err(),
            "a lookup past the built entries must panic"
        );

        let mut cache = Vec::new();
        let ids: Vec<SlotId> = (1..=CHUNK as u64 + 1)
            .map(|seq| {
                t.claim(&mut cache, seq, 1, Duration::ZERO)
                    .expect("a free entry")
            })
            .collect();
        assert_eq!(
            t.built.load(Ordering::Relaxed),
            2 * CHUNK,
            "the second chunk on demand"
        );
        let last = *ids.last().unwrap();
        assert_eq!(last & INDEX_MASK, CHUNK as u64);
        assert!(t.contains(last) && !t.contains(far));
        assert_eq!(t.get(last).core.state(), crate::slot::BUILDING);
        assert_eq!(t.iter().count(), 2 * CHUNK);
        assert_eq!(t.live(), CHUNK as i64 + 1);
        // Dropped here with built entries in use: they are dropped in place, then unmapped.
    }

    /// The window's bounds: one entry (less than a page, one chunk), and the largest window,
    /// whose address range (10 GiB) is reserved without being committed.
    #[test]
    fn the_smallest_and_largest_windows() {
        let t = SlotTable::new(1).expect("reserve");
        let mut cache = Vec::new();
        let id = t
            .claim(&mut cache, 1, 1, Duration::ZERO)
            .expect("the one entry");
        assert!(
            matches!(
                t.claim(&mut cache, 2, 1, Duration::ZERO),
                Err(ClaimError::Full)
            ),
            "a full window"
        );
        assert_eq!(t.get(id).core.state(), crate::slot::BUILDING);

        let t = SlotTable::new(1 << INDEX_BITS).expect("reserve the largest window");
        assert_eq!(t.window(), 1 << INDEX_BITS);
        assert_eq!(t.built.load(Ordering::Relaxed), CHUNK);
        assert!(!t.contains(CHUNK as SlotId));
    }
}
