//! The floor's runtime and workloads (see `benches/floor.rs`), in a module of their own so that
//! `tests/bench_floor.rs` runs them at small sizes with the other tests.

use crossbeam_deque::{Steal, Stealer, Worker as Deque};
use dagrt::task::Tensor;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const W1_N: usize = 100_000;
const W2_N: usize = 100_000;
const W3_N: usize = 10_000;
const W4_W: usize = 64;
const W4_L: usize = 1000;

const TAG_INPUT: u32 = 0;
const TAG_OUTPUT: u32 = 1;
const TAG_INOUT: u32 = 2;

/// A task's fan-in while it is being submitted: the live producers are subtracted from it one
/// by one as they finish, and the submit subtracts `BIAS - live` when it publishes, so the
/// count reaches zero exactly once, after the last of the two.
const BIAS: u32 = 1 << 30;
/// A consumer list's head once its task finished: consumers linking after that find it done.
const CLOSED: u32 = u32::MAX;
/// An empty consumer list.
const EMPTY: u32 = u32::MAX - 1;

#[derive(Clone, Copy)]
enum Body {
    Set,
    Inc,
    Copy,
    Stencil,
}

/// One task: the line lanes and the submitter share.
#[repr(C, align(64))]
struct Task {
    /// Producers not yet finished, plus BIAS until published.
    fanin: AtomicU32,
    /// Head of the consumer list (an index into the edges), EMPTY or CLOSED.
    head: AtomicU32,
    /// The task's tensors in the arena, written before publication.
    args: UnsafeCell<(u32, u32, Body)>,
}

/// A consumer link, written by the submitter before the compare-and-swap that publishes it.
struct Edge {
    consumer: u32,
    next: u32,
}

/// The shared state of one workload's runs. The submitting thread writes tasks, edges, the
/// arena and the map; lanes read a task's arguments only after it became ready (the fan-in's
/// last decrement, AcqRel, orders the submit's writes before it) and an edge only after the
/// swap that closed its list (Acquire, paired with the link's Release).
struct Graph {
    tasks: Box<[Task]>,
    edges: Box<[UnsafeCell<Edge>]>,
    arena: Box<[UnsafeCell<Tensor>]>,
    /// Each lane's inbox of tasks ready at their submit.
    inboxes: Box<[Inbox]>,
    /// Tasks finished per lane, each on a line of its own.
    done: Box<[Padded]>,
    /// The workload lanes run now, and whether they should exit.
    stop: AtomicBool,
    w4_base: AtomicU64,
    w4_violations: AtomicU64,
    /// `--slot-bytes`: each task's extra lines (`extra` of them), written at submit.
    extra: usize,
    lines: Box<[UnsafeCell<[u8; 64]>]>,
}

#[repr(align(64))]
struct Padded(AtomicU64);

/// A single-producer ring from the submitting thread to one lane, published in batches (one
/// store of `tail` per INBOX_BATCH tasks, so the line the lane polls moves once a batch). Its
/// counters run on across reps; it holds one rep's tasks, and a rep ends only when every task
/// finished, so it never wraps onto an unread entry.
struct Inbox {
    tail: Padded,
    buf: Box<[AtomicU32]>,
}

const INBOX_BATCH: u64 = 16;

impl Inbox {
    fn new(tasks: usize) -> Inbox {
        Inbox {
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

// SAFETY: the UnsafeCells follow the publication rules on `Graph`: each is written by the
// submitting thread only before the release operation that hands it to a lane, and read by a
// lane only after the matching acquire.
unsafe impl Sync for Graph {}
// SAFETY: the tensors' raw pointers are the bench's own buffers, which outlive every lane's
// use of them (the lanes finish each rep's tasks before the buffers are read or dropped).
unsafe impl Send for Graph {}

impl Graph {
    fn new(tasks: usize, tensors: usize, o: &Opts) -> Graph {
        let (lanes, extra) = (o.lanes, o.slot_bytes.div_ceil(64));
        let empty = || Tensor {
            data: std::ptr::null_mut(),
            offset: 0,
            ndim: 0,
            dtype: 0,
            tag: 0,
            reserved: 0,
            shape: [0; 5],
            strides: [0; 5],
        };
        Graph {
            tasks: (0..tasks)
                .map(|_| Task {
                    fanin: AtomicU32::new(0),
                    head: AtomicU32::new(EMPTY),
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
            arena: (0..tensors).map(|_| UnsafeCell::new(empty())).collect(),
            inboxes: (0..lanes).map(|_| Inbox::new(tasks)).collect(),
            done: (0..lanes).map(|_| Padded(AtomicU64::new(0))).collect(),
            stop: AtomicBool::new(false),
            w4_base: AtomicU64::new(0),
            w4_violations: AtomicU64::new(0),
            extra,
            lines: (0..tasks * extra)
                .map(|_| UnsafeCell::new([0; 64]))
                .collect(),
        }
    }

    /// Task `t`'s extra lines (`--slot-bytes`).
    fn extra_lines(&self, t: u32) -> &[UnsafeCell<[u8; 64]>] {
        &self.lines[t as usize * self.extra..][..self.extra]
    }

    fn finished(&self) -> u64 {
        self.done.iter().map(|d| d.0.load(Ordering::Acquire)).sum()
    }

    /// Run task `t` on a lane and release its consumers; the ready ones go to `local`.
    fn run(&self, t: u32, local: &Deque<u32>, done: &AtomicU64) {
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
        let mut e = task.head.swap(CLOSED, Ordering::AcqRel);
        while e != EMPTY {
            // SAFETY: the edge was published by the Release CAS that linked it, which the swap
            // above read (or a later link's, whose `next` chain reaches it).
            let edge = unsafe { &*self.edges[e as usize].get() };
            if self.tasks[edge.consumer as usize]
                .fanin
                .fetch_sub(1, Ordering::AcqRel)
                == 1
            {
                local.push(edge.consumer);
            }
            e = edge.next;
        }
        done.store(done.load(Ordering::Relaxed) + 1, Ordering::Release);
    }
}

fn w4_tag(l: usize) -> u8 {
    (l % 255 + 1) as u8
}

/// A lane: its own deque, then its inbox, then the other lanes' deques; spin, then yield.
fn lane(g: Arc<Graph>, me: usize, local: Deque<u32>, stealers: Arc<Vec<Stealer<u32>>>) {
    let done = &g.done[me].0;
    let inbox = &g.inboxes[me];
    let mut head = 0u64;
    let mut tail = 0u64;
    let mut idle = 0u32;
    loop {
        let mut next = local.pop();
        if next.is_none() {
            if head == tail {
                tail = inbox.tail.0.load(Ordering::Acquire);
            }
            if head < tail {
                next = Some(inbox.at(head).load(Ordering::Relaxed));
                head += 1;
            }
        }
        let next = next.or_else(|| {
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
                idle = 0;
                g.run(t, &local, done);
            }
            None if g.stop.load(Ordering::Relaxed) => return,
            None => {
                idle += 1;
                if idle < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }
}

/// The writer map: open addressing, keyed by granule (address >> 6) and tagged with the rep,
/// so a new rep needs no clearing: (granule, rep, writer).
struct WriterMap {
    map: Vec<(u64, u32, u32)>,
    rep: u32,
}

impl WriterMap {
    fn new(granules: usize) -> WriterMap {
        let cap = (granules * 2).next_power_of_two();
        WriterMap {
            map: vec![(0, 0, 0); cap],
            rep: 0,
        }
    }

    /// The entry of `key` in this rep: its writer's, or the free one to take.
    #[inline]
    fn probe(&mut self, key: u64) -> &mut (u64, u32, u32) {
        let mask = self.map.len() - 1;
        let mut i = block_hash(key) as usize & mask;
        loop {
            let e = self.map[i];
            if e.1 != self.rep || e.0 == key {
                return &mut self.map[i];
            }
            i = (i + 1) & mask;
        }
    }
}

/// A granule's position in the map: the low 8 bits as they are, so that neighbouring buffers
/// take neighbouring entries (a stream of submits then walks the map as it walks its
/// buffers), the rest mixed, so that buffers at a large power-of-two stride do not pile up on
/// a few entries.
#[inline]
fn block_hash(key: u64) -> u64 {
    (key & 0xFF) | ((key >> 8).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16 << 8)
}

/// The submitting thread's side: the writer map and the bump pointers into the shared arrays.
struct Submitter {
    g: Arc<Graph>,
    map: WriterMap,
    next_task: u32,
    next_tensor: u32,
    /// Per lane: tasks written to its inbox, and tasks published there.
    written: Vec<u64>,
    published: Vec<u64>,
    /// Tasks ready at their submit so far in this rep (they go to the lanes in batches).
    ready: u64,
}

impl Submitter {
    fn new(g: Arc<Graph>, granules: usize) -> Submitter {
        let g_lanes = g.inboxes.len();
        Submitter {
            g,
            map: WriterMap::new(granules),
            next_task: 0,
            next_tensor: 0,
            written: vec![0; g_lanes],
            published: vec![0; g_lanes],
            ready: 0,
        }
    }

    fn begin(&mut self) {
        self.map.rep += 1;
        self.ready = 0;
        self.next_task = 0;
        self.next_tensor = 0;
    }

    fn submit(&mut self, body: Body, tensors: &[Tensor]) {
        let g = &*self.g;
        let t = self.next_task;
        self.next_task += 1;
        let task = &g.tasks[t as usize];
        task.fanin.store(BIAS, Ordering::Relaxed);
        task.head.store(EMPTY, Ordering::Relaxed);
        let start = self.next_tensor;
        // SAFETY: the task is not published yet: only this thread touches its arguments.
        unsafe { *task.args.get() = (start, tensors.len() as u32, body) };
        for l in g.extra_lines(t) {
            // SAFETY: as the arguments: the task's own lines, before it is published.
            unsafe { std::ptr::write_bytes(l.get(), 0, 1) };
        }
        let mut live = 0;
        for x in tensors {
            let at = self.next_tensor as usize;
            self.next_tensor += 1;
            // SAFETY: arena entries past `next_tensor` are this thread's until published.
            unsafe { *g.arena[at].get() = *x };
            let lo = (x.data as u64).checked_add(x.offset).expect("view extent");
            lo.checked_add(x.shape[0]).expect("view extent");
            let key = lo >> 6;
            let rep = self.map.rep;
            let e = self.map.probe(key);
            let writer = (e.1 == rep).then_some(e.2);
            if x.tag != TAG_INPUT {
                *e = (key, rep, t);
            }
            if x.tag != TAG_OUTPUT {
                if let Some(w) = writer {
                    live += u32::from(link(g, w, t, at));
                }
            }
        }
        // With no producer linked nobody else holds the task: it is ready without an atomic.
        if live == 0 || task.fanin.fetch_sub(BIAS - live, Ordering::AcqRel) == BIAS - live {
            self.push_ready(t);
        }
    }

    /// Hand a task ready at its submit to a lane: batches of INBOX_BATCH, round robin.
    fn push_ready(&mut self, t: u32) {
        let l = (self.ready / INBOX_BATCH) as usize % self.written.len();
        self.ready += 1;
        let inbox = &self.g.inboxes[l];
        inbox.at(self.written[l]).store(t, Ordering::Relaxed);
        self.written[l] += 1;
        if self.written[l] - self.published[l] >= INBOX_BATCH {
            self.publish(l);
        }
    }

    fn publish(&mut self, l: usize) {
        self.published[l] = self.written[l];
        self.g.inboxes[l]
            .tail
            .0
            .store(self.written[l], Ordering::Release);
    }

    /// Time one rep: `build` submits the graph; returns first submission to last completion.
    fn timed(&mut self, tasks: u64, build: impl FnOnce(&mut Submitter)) -> u64 {
        self.begin();
        let base = self.g.finished();
        let t0 = Instant::now();
        build(self);
        for l in 0..self.written.len() {
            self.publish(l);
        }
        while self.g.finished() - base < tasks {
            std::thread::yield_now();
        }
        t0.elapsed().as_nanos() as u64
    }
}

/// Link consumer `c` onto writer `w`'s list with edge `e`; false if `w` already finished.
fn link(g: &Graph, w: u32, c: u32, e: usize) -> bool {
    let head = &g.tasks[w as usize].head;
    let edge = g.edges[e].get();
    let mut h = head.load(Ordering::Acquire);
    loop {
        if h == CLOSED {
            return false;
        }
        // SAFETY: edge `e` (one per tensor) is this thread's until the CAS publishes it.
        unsafe {
            *edge = Edge {
                consumer: c,
                next: h,
            }
        };
        match head.compare_exchange_weak(h, e as u32, Ordering::Release, Ordering::Acquire) {
            Ok(_) => return true,
            Err(now) => h = now,
        }
    }
}

fn tensor(p: *mut u8, tag: u32) -> Tensor {
    Tensor {
        data: p.cast(),
        offset: 0,
        ndim: 1,
        dtype: 0,
        tag,
        reserved: 0,
        shape: [64, 0, 0, 0, 0],
        strides: [0; 5],
    }
}

/// n zeroed, 64-byte aligned 64-byte buffers.
struct Bufs {
    p: *mut u8,
    n: usize,
}

impl Bufs {
    fn new(n: usize) -> Bufs {
        let layout = Layout::from_size_align(n * 64, 64).expect("layout");
        // SAFETY: non-zero size.
        let p = unsafe { alloc_zeroed(layout) };
        assert!(!p.is_null(), "out of memory");
        Bufs { p, n }
    }
    fn at(&self, i: usize) -> *mut u8 {
        assert!(i < self.n);
        // SAFETY: in bounds.
        unsafe { self.p.add(i * 64) }
    }
    fn byte(&self, i: usize) -> u8 {
        // SAFETY: in bounds; read between reps, when every task finished (the spin on the
        // lanes' Release counters in `timed` ordered their writes before this).
        unsafe { std::ptr::read_volatile(self.at(i)) }
    }
    fn zero(&self) {
        // SAFETY: the whole allocation, between reps.
        unsafe { std::ptr::write_bytes(self.p, 0, self.n * 64) };
    }
}

impl Drop for Bufs {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe {
            dealloc(
                self.p,
                Layout::from_size_align(self.n * 64, 64).expect("layout"),
            )
        };
    }
}

/// Start `lanes` lane threads on a graph sized for `tasks` tasks and `tensors` tensors, run
/// `reps` (plus a warm-up) of `one`, stop the lanes.
fn with_lanes(
    o: &Opts,
    tasks: usize,
    tensors: usize,
    mut one: impl FnMut(&mut Submitter) -> u64,
) -> Vec<u64> {
    let (lanes, reps) = (o.lanes, o.reps);
    let g = Arc::new(Graph::new(tasks, tensors, o));
    let deques: Vec<Deque<u32>> = (0..lanes).map(|_| Deque::new_lifo()).collect();
    let stealers = Arc::new(deques.iter().map(Deque::stealer).collect::<Vec<_>>());
    let threads: Vec<_> = deques
        .into_iter()
        .enumerate()
        .map(|(i, d)| {
            let (g, s) = (g.clone(), stealers.clone());
            std::thread::spawn(move || lane(g, i, d, s))
        })
        .collect();
    let mut s = Submitter::new(g.clone(), tensors);
    one(&mut s);
    let samples = (0..reps).map(|_| one(&mut s)).collect();
    g.stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("lane");
    }
    samples
}

pub fn w1(o: &Opts) -> (usize, Vec<u64>) {
    let n = o.n.unwrap_or(W1_N);
    let b = Bufs::new(n);
    let s = with_lanes(o, n, n, |s| {
        b.zero();
        let ns = s.timed(n as u64, |s| {
            for i in 0..n {
                s.submit(Body::Set, &[tensor(b.at(i), TAG_OUTPUT)]);
            }
        });
        assert!((0..n).all(|i| b.byte(i) == 1), "W1: a task did not run");
        ns
    });
    (n, s)
}

pub fn w2(o: &Opts) -> (usize, Vec<u64>) {
    let n = o.n.unwrap_or(W2_N);
    let b = Bufs::new(1);
    let s = with_lanes(o, n, n, |s| {
        b.zero();
        let ns = s.timed(n as u64, |s| {
            for _ in 0..n {
                s.submit(Body::Inc, &[tensor(b.at(0), TAG_INOUT)]);
            }
        });
        assert_eq!(b.byte(0), n as u8, "W2: chain result wrong");
        ns
    });
    (n, s)
}

pub fn w3(o: &Opts) -> (usize, Vec<u64>) {
    let n = o.n.unwrap_or(W3_N);
    let b = Bufs::new(n + 2);
    let mut red = Vec::with_capacity(n + 1);
    let s = with_lanes(o, n + 2, 1 + 2 * n + n + 1, |s| {
        b.zero();
        let ns = s.timed(n as u64 + 2, |s| {
            s.submit(Body::Set, &[tensor(b.at(0), TAG_OUTPUT)]);
            for i in 0..n {
                let t = [tensor(b.at(0), TAG_INPUT), tensor(b.at(1 + i), TAG_OUTPUT)];
                s.submit(Body::Copy, &t);
            }
            red.clear();
            red.push(tensor(b.at(n), TAG_INPUT));
            red.extend((0..n - 1).map(|i| tensor(b.at(1 + i), TAG_INPUT)));
            red.push(tensor(b.at(n + 1), TAG_OUTPUT));
            s.submit(Body::Copy, &red);
        });
        assert!((1..=n).all(|i| b.byte(i) == 1), "W3: a consumer ran early");
        assert_eq!(b.byte(n + 1), 1, "W3: reducer ran before the last consumer");
        ns
    });
    (n + 2, s)
}

pub fn w4(o: &Opts) -> (usize, Vec<u64>) {
    let layers = o.layers.unwrap_or(W4_L);
    let n = W4_W * layers;
    let b = Bufs::new(n);
    let mut g4 = None;
    let s = with_lanes(o, n, 4 * n, |s| {
        b.zero();
        s.g.w4_base.store(b.p as u64, Ordering::Relaxed);
        g4 = Some(s.g.clone());
        s.timed(n as u64, |s| {
            for i in 0..W4_W {
                s.submit(Body::Stencil, &[tensor(b.at(i), TAG_OUTPUT)]);
            }
            for l in 1..layers {
                let (prev, cur) = ((l - 1) * W4_W, l * W4_W);
                for i in 0..W4_W {
                    let t = [
                        tensor(b.at(prev + i.saturating_sub(1)), TAG_INPUT),
                        tensor(b.at(prev + i), TAG_INPUT),
                        tensor(b.at(prev + (i + 1).min(W4_W - 1)), TAG_INPUT),
                        tensor(b.at(cur + i), TAG_OUTPUT),
                    ];
                    s.submit(Body::Stencil, &t);
                }
            }
        })
    });
    let bad = g4.map_or(0, |g| g.w4_violations.load(Ordering::Relaxed));
    assert_eq!(bad, 0, "W4: {bad} inputs read before their producer ran");
    (n, s)
}

/// One measurement's settings.
pub struct Opts {
    pub lanes: usize,
    pub reps: usize,
    pub slot_bytes: usize,
    /// W1/W2 task count and W3 consumer count (default the workloads').
    pub n: Option<usize>,
    /// W4 layer count (default the workload's).
    pub layers: Option<usize>,
}
