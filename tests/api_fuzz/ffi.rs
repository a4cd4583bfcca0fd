//! Small helpers around the C API's strings and statuses, and the hashes executors and the
//! model compare tensors and scalars by.

use dagrt::capi::dagrt_last_error;
use dagrt::error::Status;
use dagrt::task::Tensor;
use std::ffi::{c_char, CStr};

// ---------------------------------------------------------------------------------------
// Small FFI helpers

/// This thread's `dagrt_last_error()`: (text, pointer value).
pub(crate) fn last_error() -> (String, usize) {
    let p = dagrt_last_error();
    if p.is_null() {
        return ("<NULL pointer>".into(), 0);
    }
    // SAFETY: dagrt_last_error returns a NUL-terminated string valid until the next failing
    // dagrt call on this thread; it is copied at once.
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    (s, p as usize)
}

pub(crate) fn sname(s: Status) -> &'static str {
    Status::name(s as i32)
}

pub(crate) fn snames(v: &[Status]) -> String {
    v.iter().map(|&s| short(s)).collect::<Vec<_>>().join("|")
}

pub(crate) fn short(s: Status) -> &'static str {
    sname(s).trim_start_matches("DAGRT_STATUS_")
}

/// An out-parameter as a call gets it: NULL, or the address of `v`.
pub(crate) fn out_ptr<T>(null: bool, v: &mut T) -> *mut T {
    if null {
        std::ptr::null_mut()
    } else {
        v
    }
}

/// An out-parameter as a call's description shows it: `NULL`, or `name`.
pub(crate) fn out_arg(null: bool, name: &'static str) -> &'static str {
    if null {
        "NULL"
    } else {
        name
    }
}

/// The statuses of a call whose only possible defect is a NULL pointer.
pub(crate) fn null_or_ok(null: bool) -> Vec<Status> {
    if null {
        vec![Status::NullPointer]
    } else {
        vec![Status::Ok]
    }
}

/// The statuses a call may return: those of its defects, or OK when it has none.
pub(crate) fn ok_if_none(exp: &mut Vec<Status>) {
    if exp.is_empty() {
        exp.push(Status::Ok);
    }
}

pub(crate) fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        return "<NULL>".into();
    }
    // SAFETY: the dagrt string functions return static NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

pub(crate) fn align1024(n: u64) -> u64 {
    (n + 1023) & !1023
}

/// The model's element size (tests/common's table); 8 for a value that is no dtype, which the
/// fuzzer sends on purpose and whose calls must fail before any size matters.
pub(crate) fn esize(dtype: u32) -> u64 {
    crate::common::elem_size(dtype).unwrap_or(8)
}

pub(crate) fn hash_tensors(ts: &[Tensor]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ ts.len() as u64;
    for t in ts {
        let head = [
            t.data as u64,
            t.offset,
            t.ndim as u64,
            t.dtype as u64,
            t.tag as u64,
            t.reserved as u64,
        ];
        for x in head.iter().chain(t.shape.iter()).chain(t.strides.iter()) {
            h = (h ^ x).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

pub(crate) fn hash_u64s(v: &[u64]) -> u64 {
    let mut h = 0x8422_2325_cbf2_9ce4u64 ^ v.len() as u64;
    for x in v {
        h = (h ^ x).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
