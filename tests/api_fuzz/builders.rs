//! The args builder and the tensor initialisers fuzzed on their own, outside a submit.

use crate::args::{add_dep_desc, args_add_dep};
use crate::ffi::{hash_tensors, null_or_ok, ok_if_none, out_arg, out_ptr};
use crate::format::fmt_tensor;
use crate::fuzzer::Fz;
use crate::model::{Builder, Th, HOST_BASE, HOST_BUFS, HOST_STRIDE, R};
use dagrt::capi::args::{self as ca, dagrt_args_t};
use dagrt::error::Status;
use dagrt::task::{Dep, TaskArgs, TaskHandle, Tensor};
use std::ffi::c_void;

impl Fz {
    pub(crate) fn op_tensor_init(&mut self) -> R {
        let strided = self.rng.pct(40);
        let r = self.rng.below(100);
        let ndim: u32 = if (10..20).contains(&r) {
            self.rng.range(6, 8) as u32
        } else {
            self.rng.range(0, 5) as u32
        };
        let null_out = r < 10;
        let null_shape = (20..30).contains(&r) && ndim > 0;
        let null_strides = strided && (30..40).contains(&r) && ndim > 0;
        let shape: [u64; 8] = std::array::from_fn(|_| self.rng.range(0, 9));
        let strides: [u64; 8] = std::array::from_fn(|_| self.rng.range(0, 20));
        let data = if self.rng.pct(30) {
            std::ptr::null_mut()
        } else {
            (HOST_BASE + self.rng.below(HOST_BUFS) * HOST_STRIDE) as *mut c_void
        };
        let dtype = self.rng.below(15) as u32;
        let tag = self.rng.below(6) as u32;
        let off = self.rng.below(64);
        let mut exp = Vec::new();
        if null_out || null_shape || null_strides {
            exp.push(Status::NullPointer);
        }
        if ndim > 5
            || dagrt::task::dtype_size(dtype).is_none()
            || dagrt::task::Tag::from_u32(tag).is_none()
        {
            exp.push(Status::InvalidArgument);
        }
        ok_if_none(&mut exp);
        let sentinel = Tensor {
            data: 0x77usize as *mut c_void,
            offset: 77,
            ndim: 77,
            dtype: 77,
            tag: 77,
            reserved: 77,
            shape: [77; 5],
            strides: [77; 5],
        };
        let mut out = sentinel;
        let outp = out_ptr(null_out, &mut out);
        let shp: *const u64 = if null_shape {
            std::ptr::null()
        } else {
            shape.as_ptr()
        };
        let stp: *const u64 = if null_strides {
            std::ptr::null()
        } else {
            strides.as_ptr()
        };
        let desc = format!(
            "dagrt_tensor_init{}({}, {:#x}, dt{dtype}, nd{ndim}, {}, tag{tag})",
            if strided { "_strided" } else { "" },
            out_arg(null_out, "&t"),
            data as u64,
            if null_shape { "NULL" } else { "shape" }
        );
        let st = self.call(Th::Main, desc, &exp, || {
            if strided {
                ca::dagrt_tensor_init_strided(outp, data, off, dtype, ndim, shp, stp, tag)
            } else {
                ca::dagrt_tensor_init(outp, data, dtype, ndim, shp, tag)
            }
        })?;
        if st != Status::Ok {
            return self
                .check_out_untouched(out.offset == 77 && out.ndim == 77, "dagrt_tensor_init");
        }
        let nd = ndim as usize;
        let mut ws = [0u64; 5];
        ws[..nd].copy_from_slice(&shape[..nd]);
        let mut wst = [0u64; 5];
        if strided {
            wst[..nd].copy_from_slice(&strides[..nd]);
        }
        let ok = out.data == data
            && out.offset == if strided { off } else { 0 }
            && out.ndim == ndim
            && out.dtype == dtype
            && out.tag == tag
            && out.reserved == 0
            && out.shape == ws
            && out.strides == wst;
        self.check(ok, "dagrt_tensor_init result", || {
            format!("initialised tensor {out:?} does not match the arguments")
        })
    }

    pub(crate) fn op_builder(&mut self) -> R {
        let r = self.rng.below(100);
        // new / free
        if r < 12 || self.builders.is_empty() {
            let null_out = self.rng.pct(8);
            let sentinel = 0xB1D0usize as *mut dagrt_args_t;
            let mut out = sentinel;
            let op = out_ptr(null_out, &mut out);
            let exp = null_or_ok(null_out);
            let st = self.call(
                Th::Main,
                format!("dagrt_args_new({})", out_arg(null_out, "&a")),
                &exp,
                || ca::dagrt_args_new(op),
            )?;
            if st == Status::Ok {
                self.check(
                    !out.is_null() && out != sentinel,
                    "dagrt_args_new result",
                    || "no builder returned".into(),
                )?;
                self.builders.push(Builder::new(out));
            } else {
                self.check_out_untouched(out == sentinel, "dagrt_args_new")?;
            }
            return Ok(());
        }
        if r < 17 {
            let i = self.rng.idx(self.builders.len() + 1);
            if i == self.builders.len() {
                self.log(format!("#{:<4} main dagrt_args_free(NULL)", self.step));
                ca::dagrt_args_free(std::ptr::null_mut());
            } else {
                let b = self.builders.remove(i);
                self.log(format!("#{:<4} main dagrt_args_free(a{i})", self.step));
                ca::dagrt_args_free(b.ptr);
            }
            return Ok(());
        }
        let bi = self.rng.idx(self.builders.len());
        let null_b = self.rng.pct(6);
        let bp = if null_b {
            std::ptr::null_mut()
        } else {
            self.builders[bi].ptr
        };
        let bn = if null_b {
            "NULL".to_string()
        } else {
            format!("a{bi}")
        };
        let op = self.rng.below(8);
        match op {
            0 => {
                let exp = null_or_ok(null_b);
                let st = self.call(Th::Main, format!("dagrt_args_clear({bn})"), &exp, || {
                    ca::dagrt_args_clear(bp)
                })?;
                if st == Status::Ok {
                    let b = &mut self.builders[bi];
                    b.tensors.clear();
                    b.scalars.clear();
                    b.deps.clear();
                }
            }
            1 => {
                let null_t = self.rng.pct(8);
                let t = self.any_tensor();
                let tp: *const Tensor = if null_t { std::ptr::null() } else { &t };
                let exp = null_or_ok(null_b || null_t);
                let st = self.call(
                    Th::Main,
                    format!(
                        "dagrt_args_add_tensor({bn}, {})",
                        if null_t {
                            "NULL".into()
                        } else {
                            fmt_tensor(&t)
                        }
                    ),
                    &exp,
                    || ca::dagrt_args_add_tensor(bp, tp),
                )?;
                if st == Status::Ok {
                    self.builders[bi].tensors.push(t);
                }
            }
            2 => {
                let v = self.rng.next();
                let exp = null_or_ok(null_b);
                let st = self.call(
                    Th::Main,
                    format!("dagrt_args_add_scalar({bn}, {v:#x})"),
                    &exp,
                    || ca::dagrt_args_add_scalar(bp, v),
                )?;
                if st == Status::Ok {
                    self.builders[bi].scalars.push(v);
                }
            }
            3 | 4 => {
                let h = self.any_handle();
                let wait = op == 4;
                let exp = null_or_ok(null_b);
                let st = self.call(Th::Main, add_dep_desc(&bn, &h, wait), &exp, || {
                    args_add_dep(bp, h, wait)
                })?;
                if st == Status::Ok {
                    self.builders[bi].deps.push(Dep {
                        handle: h,
                        kind: wait as u32,
                        reserved: 0,
                    });
                }
            }
            5 => {
                let null_out = self.rng.pct(10);
                let mut v = TaskArgs {
                    tensors: std::ptr::null_mut(),
                    num_tensors: 77,
                    num_scalars: 77,
                    scalars: std::ptr::null(),
                    deps: std::ptr::null(),
                    num_deps: 77,
                    reserved: 77,
                };
                let vp = out_ptr(null_out, &mut v);
                let exp = null_or_ok(null_b || null_out);
                let st = self.call(
                    Th::Main,
                    format!("dagrt_args_view({bn}, {})", out_arg(null_out, "&v")),
                    &exp,
                    || ca::dagrt_args_view(bp, vp),
                )?;
                if st == Status::Ok {
                    let b = &self.builders[bi];
                    let (nt, ns, nd) = (b.tensors.len(), b.scalars.len(), b.deps.len());
                    let ok = v.num_tensors as usize == nt
                        && v.num_scalars as usize == ns
                        && v.num_deps as usize == nd
                        && v.reserved == 0;
                    self.check(ok, "dagrt_args_view counts", || {
                        format!(
                            "view {v:?} of a builder with {nt} tensors, {ns} scalars, {nd} deps"
                        )
                    })?;
                } else {
                    self.check_out_untouched(v.num_tensors == 77, "dagrt_args_view")?;
                }
            }
            _ => {
                let n = self.builders[bi].tensors.len() as u32;
                let idx = if self.rng.pct(70) && n > 0 {
                    self.rng.below(n as u64) as u32
                } else {
                    n + self.rng.below(3) as u32
                };
                let null_out = self.rng.pct(8);
                let mut t = Tensor {
                    data: std::ptr::null_mut(),
                    offset: 99,
                    ndim: 99,
                    dtype: 99,
                    tag: 99,
                    reserved: 99,
                    shape: [99; 5],
                    strides: [99; 5],
                };
                let tp = out_ptr(null_out, &mut t);
                let mut exp = Vec::new();
                if null_b || null_out {
                    exp.push(Status::NullPointer);
                }
                if !null_b && idx >= n {
                    exp.push(Status::InvalidArgument);
                }
                ok_if_none(&mut exp);
                let st = self.call(
                    Th::Main,
                    format!(
                        "dagrt_args_get_tensor({bn}, {idx}, {})",
                        out_arg(null_out, "&t")
                    ),
                    &exp,
                    || ca::dagrt_args_get_tensor(bp, idx, tp),
                )?;
                if st == Status::Ok {
                    let m = self.builders[bi].tensors[idx as usize];
                    self.check(
                        hash_tensors(&[m]) == hash_tensors(&[t]),
                        "dagrt_args_get_tensor content",
                        || format!("got {} expected {}", fmt_tensor(&t), fmt_tensor(&m)),
                    )?;
                } else {
                    self.check_out_untouched(t.offset == 99, "dagrt_args_get_tensor")?;
                }
            }
        }
        Ok(())
    }

    /// An arbitrary tensor (builder fuzzing: the builder does not validate).
    fn any_tensor(&mut self) -> Tensor {
        let mut shape = [0u64; 5];
        for s in shape.iter_mut() {
            *s = self.rng.below(9);
        }
        Tensor {
            data: if self.rng.pct(20) {
                std::ptr::null_mut()
            } else {
                (HOST_BASE + self.rng.below(HOST_BUFS) * HOST_STRIDE) as *mut c_void
            },
            offset: self.rng.below(64),
            ndim: self.rng.below(8) as u32,
            dtype: self.rng.below(15) as u32,
            tag: self.rng.below(7) as u32,
            reserved: if self.rng.pct(10) { 1 } else { 0 },
            shape,
            strides: [0; 5],
        }
    }

    /// Any handle the fuzzer has seen, or garbage.
    fn any_handle(&mut self) -> TaskHandle {
        if !self.handles.is_empty() && self.rng.pct(80) {
            let i = self.rng.idx(self.handles.len());
            self.handles[i].0
        } else {
            TaskHandle {
                run_id: self.rng.next(),
                slot: self.rng.next(),
            }
        }
    }
}
