//! Diagnostics: messages from the runtime (e.g. the scheduler's stall warning) go through a
//! log hook the host can install; by default they go to stderr, filtered by `DAGRT_LOG`
//! (error, warn, info, debug; default warn).

use std::ffi::{c_char, c_void, CString};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Message severity.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error = 0,
    Warn = 1,
    Info = 2,
    Debug = 3,
}

/// A log hook: called from runtime threads (stall warnings: the scheduler thread, or a lane
/// thread running a scheduler pass after its job) and from the host thread in
/// `dagrt_worker_init`, `_close` and `_free` (a DAGRT_TRACE file that cannot be created or
/// written), with a NUL-terminated message valid during the call. An exception must not
/// escape it (dagrt aborts the process) nor a `longjmp` leave it.
pub type LogFn = Option<unsafe extern "C" fn(level: u32, msg: *const c_char, user: *mut c_void)>;

#[derive(Clone, Copy)]
pub(crate) struct Hook {
    f: LogFn,
    user: usize,
    /// Installs made from outside the hook so far. A change the hook asks for is applied as
    /// it returns only if none was made since the call began: an install that waited for the
    /// call and then returned must not be undone behind its caller's back (the header's "once
    /// it returns, no call of the previous hook is still running").
    outside: u64,
}

impl Hook {
    const NONE: Hook = Hook {
        f: None,
        user: 0,
        outside: 0,
    };
}

/// The installed hook; a call holds the read lock for its duration, so `set_hook`'s write lock
/// waits out every running call before the previous `user` may be freed. Behind a pointer so
/// that a forked child can start from a fresh lock (`after_fork_in_child`); a lock is never
/// freed, so the references handed out stay valid.
static HOOK: AtomicPtr<RwLock<Hook>> = AtomicPtr::new(std::ptr::null_mut());

fn hook() -> &'static RwLock<Hook> {
    let p = HOOK.load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: a published lock is leaked, never freed.
        return unsafe { &*p };
    }
    crate::fork::register_once();
    let fresh = Box::into_raw(Box::new(RwLock::new(Hook::NONE)));
    match HOOK.compare_exchange(
        std::ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        // SAFETY: just leaked into the pointer.
        Ok(_) => unsafe { &*fresh },
        Err(cur) => {
            // SAFETY: `fresh` was never published.
            drop(unsafe { Box::from_raw(fresh) });
            // SAFETY: as above, a published lock is never freed.
            unsafe { &*cur }
        }
    }
}

/// What the fork handlers took of the hook's lock. It is held across the host's hook code, so
/// `prepare` never waits for it (a hook in flight may itself fork, or call dagrt): it takes
/// the write side if free, else a read side with a copy of the hook, else nothing.
pub(crate) enum ForkHold {
    Write(RwLockWriteGuard<'static, Hook>),
    Read(RwLockReadGuard<'static, Hook>, Hook),
    Busy,
}

pub(crate) fn hold_for_fork() -> ForkHold {
    let h = hook();
    if let Ok(g) = h.try_write() {
        return ForkHold::Write(g);
    }
    match h.try_read() {
        Ok(g) => {
            let copy = *g;
            ForkHold::Read(g, copy)
        }
        Err(_) => ForkHold::Busy,
    }
}

/// In the child: with the write side held nobody else holds the lock, so it is released as
/// is; otherwise threads the child does not have may hold it, and the child gets a fresh lock
/// with the parent's hook (none when a `set_hook` was under way at the fork). The old lock is
/// leaked: a hook call in flight on this thread releases its read side there.
pub(crate) fn after_fork_in_child(held: ForkHold) {
    let hook = match held {
        ForkHold::Write(g) => return drop(g),
        ForkHold::Read(g, copy) => {
            std::mem::forget(g);
            copy
        }
        ForkHold::Busy => Hook::NONE,
    };
    HOOK.store(
        Box::into_raw(Box::new(RwLock::new(hook))),
        Ordering::Release,
    );
}

fn env_level() -> LogLevel {
    static L: OnceLock<LogLevel> = OnceLock::new();
    *L.get_or_init(|| {
        match std::env::var("DAGRT_LOG")
            .unwrap_or_default()
            .to_ascii_lowercase()
            .as_str()
        {
            "error" => LogLevel::Error,
            "info" => LogLevel::Info,
            "debug" => LogLevel::Debug,
            _ => LogLevel::Warn,
        }
    })
}

thread_local! {
    /// This thread is inside a call of the hook: the hook lock's read side is held here.
    static IN_HOOK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// A hook change asked for from inside the hook, applied when the hook returns.
    static PENDING: std::cell::Cell<Option<(LogFn, usize)>> = const { std::cell::Cell::new(None) };
}

/// Whether the calling thread is inside a call of the log hook.
pub fn in_hook() -> bool {
    IN_HOOK.with(|c| c.get())
}

/// Install (or with `None`, remove) the process-wide log hook. Once this returns, no call of
/// the previous hook is in flight (the hook is called under the read side of its lock). From
/// inside the hook, where that wait would be for the caller itself, the change is recorded
/// and made as the hook returns.
pub fn set_hook(f: LogFn, user: *mut c_void) {
    if in_hook() {
        PENDING.with(|p| p.set(Some((f, user as usize))));
        return;
    }
    let mut h = hook().write().unwrap_or_else(|p| p.into_inner());
    *h = Hook {
        f,
        user: user as usize,
        outside: h.outside + 1,
    };
}

/// The hook's own change, as its call (begun with `outside` installs made) returns.
fn set_hook_from_hook(f: LogFn, user: usize, outside: u64) {
    let mut h = hook().write().unwrap_or_else(|p| p.into_inner());
    if h.outside == outside {
        *h = Hook { f, user, outside };
    }
}

/// Emit a message: to the hook if one is installed (every level), else to stderr when
/// `level` passes `DAGRT_LOG`. A message emitted by a dagrt call the hook itself makes goes to
/// stderr (under the same filter) rather than into the hook again.
pub fn emit(level: LogLevel, msg: &str) {
    let nested = in_hook();
    let h = (!nested).then(|| hook().read().unwrap_or_else(|p| p.into_inner()));
    match h.as_ref().and_then(|h| h.f.map(|f| (f, h.user, h.outside))) {
        Some((f, user, outside)) => {
            let text = CString::new(msg.replace('\0', " ")).unwrap_or_default();
            IN_HOOK.with(|c| c.set(true));
            // SAFETY: the host installed `f` for exactly this call; `text` outlives the call.
            unsafe { f(level as u32, text.as_ptr(), user as *mut c_void) };
            IN_HOOK.with(|c| c.set(false));
            drop(h);
            if let Some((f, user)) = PENDING.with(|p| p.take()) {
                set_hook_from_hook(f, user, outside);
            }
        }
        None => {
            drop(h);
            if level <= env_level() {
                let name = ["error", "warn", "info", "debug"][level as usize];
                write_stderr(format!("dagrt [{name}] {msg}\n").as_bytes());
            }
        }
    }
}

/// The whole line to fd 2 with `write(2)`, not through std's stderr, whose lock a thread
/// of the parent may hold at a fork: the child would inherit it held and block on its first
/// message. One `write` per line keeps lines whole between threads.
fn write_stderr(mut line: &[u8]) {
    while !line.is_empty() {
        // SAFETY: `line` is a live byte slice of the given length.
        let n = unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
        if n > 0 {
            line = &line[n as usize..];
        } else if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {
            continue;
        } else {
            return; // stderr closed or full beyond repair: the message is dropped
        }
    }
}
