//! The floor bench's runtime (`benches/floor/runtime.rs`), compiled here so that its workloads
//! run with the other tests, at small sizes: each rep checks its results the way the workloads
//! bench checks dagrt's (every task ran, and after its producers: W3's consumers copy the
//! producer's byte, W4's tasks check their three inputs' layer tags), and panics otherwise.

#[path = "../benches/common/buffers.rs"]
mod buffers;
#[path = "../benches/floor/runtime.rs"]
mod runtime;
#[path = "../benches/floor/submit.rs"]
mod submit;
#[path = "../benches/floor/workloads.rs"]
mod workloads;

use workloads::{w1, w2, w3, w4, Opts};

/// Every workload, on 1 and 2 lanes, bare and with each cost added back (with `--hop`, the
/// scheduler thread releases the consumers and places the tasks instead of the lanes).
#[test]
fn every_workload_runs_in_dependency_order_on_one_and_two_lanes() {
    for lanes in [1, 2] {
        for (slot_bytes, locks, hop) in
            [(0, 0, false), (100, 0, false), (0, 2, false), (0, 0, true)]
        {
            let o = Opts {
                lanes,
                reps: 3,
                n: Some(3000),
                layers: Some(60),
                slot_bytes,
                locks,
                hop,
            };
            let runs = [
                ("W1", w1(&o), 3000),
                ("W2", w2(&o), 3000),
                ("W3", w3(&o), 3002),
                ("W4", w4(&o), 64 * 60),
            ];
            for (w, (tasks, samples), want) in runs {
                assert_eq!(tasks, want, "{w}: task count");
                assert_eq!(samples.len(), 3, "{w}: one sample per timed rep");
                assert!(samples.iter().all(|&ns| ns > 0), "{w}: {samples:?}");
            }
        }
    }
}
