//! The random graph builder (`Builder`) and the byte-level reference model it keeps:
//! required producers (MUST) and the superset model (MAY); node records, options, totals.

use super::*;

// ---------------------------------------------------------------------------------------
// Views (as in random_dags)

pub(crate) fn tagged(mut t: Tensor, tag: Tag) -> Tensor {
    t.tag = tag as u32;
    t
}

/// A view the engine treats as dense for sure (all strides zero): its write drops every
/// TensorMap entry inside its byte interval.
fn surely_dense(t: &Tensor) -> bool {
    t.strides[..t.ndim as usize].iter().all(|&s| s == 0)
}

// ---------------------------------------------------------------------------------------
// Reference model

#[derive(Clone)]
pub(crate) struct Member {
    pub(crate) tensors: Vec<Tensor>,
    /// Buffer index per tensor (usize::MAX: auto-allocated OUTPUT).
    pub(crate) bufs: Vec<usize>,
    pub(crate) deps: Vec<Dep>,
    pub(crate) scalars: [u64; NSCALARS],
}

impl Member {
    pub(crate) fn args(&mut self) -> TaskArgs {
        task_args(&mut self.tensors, &self.scalars, &self.deps)
    }
}

pub(crate) struct Node {
    pub(crate) kind: Kind,
    pub(crate) slot: u64,
    pub(crate) level: usize,
    frame_open: bool,
    pub(crate) members: Vec<Member>,
    /// Explicit deps: (node, retain).
    pub(crate) deps: Vec<(usize, bool)>,
    /// Required producers (byte-exact last writers and explicit deps): node -> retained.
    pub(crate) req: BTreeMap<usize, bool>,
    /// Producers the engine may wire (superset model MAY, explicit deps included).
    pub(crate) may: BTreeSet<usize>,
    /// (failing member, failure mode).
    pub(crate) fail: Option<(usize, u64)>,
    /// Some required producer fails or must fail: this node must never run.
    pub(crate) must: bool,
    pub(crate) hold: bool,
    pub(crate) alloc: Option<(Vec<u64>, u32)>,
    pub(crate) note: Option<String>,
}

/// An entry of the superset model: a write's byte interval [lo, hi) by `node`.
struct UEntry {
    node: usize,
    lo: u64,
    hi: u64,
}

#[derive(Clone, Copy, Default)]
pub(crate) struct Opts {
    /// Percentage of task nodes with a failing member.
    pub(crate) fail_pct: u64,
    /// Executors wait until the graph is complete.
    pub(crate) gated: bool,
    /// Wait for failed nodes of ended scopes to be consumed, then consume them (Rust API).
    pub(crate) consumed_ops: bool,
    /// Percentage of task submits preceded by a hostile submit.
    pub(crate) hostile_pct: u64,
    /// Try every applicable corruption at one random op.
    pub(crate) hostile_sweep: bool,
    /// Every task holds until the test opens `hold_open`.
    pub(crate) hold_all: bool,
    /// Percentage of tasks that hold.
    pub(crate) hold_pct: u64,
}

/// A consumer the next task node must be: of node `producer`, which has failed and been
/// consumed, by handle (`Some(retain)`) and/or by reading a byte it last wrote.
pub(crate) struct Force {
    producer: usize,
    dep: Option<bool>,
    read: Option<(usize, u64)>,
}

#[derive(Default)]
pub(crate) struct Totals {
    pub(crate) runs: u64,
    pub(crate) gated: u64,
    pub(crate) c_runs: u64,
    pub(crate) nodes: u64,
    pub(crate) tasks: u64,
    pub(crate) groups: u64,
    pub(crate) allocs: u64,
    pub(crate) autos: u64,
    pub(crate) failing: u64,
    pub(crate) failing_ran: u64,
    pub(crate) poisoned_must: u64,
    pub(crate) poisoned_extra: u64,
    pub(crate) first_exact: u64,
    pub(crate) first_rc: u64,
    pub(crate) first_msg: u64,
    pub(crate) wiring_edges: u64,
    pub(crate) exact_poison_checks: u64,
    pub(crate) consumed_ops: u64,
    pub(crate) consumed_dep: u64,
    pub(crate) consumed_read: u64,
    pub(crate) consumed_timeouts: u64,
    pub(crate) hostile: u64,
    pub(crate) hostile_snap: u64,
    pub(crate) hostile_kinds: BTreeSet<String>,
    pub(crate) max_depth: usize,
    pub(crate) cancelled_runs: u64,
    pub(crate) cancelled_tasks: u64,
    pub(crate) cancel_running: u64,
    pub(crate) cancel_via: BTreeMap<&'static str, u64>,
    pub(crate) follow_ups: u64,
}

pub(crate) static LAST_RELEASED: AtomicU64 = AtomicU64::new(0);

pub(crate) struct Builder<'a> {
    pub(crate) rng: Rng,
    pub(crate) env: &'a Env,
    pub(crate) o: Orch<'a>,
    pub(crate) opts: Opts,
    pub(crate) run_id: u64,
    pub(crate) bufs: Vec<Buf>,
    pub(crate) nodes: Vec<Node>,
    frames: Vec<Vec<usize>>,
    pub(crate) ops: Vec<Op>,
    pub(crate) last_slot: Option<u64>,
    rr: &'a RunRec,
    scratch: Vec<u64>,
    pub(crate) totals: &'a mut Totals,
    u: Vec<UEntry>,
    pub(crate) force: Option<Force>,
}

impl<'a> Builder<'a> {
    pub(crate) fn new(
        env: &'a Env,
        o: Orch<'a>,
        run_id: u64,
        opts: Opts,
        rr: &'a RunRec,
        rng: Rng,
        totals: &'a mut Totals,
    ) -> Builder<'a> {
        let bufs = static_bufs(&env.statics);
        Builder {
            rng,
            env,
            o,
            opts,
            run_id,
            bufs,
            nodes: Vec::new(),
            frames: vec![Vec::new()],
            ops: Vec::new(),
            last_slot: None,
            rr,
            scratch: Vec::new(),
            totals,
            u: Vec::new(),
            force: None,
        }
    }

    pub(crate) fn depth(&self) -> usize {
        self.frames.len()
    }

    pub(crate) fn scope_begin(&mut self) -> Result<(), String> {
        self.o
            .scope_begin()
            .map_err(|e| format!("scope_begin at depth {}: {e:?}", self.depth()))?;
        let d = begin_frame(&mut self.frames, &mut self.ops);
        self.totals.max_depth = self.totals.max_depth.max(d);
        Ok(())
    }

    pub(crate) fn scope_end(&mut self) -> Result<(), String> {
        let d = self.depth();
        self.o
            .scope_end()
            .map_err(|e| format!("scope_end at depth {d}: {e:?}"))?;
        self.close_frame();
        self.ops.push(Op::End(d));
        Ok(())
    }

    /// Model side of a scope end: its nodes lose their scope reference, its buffers die.
    fn close_frame(&mut self) {
        for i in end_frame(&mut self.frames, &mut self.bufs) {
            self.nodes[i].frame_open = false;
        }
    }

    /// End every nested scope and close the run's submission.
    pub(crate) fn close_run(&mut self) -> Result<(), String> {
        while self.depth() > 1 {
            self.scope_end()?;
        }
        self.o
            .close(self.run_id)
            .map_err(|e| format!("close_run_submission: {e:?}"))?;
        self.close_frame();
        Ok(())
    }

    pub(crate) fn gen_member(&mut self, node: usize, m: usize, mode: u64, hold: bool) -> Member {
        let (tensors, bufs) = gen_tensors(&mut self.rng, &self.bufs);
        let nodes = &self.nodes;
        let deps = gen_deps(&mut self.rng, node, self.run_id, |p| nodes[p].slot);
        let spin = gen_spin(&mut self.rng);
        Member {
            tensors,
            bufs,
            deps,
            scalars: [
                self.rr as *const RunRec as u64,
                node as u64,
                m as u64,
                spin,
                mode,
                hold as u64,
            ],
        }
    }

    /// The reference model of node `idx` (`common::model_required`) over its members.
    fn model_required(
        &mut self,
        idx: usize,
        members: &[Member],
    ) -> (BTreeMap<usize, bool>, Vec<(usize, bool)>) {
        let refs: Vec<MemberRefs> = members
            .iter()
            .map(|m| (&m.deps[..], &m.tensors[..], &m.bufs[..]))
            .collect();
        let nodes = &self.nodes;
        let node_of = |slot| {
            nodes
                .iter()
                .position(|n| n.slot == slot)
                .expect("dep on a node of this run")
        };
        model_required(&mut self.bufs, &mut self.scratch, &refs, idx, node_of)
    }

    /// Superset model MAY, after the submit (auto-allocated addresses known): every earlier
    /// write whose byte interval meets the view's, unless a later dense write covered it, and
    /// the owner of every runtime-owned buffer a lookup reads (the engine holds it).
    fn model_may(
        &mut self,
        idx: usize,
        members: &[Member],
        deps: &[(usize, bool)],
    ) -> BTreeSet<usize> {
        let mut may: BTreeSet<usize> = deps.iter().map(|d| d.0).collect();
        for m in members {
            for (t, &bi) in m.tensors.iter().zip(&m.bufs) {
                let reads = Tag::from_u32(t.tag).is_some_and(common::model_looks_up);
                let owner = self.bufs.get(bi).and_then(|b| b.owner);
                if let Some(o) = owner.filter(|&o| reads && o != idx) {
                    may.insert(o);
                }
            }
        }
        // Every lookup before any insert, as the engine does (a node's reads see the writers
        // before it, whatever the order of its tensors).
        for inserting in [false, true] {
            for t in members.iter().flat_map(|m| &m.tensors) {
                let Some(tag) = Tag::from_u32(t.tag) else {
                    continue;
                };
                let acts = if inserting {
                    common::model_inserts(tag)
                } else {
                    common::model_looks_up(tag)
                };
                if tag == Tag::NoDep || !acts {
                    continue;
                }
                view_bytes(t, 0, &mut self.scratch);
                let (Some(&lo), Some(&hi)) = (self.scratch.iter().min(), self.scratch.iter().max())
                else {
                    continue;
                };
                let hi = hi + 1;
                if !inserting {
                    for e in &self.u {
                        if e.node != idx && e.lo < hi && lo < e.hi {
                            may.insert(e.node);
                        }
                    }
                    continue;
                }
                if surely_dense(t) {
                    self.u.retain(|e| !(lo <= e.lo && e.hi <= hi));
                }
                self.u.push(UEntry { node: idx, lo, hi });
            }
        }
        may
    }

    pub(crate) fn submit_task(&mut self) -> Result<(), String> {
        let idx = self.nodes.len();
        if idx >= MAX_NODES {
            return Err("generator produced too many nodes".into());
        }
        let kind = gen_kind(&mut self.rng, &self.env.lanes);
        let n = kind.members();
        let fail = self
            .rng
            .pct(self.opts.fail_pct)
            .then(|| (self.rng.below(n as u64) as usize, self.rng.range(1, 3)));
        let hold = self.opts.hold_all || self.rng.pct(self.opts.hold_pct);
        let mut members: Vec<Member> = (0..n)
            .map(|m| {
                let mode = match fail {
                    Some((fm, mode)) if fm == m => mode,
                    _ => FAIL_NONE,
                };
                self.gen_member(idx, m, mode, hold)
            })
            .collect();
        let forced = self.force.take();
        let mut note = None;
        if let Some(f) = &forced {
            let p = &self.nodes[f.producer];
            let mut what = Vec::new();
            if let Some(retain) = f.dep {
                let h = TaskHandle {
                    run_id: self.run_id,
                    slot: p.slot,
                };
                members[0].deps.push(dep(h, retain));
                what.push(if retain { "add_dep" } else { "add_dep_wait" });
            }
            if let Some((bi, byte)) = f.read {
                let b = &self.bufs[bi];
                // First, so no write of the node itself shadows the producer's byte.
                members[0].tensors.insert(
                    0,
                    tagged(tensor(b.base, byte, DataType::U8, &[], &[]), Tag::Input),
                );
                members[0].bufs.insert(0, bi);
                what.push("INPUT of its output");
            }
            note = Some(format!(
                "consumer of n{} after it failed and was consumed ({})",
                f.producer,
                what.join(" + ")
            ));
        }
        let (req, deps) = self.model_required(idx, &members);
        if self.opts.hostile_pct > 0 && self.rng.pct(self.opts.hostile_pct) {
            self.hostile_attempt(&kind, &members, None)?;
        }
        let mut config = CallConfig {
            flags: self.rng.below(4) as u32,
            block_dim: self.rng.below(64) as u32,
            user: [0; 6],
        };
        config.user[0] = self.rng.next();
        let args: Vec<TaskArgs> = members.iter_mut().map(|m| m.args()).collect();
        let (sk, workers) = kind.submit_kind();
        let h = self
            .o
            .submit(sk, &callable(), &args, &config, &workers)
            .map_err(|e| format!("submit of node n{idx} ({kind:?}) failed: {e:?}"))?;
        drop(args);
        if self.run_id == 0 {
            self.run_id = h.run_id;
        } else if h.run_id != self.run_id {
            return Err(format!(
                "node n{idx}: handle names run {} instead of {}",
                h.run_id, self.run_id
            ));
        }
        self.last_slot = Some(h.slot);
        let may = self.model_may(idx, &members, &deps);
        let level = self.depth();
        for (mi, m) in members.iter_mut().enumerate() {
            self.totals.autos +=
                adopt_autos(&mut self.bufs, &m.tensors, &mut m.bufs, idx, mi, level)?;
        }
        let must = req
            .keys()
            .any(|&p| self.nodes[p].fail.is_some() || self.nodes[p].must);
        self.totals.nodes += 1;
        self.totals.tasks += 1;
        if matches!(kind, Kind::NlGroup(_) | Kind::SubGroup(_)) {
            self.totals.groups += 1;
        }
        self.totals.failing += fail.is_some() as u64;
        self.nodes.push(Node {
            kind,
            slot: h.slot,
            level: self.depth(),
            frame_open: true,
            members,
            deps,
            req,
            may,
            fail,
            must,
            hold,
            alloc: None,
            note,
        });
        self.frames.last_mut().expect("frame").push(idx);
        self.ops.push(Op::Node(idx));
        if let Some(f) = forced {
            self.check_poisoned_at_submit(idx, f.producer)?;
        }
        Ok(())
    }

    /// A consumer of a consumed failed producer is poisoned by its own submit.
    fn check_poisoned_at_submit(&mut self, idx: usize, producer: usize) -> Result<(), String> {
        let Some(e) = self.env.engine() else {
            return Ok(());
        };
        let n = &self.nodes[idx];
        if !n.must {
            return Err(format!(
                "test model: forced consumer n{idx} of n{producer} is not a must-fail node"
            ));
        }
        let slot = e.slots.get(n.slot);
        let (id, _) = slot.core.ident();
        let st = slot.core.state();
        let ran =
            (0..n.members.len()).any(|m| self.rr.rec(idx, m).count.load(Ordering::SeqCst) > 0);
        let ok = if id == n.slot && st != FREE {
            st == FAILED
        } else {
            !ran
        };
        if !ok {
            return Err(format!(
                "MISSED POISONING: n{idx} (slot {}) names n{producer} (slot {}), which failed and was \
                 already consumed, yet right after its submit it is {} (ran: {ran})",
                n.slot,
                self.nodes[producer].slot,
                state_name(st)
            ));
        }
        Ok(())
    }

    pub(crate) fn submit_alloc(&mut self) -> Result<(), String> {
        let idx = self.nodes.len();
        if idx >= MAX_NODES {
            return Err("generator produced too many nodes".into());
        }
        let (shape, dtype, layout) = gen_alloc(&mut self.rng);
        let (ptr, h) = self
            .o
            .alloc(&shape, dtype as u32)
            .map_err(|e| format!("alloc of node n{idx} failed: {e:?}"))?;
        let buf = alloc_buf(idx, ptr, &shape, dtype, layout, self.depth())?;
        if self.run_id == 0 {
            self.run_id = h.run_id;
        } else if h.run_id != self.run_id {
            return Err(format!("alloc n{idx}: handle names run {}", h.run_id));
        }
        self.last_slot = Some(h.slot);
        let (lo, hi) = (buf.base, buf.base + buf.len);
        self.bufs.push(buf);
        self.u.retain(|e| !(lo <= e.lo && e.hi <= hi));
        self.u.push(UEntry { node: idx, lo, hi });
        self.nodes.push(Node {
            kind: Kind::Alloc,
            slot: h.slot,
            level: self.depth(),
            frame_open: true,
            members: Vec::new(),
            deps: Vec::new(),
            req: BTreeMap::new(),
            may: BTreeSet::new(),
            fail: None,
            must: false,
            hold: false,
            alloc: Some((shape, dtype as u32)),
            note: None,
        });
        self.frames.last_mut().expect("frame").push(idx);
        self.ops.push(Op::Node(idx));
        self.totals.nodes += 1;
        self.totals.allocs += 1;
        Ok(())
    }

    /// Pick a node of an ended scope that is sure to fail, wait until the engine consumed it,
    /// and make the next task node its consumer (by handle and/or through the TensorMap).
    pub(crate) fn consumed_producer_op(&mut self) -> Result<(), String> {
        let Some(e) = self.env.engine().cloned() else {
            return Ok(());
        };
        // Until a failure is recorded, failing executors wait for ticket 0, which only a
        // submitted failing node can take: wait for it only if one exists (a failing node
        // without failing ancestors runs, takes a ticket, and the holder of ticket 0 fails).
        if !self.nodes.iter().any(|n| n.fail.is_some()) {
            return Ok(());
        }
        let probe = self.rr.probe.get().expect("probe set at begin_run");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !probe.failure_recorded() {
            if Instant::now() > deadline {
                return Err(
                    "no failure was recorded within 10 s although failing nodes were submitted"
                        .into(),
                );
            }
            std::thread::yield_now();
        }
        let cands: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| {
                let n = &self.nodes[i];
                !n.frame_open && !n.kind.is_alloc() && (n.fail.is_some() || n.must)
            })
            .collect();
        if cands.is_empty() {
            return Ok(());
        }
        let c = cands[self.rng.below(cands.len() as u64) as usize];
        let slot = self.nodes[c].slot;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let s = e.slots.get(slot);
            let (id, _) = s.core.ident();
            if id != slot || s.core.state() == FREE {
                break;
            }
            if Instant::now() > deadline {
                self.totals.consumed_timeouts += 1;
                self.ops.push(Op::Note(format!(
                    "n{c} was not consumed within 5 s (state {}); no consumer forced",
                    state_name(s.core.state())
                )));
                return Ok(());
            }
            std::thread::yield_now();
        }
        let mut reads = Vec::new();
        for (bi, b) in self.bufs.iter().enumerate() {
            if !b.alive {
                continue;
            }
            if let Some(x) = b.last.iter().position(|&w| w as usize == c + 1) {
                reads.push((bi, x as u64));
            }
        }
        let read = if !reads.is_empty() && self.rng.pct(60) {
            Some(reads[self.rng.below(reads.len() as u64) as usize])
        } else {
            None
        };
        let dep = if read.is_none() || self.rng.pct(40) {
            Some(self.rng.pct(50))
        } else {
            None
        };
        self.totals.consumed_ops += 1;
        self.totals.consumed_dep += dep.is_some() as u64;
        self.totals.consumed_read += read.is_some() as u64;
        self.force = Some(Force {
            producer: c,
            dep,
            read,
        });
        Ok(())
    }
}
