//! The four submits: one call with every defect the model can predict, and what it expects.

use crate::executors::{
    CFG_MAGIC, F_EXEC_SHIFT, F_GATED, F_GATE_SHIFT, F_MEMBER_SHIFT, F_PROBE, F_USER_SHIFT, MAGIC,
    MAXM,
};
use crate::ffi::{align1024, hash_tensors, hash_u64s, out_ptr, sname};
use crate::format::{fmt_callable, fmt_dep, fmt_tensor};
use crate::fuzzer::Fz;
use crate::model::{EdgeM, FState, HeapBuf, NodeM, TaskM, Th, LANE_IDS, R};
use crate::orch::{HClass, MemberSpec, TInfo};
use dagrt::callable::Callable;
use dagrt::capi::args as ca;
use dagrt::capi::orch as co;
use dagrt::error::Status;
use dagrt::task::{CallConfig, Dep, Tag, TaskArgs, TaskHandle, Tensor};
use std::sync::Arc;
use std::time::Instant;

impl Fz {
    pub(crate) fn op_submit(&mut self) -> R {
        if self.next_rec >= self.rec.nodes.len() {
            return Ok(());
        }
        let oc = self.orch_ctx();
        let ri = oc.ready_run();
        let wi = oc.wi;
        let (nl, nsub, ring) = wi.map_or((vec![0], 1, 1 << 30), |w| {
            (
                self.workers[w].nl.clone(),
                self.workers[w].nsub,
                self.workers[w].ring_size(),
            )
        });
        let mut kinds = Vec::new();
        if !nl.is_empty() {
            kinds.extend([0u64, 0, 1]);
        }
        if nsub > 0 {
            kinds.extend([2u64, 2, 3]);
        }
        let kind = if kinds.is_empty() || self.rng.pct(4) {
            self.rng.below(4)
        } else {
            self.rng.pick(&kinds)
        };
        let group = kind == 1 || kind == 3;
        let sub = kind >= 2;
        let defect = if self.rng.pct(30) {
            self.rng.below(20)
        } else {
            99
        };
        let mut dset: Vec<Status> = Vec::new();
        let mut pre: Vec<Status> = Vec::new(); // checked before the orchestrator's state

        // members and targets
        let mut count: usize = match kind {
            0 | 2 => 1,
            1 => self.rng.range(1, nl.len().clamp(1, 4) as u64) as usize,
            _ => self.rng.range(1, (nsub as usize).clamp(1, 4) as u64) as usize,
        };
        let mut targets: Vec<i32> = Vec::new();
        if !sub {
            let mut pool = nl.clone();
            for _ in 0..count {
                if pool.is_empty() {
                    targets.push(self.rng.pick(&[0, 1, 2]));
                } else {
                    let i = self.rng.idx(pool.len());
                    targets.push(pool.remove(i));
                }
            }
        }
        if sub && nsub == 0 {
            dset.push(Status::UnknownWorker);
        }
        if !sub && nl.is_empty() {
            dset.push(Status::UnknownWorker);
        }
        let mut count0 = false;
        match defect {
            6 if group => {
                count0 = true;
                dset.push(Status::InvalidArgument);
            }
            7 if !sub => {
                let bad: Vec<i32> = [-1, 4242, i32::MIN, i32::MAX]
                    .iter()
                    .copied()
                    .chain(LANE_IDS.iter().copied())
                    .filter(|i| !nl.contains(i))
                    .collect();
                let j = self.rng.idx(targets.len());
                targets[j] = self.rng.pick(&bad);
                dset.push(Status::UnknownWorker);
            }
            7 if kind == 3 => {
                count = nsub as usize + self.rng.range(1, 2) as usize;
                dset.push(if nsub == 0 {
                    Status::UnknownWorker
                } else {
                    Status::InvalidArgument
                });
            }
            8 if kind == 1 && !nl.is_empty() => {
                if count < 2 {
                    count = 2;
                    targets.push(targets[0]);
                } else {
                    let i = self.rng.idx(count);
                    let mut j = self.rng.idx(count);
                    if j == i {
                        j = (i + 1) % count;
                    }
                    targets[j] = targets[i];
                }
                dset.push(Status::DuplicateTarget);
            }
            _ => {}
        }

        // callable
        let task_callable = self.pick_callable(0);
        let (ex, us, mut callable) = task_callable.unwrap_or((
            0,
            0,
            Callable {
                digest: [0; 32],
                kind: 0,
                ns: 0,
            },
        ));
        if task_callable.is_none() {
            dset.push(Status::UnknownCallable);
        }
        let mut callable_null = false;
        match defect {
            0 => {
                callable_null = true;
                pre.push(Status::NullPointer);
            }
            1 => {
                for b in callable.digest.iter_mut() {
                    *b = self.rng.next() as u8;
                }
                dset.push(Status::UnknownCallable);
            }
            2 => {
                if let Some((_, _, c)) = self.pick_callable(1) {
                    callable = c;
                } else {
                    callable.digest[0] ^= 1;
                }
                dset.push(Status::UnknownCallable);
            }
            3 => {
                callable.ns ^= 0x55;
                dset.push(Status::UnknownCallable);
            }
            4 => {
                callable.kind = 1 - callable.kind.min(1);
                dset.push(Status::UnknownCallable);
            }
            _ => {}
        }

        // flags
        let rec = self.next_rec;
        self.next_rec += 1;
        let gate = if ri.is_some()
            && !self.cb_no_gates
            && !self.runs[ri.unwrap_or(0)].no_gates
            && self.rng.pct(12)
        {
            self.pick_gate()
        } else {
            None
        };
        let fail = if self.rng.pct(8) {
            Some((self.rng.idx(count.min(MAXM)), self.rng.range(1, 2)))
        } else {
            None
        };
        let mut flags = (ex as u64) << F_EXEC_SHIFT | (us as u64) << F_USER_SHIFT;
        if let Some(g) = gate {
            flags |= F_GATED | (g as u64) << F_GATE_SHIFT;
        }
        if let Some((m, mode)) = fail {
            flags |= mode | (m as u64) << F_MEMBER_SHIFT;
        } else {
            flags |= 3 << F_MEMBER_SHIFT; // no member matches
        }
        if self.rng.pct(5) {
            flags |= F_PROBE;
        }

        // members
        let rec_addr = Arc::as_ptr(&self.rec) as u64;
        let mut members: Vec<MemberSpec> = Vec::new();
        let cur_handles = ri.map_or(Vec::new(), |r| self.run_handles(r));
        for m in 0..count {
            let nt = match self.rng.below(100) {
                0..=19 => 0,
                20..=54 => 1,
                55..=84 => 2,
                _ => 3,
            };
            let mut tensors = Vec::new();
            let mut info = Vec::new();
            for _ in 0..nt {
                let (t, i) = if self.rng.pct(12) {
                    self.tensor_via_init(wi, ri)?
                } else {
                    self.gen_tensor(wi, ri, true)
                };
                tensors.push(t);
                info.push(i);
            }
            let mut scalars = vec![rec_addr, MAGIC, (rec as u64) << 8 | m as u64, flags];
            for _ in 0..self.rng.below(3) {
                scalars.push(self.rng.next());
            }
            let mut deps = Vec::new();
            if !cur_handles.is_empty() && self.rng.pct(35) {
                for _ in 0..self.rng.range(1, 2) {
                    let recent = &cur_handles[cur_handles.len().saturating_sub(8)..];
                    let h = recent[self.rng.idx(recent.len())];
                    deps.push(Dep {
                        handle: h,
                        kind: self.rng.below(2) as u32,
                        reserved: 0,
                    });
                }
            }
            members.push(MemberSpec {
                tensors,
                info,
                scalars,
                deps,
                reserved: 0,
                null_tensors: false,
                null_scalars: false,
                null_deps: false,
            });
        }
        // member-level defects
        let mut args_null = false;
        let mut workers_null = false;
        let mut forged = false;
        if !members.is_empty() {
            let mi = self.rng.idx(members.len());
            let mm = &mut members[mi];
            match defect {
                5 => {
                    args_null = true;
                    pre.push(Status::NullPointer);
                }
                9 if kind == 1 => {
                    workers_null = true;
                    pre.push(Status::NullPointer);
                }
                10 => {
                    mm.reserved = 1;
                    dset.push(Status::InvalidArgument);
                }
                11 => {
                    if mm.tensors.is_empty() {
                        let (t, i) = self.gen_tensor(wi, ri, false);
                        let mm = &mut members[mi];
                        mm.tensors.push(t);
                        mm.info.push(i);
                    }
                    members[mi].null_tensors = true;
                    dset.push(Status::NullPointer);
                }
                12 => {
                    mm.null_scalars = true;
                    dset.push(Status::NullPointer);
                }
                13 => {
                    if mm.deps.is_empty() {
                        mm.deps.push(Dep {
                            handle: TaskHandle::default(),
                            kind: 0,
                            reserved: 0,
                        });
                    }
                    mm.null_deps = true;
                    dset.push(Status::NullPointer);
                }
                14 | 19 => {
                    let (t, i) = self.gen_tensor(wi, ri, false);
                    let (mut t, mut i) = (t, i);
                    let s = if defect == 19 {
                        i = TInfo {
                            range: None,
                            auto: None,
                        };
                        self.unfittable_auto(&mut t, ring)
                    } else {
                        self.break_tensor(&mut t, &mut i, ring)
                    };
                    let mm = &mut members[mi];
                    let at = self.rng.idx(mm.tensors.len() + 1);
                    mm.tensors.insert(at, t);
                    mm.info.insert(at, i);
                    dset.push(s);
                }
                15 => {
                    let h = cur_handles.last().copied().unwrap_or_default();
                    let (k, r) = if self.rng.pct(50) {
                        (self.rng.range(2, 9) as u32, 0)
                    } else {
                        (0, 1)
                    };
                    mm.deps.push(Dep {
                        handle: h,
                        kind: k,
                        reserved: r,
                    });
                    dset.push(Status::InvalidArgument);
                }
                16..=18 => {
                    if let (Some(w), Some(r)) = (wi, ri) {
                        let h = self.bad_handle(w, r, defect - 16);
                        let c = self.classify_handle(r, &h);
                        let k = self.rng.below(2) as u32;
                        members[mi].deps.push(Dep {
                            handle: h,
                            kind: k,
                            reserved: 0,
                        });
                        if let Some(s) = Self::hclass_status(c) {
                            dset.push(s);
                        }
                        if defect == 17 && Some(h.run_id) == self.runs[r].id {
                            forged = true;
                        }
                    }
                }
                _ => {}
            }
        }
        if count0 {
            count = 0;
        }
        // auto-allocated OUTPUT bytes
        let mut heap_bytes: u64 = 0;
        let mut overflow = false;
        for mm in members.iter().take(count) {
            for (t, i) in mm.tensors.iter().zip(&mm.info) {
                if t.data.is_null() && t.tag == 1 && i.auto.is_some() {
                    match heap_bytes.checked_add(align1024(i.auto.unwrap_or(0))) {
                        Some(v) => heap_bytes = v,
                        None => overflow = true,
                    }
                }
            }
        }
        if heap_bytes > ring {
            dset.push(Status::HeapExhausted);
        }
        if overflow {
            dset.push(Status::InvalidArgument);
        }

        // config
        let cfg = if !sub && self.rng.pct(50) {
            let mut c = CallConfig::default();
            c.user[0] = CFG_MAGIC | rec as u64;
            c.flags = self.rng.below(4) as u32;
            Some(c)
        } else {
            None
        };
        let cfg0 = if sub { 0 } else { cfg.map_or(0, |c| c.user[0]) };

        // expected statuses
        let depth = ri.map_or(1, |r| self.runs[r].frames.len());
        let ring_i = (depth - 1).min(3);
        let Some((exp, lv, start)) =
            self.predict_call(&oc, &pre, &dset, ring_i, heap_bytes, "a submit")?
        else {
            self.rejected.push(rec);
            return Ok(());
        };

        // the call
        let use_builder = self.rng.pct(25) && !matches!(defect, 10..=13 | 15);
        let mut builder_ids: Vec<usize> = Vec::new();
        let mut args: Vec<TaskArgs> = Vec::new();
        if use_builder {
            for (m, mm) in members.iter().enumerate() {
                let bi = self.builder_for(m)?;
                self.fill_builder(bi, mm)?;
                let mut v = TaskArgs {
                    tensors: std::ptr::null_mut(),
                    num_tensors: 0,
                    num_scalars: 0,
                    scalars: std::ptr::null(),
                    deps: std::ptr::null(),
                    num_deps: 0,
                    reserved: 0,
                };
                let bp = self.builders[bi].ptr;
                let vp: *mut TaskArgs = &mut v;
                self.call(
                    Th::Main,
                    format!("dagrt_args_view(a{bi}, &v{m})"),
                    &[Status::Ok],
                    || ca::dagrt_args_view(bp, vp),
                )?;
                args.push(v);
                builder_ids.push(bi);
            }
        } else {
            for mm in members.iter_mut() {
                args.push(TaskArgs {
                    tensors: if mm.null_tensors {
                        std::ptr::null_mut()
                    } else {
                        mm.tensors.as_mut_ptr()
                    },
                    num_tensors: mm.tensors.len() as u32,
                    num_scalars: mm.scalars.len() as u32,
                    scalars: if mm.null_scalars {
                        std::ptr::null()
                    } else {
                        mm.scalars.as_ptr()
                    },
                    deps: if mm.null_deps {
                        std::ptr::null()
                    } else {
                        mm.deps.as_ptr()
                    },
                    num_deps: mm.deps.len() as u32,
                    reserved: mm.reserved,
                });
            }
        }
        let argp: *const TaskArgs = if args_null || args.is_empty() {
            std::ptr::null()
        } else {
            args.as_ptr()
        };
        let wkp: *const i32 = if workers_null || targets.is_empty() {
            std::ptr::null()
        } else {
            targets.as_ptr()
        };
        let cfgp: *const CallConfig = cfg
            .as_ref()
            .map_or(std::ptr::null(), |c| c as *const CallConfig);
        let callp: *const Callable = if callable_null {
            std::ptr::null()
        } else {
            &callable
        };
        let out_null = self.rng.pct(12);
        let mut out = TaskHandle {
            run_id: 0xDEAD,
            slot: 0xBEEF,
        };
        let outp = out_ptr(out_null, &mut out);
        let orch = oc.orch;
        let target0 = targets.first().copied().unwrap_or(0);
        let cnt = count as u32;
        let fname = [
            "dagrt_submit_next_level",
            "dagrt_submit_next_level_group",
            "dagrt_submit_sub",
            "dagrt_submit_sub_group",
        ][kind as usize];
        let mut desc = format!(
            "{fname}({}, {}, ",
            Self::orch_name(&oc),
            if callable_null {
                "NULL".into()
            } else {
                fmt_callable(&callable)
            }
        );
        if args_null {
            desc += "NULL";
        } else {
            let ms: Vec<String> = members
                .iter()
                .enumerate()
                .map(|(m, mm)| {
                    let ts: Vec<String> = mm.tensors.iter().map(fmt_tensor).collect();
                    let ds: Vec<String> = mm.deps.iter().map(fmt_dep).collect();
                    format!(
                        "m{m}{}{{rec {rec}{}{}; t[{}]{}; d[{}]{}; sc {}{}{}}}",
                        if use_builder {
                            format!(" via a{}", builder_ids[m])
                        } else {
                            String::new()
                        },
                        if gate.is_some() {
                            format!(" gate{}", gate.unwrap_or(0))
                        } else {
                            String::new()
                        },
                        if fail.is_some_and(|f| f.0 == m) {
                            " FAILS"
                        } else {
                            ""
                        },
                        ts.join("; "),
                        if mm.null_tensors {
                            " (tensors NULL)"
                        } else {
                            ""
                        },
                        ds.join(", "),
                        if mm.null_deps { " (deps NULL)" } else { "" },
                        mm.scalars.len(),
                        if mm.null_scalars { " (NULL)" } else { "" },
                        if mm.reserved != 0 {
                            format!(" reserved {}", mm.reserved)
                        } else {
                            String::new()
                        }
                    )
                })
                .collect();
            desc += &format!("[{}]", ms.join(", "));
        }
        if group {
            desc += &format!(", count {count}");
        }
        if !sub {
            desc += &format!(", cfg {}", if cfg.is_some() { "&c" } else { "NULL" });
            if group {
                desc += &format!(
                    ", workers {}",
                    if workers_null {
                        "NULL".into()
                    } else {
                        format!("{targets:?}")
                    }
                );
            } else {
                desc += &format!(", worker {target0}");
            }
        }
        desc += if out_null { ", NULL)" } else { ", &h)" };
        let orig: Vec<Vec<Tensor>> = members.iter().map(|mm| mm.tensors.clone()).collect();
        let t0 = Instant::now();
        self.hint = if forged {
            Some(
                "forged task handle accepted as a dependency (run id of the run being built, a slot id never issued)"
                    .into(),
            )
        } else {
            self.slot_hint.take()
        };
        let st = self.call(oc.th, desc, &exp, || match kind {
            0 => co::dagrt_submit_next_level(orch, callp, argp, cfgp, target0, outp),
            1 => co::dagrt_submit_next_level_group(orch, callp, argp, cnt, cfgp, wkp, outp),
            2 => co::dagrt_submit_sub(orch, callp, argp, outp),
            _ => co::dagrt_submit_sub_group(orch, callp, argp, cnt, outp),
        })?;
        let el = t0.elapsed();

        // the tensors as the engine left them (auto-allocated addresses written back)
        let mut finals: Vec<Vec<Tensor>> = Vec::new();
        for (m, mm) in members.iter().enumerate() {
            if use_builder {
                let bi = builder_ids[m];
                let mut v = Vec::new();
                for k in 0..mm.tensors.len() {
                    let mut t = mm.tensors[k];
                    let bp = self.builders[bi].ptr;
                    let tp: *mut Tensor = &mut t;
                    let kk = k as u32;
                    let s = ca::dagrt_args_get_tensor(bp, kk, tp);
                    if s != Status::Ok {
                        return self.fatal(
                            "dagrt_args_get_tensor failed",
                            format!("get_tensor(a{bi}, {k}) after a submit: {}", sname(s)),
                        );
                    }
                    v.push(t);
                }
                self.builders[bi].tensors = v.clone();
                finals.push(v);
            } else {
                finals.push(mm.tensors.clone());
            }
        }
        if st != Status::Ok {
            self.rejected.push(rec);
            for (m, ts) in orig.iter().enumerate() {
                for (k, t) in ts.iter().enumerate() {
                    if t.data.is_null() && !finals[m][k].data.is_null() {
                        return self.fatal("auto-allocated address written on a failed submit", format!("member {m} tensor {k}: data {:?} written although the submit failed", finals[m][k].data));
                    }
                }
            }
            self.check(
                out.run_id == 0xDEAD && out.slot == 0xBEEF,
                "submit wrote the handle on failure",
                || "out-parameter written on failure".into(),
            )?;
            if let (Some(w), Status::WindowFull | Status::HeapExhausted) = (wi, st) {
                self.check_backpressure(w, st, el, dset.contains(&Status::HeapExhausted))?;
            }
            return Ok(());
        }

        // success: update the model
        let w = wi.expect("submit succeeded on a worker");
        let ri = ri.expect("submit succeeded with a run");
        let lv = lv.expect("liveness computed for a valid submit");
        let node = self.nodes.len();
        let handle = (!out_null).then_some(out);
        let seq = self.take_seq(w, ri, handle)?;
        // heap placement
        let size = self.workers[w].ring_size();
        let mut cursor = 0u64;
        if heap_bytes > 0 {
            let first = finals
                .iter()
                .zip(&orig)
                .flat_map(|(f, o)| f.iter().zip(o.iter()))
                .find(|(f, o)| o.data.is_null() && o.tag == 1 && !f.data.is_null())
                .map(|(f, _)| f.data as u64);
            let base = self.ring_base(w, ring_i, first.unwrap_or(0), start)?;
            cursor = base + start % size;
            let ring_m = &mut self.workers[w].rings[ring_i];
            ring_m.res.push((start, start + heap_bytes, node));
            ring_m.top = start + heap_bytes;
            let (slo, shi) = (cursor, cursor + heap_bytes);
            self.drop_reallocated(ri, slo, shi);
        }
        for (m, mm) in members.iter_mut().enumerate() {
            for k in 0..mm.tensors.len() {
                if orig[m][k].data.is_null() {
                    // a zero-size one keeps its NULL (header: no buffer)
                    let bytes = mm.info[k].auto.unwrap_or(0);
                    let want = if bytes > 0 { cursor } else { 0 };
                    let got = finals[m][k].data as u64;
                    self.check(got == want, "auto-allocated OUTPUT address", || format!("member {m} tensor {k}: written-back address {got:#x}, the ring model expects {want:#x}"))?;
                    if bytes > 0 {
                        self.check(got % 1024 == 0, "auto-allocated OUTPUT alignment", || {
                            format!("address {got:#x} not 1024-aligned")
                        })?;
                        mm.info[k].range = Some((got, got + bytes));
                    }
                    cursor += align1024(bytes);
                }
            }
        }
        // dependencies: explicit deps, then the tag walk: every member's lookups before any
        // insert (a task's reads see the writers before it, whatever the order of its tensors)
        let mut prods: Vec<(usize, bool)> = Vec::new();
        let mut reads: Vec<(u64, u64)> = Vec::new();
        let add = |v: &mut Vec<(usize, bool)>, p: usize, retain: bool| {
            if let Some(e) = v.iter_mut().find(|e| e.0 == p) {
                e.1 |= retain;
            } else {
                v.push((p, retain));
            }
        };
        for mm in &members {
            for d in &mm.deps {
                if let HClass::Valid(p) = self.classify_handle(ri, &d.handle) {
                    add(&mut prods, p, d.kind == 0);
                }
            }
        }
        let frame = *self.runs[ri]
            .frames
            .last()
            .expect("an open run has a frame");
        for (m, mm) in members.iter().enumerate() {
            for (k, i) in mm.info.iter().enumerate() {
                let tag = finals[m][k].tag;
                let Some((lo, hi)) = i.range else { continue };
                if tag == 0 || tag == 2 {
                    reads.push((lo, hi));
                    // A read of a runtime-owned buffer holds the node that owns its slab (the
                    // latest allocation at that address in this run).
                    if let Some(b) = self
                        .heapbufs
                        .iter()
                        .rev()
                        .find(|b| b.run == ri && b.ptr <= lo && lo < b.ptr + b.len)
                    {
                        if b.node != node {
                            add(&mut prods, b.node, true);
                        }
                    }
                    for e in &self.runs[ri].tmap {
                        if e.0 < hi && lo < e.1 && e.2 != node {
                            add(&mut prods, e.2, true);
                        }
                    }
                }
            }
        }
        for (m, mm) in members.iter().enumerate() {
            for (k, i) in mm.info.iter().enumerate() {
                let tag = finals[m][k].tag;
                let Some((lo, hi)) = i.range else { continue };
                if tag == 1 || tag == 2 || tag == 3 {
                    // A dense write replaces what it covers; a dense entry it overlaps only
                    // in part keeps exactly the bytes left over.
                    let tm = &mut self.runs[ri].tmap;
                    let mut next = Vec::with_capacity(tm.len() + 2);
                    for &e in tm.iter() {
                        if e.0 < hi && lo < e.1 {
                            if e.0 < lo {
                                next.push((e.0, lo, e.2));
                            }
                            if hi < e.1 {
                                next.push((hi, e.1, e.2));
                            }
                        } else {
                            next.push(e);
                        }
                    }
                    next.push((lo, hi, node));
                    *tm = next;
                }
                if i.auto.is_some() {
                    self.heapbufs.push(HeapBuf {
                        ptr: lo,
                        len: hi - lo,
                        run: ri,
                        frame,
                        node,
                    });
                }
            }
        }
        let producers: Vec<EdgeM> = prods
            .iter()
            .map(|&(p, retain)| EdgeM {
                p,
                retain,
                certain: lv.dl[p],
            })
            .collect();
        // The executor's view: the tensors as written back, every tag consumed (NO_DEP).
        let thash = finals
            .iter()
            .map(|f| {
                let seen: Vec<Tensor> = f
                    .iter()
                    .map(|t| Tensor {
                        tag: Tag::NoDep as u32,
                        ..*t
                    })
                    .collect();
                hash_tensors(&seen)
            })
            .collect();
        let shash = members.iter().map(|mm| hash_u64s(&mm.scalars)).collect();
        self.nodes.push(NodeM {
            run: ri,
            worker: w,
            rec,
            seq,
            reads,
            handle,
            frame,
            producers,
            task: Some(TaskM {
                members: count,
                sub,
                targets: targets.clone(),
                gate,
                fail,
                cfg0,
                thash,
                shash,
            }),
            fstate: FState::Normal,
        });
        self.runs[ri].nodes.push(node);
        self.totals.nodes += 1;
        self.add_handle(handle, node);
        Ok(())
    }
}
