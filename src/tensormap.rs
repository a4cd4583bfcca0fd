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
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

struct MapEntry {
    owner: SlotId,
    fp: Footprint,
}

#[derive(Default)]
struct RunMap {
    by_lo: BTreeMap<u64, Vec<MapEntry>>,
    /// Longest footprint interval present: bounds the backwards reach of a range query.
    max_len: u64,
    count: usize,
}

impl RunMap {
    fn overlapping(&self, fp: &Footprint) -> impl Iterator<Item = &MapEntry> + '_ {
        let from = fp.lo.saturating_sub(self.max_len);
        let fp = *fp;
        self.by_lo
            .range(from..fp.hi)
            .flat_map(|(_, v)| v.iter())
            .filter(move |e| e.fp.overlaps(&fp))
    }
}

/// The map's contents, locked for one submit's whole tag walk or one erase.
#[derive(Default)]
pub struct Inner {
    runs: HashMap<RunId, RunMap>,
    total: usize,
}

impl Inner {
    /// Call `f` with each slot currently producing memory that `fp` touches.
    pub fn lookup(&self, run: RunId, fp: &Footprint, mut f: impl FnMut(SlotId)) {
        if let Some(m) = self.runs.get(&run) {
            for e in m.overlapping(fp) {
                f(e.owner);
            }
        }
    }

    /// Make `owner` the producer of `fp`, dropping entries it fully covers.
    pub fn insert(&mut self, run: RunId, fp: Footprint, owner: SlotId) {
        let m = self.runs.entry(run).or_default();
        let covered: Vec<(u64, SlotId)> = if m.count == 0 {
            Vec::new()
        } else {
            m.overlapping(&fp)
                .filter(|e| fp.covers(&e.fp))
                .map(|e| (e.fp.lo, e.owner))
                .collect()
        };
        for (lo, owner_old) in covered {
            if let Some(v) = m.by_lo.get_mut(&lo) {
                let before = v.len();
                v.retain(|e| !(e.owner == owner_old && fp.covers(&e.fp)));
                m.count -= before - v.len();
                self.total -= before - v.len();
                if v.is_empty() {
                    m.by_lo.remove(&lo);
                }
            }
        }
        m.max_len = m.max_len.max(fp.hi - fp.lo);
        m.by_lo
            .entry(fp.lo)
            .or_default()
            .push(MapEntry { owner, fp });
        m.count += 1;
        self.total += 1;
    }

    /// Erase the entries at the journaled keys that still belong to `owner`.
    pub fn erase(&mut self, run: RunId, owner: SlotId, keys: &[u64]) {
        let Some(m) = self.runs.get_mut(&run) else {
            return;
        };
        for lo in keys {
            if let Some(v) = m.by_lo.get_mut(lo) {
                let before = v.len();
                v.retain(|e| e.owner != owner);
                m.count -= before - v.len();
                self.total -= before - v.len();
                if v.is_empty() {
                    m.by_lo.remove(lo);
                }
            }
        }
        if m.count == 0 {
            self.runs.remove(&run);
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
