//! Hostile submits (`Corrupt`: one bad thing placed late in otherwise valid arguments), the
//! gated runs' read-back of the engine's wiring, and `build_ops`, the random op loop.

use super::*;

// ---------------------------------------------------------------------------------------
// Hostile submits: one bad thing placed late in otherwise valid arguments

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Corrupt {
    BadDtype,
    BadTag,
    TensorReserved,
    TooManyDims,
    NullInput,
    StridedAuto,
    ExtentOverflow,
    BadDepKind,
    FutureSlot,
    ReleasedRun,
    UnknownWorker,
    DuplicateTarget,
    SubGroupTooBig,
    MemberReserved,
    NullTensors,
    UnknownCallable,
    AutoTooLarge,
}

pub(crate) const ALL_CORRUPT: [Corrupt; 17] = [
    Corrupt::BadDtype,
    Corrupt::BadTag,
    Corrupt::TensorReserved,
    Corrupt::TooManyDims,
    Corrupt::NullInput,
    Corrupt::StridedAuto,
    Corrupt::ExtentOverflow,
    Corrupt::BadDepKind,
    Corrupt::FutureSlot,
    Corrupt::ReleasedRun,
    Corrupt::UnknownWorker,
    Corrupt::DuplicateTarget,
    Corrupt::SubGroupTooBig,
    Corrupt::MemberReserved,
    Corrupt::NullTensors,
    Corrupt::UnknownCallable,
    Corrupt::AutoTooLarge,
];

impl Corrupt {
    fn applies(self, kind: &Kind) -> bool {
        match self {
            Corrupt::UnknownWorker => matches!(kind, Kind::Nl(_) | Kind::NlGroup(_)),
            Corrupt::DuplicateTarget => matches!(kind, Kind::NlGroup(ids) if ids.len() >= 2),
            Corrupt::SubGroupTooBig => matches!(kind, Kind::SubGroup(_)),
            _ => true,
        }
    }
    fn expected(self) -> Status {
        match self {
            Corrupt::FutureSlot | Corrupt::ReleasedRun => Status::StaleHandle,
            Corrupt::UnknownWorker => Status::UnknownWorker,
            Corrupt::DuplicateTarget => Status::DuplicateTarget,
            Corrupt::NullTensors => Status::NullPointer,
            Corrupt::UnknownCallable => Status::UnknownCallable,
            Corrupt::AutoTooLarge => Status::HeapExhausted,
            _ => Status::InvalidArgument,
        }
    }
}

impl Builder<'_> {
    /// Submit a corrupted copy of `members` and check it is refused without a trace.
    pub(crate) fn hostile_attempt(
        &mut self,
        kind: &Kind,
        members: &[Member],
        which: Option<Corrupt>,
    ) -> Result<(), String> {
        let c = match which {
            Some(c) => c,
            None => {
                let ok: Vec<Corrupt> = ALL_CORRUPT
                    .iter()
                    .copied()
                    .filter(|c| c.applies(kind))
                    .collect();
                ok[self.rng.below(ok.len() as u64) as usize]
            }
        };
        let mut ms: Vec<Member> = members.to_vec();
        if c != Corrupt::AutoTooLarge && self.rng.pct(60) {
            // A valid auto-allocated OUTPUT ahead of the bad argument: never written back.
            ms[0]
                .tensors
                .push(tagged(tensor(0, 0, DataType::U64, &[16], &[]), Tag::Output));
            ms[0].bufs.push(usize::MAX);
        }
        let (sk, mut workers) = kind.submit_kind();
        let mut cal = callable();
        let valid = tagged(
            tensor(self.bufs[0].base, 8, DataType::U64, &[4], &[]),
            Tag::Input,
        );
        let last = ms.len() - 1;
        let prev_slot = self.nodes.last().map_or(0, |n| n.slot);
        let bad: Option<Tensor> = match c {
            Corrupt::BadDtype => Some(Tensor { dtype: 99, ..valid }),
            Corrupt::BadTag => Some(Tensor { tag: 17, ..valid }),
            Corrupt::TensorReserved => Some(Tensor {
                reserved: 1,
                ..valid
            }),
            Corrupt::TooManyDims => Some(Tensor { ndim: 6, ..valid }),
            Corrupt::NullInput => Some(tagged(tensor(0, 0, DataType::U64, &[4], &[]), Tag::Input)),
            Corrupt::StridedAuto => Some(tagged(
                tensor(0, 0, DataType::U64, &[4, 4], &[1, 4]),
                Tag::Output,
            )),
            Corrupt::ExtentOverflow => Some(tagged(
                tensor(0xFFFF_FFFF_FFFF_0000, 0, DataType::U64, &[1 << 40], &[]),
                Tag::Input,
            )),
            Corrupt::AutoTooLarge => Some(tagged(
                tensor(0, 0, DataType::U8, &[64 << 20], &[]),
                Tag::Output,
            )),
            _ => None,
        };
        if let Some(t) = bad {
            ms[last].tensors.push(t);
            ms[last].bufs.push(0);
        }
        match c {
            Corrupt::BadDepKind => ms[last].deps.push(Dep {
                handle: TaskHandle {
                    run_id: self.run_id,
                    slot: prev_slot,
                },
                kind: 9,
                reserved: 0,
            }),
            Corrupt::FutureSlot => ms[last].deps.push(Dep {
                handle: TaskHandle {
                    run_id: self.run_id,
                    slot: self.last_slot.unwrap_or(0) + (3 << 24),
                },
                kind: DepKind::Retain as u32,
                reserved: 0,
            }),
            Corrupt::ReleasedRun => {
                let r = LAST_RELEASED.load(Ordering::Relaxed);
                ms[last].deps.push(Dep {
                    handle: TaskHandle {
                        run_id: if r == 0 { u64::MAX - 7 } else { r },
                        slot: prev_slot,
                    },
                    kind: DepKind::Wait as u32,
                    reserved: 0,
                })
            }
            Corrupt::UnknownWorker => *workers.last_mut().expect("NEXT_LEVEL target") = 999,
            Corrupt::DuplicateTarget => {
                let w0 = workers[0];
                *workers.last_mut().expect("target") = w0;
            }
            Corrupt::SubGroupTooBig => {
                while ms.len() <= self.env.lanes.subs as usize {
                    let m0 = ms[0].clone();
                    ms.push(m0);
                }
            }
            Corrupt::UnknownCallable => cal.digest[0] ^= 0xFF,
            _ => {}
        }
        let autos: Vec<(usize, usize)> = ms
            .iter()
            .enumerate()
            .flat_map(|(mi, m)| {
                m.tensors
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| t.data.is_null() && t.tag == Tag::Output as u32)
                    .map(move |(ti, _)| (mi, ti))
            })
            .collect();
        let mut args: Vec<TaskArgs> = ms.iter_mut().map(|m| m.args()).collect();
        let la = args.len() - 1;
        match c {
            Corrupt::MemberReserved => args[la].reserved = 1,
            Corrupt::NullTensors => {
                args[la].tensors = std::ptr::null_mut();
                args[la].num_tensors = args[la].num_tensors.max(1);
            }
            _ => {}
        }
        let before = self.opts.gated.then(|| snap(self.env, self.run_id));
        let r = self
            .o
            .submit(sk, &cal, &args, &CallConfig::default(), &workers);
        drop(args);
        let (st, msg) = match r {
            Ok(h) => {
                return Err(format!(
                    "HOSTILE SUBMIT ACCEPTED: {kind:?} with {c:?} returned slot {}",
                    h.slot
                ))
            }
            Err(x) => x,
        };
        if st != c.expected() || msg.is_empty() {
            return Err(format!(
                "hostile submit {kind:?} with {c:?}: got {st:?} '{msg}', expected {:?} with a message",
                c.expected()
            ));
        }
        for (mi, ti) in autos {
            if !ms[mi].tensors[ti].data.is_null() {
                return Err(format!(
                    "hostile submit {kind:?} with {c:?} failed ({st:?}) but wrote an auto-allocated \
                     address back into member {mi} tensor {ti}"
                ));
            }
        }
        if let Some(b) = before {
            let a = snap(self.env, self.run_id);
            if a != b {
                return Err(format!(
                    "LEFT BEHIND: hostile submit {kind:?} with {c:?} failed ({st:?}) but changed \
                     the stats:\n  before {b:?}\n  after  {a:?}"
                ));
            }
            self.totals.hostile_snap += 1;
        }
        self.totals.hostile += 1;
        self.totals.hostile_kinds.insert(format!("{c:?}"));
        self.ops.push(Op::Note(format!(
            "hostile {kind:?} with {c:?} refused: {st:?}"
        )));
        Ok(())
    }

    /// Every applicable corruption of one random task (gated runs: stats compared each time).
    fn hostile_sweep(&mut self) -> Result<(), String> {
        let idx = self.nodes.len();
        for _ in 0..3 {
            let kind = gen_kind(&mut self.rng, &self.env.lanes);
            let members: Vec<Member> = (0..kind.members())
                .map(|m| self.gen_member(idx, m, FAIL_NONE, false))
                .collect();
            for c in ALL_CORRUPT {
                if c.applies(&kind) {
                    self.hostile_attempt(&kind, &members, Some(c))?;
                }
            }
        }
        Ok(())
    }

    /// Gated runs, before the gate opens (nothing has finished): the engine's wiring, read
    /// from the producers' consumer lists, as (producer, consumer, retain) node triples.
    pub(crate) fn read_wiring(&mut self) -> Result<Vec<(usize, usize, bool)>, Vec<String>> {
        let e = self.env.engine().expect("Rust API").clone();
        let by_slot: HashMap<u64, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.slot, i))
            .collect();
        let mut edges = Vec::new();
        let mut errs = Vec::new();
        for (p, pn) in self.nodes.iter().enumerate() {
            if pn.kind.is_alloc() {
                continue;
            }
            let g = e.slots.get(pn.slot).core.lock_sync();
            if g.id != pn.slot {
                errs.push(format!(
                    "gated: n{p} (slot {}) left its slot before anything finished",
                    pn.slot
                ));
                continue;
            }
            for x in g.consumers.iter() {
                match by_slot.get(&x.slot) {
                    Some(&c) => edges.push((p, c, x.retain)),
                    None => errs.push(format!(
                        "gated: n{p} has consumer slot {} that is no node of the run",
                        x.slot
                    )),
                }
            }
        }
        for (c, cn) in self.nodes.iter().enumerate() {
            for (&p, &retain) in &cn.req {
                if self.nodes[p].kind.is_alloc() {
                    continue;
                }
                self.totals.wiring_edges += 1;
                match edges.iter().find(|e| e.0 == p && e.1 == c) {
                    None => errs.push(format!(
                        "MISSED EDGE: n{c} (slot {}) must wait for n{p} (slot {}) but is not among its consumers",
                        cn.slot, self.nodes[p].slot
                    )),
                    Some(e) if retain && !e.2 => errs.push(format!(
                        "n{c} is wired on n{p} without retaining it (tensor edge or add_dep)"
                    )),
                    _ => {}
                }
            }
        }
        for &(p, c, _) in &edges {
            if !self.nodes[c].may.contains(&p) {
                errs.push(format!(
                    "engine edge n{p} -> n{c} lies outside the superset model MAY (a dependency \
                     through no byte interval and no explicit dep)"
                ));
            }
        }
        if errs.is_empty() {
            Ok(edges)
        } else {
            Err(errs)
        }
    }
}

/// Random ops: scopes, tasks, allocs (and the optional consumed-producer, hostile sweep
/// extras). Stops before op `stop_at` (`n_ops`: after the last op); true if it stopped.
pub(crate) fn build_ops(
    b: &mut Builder<'_>,
    n_ops: u64,
    stop_at: Option<u64>,
) -> Result<bool, String> {
    let max_depth = if b.rng.pct(50) { 4 } else { 9 };
    let sweep_at = b.opts.hostile_sweep.then(|| b.rng.below(n_ops));
    for op in 0..n_ops {
        if stop_at == Some(op) {
            return Ok(true);
        }
        let r = b.rng.below(100);
        if r < 12 && b.depth() < max_depth {
            b.scope_begin()?;
        } else if r < 22 && b.depth() > 1 {
            b.scope_end()?;
        }
        if sweep_at == Some(op) {
            b.hostile_sweep()?;
        }
        if b.opts.consumed_ops && b.rng.pct(8) {
            b.consumed_producer_op()?;
        }
        if b.force.is_none() && b.rng.pct(7) {
            b.submit_alloc()?;
        } else {
            b.submit_task()?;
        }
    }
    Ok(stop_at == Some(n_ops))
}
