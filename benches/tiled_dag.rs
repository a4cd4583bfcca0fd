//! Tiled-DAG benchmark: the tiled Cholesky's graph (POTRF, TRSM, SYRK, GEMM over the lower
//! tiles of one column-major matrix, dependencies from INPUT / INOUT tags on tile views
//! only) with empty tasks, so what is measured is the runtime's cost per task on a graph of
//! 2-D views: the TensorMap's overlap search over tiles, not kernels. One JSON object per
//! tile size:
//!
//!     cargo bench --bench tiled_dag -- [--n 1024] [--b 16,32,64] [--reps 5] [--lanes 2]
//!
//! `submit_ns_per_task`: first submit to the return of close_run_submission (the
//! orchestrator's share); `ns_per_task`: first submit to the run's completion. Medians, and
//! min / max, over the reps (after one warm-up run).

mod common;

use dagrt::callable::Callable;
use dagrt::orchestrator::{Orchestrator, SubmitKind};
use dagrt::task::{CallConfig, DataType, Tag, TaskArgs, TaskView, Tensor};
use dagrt::worker::WorkerConfig;
use std::ffi::c_void;
use std::time::Instant;

unsafe extern "C" fn empty(_t: *const TaskView, _u: *mut c_void) -> i32 {
    0
}

struct Dag {
    base: *mut c_void,
    n: u64,
    b: u64,
}

impl Dag {
    fn tile(&self, i: u64, j: u64, tag: Tag) -> Tensor {
        let (n, b) = (self.n, self.b);
        Tensor::strided(
            self.base,
            (j * b * n + i * b) * 8,
            DataType::F64,
            &[b, b],
            &[1, n],
            tag as u32,
        )
    }

    /// Submit the whole graph; returns the task count.
    fn build(&self, o: &mut Orchestrator, c: &Callable) -> u64 {
        let nt = self.n / self.b;
        let mut count = 0;
        let mut submit = |t: &mut [Tensor]| {
            let a = TaskArgs::of_tensors(t);
            o.submit(SubmitKind::Sub, c, &[a], &CallConfig::default(), &[])
                .expect("submit");
            count += 1;
        };
        for k in 0..nt {
            submit(&mut [self.tile(k, k, Tag::Inout)]);
            for m in k + 1..nt {
                submit(&mut [self.tile(k, k, Tag::Input), self.tile(m, k, Tag::Inout)]);
            }
            for m in k + 1..nt {
                submit(&mut [self.tile(m, k, Tag::Input), self.tile(m, m, Tag::Inout)]);
                for j in k + 1..m {
                    submit(&mut [
                        self.tile(m, k, Tag::Input),
                        self.tile(j, k, Tag::Input),
                        self.tile(m, j, Tag::Inout),
                    ]);
                }
            }
        }
        count
    }
}

/// Median, min and max of `v` (not empty).
fn spread(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    common::exit_on_help(include_str!("tiled_dag.rs"));
    let mut n: u64 = 1024;
    let mut sizes: Vec<u64> = vec![16, 32, 64];
    let mut reps = 5;
    let mut lanes = 2;
    for (flag, v) in common::flag_pairs() {
        match flag.as_str() {
            "--n" => n = v.parse().expect("--n N"),
            "--b" => {
                sizes = v
                    .split(',')
                    .map(|s| s.parse().expect("--b B,..."))
                    .collect()
            }
            "--reps" => reps = v.parse::<usize>().expect("--reps R").max(1),
            "--lanes" => lanes = v.parse().expect("--lanes L"),
            a => panic!("unknown argument {a}"),
        }
    }
    let cfg = WorkerConfig {
        task_window: 1 << 20,
        heap_ring_size: 1 << 20,
        timeout_ms: 60_000,
    };
    let (w, c) = common::sub_worker(cfg, lanes, "tiled_dag.empty", empty);
    // The tasks never touch it: untouched pages of a zeroed allocation cost nothing.
    let mut matrix = vec![0f64; (n * n) as usize];
    for &b in &sizes {
        assert!(b > 0 && n % b == 0, "--b {b} must divide --n {n}");
        let dag = Dag {
            base: matrix.as_mut_ptr().cast(),
            n,
            b,
        };
        let (mut submit, mut total) = (Vec::new(), Vec::new());
        let mut tasks = 0;
        for rep in 0..=reps {
            let mut o = w.orchestrator().expect("orchestrator").lock().unwrap();
            let start = Instant::now();
            let run = o.begin_run().expect("begin_run");
            tasks = dag.build(&mut o, &c);
            o.close_run_submission(run).expect("close");
            let submitted = start.elapsed();
            let e = o.engine().clone();
            drop(o);
            let r = e.runs.get(run).expect("run");
            assert!(r.wait(None), "run {run} did not finish");
            let done = start.elapsed();
            assert_eq!(r.counts().completed, tasks);
            assert!(e.runs.remove_done(run));
            if rep > 0 {
                submit.push(submitted.as_nanos() as f64 / tasks as f64);
                total.push(done.as_nanos() as f64 / tasks as f64);
            }
        }
        let (smed, smin, smax) = spread(&mut submit);
        let (tmed, tmin, tmax) = spread(&mut total);
        println!(
            "{{\"bench\":\"tiled_dag\",\"n\":{n},\"b\":{b},\"tiles_per_side\":{},\"tasks\":{tasks},\
             \"lanes\":{lanes},\"reps\":{reps},\"submit_ns_per_task_median\":{smed:.1},\
             \"submit_ns_per_task_min\":{smin:.1},\"submit_ns_per_task_max\":{smax:.1},\
             \"ns_per_task_median\":{tmed:.1},\"ns_per_task_min\":{tmin:.1},\"ns_per_task_max\":{tmax:.1}}}",
            n / b,
        );
    }
}
