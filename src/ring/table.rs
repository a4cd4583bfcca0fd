//! The slot table: the task window's entries, their free list and the claim.

use super::{Slot, SlotData};
use crate::event::Event;
use crate::slot::{SlotCore, SlotId};
use crate::spsc::Padded;
use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

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
    /// Free table entries (the task window's capacity): an entry is here, in the claimer's
    /// private cache, or held by one live slot, one at a time (entries enter and leave this
    /// list under its lock).
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
    /// releases, a completion's consumers and producers).
    pub fn prefetch_id(&self, id: SlotId) {
        if let Some(p) = self.slot_addr((id & INDEX_MASK) as usize) {
            crate::prefetch::write(p);
            crate::prefetch::write(p.wrapping_add(std::mem::offset_of!(Slot, core)));
        }
    }

    /// Warm the core line of slot `id` only (a consumer whose fan-in a completion releases:
    /// its data may be the submitting thread's still, being built).
    pub fn prefetch_core(&self, id: SlotId) {
        if let Some(p) = self.slot_addr((id & INDEX_MASK) as usize) {
            crate::prefetch::write(p.wrapping_add(std::mem::offset_of!(Slot, core)));
        }
    }

    /// Warm a job's slot before its lane claims and runs it: the core (claimed, written)
    /// and the data (read). A lane comes to it from a kernel that evicted everything, and
    /// would otherwise miss on these lines one after the other.
    pub fn prefetch_job(&self, id: SlotId) {
        if let Some(p) = self.slot_addr((id & INDEX_MASK) as usize) {
            let core = std::mem::offset_of!(Slot, core);
            crate::prefetch::write(p.wrapping_add(core));
            for off in (0..core).step_by(64) {
                crate::prefetch::read(p.wrapping_add(off));
            }
        }
    }

    /// Warm the next entry the claimer will take: a stream of submits walks the table in
    /// free-list order, and each entry's lines are usually cold by then.
    fn prefetch(&self, i: usize) {
        if let Some(p) = self.slot_addr(i) {
            for off in (0..std::mem::size_of::<Slot>()).step_by(64) {
                crate::prefetch::write(p.wrapping_add(off));
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
