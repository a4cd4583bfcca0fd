//! Task-argument helpers: tensor initialisers and a reusable args builder.
//!
//! A submit takes a plain `dagrt_task_args` view, so a host can describe tasks on its stack;
//! the builder is a convenience that owns growable arrays and produces such a view.

use super::{boundary, need, need_mut};
use crate::error::{Error, Result, Status};
use crate::task::{Dep, DepKind, TaskArgs, TaskHandle, Tensor, MAX_TENSOR_DIMS};
use std::ffi::c_void;

/// A growable task-argument list (tensors, scalars, explicit deps). Not thread-safe; free
/// with `dagrt_args_free`.
#[derive(Default)]
pub struct dagrt_args_t {
    tensors: Vec<Tensor>,
    scalars: Vec<u64>,
    deps: Vec<Dep>,
}

/// The dtype and tag an initialiser is given, checked as a submit checks them: a bad value is
/// refused where it is written, not at a later submit.
fn check_dtype_tag(dtype: u32, tag: u32) -> Result<()> {
    let refused = if crate::task::dtype_size(dtype).is_none() {
        crate::task::dtype_refused(dtype)
    } else if crate::task::Tag::from_u32(tag).is_none() {
        crate::task::tag_refused(tag)
    } else {
        return Ok(());
    };
    Err(Error::new(Status::InvalidArgument, refused))
}

fn shape_of(ndim: u32, shape: *const u64) -> Result<[u64; MAX_TENSOR_DIMS]> {
    if ndim as usize > MAX_TENSOR_DIMS {
        return Err(Error::new(
            Status::InvalidArgument,
            format!("ndim {ndim} exceeds {MAX_TENSOR_DIMS}"),
        ));
    }
    let mut s = [0u64; MAX_TENSOR_DIMS];
    if ndim > 0 {
        let p = need(shape, "shape")?;
        // SAFETY: non-null with ndim elements (caller contract).
        s[..ndim as usize].copy_from_slice(unsafe { std::slice::from_raw_parts(p, ndim as usize) });
    }
    Ok(s)
}

/// Initialise `out` as a dense (row-major) view of `shape[0..ndim]` elements of `dtype` at
/// `data`, tagged `tag`. `data` may be NULL for an OUTPUT the runtime should allocate.
/// DAGRT_STATUS_INVALID_ARGUMENT (`out` untouched) for ndim above 5, or a dtype or tag that is
/// not one of the enum's values.
#[no_mangle]
pub extern "C" fn dagrt_tensor_init(
    out: *mut Tensor,
    data: *mut c_void,
    dtype: u32,
    ndim: u32,
    shape: *const u64,
    tag: u32,
) -> Status {
    boundary(|| {
        let out = need_mut(out, "out")?;
        let shape = shape_of(ndim, shape)?;
        check_dtype_tag(dtype, tag)?;
        *out = Tensor {
            data,
            offset: 0,
            ndim,
            dtype,
            tag,
            reserved: 0,
            shape,
            strides: [0; MAX_TENSOR_DIMS],
        };
        Ok(())
    })
}

/// Initialise `out` as a strided view: element (i_0..i_{n-1}) is at
/// `data + offset_bytes + sum(i_k * strides[k]) * elem_size`. A column-major tile of a
/// matrix with leading dimension ld: shape {rows, cols}, strides {1, ld}. Refuses what
/// `dagrt_tensor_init` refuses.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn dagrt_tensor_init_strided(
    out: *mut Tensor,
    data: *mut c_void,
    offset_bytes: u64,
    dtype: u32,
    ndim: u32,
    shape: *const u64,
    strides: *const u64,
    tag: u32,
) -> Status {
    boundary(|| {
        let out = need_mut(out, "out")?;
        let shape = shape_of(ndim, shape)?;
        let strides = shape_of(ndim, strides)
            .map_err(|e| Error::new(e.status, e.msg.replace("shape", "strides")))?;
        check_dtype_tag(dtype, tag)?;
        *out = Tensor {
            data,
            offset: offset_bytes,
            ndim,
            dtype,
            tag,
            reserved: 0,
            shape,
            strides,
        };
        Ok(())
    })
}

/// Create an empty args builder.
#[no_mangle]
pub extern "C" fn dagrt_args_new(out: *mut *mut dagrt_args_t) -> Status {
    boundary(|| {
        let out = need_mut(out, "out")?;
        *out = Box::into_raw(Box::default());
        Ok(())
    })
}

/// Free an args builder. NULL is a no-op.
#[no_mangle]
pub extern "C" fn dagrt_args_free(args: *mut dagrt_args_t) {
    let _ = boundary(|| {
        if !args.is_null() {
            // SAFETY: from dagrt_args_new, freed once (caller contract).
            drop(unsafe { Box::from_raw(args) });
        }
        Ok(())
    });
}

/// Empty the builder, keeping its capacity.
#[no_mangle]
pub extern "C" fn dagrt_args_clear(args: *mut dagrt_args_t) -> Status {
    boundary(|| {
        let a = need_mut(args, "args")?;
        a.tensors.clear();
        a.scalars.clear();
        a.deps.clear();
        Ok(())
    })
}

/// Append a tensor (copied).
#[no_mangle]
pub extern "C" fn dagrt_args_add_tensor(args: *mut dagrt_args_t, tensor: *const Tensor) -> Status {
    boundary(|| {
        let t = *need(tensor, "tensor")?;
        need_mut(args, "args")?.tensors.push(t);
        Ok(())
    })
}

/// Append a scalar.
#[no_mangle]
pub extern "C" fn dagrt_args_add_scalar(args: *mut dagrt_args_t, value: u64) -> Status {
    boundary(|| {
        need_mut(args, "args")?.scalars.push(value);
        Ok(())
    })
}

/// Add an explicit dependency that also retains the producer until this task finishes.
/// May be called before or after tensors; the handle is checked at submit.
#[no_mangle]
pub extern "C" fn dagrt_args_add_dep(args: *mut dagrt_args_t, handle: TaskHandle) -> Status {
    boundary(|| {
        need_mut(args, "args")?.deps.push(Dep {
            handle,
            kind: DepKind::Retain as u32,
            reserved: 0,
        });
        Ok(())
    })
}

/// Add an ordering-only dependency (no lifetime retention).
#[no_mangle]
pub extern "C" fn dagrt_args_add_dep_wait(args: *mut dagrt_args_t, handle: TaskHandle) -> Status {
    boundary(|| {
        need_mut(args, "args")?.deps.push(Dep {
            handle,
            kind: DepKind::Wait as u32,
            reserved: 0,
        });
        Ok(())
    })
}

/// A view of the builder's arrays for a submit. Valid until the builder is modified or
/// freed; a submit writes auto-allocated OUTPUT addresses back into the builder's tensors
/// (read them with `dagrt_args_get_tensor`).
#[no_mangle]
pub extern "C" fn dagrt_args_view(args: *mut dagrt_args_t, out: *mut TaskArgs) -> Status {
    boundary(|| {
        let a = need_mut(args, "args")?;
        let out = need_mut(out, "out")?;
        *out = TaskArgs {
            tensors: a.tensors.as_mut_ptr(),
            num_tensors: a.tensors.len() as u32,
            num_scalars: a.scalars.len() as u32,
            scalars: a.scalars.as_ptr(),
            deps: a.deps.as_ptr(),
            num_deps: a.deps.len() as u32,
            reserved: 0,
        };
        Ok(())
    })
}

/// Copy tensor `index` of the builder to `out`.
#[no_mangle]
pub extern "C" fn dagrt_args_get_tensor(
    args: *const dagrt_args_t,
    index: u32,
    out: *mut Tensor,
) -> Status {
    boundary(|| {
        let a = need(args, "args")?;
        let out = need_mut(out, "out")?;
        *out = *a.tensors.get(index as usize).ok_or_else(|| {
            Error::new(
                Status::InvalidArgument,
                format!(
                    "tensor index {index} out of range ({} tensors)",
                    a.tensors.len()
                ),
            )
        })?;
        Ok(())
    })
}
