//! The TensorMap (Orchestrator seed §7): (run, memory) -> current producer slots.
//!
//! Keys are the footprints of tensor views, indexed by their first byte, so a lookup finds
//! every live writer whose footprint overlaps the reader's, whatever data pointer each used.
//! An insert replaces only the writers the new footprint fully covers; a writer that is only
//! partly overwritten keeps its entry. Erase is owner-checked: every entry has a unique key
//! that its owner journals, so a superseded writer that is consumed first never removes a
//! later writer's entry.

use crate::run::RunId;
use crate::slot::SlotId;
use crate::view::Footprint;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// An entry's key: (first byte, insertion sequence within its run). Owners journal it.
pub type MapKey = (u64, u64);

const DENSE: u32 = u32::MAX;

/// Kept small so the B-tree moves little: a dense footprint is (lo, hi) alone; a strided
/// one keeps its dimensions in the run map's side slab.
#[derive(Clone, Copy)]
struct MapEntry {
    owner: SlotId,
    hi: u64,
    /// Index into `RunMap::strided`, or DENSE.
    shape: u32,
}

#[derive(Default)]
struct RunMap {
    by_lo: BTreeMap<MapKey, MapEntry>,
    seq: u64,
    /// Longest footprint interval present: bounds the backwards reach of a range query.
    max_len: u64,
    strided: Vec<Footprint>,
    free_strided: Vec<u32>,
}

impl RunMap {
    fn footprint(&self, lo: u64, e: &MapEntry) -> Footprint {
        if e.shape == DENSE {
            Footprint::dense(lo, e.hi - lo)
        } else {
            self.strided[e.shape as usize]
        }
    }

    /// Entries whose footprint overlaps `fp`.
    fn overlapping<'a>(
        &'a self,
        fp: &'a Footprint,
    ) -> impl Iterator<Item = (MapKey, MapEntry, Footprint)> + 'a {
        let from = fp.lo.saturating_sub(self.max_len);
        self.by_lo
            .range((from, 0)..(fp.hi, 0))
            .filter_map(move |(&k, e)| {
                if e.hi <= fp.lo {
                    return None;
                }
                let f = self.footprint(k.0, e);
                f.overlaps(fp).then_some((k, *e, f))
            })
    }

    fn remove(&mut self, k: &MapKey) -> Option<MapEntry> {
        let e = self.by_lo.remove(k)?;
        if e.shape != DENSE {
            self.free_strided.push(e.shape);
        }
        Some(e)
    }

    fn len(&self) -> usize {
        self.by_lo.len()
    }
}

/// The map's contents, locked for one submit's whole tag walk or one erase.
#[derive(Default)]
pub struct Inner {
    /// Per-run maps; a handful of runs are live at once, so a vector beats hashing.
    runs: Vec<(RunId, RunMap)>,
    total: usize,
}

impl Inner {
    /// Call `f` with each slot currently producing memory that `fp` touches.
    pub fn lookup(&self, run: RunId, fp: &Footprint, mut f: impl FnMut(SlotId)) {
        if let Some(m) = self.runs.iter().find(|r| r.0 == run).map(|r| &r.1) {
            for (_, e, _) in m.overlapping(fp) {
                f(e.owner);
            }
        }
    }

    /// Make `owner` the producer of `fp`, dropping entries it fully covers. Returns the key
    /// the owner must journal to erase its entry later.
    pub fn insert(&mut self, run: RunId, fp: Footprint, owner: SlotId) -> MapKey {
        let i = match self.runs.iter().position(|r| r.0 == run) {
            Some(i) => i,
            None => {
                self.runs.push((run, RunMap::default()));
                self.runs.len() - 1
            }
        };
        let m = &mut self.runs[i].1;
        let mut covered = [(0u64, 0u64); 8];
        loop {
            let mut n = 0;
            for (k, _, f) in m.overlapping(&fp) {
                if fp.covers(&f) {
                    covered[n] = k;
                    n += 1;
                    if n == covered.len() {
                        break;
                    }
                }
            }
            for k in &covered[..n] {
                m.remove(k);
            }
            self.total -= n;
            if n < covered.len() {
                break;
            }
        }
        let shape = if fp.dense {
            DENSE
        } else if let Some(s) = m.free_strided.pop() {
            m.strided[s as usize] = fp;
            s
        } else {
            m.strided.push(fp);
            (m.strided.len() - 1) as u32
        };
        m.max_len = m.max_len.max(fp.hi - fp.lo);
        m.seq += 1;
        let key = (fp.lo, m.seq);
        m.by_lo.insert(
            key,
            MapEntry {
                owner,
                hi: fp.hi,
                shape,
            },
        );
        self.total += 1;
        key
    }

    /// Erase the journaled entries that still exist and belong to `owner`.
    pub fn erase(&mut self, run: RunId, owner: SlotId, keys: &[MapKey]) {
        let Some(i) = self.runs.iter().position(|r| r.0 == run) else {
            return;
        };
        let m = &mut self.runs[i].1;
        for k in keys {
            if m.by_lo.get(k).is_some_and(|e| e.owner == owner) {
                m.remove(k);
                self.total -= 1;
            }
        }
        if m.len() == 0 {
            self.runs.swap_remove(i);
        }
    }

    /// Forget everything of a finished run (including failure tombstones). Idempotent.
    pub fn drop_run(&mut self, run: RunId) {
        if let Some(i) = self.runs.iter().position(|r| r.0 == run) {
            self.total -= self.runs.swap_remove(i).1.len();
        }
    }

    pub fn len(&self) -> usize {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
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
