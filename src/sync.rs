//! Synchronisation primitives, swapped for `loom`'s under `--cfg loom` so the slot protocol
//! (publication rule, failure claim) can be model-checked with the code that ships.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU8, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU8, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// Lock a mutex, ignoring poisoning: every critical section in dagrt leaves its data
/// consistent before anything that can panic, so a poisoned lock carries valid state.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}
