//! What a member computes (`compute`, over the bytes of its views), on the real
//! buffers (`Real`, for the executor) or on the model's shadow copies (`Shadow`), and the
//! model's per-byte state of a run (`Track`).

use super::*;

// ---------------------------------------------------------------------------------------
// What a member computes: the executor runs it on the buffers, the model on shadow copies.

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Byte memory as a member sees it: byte `off` from the data pointer of its tensor `t`.
pub(crate) trait Mem {
    fn load(&self, t: usize, off: u64) -> u8;
    fn store(&mut self, t: usize, off: u64, v: u8);
}

/// A member's work: hash every byte of its read tensors (`rmask`) in tensor order, then write
/// values derived from the hash into every element of its written tensors (`wmask`), in
/// tensor order. Returns the hash.
pub(crate) fn compute(seed: u64, ts: &[Tensor], rmask: u64, wmask: u64, mem: &mut impl Mem) -> u64 {
    let mut h = seed;
    // Each view's bytes relative to its data pointer, element by element (`view_bytes`).
    let mut bytes = Vec::new();
    for (ti, t) in ts.iter().enumerate().filter(|(ti, _)| rmask >> ti & 1 == 1) {
        let es = elem_size(t.dtype).expect("dtype") as usize;
        view_bytes(t, t.data as u64, &mut bytes);
        for elem in bytes.chunks(es) {
            for &o in elem {
                h = mix(h ^ mem.load(ti, o) as u64).wrapping_add(elem[0]);
            }
        }
    }
    for (ti, t) in ts.iter().enumerate().filter(|(ti, _)| wmask >> ti & 1 == 1) {
        let es = elem_size(t.dtype).expect("dtype") as usize;
        view_bytes(t, t.data as u64, &mut bytes);
        for (k, elem) in bytes.chunks(es).enumerate() {
            let v = mix(h ^ ((ti as u64) << 40) ^ k as u64);
            for (b, &o) in elem.iter().enumerate() {
                mem.store(ti, o, (v >> (8 * b)) as u8);
            }
        }
    }
    h
}

/// The executor's memory: the tensors' data pointers.
pub(crate) struct Real(pub(crate) Vec<*mut u8>);

impl Mem for Real {
    fn load(&self, t: usize, off: u64) -> u8 {
        // SAFETY: `off` is a byte of the tensor's view, inside its buffer (the generator keeps
        // views within their buffer), and no other task touches it while this one runs
        // (which the ordering under test guarantees; the model check catches a breach).
        unsafe { self.0[t].add(off as usize).read_volatile() }
    }
    fn store(&mut self, t: usize, off: u64, v: u8) {
        // SAFETY: as in `load`.
        unsafe { self.0[t].add(off as usize).write_volatile(v) }
    }
}

/// The model's memory: the shadow copy of each tensor's buffer (`buf_of`).
struct Shadow<'a> {
    shadow: &'a mut [Vec<u8>],
    buf_of: &'a [usize],
}

impl Mem for Shadow<'_> {
    fn load(&self, t: usize, off: u64) -> u8 {
        self.shadow[self.buf_of[t]][off as usize]
    }
    fn store(&mut self, t: usize, off: u64, v: u8) {
        self.shadow[self.buf_of[t]][off as usize] = v;
    }
}

/// The model's per-byte state of a run: last writer (node + 1, 0: none) and readers since.
pub(crate) struct Track {
    pub(crate) last: Vec<Vec<u8>>,
    pub(crate) readers: Vec<Vec<u64>>,
}

impl Track {
    /// The producers node `members` must follow: those its reads require (read after write,
    /// left to inference), and the hazards, the earlier readers and writers of the bytes it
    /// writes (write after read / write).
    pub(crate) fn required(
        &self,
        env: &Env,
        members: &[Member],
        bytes: &mut Vec<u64>,
    ) -> (BTreeSet<usize>, BTreeSet<usize>) {
        let mut inferred = BTreeSet::new();
        let mut hazards = BTreeSet::new();
        for m in members {
            for (k, (ten, &bi)) in m.tensors.iter().zip(&m.buf_of).enumerate() {
                view_bytes(ten, env.bufs[bi].base, bytes);
                for &b in bytes.iter() {
                    let b = b as usize;
                    let w = self.last[bi][b] as usize;
                    if m.rmask >> k & 1 == 1 && w != 0 {
                        inferred.insert(w - 1);
                    }
                    if m.wmask >> k & 1 == 1 {
                        if w != 0 {
                            hazards.insert(w - 1);
                        }
                        let mut rd = self.readers[bi][b];
                        while rd != 0 {
                            hazards.insert(rd.trailing_zeros() as usize);
                            rd &= rd - 1;
                        }
                    }
                }
            }
        }
        (inferred, hazards)
    }

    /// The model executes the node (`members`, node `idx`): members in order (they touch no
    /// byte another one writes), then the per-byte state: reads first, then writes.
    pub(crate) fn execute(
        &mut self,
        env: &Env,
        shadow: &mut [Vec<u8>],
        members: &mut [Member],
        idx: usize,
        bytes: &mut Vec<u64>,
    ) {
        for m in members.iter_mut() {
            let mut mem = Shadow {
                shadow,
                buf_of: &m.buf_of,
            };
            m.value = compute(m.seed, &m.tensors, m.rmask, m.wmask, &mut mem);
        }
        for pass_writes in [false, true] {
            for m in members.iter() {
                for (k, (ten, &bi)) in m.tensors.iter().zip(&m.buf_of).enumerate() {
                    let mask = if pass_writes { m.wmask } else { m.rmask };
                    if mask >> k & 1 == 0 {
                        continue;
                    }
                    view_bytes(ten, env.bufs[bi].base, bytes);
                    for &b in bytes.iter() {
                        let b = b as usize;
                        if pass_writes {
                            self.last[bi][b] = idx as u8 + 1;
                            self.readers[bi][b] = 0;
                        } else {
                            self.readers[bi][b] |= 1 << idx;
                        }
                    }
                }
            }
        }
    }
}
