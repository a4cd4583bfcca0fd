//! The random graph builder (`Builder`, with `Opts`, `Totals` and `Built`): scopes, tasks and
//! allocs, the reference model kept as it submits, and the gated runs' wiring check.

use super::*;

// ---------------------------------------------------------------------------------------
// Building one run

#[derive(Clone, Copy, Default)]
pub(crate) struct Opts {
    /// Tiny task window: keep every slot held by an open scope within the last window-2 ids.
    pub(crate) tiny_window: Option<u64>,
    /// Allow gated runs (executors wait until the graph is complete).
    pub(crate) gating: bool,
    /// Allow the 64-deep scope excursion and the unbalanced-scope checks.
    pub(crate) scope_errors: bool,
}

#[derive(Default)]
pub(crate) struct Totals {
    pub(crate) runs: u64,
    pub(crate) gated: u64,
    pub(crate) nodes: u64,
    pub(crate) groups: u64,
    pub(crate) members: u64,
    pub(crate) allocs: u64,
    pub(crate) autos: u64,
    pub(crate) tensors: u64,
    pub(crate) edges: u64,
    pub(crate) wiring_checks: u64,
    pub(crate) alive_checks: u64,
    pub(crate) deep: u64,
    pub(crate) max_depth: usize,
    pub(crate) error_paths: u64,
}

pub(crate) struct Built {
    pub(crate) seed: u64,
    pub(crate) env_name: &'static str,
    pub(crate) lanes: Lanes,
    pub(crate) run_id: u64,
    pub(crate) gated: bool,
    pub(crate) nodes: Vec<Node>,
    pub(crate) ops: Vec<Op>,
    pub(crate) bufs: Vec<Buf>,
    /// From Box::into_raw; freed by `finish` once the run is done, leaked on failure.
    pub(crate) rr: *const RunRec,
}

pub(crate) struct Builder<'a> {
    pub(crate) rng: Rng,
    pub(crate) env: &'a Env,
    pub(crate) o: MutexGuard<'a, Orchestrator>,
    pub(crate) opts: Opts,
    pub(crate) run_id: u64,
    pub(crate) bufs: Vec<Buf>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) frames: Vec<Vec<usize>>,
    pub(crate) ops: Vec<Op>,
    pub(crate) last_slot: Option<u64>,
    pub(crate) rr: &'a RunRec,
    pub(crate) scratch: Vec<u64>,
    pub(crate) totals: &'a mut Totals,
}

pub(crate) fn status_of(r: Result<impl Sized, dagrt::error::Error>) -> Result<(), Status> {
    r.map(|_| ()).map_err(|e| e.status)
}

impl<'a> Builder<'a> {
    pub(crate) fn depth(&self) -> usize {
        self.frames.len()
    }

    pub(crate) fn scope_begin(&mut self) -> Result<(), String> {
        self.o
            .scope_begin()
            .map_err(|e| format!("scope_begin at depth {}: {e}", self.depth()))?;
        let d = begin_frame(&mut self.frames, &mut self.ops);
        self.totals.max_depth = self.totals.max_depth.max(d);
        Ok(())
    }

    pub(crate) fn scope_end(&mut self) -> Result<(), String> {
        let d = self.depth();
        self.o
            .scope_end()
            .map_err(|e| format!("scope_end at depth {d}: {e}"))?;
        self.close_frame();
        self.ops.push(Op::End(d));
        Ok(())
    }

    /// Model side of a scope end: its nodes lose their scope reference, its buffers die.
    pub(crate) fn close_frame(&mut self) {
        for i in end_frame(&mut self.frames, &mut self.bufs) {
            self.nodes[i].frame_open = false;
        }
    }

    /// Tiny window: the slot of id `next - window` must be reclaimable without the
    /// orchestrator's help, so every slot an open scope holds must be recent.
    fn make_room(&mut self) -> Result<(), String> {
        let Some(w) = self.opts.tiny_window else {
            return Ok(());
        };
        if let Some(last) = self.last_slot {
            let next = last + 1;
            loop {
                let oldest = self
                    .frames
                    .iter()
                    .flatten()
                    .map(|&i| self.nodes[i].slot)
                    .min();
                match oldest {
                    Some(s) if s + w - 1 <= next => {
                        if self.depth() <= 1 {
                            return Err("tiny window: the outer scope holds a slot".into());
                        }
                        self.scope_end()?;
                    }
                    _ => break,
                }
            }
        }
        if self.depth() == 1 {
            self.scope_begin()?;
        }
        Ok(())
    }

    fn gen_member(&mut self, node: usize, m: usize) -> Member {
        let (tensors, bufs) = gen_tensors(&mut self.rng, &self.bufs);
        let nodes = &self.nodes;
        let deps = gen_deps(&mut self.rng, node, self.run_id, |p| nodes[p].slot);
        let spin = gen_spin(&mut self.rng);
        Member {
            tensors,
            bufs,
            deps,
            scalars: [self.rr as *const RunRec as u64, node as u64, m as u64, spin],
            hash: 0,
        }
    }

    pub(crate) fn submit_task(&mut self) -> Result<(), String> {
        self.make_room()?;
        let idx = self.nodes.len();
        if idx >= MAX_NODES {
            return Err("generator produced too many nodes".into());
        }
        let kind = gen_kind(&mut self.rng, &self.env.lanes);
        let n = kind.members();
        let mut members: Vec<Member> = (0..n).map(|m| self.gen_member(idx, m)).collect();

        // Reference model (`common::model_required`).
        let refs: Vec<MemberRefs> = members
            .iter()
            .map(|m| (&m.deps[..], &m.tensors[..], &m.bufs[..]))
            .collect();
        self.totals.tensors += refs.iter().map(|r| r.1.len() as u64).sum::<u64>();
        let nodes = &self.nodes;
        let node_of = |slot| nodes.iter().position(|x| x.slot == slot).expect("dep");
        let (req, deps) = model_required(&mut self.bufs, &mut self.scratch, &refs, idx, node_of);
        // A retained producer still held by an open scope is alive at submit, so the engine
        // must keep it alive until this node finishes.
        let alive: Vec<u64> = req
            .iter()
            .filter(|&(&p, &retain)| retain && self.nodes[p].frame_open)
            .map(|(&p, _)| self.nodes[p].slot)
            .collect();
        self.totals.alive_checks += alive.len() as u64;
        *lock(&self.rr.alive[idx]) = alive;

        let cfg0 = self.rng.next();
        let mut config = CallConfig {
            flags: self.rng.below(4) as u32,
            block_dim: self.rng.below(64) as u32,
            user: [0; 6],
        };
        config.user[0] = cfg0;
        let args: Vec<TaskArgs> = members
            .iter_mut()
            .map(|m| task_args(&mut m.tensors, &m.scalars, &m.deps))
            .collect();
        let (sk, workers) = kind.submit_kind();
        let h = self
            .o
            .submit(sk, &callable(), &args, &config, &workers)
            .map_err(|e| format!("submit of node n{idx} ({kind:?}) failed: {e}"))?;
        drop(args);
        if h.run_id != self.run_id {
            return Err(format!(
                "node n{idx}: handle names run {} instead of {}",
                h.run_id, self.run_id
            ));
        }
        self.last_slot = Some(h.slot);
        let level = self.depth();
        for (mi, m) in members.iter_mut().enumerate() {
            m.hash = hash_tensors(&m.tensors);
            self.totals.autos +=
                adopt_autos(&mut self.bufs, &m.tensors, &mut m.bufs, idx, mi, level)?;
        }
        self.totals.nodes += 1;
        self.totals.members += n as u64;
        if matches!(kind, Kind::NlGroup(_) | Kind::SubGroup(_)) {
            self.totals.groups += 1;
        }
        self.totals.edges += req
            .keys()
            .filter(|&&p| !matches!(self.nodes[p].kind, Kind::Alloc))
            .count() as u64;
        self.nodes.push(Node {
            kind,
            slot: h.slot,
            level: self.depth(),
            frame_open: true,
            members,
            deps,
            req,
            cfg0,
            alloc: None,
        });
        self.frames.last_mut().expect("frame").push(idx);
        self.ops.push(Op::Node(idx));
        Ok(())
    }

    pub(crate) fn submit_alloc(&mut self) -> Result<(), String> {
        self.make_room()?;
        let idx = self.nodes.len();
        let (shape, dtype, layout) = gen_alloc(&mut self.rng);
        let (ptr, h) = self
            .o
            .alloc(&shape, dtype as u32)
            .map_err(|e| format!("alloc of node n{idx} failed: {e}"))?;
        let buf = alloc_buf(idx, ptr, &shape, dtype, layout, self.depth())?;
        if h.run_id != self.run_id {
            return Err(format!("alloc n{idx}: handle names run {}", h.run_id));
        }
        self.last_slot = Some(h.slot);
        self.bufs.push(buf);
        self.nodes.push(Node {
            kind: Kind::Alloc,
            slot: h.slot,
            level: self.depth(),
            frame_open: true,
            members: Vec::new(),
            deps: Vec::new(),
            req: BTreeMap::new(),
            cfg0: 0,
            alloc: Some((shape, dtype as u32)),
        });
        self.frames.last_mut().expect("frame").push(idx);
        self.ops.push(Op::Node(idx));
        self.totals.allocs += 1;
        Ok(())
    }

    /// Open every remaining level (64 nested scopes), check the 65th is refused, submit a
    /// task at the bottom, then come back.
    pub(crate) fn deep_excursion(&mut self) -> Result<(), String> {
        let back = self.depth();
        while self.depth() < 65 {
            self.scope_begin()?;
        }
        match status_of(self.o.scope_begin()) {
            Err(Status::ScopeTooDeep) => {}
            other => {
                return Err(format!(
                    "scope_begin beyond 64 nested scopes returned {other:?}, expected ScopeTooDeep"
                ))
            }
        }
        self.ops.push(Op::Note("65th nested scope refused".into()));
        self.submit_task()?;
        while self.depth() > back {
            self.scope_end()?;
        }
        self.totals.deep += 1;
        self.totals.error_paths += 1;
        Ok(())
    }

    /// Deterministic inference check of a gated run: nothing has finished yet, so every
    /// required producer that is a task must have the consumer wired on it.
    pub(crate) fn check_wiring(&mut self) -> Vec<String> {
        let e = &self.env.engine;
        let mut errs = Vec::new();
        for (ci, c) in self.nodes.iter().enumerate() {
            if matches!(c.kind, Kind::Alloc) {
                continue;
            }
            let mut any_task = false;
            for (&p, &retain) in &c.req {
                let pn = &self.nodes[p];
                if matches!(pn.kind, Kind::Alloc) {
                    continue;
                }
                any_task = true;
                self.totals.wiring_checks += 1;
                let s = e.slots.get(pn.slot);
                let g = s.core.lock_sync();
                if g.id != pn.slot {
                    errs.push(format!(
                        "gated: producer n{p} (slot {}) is no longer in its slot (holds {}) before anything finished",
                        pn.slot, g.id
                    ));
                    continue;
                }
                match g.consumers.iter().find(|x| x.slot == c.slot) {
                    None => errs.push(format!(
                        "MISSED EDGE: n{ci} (slot {}) must wait for n{p} (slot {}) but is not among its consumers ({} consumers: {:?})",
                        c.slot, pn.slot, g.consumers.len(),
                        g.consumers.iter().map(|x| x.slot).collect::<Vec<_>>()
                    )),
                    Some(x) if retain && !x.retain => errs.push(format!(
                        "n{ci} (slot {}) is wired on n{p} (slot {}) without retaining it (tensor edge or add_dep)",
                        c.slot, pn.slot
                    )),
                    Some(_) => {}
                }
            }
            let st = e.slots.get(c.slot).core.state();
            if any_task && st != PENDING {
                errs.push(format!(
                    "n{ci} (slot {}) has unfinished required producers but is {}",
                    c.slot,
                    state_name(st)
                ));
            }
        }
        errs
    }
}
