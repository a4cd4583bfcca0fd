//! The loom test targets' shared runner (`mod loom_model;` in `tests/loom_*.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Check `f` under loom with `bound` preemptions (`LOOM_MAX_PREEMPTIONS` overrides it) and
/// print how many executions it explored.
pub fn model<F>(bound: Option<usize>, f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut b = loom::model::Builder::new();
    if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_none() {
        b.preemption_bound = bound;
    }
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    b.check(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        f()
    });
    eprintln!(
        "{} executions explored (preemption bound {:?})",
        runs.load(Ordering::Relaxed),
        b.preemption_bound
    );
}
