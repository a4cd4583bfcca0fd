//! Footprints: the bytes a tensor view really touches, and the two questions the TensorMap
//! asks of them: do two views overlap, and does a new write fully cover an old one.
//!
//! A footprint is a set of (byte stride, count) dimensions starting at an absolute address,
//! always including the element itself as a (1, elem_size) dimension. Two footprints are
//! compared exactly when both are boxes in one mixed-radix number system built from the union
//! of their strides (each stride divides the next, and neither view carries across a digit):
//! tiles of a column-major matrix, rows, columns and whole buffers all fall in that class.
//! Anything else is answered conservatively: "overlaps" and "does not cover", which can only
//! add an edge or keep an older writer alive, never lose a dependency.

use crate::task::{dtype_size, Tensor, MAX_TENSOR_DIMS};

const MAX_DIMS: usize = MAX_TENSOR_DIMS + 1;

#[derive(Clone, Copy, Debug, Eq)]
pub struct Footprint {
    /// First byte touched.
    pub lo: u64,
    /// One past the last byte touched.
    pub hi: u64,
    /// Every byte in `[lo, hi)` is touched.
    pub dense: bool,
    /// The view's base pointer (its `data`): the natural origin of the number system two
    /// views of one buffer are compared in.
    origin: u64,
    ndims: u8,
    /// (stride in bytes, count), sorted by stride, counts > 1 except the element dimension.
    dims: [(u64, u64); MAX_DIMS],
    /// The view as rows of one stride, when it is that (`find_rows`): computed once, since a
    /// TensorMap search compares one footprint with many (a tile with every tile of its
    /// column band).
    rows: Option<Rows>,
}

/// The same view: the dimensions in use only (the derived comparison of the whole array
/// took about 70 instructions, paid by every tile a tiled code reads or rewrites).
impl PartialEq for Footprint {
    #[inline]
    fn eq(&self, o: &Footprint) -> bool {
        (self.lo, self.hi, self.origin, self.ndims, self.dense)
            == (o.lo, o.hi, o.origin, o.ndims, o.dense)
            && self.rows == o.rows
            && self.dims[..self.ndims as usize] == o.dims[..self.ndims as usize]
    }
}

impl Footprint {
    /// A dense byte range, as `dagrt_alloc` slabs and whole buffers are.
    #[inline]
    pub fn dense(lo: u64, len: u64) -> Footprint {
        Footprint::dense_from(lo, len, lo)
    }

    /// A dense byte range of a view whose base pointer is `origin`.
    #[inline]
    fn dense_from(lo: u64, len: u64, origin: u64) -> Footprint {
        let mut dims = [(0, 0); MAX_DIMS];
        dims[0] = (1, len);
        Footprint {
            lo,
            hi: lo + len,
            dense: true,
            origin,
            ndims: 1,
            dims,
            rows: None,
        }
    }

    /// The footprint of a validated tensor view, or `None` when the view touches nothing
    /// (a zero extent) or its extent overflows the address space.
    #[inline]
    pub fn of(t: &Tensor) -> Option<Footprint> {
        // The common view, a whole one-dimensional buffer, without a call.
        if t.ndim == 1 && t.strides[0] == 0 && t.shape[0] > 0 {
            let len = dtype_size(t.dtype)?.checked_mul(t.shape[0])?;
            let base = (t.data as u64).checked_add(t.offset)?;
            base.checked_add(len)?;
            return Some(Footprint::dense_from(base, len, t.data as u64));
        }
        Footprint::of_view(t)
    }

    fn of_view(t: &Tensor) -> Option<Footprint> {
        let esize = dtype_size(t.dtype)?;
        let base = (t.data as u64).checked_add(t.offset)?;
        let nd = t.ndim as usize;
        let shape = &t.shape[..nd];
        if shape.contains(&0) {
            return None;
        }
        if t.strides[..nd].iter().all(|&s| s == 0) {
            let mut len = esize;
            for &s in shape {
                len = len.checked_mul(s)?;
            }
            base.checked_add(len)?;
            return Some(Footprint::dense_from(base, len, t.data as u64));
        }
        let tile = nd == 2 && esize > 1 && t.strides[0] == 1 && shape[0] > 1 && shape[1] > 1;
        if tile && t.strides[1] > shape[0] {
            return Footprint::of_tile(t, esize, base);
        }
        Footprint::of_strided(t, esize, base)
    }

    /// A tile of a column-major matrix (unit stride down a column, a leading dimension
    /// longer than the column), as `of_strided` would make it: the element, `shape[0]`
    /// elements, `shape[1]` columns, which are rows of `w` bytes `stride` apart.
    fn of_tile(t: &Tensor, esize: u64, base: u64) -> Option<Footprint> {
        let w = esize.checked_mul(t.shape[0])?;
        let stride = t.strides[1].checked_mul(esize)?;
        let hi = base.checked_add(stride.checked_mul(t.shape[1] - 1)?.checked_add(w)?)?;
        let mut dims = [(0u64, 0u64); MAX_DIMS];
        dims[0] = (1, esize);
        dims[1] = (esize, t.shape[0]);
        dims[2] = (stride, t.shape[1]);
        Some(Footprint {
            origin: t.data as u64,
            lo: base,
            hi,
            dense: false,
            ndims: 3,
            dims,
            rows: Some(Rows {
                w,
                stride,
                count: t.shape[1],
            }),
        })
    }

    /// Any other strided view.
    fn of_strided(t: &Tensor, esize: u64, base: u64) -> Option<Footprint> {
        let nd = t.ndim as usize;
        let shape = &t.shape[..nd];
        let mut dims = [(0u64, 0u64); MAX_DIMS];
        dims[0] = (1, esize);
        let mut n = 1;
        let mut extent = esize;
        for (&count, &elems) in shape.iter().zip(&t.strides[..nd]) {
            // A broadcast (stride 0) or unit dimension adds no bytes.
            if count == 1 || elems == 0 {
                continue;
            }
            let stride = elems.checked_mul(esize)?;
            extent = extent.checked_add(stride.checked_mul(count - 1)?)?;
            dims[n] = (stride, count);
            n += 1;
        }
        dims[..n].sort_unstable();
        // Dimensions with equal strides are one dimension: {i*s : i < a} + {j*s : j < b} is
        // exactly {k*s : k < a+b-1}. (The element itself is the stride-1 dimension, so a
        // unit-stride byte view merges with it.) So are overlapping ones, whose stride is r
        // times the one below with r < its count a: {i*s : i < a} + {j*r*s : j < b} is
        // exactly {k*s : k < a+(b-1)*r} (rows of a view that overlap one another). Abutting
        // ones (r == a) stay apart: the rows a footprint is searched by keep their shape.
        let mut m = 0;
        for k in 0..n {
            let (s, a) = if m > 0 { dims[m - 1] } else { (0, 0) };
            let r = if s > 0 && dims[k].0 % s == 0 {
                dims[k].0 / s
            } else {
                0
            };
            if m > 0 && (r == 1 || (r > 1 && r < a)) {
                let more = (dims[k].1 - 1).checked_mul(r)?;
                dims[m - 1].1 = a.checked_add(more)?;
            } else {
                dims[m] = dims[k];
                m += 1;
            }
        }
        n = m;
        let hi = base.checked_add(extent)?;
        let mut f = Footprint {
            origin: t.data as u64,
            lo: base,
            hi,
            dense: false,
            ndims: n as u8,
            dims,
            rows: None,
        };
        f.dense = f.is_dense();
        if f.dense {
            return Some(Footprint::dense_from(base, extent, t.data as u64));
        }
        f.rows = f.find_rows();
        Some(f)
    }

    fn dims(&self) -> &[(u64, u64)] {
        &self.dims[..self.ndims as usize]
    }

    /// Dense when each dimension starts exactly where the previous one ends.
    fn is_dense(&self) -> bool {
        let mut reach = 1u64;
        for &(stride, count) in self.dims() {
            if stride != reach {
                return false;
            }
            reach = match stride.checked_mul(count) {
                Some(r) => r,
                None => return false,
            };
        }
        true
    }

    fn intervals_meet(&self, o: &Footprint) -> bool {
        self.lo < o.hi && o.lo < self.hi
    }

    /// The view as rows (`find_rows`), as computed when it was made.
    #[inline]
    pub fn rows(&self) -> Option<Rows> {
        self.rows
    }

    /// As `rows` of `w` contiguous bytes every `stride` bytes (`count` of them), when the view
    /// is exactly that with `w <= stride` and at least two rows: a tile of a column-major
    /// matrix, a column block, a strided row.
    fn find_rows(&self) -> Option<Rows> {
        if self.dense {
            return None;
        }
        let (reach, k) = self.contiguous_run()?;
        match self.dims()[k..] {
            [(stride, count)] if reach <= stride && count >= 2 => Some(Rows {
                w: reach,
                stride,
                count,
            }),
            _ => None,
        }
    }

    /// The bytes of the contiguous run the innermost dimensions make, and how many
    /// dimensions make it (None if its length overflows).
    fn contiguous_run(&self) -> Option<(u64, usize)> {
        let dims = self.dims();
        let (mut reach, mut k) = (1u64, 0);
        while k < dims.len() && dims[k].0 == reach {
            reach = reach.checked_mul(dims[k].1)?;
            k += 1;
        }
        Some((reach, k))
    }

    /// The byte runs `[a, b)` of this footprint within `[lo, hi)`, sorted and merged, into
    /// `out` (cleared first). False, with `out` unusable, when the footprint has more than
    /// `budget` runs: the caller then answers conservatively.
    pub fn runs_within(&self, lo: u64, hi: u64, budget: u64, out: &mut Vec<(u64, u64)>) -> bool {
        out.clear();
        let clip = |a: u64, b: u64| (a.max(lo), b.min(hi));
        if self.dense {
            let (a, b) = clip(self.lo, self.hi);
            if a < b {
                out.push((a, b));
            }
            return true;
        }
        // The contiguous run the innermost dimensions make, then an odometer over the rest.
        let Some((w, k)) = self.contiguous_run() else {
            return false;
        };
        let outer = &self.dims()[k..];
        let n = outer.len();
        // Of the outermost dimension, only the indices whose runs can meet the window: a
        // view of many rows read a few rows at a time lists only those.
        let mut counts = [0u64; MAX_DIMS];
        for (c, d) in counts.iter_mut().zip(outer) {
            *c = d.1;
        }
        let mut first = 0;
        if let Some(&(s, c)) = outer.last() {
            let inner: u64 = w + outer[..n - 1].iter().map(|d| d.0 * (d.1 - 1)).sum::<u64>();
            first = (lo.saturating_sub(self.lo).saturating_sub(inner) / s).min(c);
            let last = (hi.saturating_sub(self.lo) / s).min(c - 1);
            counts[n - 1] = (last + 1).saturating_sub(first);
        }
        let total = counts[..n].iter().try_fold(1u64, |p, &c| p.checked_mul(c));
        if total.is_none_or(|p| p > budget) {
            return false;
        }
        if total == Some(0) {
            return true;
        }
        let mut at = [0u64; MAX_DIMS];
        if n > 0 {
            at[n - 1] = first;
        }
        loop {
            let off: u64 = outer.iter().zip(&at).map(|(d, &i)| d.0 * i).sum();
            let (a, b) = clip(self.lo + off, self.lo + off + w);
            if a < b {
                out.push((a, b));
            }
            // The next index, innermost outer dimension first.
            let mut j = 0;
            while j < n {
                let start = if j == n - 1 { first } else { 0 };
                at[j] += 1;
                if at[j] < start + counts[j] {
                    break;
                }
                at[j] = start;
                j += 1;
            }
            if j == n {
                break;
            }
        }
        out.sort_unstable();
        let mut m = 0;
        for i in 0..out.len() {
            if m > 0 && out[i].0 <= out[m - 1].1 {
                out[m - 1].1 = out[m - 1].1.max(out[i].1);
            } else {
                out[m] = out[i];
                m += 1;
            }
        }
        out.truncate(m);
        true
    }

    /// Exact overlap of two row sets with the same stride, in O(1) (the case that dominates
    /// tiled algorithms, where the generic comparison below costs a thousand instructions).
    fn rows_overlap(&self, o: &Footprint) -> Option<bool> {
        let (x, y) = if self.lo <= o.lo {
            (self, o)
        } else {
            (o, self)
        };
        let (a, b) = (x.rows()?, y.rows()?);
        if a.stride != b.stride {
            return None;
        }
        // y's row i starts at x's row q + i, column r; it may run on into the next row.
        let d = y.lo - x.lo;
        let (q, r) = (d / a.stride, d % a.stride);
        let same_row = q < a.count && r < a.w;
        let next_row = r + b.w > a.stride && q + 1 < a.count;
        Some(same_row || next_row)
    }

    /// Exact overlap of a dense range and a row set, in O(1): the first row that ends past
    /// the range's start must begin before its end (a piece of a column against a tile).
    fn dense_rows_overlap(&self, o: &Footprint) -> Option<bool> {
        let (d, x) = match (self.dense, o.dense) {
            (true, false) => (self, o),
            (false, true) => (o, self),
            _ => return None,
        };
        let r = x.rows()?;
        let i = if d.lo < x.lo + r.w {
            0
        } else {
            (d.lo - x.lo - r.w) / r.stride + 1
        };
        // Row i < count starts at most at x.hi - w: no overflow.
        Some(i < r.count && x.lo + i * r.stride < d.hi)
    }

    /// Does this view touch any byte that `o` touches? Conservative when undecidable.
    pub fn overlaps(&self, o: &Footprint) -> bool {
        if !self.intervals_meet(o) {
            return false;
        }
        // Two dense views (whole buffers: the common case) meet where their intervals do.
        if self.dense && o.dense {
            return true;
        }
        self.overlaps_shaped(o)
    }

    /// `overlaps` for meeting intervals, one of them not dense. Kept out of line: the dense
    /// case above is inlined into the TensorMap's walks.
    #[inline(never)]
    fn overlaps_shaped(&self, o: &Footprint) -> bool {
        if let Some(v) = self.rows_overlap(o) {
            return v;
        }
        if let Some(v) = self.dense_rows_overlap(o) {
            return v;
        }
        // Otherwise exact when both are boxes of one mixed-radix system.
        match Boxes::of(self, o) {
            Some(b) => {
                b.a.iter()
                    .zip(b.b.iter())
                    .take(b.n)
                    .all(|(x, y)| x.0 < y.1 && y.0 < x.1)
            }
            None => true,
        }
    }

    /// Does this (new) write touch every byte `old` touches? Conservative (false) when
    /// undecidable.
    pub fn covers(&self, old: &Footprint) -> bool {
        if old.lo < self.lo || old.hi > self.hi {
            return false;
        }
        if self.dense {
            return true;
        }
        if let (Some(a), true) = (self.rows(), old.dense) {
            // A dense range is covered when it lies within one row.
            let d = old.lo - self.lo;
            let (q, r) = (d / a.stride, d % a.stride);
            return q < a.count && r + (old.hi - old.lo) <= a.w;
        }
        if let (Some(a), Some(b)) = (self.rows(), old.rows()) {
            if a.stride == b.stride {
                // `old` lies in rows q.. at column r; it must not wrap and must fit.
                let d = old.lo - self.lo;
                let (q, r) = (d / a.stride, d % a.stride);
                return q + b.count <= a.count && r + b.w <= a.w;
            }
        }
        match Boxes::of(self, old) {
            Some(b) => {
                b.a.iter()
                    .zip(b.b.iter())
                    .take(b.n)
                    .all(|(n, o)| n.0 <= o.0 && o.1 <= n.1)
            }
            None => false,
        }
    }
}

/// The footprint of the view of `shape` and element `strides` at `base + offset` (tests).
#[cfg(test)]
pub(crate) fn test_footprint(
    base: u64,
    offset: u64,
    dtype: crate::task::DataType,
    shape: &[u64],
    strides: &[u64],
) -> Option<Footprint> {
    Footprint::of(&Tensor::strided(
        base as *mut _,
        offset,
        dtype,
        shape,
        strides,
        0,
    ))
}

/// `count` runs of `w` contiguous bytes, `stride` bytes apart (`w <= stride`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rows {
    pub w: u64,
    pub stride: u64,
    pub count: u64,
}

/// Two footprints as digit-interval boxes `[start, end)` in one mixed-radix system.
struct Boxes {
    n: usize,
    a: [(u64, u64); 2 * MAX_DIMS],
    b: [(u64, u64); 2 * MAX_DIMS],
}

impl Boxes {
    fn of(x: &Footprint, y: &Footprint) -> Option<Boxes> {
        let mut strides = [0u64; 2 * MAX_DIMS];
        let mut n = 0;
        for &(s, _) in x.dims().iter().chain(y.dims()) {
            if !strides[..n].contains(&s) {
                strides[n] = s;
                n += 1;
            }
        }
        strides[..n].sort_unstable();
        if strides[0] != 1 {
            return None;
        }
        for k in 1..n {
            if strides[k] % strides[k - 1] != 0 {
                return None;
            }
        }
        // Offsets are measured from a common origin; the views' own base pointers are the
        // natural ones (tiles of one matrix share it, and from there no tile carries).
        let origins = [x.origin, y.origin, 0];
        for (i, &o) in origins.iter().enumerate() {
            if origins[..i].contains(&o) || x.lo < o || y.lo < o {
                continue;
            }
            if let (Some(a), Some(b)) = (
                Self::digits(x, &strides[..n], o),
                Self::digits(y, &strides[..n], o),
            ) {
                return Some(Boxes { n, a, b });
            }
        }
        None
    }

    /// Digit intervals of `f` in the radix system `strides`, or `None` if a dimension of `f`
    /// would carry into the next digit (then `f` is not a box in this system).
    fn digits(f: &Footprint, strides: &[u64], origin: u64) -> Option<[(u64, u64); 2 * MAX_DIMS]> {
        let mut out = [(0u64, 0u64); 2 * MAX_DIMS];
        let last = strides.len() - 1;
        let lo = f.lo - origin;
        for (k, &s) in strides.iter().enumerate() {
            let count = f.dims().iter().find(|d| d.0 == s).map_or(1, |d| d.1);
            let start = if k == last {
                lo / s
            } else {
                let radix = strides[k + 1] / s;
                let d = (lo / s) % radix;
                if d + count > radix {
                    return None;
                }
                d
            };
            out[k] = (start, start + count);
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::DataType;

    fn tile(base: u64, ld: u64, r0: u64, c0: u64, rows: u64, cols: u64) -> Footprint {
        view(
            base,
            (r0 + c0 * ld) * 8,
            DataType::F64,
            &[rows, cols],
            &[1, ld],
        )
    }

    /// The inlined path for whole one-dimensional buffers gives what the general one does,
    /// including the views it must refuse (no extent, an extent past the address space).
    #[test]
    fn one_dimensional_buffers_take_the_short_path_to_the_same_footprint() {
        let one_d = |data: u64, offset: u64, dtype: DataType, n: u64| {
            Tensor::strided(data as *mut _, offset, dtype, &[n], &[], 0)
        };
        let cases = [
            one_d(4096, 0, DataType::U8, 64),
            one_d(4096, 24, DataType::F64, 7),
            one_d(1 << 40, 8, DataType::F32, 1),
            one_d(4096, 0, DataType::U8, 0),
            one_d(u64::MAX - 16, 0, DataType::U8, 64),
            one_d(4096, u64::MAX, DataType::U8, 1),
            one_d(4096, 0, DataType::F64, u64::MAX / 4),
        ];
        for t in &cases {
            assert_eq!(Footprint::of(t), Footprint::of_view(t), "{t:?}");
        }
        let f = Footprint::of(&cases[1]).unwrap();
        assert!(f.dense && (f.lo, f.hi, f.origin) == (4120, 4176, 4096));
        assert_eq!(Footprint::of(&cases[3]), None);
        assert_eq!(Footprint::of(&cases[4]), None);
    }

    /// The path for column-major tiles gives what the general strided one does, including
    /// the extents it must refuse.
    #[test]
    fn column_major_tiles_take_the_short_path_to_the_same_footprint() {
        let view = |data: u64, offset: u64, dtype: DataType, rows: u64, cols: u64, ld: u64| {
            Tensor::strided(data as *mut _, offset, dtype, &[rows, cols], &[1, ld], 0)
        };
        let cases = [
            view(1 << 20, 0, DataType::F64, 64, 64, 4096),
            view(1 << 20, 8 * 100, DataType::F32, 3, 2, 4),
            view(4096, 24, DataType::F64, 2, 5, 3),
            view(u64::MAX - (1 << 20), 0, DataType::F64, 64, 64, 4096),
            view(4096, 0, DataType::F64, 2, 2, u64::MAX / 4),
            view(4096, 0, DataType::F64, 2, u64::MAX / 2, 4),
        ];
        for t in &cases {
            let esize = dtype_size(t.dtype).unwrap();
            let base = (t.data as u64).checked_add(t.offset).unwrap();
            assert_eq!(
                Footprint::of(t),
                Footprint::of_strided(t, esize, base),
                "{t:?}"
            );
        }
        let f = Footprint::of(&cases[0]).unwrap();
        assert!(!f.dense && f.rows.is_some() && f.hi - f.lo == 63 * 4096 * 8 + 64 * 8);
        assert_eq!(Footprint::of(&cases[3]), None);
    }

    #[test]
    fn column_tiles_of_one_matrix_are_disjoint() {
        let base = 1 << 20;
        let a = tile(base, 16, 0, 0, 16, 4);
        let b = tile(base, 16, 0, 8, 16, 4);
        assert!(a.dense && b.dense, "full-height column blocks are dense");
        assert!(!a.overlaps(&b));
        let c = tile(base, 16, 0, 0, 4, 4);
        let d = tile(base, 16, 8, 0, 4, 4);
        assert!(!c.dense);
        assert!(c.intervals_meet(&d), "byte ranges interleave");
        assert!(!c.overlaps(&d));
        assert!(a.overlaps(&c));
        assert!(a.covers(&c));
        assert!(!c.covers(&a));
    }

    #[test]
    fn whole_buffer_covers_and_overlaps_every_tile() {
        let base = 1 << 20;
        let whole = Footprint::dense(base, 16 * 16 * 8);
        for r in [0, 4, 8, 12] {
            for c in [0, 4, 8, 12] {
                let t = tile(base, 16, r, c, 4, 4);
                assert!(whole.overlaps(&t) && t.overlaps(&whole));
                assert!(whole.covers(&t));
                assert!(!t.covers(&whole));
            }
        }
    }

    #[test]
    fn partial_overlap_is_not_cover() {
        let base = 1 << 20;
        let a = tile(base, 16, 0, 0, 8, 8);
        let b = tile(base, 16, 4, 4, 8, 8);
        assert!(a.overlaps(&b));
        assert!(!a.covers(&b) && !b.covers(&a));
    }

    fn view(base: u64, offset: u64, dtype: DataType, shape: &[u64], strides: &[u64]) -> Footprint {
        test_footprint(base, offset, dtype, shape, strides).unwrap()
    }

    #[test]
    fn repeated_strides_cover_every_byte() {
        let base = 1 << 20;
        // u8 sliding window {2,2} strides {1,1}: bytes 0..=2
        let w = view(base, 0, DataType::U8, &[2, 2], &[1, 1]);
        let b2 = view(base, 2, DataType::U8, &[], &[]);
        assert!(w.overlaps(&b2) && b2.overlaps(&w));
        // u8 tile {4,4} strides {1,16}: byte 2 is in row 2 of column 0
        let tile = view(base, 0, DataType::U8, &[4, 4], &[1, 16]);
        assert!(tile.overlaps(&b2));
        assert!(!tile.overlaps(&view(base, 5, DataType::U8, &[], &[])));
        // u64 {4,4} strides {1,1}: elements 0..=6
        let u = view(base, 0, DataType::U64, &[4, 4], &[1, 1]);
        assert!(u.overlaps(&view(base, 6 * 8, DataType::U64, &[], &[])));
        assert!(!u.overlaps(&view(base, 7 * 8, DataType::U64, &[], &[])));
        // broadcast dimension adds nothing
        let bc = view(base, 0, DataType::U64, &[3, 2], &[0, 2]);
        assert!(!bc.overlaps(&view(base, 8, DataType::U64, &[], &[])));
        assert!(bc.overlaps(&view(base, 16, DataType::U64, &[], &[])));
    }

    #[test]
    fn tiles_are_exact_whatever_the_matrix_alignment() {
        // 8x8 tiles of b=64 of a 512x512 column-major matrix that starts 8 bytes past a
        // multiple of the column stride: tile (7,0)'s rows cross an absolute multiple of
        // n*8, so only offsets from the matrix base make every tile a box.
        for base in [(1u64 << 21) + 8, (1 << 21) + 256, 1 << 21, (1 << 21) + 4088] {
            let (n, b) = (512u64, 64u64);
            for (r1, c1, r2, c2) in [(0, 0, 7, 0), (3, 2, 4, 2), (7, 7, 0, 7), (1, 0, 1, 1)] {
                let x = tile(base, n, r1 * b, c1 * b, b, b);
                let y = tile(base, n, r2 * b, c2 * b, b, b);
                assert!(
                    !x.overlaps(&y),
                    "tiles ({r1},{c1}) and ({r2},{c2}) at base {base:#x}"
                );
            }
            let x = tile(base, n, 0, 0, b, b);
            assert!(x.overlaps(&tile(base, n, 32, 32, b, b)));
        }
    }

    /// The bytes of `count` rows of `w` bytes, `stride` apart, from `lo` (brute force).
    fn row_bytes(lo: u64, w: u64, stride: u64, count: u64) -> std::collections::BTreeSet<u64> {
        (0..count)
            .flat_map(|i| (0..w).map(move |j| lo + i * stride + j))
            .collect()
    }

    /// The O(1) row-set comparison agrees with brute force over the bytes, for views of one
    /// stride at every relative position (including rows that straddle the other's rows).
    #[test]
    fn row_sets_agree_with_bytes() {
        let rows = |lo: u64, w: u64, stride: u64, count: u64| {
            let mut dims = [(0u64, 0u64); MAX_DIMS];
            dims[0] = (1, w);
            dims[1] = (stride, count);
            let mut f = Footprint {
                lo,
                hi: lo + (count - 1) * stride + w,
                dense: false,
                origin: 0,
                ndims: 2,
                dims,
                rows: None,
            };
            f.rows = f.find_rows();
            f
        };
        let stride = 16;
        // Miri interprets every step: every 11th position there, every position natively.
        let step = if cfg!(miri) { 11 } else { 1 };
        let mut checked = 0;
        for (w1, c1) in [(1, 2), (4, 3), (8, 2), (15, 4)] {
            for (w2, c2) in [(1, 2), (3, 2), (8, 3), (12, 2)] {
                for lo2 in (0..80).step_by(step) {
                    let (x, y) = (rows(32, w1, stride, c1), rows(lo2, w2, stride, c2));
                    let (bx, by) = (
                        row_bytes(32, w1, stride, c1),
                        row_bytes(lo2, w2, stride, c2),
                    );
                    assert_eq!(x.rows_overlap(&y), Some(!bx.is_disjoint(&by)));
                    assert_eq!(
                        x.overlaps(&y),
                        !bx.is_disjoint(&by),
                        "{w1} {c1} {w2} {c2} {lo2}"
                    );
                    assert_eq!(y.overlaps(&x), !bx.is_disjoint(&by));
                    assert_eq!(
                        x.covers(&y),
                        by.is_subset(&bx),
                        "covers {w1} {c1} {w2} {c2} {lo2}"
                    );
                    assert_eq!(y.covers(&x), bx.is_subset(&by));
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 16 * 80_usize.div_ceil(step));
    }

    /// A dense range against a row set (a piece of a column against a tile of the same
    /// matrix) is decided exactly, both ways, at every position and length.
    #[test]
    fn dense_ranges_against_row_sets_agree_with_bytes() {
        // Miri interprets every step: every 44th position there, every 4th natively.
        let step = if cfg!(miri) { 44 } else { 4 };
        let mut checked = 0;
        // Tiles of a column-major f64 matrix with 16 rows (128-byte columns): `w` rows of
        // `count` columns, from row 4 of column 0 (byte 32).
        for (w, count) in [(1, 2), (4, 3), (8, 2), (12, 4)] {
            let x = Footprint::of(&Tensor::strided(
                1024 as *mut std::ffi::c_void,
                32,
                DataType::F64,
                &[w, count],
                &[1, 16],
                0,
            ))
            .unwrap();
            assert!(x.rows().is_some());
            let bx = row_bytes(1024 + 32, 8 * w, 128, count);
            for lo in (1024..1024 + 700).step_by(step) {
                for len in [1, 4, 8, 24, 32, 64, 100, 128, 200] {
                    let d = Footprint::dense(lo, len);
                    let bd = row_bytes(lo, len, 1, 1);
                    let meet = !bx.is_disjoint(&bd);
                    assert_eq!(x.overlaps(&d), meet, "{w} {count} {lo} {len}");
                    assert_eq!(d.overlaps(&x), meet, "{w} {count} {lo} {len}");
                    assert_eq!(x.covers(&d), bd.is_subset(&bx), "{w} {count} {lo} {len}");
                    assert_eq!(d.covers(&x), bx.is_subset(&bd), "{w} {count} {lo} {len}");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 4 * 700_usize.div_ceil(step) * 9);
    }

    /// Views whose rows overlap one another (each stride a multiple of the one below, less
    /// than its extent) merge into fewer dimensions without gaining or losing a byte, and a
    /// view that touches every byte of its range this way is dense (so it covers, for
    /// instance, a reader of any part of it).
    #[test]
    fn overlapping_rows_merge_exactly() {
        let base = 1 << 20;
        let mut checked = 0;
        for s1 in 1..=3u64 {
            for k in 1..=5u64 {
                for (c1, c2, c0) in [(2, 2, 1), (3, 4, 2), (5, 3, 3), (4, 2, 4), (2, 5, 2)] {
                    // u8 elements: a 3-D view {c0, c1, c2} with strides {1, s1, s1*k}.
                    let v = view(base, 0, DataType::U8, &[c0, c1, c2], &[1, s1, s1 * k]);
                    let mut bytes = std::collections::BTreeSet::new();
                    for i in 0..c0 {
                        for j in 0..c1 {
                            for l in 0..c2 {
                                bytes.insert(base + i + j * s1 + l * s1 * k);
                            }
                        }
                    }
                    for b in base..v.hi + 2 {
                        let one = view(b, 0, DataType::U8, &[], &[]);
                        assert_eq!(
                            v.overlaps(&one),
                            bytes.contains(&b),
                            "byte {} of {{{c0},{c1},{c2}}} strides {{1,{s1},{}}}",
                            b - base,
                            s1 * k
                        );
                        checked += 1;
                    }
                    let dense = (base..v.hi).all(|b| bytes.contains(&b));
                    assert_eq!(
                        v.dense,
                        dense,
                        "{{{c0},{c1},{c2}}} strides {{1,{s1},{}}}",
                        s1 * k
                    );
                }
            }
        }
        assert!(checked > 1000);
        // The audit's case: u64 {4, 8} strides {2, 1} writes elements 0..14, every one.
        let w = view(base, 0, DataType::U64, &[4, 8], &[2, 1]);
        assert!(w.dense && w.hi - w.lo == 14 * 8);
        assert!(w.covers(&view(base, 0, DataType::U64, &[4], &[])));
    }

    /// `runs_within` gives exactly the bytes a view touches inside a window, merged into
    /// runs (brute force over tiles, overlapping and broadcast views, and windows cutting
    /// them anywhere), and refuses a view with more runs than its budget.
    #[test]
    fn runs_within_a_window_are_the_views_bytes() {
        let base = 1u64 << 20;
        let views = [
            (vec![4, 3], vec![1, 10]),
            (vec![2, 3, 2], vec![1, 5, 40]),
            (vec![3, 4], vec![2, 1]),
            (vec![6], vec![3]),
            (vec![4, 4], vec![1, 4]),
            (vec![2, 2, 3], vec![7, 1, 3]),
        ];
        // Miri interprets every step: every 5th window edge there, every edge natively.
        let step = if cfg!(miri) { 5 } else { 1 };
        let mut runs = Vec::new();
        let mut checked = 0;
        for (shape, strides) in &views {
            let v = view(base, 0, DataType::U8, shape, strides);
            let mut bytes = std::collections::BTreeSet::new();
            let n: u64 = shape.iter().product();
            for flat in 0..n {
                let (mut rest, mut off) = (flat, 0);
                for (c, s) in shape.iter().zip(strides) {
                    off += (rest % c) * s;
                    rest /= c;
                }
                bytes.insert(base + off);
            }
            for lo in (base - 2..v.hi + 2).step_by(step) {
                for hi in (lo..v.hi + 3).step_by(step) {
                    assert!(v.runs_within(lo, hi, 1000, &mut runs));
                    let got: std::collections::BTreeSet<u64> =
                        runs.iter().flat_map(|&(a, b)| a..b).collect();
                    let want = bytes.range(lo..hi).copied().collect();
                    assert_eq!(got, want, "{shape:?} {strides:?} in [{lo}, {hi})");
                    assert!(
                        runs.windows(2).all(|p| p[0].1 < p[1].0),
                        "{runs:?} not merged"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 1000 / (step * step));
        let t = tile(base, 64, 0, 0, 8, 8);
        assert!(t.runs_within(t.lo, t.hi, 8, &mut runs) && runs.len() == 8);
        assert!(!t.runs_within(t.lo, t.hi, 7, &mut runs));
    }

    #[test]
    fn odd_strides_are_conservative() {
        let base = 1 << 20;
        let a = tile(base, 15, 0, 0, 4, 4); // 15 is not a multiple of 8 * 4 layouts below
        let b = tile(base, 16, 8, 0, 4, 4);
        // different radix systems that do not divide: must answer "overlap"
        assert!(a.overlaps(&b) || !a.intervals_meet(&b));
    }
}
