//! The C ABI (DESIGN §3). Every exported function validates its arguments, runs inside a
//! panic boundary and returns a `dagrt_status`; the message of the last failure on the calling
//! thread is available from `dagrt_last_error()`. Out-parameters are written on success,
//! and on a failure only where the function's doc says so (`dagrt_wait_run_for` reports a
//! terminal run's failure with `*out_done` = 1; `dagrt_worker_submit` writes the run id of a
//! run whose orchestration failed, so it can be released).
//!
//! Panic freedom beyond `boundary`: `dagrt_last_error`, `dagrt_status_str` and
//! `dagrt_version` run no fallible code (thread-local access uses `try_with`, which cannot
//! panic during thread teardown; the status-name table is built from NUL-free literals).

// C type names follow the C convention (`dagrt_*_t`).
#![allow(non_camel_case_types)]
// Exported functions take raw pointers from C by design; each dereference is checked for
// null and documented by the function's contract in the header.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

pub mod args;
pub mod callable;
pub mod orch;
pub mod run;
pub mod worker;

use crate::error::{Error, Result, Status};
use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    static ERRORS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Record `e` as this thread's last error and return its status.
pub(crate) fn fail(e: Error) -> Status {
    let msg = CString::new(e.msg.replace('\0', " ")).unwrap_or_default();
    // try_with: during the thread's TLS teardown (a dagrt call from a thread-local destructor)
    // the message is dropped rather than panicking outside the boundary.
    let _ = LAST_ERROR.try_with(|l| *l.borrow_mut() = msg);
    let _ = ERRORS.try_with(|n| n.set(n.get() + 1));
    e.status
}

/// How many failures this thread has recorded (to tell whether a callback saw one).
pub(crate) fn error_count() -> u64 {
    ERRORS.try_with(|n| n.get()).unwrap_or(0)
}

pub(crate) fn last_error_string() -> String {
    LAST_ERROR
        .try_with(|l| l.borrow().to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A C array of `n` elements (NULL allowed only when `n` is 0).
pub(crate) fn slice<'a, T>(p: *const T, n: u32, name: &str) -> Result<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::new(
            Status::NullPointer,
            format!("{name} is NULL but its count is {n}"),
        ));
    }
    // SAFETY: non-null with n elements (caller contract).
    Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

/// Run `f` behind the panic boundary and turn its result into a status.
pub(crate) fn boundary(f: impl FnOnce() -> Result<()>) -> Status {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(())) => Status::Ok,
        Ok(Err(e)) => fail(e),
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            fail(Error::new(
                Status::Panic,
                format!("internal panic caught at the C boundary: {what}"),
            ))
        }
    }
}

/// A required pointer argument, or a NULL_POINTER error naming it.
pub(crate) fn need<'a, T>(p: *const T, name: &str) -> Result<&'a T> {
    // SAFETY: non-null pointers from C are valid for reads of T by the API contract.
    unsafe { p.as_ref() }.ok_or_else(|| Error::new(Status::NullPointer, format!("{name} is NULL")))
}

/// A required out-pointer.
pub(crate) fn need_mut<'a, T>(p: *mut T, name: &str) -> Result<&'a mut T> {
    // SAFETY: non-null out-pointers from C are valid for writes of T by the API contract.
    unsafe { p.as_mut() }.ok_or_else(|| Error::new(Status::NullPointer, format!("{name} is NULL")))
}

/// A required NUL-terminated string, as C gave it.
fn need_cstr<'a>(p: *const c_char, name: &str) -> Result<&'a CStr> {
    if p.is_null() {
        return Err(Error::new(Status::NullPointer, format!("{name} is NULL")));
    }
    // SAFETY: non-null C strings are NUL-terminated by the API contract.
    Ok(unsafe { CStr::from_ptr(p) })
}

/// A required NUL-terminated UTF-8 string (an identifier: refused if not UTF-8).
pub(crate) fn need_str<'a>(p: *const c_char, name: &str) -> Result<&'a str> {
    need_cstr(p, name)?.to_str().map_err(|_| {
        Error::new(
            Status::InvalidArgument,
            format!("{name} is not valid UTF-8"),
        )
    })
}

/// A required NUL-terminated message: any bytes (a C host's strerror text need not be
/// UTF-8); invalid sequences become U+FFFD rather than refusing the message.
pub(crate) fn need_text(p: *const c_char, name: &str) -> Result<String> {
    Ok(need_cstr(p, name)?.to_string_lossy().into_owned())
}

/// A required NUL-terminated file path: any bytes but NUL, as the file system takes them.
pub(crate) fn need_path(p: *const c_char, name: &str) -> Result<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    Ok(std::ffi::OsStr::from_bytes(need_cstr(p, name)?.to_bytes()).into())
}

/// The message of the last failed dagrt call on this thread ("" if none). The pointer stays
/// valid until the next failing dagrt call on the same thread; do not free it.
/// Thread-safe: each thread has its own last error.
#[no_mangle]
pub extern "C" fn dagrt_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|l| l.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// The name of a status code (e.g. "DAGRT_STATUS_HEAP_EXHAUSTED"); "DAGRT_STATUS_UNKNOWN"
/// for values that are not status codes. Static string, do not free. Thread-safe.
#[no_mangle]
pub extern "C" fn dagrt_status_str(code: i32) -> *const c_char {
    static NAMES: std::sync::OnceLock<Vec<CString>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        (0..=20)
            .map(|i| CString::new(Status::name(i)).unwrap_or_default())
            .collect()
    });
    let idx = if (0..20).contains(&code) && Status::name(code) != "DAGRT_STATUS_UNKNOWN" {
        code as usize
    } else {
        20
    };
    names[idx].as_ptr()
}

/// The library version, "MAJOR.MINOR.PATCH". Static string, do not free. Thread-safe.
/// Compare with the header's DAGRT_VERSION_* macros to detect a header/library mismatch.
#[no_mangle]
pub extern "C" fn dagrt_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Install a process-wide log hook for runtime diagnostics (e.g. the scheduler's stall
/// warning, or a DAGRT_TRACE file that cannot be created), called from runtime threads, and
/// from the host thread in init, close and free, with a `dagrt_log_level` and a message valid
/// during the call. NULL restores the default: stderr, filtered by the DAGRT_LOG environment
/// variable (error, warn, info, debug; default warn). Thread-safe: once it returns, no call
/// of the previous hook is still running, so its `user` may be freed, and the hook it
/// installed stays until the next call. A hook may call it to replace or remove itself; that
/// change takes effect as the hook returns, unless a call from outside the hook installed
/// another meanwhile (that one stays). A message that a
/// dagrt call made inside the hook emits goes to the default instead of into the hook again.
/// A hook must not configure, close or free a worker (DAGRT_STATUS_WRONG_STATE).
#[no_mangle]
pub extern "C" fn dagrt_set_log_hook(
    hook: crate::log::LogFn,
    user: *mut std::ffi::c_void,
) -> Status {
    boundary(|| {
        crate::log::set_hook(hook, user);
        Ok(())
    })
}
