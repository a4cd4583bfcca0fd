//! Worker operations up to the close: new, lanes, init, orch, stats, and the gates that hold
//! gated tasks.

use crate::executors::MAX_GATES;
use crate::ffi::{ok_if_none, out_arg, out_ptr};
use crate::fuzzer::Fz;
use crate::model::{RingM, Th, WModel, WState, LANE_IDS, R};
use dagrt::capi::worker::{self as cw, dagrt_orch_t, dagrt_worker_t, WorkerStats};
use dagrt::error::Status;
use dagrt::worker::WorkerConfig;
use std::sync::atomic::Ordering::SeqCst;

/// A worker argument as a call's description shows it: `w<index>`, or `NULL`.
pub(crate) fn worker_label(wi: Option<usize>) -> String {
    wi.map_or("NULL".into(), |w| format!("w{w}"))
}

/// The statuses of a call adding lanes to worker `wi` (in `state`), with `bad_arg` the status
/// of a defect in the lanes asked for.
fn lane_call_statuses(wi: Option<usize>, state: WState, bad_arg: Option<Status>) -> Vec<Status> {
    let mut exp = Vec::new();
    if wi.is_none() {
        exp.push(Status::NullPointer);
    } else {
        if state != WState::New {
            exp.push(Status::WrongState);
        }
        exp.extend(bad_arg);
    }
    ok_if_none(&mut exp);
    exp
}

impl Fz {
    pub(crate) fn live_workers(&self) -> Vec<usize> {
        (0..self.workers.len())
            .filter(|&i| self.workers[i].state != WState::Freed)
            .collect()
    }

    pub(crate) fn primary(&self) -> Option<usize> {
        self.live_workers().first().copied()
    }

    /// A worker for a worker-level call (the callback's worker inside a callback).
    pub(crate) fn pick_worker(&mut self) -> Option<usize> {
        if let Some(c) = self.cb {
            return Some(c);
        }
        let live = self.live_workers();
        if live.is_empty() {
            return None;
        }
        if self.rng.pct(82) {
            Some(live[0])
        } else {
            Some(live[self.rng.idx(live.len())])
        }
    }

    pub(crate) fn wptr(&self, wi: Option<usize>) -> *mut dagrt_worker_t {
        wi.map_or(std::ptr::null_mut(), |w| self.workers[w].ptr)
    }

    /// The worker of a lane call: the primary one when the call is valid, else any (3% NULL).
    fn lane_call_worker(&mut self, valid: bool) -> Option<usize> {
        let wi = if valid {
            self.primary()
        } else {
            self.pick_worker()
        };
        let null_w = !valid && self.rng.pct(3);
        if null_w {
            None
        } else {
            wi
        }
    }

    /// A "before init only" call on a closed worker: name the known defect should it succeed.
    fn hint_if_closed(&mut self, wi: Option<usize>) {
        if wi.is_some_and(|w| self.workers[w].state == WState::Closed) {
            self.hint = Some("a closed worker accepts dagrt_worker_init / add lanes (documented: before init only)".into());
        }
    }

    /// `dagrt_worker_orch` gave `o` for worker `w`: not NULL, and the same handle every time.
    fn adopt_orch(&mut self, w: usize, o: *mut dagrt_orch_t) -> R {
        let known = self.workers[w].orch;
        self.check(
            !o.is_null() && (known.is_null() || known == o),
            "dagrt_worker_orch changed",
            || format!("orch {o:?}, previously {known:?}"),
        )?;
        self.workers[w].orch = o;
        Ok(())
    }

    pub(crate) fn new_frame(&mut self) -> usize {
        self.frames.push(true);
        self.frames.len() - 1
    }

    pub(crate) fn op_worker_new(&mut self, valid: bool) -> R {
        let null_out = !valid && self.rng.pct(5);
        let v = if valid { 99 } else { self.rng.below(100) };
        let mut cfg = WorkerConfig::default();
        let mut cfg_null = false;
        let mut exp = vec![Status::Ok];
        if v < 7 {
            match self.rng.below(3) {
                0 => cfg.task_window = 0,
                1 => cfg.task_window = (1 << 24) + 1 + self.rng.below(1000) as u32,
                _ => cfg.heap_ring_size = 0,
            }
            exp = vec![Status::InvalidArgument];
        } else if v < 14 {
            cfg_null = true;
        } else {
            let small_window = self.rng.pct(40);
            let small_heap = self.rng.pct(45);
            cfg.task_window = if small_window {
                self.rng.pick(&[1, 2, 3, 4, 4, 5, 6, 8, 8])
            } else if self.rng.pct(15) {
                self.rng.range(9, 64) as u32
            } else {
                1 << 20
            };
            cfg.heap_ring_size = if small_heap {
                if self.rng.pct(10) {
                    self.rng.range(2000, 20000)
                } else {
                    1024 * self.rng.range(4, 64)
                }
            } else if !valid && self.rng.pct(8) {
                1 << 62 // mapping four rings of this size must fail at init (SYSTEM)
            } else if self.rng.pct(50) {
                1 << 20
            } else {
                1 << 30
            };
            cfg.timeout_ms = if small_window || small_heap {
                self.rng.range(3, 8) as u32
            } else {
                200
            };
        }
        if null_out {
            exp = vec![Status::NullPointer];
        }
        let sentinel = 0x5EB7_1E00usize as *mut dagrt_worker_t;
        let mut out = sentinel;
        let outp = out_ptr(null_out, &mut out);
        let cfgp: *const WorkerConfig = if cfg_null { std::ptr::null() } else { &cfg };
        let desc = format!(
            "dagrt_worker_new({}, {})",
            if cfg_null {
                "NULL".to_string()
            } else {
                format!(
                    "{{ring {}, window {}, timeout {} ms}}",
                    cfg.heap_ring_size, cfg.task_window, cfg.timeout_ms
                )
            },
            out_arg(null_out, "&w")
        );
        let st = self.call(Th::Main, desc, &exp, || cw::dagrt_worker_new(cfgp, outp))?;
        if st != Status::Ok {
            return self.check_out_untouched(out == sentinel, "dagrt_worker_new");
        }
        self.check(!out.is_null(), "dagrt_worker_new returned NULL", || {
            "dagrt_worker_new succeeded with a NULL worker".into()
        })?;
        let cfg = if cfg_null {
            WorkerConfig::default()
        } else {
            cfg
        };
        self.log(format!("       (worker {} created)", self.workers.len()));
        self.workers.push(WModel {
            ptr: out,
            cfg,
            nl: Vec::new(),
            nsub: 0,
            state: WState::New,
            orch: std::ptr::null_mut(),
            open: None,
            rings: vec![RingM::default(); 4],
            base: [None; 4],
            next_seq: 1,
            closing: false,
            kept_runs: false,
        });
        if cfg.heap_ring_size >= 1 << 61 {
            // four rings of this size cannot be mapped: init fails with SYSTEM (twice: the
            // worker stays configurable), and the worker is freed
            let w = self.workers.len() - 1;
            let lane = self.rng.pick(&LANE_IDS);
            self.call(
                Th::Main,
                format!("dagrt_worker_add_next_level_lane(w{w}, {lane})"),
                &[Status::Ok],
                || cw::dagrt_worker_add_next_level_lane(out, lane),
            )?;
            self.workers[w].nl.push(lane);
            for _ in 0..2 {
                self.call(
                    Th::Main,
                    format!("dagrt_worker_init(w{w}) [unmappable heap]"),
                    &[Status::System],
                    || cw::dagrt_worker_init(out),
                )?;
            }
            self.free_worker(w)?;
        }
        Ok(())
    }

    pub(crate) fn op_add_nl(&mut self, valid: bool) -> R {
        let wi = self.lane_call_worker(valid);
        let (nl, lanes, state) = match wi {
            Some(w) => (
                self.workers[w].nl.clone(),
                self.workers[w].lanes(),
                self.workers[w].state,
            ),
            None => (Vec::new(), 0, WState::New),
        };
        let fresh: Vec<i32> = LANE_IDS
            .iter()
            .copied()
            .filter(|i| !nl.contains(i))
            .collect();
        let r = if valid { 0 } else { self.rng.below(100) };
        let id = if r < 65 && lanes < 4 && !fresh.is_empty() {
            self.rng.pick(&fresh)
        } else if r < 82 && !nl.is_empty() {
            self.rng.pick(&nl)
        } else if r < 94 {
            self.rng.pick(&[-1, -7, i32::MIN])
        } else {
            self.rng
                .pick(&fresh.iter().copied().chain([4242]).collect::<Vec<_>>())
        };
        let bad_id = if id < 0 {
            Some(Status::InvalidArgument)
        } else if nl.contains(&id) {
            Some(Status::DuplicateTarget)
        } else {
            None
        };
        let exp = lane_call_statuses(wi, state, bad_id);
        self.hint_if_closed(wi);
        let p = self.wptr(wi);
        let st = self.call(
            Th::Main,
            format!(
                "dagrt_worker_add_next_level_lane({}, {id})",
                worker_label(wi)
            ),
            &exp,
            || cw::dagrt_worker_add_next_level_lane(p, id),
        )?;
        if st == Status::Ok {
            if let Some(w) = wi {
                self.workers[w].nl.push(id);
            }
        }
        Ok(())
    }

    pub(crate) fn op_add_sub(&mut self, valid: bool) -> R {
        let wi = self.lane_call_worker(valid);
        let (lanes, nsub, state) = match wi {
            Some(w) => (
                self.workers[w].lanes(),
                self.workers[w].nsub,
                self.workers[w].state,
            ),
            None => (0, 0, WState::New),
        };
        let r = if valid { 0 } else { self.rng.below(100) };
        let n: u32 = if r < 70 && lanes < 4 {
            self.rng.range(1, (4 - lanes as u64).min(2)) as u32
        } else if r < 85 {
            0
        } else {
            1025 - nsub + self.rng.below(500) as u32
        };
        let bad_n = (n == 0 || nsub + n > 1024).then_some(Status::InvalidArgument);
        let exp = lane_call_statuses(wi, state, bad_n);
        self.hint_if_closed(wi);
        let p = self.wptr(wi);
        let st = self.call(
            Th::Main,
            format!("dagrt_worker_add_sub_lanes({}, {n})", worker_label(wi)),
            &exp,
            || cw::dagrt_worker_add_sub_lanes(p, n),
        )?;
        if st == Status::Ok {
            if let Some(w) = wi {
                self.workers[w].nsub += n;
            }
        }
        Ok(())
    }

    pub(crate) fn op_init(&mut self, valid: bool) -> R {
        let fresh: Vec<usize> = self
            .live_workers()
            .into_iter()
            .filter(|&w| self.workers[w].state == WState::New)
            .collect();
        let wi = if valid {
            self.primary()
        } else if !fresh.is_empty() && self.cb.is_none() && self.rng.pct(70) {
            Some(fresh[self.rng.idx(fresh.len())])
        } else {
            self.pick_worker()
        };
        let wi = if !valid && self.rng.pct(3) { None } else { wi };
        let mut exp = Vec::new();
        match wi {
            None => exp.push(Status::NullPointer),
            Some(w) => {
                let m = &self.workers[w];
                match m.state {
                    // A closed worker has been initialised: "Before init only" calls and a
                    // second init are wrong-state.
                    WState::Init | WState::Closed => exp.push(Status::WrongState),
                    _ if m.lanes() == 0 => exp.push(Status::WrongState),
                    _ if m.cfg.heap_ring_size >= 1 << 61 => exp.push(Status::System),
                    _ => exp.push(Status::Ok),
                }
            }
        }
        self.hint_if_closed(wi);
        let p = self.wptr(wi);
        let st = self.call(
            Th::Main,
            format!("dagrt_worker_init({})", worker_label(wi)),
            &exp,
            || cw::dagrt_worker_init(p),
        )?;
        if st == Status::Ok {
            let w = wi.expect("init succeeded on a worker");
            let m = &mut self.workers[w];
            m.state = WState::Init;
            m.rings = vec![RingM::default(); 4];
            m.base = [None; 4];
            m.next_seq = 1;
            m.open = None;
            let mut o: *mut dagrt_orch_t = std::ptr::null_mut();
            let op: *mut *mut dagrt_orch_t = &mut o;
            self.call(
                Th::Main,
                format!("dagrt_worker_orch(w{w}, &o)"),
                &[Status::Ok],
                || cw::dagrt_worker_orch(p, op),
            )?;
            self.adopt_orch(w, o)?;
        }
        Ok(())
    }

    pub(crate) fn op_orch(&mut self) -> R {
        let wi = self.pick_worker();
        let r = self.rng.below(100);
        let wi = if r < 5 { None } else { wi };
        let null_out = (5..20).contains(&r);
        let mut exp = Vec::new();
        match wi {
            None => exp.push(Status::NullPointer),
            Some(w) => {
                if self.workers[w].state != WState::Init {
                    exp.push(Status::WrongState);
                }
                if null_out {
                    exp.push(Status::NullPointer);
                }
            }
        }
        ok_if_none(&mut exp);
        let sentinel = 0x0DC4_0000usize as *mut dagrt_orch_t;
        let mut o = sentinel;
        let op = out_ptr(null_out, &mut o);
        let p = self.wptr(wi);
        let st = self.call(
            Th::Main,
            format!(
                "dagrt_worker_orch({}, {})",
                worker_label(wi),
                out_arg(null_out, "&o")
            ),
            &exp,
            || cw::dagrt_worker_orch(p, op),
        )?;
        if st == Status::Ok {
            let w = wi.expect("orch succeeded on a worker");
            self.adopt_orch(w, o)?;
        } else {
            self.check_out_untouched(o == sentinel, "dagrt_worker_orch")?;
        }
        Ok(())
    }

    pub(crate) fn op_stats(&mut self) -> R {
        let wi = self.pick_worker();
        let r = self.rng.below(100);
        let wi = if r < 4 { None } else { wi };
        let null_out = (4..10).contains(&r);
        let th = if self.rng.pct(15) {
            Th::Helper
        } else {
            Th::Main
        };
        let mut exp = Vec::new();
        match wi {
            None => exp.push(Status::NullPointer),
            Some(w) => {
                if null_out {
                    exp.push(Status::NullPointer);
                }
                if self.workers[w].state != WState::Init {
                    exp.push(Status::WrongState);
                }
            }
        }
        ok_if_none(&mut exp);
        let mut s = WorkerStats {
            live_slots: -77,
            ..Default::default()
        };
        let sp = out_ptr(null_out, &mut s);
        let p = self.wptr(wi);
        let st = self.call(
            th,
            format!(
                "dagrt_worker_stats({}, {})",
                worker_label(wi),
                out_arg(null_out, "&s")
            ),
            &exp,
            || cw::dagrt_worker_stats(p, sp),
        )?;
        if st == Status::Ok {
            self.log(format!(
                "       (stats: live {}, tmap {}, runs {}, queued {}, tops {:?}, tails {:?})",
                s.live_slots, s.tensormap_entries, s.runs, s.ready_queued, s.heap_top, s.heap_tail
            ));
            self.check_stats(wi.expect("stats on a worker"), &s)?;
        } else {
            self.check_out_untouched(s.live_slots == -77, "dagrt_worker_stats")?;
        }
        Ok(())
    }

    pub(crate) fn open_all_gates(&mut self) {
        let mut opened = Vec::new();
        for g in 0..MAX_GATES {
            if !self.gates[g] {
                self.gates[g] = true;
                self.rec.gates[g].store(true, SeqCst);
                opened.push(g);
            }
        }
        if self.nodes.iter().any(|n| {
            n.task
                .as_ref()
                .is_some_and(|t| t.gate.is_some_and(|g| opened.contains(&g)))
        }) {
            self.log("       (all gates opened)".into());
        }
    }

    pub(crate) fn op_gate(&mut self) -> R {
        let used = self.gates_in_use();
        if used.is_empty() {
            return Ok(());
        }
        let g = self.rng.pick(&used);
        self.gates[g] = true;
        self.rec.gates[g].store(true, SeqCst);
        self.log(format!("#{:<4}      open gate {g}", self.step));
        Ok(())
    }
}
