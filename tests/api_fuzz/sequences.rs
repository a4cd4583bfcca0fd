//! One sequence from setup to teardown, the choice of the next call, and the test that runs
//! them all and reports failures grouped by signature.

use crate::config::{env_u64, DEFAULT_SEED, DEFAULT_SEQS, DEFAULT_STEPS};
use crate::executors::install_panic_hook;
use crate::fuzzer::Fz;
use crate::model::{Failure, Th, Totals, WState, R};
use crate::rng::{seq_seed, Rng};
use crate::watchdog::{start_watchdog, Shared};
use dagrt::capi::args as ca;
use dagrt::capi::orch as co;
use dagrt::capi::run as cr;
use dagrt::capi::worker::{self as cw, WorkerStats};
use dagrt::error::Status;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// Sequences

#[derive(Clone, Copy)]
enum Op {
    WorkerNew,
    AddNl,
    AddSub,
    Init,
    Orch,
    Stats,
    CloseW,
    CloseFor,
    FreeW,
    Register,
    Builder,
    TensorInit,
    Begin,
    Submit,
    Alloc,
    ScopeBegin,
    ScopeEnd,
    ScopeBurst,
    CloseRun,
    FailRun,
    Query,
    Gate,
    WorkerSubmit,
    Misc,
}

impl Fz {
    fn setup(&mut self) -> R {
        self.op_register(Some(("fz.a", 0, 0)))?;
        self.register_all()?;
        self.op_worker_new(true)?;
        for _ in 0..self.rng.range(1, 3) {
            self.op_add_nl(true)?;
        }
        for _ in 0..self.rng.range(0, 1) {
            self.op_add_sub(true)?;
        }
        if self.rng.pct(85) {
            self.op_init(true)?;
        }
        Ok(())
    }

    fn one_step(&mut self) -> R {
        let live = self.live_workers();
        let Some(&p) = live.first() else {
            return self.op_worker_new(true);
        };
        // a closed run not seen done yet: the runs a bounded close may have to give up on
        let busy = self
            .runs
            .iter()
            .any(|r| r.worker == p && r.closed && !r.released && !r.gone && !r.done_seen);
        let w = &self.workers[p];
        let two = live.len() >= 2;
        let open = w.open.is_some();
        use Op::*;
        let t: Vec<(u32, Op)> = match w.state {
            WState::New => vec![
                (25, AddNl),
                (15, AddSub),
                (if w.lanes() > 0 { 40 } else { 4 }, Init),
                (4, Register),
                (3, Builder),
                (2, TensorInit),
                (2, Misc),
                (3, Stats),
                (3, Orch),
                (2, CloseW),
                (1, CloseFor),
                (3, Begin),
                (2, Query),
                (2, WorkerSubmit),
                (1, Submit),
            ],
            // close_for ran out of budget: the runs go on (queries, gates, releases),
            // new runs are refused, and another close (bounded or not) finishes the job
            WState::Init if w.closing => vec![
                (6, Begin),
                (4, WorkerSubmit),
                (2, Submit),
                (1, CloseRun),
                (1, FailRun),
                (24, Query),
                (8, Gate),
                (6, CloseFor),
                (3, CloseW),
                (4, Stats),
                (2, Orch),
                (1, Alloc),
                (1, AddNl),
                (1, Init),
                (2, Builder),
                (1, Register),
                (1, Misc),
                (if two { 0 } else { 1 }, WorkerNew),
                (if two { 2 } else { 0 }, FreeW),
            ],
            WState::Init if !open => vec![
                (30, Begin),
                (5, Submit),
                (2, Alloc),
                (2, ScopeBegin),
                (2, ScopeEnd),
                (2, CloseRun),
                (1, FailRun),
                (16, Query),
                (3, Register),
                (4, Builder),
                (4, Gate),
                (10, WorkerSubmit),
                (4, Stats),
                (2, Orch),
                (2, AddNl),
                (1, AddSub),
                (2, Init),
                (2, CloseW),
                (if busy { 8 } else { 2 }, CloseFor),
                (if two { 0 } else { 3 }, WorkerNew),
                (if two { 2 } else { 0 }, FreeW),
                (2, Misc),
                (2, TensorInit),
            ],
            WState::Init => vec![
                (45, Submit),
                (7, Alloc),
                (8, ScopeBegin),
                (7, ScopeEnd),
                (1, ScopeBurst),
                (4, CloseRun),
                (1, FailRun),
                (8, Query),
                (4, Gate),
                (2, Begin),
                (1, WorkerSubmit),
                (3, Builder),
                (1, Register),
                (3, Stats),
                (1, CloseW),
                (1, CloseFor),
                (1, AddNl),
                (1, Misc),
                (1, TensorInit),
                (if two { 0 } else { 1 }, WorkerNew),
                (1, Orch),
            ],
            _ => vec![
                (25, FreeW),
                (5, Init),
                (3, AddNl),
                (3, Begin),
                (5, Query),
                (3, Stats),
                (3, CloseW),
                (2, CloseFor),
                (2, WorkerSubmit),
                (2, Submit),
                (2, Orch),
            ],
        };
        let total: u32 = t.iter().map(|x| x.0).sum();
        let mut k = self.rng.below(total as u64) as u32;
        let mut op = t[0].1;
        for &(wt, o) in &t {
            if k < wt {
                op = o;
                break;
            }
            k -= wt;
        }
        match op {
            WorkerNew => self.op_worker_new(false),
            AddNl => self.op_add_nl(false),
            AddSub => self.op_add_sub(false),
            Init => self.op_init(false),
            Orch => self.op_orch(),
            Stats => self.op_stats(),
            CloseW => self.op_close_worker(false),
            CloseFor => self.op_close_for(false),
            FreeW => self.op_free_worker(),
            Register => self.op_register(None),
            Builder => self.op_builder(),
            TensorInit => self.op_tensor_init(),
            Begin => self.op_begin(),
            Submit => self.op_submit(),
            Alloc => self.op_alloc(),
            ScopeBegin => self.op_scope_begin(),
            ScopeEnd => self.op_scope_end(),
            ScopeBurst => self.op_scope_burst(),
            CloseRun => self.op_close_run(),
            FailRun => self.op_fail_run(),
            Query => self.op_query(),
            Gate => self.op_gate(),
            WorkerSubmit => self.op_worker_submit(),
            Misc => self.op_misc(),
        }
    }

    /// End of a sequence: every run closed, waited for and released; the worker quiescent
    /// (no slot, no TensorMap entry, no run, nothing queued, every ring drained); then
    /// closed and freed.
    fn finish(&mut self) -> R {
        self.step += 1;
        self.log(format!(
            "#{:<4} ---- end of sequence: close, wait, release, check quiescence ----",
            self.step
        ));
        self.open_all_gates();
        for w in self.live_workers() {
            match self.workers[w].state {
                WState::New => {
                    if self.rng.pct(10) {
                        self.close_for_idle(w)?;
                    } else if self.rng.pct(25) {
                        let p = self.workers[w].ptr;
                        self.call(
                            Th::Main,
                            format!("dagrt_worker_close(w{w}) [never initialised]"),
                            &[Status::Ok],
                            || cw::dagrt_worker_close(p),
                        )?;
                    }
                    self.free_worker(w)?;
                }
                WState::Closed => self.free_worker(w)?,
                WState::Init => {
                    if self.rng.pct(8) {
                        self.free_worker(w)?;
                        continue;
                    }
                    let p = self.workers[w].ptr;
                    let o = self.workers[w].orch;
                    if let Some(ri) = self.workers[w].open {
                        let th = self.runs[ri].builder;
                        while self.runs[ri].frames.len() > 1 {
                            self.call(th, "dagrt_scope_end(o)".into(), &[Status::Ok], || {
                                co::dagrt_scope_end(o)
                            })?;
                            let f = self.runs[ri].frames.pop().expect("a nested frame");
                            self.frames[f] = false;
                        }
                        let id = self.runs[ri]
                            .id
                            .expect("an open run outside a callback has an id");
                        self.call(
                            th,
                            format!("dagrt_close_run_submission(o{w}, {id})"),
                            &[Status::Ok],
                            || co::dagrt_close_run_submission(o, id),
                        )?;
                        self.close_run_model(ri);
                    }
                    for ri in 0..self.runs.len() {
                        if self.runs[ri].worker != w || self.runs[ri].released || self.runs[ri].gone
                        {
                            continue;
                        }
                        let id = self.runs[ri].id.expect("a closed run has an id");
                        self.wait_done(w, p, ri, "with every gate open")?;
                        self.call(
                            Th::Main,
                            format!("dagrt_release_run(w{w}, {id})"),
                            &[Status::Ok],
                            || cr::dagrt_release_run(p, id),
                        )?;
                        self.runs[ri].released = true;
                    }
                    let mut s = WorkerStats::default();
                    let sp: *mut WorkerStats = &mut s;
                    self.call(
                        Th::Main,
                        format!("dagrt_worker_stats(w{w}, &s)"),
                        &[Status::Ok],
                        || cw::dagrt_worker_stats(p, sp),
                    )?;
                    self.log(format!("       (stats: live {}, tmap {}, runs {}, queued {}, tops {:?}, tails {:?})", s.live_slots, s.tensormap_entries, s.runs, s.ready_queued, s.heap_top, s.heap_tail));
                    let quiet = s.live_slots == 0
                        && s.tensormap_entries == 0
                        && s.runs == 0
                        && s.heap_tail == s.heap_top;
                    if quiet && s.ready_queued != 0 {
                        // the scheduler refreshes the count at the end of the pass that
                        // consumed the last slot: give it a moment
                        let t0 = Instant::now();
                        while s.ready_queued != 0 && t0.elapsed() < Duration::from_secs(2) {
                            std::thread::sleep(Duration::from_micros(200));
                            let mut s2 = WorkerStats::default();
                            if cw::dagrt_worker_stats(p, &mut s2) == Status::Ok {
                                s.ready_queued = s2.ready_queued;
                            }
                            self.tick();
                        }
                    }
                    if quiet && s.ready_queued != 0 {
                        self.soft(
                            "stats: ready_queued counts tasks although no slot is live and no run is registered",
                            format!("after every run was released: live_slots 0, runs 0, but ready_queued {} (cancelled tasks' queue entries?)", s.ready_queued),
                        );
                    }
                    self.check(quiet, "leak: worker not quiescent after every run was released", || {
                        format!("stats after all runs released: live_slots {}, tensormap_entries {}, runs {}, ready_queued {}, tops {:?}, tails {:?}", s.live_slots, s.tensormap_entries, s.runs, s.ready_queued, s.heap_top, s.heap_tail)
                    })?;
                    self.check_stats(w, &s)?;
                    if self.rng.pct(35) {
                        // every run was released: any budget, even 0, closes the worker
                        self.close_for_idle(w)?;
                    } else {
                        self.call(
                            Th::Main,
                            format!("dagrt_worker_close(w{w})"),
                            &[Status::Ok],
                            || cw::dagrt_worker_close(p),
                        )?;
                    }
                    self.workers[w].state = WState::Closed;
                    self.free_worker(w)?;
                }
                WState::Freed => {}
            }
        }
        for b in std::mem::take(&mut self.builders) {
            ca::dagrt_args_free(b.ptr);
        }
        for &r in &self.rejected {
            let n = self.rec.nodes[r]
                .m
                .iter()
                .map(|m| m.entered.load(SeqCst))
                .sum::<u32>();
            if n != 0 {
                return self.fatal("a rejected submit ran", format!("record {r} was never accepted (or was skipped) but its executor ran {n} time(s)"));
            }
        }
        self.check_executor_errors()
    }

    /// dagrt_worker_close_for on a worker with no registered run (never initialised, or
    /// every run released): OK and closed = 1 whatever the budget.
    fn close_for_idle(&mut self, w: usize) -> R {
        let p = self.workers[w].ptr;
        let (budget, _) = self.close_budget();
        let mut closed: u32 = 7;
        let cp: *mut u32 = &mut closed;
        self.call(
            Th::Main,
            format!("dagrt_worker_close_for(w{w}, {budget} ms, &closed) [no run]"),
            &[Status::Ok],
            || cw::dagrt_worker_close_for(p, budget, cp),
        )?;
        self.check(
            closed == 1,
            "dagrt_worker_close_for: closed = 0 although every run was done or had the time to finish",
            || format!("dagrt_worker_close_for(w{w}, {budget} ms) on a worker without runs set out_closed = {closed}"),
        )
    }

    /// After a failed check: release everything without further checks.
    fn teardown(&mut self) {
        self.open_all_gates();
        for w in self.live_workers() {
            self.log(format!("       (teardown: dagrt_worker_free(w{w}))"));
            cw::dagrt_worker_free(self.workers[w].ptr);
            self.tick();
            self.workers[w].state = WState::Freed;
        }
        for b in std::mem::take(&mut self.builders) {
            ca::dagrt_args_free(b.ptr);
        }
        self.rec
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

fn run_sequence(
    seed: u64,
    steps: usize,
    shared: &Arc<Shared>,
    totals: &mut Totals,
) -> Vec<Failure> {
    let mut fz = Fz::new(seed, steps, shared.clone());
    fz.log(format!("sequence seed {seed:#x}, {steps} steps"));
    let r = (|| -> R {
        fz.setup()?;
        while fz.step < steps {
            fz.step += 1;
            fz.one_step()?;
        }
        fz.finish()
    })();
    if r.is_err() {
        fz.teardown();
    }
    totals.seqs += 1;
    totals.steps += fz.step as u64;
    totals.calls += fz.totals.calls;
    totals.nodes += fz.totals.nodes;
    totals.ran += fz.totals.ran;
    for k in 0..2 {
        totals.close_for[k] += fz.totals.close_for[k];
    }
    totals.refused_closing += fz.totals.refused_closing;
    for (k, v) in &fz.totals.by_status {
        *totals.by_status.entry(k).or_default() += v;
    }
    std::mem::take(&mut fz.failures)
}

#[test]
fn api_sequence_fuzz() {
    let seqs = env_u64("DAGRT_FUZZ_SEQS").unwrap_or(DEFAULT_SEQS);
    let max_steps = env_u64("DAGRT_FUZZ_STEPS").unwrap_or(DEFAULT_STEPS).max(1);
    let base = env_u64("DAGRT_FUZZ_SEED").unwrap_or(DEFAULT_SEED);
    let hang = Duration::from_secs(env_u64("DAGRT_FUZZ_HANG_SECS").unwrap_or(60));
    let shared = Arc::new(Shared {
        progress: AtomicU64::new(0),
        seed: AtomicU64::new(base),
        log: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
    });
    install_panic_hook();
    let dog = start_watchdog(shared.clone(), hang);
    let t0 = Instant::now();
    let mut totals = Totals::default();
    let mut failures: Vec<Failure> = Vec::new();
    for i in 0..seqs {
        let seed = seq_seed(base, i);
        let steps = Rng(seed ^ 0x5157_E905).range((max_steps / 4).max(1), max_steps) as usize;
        failures.extend(run_sequence(seed, steps, &shared, &mut totals));
    }
    shared.stop.store(true, SeqCst);
    let _ = dog.join();
    eprintln!(
        "api_fuzz: {} sequences, {} steps, {} calls, {} tasks submitted, {} ran, {:.1} s (base seed {base:#x})",
        totals.seqs,
        totals.steps,
        totals.calls,
        totals.nodes,
        totals.ran,
        t0.elapsed().as_secs_f64()
    );
    let hist: Vec<String> = totals
        .by_status
        .iter()
        .map(|(k, v)| format!("{}={v}", k.trim_start_matches("DAGRT_STATUS_")))
        .collect();
    eprintln!("api_fuzz: statuses returned: {}", hist.join(" "));
    eprintln!(
        "api_fuzz: dagrt_worker_close_for on initialised workers: {} closed = 0, {} closed = 1; {} new runs refused while closing",
        totals.close_for[0], totals.close_for[1], totals.refused_closing
    );
    if failures.is_empty() {
        return;
    }
    // group by signature: print each distinct failure once, with its shortest sequence log
    let mut by_sig: BTreeMap<String, Vec<&Failure>> = BTreeMap::new();
    for f in &failures {
        by_sig.entry(f.sig.clone()).or_default().push(f);
    }
    let mut report = String::new();
    for (sig, fs) in &by_sig {
        let f = fs.iter().min_by_key(|f| f.log.len()).expect("non-empty");
        let seeds: Vec<String> = fs
            .iter()
            .take(6)
            .map(|f| format!("{:#x}", f.seed))
            .collect();
        report += &format!(
            "\n=== {sig}\n    {} occurrence(s), sequence seeds {}{}\n    {}\n    replay: DAGRT_FUZZ_SEED={:#x} DAGRT_FUZZ_SEQS=1\n    call log of that sequence:\n",
            fs.len(),
            seeds.join(", "),
            if fs.len() > 6 { ", ..." } else { "" },
            f.detail.replace('\n', "\n    "),
            f.seed
        );
        let keep = env_u64("DAGRT_FUZZ_LOG_LINES").unwrap_or(150) as usize;
        let tail = f.log.len().saturating_sub(keep);
        if tail > 0 {
            report += &format!("      ... ({tail} earlier lines)\n");
        }
        for l in &f.log[tail..] {
            report += &format!("      {l}\n");
        }
    }
    eprintln!("{report}");
    panic!(
        "api_fuzz: {} failed check(s), {} distinct: {}",
        failures.len(),
        by_sig.len(),
        by_sig.keys().cloned().collect::<Vec<_>>().join(" | ")
    );
}
