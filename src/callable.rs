//! The callable registry: a stable name becomes an identity (a 32-byte SHA-256 digest plus
//! kind and namespace) that a lane resolves to its executor.
//!
//! The registry is per process, not per Worker: a forked lane inherits it and resolves the
//! same digest to the same function in its own address space. Entries are never removed, so a
//! resolved entry is `&'static` and the hot path never counts references.

use crate::task::TaskView;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::ffi::c_void;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{OnceLock, RwLock};

/// A leaf task executor. Returns 0 on success; any other value fails the task (with the
/// message given to `dagrt_task_fail`, if any).
/// NULL is rejected at registration. An exception must not escape it (a C++ exception
/// unwinding into dagrt aborts the process: catch it, call `dagrt_task_fail` and return
/// non-zero), nor may it `longjmp` out.
pub type ExecutorFn = Option<unsafe extern "C" fn(task: *const TaskView, user: *mut c_void) -> i32>;

/// A registered (non-null) executor.
pub type Executor = unsafe extern "C" fn(task: *const TaskView, user: *mut c_void) -> i32;

/// What a callable is.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallableKind {
    /// A leaf task run by a lane.
    Task = 0,
    /// An orchestration function (the callable of a nested worker).
    Orchestration = 1,
}

/// A callable's identity, as passed to every submit.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Callable {
    /// SHA-256 of (namespace, kind, name).
    pub digest: [u8; 32],
    /// A `dagrt_callable_kind` value.
    pub kind: u32,
    /// Namespace chosen at registration.
    pub ns: u32,
}

pub struct Entry {
    pub name: String,
    pub ident: Callable,
    pub exec: Executor,
    pub user: *mut c_void,
}

// SAFETY: `user` is an opaque pointer handed back to the host's executor; the host promised at
// registration that its executor may be called from any lane thread with it.
unsafe impl Send for Entry {}
// SAFETY: as above; the entry itself is immutable after registration.
unsafe impl Sync for Entry {}

#[derive(Debug, PartialEq, Eq)]
pub enum RegisterError {
    EmptyName,
    BadKind(u32),
    /// The same identity is already bound to a different executor or user pointer.
    Conflict(String),
}

/// A map keyed by callable digests, hashed by `DigestHasher`.
pub type DigestMap<V> = HashMap<[u8; 32], V, BuildHasherDefault<DigestHasher>>;

/// Hashes a digest by its first eight bytes: SHA-256 output is uniform already, and SipHash
/// over all 32 cost a tiled Cholesky's build about 280 instructions per change of callable
/// (the submit path's per-orchestrator cache). A host that forges digests to collide only
/// slows its own lookups, which still compare the whole identity.
#[derive(Default)]
pub struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut w = [0u8; 8];
        let n = bytes.len().min(8);
        w[..n].copy_from_slice(&bytes[..n]);
        self.0 = self.0.rotate_left(29) ^ u64::from_le_bytes(w);
    }

    /// The array's length prefix: the same for every digest.
    fn write_usize(&mut self, _: usize) {}

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Process-wide identity -> entry (seed: a callable identity names one executor); entries are
/// leaked, so a lookup's `&'static Entry` outlives the read lock.
fn registry() -> &'static RwLock<DigestMap<&'static Entry>> {
    static R: OnceLock<RwLock<DigestMap<&'static Entry>>> = OnceLock::new();
    R.get_or_init(|| {
        crate::fork::register_once();
        RwLock::new(DigestMap::default())
    })
}

/// The registry's lock, held across a fork (`crate::fork`): a child never inherits it held
/// by a thread it does not have.
pub(crate) fn hold_for_fork() -> Box<dyn std::any::Any> {
    Box::new(registry().write().unwrap_or_else(|p| p.into_inner()))
}

/// The digest of a callable identity.
pub fn digest(name: &str, ns: u32, kind: u32) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"dagrt-callable-v1\0");
    h.update(ns.to_le_bytes());
    h.update(kind.to_le_bytes());
    h.update(name.as_bytes());
    h.finalize().into()
}

/// Register `exec` under `name`. Registering the same name, namespace, kind, executor and
/// user pointer again is a no-op returning the same identity.
pub fn register(
    name: &str,
    ns: u32,
    kind: u32,
    exec: Executor,
    user: *mut c_void,
) -> Result<Callable, RegisterError> {
    if name.is_empty() {
        return Err(RegisterError::EmptyName);
    }
    if kind > CallableKind::Orchestration as u32 {
        return Err(RegisterError::BadKind(kind));
    }
    let ident = Callable {
        digest: digest(name, ns, kind),
        kind,
        ns,
    };
    let mut map = registry().write().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = map.get(&ident.digest) {
        if e.exec as usize == exec as usize && e.user == user {
            return Ok(ident);
        }
        return Err(RegisterError::Conflict(e.name.clone()));
    }
    let entry: &'static Entry = Box::leak(Box::new(Entry {
        name: name.to_owned(),
        ident,
        exec,
        user,
    }));
    map.insert(ident.digest, entry);
    Ok(ident)
}

/// Resolve an identity to its executor, checking kind and namespace as well as the digest.
pub fn resolve(c: &Callable) -> Option<&'static Entry> {
    let map = registry().read().unwrap_or_else(|p| p.into_inner());
    map.get(&c.digest).copied().filter(|e| e.ident == *c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// Digests of distinct names spread over the hash space (no two of a thousand share a
    /// hash), and a map keyed by them finds each one, and not a digest that differs from one
    /// only past the bytes the hash reads.
    #[test]
    fn digest_hasher_spreads_digests_and_maps_find_them() {
        let digests: Vec<[u8; 32]> = (0..1000)
            .map(|i| digest(&format!("kernel_{i}"), 0, 0))
            .collect();
        let b = BuildHasherDefault::<DigestHasher>::default();
        let mut hashes: Vec<u64> = digests.iter().map(|d| b.hash_one(d)).collect();
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(hashes.len(), digests.len());
        let map: DigestMap<usize> = digests.iter().enumerate().map(|(i, d)| (*d, i)).collect();
        for (i, d) in digests.iter().enumerate() {
            assert_eq!(map.get(d), Some(&i));
        }
        let mut near = digests[7];
        near[31] ^= 1;
        assert_eq!(b.hash_one(near), b.hash_one(digests[7]));
        assert_eq!(map.get(&near), None);
    }
}
