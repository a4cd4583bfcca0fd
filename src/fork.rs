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

/// What `prepare` took, released by `parent` / `child` on the same thread (the forking one,
/// in both processes).
struct Held {
    hook: crate::log::ForkHold,
    /// In the order taken; released in reverse.
    locks: Vec<Box<dyn Any>>,
}

thread_local! {
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
}

/// The process's fork generation (0 in a process no dagrt fork handler ran in).
pub fn generation() -> u32 {
    GENERATION.load(Ordering::Relaxed)
}

/// Take the process-wide locks so that none is held across the fork point by a thread the
/// child will not have: the log hook's first, without waiting (it is held across the host's
/// hook code: see `log::hold_for_fork`), then the seed's order, coarse to fine (callable
/// registry, then the live run ids). No dagrt code holds one of the latter two while taking
/// another lock, so waiting for them here cannot close a cycle. Per-worker locks are not
/// taken: a child never uses a worker from before the fork.
extern "C" fn prepare() {
    let hook = crate::log::hold_for_fork();
    let locks = vec![
        crate::callable::hold_for_fork(),
        crate::run::hold_for_fork(),
    ];
    // (A thread past its thread-locals' teardown cannot keep them: they are released now.)
    let _ = HELD.try_with(|h| *h.borrow_mut() = Some(Held { hook, locks }));
}

fn take() -> Option<Held> {
    HELD.try_with(|h| h.borrow_mut().take()).ok().flatten()
}

fn release_locks(held: &mut Held) {
    while held.locks.pop().is_some() {}
}

extern "C" fn parent() {
    if let Some(mut held) = take() {
        release_locks(&mut held);
    }
}

extern "C" fn child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
    if let Some(mut held) = take() {
        release_locks(&mut held);
        crate::log::after_fork_in_child(held.hook);
    }
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
