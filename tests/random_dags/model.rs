//! The reference model's record of each node (`Node`, `Member`): its members' tensors and
//! buffers, its explicit deps and its required producers (computed in `builder.rs`).

use super::*;

// ---------------------------------------------------------------------------------------
// Reference model

pub(crate) struct Member {
    pub(crate) tensors: Vec<Tensor>,
    /// Buffer index per tensor (usize::MAX: auto-allocated OUTPUT).
    pub(crate) bufs: Vec<usize>,
    pub(crate) deps: Vec<Dep>,
    pub(crate) scalars: [u64; 4],
    pub(crate) hash: u64,
}

pub(crate) struct Node {
    pub(crate) kind: Kind,
    pub(crate) slot: u64,
    pub(crate) level: usize,
    pub(crate) frame_open: bool,
    pub(crate) members: Vec<Member>,
    /// Explicit deps: (node, retain).
    pub(crate) deps: Vec<(usize, bool)>,
    /// Required producers: node -> must be retained.
    pub(crate) req: BTreeMap<usize, bool>,
    pub(crate) cfg0: u64,
    /// For allocs: shape and dtype.
    pub(crate) alloc: Option<(Vec<u64>, u32)>,
}
