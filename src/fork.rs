//! Fork hygiene (Orchestrator seed §8c): thread-pool environment defaults, the pthread_atfork
//! handlers, and the fork generation that tells a forked child's copy of a worker from one of
//! its own.
//!
//! A child of fork() has one thread: the lanes and scheduler thread of a worker initialised
//! before the fork were not copied, so that worker is refused there (`Worker::check_process`).
//! The process-wide locks (callable registry, log hook, live run ids) are taken around the
//! fork so that the child never inherits one held by a thread it does not have: a child may
//! register callables and build workers of its own.

use std::any::Any;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

/// Bumped in every forked child before it runs anything: a worker initialised under an
/// earlier generation belongs to an ancestor process.
static GENERATION: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// The process-wide locks `prepare` took, released (in reverse) by `parent` / `child` on
    /// the same thread, which is the forking one in both processes.
    static HELD: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
}

/// The process's fork generation (0 in a process no dagrt fork handler ran in).
pub fn generation() -> u32 {
    GENERATION.load(Ordering::Relaxed)
}

/// Take the process-wide locks in the seed's order (callable registry first, coarse to
/// fine), so that none is held across the fork point by a thread the child will not have.
/// Per-worker locks are not taken: a child never uses a worker from before the fork.
extern "C" fn prepare() {
    let mut held: Vec<Box<dyn Any>> = vec![crate::callable::hold_for_fork()];
    // A fork from inside the log hook holds its read side already: the child's copy of this
    // thread releases it when the hook returns, as the parent's does.
    held.extend(crate::log::hold_for_fork());
    held.push(crate::run::hold_for_fork());
    // (A thread past its thread-locals' teardown cannot keep them: they are released now.)
    let _ = HELD.try_with(|h| *h.borrow_mut() = held);
}

fn release() {
    let _ = HELD.try_with(|h| {
        let mut held = h.borrow_mut();
        while held.pop().is_some() {}
    });
}

extern "C" fn parent() {
    release();
}

extern "C" fn child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
    release();
}

/// Register the fork handlers, once per process: before any dagrt lock can be taken (the
/// process-wide locks' first use calls this).
pub fn register_once() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: three handlers with static lifetime, which only take and release locks.
        unsafe {
            libc::pthread_atfork(Some(prepare), Some(parent), Some(child));
        }
    });
}

/// Environment defaults that keep transitively linked thread pools from starting threads a
/// forked lane would inherit; user-supplied values win (seed §8c). Run by the first worker
/// init.
pub fn hygiene_once() {
    register_once();
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // set_var races a concurrent getenv/setenv in another thread of the process (glibc's
        // environ is unsynchronized): it runs once, in the first worker init, and the header
        // says so (hosts that read the environment from other threads set these first).
        for (k, v) in [
            ("OMP_NUM_THREADS", "1"),
            ("OPENBLAS_NUM_THREADS", "1"),
            ("MKL_NUM_THREADS", "1"),
            ("BLIS_NUM_THREADS", "1"),
        ] {
            if std::env::var_os(k).is_none() {
                std::env::set_var(k, v);
            }
        }
    });
}
