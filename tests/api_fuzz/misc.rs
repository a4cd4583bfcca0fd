//! The small calls outside a run's life (status strings, version, config defaults, NULL
//! frees, trace calls that must fail, the log hook): none may touch the last error.

use crate::ffi::{cstr, last_error, null_or_ok, out_arg, out_ptr};
use crate::fuzzer::Fz;
use crate::model::{Th, WState, R};
use dagrt::capi::args as ca;
use dagrt::capi::worker as cw;
use dagrt::capi::{dagrt_status_str, dagrt_version};
use dagrt::error::Status;
use dagrt::worker::WorkerConfig;

impl Fz {
    pub(crate) fn op_misc(&mut self) -> R {
        let before = last_error();
        let what = self.rng.below(6);
        match what {
            0 => {
                let code = self.rng.pick(&[-1, 0, 1, 7, 13, 18, 19, 20, 99, i32::MIN]);
                let s = cstr(dagrt_status_str(code));
                let want = Status::name(code);
                self.log(format!(
                    "#{:<4} main dagrt_status_str({code}) -> {s}",
                    self.step
                ));
                self.check(s == want, "dagrt_status_str", || {
                    format!("dagrt_status_str({code}) = {s:?}, expected {want:?}")
                })?;
            }
            1 => {
                let v = cstr(dagrt_version());
                self.log(format!("#{:<4} main dagrt_version() -> {v}", self.step));
                self.check(v == env!("CARGO_PKG_VERSION"), "dagrt_version", || {
                    format!("version {v}")
                })?;
            }
            2 => {
                let null_out = self.rng.pct(30);
                let mut c = WorkerConfig {
                    heap_ring_size: 1,
                    task_window: 1,
                    timeout_ms: 1,
                };
                let cp = out_ptr(null_out, &mut c);
                let exp = null_or_ok(null_out);
                let st = self.call(
                    Th::Main,
                    format!("dagrt_worker_config_default({})", out_arg(null_out, "&c")),
                    &exp,
                    || cw::dagrt_worker_config_default(cp),
                )?;
                if st == Status::Ok {
                    self.check(
                        c == WorkerConfig {
                            heap_ring_size: 1 << 30,
                            task_window: 1 << 20,
                            timeout_ms: 10_000,
                        },
                        "default config",
                        || format!("{c:?}"),
                    )?;
                }
            }
            3 => {
                self.log(format!(
                    "#{:<4} main dagrt_worker_free(NULL); dagrt_args_free(NULL)",
                    self.step
                ));
                cw::dagrt_worker_free(std::ptr::null_mut());
                ca::dagrt_args_free(std::ptr::null_mut());
            }
            4 => {
                // trace calls that must fail before touching any file
                let wi = self.pick_worker();
                let p = self.wptr(wi);
                let inited = wi.is_some_and(|w| self.workers[w].state == WState::Init);
                let path = b"/nonexistent-dagrt-fuzz/x.dot\0";
                match self.rng.below(3) {
                    0 => {
                        self.call(
                            Th::Main,
                            "dagrt_worker_trace_start(w, NULL)".into(),
                            &[Status::NullPointer],
                            || cw::dagrt_worker_trace_start(p, std::ptr::null()),
                        )?;
                    }
                    1 => {
                        let exp = if wi.is_none() {
                            vec![Status::NullPointer]
                        } else if inited {
                            vec![Status::Ok]
                        } else {
                            vec![Status::WrongState]
                        };
                        self.call(
                            Th::Main,
                            "dagrt_worker_trace_stop(w) [no trace]".into(),
                            &exp,
                            || cw::dagrt_worker_trace_stop(p),
                        )?;
                    }
                    _ => {
                        let id = self.other_run_id(wi, None);
                        let exp = if wi.is_none() {
                            vec![Status::NullPointer]
                        } else if inited {
                            vec![Status::InvalidArgument]
                        } else {
                            vec![Status::WrongState]
                        };
                        self.call(
                            Th::Main,
                            format!("dagrt_worker_write_dot(w, {id}, path) [no trace]"),
                            &exp,
                            || cw::dagrt_worker_write_dot(p, id, path.as_ptr().cast()),
                        )?;
                    }
                }
                return Ok(());
            }
            _ => {
                self.call(
                    Th::Main,
                    "dagrt_set_log_hook(NULL, NULL)".into(),
                    &[Status::Ok],
                    || dagrt::capi::dagrt_set_log_hook(None, std::ptr::null_mut()),
                )?;
                return Ok(());
            }
        }
        if what != 2 && last_error() != before {
            self.soft(
                "last_error: an infallible call changed dagrt_last_error()",
                "a status/version/free call changed the last error",
            );
        }
        Ok(())
    }
}
