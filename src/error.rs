//! Status codes and the error type every fallible operation returns.

use std::fmt;

/// Status of a dagrt call. 0 is success; the message of the last failure on the calling
/// thread is available from `dagrt_last_error()`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok = 0,
    /// A required pointer argument was null.
    NullPointer = 1,
    /// An argument is out of range or malformed (the message names it).
    InvalidArgument = 2,
    /// A NEXT_LEVEL target worker id is not a registered lane, or a SUB submit on a worker
    /// without SUB lanes.
    UnknownWorker = 3,
    /// A group names the same target worker twice, or a lane id is added twice.
    DuplicateTarget = 4,
    /// The callable identity is not registered in this process (or has the wrong kind).
    UnknownCallable = 5,
    /// A callable identity is already registered to a different executor or `user` pointer.
    CallableConflict = 6,
    /// A task handle or run id belongs to another run or another worker.
    ForeignHandle = 7,
    /// A task handle or run id names a run that is no longer live (released), or no task.
    StaleHandle = 8,
    /// scope_end without a matching scope_begin, or nested scopes still open at close.
    ScopeUnbalanced = 9,
    /// More than 64 nested scopes.
    ScopeTooDeep = 10,
    /// The call is not valid in the object's current state (no run open, not initialised...).
    WrongState = 11,
    /// The orchestrator was called from a thread other than the one building the run; or a
    /// task waits without bound for its own run, or closes, frees or configures its own worker.
    WrongThread = 12,
    /// "HeapRing exhausted, increase heap_ring_size on Worker".
    HeapExhausted = 13,
    /// "task window full".
    WindowFull = 14,
    /// The run finished with a failed task; the message is the first failure.
    TaskFailed = 15,
    /// `dagrt_release_run` on a run that has not finished.
    RunNotDone = 16,
    /// A system call failed (mmap, thread creation, ...).
    System = 17,
    /// A panic inside dagrt was caught at the C boundary (a dagrt bug).
    Panic = 18,
    /// The run's submission failed: its orchestration callback returned non-zero,
    /// `dagrt_fail_run_submission` was called, or its worker was freed with the run open.
    /// This is the run's result even when a task had failed before.
    OrchestrationFailed = 19,
}

impl Status {
    pub fn name(code: i32) -> &'static str {
        const NAMES: [&str; 20] = [
            "DAGRT_STATUS_OK",
            "DAGRT_STATUS_NULL_POINTER",
            "DAGRT_STATUS_INVALID_ARGUMENT",
            "DAGRT_STATUS_UNKNOWN_WORKER",
            "DAGRT_STATUS_DUPLICATE_TARGET",
            "DAGRT_STATUS_UNKNOWN_CALLABLE",
            "DAGRT_STATUS_CALLABLE_CONFLICT",
            "DAGRT_STATUS_FOREIGN_HANDLE",
            "DAGRT_STATUS_STALE_HANDLE",
            "DAGRT_STATUS_SCOPE_UNBALANCED",
            "DAGRT_STATUS_SCOPE_TOO_DEEP",
            "DAGRT_STATUS_WRONG_STATE",
            "DAGRT_STATUS_WRONG_THREAD",
            "DAGRT_STATUS_HEAP_EXHAUSTED",
            "DAGRT_STATUS_WINDOW_FULL",
            "DAGRT_STATUS_TASK_FAILED",
            "DAGRT_STATUS_RUN_NOT_DONE",
            "DAGRT_STATUS_SYSTEM",
            "DAGRT_STATUS_PANIC",
            "DAGRT_STATUS_ORCHESTRATION_FAILED",
        ];
        usize::try_from(code)
            .ok()
            .and_then(|i| NAMES.get(i))
            .copied()
            .unwrap_or("DAGRT_STATUS_UNKNOWN")
    }
}

/// An error: a status and a specific message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub msg: String,
}

impl Error {
    pub fn new(status: Status, msg: impl Into<String>) -> Error {
        Error {
            status,
            msg: msg.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", Status::name(self.status as i32), self.msg)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Shorthand for an `Err(Error)`.
pub fn err<T>(status: Status, msg: impl Into<String>) -> Result<T> {
    Err(Error::new(status, msg))
}
