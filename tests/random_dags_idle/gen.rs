//! The generator of a run's nodes: random tags, member tensors (`gen_member_tensors`) and
//! members (`gen_members`), and the explicit deps a node needs (`gen_explicit`).

use super::*;

// ---------------------------------------------------------------------------------------
// One run: the generator, the model, the submissions

pub(crate) fn reads(tag: Tag) -> bool {
    matches!(tag, Tag::Input | Tag::Inout)
}
pub(crate) fn writes(tag: Tag) -> bool {
    matches!(tag, Tag::Output | Tag::Inout | Tag::OutputExisting)
}

pub(crate) fn gen_tag(rng: &mut Rng) -> Tag {
    match rng.below(100) {
        0..=34 => Tag::Input,
        35..=54 => Tag::Output,
        55..=84 => Tag::Inout,
        _ => Tag::OutputExisting,
    }
}

/// A member's tensors: 0-3 random views with random tags. In a group, a
/// member's tensor may not touch bytes an earlier member writes, nor write bytes an earlier
/// member touches (`taken_r`/`taken_w`: (buffer, byte)); a view that would is redrawn, and
/// after 6 tries left out.
pub(crate) fn gen_member_tensors(
    rng: &mut Rng,
    env: &Env,
    taken_r: &mut HashSet<(usize, u64)>,
    taken_w: &mut HashSet<(usize, u64)>,
    t: &mut Totals,
) -> (Vec<Tensor>, Vec<usize>, u64, u64) {
    let nt = if rng.pct(8) { 0 } else { rng.range(1, 3) };
    let (mut tensors, mut buf_of, mut rmask, mut wmask) = (Vec::new(), Vec::new(), 0, 0);
    let mut mine_r = Vec::new();
    let mut mine_w = Vec::new();
    let mut bytes = Vec::new();
    for _ in 0..nt {
        let mut placed = false;
        for _ in 0..6 {
            // Mostly the small buffers, so that tasks meet often.
            let bi = match rng.below(10) {
                0..=4 => rng.below(3) as usize,
                5..=7 => 3 + rng.below(3) as usize,
                _ => 6 + rng.below(2) as usize,
            };
            let mut v = gen_view(rng, &env.bufs[bi]);
            let tag = gen_tag(rng);
            v.tag = tag as u32;
            view_bytes(&v, env.bufs[bi].base, &mut bytes);
            let clash = bytes.iter().any(|&b| {
                taken_w.contains(&(bi, b)) || (writes(tag) && taken_r.contains(&(bi, b)))
            });
            if clash {
                continue;
            }
            let k = tensors.len();
            if reads(tag) {
                rmask |= 1 << k;
                mine_r.extend(bytes.iter().map(|&b| (bi, b)));
            }
            if writes(tag) {
                wmask |= 1 << k;
                mine_w.extend(bytes.iter().map(|&b| (bi, b)));
            }
            tensors.push(v);
            buf_of.push(bi);
            placed = true;
            break;
        }
        t.dropped_tensors += !placed as u64;
    }
    taken_r.extend(mine_r);
    taken_w.extend(mine_w);
    (tensors, buf_of, rmask, wmask)
}

/// The members of a node of `kind`: their tensors (`gen_member_tensors`) and value seeds.
pub(crate) fn gen_members(rng: &mut Rng, env: &Env, kind: &Kind, t: &mut Totals) -> Vec<Member> {
    let (mut taken_r, mut taken_w) = (HashSet::new(), HashSet::new());
    (0..kind.members())
        .map(|_| {
            let (tensors, buf_of, rmask, wmask) =
                gen_member_tensors(rng, env, &mut taken_r, &mut taken_w, t);
            Member {
                tensors,
                buf_of,
                deps: Vec::new(),
                seed: rng.next(),
                rmask,
                wmask,
                value: 0,
            }
        })
        .collect()
}

/// The explicit deps (node, retain) of node `idx` of `run`: the `hazards` not `inferred`, and
/// now and then a random earlier node; each is added to a random member.
pub(crate) fn gen_explicit(
    rng: &mut Rng,
    run: &Run,
    idx: usize,
    members: &mut [Member],
    inferred: &BTreeSet<usize>,
    hazards: &BTreeSet<usize>,
) -> Vec<(usize, bool)> {
    let mut explicit: Vec<(usize, bool)> = hazards
        .difference(inferred)
        .map(|&p| (p, rng.pct(50)))
        .collect();
    if idx > 0 && rng.pct(10) {
        explicit.push((rng.below(idx as u64) as usize, rng.pct(50)));
    }
    for &(p, retain) in &explicit {
        let kind = if retain {
            DepKind::Retain
        } else {
            DepKind::Wait
        };
        let mi = rng.below(members.len() as u64) as usize;
        members[mi].deps.push(Dep {
            handle: TaskHandle {
                run_id: run.run_id,
                slot: run.nodes[p].slot,
            },
            kind: kind as u32,
            reserved: 0,
        });
    }
    explicit
}
