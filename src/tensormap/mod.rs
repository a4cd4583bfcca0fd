//! The TensorMap (Orchestrator seed §7): (run, memory) -> current producer slots.
//!
//! Keys are the footprints of tensor views, so a lookup finds every live writer whose
//! footprint overlaps the reader's, whatever data pointer each used. An insert replaces only
//! the writers the new footprint fully covers; a writer that is only partly overwritten keeps
//! its entry. Erase is owner-checked: every entry has a unique key its owner journals, so a
//! superseded writer that is consumed first never removes a later writer's entry.
//!
//! Index: small footprints (the common case: whole small buffers) are hashed by the 256-byte
//! granules they span, so an insert or lookup is one or two hash probes; bigger row sets
//! (matrix tiles, column blocks) are hashed by the cells of a grid over their rows (`grid`);
//! other footprints spanning more than 8 granules (big buffers) live in an ordered index
//! searched by address range.

mod grid;

use crate::run::RunId;
use crate::slot::SlotId;
use crate::view::{Footprint, Rows};
use grid::{RowsClass, MAX_CLASSES};
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Mutex, MutexGuard};

/// An entry's key, journaled by its owner: slab index, insertion sequence, and the bytes
/// the entry first covered (a dense entry partly overwritten is split into the pieces that
/// remain; the pieces keep the sequence and lie inside those bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapKey {
    idx: u32,
    seq: u64,
    lo: u64,
    hi: u64,
}

const GRANULE_SHIFT: u32 = 8;
/// Footprints spanning at most this many granules are hashed by granule.
const SMALL_GRANULES: u64 = 8;
const DENSE: u32 = u32::MAX;

/// Multiplicative hashing for granule numbers (SipHash would dominate the probe).
#[derive(Default)]
struct GranuleHasher(u64);

impl Hasher for GranuleHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (x ^ (x >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[derive(Clone, Copy)]
struct MapEntry {
    owner: SlotId,
    lo: u64,
    hi: u64,
    /// 0 for a free slab entry.
    seq: u64,
    /// Index into `RunMap::strided`, or DENSE.
    shape: u32,
    /// A remaining piece of a split entry (its journaled key may name another piece).
    split: bool,
    /// Index into `RunMap::classes` of the grid holding it, or NO_CLASS.
    class: u8,
}

const NO_CLASS: u8 = u8::MAX;

fn granules(lo: u64, hi: u64) -> (u64, u64) {
    (lo >> GRANULE_SHIFT, (hi - 1) >> GRANULE_SHIFT)
}

/// One entry's membership in one granule's list (the small index is intrusive, so an insert
/// allocates nothing once the map is warm).
#[derive(Clone, Copy)]
struct Link {
    idx: u32,
    next: u32,
}

const NIL: u32 = u32::MAX;

#[derive(Default)]
struct RunMap {
    entries: Vec<MapEntry>,
    free: Vec<u32>,
    live: usize,
    /// Granule -> head of its list in `links`.
    small: HashMap<u64, u32, BuildHasherDefault<GranuleHasher>>,
    links: Vec<Link>,
    /// Free `links` entries, chained through `next`.
    free_link: Option<u32>,
    big: BTreeMap<(u64, u64), u32>,
    /// Longest big footprint: bounds the backwards reach of a range query.
    big_max_len: u64,
    /// Grids of big row sets, by stride and origin (at most MAX_CLASSES).
    classes: Vec<RowsClass>,
    strided: Vec<Footprint>,
    free_strided: Vec<u32>,
    seq: u64,
    /// Entries were split in this run: erase may have to find pieces.
    splits: bool,
}

impl RunMap {
    fn footprint(&self, e: &MapEntry) -> Footprint {
        if e.shape == DENSE {
            Footprint::dense(e.lo, e.hi - e.lo)
        } else {
            self.strided[e.shape as usize]
        }
    }

    /// Whether entry `e` overlaps `fp`. Two dense ranges overlap iff their intervals meet:
    /// no footprint to build.
    fn entry_overlaps(&self, e: &MapEntry, fp: &Footprint) -> bool {
        if !(e.lo < fp.hi && fp.lo < e.hi) {
            return false;
        }
        match e.shape {
            DENSE => fp.dense || Footprint::dense(e.lo, e.hi - e.lo).overlaps(fp),
            // In place: a search compares many strided entries.
            s => self.strided[s as usize].overlaps(fp),
        }
    }

    /// Slab indexes of the entries whose footprint overlaps `fp`, into `out` (deduplicated).
    fn overlapping(&self, fp: &Footprint, out: &mut Vec<u32>) {
        out.clear();
        let (g0, g1) = granules(fp.lo, fp.hi);
        if !self.small.is_empty() {
            if g1 - g0 < 64 || g1 - g0 < self.small.len() as u64 {
                for g in g0..=g1 {
                    if let Some(&h) = self.small.get(&g) {
                        self.collect(h, out);
                    }
                }
            } else {
                for (g, &h) in &self.small {
                    if (g0..=g1).contains(g) {
                        self.collect(h, out);
                    }
                }
            }
        }
        let mut repeats = g1 > g0;
        if !self.big.is_empty() {
            let from = fp.lo.saturating_sub(self.big_max_len);
            out.extend(self.big.range((from, 0)..(fp.hi, 0)).map(|(_, &i)| i));
        }
        for c in self.classes.iter().filter(|c| c.live > 0) {
            repeats |= c.candidates(fp, out);
        }
        if repeats {
            out.sort_unstable();
            out.dedup();
        }
        out.retain(|&i| self.entry_overlaps(&self.entries[i as usize], fp));
    }

    fn collect(&self, mut l: u32, out: &mut Vec<u32>) {
        while l != NIL {
            let k = self.links[l as usize];
            out.push(k.idx);
            l = k.next;
        }
    }

    fn new_link(&mut self, idx: u32, next: u32) -> u32 {
        let k = Link { idx, next };
        match self.free_link {
            Some(l) => {
                let n = self.links[l as usize].next;
                self.free_link = (n != NIL).then_some(n);
                self.links[l as usize] = k;
                l
            }
            None => {
                self.links.push(k);
                (self.links.len() - 1) as u32
            }
        }
    }

    /// Unlink entry `idx` from granule `g`'s list; drop the granule when its list empties.
    fn unlink(&mut self, g: u64, idx: u32) {
        let Some(&head) = self.small.get(&g) else {
            return;
        };
        let (mut prev, mut l) = (NIL, head);
        while l != NIL && self.links[l as usize].idx != idx {
            prev = l;
            l = self.links[l as usize].next;
        }
        if l == NIL {
            return;
        }
        let next = self.links[l as usize].next;
        if prev == NIL {
            if next == NIL {
                self.small.remove(&g);
            } else if let Some(h) = self.small.get_mut(&g) {
                *h = next;
            }
        } else {
            self.links[prev as usize].next = next;
        }
        self.links[l as usize].next = self.free_link.unwrap_or(NIL);
        self.free_link = Some(l);
    }

    /// Empty the map for another run, keeping its allocations.
    fn reset(&mut self) {
        self.entries.clear();
        self.free.clear();
        self.live = 0;
        self.small.clear();
        self.links.clear();
        self.free_link = None;
        self.big.clear();
        self.big_max_len = 0;
        self.classes.clear();
        self.strided.clear();
        self.free_strided.clear();
        self.splits = false;
    }

    /// The granule `fp` lies in, when it is dense, within one granule, and no big entry could
    /// reach it: then that granule's list holds every entry it overlaps.
    fn one_granule(&self, fp: &Footprint) -> Option<u64> {
        let (g, g1) = granules(fp.lo, fp.hi);
        // (Grids emptied during the run stay: this path is then off until the run ends.)
        (fp.dense && g == g1 && self.big.is_empty() && self.classes.is_empty()).then_some(g)
    }

    /// Call `f` with each entry of granule `g`'s list that overlaps `fp`, walked in place.
    /// (A plain loop: walked as an iterator, the list paid a call per item.)
    #[inline]
    fn each_granule_overlap(&self, g: u64, fp: &Footprint, mut f: impl FnMut(u32)) {
        let mut l = self.small.get(&g).copied().unwrap_or(NIL);
        while l != NIL {
            let k = self.links[l as usize];
            l = k.next;
            if self.entry_overlaps(&self.entries[k.idx as usize], fp) {
                f(k.idx);
            }
        }
    }

    /// A lookup of a dense footprint within one granule, without a candidate vector. False
    /// (nothing called) when another case applies.
    fn lookup_one_granule(&self, fp: &Footprint, f: &mut impl FnMut(SlotId)) -> bool {
        let Some(g) = self.one_granule(fp) else {
            return false;
        };
        self.each_granule_overlap(g, fp, |idx| f(self.entries[idx as usize].owner));
        true
    }

    /// An insert of a dense footprint within one granule (a small buffer, the common case):
    /// the granule's list is walked for overlaps; with none the entry is added, with exactly
    /// one over the same bytes that entry is taken over in place (a chain rewriting one
    /// buffer). Returns `None` (having changed nothing and not called `seen`) otherwise.
    fn insert_one_granule(
        &mut self,
        fp: &Footprint,
        owner: SlotId,
        seen: &mut Option<impl FnOnce(&RunMap, &[u32])>,
        scratch: &mut Vec<u32>,
    ) -> Option<MapKey> {
        let g = self.one_granule(fp)?;
        scratch.clear();
        self.each_granule_overlap(g, fp, |idx| scratch.push(idx));
        // (`is_same_unordered`'s question, narrowed to what a dense one-granule footprint
        // can meet: a call there cost a chain's submit some 40 instructions.)
        let same_bytes = |e: &MapEntry| e.shape == DENSE && (e.lo, e.hi) == (fp.lo, fp.hi);
        let take_over = match scratch[..] {
            [] => None,
            [idx] if same_bytes(&self.entries[idx as usize]) => Some(idx),
            _ => return None,
        };
        if let Some(f) = seen.take() {
            f(self, scratch);
        }
        Some(match take_over {
            Some(idx) => self.take_over(idx, fp, owner),
            None => self.add(fp, owner),
        })
    }

    /// Whether entry `idx` covers exactly the bytes of `fp`, and is indexed by position
    /// only (the ordered index is keyed by sequence number too).
    fn is_same_unordered(&self, idx: u32, fp: &Footprint) -> bool {
        let e = &self.entries[idx as usize];
        let (g0, g1) = granules(e.lo, e.hi);
        (e.lo, e.hi) == (fp.lo, fp.hi)
            && (e.class != NO_CLASS || g1 - g0 < SMALL_GRANULES)
            && match e.shape {
                DENSE => fp.dense,
                s => self.strided[s as usize] == *fp,
            }
    }

    /// Make `owner` the producer of entry `idx` (the same bytes as `fp`) in place. The new
    /// sequence number voids the old owner's journaled key: its erase finds nothing.
    fn take_over(&mut self, idx: u32, fp: &Footprint, owner: SlotId) -> MapKey {
        self.seq += 1;
        let e = &mut self.entries[idx as usize];
        e.owner = owner;
        e.seq = self.seq;
        e.split = false;
        MapKey {
            idx,
            seq: self.seq,
            lo: fp.lo,
            hi: fp.hi,
        }
    }

    fn add(&mut self, fp: &Footprint, owner: SlotId) -> MapKey {
        self.seq += 1;
        let seq = self.seq;
        let idx = self.add_entry(fp, owner, seq, false);
        MapKey {
            idx,
            seq,
            lo: fp.lo,
            hi: fp.hi,
        }
    }

    fn add_entry(&mut self, fp: &Footprint, owner: SlotId, seq: u64, split: bool) -> u32 {
        let shape = if fp.dense {
            DENSE
        } else if let Some(s) = self.free_strided.pop() {
            self.strided[s as usize] = *fp;
            s
        } else {
            self.strided.push(*fp);
            (self.strided.len() - 1) as u32
        };
        let e = MapEntry {
            owner,
            lo: fp.lo,
            hi: fp.hi,
            seq,
            shape,
            split,
            class: NO_CLASS,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.entries[i as usize] = e;
                i
            }
            None => {
                self.entries.push(e);
                (self.entries.len() - 1) as u32
            }
        };
        let (g0, g1) = granules(fp.lo, fp.hi);
        if g1 - g0 < SMALL_GRANULES {
            for g in g0..=g1 {
                let l = self.new_link(idx, NIL);
                // One probe: push the link in front of the granule's list.
                let head = self.small.entry(g).or_insert(NIL);
                self.links[l as usize].next = *head;
                *head = l;
            }
        } else {
            self.add_big(idx, fp, seq);
        }
        self.live += 1;
        idx
    }

    /// Index entry `idx` (`fp`, more than a few granules): in a grid if it is a row set
    /// one fits, else in the ordered index.
    fn add_big(&mut self, idx: u32, fp: &Footprint, seq: u64) {
        if let Some(r) = fp.rows() {
            if let Some(c) = self.class_for(fp.lo, r) {
                self.classes[c].add(idx, fp);
                self.entries[idx as usize].class = c as u8;
                return;
            }
        }
        self.big_max_len = self.big_max_len.max(fp.hi - fp.lo);
        self.big.insert((fp.lo, seq), idx);
    }

    /// The grid a big row set `r` at `lo` goes in: the first that fits it, else a new one
    /// (reusing an emptied one), else none (the ordered index).
    fn class_for(&mut self, lo: u64, r: Rows) -> Option<usize> {
        if let Some(c) = self
            .classes
            .iter()
            .position(|c| c.live > 0 && c.fits(lo, r))
        {
            return Some(c);
        }
        let c = match self.classes.iter().position(|c| c.live == 0) {
            Some(c) => c,
            None if self.classes.len() < MAX_CLASSES => {
                self.classes.push(RowsClass::default());
                self.classes.len() - 1
            }
            None => return None,
        };
        self.classes[c].reset_for(lo, r);
        // (A row set too big for a grid of its own size does not fit it either.)
        self.classes[c].fits(lo, r).then_some(c)
    }

    fn remove(&mut self, idx: u32) {
        let e = self.entries[idx as usize];
        let (g0, g1) = granules(e.lo, e.hi);
        if e.class != NO_CLASS {
            self.classes[e.class as usize].remove(idx, &self.strided[e.shape as usize]);
        } else if g1 - g0 < SMALL_GRANULES {
            for g in g0..=g1 {
                self.unlink(g, idx);
            }
        } else {
            self.big.remove(&(e.lo, e.seq));
        }
        if e.shape != DENSE {
            self.free_strided.push(e.shape);
        }
        self.entries[idx as usize].seq = 0;
        self.free.push(idx);
        self.live -= 1;
    }
}

/// The map's contents, locked for one submit's whole tag walk or one erase.
#[derive(Default)]
pub struct Inner {
    /// Per-run maps; a handful of runs are live at once, so a vector beats hashing.
    runs: Vec<(RunId, RunMap)>,
    scratch: Vec<u32>,
    /// Maps of ended runs, emptied, for the next runs (a run of 100k tasks would otherwise
    /// grow a fresh index every time).
    pool: Vec<RunMap>,
}

/// Run maps kept for reuse.
const POOL: usize = 2;

impl Inner {
    /// Call `f` with each slot currently producing memory that `fp` touches.
    pub fn lookup(&mut self, run: RunId, fp: &Footprint, mut f: impl FnMut(SlotId)) {
        let Some(m) = self.runs.iter().find(|r| r.0 == run).map(|r| &r.1) else {
            return;
        };
        if m.lookup_one_granule(fp, &mut f) {
            return;
        }
        m.overlapping(fp, &mut self.scratch);
        for &i in &self.scratch {
            f(m.entries[i as usize].owner);
        }
    }

    /// `lookup` then `insert` of one footprint (an INOUT tensor), finding the overlapping
    /// entries once.
    pub fn lookup_insert(
        &mut self,
        run: RunId,
        fp: &Footprint,
        owner: SlotId,
        mut f: impl FnMut(SlotId),
    ) -> MapKey {
        self.insert_with(run, fp, owner, |m, scratch| {
            for &i in scratch.iter() {
                f(m.entries[i as usize].owner);
            }
        })
    }

    /// Make `owner` the producer of `fp`, dropping entries it fully covers. Returns the key
    /// the owner journals to erase its entry later.
    pub fn insert(&mut self, run: RunId, fp: &Footprint, owner: SlotId) -> MapKey {
        self.insert_with(run, fp, owner, |_, _| {})
    }

    /// `insert`, showing `seen` the entries overlapping `fp` before any is replaced.
    fn insert_with(
        &mut self,
        run: RunId,
        fp: &Footprint,
        owner: SlotId,
        seen: impl FnOnce(&RunMap, &[u32]),
    ) -> MapKey {
        let i = match self.runs.iter().position(|r| r.0 == run) {
            Some(i) => i,
            None => {
                let m = self.pool.pop().unwrap_or_default();
                self.runs.push((run, m));
                self.runs.len() - 1
            }
        };
        let m = &mut self.runs[i].1;
        let mut seen = Some(seen);
        if let Some(k) = m.insert_one_granule(fp, owner, &mut seen, &mut self.scratch) {
            return k;
        }
        if m.live > 0 {
            m.overlapping(fp, &mut self.scratch);
            if let Some(f) = seen.take() {
                f(m, &self.scratch);
            }
            // A rewrite of one tile (an INOUT): the entry changes hands in place.
            if let [idx] = self.scratch[..] {
                if m.is_same_unordered(idx, fp) {
                    return m.take_over(idx, fp, owner);
                }
            }
            for &idx in &self.scratch {
                let old = m.entries[idx as usize];
                if fp.covers(&m.footprint(&old)) {
                    m.remove(idx);
                } else if fp.dense && old.shape == DENSE {
                    // Dense over dense: the old writer keeps exactly the bytes left over.
                    m.remove(idx);
                    for (lo, hi) in [(old.lo, fp.lo), (fp.hi, old.hi)] {
                        if lo < hi {
                            m.add_entry(&Footprint::dense(lo, hi - lo), old.owner, old.seq, true);
                        }
                    }
                    m.splits = true;
                }
            }
        }
        m.add(fp, owner)
    }

    /// Erase the journaled entries that still exist and belong to `owner`.
    pub fn erase(&mut self, run: RunId, owner: SlotId, keys: &[MapKey]) {
        let Some(i) = self.runs.iter().position(|r| r.0 == run) else {
            return;
        };
        let m = &mut self.runs[i].1;
        for k in keys {
            let e = m.entries.get(k.idx as usize).copied();
            let direct = e.filter(|e| e.seq == k.seq && e.owner == owner);
            if let Some(e) = direct {
                m.remove(k.idx);
                if !e.split {
                    continue;
                }
            }
            if m.splits {
                // Pieces of a split entry lie inside the bytes the key first covered.
                m.overlapping(&Footprint::dense(k.lo, k.hi - k.lo), &mut self.scratch);
                for &idx in &self.scratch {
                    let p = m.entries[idx as usize];
                    if p.owner == owner && p.seq == k.seq {
                        m.remove(idx);
                    }
                }
            }
        }
        if m.live == 0 {
            self.retire(i);
        }
    }

    /// Erase every entry of `run` that lies entirely inside `[lo, hi)` (a heap slab being
    /// reclaimed: whatever was written there, including failure tombstones, is gone).
    pub fn erase_range(&mut self, run: RunId, lo: u64, hi: u64) {
        let Some(i) = self.runs.iter().position(|r| r.0 == run) else {
            return;
        };
        let m = &mut self.runs[i].1;
        m.overlapping(&Footprint::dense(lo, hi - lo), &mut self.scratch);
        for &idx in &self.scratch {
            let e = m.entries[idx as usize];
            if e.lo >= lo && e.hi <= hi {
                m.remove(idx);
            }
        }
        if m.live == 0 {
            self.retire(i);
        }
    }

    /// Forget everything of a finished run (including failure tombstones). Idempotent.
    pub fn drop_run(&mut self, run: RunId) {
        if let Some(i) = self.runs.iter().position(|r| r.0 == run) {
            self.retire(i);
        }
    }

    fn retire(&mut self, i: usize) {
        let (_, mut m) = self.runs.swap_remove(i);
        if self.pool.len() < POOL {
            m.reset();
            self.pool.push(m);
        }
    }

    /// Entries of all runs (counted per run map, which keeps `live` for itself).
    pub fn len(&self) -> usize {
        self.runs.iter().map(|r| r.1.live).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The TensorMap: the orchestrator inserts and looks up, the consuming thread erases.
#[derive(Default)]
pub struct TensorMap {
    /// Serialises the submit-time walk against consumption-time erase (seed invariant 1).
    mu: Mutex<Inner>,
}

impl TensorMap {
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.mu.lock().unwrap_or_else(|p| p.into_inner())
    }
    pub fn len(&self) -> usize {
        self.lock().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owners(m: &mut Inner, run: RunId, lo: u64, len: u64) -> Vec<SlotId> {
        let mut v = Vec::new();
        m.lookup(run, &Footprint::dense(lo, len), |s| v.push(s));
        v.sort_unstable();
        v
    }

    #[test]
    fn rewriting_the_same_bytes_takes_the_entry_over_and_voids_the_old_key() {
        let mut m = Inner::default();
        let k1 = m.insert(1, &Footprint::dense(4096, 64), 11);
        let k2 = m.lookup_insert(1, &Footprint::dense(4096, 64), 22, |p| assert_eq!(p, 11));
        assert_eq!(owners(&mut m, 1, 4096, 64), vec![22]);
        assert_eq!(m.len(), 1);
        // The superseded writer is consumed first: its erase must not remove the new entry.
        m.erase(1, 11, &[k1]);
        assert_eq!(owners(&mut m, 1, 4096, 64), vec![22]);
        m.erase(1, 22, &[k2]);
        assert!(owners(&mut m, 1, 4096, 64).is_empty());
        assert!(m.is_empty());
    }

    #[test]
    fn rewriting_a_big_footprint_keeps_the_ordered_index_consistent() {
        // 16 granules: the ordered index, keyed by (lo, sequence).
        let mut m = Inner::default();
        // (An unrelated entry keeps the run's map from being emptied and recycled.)
        m.insert(1, &Footprint::dense(64 << 20, 64), 99);
        let k1 = m.insert(1, &Footprint::dense(1 << 20, 4096), 11);
        let k2 = m.insert(1, &Footprint::dense(1 << 20, 4096), 22);
        m.erase(1, 11, &[k1]);
        m.erase(1, 22, &[k2]);
        assert_eq!(m.len(), 1);
        // The freed entry is reused for the same bytes: nothing stale may point at it too.
        m.insert(1, &Footprint::dense(1 << 20, 4096), 33);
        m.insert(1, &Footprint::dense(1 << 20, 4096), 44);
        assert_eq!(owners(&mut m, 1, 1 << 20, 4096), vec![44]);
        assert_eq!(m.len(), 2);
    }

    /// A rewrite over the same byte range that is not the same view (the first and last
    /// columns of a tile, after the whole tile) does not take the tile's entry over: the
    /// columns between keep their writer. With a leading dimension of 32 the tile is in the
    /// granule index, with 64 in a grid.
    #[test]
    fn only_the_same_view_takes_an_entry_over() {
        use crate::task::DataType;
        let view = |base: u64, shape: [u64; 2], strides: [u64; 2]| {
            crate::view::test_footprint(base, 0, DataType::U64, &shape, &strides).unwrap()
        };
        for ld in [32, 64] {
            let base = 1 << 20;
            let tile = view(base, [8, 8], [1, ld]);
            let ends = view(base, [8, 2], [1, 7 * ld]);
            assert_eq!((tile.lo, tile.hi), (ends.lo, ends.hi));
            let mut m = Inner::default();
            m.insert(1, &tile, 11);
            m.insert(1, &ends, 22);
            let col3 = view(base + 3 * ld * 8, [8, 1], [1, ld]);
            let mut found = Vec::new();
            m.lookup(1, &col3, |s| found.push(s));
            // (22 may be there too: the footprint comparison is conservative for this pair.)
            assert!(found.contains(&11), "ld {ld}: {found:?}");
            let mut found = Vec::new();
            m.lookup(1, &tile, |s| found.push(s));
            found.sort_unstable();
            assert_eq!(found, vec![11, 22], "ld {ld}");
            // The same view again does take over: one entry per view, the new owner's.
            m.insert(1, &ends, 33);
            assert_eq!(m.len(), 2);
        }
    }

    /// A row set spanning more cells than its stride's grid takes (a 32x32 block beside 4x4
    /// tiles) gets a grid of its own; once every grid is taken, row sets of yet another
    /// stride go to the ordered index. Lookups find each writer where it is.
    #[test]
    fn row_sets_fitting_no_grid_get_their_own_or_the_ordered_index() {
        use crate::task::DataType;
        let at = |base: u64, ld: u64, r: u64, c: u64, h: u64, w: u64| {
            crate::view::test_footprint(base, (r + c * ld) * 8, DataType::U64, &[h, w], &[1, ld])
                .unwrap()
        };
        let owners = |m: &mut Inner, fp: &Footprint| {
            let mut v = Vec::new();
            m.lookup(1, fp, |s| v.push(s));
            v.sort_unstable();
            v
        };
        let mut m = Inner::default();
        let (base, ld) = (1u64 << 20, 128u64);
        m.insert(1, &at(base, ld, 0, 0, 4, 4), 11);
        m.insert(1, &at(base, ld, 32, 4, 32, 32), 22);
        assert_eq!(
            m.runs[0].1.classes.len(),
            2,
            "the block in a grid of its own"
        );
        assert_eq!(owners(&mut m, &at(base, ld, 36, 8, 4, 4)), vec![22]);
        assert_eq!(owners(&mut m, &at(base, ld, 0, 0, 4, 4)), vec![11]);
        assert_eq!(owners(&mut m, &at(base, ld, 0, 0, 64, 36)), vec![11, 22]);
        // Six more strides take the other grids; a seventh goes to the ordered index.
        for k in 0..7u64 {
            let b = (2 + k) << 20;
            m.insert(1, &at(b, ld + 8 * (k + 1), 0, 0, 4, 4), 100 + k);
        }
        let run = &m.runs[0].1;
        assert_eq!((run.classes.len(), run.big.len()), (MAX_CLASSES, 1));
        let last = at(8 << 20, ld + 56, 0, 0, 4, 4);
        assert_eq!(owners(&mut m, &last), vec![106]);
        m.insert(1, &last, 33);
        assert_eq!(owners(&mut m, &last), vec![33]);
        assert_eq!(m.len(), 9);
    }

    #[test]
    fn a_partial_rewrite_still_splits() {
        let mut m = Inner::default();
        m.insert(1, &Footprint::dense(0, 256), 11);
        m.insert(1, &Footprint::dense(64, 64), 22);
        assert_eq!(owners(&mut m, 1, 0, 64), vec![11]);
        assert_eq!(owners(&mut m, 1, 64, 64), vec![22]);
        assert_eq!(owners(&mut m, 1, 128, 128), vec![11]);
    }
}
