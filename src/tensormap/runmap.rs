//! One run's index of producer entries (`RunMap`): the entry slab, the granule hash of small
//! footprints with its intrusive lists, the grids of row sets and the ordered index of big
//! footprints; the overlap search over all three, and add / take-over / remove.

use super::grid::{RowsClass, MAX_CLASSES};
use super::MapKey;
use crate::slot::SlotId;
use crate::view::{Footprint, Rows};
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

const GRANULE_SHIFT: u32 = 8;
/// Footprints spanning at most this many granules are hashed by granule.
const SMALL_GRANULES: u64 = 8;
pub(super) const DENSE: u32 = u32::MAX;

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

/// Hashing for the `alone` hints, keyed by a footprint's first and last byte. Tiles of one
/// matrix share their low address bits (their offsets are multiples of the tile's bytes), so
/// the product's high bits, which hold every input bit, are folded into the low ones the
/// table indexes by (with `GranuleHasher`'s product, every tile probed one slot chain).
#[derive(Default)]
struct SpanHasher(u64);

impl Hasher for SpanHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(23) ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[derive(Clone, Copy)]
pub(super) struct MapEntry {
    pub(super) owner: SlotId,
    pub(super) lo: u64,
    pub(super) hi: u64,
    /// 0 for a free slab entry.
    pub(super) seq: u64,
    /// Index into `RunMap::strided`, or DENSE.
    pub(super) shape: u32,
    /// A remaining piece of a split entry (its journaled key may name another piece).
    pub(super) split: bool,
    /// It partly overwrote an older entry that could not be split (a strided view or tile):
    /// erased, it leaves a `FINISHED` marker so that it still shadows that entry (`report`).
    /// The pieces of a split entry inherit it.
    pub(super) shadows: bool,
    /// Index into `RunMap::classes` of the grid holding it, or NO_CLASS.
    class: u8,
    /// The map's `adds` when a search for exactly this entry's footprint found only this
    /// entry (`note_alone`); 0 for never. While no entry has been added since, a search for
    /// that footprint would find the same (removals only shrink it, take-overs change no
    /// footprint), so `alone` answers it without one.
    alone_at: u64,
}

const NO_CLASS: u8 = u8::MAX;

impl MapEntry {
    /// A new entry for `fp`'s bytes, in no grid yet.
    fn new(fp: &Footprint, owner: SlotId, seq: u64, shape: u32, split: bool) -> MapEntry {
        MapEntry {
            owner,
            lo: fp.lo,
            hi: fp.hi,
            seq,
            shape,
            split,
            shadows: false,
            class: NO_CLASS,
            alone_at: 0,
        }
    }
}

/// The owner of a marker: the bytes of an erased entry whose writer finished (its slot was
/// consumed), kept while it may shadow an older entry. Never reported as a producer.
pub(super) const FINISHED: SlotId = SlotId::MAX;

fn granules(lo: u64, hi: u64) -> (u64, u64) {
    (lo >> GRANULE_SHIFT, (hi - 1) >> GRANULE_SHIFT)
}

/// Whether entry `e` overlaps `fp` (`strided`: the map's strided footprints). Two dense
/// ranges overlap iff their intervals meet: no footprint to build. Inlined into the walks
/// (outlined, W4's lookups paid about 50 instructions more a task).
#[inline(always)]
fn overlaps(e: &MapEntry, fp: &Footprint, strided: &[Footprint]) -> bool {
    if !(e.lo < fp.hi && fp.lo < e.hi) {
        return false;
    }
    match e.shape {
        DENSE => fp.dense || Footprint::dense(e.lo, e.hi - e.lo).overlaps(fp),
        // In place: a search compares many strided entries.
        s => strided[s as usize].overlaps(fp),
    }
}

/// Overlapping entries a read's joint-rewrite test considers at most (`rewritten`).
const JOINT_ENTRIES: usize = 8;
/// Byte runs a footprint may have for the joint-rewrite test (a tile has one per column).
const JOINT_RUNS: u64 = 64;

/// `a` (sorted, disjoint byte runs) intersected with `b` (`keep`) or less `b`, into `out`.
fn runs_apply(a: &[(u64, u64)], b: &[(u64, u64)], keep: bool, out: &mut Vec<(u64, u64)>) {
    out.clear();
    let mut j = 0;
    for &(mut x0, x1) in a.iter() {
        while j < b.len() && b[j].1 <= x0 {
            j += 1;
        }
        let mut k = j;
        while x0 < x1 {
            let Some(&(y0, y1)) = b.get(k).filter(|y| y.0 < x1) else {
                if !keep {
                    out.push((x0, x1));
                }
                break;
            };
            if y0 > x0 && !keep {
                out.push((x0, y0));
            }
            let end = y1.min(x1);
            if keep && y0.max(x0) < end {
                out.push((y0.max(x0), end));
            }
            x0 = end.max(x0);
            k += 1;
        }
    }
}

/// `a` (sorted, disjoint byte runs) joined with `b` (the same), into `out`.
fn runs_union(a: &[(u64, u64)], b: &[(u64, u64)], out: &mut Vec<(u64, u64)>) {
    out.clear();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let next = if j == b.len() || (i < a.len() && a[i].0 <= b[j].0) {
            i += 1;
            a[i - 1]
        } else {
            j += 1;
            b[j - 1]
        };
        match out.last_mut() {
            Some(last) if next.0 <= last.1 => last.1 = last.1.max(next.1),
            _ => out.push(next),
        }
    }
}

/// Put `e` in the entry slab (a free entry first); returns its index.
fn alloc_entry(entries: &mut Vec<MapEntry>, free: &mut Vec<u32>, e: MapEntry) -> u32 {
    match free.pop() {
        Some(i) => {
            entries[i as usize] = e;
            i
        }
        None => {
            entries.push(e);
            (entries.len() - 1) as u32
        }
    }
}

/// Put `k` in the link slab (a free link first, chained through `next`); returns its index.
fn alloc_link(links: &mut Vec<Link>, free_link: &mut Option<u32>, k: Link) -> u32 {
    match *free_link {
        Some(l) => {
            let n = links[l as usize].next;
            *free_link = (n != NIL).then_some(n);
            links[l as usize] = k;
            l
        }
        None => {
            links.push(k);
            (links.len() - 1) as u32
        }
    }
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
pub(super) struct RunMap {
    pub(super) entries: Vec<MapEntry>,
    free: Vec<u32>,
    pub(super) live: usize,
    /// Granule -> head of its list in `links`.
    small: HashMap<u64, u32, BuildHasherDefault<GranuleHasher>>,
    links: Vec<Link>,
    /// Free `links` entries, chained through `next`.
    free_link: Option<u32>,
    pub(super) big: BTreeMap<(u64, u64), u32>,
    /// Longest big footprint: bounds the backwards reach of a range query.
    big_max_len: u64,
    /// Grids of big row sets, by stride and origin (at most MAX_CLASSES).
    pub(super) classes: Vec<RowsClass>,
    strided: Vec<Footprint>,
    free_strided: Vec<u32>,
    seq: u64,
    /// Entries were split in this run: erase may have to find pieces.
    pub(super) splits: bool,
    /// Entries created in this run (not take-overs): what an entry's `alone_at` is checked
    /// against.
    adds: u64,
    /// Strided footprint (first and last byte) -> the entry last found alone for it: a hint,
    /// checked against the entry's current footprint and `alone_at` before it is used.
    alone: HashMap<(u64, u64), u32, BuildHasherDefault<SpanHasher>>,
}

impl RunMap {
    pub(super) fn footprint(&self, e: &MapEntry) -> Footprint {
        if e.shape == DENSE {
            Footprint::dense(e.lo, e.hi - e.lo)
        } else {
            self.strided[e.shape as usize]
        }
    }

    /// Slab indexes of the entries whose footprint overlaps `fp`, into `out` (deduplicated).
    pub(super) fn overlapping(&self, fp: &Footprint, out: &mut Vec<u32>) {
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
        out.retain(|&i| overlaps(&self.entries[i as usize], fp, &self.strided));
    }

    /// The entry a search for the strided footprint `fp` would find alone, known without
    /// the search: one with exactly `fp`'s footprint found alone by a search since which no
    /// entry was added (a tiled code's reads and rewrites of its tiles, once each tile has a
    /// writer).
    #[inline]
    pub(super) fn alone_for(&self, fp: &Footprint) -> Option<u32> {
        #[cfg(test)]
        if tests::SEARCH_ALWAYS.get() {
            return None;
        }
        if fp.dense {
            return None;
        }
        let &idx = self.alone.get(&(fp.lo, fp.hi))?;
        let e = self.entries.get(idx as usize)?;
        let hit = (e.alone_at == self.adds && e.seq != 0 && e.shape != DENSE)
            .then_some(idx)
            .filter(|_| self.strided[e.shape as usize] == *fp);
        #[cfg(test)]
        tests::ALONE_HITS.set(tests::ALONE_HITS.get() + hit.is_some() as u64);
        hit
    }

    /// A search for the strided footprint `fp` found only entry `idx`, whose footprint it
    /// is: remember that for `alone_for`.
    #[inline]
    pub(super) fn note_alone(&mut self, idx: u32, fp: &Footprint) {
        let e = &mut self.entries[idx as usize];
        if fp.dense || e.shape == DENSE || self.strided[e.shape as usize] != *fp {
            return;
        }
        e.alone_at = self.adds;
        self.alone.insert((fp.lo, fp.hi), idx);
    }

    fn collect(&self, mut l: u32, out: &mut Vec<u32>) {
        while l != NIL {
            let k = self.links[l as usize];
            out.push(k.idx);
            l = k.next;
        }
    }

    fn new_link(&mut self, idx: u32, next: u32) -> u32 {
        alloc_link(&mut self.links, &mut self.free_link, Link { idx, next })
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
    pub(super) fn reset(&mut self) {
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
        self.adds = 0;
        self.alone.clear();
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
            if overlaps(&self.entries[k.idx as usize], fp, &self.strided) {
                f(k.idx);
            }
        }
    }

    /// A lookup of a dense footprint within one granule, without a candidate vector. False
    /// (nothing called) when another case applies.
    pub(super) fn lookup_one_granule(&self, fp: &Footprint, f: &mut impl FnMut(SlotId)) -> bool {
        let Some(g) = self.one_granule(fp) else {
            return false;
        };
        // One overlapping entry (the common case) needs no shadowing test and no list.
        let (mut first, mut more) = (None, false);
        self.each_granule_overlap(g, fp, |idx| match first {
            None => first = Some(idx),
            Some(_) => more = true,
        });
        match (first, more) {
            (None, _) => {}
            (Some(idx), false) => {
                let owner = self.entries[idx as usize].owner;
                if owner != FINISHED {
                    f(owner);
                }
            }
            (Some(_), true) => {
                let mut found: smallvec::SmallVec<[u32; 4]> = smallvec::SmallVec::new();
                self.each_granule_overlap(g, fp, |idx| found.push(idx));
                self.report(fp, &found, f);
            }
        }
        true
    }

    /// Call `f` with the owner of each overlapping entry `idxs` a reader of `fp` depends on:
    /// all but those shadowed by a newer entry covering the whole of `fp`, which wrote every
    /// byte the reader reads after them (seed §7, WAW: "new consumers depend only on the
    /// latest"), and markers of finished writers, which only shadow. A partial overwrite
    /// leaves the older writer's entry whole, so without this a reader of only the new bytes
    /// would wait for, and be poisoned by, the older writer.
    pub(super) fn report(&self, fp: &Footprint, idxs: &[u32], f: &mut impl FnMut(SlotId)) {
        let floor = if idxs.len() < 2 {
            0
        } else {
            idxs.iter()
                .map(|&i| &self.entries[i as usize])
                .filter(|e| self.footprint(e).covers(fp))
                .map(|e| e.seq)
                .max()
                .unwrap_or(0)
        };
        let rewritten = self.rewritten(fp, idxs);
        for (k, &i) in idxs.iter().enumerate() {
            let e = &self.entries[i as usize];
            if e.seq >= floor && e.owner != FINISHED && rewritten & (1 << k) == 0 {
                f(e.owner);
            }
        }
    }

    /// Which of the entries `idxs` (those overlapping `fp`; bit k for `idxs[k]`) a reader of
    /// `fp` does not read a byte of that newer entries among them did not write after it:
    /// the reader depends only on those (seed §7, WAW), though no one of them covers it (say
    /// a matrix written whole, then rewritten tile by tile, then read a panel at a time).
    /// Exact by byte runs for a few entries of a few runs each; beyond that, none (an extra
    /// edge, never a lost one).
    fn rewritten(&self, fp: &Footprint, idxs: &[u32]) -> u32 {
        if idxs.len() < 2 || idxs.len() > JOINT_ENTRIES {
            return 0;
        }
        // An entry over some of an older one's bytes shadows (an insert over an older entry
        // it does not cover marks itself so; dense over dense splits the older one instead).
        // With none, no entry rewrote another's bytes: writers of disjoint tiles read
        // together as a panel skip the byte runs. (Were one missed here, the reader would
        // only keep an edge.)
        if !idxs.iter().any(|&j| self.entries[j as usize].shadows) {
            return 0;
        }
        self.rewritten_by_runs(fp, idxs)
    }

    /// `rewritten`, newest entry first: each one's bytes that the reader reads, less those
    /// the entries newer than it wrote, then added to those.
    #[cold]
    #[inline(never)]
    fn rewritten_by_runs(&self, fp: &Footprint, idxs: &[u32]) -> u32 {
        #[cfg(test)]
        tests::RUNS_TESTS.set(tests::RUNS_TESTS.get() + 1);
        let (lo, hi) = (fp.lo, fp.hi);
        let mut v: [Vec<(u64, u64)>; 5] = Default::default();
        let [read, bytes, left, written, tmp] = &mut v;
        if !fp.runs_within(lo, hi, JOINT_RUNS, read) {
            return 0;
        }
        let mut order: smallvec::SmallVec<[usize; JOINT_ENTRIES]> = (0..idxs.len()).collect();
        order.sort_unstable_by_key(|&k| std::cmp::Reverse(self.entries[idxs[k] as usize].seq));
        let mut mask = 0;
        for (n, &k) in order.iter().enumerate() {
            let e = &self.entries[idxs[k] as usize];
            if !self.footprint(e).runs_within(lo, hi, JOINT_RUNS, bytes) {
                // Its bytes unknown: it stays a producer, and older entries are compared
                // without them.
                continue;
            }
            runs_apply(bytes, read, true, tmp);
            runs_apply(tmp, written, false, left);
            // (Split pieces of one write share its sequence number but not a byte, so each
            // is compared with strictly newer writes only.)
            if left.is_empty() && n > 0 {
                mask |= 1 << k;
            }
            runs_union(written, bytes, tmp);
            std::mem::swap(written, tmp);
        }
        mask
    }

    /// An insert of a dense footprint within one granule (a small buffer, the common case):
    /// the granule's list is walked for overlaps; with none the entry is added, with exactly
    /// one over the same bytes that entry is taken over in place (a chain rewriting one
    /// buffer). Returns `None` (having changed nothing and not called `seen`) otherwise.
    /// `seen` is called only when an entry overlaps (with none it would be shown nothing).
    pub(super) fn insert_one_granule(
        &mut self,
        fp: &Footprint,
        owner: SlotId,
        seen: &mut Option<impl FnOnce(&RunMap, &[u32])>,
        scratch: &mut Vec<u32>,
    ) -> Option<MapKey> {
        let g = self.one_granule(fp)?;
        scratch.clear();
        // One hash probe for the walk and the insert: the list head, created empty for a
        // granule seen first (the walk then finds nothing, and the entry is linked in
        // below). Walked through the fields, not `each_granule_overlap`, so the head stays
        // borrowed; a second probe to link the new entry cost a W1 submit about 40
        // instructions.
        let head = self.small.entry(g).or_insert(NIL);
        let mut l = *head;
        while l != NIL {
            let k = self.links[l as usize];
            l = k.next;
            if overlaps(&self.entries[k.idx as usize], fp, &self.strided) {
                scratch.push(k.idx);
            }
        }
        // (`is_same_unordered`'s question, narrowed to what a dense one-granule footprint
        // can meet: a call there cost a chain's submit some 40 instructions.)
        let same_bytes = |e: &MapEntry| e.shape == DENSE && (e.lo, e.hi) == (fp.lo, fp.hi);
        let take_over = match scratch[..] {
            [] => None,
            [idx] if same_bytes(&self.entries[idx as usize]) => Some(idx),
            _ => return None,
        };
        let Some(idx) = take_over else {
            // Nothing overlaps: `seen` would be shown no entry. The new entry goes in front
            // of the granule's list.
            self.seq += 1;
            self.adds += 1;
            let e = MapEntry::new(fp, owner, self.seq, DENSE, false);
            let idx = alloc_entry(&mut self.entries, &mut self.free, e);
            *head = alloc_link(
                &mut self.links,
                &mut self.free_link,
                Link { idx, next: *head },
            );
            self.live += 1;
            return Some(MapKey::of(idx, self.seq, fp));
        };
        if let Some(f) = seen.take() {
            f(self, scratch);
        }
        Some(self.take_over(idx, fp, owner))
    }

    /// Whether entry `idx` covers exactly the bytes of `fp`, and is indexed by position
    /// only (the ordered index is keyed by sequence number too).
    pub(super) fn is_same_unordered(&self, idx: u32, fp: &Footprint) -> bool {
        let e = &self.entries[idx as usize];
        (e.lo, e.hi) == (fp.lo, fp.hi)
            && self.unordered(idx)
            && match e.shape {
                DENSE => fp.dense,
                s => self.strided[s as usize] == *fp,
            }
    }

    /// Whether entry `idx` is indexed by position only: in a grid or the granule hash, not
    /// the ordered index (keyed by sequence number too), so it may be taken over in place.
    #[inline]
    pub(super) fn unordered(&self, idx: u32) -> bool {
        let e = &self.entries[idx as usize];
        let (g0, g1) = granules(e.lo, e.hi);
        e.class != NO_CLASS || g1 - g0 < SMALL_GRANULES
    }

    /// Make `owner` the producer of entry `idx` (the same bytes as `fp`) in place. The new
    /// sequence number voids the old owner's journaled key: its erase finds nothing.
    pub(super) fn take_over(&mut self, idx: u32, fp: &Footprint, owner: SlotId) -> MapKey {
        self.seq += 1;
        let e = &mut self.entries[idx as usize];
        e.owner = owner;
        e.seq = self.seq;
        e.split = false;
        MapKey::of(idx, self.seq, fp)
    }

    pub(super) fn add(&mut self, fp: &Footprint, owner: SlotId) -> MapKey {
        self.seq += 1;
        let idx = self.add_entry(fp, owner, self.seq, false);
        MapKey::of(idx, self.seq, fp)
    }

    pub(super) fn add_entry(
        &mut self,
        fp: &Footprint,
        owner: SlotId,
        seq: u64,
        split: bool,
    ) -> u32 {
        let shape = if fp.dense {
            DENSE
        } else if let Some(s) = self.free_strided.pop() {
            self.strided[s as usize] = *fp;
            s
        } else {
            self.strided.push(*fp);
            (self.strided.len() - 1) as u32
        };
        self.adds += 1;
        let e = MapEntry::new(fp, owner, seq, shape, split);
        let idx = alloc_entry(&mut self.entries, &mut self.free, e);
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

    /// Entry `idx`'s writer finished (was consumed): it no longer produces. One that shadows
    /// stays as a `FINISHED` marker, still shadowing the older entry it partly overwrote
    /// (until covered, reclaimed, or the run ends); any other is removed.
    pub(super) fn erase_entry(&mut self, idx: u32) {
        let e = &mut self.entries[idx as usize];
        if e.shadows {
            e.owner = FINISHED;
        } else {
            self.remove(idx);
        }
    }

    pub(super) fn remove(&mut self, idx: u32) {
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

#[cfg(test)]
pub(super) mod tests {
    /// A small deterministic generator for the map's randomized tests: `next(n)` is below n.
    pub(in crate::tensormap) fn xorshift(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut rng = seed;
        move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        }
    }

    /// `runs_apply` against byte sets: random sorted disjoint run lists, kept and removed.
    #[test]
    fn runs_apply_and_union_are_exact() {
        let mut next = xorshift(12345);
        let runs = |next: &mut dyn FnMut(u64) -> u64| {
            let (mut v, mut at) = (Vec::new(), next(4));
            while at < 60 {
                let len = 1 + next(6);
                v.push((at, at + len));
                at += len + 1 + next(5);
            }
            v
        };
        let set = |v: &[(u64, u64)]| v.iter().flat_map(|&(a, b)| a..b).collect::<Vec<_>>();
        // Miri interprets every step: a few dozen cases there, the whole sweep natively.
        let cases = if cfg!(miri) { 40 } else { 2000 };
        for _ in 0..cases {
            let (a, b) = (runs(&mut next), runs(&mut next));
            let in_b = set(&b);
            for keep in [true, false] {
                let mut got = Vec::new();
                super::runs_apply(&a, &b, keep, &mut got);
                let want: Vec<u64> = set(&a)
                    .into_iter()
                    .filter(|x| in_b.contains(x) == keep)
                    .collect();
                assert_eq!(set(&got), want, "{a:?} {b:?} keep {keep}");
                assert!(got.iter().all(|r| r.0 < r.1), "{got:?}");
            }
            let mut got = Vec::new();
            super::runs_union(&a, &b, &mut got);
            let mut want = set(&a);
            want.extend(set(&b));
            want.sort_unstable();
            want.dedup();
            assert_eq!(set(&got), want, "{a:?} | {b:?}");
            assert!(
                got.windows(2).all(|p| p[0].1 < p[1].0),
                "{got:?} not merged"
            );
        }
    }

    thread_local! {
        /// Turns `alone_for` off: the differential test's reference map searches every time.
        pub(in crate::tensormap) static SEARCH_ALWAYS: std::cell::Cell<bool> =
            const { std::cell::Cell::new(false) };
        /// Answers `alone_for` gave (the differential test checks it was exercised).
        pub(in crate::tensormap) static ALONE_HITS: std::cell::Cell<u64> =
            const { std::cell::Cell::new(0) };
        /// Reads that went to the byte-run comparison of `rewritten`.
        pub(in crate::tensormap) static RUNS_TESTS: std::cell::Cell<u64> =
            const { std::cell::Cell::new(0) };
    }
}
