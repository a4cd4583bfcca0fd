//! Dispatch (Scheduler seed, dispatch loop): the group FIFO head all-or-nothing, each
//! NEXT_LEVEL lane's own FIFO, then the shared SUB FIFO; and the posting of jobs to lanes.

use super::*;

impl Sched {
    /// One dispatch pass; returns how many jobs it posted.
    pub(super) fn dispatch(&mut self) -> usize {
        let e = self.e;
        // Moved out for the pass: the helpers below take `&mut self`.
        let mut queues = self.queues.take().expect("queues are home between passes");
        let one_run = self.one_run();
        {
            let q = &mut queues;
            if q.is_empty() {
                self.queues = Some(queues);
                self.rebalance_sub(!one_run);
                return self.flush_posts();
            }
            self.reserved.iter_mut().for_each(|r| *r = false);
            let mut blocked_head = None;
            // A head launched before the blocked one: the head changed in this pass, so a
            // blocked head is a new stall episode even if it was the head before.
            let mut launched = false;
            // Group FIFO head: launch only on a fully idle target set, else reserve it.
            while let Some((sid, r)) = q.group.peek() {
                let (sid, targets) = (
                    *sid,
                    r.targets.clone().unwrap_or_else(|| Arc::from(&[][..])),
                );
                // A cancelled head must not hold its targets' reservation.
                if !e.slots.get(sid).core.is_ready(sid) {
                    q.group.pop();
                    continue;
                }
                if targets.iter().any(|&l| !self.lanes[l as usize].idle()) {
                    for &l in targets.iter() {
                        self.reserved[l as usize] = true;
                    }
                    blocked_head = Some((sid, targets));
                    break;
                }
                q.group.pop();
                if e.slots.get(sid).core.try_claim_running_id(sid) {
                    self.launch_group(sid, &targets);
                    launched = true;
                }
            }
            if launched {
                self.stall = None;
            }
            self.watch_stall(blocked_head, q);
            // Singles: each lane's own FIFO, never another's.
            for k in 0..self.next_level.len() {
                let l = self.next_level[k] as usize;
                if self.reserved[l] {
                    continue;
                }
                while self.lanes[l].has_room() {
                    let Some((sid, _)) = q.singles[l].pop() else {
                        break;
                    };
                    self.post_single(l, sid);
                }
            }
            // SUB: a single goes where `book::sub_lane_for_single` says (packed while jobs
            // are tiny, else the least loaded lane with room); a group needs that many
            // distinct idle lanes, else it stays at the head and the pass ends. A lane chosen
            // by packing stays the choice while it has room (no lane before it gains room in
            // a pass), so the singles behind go there without asking again.
            let mut packed: Option<usize> = None;
            if !one_run {
                // Jobs queued in mailboxes were packed while their run was the only one in
                // flight, so they are older than any newer run's head: idle lanes take them
                // back first, and a newer run's task never starts ahead of them.
                self.rebalance_sub(true);
            }
            let mut group_blocked = false;
            while let Some((sid, r)) = q.sub.peek() {
                let (sid, need) = (*sid, r.members as usize);
                if need == 1 {
                    let l = match packed.filter(|&l| self.lanes[l].has_room()) {
                        Some(l) => l,
                        None => {
                            let Some((l, packing)) =
                                book::sub_lane_for_single(&self.lanes, &self.sub, one_run)
                            else {
                                break;
                            };
                            packed = packing.then_some(l as usize);
                            l as usize
                        }
                    };
                    q.sub.pop();
                    self.post_single(l, sid);
                    continue;
                }
                if !e.slots.get(sid).core.is_ready(sid) {
                    q.sub.pop();
                    continue;
                }
                self.idle_subs.clear();
                self.idle_subs.extend(
                    self.sub
                        .iter()
                        .copied()
                        .filter(|&l| self.lanes[l as usize].idle()),
                );
                if self.idle_subs.len() < need {
                    group_blocked = true;
                    break;
                }
                q.sub.pop();
                if e.slots.get(sid).core.try_claim_running_id(sid) {
                    // Member i takes the i-th idle lane from the end.
                    let mut lanes = std::mem::take(&mut self.idle_subs);
                    lanes.drain(..lanes.len() - need);
                    lanes.reverse();
                    self.launch_group(sid, &lanes);
                    self.idle_subs = lanes;
                }
            }
            // Behind a group that waits for lanes (the seed stops the drain there), the
            // singles already queued in mailboxes may still go to the idle lanes.
            if q.sub.is_empty() || group_blocked {
                self.rebalance_sub(false);
            }
        }
        self.queues = Some(queues);
        self.flush_posts()
    }

    fn flush_posts(&mut self) -> usize {
        let posted = self.posts.len();
        // Every job first, then one wake-up check per run of consecutive posts to a lane
        // (packing posts a lane's jobs together): a pass of tiny jobs posts up to
        // MAILBOX_DEPTH to a lane, and a check per job paid a fence per job. A lane's jobs
        // keep their posting order, which its book records.
        for &(l, job) in self.posts.iter() {
            self.e.lanes[l as usize].mailbox.post(job);
        }
        for (i, &(l, _)) in self.posts.iter().enumerate() {
            if self.posts.get(i + 1).is_none_or(|n| n.0 != l) {
                self.e.lanes[l as usize].mailbox.wake_lane();
            }
        }
        self.posts.clear();
        posted
    }

    /// Post a single task to lane `l`. To an idle lane the scheduler claims it now (the
    /// seed's dispatch claim); behind other jobs the lane claims it when it starts, so a
    /// cancellation meanwhile still wins and the job is skipped.
    pub(super) fn post_single(&mut self, l: usize, sid: crate::slot::SlotId) {
        let claimed = self.lanes[l].idle();
        if claimed && !self.e.slots.get(sid).core.try_claim_running_id(sid) {
            return;
        }
        self.post(l, sid, 0, claimed);
    }

    /// Launch a group the caller claimed: member i on `lanes[i]`.
    fn launch_group(&mut self, sid: crate::slot::SlotId, lanes: &[u32]) {
        // SAFETY: the claim made the slot RUNNING, and this thread holds the role.
        let g = unsafe { self.e.slots.get(sid).data_ref().group_book.get() };
        g.members_left = lanes.len() as u32;
        g.member_failure = None;
        for (i, &l) in lanes.iter().enumerate() {
            self.post(l as usize, sid, i as u32, true);
        }
    }

    /// Record a job in lane `l`'s book and queue it for `flush_posts`.
    fn post(&mut self, l: usize, slot: crate::slot::SlotId, member: u32, claimed: bool) {
        self.lanes[l].post(slot, claimed);
        self.posts.push((
            l as u32,
            Job {
                slot,
                member,
                claimed,
            },
        ));
    }

    /// An idle SUB lane takes back a job queued behind another SUB lane's running one: when
    /// the SUB FIFO is empty or its head is a group waiting for lanes; `eager` (several runs
    /// in flight) before the FIFO is drained, and without waiting for the running job to
    /// turn out long.
    fn rebalance_sub(&mut self, eager: bool) {
        for k in 0..self.sub.len() {
            let idle = self.sub[k] as usize;
            if !self.lanes[idle].idle() {
                continue;
            }
            let slots = &self.e.slots;
            let mut taken = None;
            for &from in self.sub.iter() {
                let from = from as usize;
                // Tiny jobs queued behind one another start within microseconds, unless
                // the one running turns out long (`may_steal_from`).
                if from != idle
                    && self.lanes[from].load() > 1
                    && (eager || self.lanes[from].may_steal_from())
                {
                    taken =
                        self.lanes[from].steal(|sid| slots.get(sid).core.try_claim_running_id(sid));
                    if taken.is_some() {
                        break;
                    }
                }
            }
            let Some(sid) = taken else { return };
            self.e.sub_moves.fetch_add(1, Ordering::Relaxed);
            self.post(idle, sid, 0, true);
        }
    }
}
