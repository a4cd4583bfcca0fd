//! The floor's workloads W1-W4, with the peers' definitions and the workloads bench's checks
//! (see `benches/floor.rs`), and the options of a measurement.

use super::buffers::{
    tensor, Bufs, TAG_INOUT, TAG_INPUT, TAG_OUTPUT, W1_N, W2_N, W3_N, W4_L, W4_W,
};
use super::runtime::{hop_lane, lane, scheduler, Body, Graph};
use super::submit::Submitter;
use crossbeam_deque::Worker as Deque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One measurement's settings.
pub struct Opts {
    pub lanes: usize,
    pub reps: usize,
    /// W1/W2 task count and W3 consumer count (default the workloads').
    pub n: Option<usize>,
    /// W4 layer count (default the workload's).
    pub layers: Option<usize>,
    /// Costs added back (`benches/floor.rs`): extra bytes per task, mutex pairs per submit and
    /// per completion, and a scheduler role between the submitter and the lanes.
    pub slot_bytes: usize,
    pub locks: usize,
    pub hop: bool,
}

/// Start the lanes (and with `--hop` the scheduler role's thread) on a graph sized for `tasks` tasks
/// and `tensors` tensors, run `o.reps` (plus a warm-up) of `one`, stop the threads.
fn with_lanes(
    o: &Opts,
    tasks: usize,
    tensors: usize,
    mut one: impl FnMut(&mut Submitter) -> u64,
) -> Vec<u64> {
    let g = Arc::new(Graph::new(tasks, tensors, o));
    let mut threads = Vec::new();
    if o.hop {
        for i in 0..o.lanes {
            let g = g.clone();
            threads.push(std::thread::spawn(move || hop_lane(g, i)));
        }
        let g2 = g.clone();
        threads.push(std::thread::spawn(move || scheduler(g2)));
    } else {
        let deques: Vec<Deque<u32>> = (0..o.lanes).map(|_| Deque::new_lifo()).collect();
        let stealers = Arc::new(deques.iter().map(Deque::stealer).collect::<Vec<_>>());
        for (i, d) in deques.into_iter().enumerate() {
            let (g, s) = (g.clone(), stealers.clone());
            threads.push(std::thread::spawn(move || lane(g, i, d, s)));
        }
    }
    let mut s = Submitter::new(g.clone(), tensors);
    one(&mut s);
    let samples = (0..o.reps).map(|_| one(&mut s)).collect();
    g.stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("floor thread");
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
    let s = with_lanes(o, n, 4 * n, |s| {
        b.zero();
        s.g.w4_base.store(b.p as u64, Ordering::Relaxed);
        let ns = s.timed(n as u64, |s| {
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
        });
        let bad = s.g.w4_violations.load(Ordering::Relaxed);
        assert_eq!(bad, 0, "W4: {bad} inputs read before their producer ran");
        ns
    });
    (n, s)
}
