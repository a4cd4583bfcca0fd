//! The floor's submitting thread: the writer map, the submit and the timing of a rep (see
//! `benches/floor.rs`).

use super::buffers::{TAG_INPUT, TAG_OUTPUT};
use super::runtime::{Body, Edge, Graph, Tx, BATCH, CLOSED, EMPTY};
use dagrt::task::{dtype_size, Tensor};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// A task's fan-in while it is being submitted: the live producers are subtracted from it one
/// by one as they finish, and the submit subtracts `BIAS - live` when it publishes, so the
/// count reaches zero exactly once, after the last of the two.
const BIAS: u32 = 1 << 30;

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
pub struct Submitter {
    pub g: Arc<Graph>,
    map: WriterMap,
    next_task: u32,
    next_tensor: u32,
    /// Per lane (or, with `--hop`, to the scheduler role): the ring's producer end.
    tx: Vec<Tx>,
    /// Tasks ready at their submit so far in this rep (they go to the lanes BATCH at a time).
    ready: u64,
}

impl Submitter {
    pub fn new(g: Arc<Graph>, granules: usize) -> Submitter {
        let rings = if g.hop { 1 } else { g.inboxes.len() };
        Submitter {
            g,
            map: WriterMap::new(granules),
            next_task: 0,
            next_tensor: 0,
            tx: (0..rings).map(|_| Tx::default()).collect(),
            ready: 0,
        }
    }

    pub fn submit(&mut self, body: Body, tensors: &[Tensor]) {
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
        g.lock_pairs(t);
        let mut live = 0;
        for x in tensors {
            let at = self.next_tensor as usize;
            self.next_tensor += 1;
            // SAFETY: arena entries past `next_tensor` are this thread's until published.
            unsafe { *g.arena[at].get() = *x };
            // The view's bytes, checked as a submit checks them; the workloads' buffers are
            // one 64-byte granule each, so the first granule is the only one.
            let len = dtype_size(x.dtype)
                .and_then(|e| e.checked_mul(x.shape[0]))
                .expect("dtype");
            let lo = (x.data as u64).checked_add(x.offset).expect("view extent");
            let hi = lo.checked_add(len).expect("view extent");
            debug_assert_eq!(lo >> 6, (hi - 1) >> 6, "one granule per view");
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

    /// Hand a task ready at its submit on: to the lanes BATCH at a time round robin, or with
    /// `--hop` to the scheduler role (one ring).
    fn push_ready(&mut self, t: u32) {
        let l = (self.ready / BATCH) as usize % self.tx.len();
        self.tx[l].push(self.g.ready_ring(l), t, BATCH);
        self.ready += 1;
    }

    /// Time one rep: `build` submits the graph; returns first submission to last completion.
    pub fn timed(&mut self, tasks: u64, build: impl FnOnce(&mut Submitter)) -> u64 {
        self.map.rep += 1;
        (self.ready, self.next_task, self.next_tensor) = (0, 0, 0);
        let base = self.g.finished();
        let t0 = Instant::now();
        build(self);
        let g = &*self.g;
        for (l, tx) in self.tx.iter_mut().enumerate() {
            tx.flush(g.ready_ring(l));
        }
        while g.finished() - base < tasks {
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
