//! The workloads bench's per-thread CPU accounting (`benches/workloads/thread_cpu.rs`),
//! compiled here so its tests run with the others (the bench has no test harness).

#[path = "../benches/workloads/thread_cpu.rs"]
mod thread_cpu;

use std::collections::BTreeMap;
use thread_cpu::{add, between, json_fields, role, snapshot, Snapshot, Use};

fn snap(threads: &[(i32, &str, u64, u64)]) -> Snapshot {
    Snapshot(
        threads
            .iter()
            .map(|&(t, r, run, wait)| (t, (r.to_string(), Use { run, wait })))
            .collect(),
    )
}

#[test]
fn roles_sum_their_threads_deltas() {
    let a = snap(&[(1, "submit", 100, 10), (2, "lane-0", 50, 5)]);
    let b = snap(&[
        (1, "submit", 300, 30),
        (2, "lane-0", 150, 5),
        (3, "lane-0", 20, 2),
    ]);
    let d = between(&a, &b);
    assert_eq!((d["submit"].run, d["submit"].wait), (200, 20));
    // The thread born between the snapshots counts from zero.
    assert_eq!((d["lane-0"].run, d["lane-0"].wait), (120, 2));
    let mut sum = BTreeMap::new();
    add(&mut sum, &d);
    add(&mut sum, &d);
    let s = json_fields(&sum, 20.0);
    assert!(
        s.contains("\"cpu_ns_per_task\":{\"lane-0\":12.0,\"submit\":20.0}"),
        "{s}"
    );
    assert!(
        s.contains("\"runqueue_wait_ns_per_task\":{\"lane-0\":0.2,\"submit\":2.0}"),
        "{s}"
    );
    assert!(s.contains("\"cpu_total_ns_per_task\":32.0"), "{s}");
    assert_eq!(json_fields(&BTreeMap::new(), 1.0), "");
    assert_eq!(role(false, "dagrt-scheduler"), "scheduler");
    assert_eq!(role(true, "workloads-1234"), "submit");
    assert_eq!(role(false, "other"), "other");
}

/// The kernel's accounting, read for real: a thread named as a lane spins for 20 ms of
/// its own CPU time between two snapshots.
#[test]
fn a_spinning_thread_shows_its_cpu_time() {
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() };
    let before = snapshot(me).expect("/proc/self/task/*/schedstat is readable");
    assert_eq!(before.0[&me].0, "submit");
    let (spun, done_spinning) = std::sync::mpsc::channel();
    let (may_end, end) = std::sync::mpsc::channel::<()>();
    let t = std::thread::Builder::new()
        .name("dagrt-lane-0".into())
        .spawn(move || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            let mut cpu = || {
                // SAFETY: ts is a valid timespec to write.
                unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
                ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
            };
            let t0 = cpu();
            while cpu() - t0 < 20_000_000 {
                std::hint::spin_loop();
            }
            spun.send(()).unwrap();
            // Alive until the second snapshot has read it.
            end.recv().unwrap();
        })
        .unwrap();
    done_spinning.recv().unwrap();
    let after = snapshot(me).unwrap();
    may_end.send(()).unwrap();
    t.join().unwrap();
    let d = between(&before, &after);
    let lane = d["lane-0"].run;
    assert!(lane >= 15_000_000, "lane-0 ran {lane} ns, spun 20 ms");
}
