//! The floor: what the per-task work every dependency-inferring runtime must do costs on this
//! machine, measured on the peer workloads W1-W4 with their definitions (see
//! /work/shared/bench/peers/README.md). Not dagrt: a minimal runtime written for this
//! measurement only, so that dagrt's figures and the targets can be read against what
//! the bare mechanism takes here.
//!
//!   cargo bench --bench floor [-- OPTIONS]
//!
//! Options (all optional):
//!   --workloads W1,W2,W3,W4   workloads to run (default all)
//!   --lanes 1,2               lane threads besides the submitting thread (default 1,2)
//!   --reps R                  timed repetitions (default 5; one untimed warm-up before them)
//!
//! Costs added back, one at a time or together (none is part of the floor; each is a way dagrt
//! is built, so that what it costs on this machine can be read off):
//!   --slot-bytes B            each task also owns B bytes (rounded up to lines) that its
//!                             submit clears and its lane reads a byte of per line, the way a
//!                             slot of 64 + B bytes is reset and read (dagrt's is 640: B = 576)
//!   --locks K                 K lock-unlock pairs of the task's mutex in its submit and K in
//!                             its completion (dagrt takes the orchestrator's and the
//!                             TensorMap's locks per submit, and the slot's `fanout_mu` at
//!                             publication, completion and release)
//!   --hop 1                   a scheduler role between the submitter and the lanes: tasks
//!                             ready at their submit go to it, lanes report each finished task
//!                             to it, and it releases the consumers and places every ready task;
//!                             a scheduler thread plays it, or a lane that finds it free after
//!                             a task (dagrt's topology; 2 lanes are then 4 threads, as in dagrt)
//!
//! What it does per task, and nothing else: the submitting thread copies the task's tensors
//! (`dagrt_tensor`s, 104 bytes each) into an append-only arena, takes each tensor's byte range
//! (a whole 1-D buffer: `[data + offset, + shape[0] * dtype size)`, one 64-byte granule in these
//! workloads), looks the granule up in an open-addressing writer map (INPUT, INOUT) and records
//! itself as its writer (OUTPUT, INOUT), links itself onto each live writer's consumer list (one
//! compare-and-swap), and publishes with one atomic subtraction (none when it linked onto no
//! producer): tasks ready at their submit go to the lanes' single-producer inboxes, round robin
//! in batches of 16. Lanes pop their own deque, then their inbox, then steal; a lane that
//! finishes a task closes its consumer list (one swap) and releases each consumer (one
//! decrement each), keeping the ones that became ready. Nothing else: no task window, no
//! scopes or references, no failure propagation, no groups or directed lanes, no strided views,
//! no scheduler thread, no parking (idle lanes spin and yield), no C boundary. Each of those is
//! a seed requirement or one of dagrt's own (a C ABI, idle threads that park), so dagrt cannot
//! go below these figures by tuning; how far below the peers they are says what a 2-core
//! machine allows.
//!
//! Output: one JSON object per (workload, lanes) on stdout, with `bench: "floor"`, the options
//! (`slot_bytes`, `locks`, `hop`), `threads`, `tasks`,
//! `ns_per_task_median` / `_min` / `_max` and `samples_ns`. Timing as in the peers and the
//! workloads bench: first submission to the last task's completion, divided by the task count,
//! median over the timed repetitions. Each rep's results are checked as the workloads bench
//! checks dagrt's (every task ran, after its producers).

#[path = "common/buffers.rs"]
mod buffers;
#[path = "floor/runtime.rs"]
mod runtime;
#[path = "floor/submit.rs"]
mod submit;
#[path = "floor/workloads.rs"]
mod workloads;
// (Only its `--help` and flag parsing: this bench builds no dagrt worker.)
#[allow(dead_code)]
mod common;

use workloads::{w1, w2, w3, w4, Opts};

fn main() {
    common::exit_on_help(include_str!("floor.rs"));
    let mut workloads: Vec<String> = ["W1", "W2", "W3", "W4"].map(String::from).to_vec();
    let mut lanes = vec![1, 2];
    let mut reps = 5;
    let (mut slot_bytes, mut locks, mut hop) = (0, 0, false);
    for (k, v) in common::flag_pairs() {
        match k.as_str() {
            "--workloads" => workloads = v.split(',').map(str::to_uppercase).collect(),
            "--lanes" => lanes = v.split(',').map(|x| x.parse().expect("--lanes")).collect(),
            "--reps" => reps = v.parse().expect("--reps"),
            "--slot-bytes" => slot_bytes = v.parse().expect("--slot-bytes"),
            "--locks" => locks = v.parse().expect("--locks"),
            "--hop" => hop = v == "1",
            _ => panic!("unknown option {k} (see --help)"),
        }
    }
    for w in &workloads {
        for &l in &lanes {
            let o = Opts {
                lanes: l,
                reps,
                n: None,
                layers: None,
                slot_bytes,
                locks,
                hop,
            };
            let (tasks, samples) = match w.as_str() {
                "W1" => w1(&o),
                "W2" => w2(&o),
                "W3" => w3(&o),
                "W4" => w4(&o),
                x => panic!("unknown workload {x}"),
            };
            let mut per: Vec<f64> = samples.iter().map(|&s| s as f64 / tasks as f64).collect();
            per.sort_by(f64::total_cmp);
            println!(
                "{}",
                serde_json::json!({
                    "bench": "floor",
                    "workload": w,
                    "lanes": l,
                    "threads": l + 1 + usize::from(hop),
                    "slot_bytes": slot_bytes,
                    "locks": locks,
                    "hop": hop,
                    "tasks": tasks,
                    "ns_per_task_median": per[per.len() / 2],
                    "ns_per_task_min": per[0],
                    "ns_per_task_max": per[per.len() - 1],
                    "samples_ns": samples,
                })
            );
        }
    }
}
