//! The four heap rings: slab regions for runtime-allocated buffers, reclaimed in FIFO order.

use super::{align_up, HEAP_ALIGN, MAX_RING_DEPTH};
use crate::event::Event;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

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
    /// Reservations in allocation order.
    fifo: VecDeque<Reservation>,
    /// Sequence number of `fifo[0]`.
    head_seq: u64,
}

struct Reservation {
    /// End position.
    end: u64,
    released: bool,
    /// The slot the slab belongs to, and its run.
    owner: u64,
    run: u64,
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

impl RingState {
    /// The unreleased reservations of `run` among those holding live positions `[a, b)`.
    fn owners_at(&self, a: u64, b: u64, run: u64, found: &mut impl FnMut(u64)) {
        let b = b.min(self.top);
        if a >= b {
            return;
        }
        let first = self.fifo.partition_point(|r| r.end <= a);
        for r in self.fifo.range(first..) {
            if !r.released && r.run == run {
                found(r.owner);
            }
            if r.end >= b {
                break;
            }
        }
    }
}

impl HeapRing {
    fn lock(&self) -> std::sync::MutexGuard<'_, RingState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserve `bytes` (already aligned), waiting for reclamation while it progresses: fails
    /// once a wait sees the tail not move for `timeout` (the seed: "if timeout_ms elapses with
    /// no progress"). `owner`: the slot the slab belongs to and its run
    /// (`HeapRings::owners_in`).
    /// Not inlined: most submits need no slab, and its waits would weigh on the slot claim.
    #[inline(never)]
    pub fn alloc(
        &self,
        bytes: u64,
        timeout: Duration,
        owner: (u64, u64),
    ) -> Result<(*mut u8, u64), HeapError> {
        if bytes > self.size {
            return Err(HeapError::TooLarge);
        }
        let mut out = None;
        loop {
            // Reservations reclaimed when this wait began; a change is progress.
            let mut seen = None;
            let ok = self.freed.wait_until_timeout(
                || {
                    let mut st = self.lock();
                    if self.try_reserve(&mut st, bytes, owner, &mut out) {
                        return true;
                    }
                    *seen.get_or_insert(st.head_seq) != st.head_seq
                },
                timeout,
            );
            match (ok, out) {
                (_, Some(r)) => return Ok(r),
                // The tail moved: a new window of `timeout` from now.
                (true, None) => {}
                (false, None) => return Err(HeapError::Exhausted),
            }
        }
    }

    /// Reserve `bytes` at the top if the ring has room, into `out`.
    fn try_reserve(
        &self,
        st: &mut RingState,
        bytes: u64,
        owner: (u64, u64),
        out: &mut Option<(*mut u8, u64)>,
    ) -> bool {
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
        st.fifo.push_back(Reservation {
            end: start + bytes,
            released: false,
            owner: owner.0,
            run: owner.1,
        });
        // SAFETY: `start % size + bytes <= size`, inside the mapping.
        *out = Some((unsafe { self.base.add((start % self.size) as usize) }, seq));
        true
    }

    /// Release reservation `seq`; the tail advances over every released head.
    pub fn release(&self, seq: u64) {
        let mut st = self.lock();
        let idx = (seq - st.head_seq) as usize;
        st.fifo[idx].released = true;
        let mut advanced = false;
        while let Some(r) = st.fifo.front().filter(|r| r.released) {
            st.tail = r.end;
            st.fifo.pop_front();
            st.head_seq += 1;
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
    pub fn base(&self) -> *mut u8 {
        self.base
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

    /// The slots of run `run` whose live slabs hold bytes of `[lo, hi)`, each passed to
    /// `found`: a task that reads bytes of a runtime-owned buffer holds their slabs' owners,
    /// so the buffer outlives the task even when a later writer, not the slab's owner, is the
    /// producer the TensorMap finds. A range may run on into the next slab (physically after
    /// it: an older one once the ring has wrapped, or the first of the next ring), which its
    /// first slab does not keep. Inlined to the two comparisons that rule out a range outside
    /// the rings (every tensor of W1-W4); the search takes each ring's lock. A strided view's
    /// range may include slabs it skips: holding those too only delays their reclaim.
    #[inline]
    pub fn owners_in(&self, lo: u64, hi: u64, run: u64, found: &mut impl FnMut(u64)) {
        let base = self.map as u64;
        if hi <= base || lo >= base + self.len as u64 {
            return;
        }
        self.owners_in_rings(lo.max(base) - base, hi - base, run, found);
    }

    /// `owners_in` over offsets `[lo, hi)` into the mapping (`hi` may lie past its end).
    #[inline(never)]
    fn owners_in_rings(&self, lo: u64, hi: u64, run: u64, found: &mut impl FnMut(u64)) {
        let size = self.rings[0].size;
        let hi = hi.min(self.len as u64);
        for k in (lo / size)..hi.div_ceil(size) {
            let ring_lo = k * size;
            let (p_lo, p_hi) = (lo.max(ring_lo) - ring_lo, hi.min(ring_lo + size) - ring_lo);
            let st = self.rings[k as usize].lock();
            // Physical offsets map onto live positions in one piece, except across the
            // offset the tail is at, where positions wrap to the ring's start.
            let t = st.tail % size;
            let pos = |p: u64| st.tail + (p + size - t) % size;
            if p_lo < t && t < p_hi {
                st.owners_at(pos(p_lo), st.tail + size, run, found);
                st.owners_at(st.tail, pos(t) + (p_hi - t), run, found);
            } else {
                st.owners_at(pos(p_lo), pos(p_lo) + (p_hi - p_lo), run, found);
            }
        }
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
    use std::time::Instant;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A full ring: a wait that sees nothing reclaimed fails after `timeout`; one that sees
    /// reservations reclaimed in turn keeps waiting past `timeout` and gets its slab.
    #[test]
    fn back_pressure_fails_only_after_a_window_without_progress() {
        let rings = HeapRings::new(64 * 1024).unwrap();
        let r = &rings.rings[0];
        let slab = r.size() / 8;
        let seqs: Vec<u64> = (0..8)
            .map(|_| r.alloc(slab, Duration::ZERO, (1, 1)).unwrap().1)
            .collect();
        let t0 = Instant::now();
        assert_eq!(r.alloc(slab, ms(50), (1, 1)), Err(HeapError::Exhausted));
        let waited = t0.elapsed();
        assert!(
            waited >= ms(50) && waited < ms(2_000),
            "no progress: failed after {waited:?}, expected the 50 ms timeout"
        );
        std::thread::scope(|s| {
            // One reservation reclaimed every 40 ms, in allocation order: the whole ring is
            // free after about 320 ms, past the 200 ms timeout.
            s.spawn(|| {
                for &q in &seqs {
                    std::thread::sleep(ms(40));
                    r.release(q);
                }
            });
            let t0 = Instant::now();
            let got = r.alloc(r.size(), ms(200), (1, 1));
            let waited = t0.elapsed();
            assert!(
                got.is_ok(),
                "the ring was reclaiming every 40 ms, yet the wait failed after {waited:?}"
            );
            assert!(
                waited >= ms(280),
                "the whole ring came free early: {waited:?}"
            );
        });
    }

    /// The owners `owners_in` reports for `[lo, hi)` of run `run`.
    fn owners(rings: &HeapRings, lo: u64, hi: u64, run: u64) -> Vec<u64> {
        let mut v = Vec::new();
        rings.owners_in(lo, hi, run, &mut |o| v.push(o));
        v
    }

    /// `owners_in` finds the live slab holding an address, after the ring has wrapped too;
    /// released slabs, other runs and addresses outside the rings have none.
    #[test]
    fn owners_in_finds_the_live_slab() {
        let rings = HeapRings::new(4 * 1024).unwrap();
        let r = &rings.rings[1];
        let k = 1024;
        let at = |p: *mut u8| p as u64;
        let owner_of = |a: u64, run| owners(&rings, a, a + 1, run);
        let (a, sa) = r.alloc(2 * k, ms(0), (10, 1)).unwrap();
        let (b, sb) = r.alloc(k, ms(0), (11, 1)).unwrap();
        assert_eq!(owner_of(at(a), 1), [10]);
        assert_eq!(owner_of(at(a) + 2 * k - 1, 1), [10]);
        assert_eq!(owner_of(at(b) + 5, 1), [11]);
        assert_eq!(owner_of(at(b) + 5, 2), [], "another run's slab");
        assert_eq!(owner_of(at(b) + k, 1), [], "past the top");
        assert_eq!(owner_of(at(a) - 1, 1), [], "ring 0");
        assert_eq!(owner_of(8, 1), [], "outside the rings");
        assert_eq!(
            owners(&rings, at(a) + k, at(b) + 1, 1),
            [10, 11],
            "two slabs"
        );
        r.release(sa);
        assert_eq!(owner_of(at(a), 1), [], "reclaimed");
        // Wraps: 2 KiB from position 3 KiB lands at the ring's start, where a was.
        let (c, _) = r.alloc(2 * k, ms(0), (12, 1)).unwrap();
        assert_eq!(c, a);
        assert_eq!(owner_of(at(c) + k, 1), [12]);
        assert_eq!(owner_of(at(b), 1), [11]);
        // From the newer slab at the ring's start into the older one after it.
        assert_eq!(
            owners(&rings, at(c) + k, at(b) + 1, 1),
            [12, 11],
            "across the wrap"
        );
        r.release(sb);
        assert_eq!(owner_of(at(b), 1), []);
        assert_eq!(owner_of(at(c), 1), [12]);
    }

    /// A range from the last slab of one ring into the first of the next holds both.
    #[test]
    fn owners_in_crosses_rings() {
        let rings = HeapRings::new(4 * 1024).unwrap();
        let k = 1024;
        let (r0, r1) = (&rings.rings[0], &rings.rings[1]);
        let (x, _) = r0.alloc(4 * k, ms(0), (20, 1)).unwrap();
        let (y, _) = r1.alloc(k, ms(0), (21, 1)).unwrap();
        assert_eq!(x as u64 + 4 * k, y as u64);
        assert_eq!(owners(&rings, x as u64 + 3 * k, y as u64 + 8, 1), [20, 21]);
        assert_eq!(owners(&rings, x as u64 + 3 * k, y as u64 + 8, 2), []);
    }
}
