//! audit_views: brute-force byte-set oracle for Footprint (overlap / cover / dense / rows) and
//! a model-checked fuzz of tensormap::Inner (lookup, insert, lookup_insert, erase,
//! erase_range) with adversarial views.
//!
//! Run: cargo test --test audit_views -- --nocapture
//! Env: AV_ITERS (footprint pairs), AV_SEQS (map sequences), AV_SEED.

use dagrt::task::{dtype_size, Tensor};
use dagrt::tensormap::Inner;
use dagrt::view::Footprint;
use std::collections::{BTreeMap, BTreeSet, HashMap};

// ---------------------------------------------------------------- rng
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    fn range(&mut self, a: u64, b: u64) -> u64 {
        a + self.below(b - a + 1)
    }
    fn chance(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

fn env(name: &str, d: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

// ---------------------------------------------------------------- views
fn tensor(data: u64, offset: u64, dtype: u32, shape: &[u64], strides: &[u64]) -> Tensor {
    let mut t = Tensor {
        data: data as *mut _,
        offset,
        ndim: shape.len() as u32,
        dtype,
        tag: 0,
        reserved: 0,
        shape: [0; 5],
        strides: [0; 5],
    };
    t.shape[..shape.len()].copy_from_slice(shape);
    t.strides[..strides.len()].copy_from_slice(strides);
    t
}

/// Oracle: merged byte intervals (u128, to see overflow) the view touches, per the header's
/// definition. None: the view touches nothing. Err(()): too many elements to enumerate.
fn oracle(t: &Tensor) -> Result<Option<Vec<(u128, u128)>>, ()> {
    let es = dtype_size(t.dtype).unwrap() as u128;
    let nd = t.ndim as usize;
    let base = t.data as u64 as u128 + t.offset as u128;
    if t.shape[..nd].contains(&0) {
        return Ok(None);
    }
    if t.strides[..nd].iter().all(|&s| s == 0) {
        let n: u128 = t.shape[..nd]
            .iter()
            .fold(es, |a, &s| a.saturating_mul(s as u128));
        return Ok(Some(vec![(base, base.saturating_add(n))]));
    }
    let mut dims: Vec<(u128, u64)> = Vec::new();
    let mut total: u128 = 1;
    for k in 0..nd {
        if t.shape[k] > 1 && t.strides[k] != 0 {
            dims.push((t.strides[k] as u128 * es, t.shape[k]));
            total = total.saturating_mul(t.shape[k] as u128);
        }
    }
    if total > 20000 {
        return Err(());
    }
    let mut iv = Vec::with_capacity(total as usize);
    let mut idx = vec![0u64; dims.len()];
    loop {
        let a = base
            + dims
                .iter()
                .zip(&idx)
                .map(|(d, &i)| d.0 * i as u128)
                .sum::<u128>();
        iv.push((a, a + es));
        let mut k = 0;
        loop {
            if k == dims.len() {
                return Ok(Some(merge(iv)));
            }
            idx[k] += 1;
            if idx[k] < dims[k].1 {
                break;
            }
            idx[k] = 0;
            k += 1;
        }
    }
}

fn merge(mut iv: Vec<(u128, u128)>) -> Vec<(u128, u128)> {
    iv.sort_unstable();
    let mut out: Vec<(u128, u128)> = Vec::with_capacity(iv.len());
    for (a, b) in iv {
        if let Some(l) = out.last_mut() {
            if a <= l.1 {
                l.1 = l.1.max(b);
                continue;
            }
        }
        out.push((a, b));
    }
    out
}

fn meet(x: &[(u128, u128)], y: &[(u128, u128)]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < x.len() && j < y.len() {
        if x[i].0 < y[j].1 && y[j].0 < x[i].1 {
            return true;
        }
        if x[i].1 <= y[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    false
}

/// y subset of x (x merged).
fn subset(x: &[(u128, u128)], y: &[(u128, u128)]) -> bool {
    y.iter().all(|&(a, b)| {
        let k = x.partition_point(|iv| iv.1 <= a);
        k < x.len() && x[k].0 <= a && b <= x[k].1
    })
}

/// Effective byte strides of a view (count > 1, stride > 0), plus 1 and the element size.
fn eff_strides(t: &Tensor) -> Vec<u64> {
    let es = dtype_size(t.dtype).unwrap();
    let nd = t.ndim as usize;
    let mut v = vec![1, es];
    if !t.strides[..nd].iter().all(|&s| s == 0) {
        for k in 0..nd {
            if t.shape[k] > 1 && t.strides[k] != 0 {
                if let Some(b) = t.strides[k].checked_mul(es) {
                    v.push(b);
                }
            }
        }
    }
    v
}

/// Whether byte set `iv` is a box in the radix system `strides` (sorted, dividing) from
/// `origin`.
fn is_box(iv: &[(u128, u128)], strides: &[u64], origin: u128) -> bool {
    let n: u128 = iv.iter().map(|x| x.1 - x.0).sum();
    if n > 200_000 {
        return false;
    }
    let mut lo = vec![u128::MAX; strides.len()];
    let mut hi = vec![0u128; strides.len()];
    for &(a, b) in iv {
        for x in a..b {
            if x < origin {
                return false;
            }
            let x = x - origin;
            for k in 0..strides.len() {
                let s = strides[k] as u128;
                let d = if k + 1 < strides.len() {
                    (x / s) % (strides[k + 1] as u128 / s)
                } else {
                    x / s
                };
                lo[k] = lo[k].min(d);
                hi[k] = hi[k].max(d + 1);
            }
        }
    }
    let vol: u128 = lo.iter().zip(&hi).map(|(a, b)| b - a).product();
    vol == n
}

/// Both views are boxes of one dividing radix system (the class README says is exact).
fn claimed_exact(ta: &Tensor, ia: &[(u128, u128)], tb: &Tensor, ib: &[(u128, u128)]) -> bool {
    let mut st: Vec<u64> = eff_strides(ta);
    st.extend(eff_strides(tb));
    st.sort_unstable();
    st.dedup();
    if st.windows(2).any(|w| w[1] % w[0] != 0) {
        return false;
    }
    [ta.data as u64 as u128, tb.data as u64 as u128, 0]
        .iter()
        .any(|&o| is_box(ia, &st, o) && is_box(ib, &st, o))
}

const DTYPES: [u32; 13] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];

/// An adversarial view at `data`. `region` bytes is the scale of the shared region.
fn gen_view(r: &mut Rng, data: u64, region: u64) -> Tensor {
    let dtype = r.pick(&DTYPES);
    let es = dtype_size(dtype).unwrap();
    let elems = (region / es).max(1);
    let off = |r: &mut Rng| -> u64 {
        match r.below(4) {
            0 => 0,
            1 => r.below(elems) * es,
            2 => r.below(region), // byte-misaligned
            _ => r.below(64) * es,
        }
    };
    match r.below(12) {
        // dense 1-D
        0 => {
            let n = r.range(1, (elems / 2).max(1));
            tensor(data, off(r), dtype, &[n], &[r.pick(&[0, 0, 1])])
        }
        // tile of a column-major matrix
        1 | 2 => {
            let ld = r.pick(&[3, 4, 5, 7, 8, 12, 16, 24, 32, 33, 48, 64, 100, 128]);
            let extra = if r.chance(20) { 8 } else { 0 };
            let h = r.range(1, ld.min(40) + extra);
            let w = r.range(1, 12);
            let (r0, c0) = (r.below(ld), r.below(8));
            let o = (r0 + c0 * ld) * es + if r.chance(10) { r.below(es) } else { 0 };
            if r.chance(25) {
                // permuted (non-monotonic) strides
                tensor(data, o, dtype, &[w, h], &[ld, 1])
            } else {
                tensor(data, o, dtype, &[h, w], &[1, ld])
            }
        }
        // all-zero strides, multi-dim dense
        3 => {
            let nd = r.range(0, 4) as usize;
            let shape: Vec<u64> = (0..nd).map(|_| r.range(1, 6)).collect();
            tensor(data, off(r), dtype, &shape, &vec![0; nd])
        }
        // random small
        4 | 5 => {
            let nd = r.range(0, 5) as usize;
            let shape: Vec<u64> = (0..nd)
                .map(|_| if r.chance(5) { 0 } else { r.range(1, 5) })
                .collect();
            let strides: Vec<u64> = (0..nd)
                .map(|_| match r.below(6) {
                    0 => 0,
                    1 => 1,
                    2 => r.range(1, 8),
                    3 => r.range(1, 40),
                    4 => r.pick(&[2, 4, 8, 16, 32, 64, 128]),
                    _ => r.range(1, 200),
                })
                .collect();
            tensor(data, off(r), dtype, &shape, &strides)
        }
        // huge strides / negative-looking strides
        6 => {
            let nd = r.range(1, 3) as usize;
            let shape: Vec<u64> = (0..nd).map(|_| r.range(1, 3)).collect();
            let strides: Vec<u64> = (0..nd)
                .map(|_| match r.below(5) {
                    0 => u64::MAX - r.below(4),
                    1 => u64::MAX / es - r.below(4),
                    2 => (u64::MAX / es) / 2 - r.below(4),
                    3 => 1u64 << r.range(20, 62),
                    _ => r.range(1, 50),
                })
                .collect();
            tensor(data, off(r), dtype, &shape, &strides)
        }
        // rows of a row-major matrix / column with a stride
        7 => {
            let ld = r.range(2, 70);
            let n = r.range(2, 30);
            tensor(data, off(r), dtype, &[n], &[ld])
        }
        // non-dividing strides
        8 => {
            let a = r.range(2, 9);
            let b = r.range(a + 1, 3 * a + 5);
            let (na, nb) = (r.range(2, 6), r.range(2, 6));
            if r.chance(50) {
                tensor(data, off(r), dtype, &[na, nb], &[a, b])
            } else {
                tensor(data, off(r), dtype, &[nb, na], &[b, a])
            }
        }
        // 3-D: tile of a batch of matrices, or sub-element strides etc.
        9 => {
            let ld = r.range(2, 20);
            let h = r.range(1, ld);
            let w = r.range(1, 6);
            let pages = r.range(1, 4);
            let page = ld * r.range(w, w + 4);
            tensor(data, off(r), dtype, &[h, w, pages], &[1, ld, page])
        }
        // broadcast mixed, unit dims with junk strides
        10 => {
            let nd = r.range(1, 5) as usize;
            let shape: Vec<u64> = (0..nd).map(|_| r.pick(&[1, 1, 2, 3, 1000])).collect();
            let strides: Vec<u64> = (0..nd)
                .zip(&shape)
                .map(|(_, &s)| {
                    if s == 1 {
                        r.pick(&[0, 1, u64::MAX, 12345])
                    } else if s == 1000 {
                        0
                    } else {
                        r.range(0, 10)
                    }
                })
                .collect();
            tensor(data, off(r), dtype, &shape, &strides)
        }
        // a tile of rows whose w exceeds... overlapping dims (stride < reach)
        _ => {
            let a = r.range(1, 6);
            let na = r.range(2, 8);
            let b = r.range(1, a * na + 2);
            let nb = r.range(2, 6);
            tensor(data, off(r), dtype, &[na, nb], &[a, b])
        }
    }
}

fn data_ptr(r: &mut Rng) -> u64 {
    match r.below(7) {
        0 => 4096,
        1 => 1 + r.below(64),
        2 => (1 << 40) + r.below(1 << 20),
        3 => u64::MAX - r.below(1 << 16),
        4 => u64::MAX - (1 << 20) - r.below(4096),
        5 => (1u64 << 63) + r.below(4096),
        _ => (r.next() >> 1) & !0xfff,
    }
}

// ---------------------------------------------------------------- footprint fuzz
#[derive(Default)]
struct Stats {
    pairs: u64,
    true_overlaps: u64,
    fp_overlap: BTreeMap<String, u64>,
    cover_conservative: u64,
    true_covers: u64,
    missed_dense: u64,
    top_byte_refused: u64,
}

fn desc(t: &Tensor) -> String {
    let nd = t.ndim as usize;
    format!(
        "data {:#x} off {} dt {} shape {:?} strides {:?}",
        t.data as u64,
        t.offset,
        t.dtype,
        &t.shape[..nd],
        &t.strides[..nd]
    )
}

fn kind(f: &Footprint) -> &'static str {
    if f.dense {
        "dense"
    } else if f.rows().is_some() {
        "rows"
    } else {
        "other"
    }
}

fn check_single(t: &Tensor, st: &mut Stats) -> Option<(Footprint, Vec<(u128, u128)>)> {
    let o = match oracle(t) {
        Ok(o) => o,
        Err(()) => return None,
    };
    let f = Footprint::of(t);
    match (&o, f) {
        (None, None) => None,
        (None, Some(f)) => panic!("touches nothing but got a footprint {f:?}: {}", desc(t)),
        (Some(iv), f) => {
            let lo = iv[0].0;
            let hi = iv.last().unwrap().1;
            let fits = hi <= u64::MAX as u128;
            if hi == 1u128 << 64 {
                st.top_byte_refused += 1;
            }
            match f {
                None => {
                    assert!(
                        !fits,
                        "refused a view that fits: {} (lo {lo:#x} hi {hi:#x})",
                        desc(t)
                    );
                    None
                }
                Some(f) => {
                    assert!(fits, "accepted a view past the top: {}", desc(t));
                    assert_eq!((f.lo as u128, f.hi as u128), (lo, hi), "bounds {}", desc(t));
                    if f.dense {
                        assert_eq!(iv.len(), 1, "claimed dense, is not: {}", desc(t));
                    } else if iv.len() == 1 {
                        st.missed_dense += 1;
                    }
                    if let Some(r) = f.rows() {
                        let rows: Vec<(u128, u128)> = (0..r.count)
                            .map(|i| {
                                let a = f.lo as u128 + i as u128 * r.stride as u128;
                                (a, a + r.w as u128)
                            })
                            .collect();
                        assert_eq!(merge(rows), *iv, "rows() wrong: {r:?} {}", desc(t));
                    }
                    Some((f, iv.clone()))
                }
            }
        }
    }
}

fn check_pair(
    (ta, fa, ia): (&Tensor, &Footprint, &[(u128, u128)]),
    (tb, fb, ib): (&Tensor, &Footprint, &[(u128, u128)]),
    st: &mut Stats,
) {
    st.pairs += 1;
    let truth = meet(ia, ib);
    let (ab, ba) = (fa.overlaps(fb), fb.overlaps(fa));
    if truth {
        st.true_overlaps += 1;
        assert!(
            ab && ba,
            "MISSED OVERLAP ab={ab} ba={ba}\n  a: {}\n  b: {}",
            desc(ta),
            desc(tb)
        );
    } else if ab || ba {
        let ce = if claimed_exact(ta, ia, tb, ib) {
            "EXACT-CLASS "
        } else {
            ""
        };
        let k = format!("{ce}{}/{}", kind(fa), kind(fb));
        *st.fp_overlap.entry(k).or_default() += 1;
    }
    for (tn, fnw, inw, to, fo, io) in [(ta, fa, ia, tb, fb, ib), (tb, fb, ib, ta, fa, ia)] {
        let c = fnw.covers(fo);
        let truth = subset(inw, io);
        if c {
            assert!(
                truth,
                "FALSE COVER\n  new: {}\n  old: {}",
                desc(tn),
                desc(to)
            );
        }
        if truth {
            st.true_covers += 1;
            if !c {
                st.cover_conservative += 1;
            }
        }
    }
}

#[test]
fn footprint_fuzz() {
    let iters = env("AV_ITERS", 200_000);
    let mut r = Rng(env("AV_SEED", 0x5eed));
    let mut st = Stats::default();
    let mut fpx: BTreeMap<String, (String, String)> = BTreeMap::new();
    for _ in 0..iters {
        let d1 = data_ptr(&mut r);
        let region = r.pick(&[64, 512, 4096, 1 << 14]);
        let d2 = match r.below(4) {
            0 => d1.wrapping_add(r.below(region)),
            1 => d1.wrapping_add(r.below(region) & !7),
            _ => d1,
        };
        let ta = gen_view(&mut r, d1, region);
        let tb = gen_view(&mut r, d2, region);
        let a = check_single(&ta, &mut st);
        let b = check_single(&tb, &mut st);
        if let (Some((fa, ia)), Some((fb, ib))) = (a, b) {
            let before: u64 = st.fp_overlap.values().sum();
            check_pair((&ta, &fa, &ia), (&tb, &fb, &ib), &mut st);
            if st.fp_overlap.values().sum::<u64>() > before {
                let ce = if claimed_exact(&ta, &ia, &tb, &ib) {
                    "EXACT-CLASS "
                } else {
                    ""
                };
                let k = format!("{ce}{}/{}", kind(&fa), kind(&fb));
                fpx.entry(k).or_insert((desc(&ta), desc(&tb)));
            }
        }
    }
    eprintln!(
        "footprint fuzz: {} pairs, {} truly overlapping, false-positive overlaps {:?}, \
         covers true {} (conservatively denied {}), missed dense {}, views refused for \
         touching the last byte {}",
        st.pairs,
        st.true_overlaps,
        st.fp_overlap,
        st.true_covers,
        st.cover_conservative,
        st.missed_dense,
        st.top_byte_refused
    );
    for (k, (a, b)) in &fpx {
        eprintln!("  example false-positive {k}:\n    {a}\n    {b}");
    }
}

// ---------------------------------------------------------------- map fuzz

/// Latest-writer painting of bytes: start -> (end, write index).
#[derive(Default)]
struct Painter(BTreeMap<u64, (u64, Option<usize>)>);

impl Painter {
    fn cut(&mut self, a: u64, b: u64) {
        // split segments at a and b, then remove everything in [a, b)
        let mut to_add = Vec::new();
        let keys: Vec<u64> = self
            .0
            .range(..b)
            .rev()
            .take_while(|(_, &(e, _))| e > a)
            .map(|(&s, _)| s)
            .collect();
        for s in keys {
            let (e, w) = self.0.remove(&s).unwrap();
            if s < a {
                to_add.push((s, a, w));
            }
            if e > b {
                to_add.push((b, e, w));
            }
        }
        // also segments that start before a and end after a but were not caught (covered above)
        for (s, e, w) in to_add {
            self.0.insert(s, (e, w));
        }
    }
    fn paint(&mut self, a: u64, b: u64, w: Option<usize>) {
        self.cut(a, b);
        self.0.insert(a, (b, w));
    }
    fn query(&self, a: u64, b: u64, out: &mut BTreeSet<usize>) {
        for (_, &(e, w)) in self.0.range(..b).rev() {
            if e <= a {
                // segments are disjoint and sorted; an earlier one may still reach? no:
                // starts < this start, ends <= this start <= ... continue scanning is cheap
                break;
            }
            if let Some(w) = w {
                out.insert(w);
            }
        }
    }
}

struct Write {
    owner: u64,
    iv: Vec<(u64, u64)>,
}

struct Model {
    writes: Vec<Write>,
    paint: Painter,
    erased: BTreeSet<u64>,
    keys: HashMap<u64, Vec<dagrt::tensormap::MapKey>>,
}

fn ivs64(iv: &[(u128, u128)]) -> Vec<(u64, u64)> {
    iv.iter().map(|&(a, b)| (a as u64, b as u64)).collect()
}

fn meet64(x: &[(u64, u64)], y: &[(u64, u64)]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < x.len() && j < y.len() {
        if x[i].0 < y[j].1 && y[j].0 < x[i].1 {
            return true;
        }
        if x[i].1 <= y[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    false
}

#[derive(Default)]
struct MapStats {
    lookups: u64,
    reported: u64,
    disjoint_reports: u64,
    shadowed_reports: u64,
    cat: BTreeMap<&'static str, u64>,
}

fn category(fp: &Footprint) -> &'static str {
    let small = (fp.hi - 1) / 256 - fp.lo / 256 < 8;
    match (small, fp.dense, fp.rows().is_some()) {
        (true, true, _) => "small-dense",
        (true, false, _) => "small-strided",
        (false, true, _) => "big-dense",
        (false, false, true) => "big-rows",
        (false, false, false) => "big-other",
    }
}

/// A view for the map fuzz: tiles of one or two matrices (two origins over the same bytes),
/// dense ranges big and small, strided views, at a base that may be near the top.
fn gen_map_view(r: &mut Rng, m: &MapCtx) -> Tensor {
    let es_dt = |r: &mut Rng| -> (u32, u64) {
        let d = r.pick(&[11, 11, 11, 10, 2, 0, 6]);
        (d, dtype_size(d).unwrap())
    };
    match r.below(10) {
        0..=3 => {
            // tile of matrix k; ld in elements of f64 (or the same bytes as other dtypes)
            let k = r.below(m.mats.len() as u64) as usize;
            let (mbase, ldb) = m.mats[k];
            let (dt, es) = if r.chance(80) { (11, 8) } else { es_dt(r) };
            let ld = ldb / es;
            let b = r.pick(&m.tiles) * 8 / es;
            let bb = b.max(1);
            let (i, j) = (r.below(m.ntiles), r.below(m.ntiles));
            let (mut h, mut w) = (bb, bb);
            let (mut r0, mut c0) = (i * bb, j * bb);
            if r.chance(30) {
                // unaligned sub-tile, possibly wrapping past the column end
                r0 = r.below(ld);
                c0 = r.below(m.ntiles * bb);
                h = r.range(1, bb * 2);
                w = r.range(1, bb * 2);
            }
            let data = if r.chance(70) { mbase } else { m.base };
            let off = mbase - data + (r0 + c0 * ld) * es;
            if r.chance(10) {
                tensor(data, off, dt, &[w, h], &[ld, 1])
            } else {
                tensor(data, off, dt, &[h, w], &[1, ld])
            }
        }
        4 | 5 => {
            // dense range, small or big
            let len = if r.chance(50) {
                r.range(1, 600)
            } else {
                r.range(600, m.span)
            };
            let lo = r.below(m.span);
            let (dt, es) = es_dt(r);
            let n = (len / es).max(1);
            tensor(
                m.base,
                lo / es * es + if r.chance(10) { r.below(es) } else { 0 },
                dt,
                &[n],
                &[0],
            )
        }
        6 => {
            // column block of a matrix (full height): dense
            let (mbase, ldb) = m.mats[0];
            let c0 = r.below(m.ntiles * 4);
            let w = r.range(1, 6);
            tensor(mbase, c0 * ldb, 11, &[ldb / 8, w], &[1, ldb / 8])
        }
        7 => {
            // strided row / random small strided
            let (dt, es) = es_dt(r);
            let n = r.range(2, 40);
            let s = r.range(2, 3000 / es.max(1));
            tensor(m.base, r.below(m.span) / es * es, dt, &[n], &[s])
        }
        8 => {
            let v = gen_view(r, m.base, m.span.min(1 << 14));
            v
        }
        _ => {
            // 3-D batch-like or non-dividing
            let (dt, es) = es_dt(r);
            let a = r.range(2, 9);
            let b = r.range(a + 1, 300);
            let c = r.range(b + 1, 3000);
            tensor(
                m.base,
                r.below(m.span) / es * es,
                dt,
                &[r.range(1, 6), r.range(1, 6), r.range(1, 4)],
                &[a, b, c],
            )
        }
    }
}

struct MapCtx {
    base: u64,
    span: u64,
    /// (base, leading dimension in bytes)
    mats: Vec<(u64, u64)>,
    tiles: Vec<u64>,
    ntiles: u64,
}

fn map_ctx(r: &mut Rng) -> MapCtx {
    let span = r.pick(&[1u64 << 14, 1 << 16, 1 << 18]);
    let base = match r.below(4) {
        0 => 1 << 20,
        1 => (1 << 40) + r.below(4096),
        2 => u64::MAX - span - r.below(4096) - (1 << 12),
        _ => ((r.next() >> 2) & !0xff) + r.below(256),
    };
    let ld_elems = r.pick(&[16u64, 24, 32, 48, 64, 100, 128]);
    let ldb = ld_elems * 8;
    let mut mats = vec![(base, ldb)];
    // a second view of the same bytes with another origin
    let delta = r.pick(&[8u64, 24, 256, ldb / 2, ldb * 3 + 8]);
    mats.push((base + delta, ldb));
    if r.chance(50) {
        // another stride over the same bytes
        mats.push((base, r.pick(&[40u64, 56, 72, 96, 128, 256]) * 8));
    }
    let tiles = vec![r.pick(&[2u64, 4, 8]), r.pick(&[4u64, 8, 16])];
    let ntiles = ld_elems / tiles[1].max(1);
    MapCtx {
        base,
        span,
        mats,
        tiles,
        ntiles: ntiles.max(1),
    }
}

#[test]
fn tensormap_fuzz() {
    let seqs = env("AV_SEQS", 1500);
    let ops = env("AV_OPS", 80);
    let seed = env("AV_SEED", 0x5eed);
    let mut st = MapStats::default();
    for s in 0..seqs {
        let mut r = Rng(seed ^ (s.wrapping_mul(0x1234_5678_9abc_def1)));
        let ctx = map_ctx(&mut r);
        let mut inner = Inner::default();
        let mut run = 1u64;
        let mut model = Model {
            writes: vec![],
            paint: Painter::default(),
            erased: BTreeSet::new(),
            keys: HashMap::new(),
        };
        let mut next_owner = 100u64;
        let mut log: Vec<String> = Vec::new();
        for _op in 0..ops {
            let choice = r.below(100);
            if choice < 3 {
                inner.drop_run(run);
                run += 1;
                model = Model {
                    writes: vec![],
                    paint: Painter::default(),
                    erased: BTreeSet::new(),
                    keys: HashMap::new(),
                };
                log.push(format!("drop_run -> run {run}"));
                continue;
            }
            if choice < 20 {
                // erase an owner
                let live: Vec<u64> = model
                    .keys
                    .keys()
                    .copied()
                    .filter(|o| !model.erased.contains(o))
                    .collect();
                if live.is_empty() {
                    continue;
                }
                let mut live = live;
                live.sort_unstable();
                let o = r.pick(&live);
                let keys = model.keys[&o].clone();
                inner.erase(run, o, &keys);
                model.erased.insert(o);
                log.push(format!("erase {o}"));
                continue;
            }
            if choice < 23 {
                let lo = ctx.base + r.below(ctx.span);
                let hi = lo
                    .saturating_add(r.range(1, ctx.span / 4))
                    .min(ctx.base.saturating_add(ctx.span + 4096));
                inner.erase_range(run, lo, hi);
                model.paint.paint(lo, hi, None);
                log.push(format!("erase_range [{lo:#x},{hi:#x})"));
                continue;
            }
            // a task: 1-3 tensors, each INPUT / OUTPUT / INOUT; reads first as the
            // orchestrator does when a write is listed before a read.
            let owner = next_owner;
            next_owner += 1;
            let nt = r.range(1, 3);
            let mut ts = Vec::new();
            for _ in 0..nt {
                let t = gen_map_view(&mut r, &ctx);
                let Ok(Some(iv)) = oracle(&t) else { continue };
                let Some(fp) = Footprint::of(&t) else {
                    continue;
                };
                let tag = r.pick(&[0u32, 1, 2, 2, 3]);
                *st.cat.entry(category(&fp)).or_default() += 1;
                ts.push((t, fp, ivs64(&iv), tag));
            }
            if ts.is_empty() {
                continue;
            }
            let mut found: BTreeSet<u64> = BTreeSet::new();
            let mut required: BTreeSet<u64> = BTreeSet::new();
            let mut allowed_overlap: BTreeSet<u64> = BTreeSet::new();
            let read_after_write = ts.iter().enumerate().any(|(i, t)| {
                (t.3 == 1 || t.3 == 3) && ts[i + 1..].iter().any(|u| u.3 == 0 || u.3 == 2)
            });
            let mut my_keys = Vec::new();
            let mut ops_desc = Vec::new();
            // Model requirements, computed against the state before this task's inserts,
            // for reads; per the orchestrator, reads see writers before the task.
            let expect_for = |model: &Model,
                              iv: &[(u64, u64)],
                              req: &mut BTreeSet<u64>,
                              ok: &mut BTreeSet<u64>| {
                let mut ws = BTreeSet::new();
                for &(a, b) in iv {
                    model.paint.query(a, b, &mut ws);
                }
                for w in ws {
                    let o = model.writes[w].owner;
                    if !model.erased.contains(&o) && o != owner {
                        req.insert(o);
                    }
                }
                for w in &model.writes {
                    if !model.erased.contains(&w.owner) && meet64(&w.iv, iv) {
                        ok.insert(w.owner);
                    }
                }
            };
            let mut cb = |p: u64| {
                if p != owner {
                    found.insert(p);
                }
            };
            let do_write = |model: &mut Model, iv: &[(u64, u64)]| {
                let w = model.writes.len();
                model.writes.push(Write {
                    owner,
                    iv: iv.to_vec(),
                });
                for &(a, b) in iv {
                    model.paint.paint(a, b, Some(w));
                }
            };
            if read_after_write {
                for (t, fp, iv, tag) in &ts {
                    if *tag == 0 || *tag == 2 {
                        expect_for(&model, iv, &mut required, &mut allowed_overlap);
                        inner.lookup(run, fp, &mut cb);
                        ops_desc.push(format!("lookup {}", desc(t)));
                    }
                }
                for (t, fp, iv, tag) in &ts {
                    if *tag != 0 {
                        my_keys.push(inner.insert(run, fp, owner));
                        do_write(&mut model, iv);
                        ops_desc.push(format!("insert {}", desc(t)));
                    }
                }
            } else {
                for (t, fp, iv, tag) in &ts {
                    match tag {
                        0 => {
                            expect_for(&model, iv, &mut required, &mut allowed_overlap);
                            inner.lookup(run, fp, &mut cb);
                            ops_desc.push(format!("lookup {}", desc(t)));
                        }
                        2 => {
                            expect_for(&model, iv, &mut required, &mut allowed_overlap);
                            my_keys.push(inner.lookup_insert(run, fp, owner, &mut cb));
                            do_write(&mut model, iv);
                            ops_desc.push(format!("lookup_insert {}", desc(t)));
                        }
                        _ => {
                            my_keys.push(inner.insert(run, fp, owner));
                            do_write(&mut model, iv);
                            ops_desc.push(format!("insert {}", desc(t)));
                        }
                    }
                }
            }
            let live_all: BTreeSet<u64> = model
                .keys
                .keys()
                .copied()
                .filter(|o| !model.erased.contains(o))
                .collect();
            log.push(format!("task {owner}: {}", ops_desc.join(" ; ")));
            st.lookups += 1;
            st.reported += found.len() as u64;
            for p in &found {
                if !live_all.contains(p) {
                    panic!(
                        "seq {s}: STALE report of {p} (erased or unknown)\nlog:\n{}",
                        log.join("\n")
                    );
                }
                if !allowed_overlap.contains(p) {
                    st.disjoint_reports += 1;
                } else if !required.contains(p) {
                    st.shadowed_reports += 1;
                }
            }
            let missing: Vec<u64> = required.difference(&found).copied().collect();
            if !missing.is_empty() {
                panic!(
                    "seq {s}: MISSED dependency on {missing:?} (found {found:?})\nlog:\n{}",
                    log.join("\n")
                );
            }
            if !my_keys.is_empty() {
                model.keys.insert(owner, my_keys);
            }
        }
    }
    eprintln!(
        "tensormap fuzz: {} tasks, {} reports, {} byte-disjoint (conservative) reports, {} \
         overlapping-but-shadowed reports; views {:?}",
        st.lookups, st.reported, st.disjoint_reports, st.shadowed_reports, st.cat
    );
}
