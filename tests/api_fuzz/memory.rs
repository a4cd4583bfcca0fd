//! Runtime memory: TensorMap entries of reclaimed memory, heap-ring placement, and
//! dagrt_alloc.

use crate::ffi::{align1024, esize, out_arg, out_ptr};
use crate::fuzzer::Fz;
use crate::model::{FState, HeapBuf, NodeM, R};
use dagrt::capi::orch as co;
use dagrt::error::Status;
use dagrt::task::TaskHandle;
use std::ffi::c_void;
use std::time::Instant;

impl Fz {
    /// Task `n` (or a task it waits for) reads memory a failed task wrote before that memory
    /// was reclaimed and handed out again: the engine's leftover tombstone may poison it.
    pub(crate) fn stale_poisoned(&self, n: usize) -> bool {
        let mut stack = vec![n];
        let mut seen = Vec::new();
        while let Some(i) = stack.pop() {
            if seen.contains(&i) {
                continue;
            }
            seen.push(i);
            let nd = &self.nodes[i];
            let run = &self.runs[nd.run];
            if nd.reads.iter().any(|&(lo, hi)| {
                run.stale
                    .iter()
                    .any(|e| e.0 < hi && lo < e.1 && self.may_end_failed(e.2))
            }) {
                return true;
            }
            stack.extend(nd.producers.iter().map(|e| e.p));
        }
        false
    }

    fn may_end_failed(&self, n: usize) -> bool {
        let nd = &self.nodes[n];
        self.runs[nd.run].failed.is_some()
            || nd.task.as_ref().is_some_and(|t| t.fail.is_some())
            || nd.producers.iter().any(|e| self.may_end_failed(e.p))
    }

    /// Memory [lo, hi) was just handed out again (an alloc or an auto-allocated OUTPUT):
    /// whatever wrote to it before was reclaimed, so it produces nothing there any more.
    pub(crate) fn drop_reallocated(&mut self, ri: usize, lo: u64, hi: u64) {
        let run = &mut self.runs[ri];
        let (gone, keep): (Vec<_>, Vec<_>) = run.tmap.iter().partition(|e| e.0 < hi && lo < e.1);
        run.tmap = keep;
        run.stale.extend(gone);
    }

    pub(crate) fn predict_heap_start(&self, w: usize, r: usize, bytes: u64) -> u64 {
        let size = self.workers[w].ring_size();
        let top = self.workers[w].rings[r].top;
        let phys = top % size;
        if phys + bytes > size {
            top + (size - phys)
        } else {
            top
        }
    }

    pub(crate) fn learn_base(&mut self, w: usize, r: usize, b: u64) -> R {
        self.check(b % 1024 == 0 && b != 0, "heap ring base", || {
            format!("ring {r}: derived base {b:#x} is not 1024-aligned")
        })?;
        let size = self.workers[w].ring_size();
        for k in 0..4 {
            if let Some(o) = self.workers[w].base[k] {
                let want = o as i128 + (r as i128 - k as i128) * size as i128;
                self.check(b as i128 == want, "heap rings are one mapping", || {
                    format!("ring {r} base {b:#x}, ring {k} base {o:#x}, ring size {size}")
                })?;
            }
        }
        self.workers[w].base[r] = Some(b);
        Ok(())
    }

    /// The base of ring `r` of worker `w`; until it is known, learnt from a buffer the ring
    /// model placed at offset `start` and the engine at address `addr`.
    pub(crate) fn ring_base(&mut self, w: usize, r: usize, addr: u64, start: u64) -> R<u64> {
        match self.workers[w].base[r] {
            Some(b) => Ok(b),
            None => {
                let b = addr.wrapping_sub(start % self.workers[w].ring_size());
                self.learn_base(w, r, b)?;
                Ok(b)
            }
        }
    }

    pub(crate) fn op_alloc(&mut self) -> R {
        if self.next_rec >= self.rec.nodes.len() {
            return Ok(());
        }
        let oc = self.orch_ctx();
        let ri = oc.ready_run();
        let wi = oc.wi;
        let ring = wi.map_or(1 << 30, |w| self.workers[w].ring_size());
        let r = self.rng.below(100);
        let mut ndim: u32 = self.rng.range(0, 3) as u32;
        let mut dtype: u32 = self.rng.pick(&[0, 2, 4, 6, 7, 10, 11, 12]);
        let mut shape = [1u64; 8];
        let target = match self.rng.below(100) {
            0..=69 => self.rng.range(1, 2000),
            70..=94 => self.rng.range(ring / 8, ring / 3).max(1),
            _ => self.rng.range(ring / 2, ring).max(1),
        };
        let e = esize(dtype);
        let n = (target / e).max(1);
        if ndim == 0 {
            // a single element
        } else {
            shape[0] = n;
            if ndim >= 2 && n % 2 == 0 {
                shape[0] = n / 2;
                shape[1] = 2;
            } else {
                ndim = 1;
            }
        }
        let mut pre = Vec::new();
        let mut dset = Vec::new();
        let null_shape = r < 4 && ndim > 0;
        let null_ptr = (4..8).contains(&r);
        if null_shape || null_ptr {
            pre.push(Status::NullPointer);
        }
        match r {
            8..=11 => {
                ndim = self.rng.range(6, 8) as u32;
                dset.push(Status::InvalidArgument);
            }
            12..=15 => {
                dtype = self.rng.pick(&[13, 99]);
                dset.push(Status::InvalidArgument);
            }
            16..=19 => {
                // An empty shape: a NULL buffer and no heap space (seed §5, alloc(0)).
                ndim = ndim.max(1);
                shape[(self.rng.below(ndim as u64)) as usize] = 0;
            }
            20..=22 => {
                ndim = 2;
                dtype = 7;
                shape[0] = u64::MAX / 3;
                shape[1] = 5;
                dset.push(Status::InvalidArgument);
            }
            23..=26 => {
                ndim = 1;
                dtype = 0;
                shape[0] = ring + 1 + self.rng.below(5000);
                dset.push(Status::HeapExhausted);
            }
            _ => {}
        }
        let bytes = if dset.is_empty() {
            esize(dtype) * shape[..ndim as usize].iter().product::<u64>()
        } else {
            0
        };
        let aligned = align1024(bytes);
        let null_handle = self.rng.pct(20);
        let rec = self.next_rec;
        let depth = ri.map_or(1, |r| self.runs[r].frames.len());
        let ring_i = (depth - 1).min(3);
        // `aligned` is 0 only for an empty shape, which reserves nothing.
        let Some((exp, lv, start)) =
            self.predict_call(&oc, &pre, &dset, ring_i, aligned, "an alloc")?
        else {
            return Ok(());
        };
        let sentinel = 0xA110_C000usize as *mut c_void;
        let mut p = sentinel;
        let pp = out_ptr(null_ptr, &mut p);
        let mut h = TaskHandle {
            run_id: 0xDEAD,
            slot: 0xBEEF,
        };
        let hp = out_ptr(null_handle, &mut h);
        let sp: *const u64 = if null_shape {
            std::ptr::null()
        } else {
            shape.as_ptr()
        };
        let orch = oc.orch;
        let desc = format!(
            "dagrt_alloc({}, {}, nd{ndim}, dt{dtype}, {}, {})",
            Self::orch_name(&oc),
            if null_shape {
                "NULL".into()
            } else {
                format!("{:?}", &shape[..(ndim as usize).min(8)])
            },
            out_arg(null_ptr, "&p"),
            out_arg(null_handle, "&h")
        );
        let t0 = Instant::now();
        self.hint = self.slot_hint.take();
        let st = self.call(oc.th, desc, &exp, || {
            co::dagrt_alloc(orch, sp, ndim, dtype, pp, hp)
        })?;
        let el = t0.elapsed();
        if st != Status::Ok {
            self.check_out_untouched(
                p == sentinel && h.run_id == 0xDEAD && h.slot == 0xBEEF,
                "dagrt_alloc",
            )?;
            if let (Some(w), Status::WindowFull | Status::HeapExhausted) = (wi, st) {
                self.check_backpressure(w, st, el, dset.contains(&Status::HeapExhausted))?;
            }
            return Ok(());
        }
        self.next_rec += 1;
        let w = wi.expect("alloc succeeded on a worker");
        let ri = ri.expect("alloc succeeded with a run");
        let _ = lv.expect("liveness computed for a valid alloc");
        let node = self.nodes.len();
        let size = self.workers[w].ring_size();
        let ptr = p as u64;
        let frame = *self.runs[ri]
            .frames
            .last()
            .expect("an open run has a frame");
        let handle = (!null_handle).then_some(h);
        if bytes == 0 {
            // No slab and no TensorMap entry: only the synthetic task.
            self.check(ptr == 0, "dagrt_alloc address", || {
                format!("alloc of an empty shape returned {ptr:#x}, not NULL")
            })?;
        } else {
            let base = self.ring_base(w, ring_i, ptr, start)?;
            self.check(
                ptr == base + start % size && ptr % 1024 == 0,
                "dagrt_alloc address",
                || {
                    format!(
                        "alloc returned {ptr:#x}, the ring model expects {:#x}",
                        base + start % size
                    )
                },
            )?;
        }
        let seq = self.take_seq(w, ri, handle)?;
        if bytes > 0 {
            let rm = &mut self.workers[w].rings[ring_i];
            rm.res.push((start, start + aligned, node));
            rm.top = start + aligned;
            self.drop_reallocated(ri, ptr, ptr + aligned);
            self.runs[ri].tmap.push((ptr, ptr + bytes, node));
            self.heapbufs.push(HeapBuf {
                ptr,
                len: bytes,
                run: ri,
                frame,
                node,
            });
        }
        self.nodes.push(NodeM {
            run: ri,
            worker: w,
            rec,
            seq,
            reads: Vec::new(),
            handle,
            frame,
            producers: Vec::new(),
            task: None,
            fstate: FState::Normal,
        });
        self.runs[ri].nodes.push(node);
        self.add_handle(handle, node);
        Ok(())
    }
}
