//! The floor's tasks, their consumer lists, the single-producer rings between its threads, and
//! the threads: lanes, and with `--hop` the scheduler role and its thread (see
//! `benches/floor.rs`).

use super::buffers::{tensor, w4_tag, W4_W};
use super::workloads::Opts;
use crossbeam_deque::{Steal, Stealer, Worker as Deque};
use dagrt::spsc::Padded;
use dagrt::task::Tensor;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A consumer list's head once its task finished: consumers linking after that find it done.
pub const CLOSED: u32 = u32::MAX;
/// An empty consumer list.
pub const EMPTY: u32 = u32::MAX - 1;

#[derive(Clone, Copy)]
pub enum Body {
    Set,
    Inc,
    Copy,
    Stencil,
}

/// One task: the line lanes and the submitter share.
#[repr(C, align(64))]
pub struct Task {
    /// Producers not yet finished, plus BIAS until published (`submit.rs`).
    pub fanin: AtomicU32,
    /// Head of the consumer list (an index into the edges), EMPTY or CLOSED.
    pub head: AtomicU32,
    /// `--locks`: taken and dropped K times by the submit and K times by the completion.
    pub sync: Mutex<()>,
    /// The task's tensors in the arena, written before publication.
    pub args: UnsafeCell<(u32, u32, Body)>,
}

/// A consumer link, written by the submitter before the compare-and-swap that publishes it.
pub struct Edge {
    pub consumer: u32,
    pub next: u32,
}

/// A single-producer, single-consumer ring of task ids. Its counters run on across reps; it
/// holds one rep's tasks, and a rep ends only when every task finished, so it never wraps
/// onto an unread entry. (Not `dagrt::spsc::Ring`, which publishes every item and keeps a
/// consumer index for its bound: this one publishes a batch at a time and needs no bound.)
pub struct Ring {
    tail: Padded<AtomicU64>,
    buf: Box<[AtomicU32]>,
}

impl Ring {
    fn new(tasks: usize) -> Ring {
        Ring {
            tail: Padded(AtomicU64::new(0)),
            buf: (0..tasks.next_power_of_two())
                .map(|_| AtomicU32::new(0))
                .collect(),
        }
    }

    fn at(&self, i: u64) -> &AtomicU32 {
        &self.buf[i as usize & (self.buf.len() - 1)]
    }
}

/// The producer's end of a ring: entries written, and published (one store of `tail` per
/// `batch` entries, so the line the consumer polls moves once a batch).
#[derive(Default)]
pub struct Tx {
    written: u64,
    published: u64,
}

impl Tx {
    pub fn push(&mut self, r: &Ring, t: u32, batch: u64) {
        r.at(self.written).store(t, Ordering::Relaxed);
        self.written += 1;
        if self.written - self.published >= batch {
            self.flush(r);
        }
    }

    pub fn flush(&mut self, r: &Ring) {
        if self.published != self.written {
            self.published = self.written;
            r.tail.0.store(self.written, Ordering::Release);
        }
    }
}

/// The consumer's end of a ring.
#[derive(Default)]
pub struct Rx {
    head: u64,
    tail: u64,
}

impl Rx {
    pub fn pop(&mut self, r: &Ring) -> Option<u32> {
        if self.head == self.tail {
            self.tail = r.tail.0.load(Ordering::Acquire);
        }
        (self.head < self.tail).then(|| {
            self.head += 1;
            r.at(self.head - 1).load(Ordering::Relaxed)
        })
    }
}

/// Tasks ready at their submit go to a lane (or the scheduler role) this many at a time.
pub const BATCH: u64 = 16;

/// The shared state of one workload's runs. The submitting thread writes tasks, edges, the
/// arena and the extra lines; a lane reads a task's arguments only after it became ready (the
/// fan-in's last decrement, AcqRel, or the ring that carried it, orders the submit's writes
/// before it) and an edge only after the swap that closed its list (Acquire, paired with the
/// link's Release).
pub struct Graph {
    pub tasks: Box<[Task]>,
    pub edges: Box<[UnsafeCell<Edge>]>,
    pub arena: Box<[UnsafeCell<Tensor>]>,
    /// Each lane's inbox: tasks from the submitter (or, with `--hop`, the scheduler role).
    pub inboxes: Box<[Ring]>,
    /// `--hop`: the submitter's ready tasks to the scheduler role, and each lane's finished
    /// tasks to it.
    pub to_sched: Ring,
    pub reports: Box<[Ring]>,
    /// Tasks finished (and released), per lane and, last, by the scheduler role.
    done: Box<[Padded<AtomicU64>]>,
    pub stop: AtomicBool,
    pub w4_base: AtomicU64,
    pub w4_violations: AtomicU64,
    pub locks: usize,
    pub hop: bool,
    pub role: Mutex<Role>,
    /// `--slot-bytes`: each task's extra lines (`extra` of them), written at submit.
    extra: usize,
    lines: Box<[UnsafeCell<[u8; 64]>]>,
}

// SAFETY: the UnsafeCells follow the publication rules above: each is written by the
// submitting thread only before the release operation that hands it on, and read only after
// the matching acquire.
unsafe impl Sync for Graph {}
// SAFETY: the tensors' raw pointers are the bench's own buffers, which outlive every lane's
// use of them (the lanes finish each rep's tasks before the buffers are read or dropped).
unsafe impl Send for Graph {}

impl Graph {
    pub fn new(tasks: usize, tensors: usize, o: &Opts) -> Graph {
        let extra = o.slot_bytes.div_ceil(64);
        Graph {
            tasks: (0..tasks)
                .map(|_| Task {
                    fanin: AtomicU32::new(0),
                    head: AtomicU32::new(EMPTY),
                    sync: Mutex::new(()),
                    args: UnsafeCell::new((0, 0, Body::Set)),
                })
                .collect(),
            edges: (0..tensors)
                .map(|_| {
                    UnsafeCell::new(Edge {
                        consumer: 0,
                        next: 0,
                    })
                })
                .collect(),
            arena: (0..tensors)
                .map(|_| UnsafeCell::new(tensor(std::ptr::null_mut(), 0)))
                .collect(),
            inboxes: (0..o.lanes).map(|_| Ring::new(tasks)).collect(),
            to_sched: Ring::new(if o.hop { tasks } else { 1 }),
            reports: (0..o.lanes)
                .map(|_| Ring::new(if o.hop { tasks } else { 1 }))
                .collect(),
            done: (0..=o.lanes).map(|_| Padded(AtomicU64::new(0))).collect(),
            stop: AtomicBool::new(false),
            w4_base: AtomicU64::new(0),
            w4_violations: AtomicU64::new(0),
            locks: o.locks,
            hop: o.hop,
            role: Mutex::new(Role::new(o.lanes)),
            extra,
            lines: (0..tasks * extra)
                .map(|_| UnsafeCell::new([0; 64]))
                .collect(),
        }
    }

    /// Where the submitter's ready tasks for lane `l` go: that lane's inbox, or with `--hop`
    /// the scheduler role's one ring.
    pub fn ready_ring(&self, l: usize) -> &Ring {
        if self.hop {
            &self.to_sched
        } else {
            &self.inboxes[l]
        }
    }

    pub fn finished(&self) -> u64 {
        self.done.iter().map(|d| d.0.load(Ordering::Acquire)).sum()
    }

    /// Task `t`'s extra lines (`--slot-bytes`).
    pub fn extra_lines(&self, t: u32) -> &[UnsafeCell<[u8; 64]>] {
        &self.lines[t as usize * self.extra..][..self.extra]
    }

    /// `--locks`: take and drop task `t`'s mutex K times.
    pub fn lock_pairs(&self, t: u32) {
        for _ in 0..self.locks {
            drop(self.tasks[t as usize].sync.lock());
        }
    }

    /// Run task `t`'s body.
    fn execute(&self, t: u32) {
        let task = &self.tasks[t as usize];
        // SAFETY: the task is ready, so its submit's writes happened before (see `Graph`), and
        // nothing writes its arguments again in this rep.
        let (start, len, body) = unsafe { *task.args.get() };
        let arg = |i: u32| -> *mut u8 {
            // SAFETY: as above, for the arena entries the task's arguments name.
            unsafe { (*self.arena[(start + i) as usize].get()).data.cast() }
        };
        // SAFETY: each body writes only its own OUTPUT/INOUT buffer, which no task running at
        // the same time touches (its producers finished, its consumers wait for it), and reads
        // buffers whose writers finished.
        unsafe {
            match body {
                Body::Set => std::ptr::write_volatile(arg(len - 1), 1),
                Body::Inc => {
                    let p = arg(0);
                    std::ptr::write_volatile(p, std::ptr::read_volatile(p).wrapping_add(1));
                }
                Body::Copy => {
                    std::ptr::write_volatile(arg(len - 1), std::ptr::read_volatile(arg(0)))
                }
                Body::Stencil => {
                    let out = arg(len - 1);
                    let l =
                        (out as u64 - self.w4_base.load(Ordering::Relaxed)) as usize / 64 / W4_W;
                    if l > 0 {
                        for i in 0..len - 1 {
                            if std::ptr::read_volatile(arg(i)) != w4_tag(l - 1) {
                                self.w4_violations.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    std::ptr::write_volatile(out, w4_tag(l));
                }
            }
        }
        for l in self.extra_lines(t) {
            // SAFETY: written by the task's submit, before it became ready (as its arguments).
            unsafe { std::ptr::read_volatile(l.get().cast::<u8>()) };
        }
    }

    /// Close finished task `t`'s consumer list and release each consumer; `ready` gets the
    /// ones that became ready.
    fn release(&self, t: u32, mut ready: impl FnMut(u32)) {
        self.lock_pairs(t);
        let mut e = self.tasks[t as usize].head.swap(CLOSED, Ordering::AcqRel);
        while e != EMPTY {
            // SAFETY: the edge was published by the Release CAS that linked it, which the swap
            // above read (or a later link's, whose `next` chain reaches it).
            let edge = unsafe { &*self.edges[e as usize].get() };
            if self.tasks[edge.consumer as usize]
                .fanin
                .fetch_sub(1, Ordering::AcqRel)
                == 1
            {
                ready(edge.consumer);
            }
            e = edge.next;
        }
    }

    /// Count a finished task on counter `k` (one writer per counter).
    fn count(&self, k: usize, n: u64) {
        let d = &self.done[k].0;
        d.store(d.load(Ordering::Relaxed) + n, Ordering::Release);
    }
}

/// How an idle thread waits: spin a little, then yield its core.
fn idle(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// A lane: its own deque, then its inbox, then the other lanes' deques. It releases the
/// consumers of what it ran itself (the ready ones onto its deque).
pub fn lane(g: Arc<Graph>, me: usize, local: Deque<u32>, stealers: Arc<Vec<Stealer<u32>>>) {
    let mut inbox = Rx::default();
    let mut spins = 0;
    loop {
        let next = local
            .pop()
            .or_else(|| inbox.pop(&g.inboxes[me]))
            .or_else(|| {
                std::iter::repeat_with(|| {
                    stealers
                        .iter()
                        .enumerate()
                        .filter(|&(i, _)| i != me)
                        .map(|(_, s)| s.steal())
                        .collect::<Steal<u32>>()
                })
                .find(|s| !s.is_retry())
                .and_then(Steal::success)
            });
        match next {
            Some(t) => {
                spins = 0;
                g.execute(t);
                g.release(t, |c| local.push(c));
                g.count(me, 1);
            }
            None if g.stop.load(Ordering::Relaxed) => return,
            None => idle(&mut spins),
        }
    }
}

/// `--hop`: the scheduler's state, held by whichever thread plays the role (the scheduler
/// thread, or a lane that finds the role free after a task, as dagrt's lanes do); the lock
/// keeps each ring end to one thread at a time.
pub struct Role {
    from_sub: Rx,
    reports: Vec<Rx>,
    to_lane: Vec<Tx>,
    ready: Vec<u32>,
    placed: u64,
}

impl Role {
    pub fn new(lanes: usize) -> Role {
        Role {
            from_sub: Rx::default(),
            reports: (0..lanes).map(|_| Rx::default()).collect(),
            to_lane: (0..lanes).map(|_| Tx::default()).collect(),
            ready: Vec::new(),
            placed: 0,
        }
    }

    /// One pass: the lanes' reports first (releasing consumers), then the submitter's ready
    /// tasks; everything ready goes to the lanes, BATCH at a time round robin. Returns whether
    /// it found anything.
    fn pass(&mut self, g: &Graph) -> bool {
        let lanes = g.inboxes.len();
        let mut finished = 0;
        for (l, rx) in self.reports.iter_mut().enumerate() {
            while let Some(t) = rx.pop(&g.reports[l]) {
                g.release(t, |c| self.ready.push(c));
                finished += 1;
            }
        }
        while let Some(t) = self.from_sub.pop(&g.to_sched) {
            self.ready.push(t);
        }
        let busy = finished > 0 || !self.ready.is_empty();
        for t in self.ready.drain(..) {
            let l = (self.placed / BATCH) as usize % lanes;
            self.to_lane[l].push(&g.inboxes[l], t, BATCH);
            self.placed += 1;
        }
        for (l, tx) in self.to_lane.iter_mut().enumerate() {
            tx.flush(&g.inboxes[l]);
        }
        if finished > 0 {
            // One writer at a time: the role's lock orders the passes.
            g.count(lanes, finished);
        }
        busy
    }
}

/// `--hop`, a lane: runs what the role puts in its inbox, reports each task as it finishes, and
/// then plays the role itself if it is free.
pub fn hop_lane(g: Arc<Graph>, me: usize) {
    let (mut inbox, mut report) = (Rx::default(), Tx::default());
    let mut spins = 0;
    loop {
        match inbox.pop(&g.inboxes[me]) {
            Some(t) => {
                spins = 0;
                g.execute(t);
                report.push(&g.reports[me], t, 1);
                if let Ok(mut role) = g.role.try_lock() {
                    role.pass(&g);
                }
            }
            None if g.stop.load(Ordering::Relaxed) => return,
            None => idle(&mut spins),
        }
    }
}

/// `--hop`, the scheduler thread: passes whenever the role is free, spinning and yielding
/// between them while they find nothing.
pub fn scheduler(g: Arc<Graph>) {
    let mut spins = 0;
    loop {
        let busy = g.role.try_lock().is_ok_and(|mut role| role.pass(&g));
        if busy {
            spins = 0;
        } else if g.stop.load(Ordering::Relaxed) {
            return;
        } else {
            idle(&mut spins);
        }
    }
}
