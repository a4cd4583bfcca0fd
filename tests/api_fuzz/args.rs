//! Generating a submission's arguments: valid and broken tensors, callables, gates, handles,
//! and the builders they are put into.

use crate::executors::MAX_GATES;
use crate::ffi::{esize, hash_tensors};
use crate::format::{fmt_handle, fmt_tensor};
use crate::fuzzer::Fz;
use crate::model::{Builder, Th, HOST_BASE, HOST_BUFS, HOST_LEN, HOST_STRIDE, R, REGISTRY};
use crate::orch::{MemberSpec, TInfo};
use dagrt::callable::Callable;
use dagrt::capi::args::{self as ca, dagrt_args_t};
use dagrt::error::Status;
use dagrt::task::{TaskHandle, Tensor};
use std::ffi::c_void;

/// `dagrt_args_add_dep` (retaining) or `dagrt_args_add_dep_wait` of `h` on builder `bp`.
pub(crate) fn args_add_dep(bp: *mut dagrt_args_t, h: TaskHandle, wait: bool) -> Status {
    if wait {
        ca::dagrt_args_add_dep_wait(bp, h)
    } else {
        ca::dagrt_args_add_dep(bp, h)
    }
}

/// The description of that call on builder `bn`.
pub(crate) fn add_dep_desc(bn: &str, h: &TaskHandle, wait: bool) -> String {
    format!(
        "dagrt_args_add_dep{}({bn}, {})",
        if wait { "_wait" } else { "" },
        fmt_handle(h)
    )
}

impl Fz {
    /// A valid tensor view: a host buffer range, a heap buffer of the run, an
    /// auto-allocated OUTPUT, or a zero-extent view.
    pub(crate) fn gen_tensor(
        &mut self,
        wi: Option<usize>,
        ri: Option<usize>,
        allow_auto: bool,
    ) -> (Tensor, TInfo) {
        let ring = wi.map_or(1 << 30, |w| self.workers[w].ring_size());
        let mut t = Tensor {
            data: std::ptr::null_mut(),
            offset: 0,
            ndim: 1,
            dtype: 0,
            tag: 0,
            reserved: 0,
            shape: [0; 5],
            strides: [0; 5],
        };
        let dtype = self
            .rng
            .pick(&[0u32, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        let e = esize(dtype);
        t.dtype = dtype;
        let r = self.rng.below(100);
        if r < 18 && allow_auto {
            // auto-allocated OUTPUT
            let bytes = match self.rng.below(100) {
                0..=69 => self.rng.range(1, 1500),
                70..=94 => self.rng.range(ring / 8, ring / 3).max(1),
                _ => self.rng.range(ring / 2, ring).max(1),
            };
            let n = (bytes / e).max(1);
            let zero = self.rng.pct(4);
            t.tag = 1;
            self.shape_dense(&mut t, if zero { 0 } else { n });
            let dense = if zero { 0 } else { n * e };
            return (
                t,
                TInfo {
                    range: None,
                    auto: Some(dense),
                },
            );
        }
        let tag = match self.rng.below(100) {
            0..=34 => 0,
            35..=49 => 1,
            50..=74 => 2,
            75..=89 => 3,
            _ => 4,
        };
        t.tag = tag;
        let bufs: Vec<(u64, u64)> = match ri {
            Some(ri) => self
                .heapbufs
                .iter()
                .filter(|b| b.run == ri && self.frames[b.frame])
                .map(|b| (b.ptr, b.len))
                .collect(),
            None => Vec::new(),
        };
        let (base, len) = if r < 35 && !bufs.is_empty() {
            // Runtime-owned memory is reclaimed once nothing references it: a writer must be
            // INOUT to keep it alive (OUTPUT / OUTPUT_EXISTING would race its reclamation).
            t.tag = match self.rng.below(10) {
                0..=4 => 0,
                5..=8 => 2,
                _ => 4,
            };
            self.rng.pick(&bufs)
        } else {
            (
                HOST_BASE + self.rng.below(HOST_BUFS) * HOST_STRIDE,
                HOST_LEN,
            )
        };
        let elems = len / e;
        if elems == 0 {
            // a heap buffer smaller than one element of this dtype: view it as bytes
            t.dtype = 0;
            return self.finish_view(t, base, 0, len.max(1), 1, t.tag);
        }
        let (o, k) = match self.rng.below(100) {
            0..=39 => (0, elems),
            40..=59 => {
                let h = (elems / 2).max(1);
                if self.rng.pct(50) || elems < 2 {
                    (0, h)
                } else {
                    (h, elems - h)
                }
            }
            60..=69 => {
                let q = (elems / 4).max(1);
                let i = self.rng.below(4).min(elems / q - 1);
                (i * q, q)
            }
            _ => {
                let o = self.rng.below(elems);
                (o, self.rng.range(1, elems - o))
            }
        };
        self.finish_view(t, base, o * e, k, e, t.tag)
    }

    fn finish_view(
        &mut self,
        mut t: Tensor,
        base: u64,
        off: u64,
        n: u64,
        e: u64,
        tag: u32,
    ) -> (Tensor, TInfo) {
        if self.rng.pct(50) {
            t.data = base as *mut c_void;
            t.offset = off;
        } else {
            t.data = (base + off) as *mut c_void;
        }
        let zero = self.rng.pct(4);
        self.shape_dense(&mut t, if zero { 0 } else { n });
        let lo = base + off;
        let range = if zero || tag == 4 {
            None
        } else {
            Some((lo, lo + n * e))
        };
        (t, TInfo { range, auto: None })
    }

    /// Shape `t` as a dense view of `n` elements: 0-D, 1-D, or 2-D (zero strides, or
    /// explicit row-major strides).
    fn shape_dense(&mut self, t: &mut Tensor, n: u64) {
        t.shape = [0; 5];
        t.strides = [0; 5];
        if n == 0 {
            t.ndim = self.rng.range(1, 2) as u32;
            t.shape[0] = 0;
            if t.ndim == 2 {
                t.shape[1] = 3;
            }
            return;
        }
        if n == 1 && self.rng.pct(50) {
            t.ndim = 0;
            return;
        }
        if n % 2 == 0 && n > 2 && self.rng.pct(25) {
            t.ndim = 2;
            t.shape[0] = 2;
            t.shape[1] = n / 2;
            // explicit row-major strides (still dense) only on views with data: an
            // auto-allocated OUTPUT must use the zero-stride form
            if !t.data.is_null() && self.rng.pct(50) {
                t.strides[0] = n / 2;
                t.strides[1] = 1;
            }
            return;
        }
        t.ndim = 1;
        t.shape[0] = n;
    }

    /// Break one tensor: returns the status the defect must produce.
    pub(crate) fn break_tensor(&mut self, t: &mut Tensor, info: &mut TInfo, ring: u64) -> Status {
        *info = TInfo {
            range: None,
            auto: None,
        };
        match self.rng.below(9) {
            0 => {
                t.tag = self.rng.pick(&[5, 77, u32::MAX]);
                Status::InvalidArgument
            }
            1 => {
                t.dtype = self.rng.pick(&[13, 200]);
                Status::InvalidArgument
            }
            2 => {
                t.ndim = self.rng.range(6, 9) as u32;
                Status::InvalidArgument
            }
            3 => {
                t.reserved = 1;
                Status::InvalidArgument
            }
            4 => {
                t.data = std::ptr::null_mut();
                t.offset = 0;
                t.tag = self.rng.pick(&[0, 2, 3, 4]); // OUTPUT_EXISTING included
                Status::InvalidArgument
            }
            5 => {
                t.data = std::ptr::null_mut();
                t.tag = 1;
                t.ndim = 2;
                t.shape = [4, 4, 0, 0, 0];
                if self.rng.pct(50) {
                    t.strides = [1, 8, 0, 0, 0];
                    t.offset = 0;
                } else {
                    t.strides = [0; 5];
                    t.offset = 8;
                }
                Status::InvalidArgument
            }
            6 => {
                t.data = std::ptr::null_mut();
                t.tag = 1;
                t.offset = 0;
                t.ndim = 2;
                t.dtype = 7;
                t.shape = [u64::MAX / 2, 4, 0, 0, 0];
                t.strides = [0; 5];
                Status::InvalidArgument
            }
            7 => {
                t.data = 0xFFFF_FFFF_FFFF_F000usize as *mut c_void;
                t.offset = 0;
                t.tag = self.rng.pick(&[0, 2, 3]);
                t.ndim = 1;
                t.dtype = 7;
                t.shape = [1 << 20, 0, 0, 0, 0];
                t.strides = [0; 5];
                Status::InvalidArgument
            }
            _ => self.unfittable_auto(t, ring),
        }
    }

    /// Make `t` an auto-allocated OUTPUT that can never fit in a ring of `ring` bytes: returns
    /// the status that must produce.
    pub(crate) fn unfittable_auto(&mut self, t: &mut Tensor, ring: u64) -> Status {
        t.data = std::ptr::null_mut();
        t.tag = 1;
        t.offset = 0;
        t.ndim = 1;
        t.dtype = 0;
        t.shape = [ring + 1 + self.rng.below(4096), 0, 0, 0, 0];
        t.strides = [0; 5];
        Status::HeapExhausted
    }

    pub(crate) fn pick_callable(&mut self, kind: u32) -> Option<(usize, usize, Callable)> {
        let reg = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
        let v: Vec<(usize, usize, Callable)> = reg
            .iter()
            .filter(|(k, _)| k.2 == kind)
            .map(|(_, v)| *v)
            .collect();
        drop(reg);
        if v.is_empty() {
            None
        } else {
            Some(v[self.rng.idx(v.len())])
        }
    }

    /// The closed gates tasks wait on (one entry per such task).
    pub(crate) fn gates_in_use(&self) -> Vec<usize> {
        self.nodes
            .iter()
            .filter_map(|n| n.task.as_ref().and_then(|t| t.gate))
            .filter(|&g| !self.gates[g])
            .collect()
    }

    pub(crate) fn pick_gate(&mut self) -> Option<usize> {
        let used = self.gates_in_use();
        if !used.is_empty() && self.rng.pct(60) {
            return Some(self.rng.pick(&used));
        }
        let fresh = (0..MAX_GATES).find(|&g| {
            !self.gates[g]
                && !self
                    .nodes
                    .iter()
                    .any(|n| n.task.as_ref().is_some_and(|t| t.gate == Some(g)))
        });
        fresh.or_else(|| used.first().copied())
    }

    /// Handles of the current run the model knows (deps for valid submits).
    pub(crate) fn run_handles(&self, ri: usize) -> Vec<TaskHandle> {
        self.handles
            .iter()
            .filter(|(_, n)| self.nodes[*n].run == ri)
            .map(|(h, _)| *h)
            .collect()
    }

    /// A handle that is not valid in run `ri`: foreign, stale or forged.
    pub(crate) fn bad_handle(&mut self, wi: usize, ri: usize, kind: u64) -> TaskHandle {
        let others: Vec<TaskHandle> = self
            .handles
            .iter()
            .filter(|(_, n)| self.nodes[*n].run != ri)
            .map(|(h, _)| *h)
            .collect();
        let cur = self.runs[ri].id;
        match kind {
            // another run (foreign while it is registered somewhere, else stale)
            0 if !others.is_empty() => self.rng.pick(&others),
            // forged: the current run id with a slot that names no task of this run
            1 if cur.is_some() => {
                let idx = |s: u64| s & ((1 << 24) - 1);
                let mine: Vec<u64> = self.run_handles(ri).iter().map(|h| h.slot).collect();
                // The engine tells a never-issued id only from a table entry's last four
                // occupants: the sequence half is taken from one of the four most recent
                // submits, so no entry can have seen four newer tasks since (an older one is
                // indistinguishable from a consumed task and treated as finished).
                let recent = self.workers[wi].next_seq.saturating_sub(4);
                let mut pairs = Vec::new();
                for &a in mine.iter().filter(|&&a| a >> 24 >= recent) {
                    for &b in &mine {
                        if idx(a) != idx(b) {
                            pairs.push((a, b));
                        }
                    }
                }
                let earlier: Vec<u64> = self
                    .handles
                    .iter()
                    .filter(|(_, n)| self.nodes[*n].worker == wi && self.nodes[*n].run < ri)
                    .map(|(h, _)| h.slot)
                    .collect();
                let slot = match self.rng.below(5) {
                    // the sequence number of one task with the table index of another: each
                    // sequence number is issued once, so this id was never issued
                    0 | 1 if !pairs.is_empty() => {
                        let (a, b) = self.rng.pick(&pairs);
                        (a >> 24) << 24 | idx(b)
                    }
                    // a sequence number not issued yet
                    2 => (self.workers[wi].next_seq + self.rng.below(3)) << 24 | self.rng.below(8),
                    // a slot of an earlier run of this worker
                    3 if !earlier.is_empty() => self.rng.pick(&earlier),
                    _ => self.rng.next() | 1 << 62,
                };
                TaskHandle {
                    run_id: cur.unwrap_or(0),
                    slot,
                }
            }
            _ => TaskHandle {
                run_id: self.other_run_id(Some(wi), Some(ri)),
                slot: self.rng.next() & 0xFF_FFFF_FFFF,
            },
        }
    }

    /// A tensor made with dagrt_tensor_init / _init_strided (valid arguments).
    pub(crate) fn tensor_via_init(
        &mut self,
        wi: Option<usize>,
        ri: Option<usize>,
    ) -> R<(Tensor, TInfo)> {
        let (want, info) = self.gen_tensor(wi, ri, true);
        let mut t = Tensor {
            data: std::ptr::null_mut(),
            offset: 1,
            ndim: 9,
            dtype: 99,
            tag: 99,
            reserved: 9,
            shape: [9; 5],
            strides: [9; 5],
        };
        let tp: *mut Tensor = &mut t;
        let shape = want.shape;
        let strides = want.strides;
        let strided = want.offset != 0 || strides.iter().any(|&s| s != 0);
        let (d, o, dt, nd, tag) = (want.data, want.offset, want.dtype, want.ndim, want.tag);
        let desc = format!(
            "dagrt_tensor_init{}(&t, {:#x}, dt{dt}, nd{nd}, shape, tag{tag})",
            if strided { "_strided" } else { "" },
            d as u64
        );
        self.call(Th::Main, desc, &[Status::Ok], || {
            if strided {
                ca::dagrt_tensor_init_strided(
                    tp,
                    d,
                    o,
                    dt,
                    nd,
                    shape.as_ptr(),
                    strides.as_ptr(),
                    tag,
                )
            } else {
                ca::dagrt_tensor_init(tp, d, dt, nd, shape.as_ptr(), tag)
            }
        })?;
        self.check(
            hash_tensors(&[t]) == hash_tensors(&[want]),
            "dagrt_tensor_init result",
            || format!("got {} expected {}", fmt_tensor(&t), fmt_tensor(&want)),
        )?;
        Ok((t, info))
    }

    /// The builder used for member `m` of a submit (created if needed).
    pub(crate) fn builder_for(&mut self, m: usize) -> R<usize> {
        while self.builders.len() <= m {
            let mut out: *mut dagrt_args_t = std::ptr::null_mut();
            let op: *mut *mut dagrt_args_t = &mut out;
            self.call(Th::Main, "dagrt_args_new(&a)".into(), &[Status::Ok], || {
                ca::dagrt_args_new(op)
            })?;
            self.builders.push(Builder::new(out));
        }
        Ok(m)
    }

    pub(crate) fn fill_builder(&mut self, bi: usize, mm: &MemberSpec) -> R {
        let bp = self.builders[bi].ptr;
        self.call(
            Th::Main,
            format!("dagrt_args_clear(a{bi})"),
            &[Status::Ok],
            || ca::dagrt_args_clear(bp),
        )?;
        // deps first or last: the builder accepts them in any order
        let deps_first = self.rng.pct(50);
        let add_deps = |fz: &mut Fz| -> R {
            for d in &mm.deps {
                let h = d.handle;
                let wait = d.kind == 1;
                fz.call(
                    Th::Main,
                    add_dep_desc(&format!("a{bi}"), &h, wait),
                    &[Status::Ok],
                    || args_add_dep(bp, h, wait),
                )?;
            }
            Ok(())
        };
        if deps_first {
            add_deps(self)?;
        }
        for t in &mm.tensors {
            let tp: *const Tensor = t;
            self.call(
                Th::Main,
                format!("dagrt_args_add_tensor(a{bi}, {})", fmt_tensor(t)),
                &[Status::Ok],
                || ca::dagrt_args_add_tensor(bp, tp),
            )?;
        }
        for &v in &mm.scalars {
            self.call(
                Th::Main,
                format!("dagrt_args_add_scalar(a{bi}, {v:#x})"),
                &[Status::Ok],
                || ca::dagrt_args_add_scalar(bp, v),
            )?;
        }
        if !deps_first {
            add_deps(self)?;
        }
        let b = &mut self.builders[bi];
        b.tensors = mm.tensors.clone();
        b.scalars = mm.scalars.clone();
        b.deps = mm.deps.clone();
        Ok(())
    }
}
