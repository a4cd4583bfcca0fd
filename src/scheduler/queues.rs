//! Ready queues (Scheduler seed §1): one FIFO per NEXT_LEVEL lane, the group FIFO and the
//! shared SUB FIFO, each partitioned by run so two admitted runs never interleave.

use crate::run::RunId;
use crate::slot::{Route, SlotId};
use std::collections::VecDeque;

/// A FIFO partitioned by run: pops come from the partition of the run holding the head, and
/// the partitions are kept in run order (ids grow with `begin_run`), so a task of an earlier
/// run released after a later run's task was queued still goes first.
#[derive(Default)]
pub struct ReadyQueue {
    parts: VecDeque<(RunId, VecDeque<(SlotId, Route)>)>,
    len: usize,
    /// An emptied partition kept for the next one (a queue that drains after every
    /// pop, e.g. a chain, would otherwise allocate per task).
    spare: Option<VecDeque<(SlotId, Route)>>,
}

impl ReadyQueue {
    pub fn push(&mut self, sid: SlotId, route: Route) {
        self.len += 1;
        let run = route.run;
        if let Some(p) = self.parts.iter_mut().rev().find(|p| p.0 == run) {
            p.1.push_back((sid, route));
            return;
        }
        let mut q = self
            .spare
            .take()
            .unwrap_or_else(|| VecDeque::with_capacity(64));
        q.push_back((sid, route));
        // After the last partition of an earlier run (at the back, for the newest run).
        let at = self
            .parts
            .iter()
            .rposition(|p| p.0 < run)
            .map_or(0, |i| i + 1);
        self.parts.insert(at, (run, q));
    }

    pub fn peek(&self) -> Option<&(SlotId, Route)> {
        self.parts.front().and_then(|p| p.1.front())
    }

    pub fn pop(&mut self) -> Option<(SlotId, Route)> {
        let p = self.parts.front_mut()?;
        let sid = p.1.pop_front();
        if p.1.is_empty() {
            if let Some((_, q)) = self.parts.pop_front() {
                self.spare = Some(q);
            }
        }
        if sid.is_some() {
            self.len -= 1;
        }
        sid
    }

    /// The first entry, in pop order, that `live` accepts: entries of cancelled tasks stay
    /// queued until popped (the dispatch claim skips them), so the head may be stale.
    pub fn first_live(&self, mut live: impl FnMut(SlotId) -> bool) -> Option<SlotId> {
        self.parts
            .iter()
            .flat_map(|p| p.1.iter())
            .map(|e| e.0)
            .find(|&sid| live(sid))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn clear(&mut self) {
        self.parts.clear();
        self.len = 0;
    }
}

/// All ready queues of one worker, owned by the scheduler role (`Sched::queues`).
pub struct ReadyQueues {
    /// Indexed by lane index; only NEXT_LEVEL lanes' entries are used.
    pub singles: Vec<ReadyQueue>,
    pub group: ReadyQueue,
    pub sub: ReadyQueue,
}

impl ReadyQueues {
    /// Drop every entry (each names a cancelled task: see `Sched::forget_dead_work`).
    pub fn clear(&mut self) {
        self.singles.iter_mut().for_each(ReadyQueue::clear);
        self.group.clear();
        self.sub.clear();
    }

    pub fn new(lanes: usize) -> ReadyQueues {
        ReadyQueues {
            singles: (0..lanes).map(|_| ReadyQueue::default()).collect(),
            group: ReadyQueue::default(),
            sub: ReadyQueue::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.singles.iter().map(|q| q.len()).sum::<usize>() + self.group.len() + self.sub.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pops in run order, FIFO within a run, however the runs' tasks arrived.
    #[test]
    fn partitions_pop_in_run_order() {
        let mut q = ReadyQueue::default();
        let push = |q: &mut ReadyQueue, sid: SlotId, run: RunId| {
            q.push(
                sid,
                Route {
                    run,
                    ..Route::default()
                },
            )
        };
        push(&mut q, 20, 2);
        push(&mut q, 30, 3);
        push(&mut q, 10, 1); // an earlier run's task released later goes first
        push(&mut q, 21, 2);
        push(&mut q, 11, 1);
        push(&mut q, 25, 2);
        let order: Vec<SlotId> = std::iter::from_fn(|| q.pop().map(|e| e.0)).collect();
        assert_eq!(order, [10, 11, 20, 21, 25, 30]);
        assert!(q.is_empty());
        // A run whose partition drained comes back behind the runs before it only.
        push(&mut q, 40, 4);
        push(&mut q, 31, 3);
        assert_eq!(q.pop().map(|e| e.0), Some(31));
    }
}
