//! The structural-stall watch: a blocked group head whose reserved target is idle with
//! singles queued behind the reservation; one warning per episode.

use super::*;

/// A blocked group head is structurally stalled when one of its reserved targets is idle
/// and has singles queued behind the reservation. One warning per episode after 5 s.
pub(super) struct Stall {
    pub(super) head: crate::slot::SlotId,
    pub(super) since: Instant,
    pub(super) warned: bool,
}

pub(super) const STALL_WARNING_AFTER: Duration = Duration::from_secs(5);

impl Sched {
    /// Track the stall episode of the blocked group head; warn once per episode.
    pub(super) fn watch_stall(
        &mut self,
        head: Option<(crate::slot::SlotId, Arc<[u32]>)>,
        q: &queues::ReadyQueues,
    ) {
        let Some((head, targets)) = head else {
            self.stall = None;
            return;
        };
        // An idle target's queued singles, the first still READY: a cancelled single left in
        // its FIFO waits for nothing.
        let e = self.e;
        let slots = &e.slots;
        let queued_on = |l: u32| {
            let live = |sid| slots.get(sid).core.is_ready(sid);
            if self.lanes[l as usize].idle() {
                q.singles[l as usize].first_live(live)
            } else {
                None
            }
        };
        let stalled = targets.iter().any(|&l| queued_on(l).is_some());
        if !stalled {
            self.stall = None;
            return;
        }
        let now = Instant::now();
        let st = match &mut self.stall {
            Some(st) if st.head == head => st,
            _ => self.stall.insert(Stall {
                head,
                since: now,
                warned: false,
            }),
        };
        if st.warned || now.duration_since(st.since) < STALL_WARNING_AFTER {
            return;
        }
        st.warned = true;
        let id = |l: u32| self.e.lanes[l as usize].kind.view_id();
        let busy: Vec<i32> = targets
            .iter()
            .filter(|&&l| !self.lanes[l as usize].idle())
            .map(|&l| id(l))
            .collect();
        let queued: Vec<String> = targets
            .iter()
            .filter_map(|&l| {
                queued_on(l).map(|sid| format!("{} (single FIFO head slot {sid})", id(l)))
            })
            .collect();
        self.warning = Some(
            format!(
                "group slot {head} at the group FIFO head has been blocked for {} s: busy targets {busy:?}; \
                 idle-but-queued targets [{}] are reserved for it",
                STALL_WARNING_AFTER.as_secs(),
                queued.join(", ")
            ),
        );
    }
}
