//! Where a run's CPU goes, by thread: the kernel's per-thread accounting
//! (`/proc/self/task/<tid>/schedstat`: time on a CPU and time runnable but waiting for one,
//! in ns), read before and after each timed run.
//!
//! On a machine with fewer cores than the engine has threads (2 cores here; the submitting
//! thread, the scheduler thread and 2 lanes), the wall time per task says which side is
//! slower only together with these: a thread that is runnable and waiting has work, or is
//! a waiter spinning in the way of one that has; and the CPU every thread used, summed, is
//! what the cores had to give per task.

use std::collections::BTreeMap;

/// CPU time and run-queue wait of one thread, in ns.
#[derive(Clone, Copy, Default)]
pub struct Use {
    pub run: u64,
    pub wait: u64,
}

/// Every thread of the process at one moment, by thread id: its role and its use so far.
pub struct Snapshot(pub BTreeMap<i32, (String, Use)>);

/// The process's threads now; `main` (a thread id) is the submitting thread. `None` if the
/// kernel does not keep the accounting (no `schedstat` files).
pub fn snapshot(main: i32) -> Option<Snapshot> {
    let mut all = BTreeMap::new();
    for d in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(d) = d else { continue };
        let Some(tid) = d.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        // A thread that ended between the listing and the reads is left out.
        let (Ok(stat), Ok(comm)) = (
            std::fs::read_to_string(d.path().join("schedstat")),
            std::fs::read_to_string(d.path().join("comm")),
        ) else {
            continue;
        };
        let mut f = stat.split_whitespace().map(|x| x.parse::<u64>());
        let (Some(Ok(run)), Some(Ok(wait))) = (f.next(), f.next()) else {
            return None;
        };
        all.insert(tid, (role(tid == main, comm.trim()), Use { run, wait }));
    }
    (!all.is_empty()).then_some(Snapshot(all))
}

/// A thread's name in the output: `submit`, `scheduler`, `lane-K`, or its own name.
pub fn role(main: bool, comm: &str) -> String {
    if main {
        return "submit".into();
    }
    match comm.strip_prefix("dagrt-") {
        Some(r) => r.into(),
        None => comm.into(),
    }
}

/// Use between two snapshots, summed by role (threads that did not exist before count from
/// zero).
pub fn between(before: &Snapshot, after: &Snapshot) -> BTreeMap<String, Use> {
    let mut by_role: BTreeMap<String, Use> = BTreeMap::new();
    for (tid, (r, now)) in &after.0 {
        let was = before.0.get(tid).map_or(Use::default(), |x| x.1);
        let u = by_role.entry(r.clone()).or_default();
        u.run += now.run.saturating_sub(was.run);
        u.wait += now.wait.saturating_sub(was.wait);
    }
    by_role
}

/// Add `x` into `sum`, role by role.
pub fn add(sum: &mut BTreeMap<String, Use>, x: &BTreeMap<String, Use>) {
    for (r, u) in x {
        let s = sum.entry(r.clone()).or_default();
        s.run += u.run;
        s.wait += u.wait;
    }
}

/// The JSON fields for `sum` over `tasks` tasks: `cpu_ns_per_task` and
/// `runqueue_wait_ns_per_task` by role, and `cpu_total_ns_per_task`, the CPU of all threads
/// together. Empty when there was no accounting.
pub fn json_fields(sum: &BTreeMap<String, Use>, tasks: f64) -> String {
    if sum.is_empty() {
        return String::new();
    }
    let obj = |f: fn(&Use) -> u64| {
        let items: Vec<String> = sum
            .iter()
            .map(|(r, u)| format!("\"{r}\":{:.1}", f(u) as f64 / tasks))
            .collect();
        format!("{{{}}}", items.join(","))
    };
    let total: u64 = sum.values().map(|u| u.run).sum();
    format!(
        ",\"cpu_ns_per_task\":{},\"runqueue_wait_ns_per_task\":{},\"cpu_total_ns_per_task\":{:.1}",
        obj(|u| u.run),
        obj(|u| u.wait),
        total as f64 / tasks
    )
}
