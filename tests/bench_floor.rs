//! The floor bench's runtime (`benches/floor/runtime.rs`), compiled here so that its workloads
//! run with the other tests, at small sizes: each rep checks its results the way the workloads
//! bench checks dagrt's (every task ran, and after its producers: W3's consumers copy the
//! producer's byte, W4's tasks check their three inputs' layer tags), and panics otherwise.

#[allow(dead_code)]
#[path = "../benches/floor/runtime.rs"]
mod runtime;

use runtime::{w1, w2, w3, w4, Opts};

fn opts(lanes: usize, slot_bytes: usize) -> Opts {
    Opts {
        lanes,
        reps: 3,
        slot_bytes,
        n: Some(3000),
        layers: Some(60),
    }
}

#[test]
fn every_workload_runs_in_dependency_order_on_one_and_two_lanes() {
    for lanes in [1, 2] {
        for slot_bytes in [0, 100] {
            let o = opts(lanes, slot_bytes);
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
