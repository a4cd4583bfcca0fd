//! The TensorMap's index of row sets: tiles of one column-major matrix, column blocks.
//!
//! Without it a tile lives in the ordered index, and a lookup by address range finds every
//! tile of its column band and the band before (all start within one tile's span of it):
//! 2 n/b candidates per lookup, so building an (n/b)-tile Cholesky costs O((n/b)^4) (at
//! n = 4096, b = 64, half a second). Here a row set is a rectangle in (row, byte-in-row)
//! coordinates of its stride, and the rectangles of one class (one stride, one origin) are
//! hashed by the cells of a grid sized from the class's first entry. A lookup by a row set of
//! the same stride visits the cells its rectangle covers, finding the tiles it touches and
//! their neighbours in the cells; any other lookup visits the cells of the rows its address
//! range spans (or, when those are more than the grid has, every cell).

use crate::view::{Footprint, Rows};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// An entry spanning more cells than this is not gridded (it goes to the ordered index).
const MAX_CELLS: u64 = 16;

/// Classes per run map; row sets fitting none of them go to the ordered index.
pub(super) const MAX_CLASSES: usize = 8;

/// Multiplicative hashing of a cell's two coordinates.
#[derive(Default)]
struct CellHasher(u64);

impl std::hash::Hasher for CellHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, x: u64) {
        let x = x ^ self.0.rotate_left(32);
        self.0 = (x ^ (x >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Rows `[q0, q1)` and bytes `[c0, c1)` within a row, in a class's coordinates.
#[derive(Clone, Copy)]
struct Rect {
    q0: u64,
    q1: u64,
    c0: u64,
    c1: u64,
}

#[derive(Default)]
pub(super) struct RowsClass {
    stride: u64,
    /// The address at row 0, byte 0: the class's first entry is at a cell corner.
    origin: u64,
    /// log2 of a cell's rows and bytes.
    cq: u32,
    cr: u32,
    cells: HashMap<(u64, u64), SmallVec<[u32; 2]>, BuildHasherDefault<CellHasher>>,
    pub(super) live: usize,
}

impl RowsClass {
    /// A class for row sets like `r` at `lo` (stride `r.stride`).
    pub(super) fn reset_for(&mut self, lo: u64, r: Rows) {
        let cq = r.count.next_power_of_two().trailing_zeros();
        let cr = r.w.next_power_of_two().trailing_zeros();
        let row = lo / r.stride;
        *self = RowsClass {
            stride: r.stride,
            origin: lo - (row >> cq << cq) * r.stride,
            cq,
            cr,
            cells: std::mem::take(&mut self.cells),
            live: 0,
        };
        self.cells.clear();
    }

    /// The rectangle of row set `r` at `lo`, when it has this class's stride and does not
    /// run past the end of a row in its coordinates.
    fn rect(&self, lo: u64, r: Rows) -> Option<Rect> {
        if r.stride != self.stride || lo < self.origin {
            return None;
        }
        let a = lo - self.origin;
        let (q0, c0) = (a / self.stride, a % self.stride);
        (c0 + r.w <= self.stride).then_some(Rect {
            q0,
            q1: q0 + r.count,
            c0,
            c1: c0 + r.w,
        })
    }

    /// The cells `x` covers: rows of cells `qa..=qb`, columns `ca..=cb`.
    fn cell_range(&self, x: Rect) -> (u64, u64, u64, u64) {
        (
            x.q0 >> self.cq,
            (x.q1 - 1) >> self.cq,
            x.c0 >> self.cr,
            (x.c1 - 1) >> self.cr,
        )
    }

    /// The cells `x` covers, when they are at most `max`.
    fn cells_within(&self, x: Rect, max: u64) -> Option<impl Iterator<Item = (u64, u64)>> {
        let (qa, qb, ca, cb) = self.cell_range(x);
        ((qb - qa + 1).saturating_mul(cb - ca + 1) <= max)
            .then(|| (qa..=qb).flat_map(move |q| (ca..=cb).map(move |c| (q, c))))
    }

    fn cells_of(&self, x: Rect) -> Option<impl Iterator<Item = (u64, u64)>> {
        self.cells_within(x, MAX_CELLS)
    }

    /// The smallest rectangle holding every byte of `[lo, hi)`: whole rows, unless the range
    /// lies within one row. `None` if the range ends below the origin.
    fn span(&self, lo: u64, hi: u64) -> Option<Rect> {
        let a = lo.max(self.origin) - self.origin;
        let b = hi.checked_sub(self.origin).filter(|&b| b > a)?;
        let (q0, q1) = (a / self.stride, (b - 1) / self.stride);
        let (c0, c1) = if q0 == q1 {
            (a % self.stride, (b - 1) % self.stride + 1)
        } else {
            (0, self.stride)
        };
        Some(Rect {
            q0,
            q1: q1 + 1,
            c0,
            c1,
        })
    }

    /// Whether an entry `fp` (a row set `r`) belongs in this class.
    pub(super) fn fits(&self, lo: u64, r: Rows) -> bool {
        self.rect(lo, r).is_some_and(|x| self.cells_of(x).is_some())
    }

    /// The rectangle of entry `fp`, a row set this class holds (`fits` said yes).
    fn entry_rect(&self, fp: &Footprint) -> Rect {
        fp.rows()
            .and_then(|r| self.rect(fp.lo, r))
            .expect("a row set of this class")
    }

    /// Add entry `idx` (`fits` said yes).
    pub(super) fn add(&mut self, idx: u32, fp: &Footprint) {
        let x = self.entry_rect(fp);
        for cell in self.cells_of(x).expect("fits") {
            self.cells.entry(cell).or_default().push(idx);
        }
        self.live += 1;
    }

    /// Remove entry `idx`, added as `fp`.
    pub(super) fn remove(&mut self, idx: u32, fp: &Footprint) {
        let x = self.entry_rect(fp);
        for cell in self.cells_of(x).expect("added") {
            if let Some(v) = self.cells.get_mut(&cell) {
                if let Some(k) = v.iter().position(|&i| i == idx) {
                    v.swap_remove(k);
                }
                if v.is_empty() {
                    self.cells.remove(&cell);
                }
            }
        }
        self.live -= 1;
    }

    /// Push onto `out` a superset of the entries overlapping `fp` (possibly repeated);
    /// returns whether any may be repeated.
    pub(super) fn candidates(&self, fp: &Footprint, out: &mut Vec<u32>) -> bool {
        let rect = fp.rows().and_then(|r| self.rect(fp.lo, r));
        if let Some(x) = rect {
            // A tile of the grid's own tiling: one cell, one probe.
            let (qa, qb, ca, cb) = self.cell_range(x);
            if qa == qb && ca == cb {
                if let Some(v) = self.cells.get(&(qa, ca)) {
                    out.extend_from_slice(v);
                }
                return false;
            }
        }
        if let Some(cells) = rect.and_then(|x| self.cells_of(x)) {
            let mut n = 0;
            for cell in cells {
                if let Some(v) = self.cells.get(&cell) {
                    out.extend_from_slice(v);
                }
                n += 1;
            }
            return n > 1;
        }
        let Some(x) = self.span(fp.lo, fp.hi) else {
            return false;
        };
        match self.cells_within(x, self.cells.len() as u64) {
            Some(cells) => {
                for cell in cells {
                    if let Some(v) = self.cells.get(&cell) {
                        out.extend_from_slice(v);
                    }
                }
            }
            None => {
                let (qa, qb, ca, cb) = self.cell_range(x);
                for (&(q, c), v) in &self.cells {
                    if (qa..=qb).contains(&q) && (ca..=cb).contains(&c) {
                        out.extend_from_slice(v);
                    }
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::DataType;
    use crate::view::test_footprint;

    /// An f64 view of `shape` with element `strides` at `base + offset` bytes.
    fn view(base: u64, offset: u64, shape: &[u64], strides: &[u64]) -> Footprint {
        test_footprint(base, offset, DataType::F64, shape, strides).expect("a view")
    }

    /// Tile (i, j) of a column-major n x n f64 matrix at `base`, b x b.
    fn tile(base: u64, n: u64, b: u64, i: u64, j: u64) -> Footprint {
        view(base, (j * b * n + i * b) * 8, &[b, b], &[1, n])
    }

    /// The lower tiles of an 8 x 8 grid: a lookup by a tile finds among a few candidates
    /// exactly the tile it overlaps, where the ordered index would offer a column band.
    #[test]
    fn tiles_are_found_by_their_cells() {
        let (base, n, b) = (0x7f00_0000_1230u64, 512u64, 64u64);
        let first = tile(base, n, b, 3, 2);
        let mut c = RowsClass::default();
        c.reset_for(first.lo, first.rows().unwrap());
        let mut all = Vec::new();
        for j in 0..n / b {
            for i in j..n / b {
                let fp = tile(base, n, b, i, j);
                let r = fp.rows().unwrap();
                assert!(c.fits(fp.lo, r), "tile ({i}, {j})");
                let idx = all.len() as u32;
                c.add(idx, &fp);
                all.push(fp);
            }
        }
        for (k, fp) in all.iter().enumerate() {
            let mut out = Vec::new();
            c.candidates(fp, &mut out);
            out.sort_unstable();
            out.dedup();
            assert!(out.len() <= 4, "{} candidates for one tile", out.len());
            let hits: Vec<u32> = out
                .iter()
                .copied()
                .filter(|&i| all[i as usize].overlaps(fp))
                .collect();
            assert_eq!(hits, vec![k as u32]);
        }
        // A whole column band (not a tile's shape): the cells of its rows hold all its tiles.
        let band = view(base, 0, &[n * b], &[0]);
        let mut out = Vec::new();
        c.candidates(&band, &mut out);
        out.sort_unstable();
        out.dedup();
        let hits = out
            .iter()
            .filter(|&&i| all[i as usize].overlaps(&band))
            .count();
        assert_eq!(hits, (n / b) as usize);
        for (k, fp) in all.iter().enumerate() {
            c.remove(k as u32, fp);
        }
        assert_eq!(c.live, 0);
        assert!(c.cells.is_empty());
    }

    /// Row sets of another stride, or running past a row's end in the class's coordinates,
    /// do not fit.
    #[test]
    fn other_strides_and_wrapping_row_sets_do_not_fit() {
        let (base, n, b) = (1u64 << 30, 256u64, 32u64);
        let first = tile(base, n, b, 0, 0);
        let mut c = RowsClass::default();
        c.reset_for(first.lo, first.rows().unwrap());
        let other = tile(base, 2 * n, b, 0, 0);
        assert!(!c.fits(other.lo, other.rows().unwrap()));
        // A tile starting half a tile above the end of column 0: it runs into column 1.
        let wrap = view(base, (n - b / 2) * 8, &[b, b], &[1, n]);
        assert!(!c.fits(wrap.lo, wrap.rows().unwrap()));
        assert!(c.fits(first.lo, first.rows().unwrap()));
    }
}
