//! The checks on a finished run: terminal status and message, per-run counts, each task's
//! fate, views and ordering, and the executors' own findings.

use crate::executors::{GLOBAL_ERRORS, PANICS};
use crate::ffi::{last_error, sname};
use crate::fuzzer::Fz;
use crate::model::{FState, WState, R};
use dagrt::capi::run::{self as cr, RunStats};
use dagrt::error::Status;
use std::collections::HashMap;
use std::sync::atomic::Ordering::SeqCst;

pub(crate) enum MsgCheck {
    None,
    /// One of these failing tasks' messages (the run's first failure).
    Tokens(Vec<String>),
    Contains(String),
}

fn msg_ok(msg: &str, chk: &MsgCheck) -> bool {
    match chk {
        MsgCheck::None => true,
        MsgCheck::Contains(s) => msg.contains(s.as_str()),
        MsgCheck::Tokens(v) => v.iter().any(|t| match t.strip_prefix("$") {
            Some(suffix) => msg.ends_with(suffix),
            None => msg.contains(t.as_str()),
        }),
    }
}

impl Fz {
    /// The terminal status of a run (and what its message must say).
    pub(crate) fn expected_terminal(&self, ri: usize) -> (Vec<Status>, MsgCheck) {
        let run = &self.runs[ri];
        if let Some(t) = &run.failed {
            return (
                vec![Status::OrchestrationFailed],
                MsgCheck::Contains(t.clone()),
            );
        }
        let mut ends_failed: HashMap<usize, bool> = HashMap::new();
        let mut tokens = Vec::new();
        for &n in &run.nodes {
            let nd = &self.nodes[n];
            let Some(t) = &nd.task else {
                ends_failed.insert(n, false);
                continue;
            };
            let poisoned = nd
                .producers
                .iter()
                .any(|e| ends_failed.get(&e.p).copied().unwrap_or(false));
            if !poisoned {
                if let Some((_, mode)) = t.fail {
                    tokens.push(if mode == 1 {
                        format!("$failed with code {}", 1000 + nd.rec)
                    } else {
                        format!("fuzz-fail node <{}>", nd.rec)
                    });
                }
            }
            ends_failed.insert(n, poisoned || t.fail.is_some());
        }
        if ends_failed.values().any(|&f| f) {
            (vec![Status::TaskFailed], MsgCheck::Tokens(tokens))
        } else {
            (vec![Status::Ok], MsgCheck::None)
        }
    }

    pub(crate) fn check_terminal_msg(&mut self, ri: usize, st: Status) -> R {
        if st == Status::Ok {
            return Ok(());
        }
        let (_, chk) = self.expected_terminal(ri);
        let msg = self.last_msg.clone();
        self.check(msg_ok(&msg, &chk), "run failure message", || {
            let want = match &chk {
                MsgCheck::None => String::new(),
                MsgCheck::Contains(s) => format!("containing {s:?}"),
                MsgCheck::Tokens(v) => format!("one of {v:?}"),
            };
            format!("run failure message {msg:?}, expected {want}")
        })
    }

    /// The run was observed terminal: check what ran, and its counts.
    pub(crate) fn on_done(&mut self, ri: usize) -> R {
        if self.runs[ri].done_seen {
            return Ok(());
        }
        self.runs[ri].done_seen = true;
        self.check_fates(ri)?;
        self.check_run_stats(ri)
    }

    fn check_run_stats(&mut self, ri: usize) -> R {
        let w = self.runs[ri].worker;
        let Some(id) = self.runs[ri].id else {
            return Ok(());
        };
        if self.workers[w].state != WState::Init || self.runs[ri].released || self.runs[ri].gone {
            return Ok(());
        }
        let mut rs = RunStats::default();
        let st = cr::dagrt_run_stats(self.workers[w].ptr, id, &mut rs);
        if st != Status::Ok {
            return self.fatal(
                "dagrt_run_stats failed on a done run",
                format!("run {id}: {} \"{}\"", sname(st), last_error().0),
            );
        }
        self.log(format!(
            "       (run {id} stats: completed {}, failed {}, cancelled {}, live {}, done {})",
            rs.completed, rs.failed, rs.cancelled, rs.live_slots, rs.done
        ));
        let (mut ok_nodes, mut tasks, mut not_ok) = (0u64, 0u64, 0u64);
        for &n in &self.runs[ri].nodes {
            let nd = &self.nodes[n];
            let Some(t) = &nd.task else { continue };
            tasks += 1;
            let ran = self.rec.nodes[nd.rec].m[0].entered.load(SeqCst) > 0;
            if ran && t.fail.is_none() {
                ok_nodes += 1;
            } else {
                not_ok += 1;
            }
        }
        let failed_run = self.runs[ri].failed.is_some();
        let ok = rs.done == 1
            && rs.live_slots == 0
            && rs.completed == ok_nodes
            && rs.completed + rs.failed + rs.cancelled == tasks
            && (failed_run || (rs.cancelled == 0 && rs.failed == not_ok));
        self.check(ok, "dagrt_run_stats counts", || {
            format!("run {id}: stats {rs:?}, expected done 1, live 0, completed {ok_nodes}, {} of {tasks} tasks", if failed_run { format!("failed + cancelled {not_ok}") } else { format!("failed {not_ok}, cancelled 0") })
        })
    }

    /// What ran matches the model: fates, run-once, lanes, views, dependency order.
    pub(crate) fn check_fates(&mut self, ri: usize) -> R {
        if self.runs[ri].checked {
            return Ok(());
        }
        self.runs[ri].checked = true;
        self.check_executor_errors()?;
        let failed_run = self.runs[ri].failed.is_some();
        let run_id = self.runs[ri].id;
        let nodes = self.runs[ri].nodes.clone();
        let mut ran: HashMap<usize, bool> = HashMap::new();
        let mut ends_failed: HashMap<usize, bool> = HashMap::new();
        for &n in &nodes {
            let (rec, fstate) = (self.nodes[n].rec, self.nodes[n].fstate);
            let Some(t) = &self.nodes[n].task else {
                ran.insert(n, true);
                ends_failed.insert(n, false);
                continue;
            };
            let members = t.members;
            let fails = t.fail.is_some();
            let producers = self.nodes[n].producers.clone();
            let mr = &self.rec.nodes[rec].m;
            let entered: Vec<u32> = (0..members).map(|m| mr[m].entered.load(SeqCst)).collect();
            let exited: Vec<u32> = (0..members).map(|m| mr[m].exited.load(SeqCst)).collect();
            self.check(
                entered == exited,
                "an executor is still running after its run ended",
                || format!("record {rec}: entered {entered:?}, exited {exited:?}"),
            )?;
            self.check(
                entered.iter().all(|&c| c <= 1),
                "a task ran more than once",
                || format!("record {rec}: invocations per member {entered:?}"),
            )?;
            let did = entered.iter().all(|&c| c == 1);
            let none = entered.iter().all(|&c| c == 0);
            self.check(did || none, "a group ran partially", || {
                format!("record {rec}: invocations per member {entered:?}")
            })?;
            let expect = if !failed_run {
                Some(
                    !producers
                        .iter()
                        .any(|e| ends_failed.get(&e.p).copied().unwrap_or(false)),
                )
            } else {
                match fstate {
                    FState::Ran => Some(true),
                    FState::NotRan => Some(false),
                    _ => None,
                }
            };
            let precs: Vec<(usize, Option<bool>)> = producers
                .iter()
                .map(|e| (self.nodes[e.p].rec, ends_failed.get(&e.p).copied()))
                .collect();
            // a task poisoned by a failed writer of memory that was reclaimed and handed
            // out again before it read it
            let stale_poison = self.nodes[n].reads.iter().any(|&(lo, hi)| {
                self.runs[ri].stale.iter().any(|e| {
                    e.0 < hi && lo < e.1 && ends_failed.get(&e.2).copied().unwrap_or(false)
                })
            });
            let sig = match (expect, stale_poison) {
                (Some(true), true) => "a failed task's TensorMap tombstone outlives its memory: a reader of reallocated heap memory is poisoned",
                (Some(true), false) => "a task that must run did not run",
                _ => "a task that must not run ran",
            };
            if let Some(x) = expect {
                self.check(x == did, sig, || {
                    format!(
                        "record {rec} (run {run_id:?}{}): ran = {did}, the model says {x} (producers: {:?})",
                        if failed_run { ", submission failed" } else { "" },
                        precs
                    )
                })?;
            }
            if did {
                for e in &producers {
                    let pr = ran.get(&e.p).copied().unwrap_or(false);
                    let pf = ends_failed.get(&e.p).copied().unwrap_or(true);
                    let prec = self.nodes[e.p].rec;
                    self.check(pr && !pf, "a task ran although a producer failed or never ran", || format!("record {rec} ran; producer record {prec} ran = {pr}, failed = {pf}"))?;
                }
                self.check_views(n)?;
                self.check_order(n)?;
                self.totals.ran += 1;
            }
            ran.insert(n, did);
            ends_failed.insert(n, !did || fails);
        }
        Ok(())
    }

    fn check_views(&mut self, n: usize) -> R {
        let nd = &self.nodes[n];
        let Some(t) = &nd.task else { return Ok(()) };
        let run_id = self.runs[nd.run].id;
        let nsub = self.workers[nd.worker].nsub as i32;
        let mr = &self.rec.nodes[nd.rec].m;
        let mut errs = Vec::new();
        let mut seen_w = Vec::new();
        let slot0 = mr[0].slot.load(SeqCst);
        for (m, r) in mr.iter().enumerate().take(t.members) {
            let wid = r.worker.load(SeqCst);
            if t.sub {
                if !(-nsub..=-1).contains(&wid) {
                    errs.push(format!(
                        "member {m} ran on lane id {wid}, not a SUB lane (-1..-{nsub})"
                    ));
                }
                if seen_w.contains(&wid) {
                    errs.push(format!(
                        "member {m} shares SUB lane {wid} with another member"
                    ));
                }
                seen_w.push(wid);
            } else if wid != t.targets[m] {
                errs.push(format!(
                    "member {m} ran on lane {wid}, its target is {}",
                    t.targets[m]
                ));
            }
            if r.midx.load(SeqCst) != m as u32 || r.gsize.load(SeqCst) != t.members as u32 {
                errs.push(format!(
                    "member {m}: view says member {} of {}",
                    r.midx.load(SeqCst),
                    r.gsize.load(SeqCst)
                ));
            }
            if let Some(id) = run_id {
                if r.run.load(SeqCst) != id {
                    errs.push(format!(
                        "member {m}: view run id {} (run {id})",
                        r.run.load(SeqCst)
                    ));
                }
            }
            let slot = r.slot.load(SeqCst);
            if slot != slot0 || slot >> 24 != nd.seq || nd.handle.is_some_and(|h| h.slot != slot) {
                errs.push(format!(
                    "member {m}: view slot {slot:#x}, handle {:?}, sequence number {}",
                    nd.handle.map(|h| h.slot),
                    nd.seq
                ));
            }
            if r.cfg0.load(SeqCst) != t.cfg0 {
                errs.push(format!(
                    "member {m}: config user[0] {:#x}, expected {:#x}",
                    r.cfg0.load(SeqCst),
                    t.cfg0
                ));
            }
            if r.thash.load(SeqCst) != t.thash[m] {
                errs.push(format!(
                    "member {m}: the executor saw other tensors than submitted"
                ));
            }
            if r.shash.load(SeqCst) != t.shash[m] {
                errs.push(format!(
                    "member {m}: the executor saw other scalars than submitted"
                ));
            }
        }
        let rec = nd.rec;
        self.check(
            errs.is_empty(),
            "executor view does not match the submit",
            || format!("record {rec}: {}", errs.join("; ")),
        )
    }

    fn check_order(&mut self, n: usize) -> R {
        let nd = &self.nodes[n];
        let Some(t) = &nd.task else { return Ok(()) };
        let mr = &self.rec.nodes[nd.rec].m;
        let start = (0..t.members)
            .map(|m| mr[m].start.load(SeqCst))
            .min()
            .unwrap_or(0);
        for e in &nd.producers {
            let p = &self.nodes[e.p];
            let Some(pt) = &p.task else { continue };
            let pm = &self.rec.nodes[p.rec].m;
            let end = (0..pt.members)
                .map(|m| pm[m].end.load(SeqCst))
                .max()
                .unwrap_or(0);
            if end >= start {
                let (c, pr) = (nd.rec, p.rec);
                return self.fatal(
                    "a task started before its producer ended",
                    format!("record {c} started at {start}, producer record {pr} ended at {end}"),
                );
            }
        }
        Ok(())
    }

    pub(crate) fn check_executor_errors(&mut self) -> R {
        let e: Vec<String> =
            std::mem::take(&mut *self.rec.errors.lock().unwrap_or_else(|p| p.into_inner()));
        let mut g: Vec<String> =
            std::mem::take(&mut *GLOBAL_ERRORS.lock().unwrap_or_else(|p| p.into_inner()));
        let panics: Vec<String> =
            std::mem::take(&mut *PANICS.lock().unwrap_or_else(|p| p.into_inner()));
        if !panics.is_empty() {
            let first = panics[0].clone();
            let what = first.split(" panicked: ").nth(1).unwrap_or(&first);
            let sig = format!("PANIC: {}", what.lines().next().unwrap_or(""));
            g.extend(panics);
            return self.fatal(sig, g.join("\n"));
        }
        if e.is_empty() && g.is_empty() {
            return Ok(());
        }
        let all: Vec<String> = e.into_iter().chain(g).collect();
        let sig = all[0]
            .split(':')
            .nth(1)
            .unwrap_or("")
            .trim()
            .chars()
            .take(60)
            .collect::<String>();
        self.fatal(format!("executor-side check: {sig}"), all.join("\n"))
    }
}
