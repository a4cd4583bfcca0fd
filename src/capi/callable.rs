//! Callable registration and the executor-side calls.

use super::{boundary, need_mut, need_str};
use crate::callable::{register, Callable, ExecutorFn, RegisterError};
use crate::error::{Error, Status};
use crate::lane::thread::FailSlot;
use crate::task::TaskView;
use std::ffi::{c_char, c_void};

/// Register `exec` under a stable `name` in namespace `ns`, with `kind` a `dagrt_callable_kind`
/// value, and write its identity (SHA-256 digest, kind, namespace) to `out`. Registration is
/// per process; registering the same (name, ns, kind, exec, user) again returns the same
/// identity, and binding an existing identity to another executor is
/// DAGRT_STATUS_CALLABLE_CONFLICT. `exec` may be called from any lane thread with `user`.
/// DAGRT_CALLABLE_KIND_ORCHESTRATION callables register (nested workers will run them) but
/// every submit refuses them (DAGRT_STATUS_UNKNOWN_CALLABLE).
/// Thread-safe.
#[no_mangle]
pub extern "C" fn dagrt_register_callable(
    name: *const c_char,
    ns: u32,
    kind: u32,
    exec: ExecutorFn,
    user: *mut c_void,
    out: *mut Callable,
) -> crate::error::Status {
    boundary(|| {
        let name = need_str(name, "name")?;
        let exec = exec.ok_or_else(|| Error::new(Status::NullPointer, "exec is NULL"))?;
        let out = need_mut(out, "out")?;
        let c = register(name, ns, kind, exec, user).map_err(|e| match e {
            RegisterError::EmptyName => Error::new(Status::InvalidArgument, "callable name is empty"),
            RegisterError::BadKind(k) => Error::new(Status::InvalidArgument, format!("kind {k} is not a dagrt_callable_kind")),
            RegisterError::Conflict(n) => Error::new(
                Status::CallableConflict,
                format!("callable '{n}' is already registered with a different executor or user pointer"),
            ),
        })?;
        *out = c;
        Ok(())
    })
}

/// From inside an executor: fail the current task with `msg` (copied). The task fails even
/// if the executor then returns 0. Call only on the `task` passed to the running executor,
/// while it runs: from its own thread or from threads it runs and waits for (an OpenMP region
/// inside the kernel), also at the same time. The first message given is the task's. `msg`
/// may hold any bytes: invalid UTF-8 is replaced with U+FFFD, never refused.
#[no_mangle]
pub extern "C" fn dagrt_task_fail(
    task: *const TaskView,
    msg: *const c_char,
) -> crate::error::Status {
    boundary(|| {
        let task = super::need(task, "task")?;
        let msg = super::need_text(msg, "msg")?;
        if task.private_.is_null() {
            return Err(Error::new(
                Status::InvalidArgument,
                "task is not a view passed to a running executor",
            ));
        }
        // SAFETY: private_ points at the lane's FailSlot for the duration of the executor call.
        let slot = unsafe { &*(task.private_ as *const FailSlot) };
        let mut m = slot.msg.lock().unwrap_or_else(|p| p.into_inner());
        m.get_or_insert(msg);
        Ok(())
    })
}
