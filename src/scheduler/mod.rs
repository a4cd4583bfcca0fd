//! The Scheduler (Scheduler seed): drains completions, then dispatches READY work to idle
//! lanes: the group FIFO head (all-or-nothing, reserving its targets), each NEXT_LEVEL lane's
//! own FIFO, then the shared SUB FIFO.
//!
//! Its state is one `Sched` behind `Engine::sched`: the scheduler role. The scheduler thread
//! runs passes while it holds the role; a lane that has just reported a completion takes the
//! role too if it is free and runs the passes itself (releasing consumers, dispatching, often
//! to itself), instead of waking the parked scheduler thread, which costs the lane a futex
//! wake (~15 us on these machines) and everyone a thread switch. After a tiny job with
//! another queued behind it, the lane defers that pass to its mailbox's last job (and wakes a
//! parked scheduler thread, see `lane::thread::lane_main`). One holder at a time keeps
//! a single progress owner; a lane that finds the role taken notifies instead, and the
//! scheduler thread never parks while completions or submissions are pending.
//!
//! The scheduler thread's wait is edge-triggered on `Engine::sched_event`: a submission that
//! makes a slot READY, a lane completion (which is also the lane publishing itself idle), and a
//! stop request each advance it. Work that is queued but not placeable (a blocked group head)
//! does not keep the scheduler awake.

mod book;
pub mod completion;
mod dispatch;
pub mod queues;
mod stall;

use book::LaneBook;
pub use book::{left_caches_cold, PACK_JOB_NS, SHORT_JOB_DEPTH, SHORT_JOB_NS, STUCK_SWEEP};
use stall::{Stall, STALL_WARNING_AFTER};

use crate::lane::{Completion, Job, LaneKind};
use crate::slot::{Edge, ROUTE_SINGLE, ROUTE_SUB};
use crate::worker::Engine;
use std::sync::atomic::Ordering;
use std::sync::{Arc, TryLockError};
use std::time::{Duration, Instant};

/// The engine, uncounted: a `Sched` lives inside its engine (`Engine::sched`), so a counted
/// reference would be a cycle, and every thread that runs a pass holds its own `Arc<Engine>`.
#[derive(Clone, Copy)]
struct EngineRef(*const Engine);

impl std::ops::Deref for EngineRef {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        // SAFETY: the pointer is the engine that owns this Sched; the Sched is only reached
        // through `Engine::sched` by threads holding an `Arc<Engine>`, so the engine is alive.
        unsafe { &*self.0 }
    }
}

/// The scheduler role's state (see the module comment).
pub struct Sched {
    e: EngineRef,
    /// The ready queues: the scheduler's own, fed by `Engine::ready_in` and by completions.
    /// `None` only while a dispatch pass holds them.
    queues: Option<Box<queues::ReadyQueues>>,
    /// Scratch: consumers made READY by the completions being drained.
    ready: Vec<(crate::slot::SlotId, crate::slot::Route)>,
    /// Per lane: the jobs posted and not yet reported, and recent job lengths.
    lanes: Vec<LaneBook>,
    /// Lane is reserved by a blocked group head for this pass.
    reserved: Vec<bool>,
    next_level: Vec<u32>,
    sub: Vec<u32>,
    posts: Vec<(u32, Job)>,
    edges: Vec<Edge>,
    /// Slots consumed while draining completions, reclaimed as one batch.
    reclaim: Vec<crate::slot::SlotId>,
    /// Since when `reclaim` holds slots back for a batch (this role set
    /// `Engine::reclaim_held` then and has not cleared it).
    held_since: Option<Instant>,
    /// Slots of `reclaim` checked by `holds_building_only` (while held).
    held_len: usize,
    idle_subs: Vec<u32>,
    /// The current stall episode of a blocked group head, if any.
    stall: Option<Stall>,
    /// The stall warning of this pass, logged once the role is released (`release_role`):
    /// the log hook is the host's code, and may be slow or call back into dagrt.
    warning: Option<String>,
    /// When the next idle lane's look sweeps for stuck lanes of tiny jobs
    /// (`book::STUCK_SWEEP`; None while no lane queues tiny jobs with another idle).
    next_sweep: Option<Instant>,
}

// SAFETY: `EngineRef` is a shared reference in all but lifetime (see its Deref); everything
// else in a Sched is owned data, and the role mutex serialises its use.
unsafe impl Send for Sched {}

fn role(e: &Engine) -> std::sync::MutexGuard<'_, Option<Sched>> {
    e.sched.lock().unwrap_or_else(|p| p.into_inner())
}

/// Release the scheduler role, then log the warning its passes left, if any.
fn release_role(mut g: std::sync::MutexGuard<'_, Option<Sched>>) {
    let warning = g.as_mut().and_then(|s| s.warning.take());
    drop(g);
    if let Some(m) = warning {
        crate::log::emit(crate::log::LogLevel::Warn, &m);
    }
}

/// Body of the scheduler thread.
pub fn scheduler_main(e: Arc<Engine>) {
    crate::trace::set_scheduler_thread(&e.trace);
    *role(&e) = Some(Sched::new(&e));
    loop {
        let seen = e.sched_event.generation();
        // A hold of consumed slots (see `Sched::reclaim_or_hold`) starting or ending is a change to
        // look at: the wait below is timed while one lasts.
        let holding = e.reclaim_held.load(Ordering::Relaxed);
        let held = match e.sched.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        };
        let lane_holds = held.is_none();
        let wait = match held {
            Some(mut g) => {
                let s = g.as_mut().expect("installed above");
                let progress = s.pass();
                if s.hold_deadline().is_some_and(|d| Instant::now() >= d) {
                    s.consume_reclaim();
                }
                if s.stop_lanes_if_done() {
                    release_role(g);
                    return;
                }
                let wait = (!progress).then(|| s.wait_params());
                release_role(g);
                wait
            }
            // A lane is running passes: let it finish, then look again.
            None => {
                std::thread::yield_now();
                // Held slots are timed from here until the role is free.
                Some((
                    holding.then(|| Instant::now() + HOLD_MAX),
                    crate::event::spin_budget(),
                ))
            }
        };
        if let Some((deadline, spin)) = wait {
            e.sched_event.wait_until_looking(
                |look| {
                    // While a lane holds the role, the work that arrives is that lane's to
                    // take: looking for it on every spin would only pull the queues' lines
                    // away from the lanes and retry the role's lock in their way.
                    let poll = look || !lane_holds;
                    e.sched_event.generation() != seen
                        || e.reclaim_held.load(Ordering::SeqCst) != holding
                        || (poll && crate::lane::completions_pending(&e))
                        || (poll && !e.ready_in.is_empty())
                        // Submissions the orchestrator pushed but has not rung in yet: this
                        // thread rings for it every few microseconds, and before it parks.
                        || (look && e.ready_in.ring_any())
                        || e.stopping()
                },
                deadline,
                spin,
            );
        }
    }
}

/// Consumed slots a pass holds back while more passes are due (`Sched::reclaim_or_hold`); at most
/// an eighth of the task window, so held slots never starve the submitter of free ones.
const RECLAIM_BATCH: usize = 32;
/// How long they may wait for the batch.
const HOLD_MAX: Duration = Duration::from_micros(100);

/// Passes a lane runs before going back to its own jobs; work still pending then is left to
/// the scheduler thread.
const LANE_PASSES: u32 = 4;

/// An idle lane's look, every STUCK_SWEEP while it spins: if the role is free and a lane of
/// tiny jobs has jobs queued behind one that has not reported since the previous look, run a
/// pass, which takes them back for the idle lanes. Without it, jobs packed behind a long job
/// among tiny ones would wait for it whenever nothing else caused a pass. Returns whether
/// such jobs are being watched (a parked lane then looks again after its shortest nap).
pub fn idle_sweep(e: &Engine) -> bool {
    let Ok(mut g) = e.sched.try_lock() else {
        return false;
    };
    let Some(s) = g.as_mut() else { return false };
    let watching = s.watching_queued_tiny();
    if s.sweep_if_due() {
        s.pass();
    }
    let stall = s.stall_needs_timer();
    release_role(g);
    if stall {
        e.sched_event.notify();
    }
    watching
}

/// A submission found the scheduler thread parked (`completion::enqueue_ready`): one pass on
/// the submitting thread if the role is free. A warning it raises is left for the scheduler
/// thread to emit: a submit does not call the log hook. Returns whether a stall episode
/// needs the scheduler thread's timer (the caller then notifies it).
pub fn pass_for_parked(e: &Engine) -> bool {
    let Ok(mut g) = e.sched.try_lock() else {
        return false;
    };
    let Some(s) = g.as_mut() else { return false };
    s.pass();
    s.stall_needs_timer()
}

/// How long a lane back from a long job waits for the role another thread holds. That
/// holder is in a pass of a microsecond or two, and the lane has no job until a pass runs
/// for its completion: left to the scheduler thread, whose wake-up then takes a core from a
/// lane mid-kernel, the lane sat idle for tens of microseconds (5-8 times in a tiled
/// Cholesky's run at n = 2048, b = 128). A holder taken off its core runs out the wait.
const ROLE_WAIT: Duration = Duration::from_micros(20);

/// The role, taken within ROLE_WAIT of its holder's release; None if it was not released.
fn role_after_holder(e: &Engine) -> Option<std::sync::MutexGuard<'_, Option<Sched>>> {
    let start = Instant::now();
    loop {
        // Paced: each failed attempt takes the lock's line from the holder, which needs it
        // back to release the role.
        for _ in 0..32 {
            std::hint::spin_loop();
        }
        if let Ok(g) = e.sched.try_lock() {
            return Some(g);
        }
        if start.elapsed() >= ROLE_WAIT {
            return None;
        }
    }
}

/// A lane reported a completion: run the passes it calls for if the role is free (after a
/// long job, `long`, once its holder releases it), else make sure the scheduler thread sees
/// it.
pub fn after_completion(e: &Engine, long: bool) {
    let held = match e.sched.try_lock() {
        Ok(g) => Some(g),
        Err(_) if long => role_after_holder(e),
        Err(_) => None,
    };
    let Some(mut g) = held else {
        return e.sched_event.notify_cond();
    };
    let Some(s) = g.as_mut() else {
        return e.sched_event.notify_cond();
    };
    let mut busy = true;
    for _ in 0..LANE_PASSES {
        // Another pass can place nothing new unless a completion or a submission arrived
        // since this one drained them: the lane books and queues it would read are as this
        // pass left them. (Anything arriving after this check notifies the scheduler thread,
        // whose role try-lock fails while this lane holds it.)
        busy = s.pass() && (crate::lane::completions_pending(e) || !e.ready_in.is_empty());
        if !busy {
            break;
        }
    }
    let stall = s.stall_needs_timer();
    release_role(g);
    if stall {
        e.sched_event.notify();
    } else if busy {
        e.sched_event.notify_cond();
    }
}

impl Sched {
    fn new(e: &Arc<Engine>) -> Sched {
        let n = e.lanes.len();
        let next_level = (0..n as u32)
            .filter(|&i| matches!(e.lanes[i as usize].kind, LaneKind::NextLevel(_)))
            .collect();
        let sub = (0..n as u32)
            .filter(|&i| matches!(e.lanes[i as usize].kind, LaneKind::Sub(_)))
            .collect();
        Sched {
            e: EngineRef(Arc::as_ptr(e)),
            queues: Some(Box::new(queues::ReadyQueues::new(n))),
            ready: Vec::new(),
            lanes: (0..n)
                .map(|i| LaneBook::new(matches!(e.lanes[i].kind, LaneKind::NextLevel(_))))
                .collect(),
            reserved: vec![false; n],
            next_level,
            sub,
            posts: Vec::new(),
            edges: Vec::new(),
            reclaim: Vec::new(),
            held_since: None,
            held_len: 0,
            idle_subs: Vec::new(),
            stall: None,
            warning: None,
            next_sweep: None,
        }
    }

    /// One pass: drain completions and submissions, dispatch, reclaim. Returns whether it
    /// handled or posted anything.
    fn pass(&mut self) -> bool {
        let traced = self.e.trace.on();
        let t0 = if traced { self.e.trace.now() } else { 0 };
        let mut done = 0;
        let e = self.e;
        for lane in e.lanes.iter() {
            while let Some(c) = lane.done.pop() {
                self.on_completion(c);
                done += 1;
            }
        }
        let queues = self
            .queues
            .as_mut()
            .expect("queues are home between passes");
        // Consumers these completions released became READY after every submission pushed
        // before their producers finished (the push happens-before the completion popped
        // above): ring those in first, or a released consumer could be routed, or placed
        // directly on an idle lane, ahead of a task READY before it (Scheduler seed §1, one
        // FIFO order for both). One read of the producer's count per releasing pass.
        if !self.ready.is_empty() {
            self.e.ready_in.ring_any();
        }
        while let Some((sid, r)) = self.e.ready_in.pop() {
            completion::route(queues, sid, r);
        }
        // Dispatch from here: a chain's step placed directly counts as one.
        let t1 = if traced { self.e.trace.now() } else { 0 };
        // A chain's step: the one consumer this pass released goes straight to its lane
        // when nothing else is waiting (`place_direct`); otherwise through the queues. Only
        // with one run in flight: with more, an older run's jobs queued in a busy lane's
        // mailbox are waiting too, and `dispatch` moves them to an idle lane before any
        // newer run's task (Scheduler seed §1: live runs do not interleave).
        let mut direct = false;
        if self.ready.len() == 1 && queues.is_empty() && self.one_run() {
            let (sid, r) = self.ready.pop().expect("one released");
            direct = self.place_direct(sid, &r);
            if !direct {
                self.ready.push((sid, r));
            }
        }
        let queues = self
            .queues
            .as_mut()
            .expect("queues are home between passes");
        for (sid, r) in self.ready.drain(..) {
            completion::route(queues, sid, r);
        }
        let posted = self.dispatch();
        // The slices end before the reclaim, which records its own.
        if traced {
            if done > 0 {
                self.e.trace.sched("completions", t0, t1, done);
            }
            let placed = posted + usize::from(direct);
            if placed > 0 {
                self.e
                    .trace
                    .sched("dispatch", t1, self.e.trace.now(), placed as u32);
            }
        }
        // Reclaim after dispatching: new work goes out first, and a run whose fence this
        // drops to zero no longer has dead entries in the queues this pass could drain.
        self.reclaim_or_hold(posted > 0 || direct);
        done > 0 || posted > 0
    }

    /// Consume the slots this pass's completions released, or hold them for a batch.
    ///
    /// Consuming a slot of a run still being built takes the TensorMap lock and the free
    /// list's, which the submitting thread takes per submit; one slot at a time, the two
    /// threads pass those lines back and forth (a scoped stream ran twice as slow per task).
    /// So while another pass is due (this one `placed` work, or more arrived), such slots wait
    /// for a batch, for HOLD_MAX at most: a job placed may run for any time, and the host may
    /// be waiting to see a slot reclaimed (its heap slab, its window entry) before it lets
    /// that job finish. The scheduler thread enforces the bound; in practice its next pass
    /// with nothing else to do consumes them.
    fn reclaim_or_hold(&mut self, placed: bool) {
        let e = self.e;
        let batch = RECLAIM_BATCH.min(e.slots.window() as usize / 8);
        let hold = self.reclaim.len() < batch
            && self.holds_building_only()
            && (placed || crate::lane::completions_pending(&e) || !e.ready_in.is_empty());
        if !hold {
            return self.consume_reclaim();
        }
        self.held_len = self.reclaim.len();
        if self.held_since.is_none() {
            self.held_since = Some(Instant::now());
            // The scheduler thread times the hold: it watches the flag, and is woken if
            // parked (notify_cond's fence orders the store before its sleeper check).
            e.reclaim_held.store(true, Ordering::Relaxed);
            e.sched_event.notify_cond();
        }
    }

    fn consume_reclaim(&mut self) {
        let n = self.reclaim.len() as u32;
        let traced = n > 0 && self.e.trace.on();
        let t0 = if traced { self.e.trace.now() } else { 0 };
        completion::consume_all(&self.e, &mut self.reclaim);
        if traced {
            self.e.trace.sched("reclaim", t0, self.e.trace.now(), n);
        }
        if self.held_since.take().is_some() {
            self.e.reclaim_held.store(false, Ordering::Release);
        }
    }

    /// Whether a stall episode is under way and not warned of yet. Its warning comes from
    /// the scheduler thread's timed wait, and that thread waits untimed whenever it found a
    /// lane holding the role: a lane leaving the role with such an episode must wake it, new
    /// episode or not, or a run gone quiet never gets the warning.
    fn stall_needs_timer(&self) -> bool {
        self.stall.as_ref().is_some_and(|st| !st.warned)
    }

    /// Whether a SUB lane of tiny jobs holds queued ones while another SUB lane idles.
    fn watching_queued_tiny(&self) -> bool {
        let any = |f: fn(&LaneBook) -> bool| self.sub.iter().any(|&l| f(&self.lanes[l as usize]));
        any(LaneBook::idle) && any(LaneBook::queues_tiny)
    }

    /// An idle lane's look (`idle_sweep`): while a lane of tiny jobs holds queued ones and
    /// another SUB lane idles, sweep at most every STUCK_SWEEP for one that stopped
    /// reporting (with no other activity, no pass would count the checks `may_steal_from`
    /// relies on). Returns whether it swept (and a pass may now take jobs back).
    fn sweep_if_due(&mut self) -> bool {
        if !self.watching_queued_tiny() {
            self.next_sweep = None;
            return false;
        }
        let now = Instant::now();
        if self.next_sweep.is_some_and(|t| now < t) {
            return false;
        }
        let first = self.next_sweep.is_none();
        for &l in &self.sub {
            if self.lanes[l as usize].queues_tiny() {
                self.lanes[l as usize].sweep(first);
            }
        }
        self.next_sweep = Some(now + book::STUCK_SWEEP);
        !first
    }

    /// When the slots held back for a batch must be consumed, whatever the passes do.
    fn hold_deadline(&self) -> Option<Instant> {
        self.held_since.map(|t| t + HOLD_MAX)
    }

    /// Whether every consumed slot waiting in `reclaim` (at least one) belongs to a run still
    /// being built. Slots already held were checked by an earlier pass (a run sealed since
    /// then leaves its slots to the hold's bound).
    fn holds_building_only(&self) -> bool {
        let from = if self.held_since.is_some() {
            self.held_len
        } else {
            0
        };
        !self.reclaim.is_empty()
            && self.reclaim[from..]
                .iter()
                .all(|&sid| completion::run_building(&self.e, sid))
    }

    /// Whether nothing the role holds names a task id, once what names only dead tasks is
    /// dropped (for `Orchestrator::renumber_if_quiescent`, called on the orchestrator thread,
    /// the ready inbox's producer, with no run registered and no slot live: every queued
    /// entry is then a cancelled task's). False while a lane still holds or reports a job.
    pub fn forget_dead_work(&mut self) -> bool {
        let e = self.e;
        if self.lanes.iter().any(|b| b.occupancy() > 0)
            || crate::lane::completions_pending(&e)
            || !self.reclaim.is_empty()
        {
            return false;
        }
        e.ready_in.ring();
        while e.ready_in.pop().is_some() {}
        if let Some(q) = self.queues.as_mut() {
            q.clear();
        }
        self.stall = None;
        true
    }

    /// Stop requested and every lane idle: tell the lanes to exit.
    fn stop_lanes_if_done(&self) -> bool {
        if self.e.stop.load(Ordering::Acquire)
            && self.lanes.iter().all(|b| b.occupancy() == 0)
            && !crate::lane::completions_pending(&self.e)
        {
            for lane in self.e.lanes.iter() {
                lane.mailbox.stop();
            }
            return true;
        }
        false
    }

    /// How the idle scheduler thread waits: until the stall-warning deadline, if one is
    /// running, and without spinning when it waits only on long jobs (a spinning scheduler
    /// would queue behind the kernels for the CPU).
    fn wait_params(&self) -> (Option<Instant>, Duration) {
        let stall = self
            .stall
            .as_ref()
            .filter(|st| !st.warned)
            .map(|st| st.since + STALL_WARNING_AFTER);
        let deadline = match (stall, self.hold_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let busy = || self.lanes.iter().filter(|b| !b.idle());
        let long = busy().all(|b| b.long_jobs()) && busy().next().is_some();
        let spin = if long {
            Duration::ZERO
        } else {
            crate::event::spin_budget()
        };
        (deadline, spin)
    }

    fn on_completion(&mut self, c: Completion) {
        let l = c.lane as usize;
        self.lanes[l].complete(c.slot, c.ns);
        if c.skipped {
            return;
        }
        let slot = self.e.slots.get(c.slot);
        // SAFETY: the slot is RUNNING (a group's other members may still run: shared).
        let d = unsafe { slot.data_ref() };
        let failure = if d.group && d.members.len() > 1 {
            // SAFETY: this thread holds the role, and the group is launched, not yet done.
            let g = unsafe { d.group_book.get() };
            // The earliest failure by ticket: a pass drains lane by lane, so a lower lane's
            // completion can come first here though its member failed later.
            if let Some(f) = c.failure {
                if g.member_failure
                    .as_ref()
                    .is_none_or(|had| crate::lane::earlier_ticket(f.ticket, had.ticket))
                {
                    g.member_failure = Some(f);
                }
            }
            g.members_left -= 1;
            if g.members_left > 0 {
                return;
            }
            g.member_failure.take()
        } else {
            c.failure
        };
        completion::complete_task(
            &self.e,
            c.slot,
            left_caches_cold(c.ns),
            failure,
            &mut self.edges,
            &mut self.ready,
            &mut self.reclaim,
        );
    }

    /// Post a released consumer straight to its lane, by the rule `dispatch` would apply (a
    /// NEXT_LEVEL single to its lane, a SUB single to the SUB lane with the fewest jobs),
    /// instead of a trip through the queues; false (nothing posted) when that rule places it
    /// nowhere or it is a group. The caller makes sure nothing else is waiting and only one
    /// run is in flight, so the queues' order (runs apart, FIFO within one) has nothing to say.
    fn place_direct(&mut self, sid: crate::slot::SlotId, r: &crate::slot::Route) -> bool {
        let lane = match r.kind {
            ROUTE_SINGLE if self.lanes[r.lane as usize].has_room() => Some(r.lane),
            ROUTE_SUB if r.members == 1 => {
                book::sub_lane_for_single(&self.lanes, &self.sub, true).map(|c| c.0)
            }
            _ => None,
        };
        let Some(l) = lane else { return false };
        self.post_single(l as usize, sid);
        true
    }

    /// At most one run in flight: SUB singles may be packed into busy lanes' mailboxes.
    fn one_run(&self) -> bool {
        self.e.runs.in_flight.load(Ordering::Relaxed) <= 1
    }
}

/// Slots waiting in ready queues (introspection).
pub fn queued(e: &Engine) -> usize {
    // Counted from the slots themselves: a queue may still hold entries of READY slots that
    // a cancellation claimed, until the scheduler's next pass drops them.
    e.slots
        .iter()
        .filter(|s| s.core.state() == crate::slot::READY)
        .count()
}
