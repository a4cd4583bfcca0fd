//! What the workloads bench and the floor share with the peers (common.h): the workloads'
//! sizes and tags, their buffers, the dense view of one, and W4's layer tags.

use dagrt::task::{DataType, Tag, Tensor};
use std::alloc::{alloc_zeroed, dealloc, Layout};

pub const W1_N: usize = 100_000;
pub const W2_N: usize = 100_000;
pub const W3_N: usize = 10_000;
pub const W4_W: usize = 64;
pub const W4_L: usize = 1000;

/// The C ABI's values of dagrt's own enums, as a C host writes them into a `dagrt_tensor`.
pub const DTYPE_U8: u32 = DataType::U8 as u32;
pub const TAG_INPUT: u32 = Tag::Input as u32;
pub const TAG_OUTPUT: u32 = Tag::Output as u32;
pub const TAG_INOUT: u32 = Tag::Inout as u32;

/// n buffers of one cache line each, 64-byte aligned, zeroed (common.h alloc_bufs).
pub struct Bufs {
    /// The first buffer (W4's tasks find their layer from it).
    pub p: *mut u8,
    n: usize,
}

impl Bufs {
    pub fn new(n: usize) -> Bufs {
        let layout = Layout::from_size_align(n.max(1) * 64, 64).expect("layout");
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { alloc_zeroed(layout) };
        assert!(!p.is_null(), "out of memory");
        Bufs { p, n }
    }
    pub fn at(&self, i: usize) -> *mut u8 {
        assert!(i < self.n);
        // SAFETY: i < n, so the offset stays inside the allocation.
        unsafe { self.p.add(i * 64) }
    }
    /// First byte of buffer i (read between runs, when no task is running).
    pub fn byte(&self, i: usize) -> u8 {
        // SAFETY: in bounds (checked by `at`); no task touches the buffers between runs (the
        // run's wait returned, which orders every task's writes before this read).
        unsafe { std::ptr::read_volatile(self.at(i)) }
    }
    pub fn zero(&self) {
        // SAFETY: the whole allocation, written while no task is running.
        unsafe { std::ptr::write_bytes(self.p, 0, self.n * 64) };
    }
}

impl Drop for Bufs {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.n.max(1) * 64, 64).expect("layout");
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.p, layout) };
    }
}

/// A 64-byte dense U8 view of `p`, filled in place the way a C host fills a `dagrt_tensor` on
/// its stack (no call per tensor; `check_tensor_layout` verifies it matches
/// `dagrt_tensor_init`).
#[inline]
pub fn tensor(p: *mut u8, tag: u32) -> Tensor {
    Tensor {
        data: p.cast(),
        offset: 0,
        ndim: 1,
        dtype: DTYPE_U8,
        tag,
        reserved: 0,
        shape: [64, 0, 0, 0, 0],
        strides: [0; 5],
    }
}

/// W4: the byte layer l's tasks write (never 0, the buffers' initial value).
pub fn w4_tag(l: usize) -> u8 {
    (l % 255 + 1) as u8
}
