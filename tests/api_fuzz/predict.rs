//! What the model can prove about liveness and resources (task window, heap rings) before a
//! call, and the stats checks that follow from it.

use crate::config::POLL_LIMIT;
use crate::ffi::{last_error, short, sname};
use crate::fuzzer::Fz;
use crate::model::{FState, Live, Pred, R};
use crate::orch::{OState, OC};
use dagrt::capi::worker::{self as cw, WorkerStats};
use dagrt::error::Status;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

/// What `predict_call` expects of a submit or alloc: the statuses, the liveness they were
/// predicted from (a call without defects in a ready run) and the reservation's ring offset.
pub(crate) type CallPrediction = (Vec<Status>, Option<Live>, u64);

impl Fz {
    // ----- model queries

    fn active(&self, n: usize) -> bool {
        let r = &self.runs[self.nodes[n].run];
        !r.released && !r.gone
    }

    fn exited_all(&self, n: usize) -> bool {
        let nd = &self.nodes[n];
        match &nd.task {
            None => true,
            Some(t) => (0..t.members).all(|m| self.rec.nodes[nd.rec].m[m].exited.load(SeqCst) > 0),
        }
    }

    pub(crate) fn entered_any(&self, n: usize) -> bool {
        let nd = &self.nodes[n];
        match &nd.task {
            None => true,
            Some(t) => (0..t.members).any(|m| self.rec.nodes[nd.rec].m[m].entered.load(SeqCst) > 0),
        }
    }

    fn gate_closed(&self, n: usize) -> bool {
        self.nodes[n]
            .task
            .as_ref()
            .and_then(|t| t.gate)
            .is_some_and(|g| !self.gates[g])
    }

    /// Definite / possible liveness of every slot of worker `wi` (see `Live`).
    pub(crate) fn live(&self, wi: usize) -> Live {
        let n = self.nodes.len();
        let mut db = vec![false; n];
        let mut mfn = vec![false; n];
        let mut pb = vec![false; n];
        let mut wdfs = vec![false; n];
        let mine: Vec<usize> = (0..n)
            .filter(|&i| self.nodes[i].worker == wi && self.active(i))
            .collect();
        let exited: Vec<bool> = (0..n)
            .map(|i| mine.contains(&i) && self.exited_all(i))
            .collect();
        for &i in &mine {
            let nd = &self.nodes[i];
            let Some(t) = &nd.task else { continue };
            let failed_run = self.runs[nd.run].failed.is_some();
            let gclosed = self.gate_closed(i);
            if failed_run {
                db[i] = gclosed && nd.fstate == FState::Ran && !exited[i];
                mfn[i] = !db[i];
            } else {
                let pm = nd.producers.iter().any(|e| mfn[e.p]);
                db[i] = !pm && !exited[i] && (gclosed || nd.producers.iter().any(|e| db[e.p]));
                mfn[i] = pm || (t.fail.is_some() && !db[i]);
            }
        }
        // Possibly unfinished: gated, behind a possibly unfinished producer, or queued
        // behind a possibly blocked lane of its class (NEXT_LEVEL FIFOs and the group
        // head's reservations; the SUB FIFO's head-of-line wait).
        let (mut cnl, mut csub) = (false, false);
        loop {
            for &i in &mine {
                let nd = &self.nodes[i];
                let Some(t) = &nd.task else { continue };
                let gclosed = self.gate_closed(i);
                if self.runs[nd.run].failed.is_some() {
                    pb[i] = gclosed && nd.fstate != FState::NotRan && !exited[i];
                    wdfs[i] = false;
                } else {
                    let pw = nd.producers.iter().any(|e| wdfs[e.p]);
                    let class = if t.sub { csub } else { cnl };
                    pb[i] = !pw
                        && !exited[i]
                        && (gclosed || class || nd.producers.iter().any(|e| pb[e.p]));
                    wdfs[i] = pw || (t.fail.is_some() && !pb[i]);
                }
            }
            let nnl = mine
                .iter()
                .any(|&i| pb[i] && self.nodes[i].task.as_ref().is_some_and(|t| !t.sub));
            let nsub = mine
                .iter()
                .any(|&i| pb[i] && self.nodes[i].task.as_ref().is_some_and(|t| t.sub));
            if (nnl, nsub) == (cnl, csub) {
                break;
            }
            cnl = nnl;
            csub = nsub;
        }
        let mut dl = vec![false; n];
        let mut pl = vec![false; n];
        for &i in &mine {
            let f = self.frames[self.nodes[i].frame];
            dl[i] = f || db[i];
            pl[i] = f || pb[i];
        }
        for &c in mine.iter().rev() {
            for e in &self.nodes[c].producers {
                if e.retain {
                    if db[c] && e.certain {
                        dl[e.p] = true;
                    }
                    if pb[c] {
                        pl[e.p] = true;
                    }
                }
            }
        }
        Live { pb, dl, pl }
    }

    fn run_nodes_any(&self, ri: usize, v: &[bool]) -> bool {
        self.runs[ri].nodes.iter().any(|&n| v[n])
    }

    /// The run cannot be done before the next call returns.
    pub(crate) fn definitely_undone(&self, ri: usize, lv: &Live) -> bool {
        !self.runs[ri].closed || self.run_nodes_any(ri, &lv.dl)
    }

    /// The run finishes without anyone opening a gate.
    pub(crate) fn eventually_done(&self, ri: usize, lv: &Live) -> bool {
        self.runs[ri].closed && !self.run_nodes_any(ri, &lv.pl)
    }

    /// The signature for "the run finished although the model says it cannot have".
    pub(crate) fn undone_sig(&self, ri: usize, lv: &Live) -> &'static str {
        if self.runs[ri]
            .nodes
            .iter()
            .any(|&n| lv.dl[n] && self.stale_poisoned(n))
        {
            "a failed task's TensorMap tombstone outlives its memory: a reader of reallocated heap memory is poisoned"
        } else {
            "a run reported done while it cannot be"
        }
    }

    pub(crate) fn any_blocked(&self, wi: usize) -> bool {
        let lv = self.live(wi);
        (0..self.nodes.len()).any(|i| self.nodes[i].worker == wi && lv.pb[i])
    }

    // ----- resource predictions (task window, heap rings)

    fn poll(&mut self, wi: usize, what: &str, cond: impl Fn(&WorkerStats) -> bool) -> R {
        let t0 = Instant::now();
        let ptr = self.workers[wi].ptr;
        loop {
            let mut s = WorkerStats::default();
            let st = cw::dagrt_worker_stats(ptr, &mut s);
            self.tick();
            if st != Status::Ok {
                return self.fatal(
                    "dagrt_worker_stats failed while polling",
                    format!(
                        "polling for {what}: dagrt_worker_stats returned {} \"{}\"",
                        sname(st),
                        last_error().0
                    ),
                );
            }
            if cond(&s) {
                if t0.elapsed() > Duration::from_millis(5) {
                    self.log(format!(
                        "       (waited {} ms for {what})",
                        t0.elapsed().as_millis()
                    ));
                }
                return Ok(());
            }
            if t0.elapsed() > POLL_LIMIT {
                return self.fatal(
                    "leak or hang: a slot or heap slab outside the possibly-live set was never reclaimed".to_string(),
                    format!("{what}: still not true after {POLL_LIMIT:?} although every slot outside the model's possibly-live set must be reclaimed (stats: live_slots {}, runs {}, tops {:?}, tails {:?})", s.live_slots, s.runs, s.heap_top, s.heap_tail),
                );
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Where the next `bytes` of ring `r` go (the engine's placement rule) and whether the
    /// reservation must succeed, must fail or may go either way. Polls for reclamation when
    /// needed to make "must succeed" exact.
    pub(crate) fn predict_heap(
        &mut self,
        wi: usize,
        r: usize,
        bytes: u64,
        lv: &Live,
    ) -> R<(Pred, u64)> {
        let w = &self.workers[wi];
        let size = w.ring_size();
        let ring = &w.rings[r];
        let top = ring.top;
        let phys = top % size;
        let start = if phys + bytes > size {
            top + (size - phys)
        } else {
            top
        };
        let fits = |tail: u64| start + bytes - tail <= size;
        // With reservation k the oldest live one, the engine's tail is the end of k-1, or k's
        // own start when k was placed on an empty ring (the gap before a wrap is then free):
        // the low bound for "must succeed", the high one for "must fail".
        let tail_for = |v: &Vec<bool>, high: bool| -> Option<u64> {
            for (k, res) in ring.res.iter().enumerate() {
                if self.active(res.2) && v[res.2] {
                    return Some(if high {
                        res.0
                    } else if k == 0 {
                        0
                    } else {
                        ring.res[k - 1].1
                    });
                }
            }
            None
        };
        let worst = tail_for(&lv.pl, false);
        let best = tail_for(&lv.dl, true);
        let pred = match worst {
            // Everything in the ring is reclaimable: an empty ring holds any request that
            // is not larger than the ring.
            None => {
                self.poll(
                    wi,
                    &format!("heap ring {r} to drain (tail == top {top})"),
                    move |s| s.heap_tail[r] >= top,
                )?;
                Pred::MustOk
            }
            Some(wt) if fits(wt) => {
                self.poll(wi, &format!("heap ring {r} tail to reach {wt}"), move |s| {
                    s.heap_tail[r] >= wt
                })?;
                Pred::MustOk
            }
            Some(_) => match best {
                Some(bt) if !fits(bt) => Pred::MustFail,
                _ => Pred::Maybe,
            },
        };
        Ok((pred, start))
    }

    pub(crate) fn predict_slot(&mut self, wi: usize, lv: &Live) -> R<Pred> {
        self.slot_hint = None;
        let win = self.workers[wi].window();
        let mine: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].worker == wi && self.active(i))
            .collect();
        let dl = mine.iter().filter(|&&i| lv.dl[i]).count() as u64;
        let pl = mine.iter().filter(|&&i| lv.pl[i]).count() as u64;
        if dl >= win {
            if mine.iter().any(|&i| lv.dl[i] && self.stale_poisoned(i)) {
                self.slot_hint = Some("a failed task's TensorMap tombstone outlives its memory: a reader of reallocated heap memory is poisoned".into());
            }
            return Ok(Pred::MustFail);
        }
        if pl < win {
            let raw = self.workers[wi].cfg.task_window as u64;
            if pl >= raw {
                self.slot_hint = Some(
                    "task_window is not rounded up to a power of two as documented (slots run out early)"
                        .into(),
                );
            }
            if mine.len() as u64 >= win {
                self.poll(
                    wi,
                    &format!("a free slot in the task window of {win}"),
                    move |s| (s.live_slots as u64) < win,
                )?;
            }
            return Ok(Pred::MustOk);
        }
        Ok(Pred::Maybe)
    }

    /// The statuses of a submit or an alloc (`what`, for the log) made through `oc`, with the
    /// defects `pre` (found before the orchestrator's state) and `dset`, reserving `heap_bytes`
    /// in ring `ring_i`: sorted, and for a call without defects in a ready run, with the
    /// liveness they were predicted from and the ring offset of the reservation. None: the
    /// model says the call must fail with back-pressure, and it is skipped (85% of the time).
    pub(crate) fn predict_call(
        &mut self,
        oc: &OC,
        pre: &[Status],
        dset: &[Status],
        ring_i: usize,
        heap_bytes: u64,
        what: &str,
    ) -> R<Option<CallPrediction>> {
        let mut exp = pre.to_vec();
        let mut lv = None;
        let mut start = 0;
        if let OState::Ready(_) = oc.st {
            exp.extend(dset.iter().copied());
            if exp.is_empty() {
                let w = oc.wi.expect("ready on a worker");
                let l = self.live(w);
                let slot = self.predict_slot(w, &l)?;
                let heap = if heap_bytes > 0 && !matches!(slot, Pred::MustFail) {
                    let (p, s) = self.predict_heap(w, ring_i, heap_bytes, &l)?;
                    start = s;
                    p
                } else {
                    if heap_bytes > 0 {
                        start = self.predict_heap_start(w, ring_i, heap_bytes);
                    }
                    Pred::MustOk
                };
                if (matches!(slot, Pred::MustFail) || matches!(heap, Pred::MustFail))
                    && self.rng.pct(85)
                {
                    self.log(format!(
                        "#{:<4}      (skipped {what} the model says must fail with back-pressure)",
                        self.step
                    ));
                    return Ok(None);
                }
                exp = Self::resource_statuses(&slot, &heap);
                lv = Some(l);
            }
        } else {
            exp.extend(Self::state_statuses(oc.st));
            if matches!(oc.st, OState::Null) {
                exp.extend(dset.iter().copied());
            }
        }
        exp.sort_by_key(|s| *s as i32);
        exp.dedup();
        Ok(Some((exp, lv, start)))
    }

    /// The statuses a slot-claiming call (submit or alloc) may return, given the slot and
    /// heap predictions.
    pub(crate) fn resource_statuses(slot: &Pred, heap: &Pred) -> Vec<Status> {
        use Status::*;
        match (slot, heap) {
            (Pred::MustFail, _) => vec![WindowFull],
            (Pred::MustOk, Pred::MustOk) => vec![Ok],
            (Pred::MustOk, Pred::MustFail) => vec![HeapExhausted],
            (Pred::MustOk, Pred::Maybe) => vec![Ok, HeapExhausted],
            (Pred::Maybe, Pred::MustOk) => vec![Ok, WindowFull],
            (Pred::Maybe, Pred::MustFail) => vec![WindowFull, HeapExhausted],
            (Pred::Maybe, Pred::Maybe) => vec![Ok, WindowFull, HeapExhausted],
        }
    }

    /// After a back-pressure failure: the documented message, at least the timeout, and no
    /// trace left (heap tops unchanged, run count unchanged).
    pub(crate) fn check_backpressure(
        &mut self,
        wi: usize,
        st: Status,
        el: Duration,
        too_large: bool,
    ) -> R {
        let msg = self.last_msg.clone();
        let timeout = self.workers[wi].cfg.timeout_ms as u64;
        match st {
            Status::WindowFull => {
                self.check(
                    msg.contains("task window full"),
                    "WINDOW_FULL message",
                    || format!("WINDOW_FULL message {msg:?} lacks \"task window full\""),
                )?;
            }
            Status::HeapExhausted => {
                self.check(
                    msg.contains("HeapRing exhausted, increase heap_ring_size on Worker"),
                    "HEAP_EXHAUSTED message",
                    || format!("HEAP_EXHAUSTED message {msg:?} lacks the documented text"),
                )?;
            }
            _ => return Ok(()),
        }
        if !too_large && el + Duration::from_millis(1) < Duration::from_millis(timeout) {
            self.soft(
                format!("{} before the back-pressure timeout", short(st)),
                format!(
                    "{} after {} ms, but timeout_ms is {timeout}",
                    sname(st),
                    el.as_micros() as f64 / 1000.0
                ),
            );
        }
        self.check_stats_exact(wi)
    }

    /// Stats that the model knows exactly at any time: runs registered and heap tops.
    pub(crate) fn check_stats_exact(&mut self, wi: usize) -> R {
        let mut s = WorkerStats::default();
        let st = cw::dagrt_worker_stats(self.workers[wi].ptr, &mut s);
        if st != Status::Ok {
            return self.fatal(
                "dagrt_worker_stats failed",
                format!("internal dagrt_worker_stats: {}", sname(st)),
            );
        }
        self.check_stats(wi, &s)
    }

    pub(crate) fn check_stats(&mut self, wi: usize, s: &WorkerStats) -> R {
        let runs = self
            .runs
            .iter()
            .filter(|r| r.worker == wi && !r.released && !r.gone)
            .count() as u64;
        self.check(s.runs == runs, "stats: runs", || {
            format!(
                "dagrt_worker_stats: runs {} but {runs} runs are registered (begun, not released)",
                s.runs
            )
        })?;
        let lv = self.live(wi);
        let mine: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].worker == wi && self.active(i))
            .collect();
        let dl = mine.iter().filter(|&&i| lv.dl[i]).count() as i64;
        if !(s.live_slots >= dl && s.live_slots <= mine.len() as i64) {
            let why: Vec<String> = mine
                .iter()
                .filter(|&&i| lv.dl[i])
                .map(|&i| {
                    let nd = &self.nodes[i];
                    let what = if self.frames[nd.frame] {
                        "scope open".to_string()
                    } else if lv.pb[i] && nd.task.is_some() {
                        "blocked".to_string()
                    } else {
                        "retained".to_string()
                    };
                    format!(
                        "rec{}{}:{what}",
                        nd.rec,
                        if nd.task.is_none() { "(alloc)" } else { "" }
                    )
                })
                .collect();
            let tomb = mine.iter().any(|&i| lv.dl[i] && self.stale_poisoned(i));
            return self.fatal(
                if tomb { "a failed task's TensorMap tombstone outlives its memory: a reader of reallocated heap memory is poisoned" } else { "stats: live_slots out of bounds" },
                format!(
                    "dagrt_worker_stats: live_slots {} outside [{dl} definitely live, {} slots of unreleased runs]; definitely live: {}",
                    s.live_slots,
                    mine.len(),
                    why.join(" ")
                ),
            );
        }
        for r in 0..4 {
            let top = self.workers[wi].rings[r].top;
            self.check(s.heap_top[r] == top, "stats: heap top", || {
                format!(
                    "ring {r}: heap_top {} but the model placed reservations up to {top}",
                    s.heap_top[r]
                )
            })?;
            self.check(
                s.heap_tail[r] <= s.heap_top[r],
                "stats: tail beyond top",
                || format!("ring {r}: tail {} > top {}", s.heap_tail[r], s.heap_top[r]),
            )?;
            let ring = &self.workers[wi].rings[r];
            if let Some(k) = ring.res.iter().position(|x| self.active(x.2) && lv.dl[x.2]) {
                let bound = ring.res[k].0;
                self.check(s.heap_tail[r] <= bound, "stats: heap tail passed a live reservation", || {
                    format!("ring {r}: tail {} passed reservation {k} (starting after {bound}) whose slot is definitely live", s.heap_tail[r])
                })?;
            }
        }
        Ok(())
    }
}
