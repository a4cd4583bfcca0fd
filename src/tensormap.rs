//! The TensorMap (Orchestrator seed §7): (run, memory) -> current producer slots.
//!
//! Keys are the footprints of tensor views, indexed by their first byte, so a lookup finds
//! every live writer whose footprint overlaps the reader's, whatever data pointer each used.
//! An insert replaces only the writers the new footprint fully covers; a writer that is only
//! partly overwritten keeps its entry. Erase is owner-checked: a superseded writer that is
//! consumed first never removes a later writer's entry.

use crate::run::RunId;
use crate::slot::SlotId;
use crate::view::Footprint;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

struct MapEntry {
    owner: SlotId,
    fp: Footprint,
}

#[derive(Default)]
struct RunMap {
    /// Keyed by (first byte, owner, sequence): no per-key allocation, and an owner's entries
    /// at one address are a contiguous range.
    by_lo: BTreeMap<(u64, SlotId, u64), MapEntry>,
    seq: u64,
    /// Longest footprint interval present: bounds the backwards reach of a range query.
    max_len: u64,
    count: usize,
}

impl RunMap {
    fn overlapping(
        &self,
        fp: &Footprint,
    ) -> impl Iterator<Item = (&(u64, SlotId, u64), &MapEntry)> + '_ {
        let from = fp.lo.saturating_sub(self.max_len);
        let fp = *fp;
        self.by_lo
            .range((from, 0, 0)..(fp.hi, 0, 0))
            .filter(move |(_, e)| e.fp.overlaps(&fp))
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
        if let Some(m) = self.run(run) {
            for (_, e) in m.overlapping(fp) {
                f(e.owner);
            }
        }
    }

    /// Make `owner` the producer of `fp`, dropping entries it fully covers.
    pub fn insert(&mut self, run: RunId, fp: Footprint, owner: SlotId) {
        let i = match self.runs.iter().position(|r| r.0 == run) {
            Some(i) => i,
            None => {
                self.runs.push((run, RunMap::default()));
                self.runs.len() - 1
            }
        };
        let m = &mut self.runs[i].1;
        if m.count > 0 {
            let mut covered = [(0u64, 0u64, 0u64); 8];
            loop {
                let mut n = 0;
                for (k, e) in m.overlapping(&fp) {
                    if fp.covers(&e.fp) {
                        covered[n] = *k;
                        n += 1;
                        if n == covered.len() {
                            break;
                        }
                    }
                }
                for k in &covered[..n] {
                    m.by_lo.remove(k);
                }
                m.count -= n;
                self.total -= n;
                if n < covered.len() {
                    break;
                }
            }
        }
        m.max_len = m.max_len.max(fp.hi - fp.lo);
        m.seq += 1;
        m.by_lo
            .insert((fp.lo, owner, m.seq), MapEntry { owner, fp });
        m.count += 1;
        self.total += 1;
    }

    /// Erase the entries at the journaled keys that still belong to `owner`.
    pub fn erase(&mut self, run: RunId, owner: SlotId, keys: &[u64]) {
        let Some(i) = self.runs.iter().position(|r| r.0 == run) else {
            return;
        };
        let m = &mut self.runs[i].1;
        for &lo in keys {
            while let Some((&k, _)) = m.by_lo.range((lo, owner, 0)..=(lo, owner, u64::MAX)).next() {
                m.by_lo.remove(&k);
                m.count -= 1;
                self.total -= 1;
            }
        }
        if m.count == 0 {
            self.runs.swap_remove(i);
        }
    }

    /// Forget everything of a finished run (including failure tombstones). Idempotent.
    pub fn drop_run(&mut self, run: RunId) {
        if let Some(i) = self.runs.iter().position(|r| r.0 == run) {
            self.total -= self.runs.swap_remove(i).1.count;
        }
    }

    fn run(&self, run: RunId) -> Option<&RunMap> {
        self.runs.iter().find(|r| r.0 == run).map(|r| &r.1)
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
