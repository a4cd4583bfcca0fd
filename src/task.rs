//! The data that flows through a submit: tensors (strided views), tags, scalars, explicit
//! dependencies, the call configuration and the read-only view an executor receives.
//!
//! These are plain `#[repr(C)]` structs shared with C (cbindgen renames them `dagrt_*`), so a
//! host can describe a task on its stack and submit it with no per-task allocation of its own.
//! Enumerated fields are carried as `u32` and validated at submit: a C caller may put any value
//! there, and a Rust enum holding an unknown discriminant would be undefined behaviour.

use std::ffi::c_void;

/// Maximum number of dimensions of a tensor view.
pub const MAX_TENSOR_DIMS: usize = 5;

/// How a tensor participates in dependency inference (the Orchestrator seed's tag table).
/// Tags are read only inside `submit_*`: dispatch and completion never look at them, and
/// the executor's view carries each tensor as submitted but with its tag DAGRT_TAG_NO_DEP
/// (Orchestrator seed invariant 2: later phases do not see tags). A task's reads
/// depend on the writers before it, whatever the order of its tensors and members: a write
/// listed ahead of a read of the same bytes does not hide the earlier writer.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    /// Read: depends on the current producers of the memory it touches (RaW).
    Input = 0,
    /// Write: becomes the producer of the memory it touches; no lookup (pure overwrite).
    /// A null data pointer asks the runtime to allocate the buffer from the heap ring (dense:
    /// zero strides and offset); the submit writes its address back into the tensor. One with
    /// a zero extent gets no buffer: its data stays NULL, there and in the executor. The
    /// buffer lives as long as its task's slot: once the task's scope has ended and every
    /// task depending on it, or reading it (INPUT or INOUT, also behind a later in-place
    /// writer), is done, it is reclaimed, and a task submitted after that which names it
    /// reads released memory (nothing tracks it any more, failed producer or not). A pure
    /// write (OUTPUT, OUTPUT_EXISTING) into it does not hold it (the seed's tag table).
    Output = 1,
    /// Read and write: RaW and WaW edge on the prior producers, then becomes the producer.
    Inout = 2,
    /// Write into a caller-provided buffer: like OUTPUT, never auto-allocated.
    OutputExisting = 3,
    /// No dependency tracking at all.
    NoDep = 4,
}

impl Tag {
    pub fn from_u32(v: u32) -> Option<Tag> {
        Some(match v {
            0 => Tag::Input,
            1 => Tag::Output,
            2 => Tag::Inout,
            3 => Tag::OutputExisting,
            4 => Tag::NoDep,
            _ => return None,
        })
    }
    /// INPUT and INOUT look up the TensorMap.
    pub fn looks_up(self) -> bool {
        matches!(self, Tag::Input | Tag::Inout)
    }
    /// OUTPUT, INOUT and OUTPUT_EXISTING insert into the TensorMap.
    pub fn inserts(self) -> bool {
        matches!(self, Tag::Output | Tag::Inout | Tag::OutputExisting)
    }
}

/// Element type of a tensor view.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    U64 = 6,
    I64 = 7,
    F16 = 8,
    Bf16 = 9,
    F32 = 10,
    F64 = 11,
    Bool = 12,
}

/// Size in bytes of one element of `dtype` (a `DataType` value), or `None` if unknown.
/// The message that refuses a `dtype` outside `dagrt_dtype` (submit, alloc, initialisers).
#[cold]
pub fn dtype_refused(dtype: u32) -> String {
    format!("dtype {dtype} is not a dagrt_dtype")
}

/// The message that refuses a `tag` outside `dagrt_tag`.
#[cold]
pub fn tag_refused(tag: u32) -> String {
    format!("tag {tag} is not a dagrt_tag")
}

pub fn dtype_size(dtype: u32) -> Option<u64> {
    Some(match dtype {
        0 | 1 | 12 => 1,
        2 | 3 | 8 | 9 => 2,
        4 | 5 | 10 => 4,
        6 | 7 | 11 => 8,
        _ => return None,
    })
}

/// A tensor argument: a strided view into memory, plus its tag.
///
/// The view touches the elements at byte addresses
/// `data + offset + sum_k(i_k * strides[k] * elem_size)` for `0 <= i_k < shape[k]`.
/// If every stride is 0 the view is dense in row-major order (last dimension fastest).
/// `ndim == 0` is a single element.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Tensor {
    /// Base address of the buffer. Null only for an OUTPUT tensor the runtime should allocate;
    /// on a successful submit the allocated address is written back here (one with a zero
    /// extent gets no buffer and stays NULL).
    pub data: *mut c_void,
    /// Byte offset of the view's first element from `data`.
    pub offset: u64,
    /// Number of dimensions, 0..=5.
    pub ndim: u32,
    /// Element type: a `dagrt_dtype` value.
    pub dtype: u32,
    /// Dependency tag: a `dagrt_tag` value. Read at submit only (in an executor's view it is
    /// DAGRT_TAG_NO_DEP).
    pub tag: u32,
    /// Must be zero.
    pub reserved: u32,
    /// Extent of each dimension, in elements.
    pub shape: [u64; MAX_TENSOR_DIMS],
    /// Stride of each dimension, in elements (all zero: dense row-major).
    pub strides: [u64; MAX_TENSOR_DIMS],
}

impl Tensor {
    /// A view of `shape` with element `strides` (strides not given are 0; all 0: dense,
    /// row-major) at `data + offset` bytes, tagged `tag`: `dagrt_tensor_init_strided` for
    /// Rust callers. Panics with more than `MAX_TENSOR_DIMS` dimensions or strides.
    pub fn strided(
        data: *mut c_void,
        offset: u64,
        dtype: DataType,
        shape: &[u64],
        strides: &[u64],
        tag: u32,
    ) -> Tensor {
        let mut t = Tensor {
            data,
            offset,
            ndim: shape.len() as u32,
            dtype: dtype as u32,
            tag,
            reserved: 0,
            shape: [0; MAX_TENSOR_DIMS],
            strides: [0; MAX_TENSOR_DIMS],
        };
        t.shape[..shape.len()].copy_from_slice(shape);
        t.strides[..strides.len()].copy_from_slice(strides);
        t
    }
}

/// A task handle: the `{run_id, slot}` pair a submit returns. Valid only while the run that
/// returned it is being built; it names an explicit dependency in a later submit.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TaskHandle {
    pub run_id: u64,
    pub slot: u64,
}

/// Kind of an explicit dependency.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DepKind {
    /// `add_dep`: ordering, failure propagation and lifetime retention of the producer.
    Retain = 0,
    /// `add_dep_wait`: ordering and failure propagation only.
    Wait = 1,
}

/// An explicit dependency on an already submitted task of the same run.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Dep {
    pub handle: TaskHandle,
    /// A `dagrt_dep_kind` value.
    pub kind: u32,
    pub reserved: u32,
}

/// Small per-call configuration, copied by value to the executor.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallConfig {
    pub flags: u32,
    pub block_dim: u32,
    pub user: [u64; 6],
}

/// The arguments of one task (or one group member): borrowed arrays, read during the submit
/// call only. Tensors are writable so that auto-allocated OUTPUT addresses can be returned.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TaskArgs {
    pub tensors: *mut Tensor,
    pub num_tensors: u32,
    pub num_scalars: u32,
    pub scalars: *const u64,
    pub deps: *const Dep,
    pub num_deps: u32,
    pub reserved: u32,
}

impl TaskArgs {
    /// One member's args holding only `tensors` (no scalars, no explicit deps); the other
    /// fields can be set on the result.
    #[inline]
    pub fn of_tensors(tensors: &mut [Tensor]) -> TaskArgs {
        TaskArgs {
            tensors: tensors.as_mut_ptr(),
            num_tensors: tensors.len() as u32,
            num_scalars: 0,
            scalars: std::ptr::null(),
            deps: std::ptr::null(),
            num_deps: 0,
            reserved: 0,
        }
    }
}

/// What an executor sees: a read-only view of one task (or group member), valid during the
/// executor call only.
#[repr(C)]
#[derive(Debug)]
pub struct TaskView {
    /// The task's tensors as submitted (auto-allocated addresses filled in), except their
    /// tags: consumed at submit, they read DAGRT_TAG_NO_DEP here.
    pub tensors: *const Tensor,
    pub num_tensors: u32,
    pub num_scalars: u32,
    pub scalars: *const u64,
    pub config: *const CallConfig,
    /// Stable id of the NEXT_LEVEL lane running this task, or -1-k for SUB lane k.
    pub worker_id: i32,
    /// Index of this member within its group (0 for a single task).
    pub member_index: u32,
    /// Number of members of the group (1 for a single task).
    pub group_size: u32,
    pub reserved: u32,
    pub run_id: u64,
    pub slot: u64,
    /// Runtime-private: where `dagrt_task_fail` records the message.
    pub private_: *mut c_void,
}

/// Bytes a dense view of `shape[..ndim]` elements of `dtype` occupies, if it fits in u64.
pub fn dense_bytes(ndim: u32, shape: &[u64; MAX_TENSOR_DIMS], dtype: u32) -> Option<u64> {
    let mut n = dtype_size(dtype)?;
    let shape = &shape[..ndim as usize];
    // A zero extent anywhere makes it empty, however large the extents before it.
    if shape.contains(&0) {
        return Some(0);
    }
    for &s in shape {
        n = n.checked_mul(s)?;
    }
    Some(n)
}
