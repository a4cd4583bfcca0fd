//! Synchronisation primitives, swapped for `loom`'s under `--cfg loom` so the slot protocol
//! (publication rule, failure claim), the SPSC handoffs and the wake-up `Event` can be
//! model-checked with the code that ships.

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering,
};
#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(loom)]
pub(crate) use loom::thread::yield_now;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::thread::yield_now;

/// Lock a mutex, ignoring poisoning: every critical section in dagrt leaves its data
/// consistent before anything that can panic, so a poisoned lock carries valid state.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// `std::cell::UnsafeCell` with loom's access API (`with`, `with_mut`), so code that uses it
/// runs unchanged under loom, which then checks every access against the model's ordering.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(v: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(v))
    }

    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
