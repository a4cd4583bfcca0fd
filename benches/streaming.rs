//! Streaming benchmark: N empty tasks through a small task window in one run, ending a
//! nested scope every `batch` tasks so slots are reclaimed as the stream goes. Reports peak
//! RSS (VmHWM) after 1M and 10M tasks, one JSON object per checkpoint:
//!
//!     cargo bench --bench streaming -- [--tasks 10000000] [--window 1024] [--batch 256]
//!
//! Peak memory must stay flat: the slot table, the TensorMap and the heap rings are bounded
//! by the window, not by the number of tasks streamed.

mod common;

use dagrt::orchestrator::SubmitKind;
use dagrt::task::{CallConfig, DataType, Tag, TaskArgs, TaskView, Tensor};
use dagrt::worker::WorkerConfig;
use std::ffi::c_void;
use std::time::Instant;

unsafe extern "C" fn touch(t: *const TaskView, _u: *mut c_void) -> i32 {
    // SAFETY: the view and its single tensor (a live 64-byte buffer) are valid during the call.
    unsafe {
        let p = (*(*t).tensors).data as *mut u8;
        p.write_volatile(p.read_volatile().wrapping_add(1));
    }
    0
}

fn status_kb(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    common::exit_on_help(include_str!("streaming.rs"));
    let mut tasks: u64 = 10_000_000;
    let mut window: u32 = 1024;
    let mut batch: u64 = 256;
    for (flag, v) in common::flag_pairs() {
        match (flag.as_str(), v.parse::<u64>().ok()) {
            ("--tasks", Some(v)) => tasks = v,
            ("--window", Some(v)) => window = v as u32,
            ("--batch", Some(v)) => batch = v.max(1),
            (a, _) => panic!("unknown or incomplete argument {a}"),
        }
    }
    let cfg = WorkerConfig {
        task_window: window,
        heap_ring_size: 1 << 24,
        timeout_ms: 60_000,
    };
    let (w, c) = common::sub_worker(cfg, 2, "streaming.touch", touch);
    // 64 buffers reused round-robin: OUTPUT on each, so consecutive writers of one buffer
    // replace each other in the TensorMap.
    let mut bufs = vec![[0u8; 64]; 64];
    let rss0 = status_kb("VmRSS:");
    let start = Instant::now();
    let mut o = w.orchestrator().unwrap().lock().unwrap();
    let run = o.begin_run().unwrap();
    let checkpoints = [1_000_000u64, 10_000_000];
    let mut shape = [0u64; 5];
    shape[0] = 64;
    for n in 0..tasks {
        if n % batch == 0 {
            if n > 0 {
                o.scope_end().unwrap();
            }
            o.scope_begin().unwrap();
        }
        let b = &mut bufs[(n % 64) as usize];
        let mut t = [Tensor {
            data: b.as_mut_ptr().cast(),
            offset: 0,
            ndim: 1,
            dtype: DataType::U8 as u32,
            tag: Tag::Output as u32,
            reserved: 0,
            shape,
            strides: [0; 5],
        }];
        let a = TaskArgs::of_tensors(&mut t);
        o.submit(SubmitKind::Sub, &c, &[a], &CallConfig::default(), &[])
            .unwrap();
        let done = n + 1;
        if checkpoints.contains(&done) || done == tasks {
            let e = o.engine();
            println!(
                "{{\"bench\":\"streaming\",\"tasks\":{done},\"window\":{window},\"batch\":{batch},\"lanes\":2,\
                 \"peak_rss_kb\":{},\"rss_kb\":{},\"rss_at_start_kb\":{rss0},\"live_slots\":{},\
                 \"tensormap_entries\":{},\"seconds\":{:.3},\"ns_per_task\":{:.1}}}",
                status_kb("VmHWM:"),
                status_kb("VmRSS:"),
                e.slots.live(),
                e.tensormap.len(),
                start.elapsed().as_secs_f64(),
                start.elapsed().as_nanos() as f64 / done as f64
            );
        }
    }
    o.scope_end().unwrap();
    o.close_run_submission(run).unwrap();
    let e = o.engine().clone();
    drop(o);
    assert!(e.runs.get(run).unwrap().wait(None));
    assert_eq!(e.runs.get(run).unwrap().counts().completed, tasks);
    assert_eq!(e.slots.live(), 0);
    assert_eq!(e.tensormap.len(), 0);
}
