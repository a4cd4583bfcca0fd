//! The TensorMap (Orchestrator seed §7): (run, memory) -> current producer slots.
//!
//! Keys are the footprints of tensor views, so a lookup finds every live writer whose
//! footprint overlaps the reader's, whatever data pointer each used, except writers shadowed
//! by a newer one that covers the whole of the reader's footprint. An insert replaces only
//! the writers the new footprint fully covers; a writer that is only partly overwritten keeps
//! its entry (split into the bytes left over when both are dense; else whole, and the newer
//! entry, once its writer is consumed, stays as an ownerless marker that goes on shadowing
//! it, as do the pieces of such an entry split later). Erase is owner-checked: every entry
//! has a unique key its owner journals, so a superseded writer that is consumed first never
//! removes a later writer's entry.
//!
//! Index: small footprints (the common case: whole small buffers) are hashed by the 256-byte
//! granules they span, so an insert or lookup is one or two hash probes; bigger row sets
//! (matrix tiles, column blocks) are hashed by the cells of a grid over their rows (`grid`);
//! other footprints spanning more than 8 granules (big buffers) live in an ordered index
//! searched by address range.

mod grid;
mod runmap;

use crate::run::RunId;
use crate::slot::SlotId;
use crate::view::Footprint;
use runmap::{RunMap, DENSE};
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

impl MapKey {
    /// The key of entry `idx`, inserted as `seq`, over `fp`'s bytes.
    fn of(idx: u32, seq: u64, fp: &Footprint) -> MapKey {
        MapKey {
            idx,
            seq,
            lo: fp.lo,
            hi: fp.hi,
        }
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
        let Some(m) = self.runs.iter_mut().find(|r| r.0 == run).map(|r| &mut r.1) else {
            return;
        };
        if m.lookup_one_granule(fp, &mut f) {
            return;
        }
        if let Some(idx) = m.alone_for(fp) {
            m.report(fp, &[idx], &mut f);
            return;
        }
        m.overlapping(fp, &mut self.scratch);
        m.report(fp, &self.scratch, &mut f);
        if let [idx] = self.scratch[..] {
            m.note_alone(idx, fp);
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
        self.insert_with(run, fp, owner, |m, scratch| m.report(fp, scratch, &mut f))
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
        // A rewrite of one tile (an INOUT): the entry changes hands in place.
        if let Some(idx) = m.alone_for(fp).filter(|&i| m.unordered(i)) {
            if let Some(f) = seen.take() {
                f(m, &[idx]);
            }
            return m.take_over(idx, fp, owner);
        }
        let mut shadows = false;
        if m.live > 0 {
            m.overlapping(fp, &mut self.scratch);
            if let Some(f) = seen.take() {
                f(m, &self.scratch);
            }
            if let [idx] = self.scratch[..] {
                if m.is_same_unordered(idx, fp) {
                    m.note_alone(idx, fp);
                    return m.take_over(idx, fp, owner);
                }
            }
            for &idx in &self.scratch {
                let old = m.entries[idx as usize];
                if fp.covers(&m.footprint(&old)) {
                    m.remove(idx);
                } else if !(fp.dense && old.shape == DENSE) {
                    shadows = true;
                } else {
                    // Dense over dense: the old writer keeps exactly the bytes left over. The
                    // pieces shadow what the old entry shadowed (some of its bytes overwrote
                    // an older entry's), so that, erased, they leave markers as it would.
                    m.remove(idx);
                    for (lo, hi) in [(old.lo, fp.lo), (fp.hi, old.hi)] {
                        if lo < hi {
                            let p = Footprint::dense(lo, hi - lo);
                            let p = m.add_entry(&p, old.owner, old.seq, true);
                            m.entries[p as usize].shadows = old.shadows;
                        }
                    }
                    m.splits = true;
                }
            }
        }
        let k = m.add(fp, owner);
        m.entries[k.idx as usize].shadows = shadows;
        k
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
                m.erase_entry(k.idx);
                if !e.split {
                    continue;
                }
            }
            if m.splits {
                // Pieces of a split entry lie inside the bytes the key first covered (one may
                // be the direct entry above: its slab index is reused; then it is no longer
                // `owner`'s).
                m.overlapping(&Footprint::dense(k.lo, k.hi - k.lo), &mut self.scratch);
                for &idx in &self.scratch {
                    let p = m.entries[idx as usize];
                    if p.owner == owner && p.seq == k.seq {
                        m.erase_entry(idx);
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
    use super::grid::MAX_CLASSES;
    use super::*;

    fn owners_of(m: &mut Inner, fp: &Footprint) -> Vec<SlotId> {
        let mut v = Vec::new();
        m.lookup(1, fp, |s| v.push(s));
        v.sort_unstable();
        v
    }

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

    /// Seed §7 (WAW: "new consumers depend only on the latest"): W2, dense, partly
    /// overwrites a tile W1 and so shadows it; W3 splits W2 into two pieces. Once W2 is
    /// consumed, a reader of bytes only W2 wrote (in either piece) depends on nothing: the
    /// pieces stay as markers shadowing W1, as the unsplit entry would. Tiles of ld 64 and
    /// 512 put the pieces in the granule index or the ordered one; W2 is consumed after the
    /// split or before it (the marker is split).
    #[test]
    fn pieces_of_a_shadowing_entry_keep_shadowing() {
        use crate::task::DataType;
        let base = 1u64 << 24;
        for ld in [64u64, 512] {
            for erase_first in [false, true] {
                let at = format!("ld {ld}, erase_first {erase_first}");
                let s = 8 * ld; // bytes between the tile's columns
                let tile =
                    crate::view::test_footprint(base, 0, DataType::F64, &[8, 8], &[1, ld]).unwrap();
                let mut m = Inner::default();
                let k1 = m.insert(1, &tile, 11);
                // W2 over the tile's first two columns and the gap between; W3 in that gap.
                let k2 = m.insert(1, &Footprint::dense(base, 2 * s), 22);
                if erase_first {
                    m.erase(1, 22, &[k2]);
                }
                let k3 = m.insert(1, &Footprint::dense(base + s / 4, s / 4), 33);
                if !erase_first {
                    m.erase(1, 22, &[k2]);
                }
                let none: Vec<SlotId> = Vec::new();
                assert_eq!(owners(&mut m, 1, base, 64), none, "{at}");
                assert_eq!(owners(&mut m, 1, base + s, 64), none, "{at}");
                assert_eq!(owners(&mut m, 1, base + s / 4, s / 4), vec![33], "{at}");
                assert_eq!(owners(&mut m, 1, base + 2 * s, 64), vec![11], "{at}");
                assert_eq!(owners(&mut m, 1, base, 4 * s), vec![11, 33], "{at}");
                // Markers report nothing, and go with the run.
                m.erase(1, 33, &[k3]);
                m.erase(1, 11, &[k1]);
                assert_eq!(owners(&mut m, 1, base, 8 * s), none, "{at}");
                m.drop_run(1);
                assert!(m.is_empty(), "{at}");
            }
        }
    }

    /// Seed §7 (WAW: "new consumers depend only on the latest"), for a read whose bytes
    /// several newer writers rewrote between them, none covering it alone: W1 writes 64
    /// bytes, W2 and W3 interleaved rows of its first 32. A reader of those 32 depends on W2
    /// and W3 only; a reader of one byte more, on W1 too. W3 consumed leaves a marker
    /// that still stands for its bytes.
    #[test]
    fn a_read_rewritten_by_several_newer_writers_depends_only_on_them() {
        use crate::task::DataType;
        let base = 1u64 << 20;
        let rows = |off: u64| {
            crate::view::test_footprint(base, off, DataType::U8, &[8, 2], &[1, 16]).unwrap()
        };
        let mut m = Inner::default();
        m.insert(1, &Footprint::dense(base, 64), 11);
        m.insert(1, &rows(0), 22);
        let k3 = m.insert(1, &rows(8), 33);
        assert_eq!(owners(&mut m, 1, base, 32), vec![22, 33]);
        assert_eq!(owners(&mut m, 1, base + 4, 20), vec![22, 33]);
        assert_eq!(owners(&mut m, 1, base, 33), vec![11, 22, 33]);
        assert_eq!(owners(&mut m, 1, base + 8, 8), vec![33]);
        m.erase(1, 33, &[k3]);
        assert_eq!(owners(&mut m, 1, base, 32), vec![22]);
        assert_eq!(owners(&mut m, 1, base, 40), vec![11, 22]);
        assert!(runmap::tests::RUNS_TESTS.get() > 0);
    }

    /// A panel read over tiles that rewrote nothing of each other's (none shadows) reports
    /// every tile's writer without comparing byte runs: the joint-rewrite test costs a
    /// tiled code's panel reads nothing.
    #[test]
    fn a_panel_of_disjoint_tiles_skips_the_byte_runs() {
        use crate::task::DataType;
        let (base, ld) = (1u64 << 24, 128u64);
        let at = |r: u64, h: u64| {
            crate::view::test_footprint(base, r * 8, DataType::F64, &[h, 64], &[1, ld]).unwrap()
        };
        let mut m = Inner::default();
        for k in 0..8 {
            m.insert(1, &at(8 * k, 8), 10 + k);
        }
        let runs_before = runmap::tests::RUNS_TESTS.get();
        assert_eq!(owners_of(&mut m, &at(0, 64)), (10..18).collect::<Vec<_>>());
        assert_eq!(runmap::tests::RUNS_TESTS.get(), runs_before);
    }

    /// `alone_for` answers exactly as the search it skips: random writes, reads and erases
    /// of tiles (several shapes, some overlapping, some the same view at another origin),
    /// column blocks and dense ranges of one column-major matrix, applied to a map that
    /// uses it and to one that always searches; every lookup, insert and key must agree.
    #[test]
    fn knowing_an_entry_alone_answers_as_the_search_would() {
        use crate::task::DataType;
        use runmap::tests::SEARCH_ALWAYS;
        let (base, ld) = (1u64 << 24, 48u64);
        let mut next = runmap::tests::xorshift(0x9E37_79B9_7F4A_7C15);
        // Miri interprets every step: a few rounds there, all forty natively.
        let rounds = if cfg!(miri) { 3 } else { 40 };
        for round in 0..rounds {
            let mut maps = [Inner::default(), Inner::default()];
            let mut keys: Vec<(SlotId, MapKey)> = Vec::new();
            let views: Vec<Footprint> = (0..24)
                .map(|_| {
                    let (r, c) = (8 * next(6), 8 * next(6));
                    let kind = next(8);
                    let (origin, off) = if kind == 7 {
                        (base + (r + c * ld) * 8, 0)
                    } else {
                        (base, (r + c * ld) * 8)
                    };
                    match kind {
                        0 => Some(Footprint::dense(base + off, 8 * next(64) + 8)),
                        1 => crate::view::test_footprint(
                            origin,
                            off,
                            DataType::F64,
                            &[16, 8],
                            &[1, ld],
                        ),
                        2 => crate::view::test_footprint(
                            origin,
                            off,
                            DataType::F64,
                            &[8, 16],
                            &[1, ld],
                        ),
                        _ => crate::view::test_footprint(
                            origin,
                            off,
                            DataType::F64,
                            &[8, 8],
                            &[1, ld],
                        ),
                    }
                    .unwrap()
                })
                .collect();
            for step in 0..400u64 {
                let fp = views[next(views.len() as u64) as usize];
                let owner = 1000 * round + step;
                let op = next(10);
                let victim = keys.get(next(keys.len().max(1) as u64) as usize).copied();
                let mut seen = [Vec::new(), Vec::new()];
                let mut made = [None, None];
                for (i, m) in maps.iter_mut().enumerate() {
                    SEARCH_ALWAYS.set(i == 1);
                    let found = &mut seen[i];
                    match op {
                        0..=3 => m.lookup(1, &fp, |s| found.push(s)),
                        4..=5 => made[i] = Some(m.insert(1, &fp, owner)),
                        6..=8 => made[i] = Some(m.lookup_insert(1, &fp, owner, |s| found.push(s))),
                        _ => {
                            if let Some((o, k)) = victim {
                                m.erase(1, o, &[k]);
                            }
                        }
                    }
                    found.sort_unstable();
                }
                SEARCH_ALWAYS.set(false);
                assert_eq!(seen[0], seen[1], "round {round} step {step} op {op}");
                assert_eq!(made[0], made[1], "round {round} step {step} op {op}");
                if let Some(k) = made[0] {
                    keys.push((owner, k));
                }
                assert_eq!(maps[0].len(), maps[1].len(), "round {round} step {step}");
            }
        }
        let hits = runmap::tests::ALONE_HITS.get();
        assert!(hits > 10 * rounds, "alone_for answered only {hits} times");
    }
}
