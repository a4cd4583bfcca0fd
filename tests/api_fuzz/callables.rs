//! Callable registration and the process-wide registry it has to agree with.

use crate::executors::{user_ptr, EXECS};
use crate::ffi::{out_arg, out_ptr, sname};
use crate::fuzzer::Fz;
use crate::model::{binding, Th, NAMES, NSS, R, REGISTRY};
use dagrt::callable::Callable;
use dagrt::capi::callable as cc;
use dagrt::error::Status;
use std::ffi::c_char;

impl Fz {
    /// Register every identity the fuzzer uses with its binding (idempotent), so that every
    /// sequence starts from the same process-wide registry and replays make the same choices.
    pub(crate) fn register_all(&mut self) -> R {
        for name in NAMES {
            for ns in NSS {
                for kind in [0u32, 1] {
                    let (ex, us) = binding(name, ns, kind);
                    let cname = format!("{name}\0");
                    let mut out = Callable {
                        digest: [0; 32],
                        kind: 0,
                        ns: 0,
                    };
                    let st = cc::dagrt_register_callable(
                        cname.as_ptr().cast(),
                        ns,
                        kind,
                        Some(EXECS[ex]),
                        user_ptr(us),
                        &mut out,
                    );
                    let mut reg = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
                    let prev = reg.insert((name.to_string(), ns, kind), (ex, us, out));
                    drop(reg);
                    self.check(
                        st == Status::Ok && prev.is_none_or(|p| p.2 == out),
                        "dagrt_register_callable (setup)",
                        || {
                            format!(
                                "registering {name}/{ns}/{kind} with its binding: {} (identity {})",
                                sname(st),
                                if prev.is_some() {
                                    "re-registered"
                                } else {
                                    "new"
                                }
                            )
                        },
                    )?;
                }
            }
        }
        Ok(())
    }

    pub(crate) fn op_register(&mut self, fixed: Option<(&str, u32, u32)>) -> R {
        let (name, ns, kind) = match fixed {
            Some(f) => (f.0.to_string(), f.1, f.2),
            None => {
                let k = if self.rng.pct(70) {
                    0
                } else if self.rng.pct(85) {
                    1
                } else {
                    self.rng.pick(&[2, 9])
                };
                (self.rng.pick(&NAMES).to_string(), self.rng.pick(&NSS), k)
            }
        };
        let (mut ex, mut us) = binding(&name, ns, kind);
        let r = if fixed.is_some() {
            99
        } else {
            self.rng.below(100)
        };
        let mut exp = Vec::new();
        let cname = format!("{name}\0");
        let bad = [b'f', 0xff, 0xfe, 0];
        let empty = [0u8];
        let (namep, shown): (*const c_char, String) = match r {
            0..=5 => {
                exp.push(Status::NullPointer);
                (std::ptr::null(), "NULL".into())
            }
            6..=9 => {
                exp.push(Status::InvalidArgument);
                (bad.as_ptr().cast(), "\"f\\xff\\xfe\"".into())
            }
            10..=12 => {
                exp.push(Status::InvalidArgument);
                (empty.as_ptr().cast(), "\"\"".into())
            }
            _ => (cname.as_ptr().cast(), format!("{name:?}")),
        };
        let null_exec = (13..=16).contains(&r);
        let null_out = (17..=20).contains(&r);
        if null_exec || null_out {
            exp.push(Status::NullPointer);
        }
        if (21..=32).contains(&r) {
            // Bind the identity to another executor or user pointer: a conflict if it exists.
            if self.rng.pct(50) {
                ex = 1 - ex;
            } else {
                us = (us + 1 + self.rng.idx(2)) % 3;
            }
        }
        let valid_name = r > 12;
        if kind > 1 {
            exp.push(Status::InvalidArgument);
        }
        let existing = REGISTRY
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(name.clone(), ns, kind))
            .copied();
        if exp.is_empty() && valid_name {
            match existing {
                Some((e, u, _)) if (e, u) != (ex, us) => exp.push(Status::CallableConflict),
                _ => exp.push(Status::Ok),
            }
        }
        let sentinel = Callable {
            digest: [0xAB; 32],
            kind: 77,
            ns: 77,
        };
        let mut out = sentinel;
        let outp = out_ptr(null_out, &mut out);
        let exec: cc_exec::ExecutorFn = if null_exec { None } else { Some(EXECS[ex]) };
        let user = user_ptr(us);
        let th = if self.rng.pct(10) {
            Th::Helper
        } else {
            Th::Main
        };
        let desc = format!(
            "dagrt_register_callable({shown}, {ns}, {kind}, {}, {}, {})",
            if null_exec {
                "NULL".to_string()
            } else {
                format!("exec{ex}")
            },
            ["&U0", "&U1", "NULL"][us],
            out_arg(null_out, "&c")
        );
        let nsu = ns;
        let st = self.call(th, desc, &exp, move || {
            cc::dagrt_register_callable(namep, nsu, kind, exec, user, outp)
        })?;
        if st != Status::Ok {
            return self.check_out_untouched(out == sentinel, "dagrt_register_callable");
        }
        self.check(
            out.kind == kind && out.ns == ns,
            "callable identity fields",
            || {
                format!(
                    "identity kind {} ns {} for kind {kind} ns {ns}",
                    out.kind, out.ns
                )
            },
        )?;
        let mut reg = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
        match existing {
            Some((_, _, id)) => {
                drop(reg);
                self.check(
                    id == out,
                    "re-registration returned another identity",
                    || format!("{name}/{ns}/{kind}: identity changed on re-registration"),
                )?;
            }
            None => {
                let clash = reg.values().any(|(_, _, id)| id.digest == out.digest);
                reg.insert((name.clone(), ns, kind), (ex, us, out));
                drop(reg);
                self.check(!clash, "two callables share a digest", || {
                    format!("{name}/{ns}/{kind} has the digest of another identity")
                })?;
            }
        }
        Ok(())
    }
}

/// Re-export of the executor pointer type (an Option of the executor function).
mod cc_exec {
    pub type ExecutorFn = dagrt::callable::ExecutorFn;
}
