//! What a parallel loop runs over: an index range, or a 2-D block of rows
//! by columns, and the two ways a partitioner cuts one.
//!
//! A range is cut in halves (`split`) by the recursive partitioners, and
//! into `n` near-equal parts (`part`) by the planned ones (static,
//! affinity). Both cuts cover every index (or cell) exactly once, the
//! parts in order: the slice loops hand out disjoint sub-slices on that
//! promise alone, so it is the invariant this file keeps.

use std::ops::Range;

/// A range a loop can cut: every cut covers each element exactly once.
pub(crate) trait LoopRange: Clone + Send + Sync {
    /// Elements (indices, or cells of a 2-D range).
    fn elements(&self) -> usize;
    /// Can it be cut in halves at all (two non-empty halves, each side
    /// within its own grain for a 2-D range)?
    fn divisible(&self) -> bool;
    /// Two halves, in order, covering it exactly.
    fn split(&self) -> (Self, Self);
    /// Length along the outer dimension (indices; a 2-D block's rows):
    /// cutting across it keeps the body's inner loop as long as it is.
    fn outer_len(&self) -> usize;
    /// The shortest a cut across the outer dimension may leave a side.
    fn outer_grain(&self) -> usize;
    /// The first `at` outer units and the rest (`0 < at < outer_len()`),
    /// covering it exactly.
    fn split_outer_at(&self, at: usize) -> (Self, Self);
    /// The most parts `part` cuts it into with none empty.
    fn max_parts(&self) -> usize;
    /// Part `k` of `n` near-equal parts, in order (`1 <= n <=
    /// max_parts()`, `k < n`).
    fn part(&self, k: usize, n: usize) -> Self;
}

/// The `k`-th of `n` near-equal consecutive parts of `range`.
fn nth_part(range: &Range<usize>, k: usize, n: usize) -> Range<usize> {
    let len = range.end.saturating_sub(range.start);
    // 128-bit products: `len * k` may not fit a usize.
    let at = |i: usize| range.start + ((len as u128 * i as u128) / n as u128) as usize;
    at(k)..at(k + 1)
}

impl LoopRange for Range<usize> {
    #[inline]
    fn elements(&self) -> usize {
        self.end.saturating_sub(self.start)
    }

    #[inline]
    fn divisible(&self) -> bool {
        self.elements() >= 2
    }

    #[inline]
    fn split(&self) -> (Self, Self) {
        let mid = self.start + self.elements() / 2;
        (self.start..mid, mid..self.end)
    }

    #[inline]
    fn outer_len(&self) -> usize {
        self.elements()
    }

    #[inline]
    fn outer_grain(&self) -> usize {
        1
    }

    #[inline]
    fn split_outer_at(&self, at: usize) -> (Self, Self) {
        debug_assert!(0 < at && at < self.elements());
        (self.start..self.start + at, self.start + at..self.end)
    }

    fn max_parts(&self) -> usize {
        self.elements()
    }

    fn part(&self, k: usize, n: usize) -> Self {
        nth_part(self, k, n)
    }
}

/// A 2-D block of `rows` x `cols`, for matrices, images and stencils: the
/// loop body gets tiles of it. A tile is cut in halves across its longer
/// side (relative to that side's grain) as long as a side is longer than
/// its grain (oneTBB's `blocked_range2d`), so tiles stay close to square,
/// and a side cut as far as it goes (`Simple`) ends between half its grain
/// and its grain: with sides that are the grain times a power of two,
/// exactly the grain.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// let cells = AtomicUsize::new(0);
/// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
/// pool.for_tiles(sixfold::Range2d::new(0..100, 0..60).grain(8, 8), |tile| {
///     cells.fetch_add(tile.rows.len() * tile.cols.len(), Ordering::Relaxed);
/// });
/// assert_eq!(cells.into_inner(), 6000);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Range2d {
    /// The rows of this block.
    pub rows: Range<usize>,
    /// The columns of this block.
    pub cols: Range<usize>,
    row_grain: usize,
    col_grain: usize,
}

impl Range2d {
    /// The block `rows` x `cols`, with a grain of one row and one column.
    ///
    /// ```
    /// let block = sixfold::Range2d::new(0..4, 2..5);
    /// assert_eq!((block.rows.len(), block.cols.len()), (4, 3));
    /// ```
    pub fn new(rows: Range<usize>, cols: Range<usize>) -> Self {
        Range2d {
            rows,
            cols,
            row_grain: 1,
            col_grain: 1,
        }
    }

    /// A side is cut only while it is longer than its grain (`rows` or
    /// `cols`; 0 means 1), so no side is cut below half its grain (and
    /// none below its grain when the block's sides are the grain times a
    /// power of two, as in the example).
    ///
    /// ```
    /// let pool = sixfold::Pool::builder().num_threads(2).build().unwrap();
    /// let block = sixfold::Range2d::new(0..64, 0..64).grain(32, 32);
    /// pool.for_tiles(block, |tile| assert!(tile.rows.len() >= 32 && tile.cols.len() >= 32));
    /// ```
    pub fn grain(mut self, rows: usize, cols: usize) -> Self {
        self.row_grain = rows.max(1);
        self.col_grain = cols.max(1);
        self
    }

    /// Rows times columns.
    ///
    /// ```
    /// assert_eq!(sixfold::Range2d::new(0..3, 0..5).cells(), 15);
    /// ```
    pub fn cells(&self) -> usize {
        self.rows.len() * self.cols.len()
    }

    /// Is `rows` the side to cut (the longer one, in grains)?
    fn cut_rows(&self) -> bool {
        // rows / row_grain >= cols / col_grain, without dividing.
        self.rows.len() * self.col_grain >= self.cols.len() * self.row_grain
    }

    fn with(&self, rows: Range<usize>, cols: Range<usize>) -> Self {
        Range2d {
            rows,
            cols,
            ..self.clone()
        }
    }
}

impl LoopRange for Range2d {
    #[inline]
    fn elements(&self) -> usize {
        self.cells()
    }

    fn divisible(&self) -> bool {
        self.rows.len() > self.row_grain || self.cols.len() > self.col_grain
    }

    fn split(&self) -> (Self, Self) {
        let rows_fit = self.rows.len() <= self.row_grain;
        let cols_fit = self.cols.len() <= self.col_grain;
        if !rows_fit && (cols_fit || self.cut_rows()) {
            let (top, bottom) = self.rows.split();
            (
                self.with(top, self.cols.clone()),
                self.with(bottom, self.cols.clone()),
            )
        } else {
            let (left, right) = self.cols.split();
            (
                self.with(self.rows.clone(), left),
                self.with(self.rows.clone(), right),
            )
        }
    }

    fn outer_len(&self) -> usize {
        self.rows.len()
    }

    fn outer_grain(&self) -> usize {
        self.row_grain
    }

    fn split_outer_at(&self, at: usize) -> (Self, Self) {
        debug_assert!(0 < at && at < self.rows.len());
        let mid = self.rows.start + at;
        (
            self.with(self.rows.start..mid, self.cols.clone()),
            self.with(mid..self.rows.end, self.cols.clone()),
        )
    }

    fn max_parts(&self) -> usize {
        if self.cells() == 0 {
            0
        } else {
            self.rows.len().max(self.cols.len())
        }
    }

    fn part(&self, k: usize, n: usize) -> Self {
        // Bands of whole rows (contiguous memory in a row-major layout)
        // when there are rows enough; else bands of columns.
        if self.rows.len() >= n {
            self.with(nth_part(&self.rows, k, n), self.cols.clone())
        } else {
            self.with(self.rows.clone(), nth_part(&self.cols, k, n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_a_range_exactly_in_order() {
        for len in [0usize, 1, 2, 3, 7, 1000] {
            for n in 1..=9 {
                let range = 5..5 + len;
                let mut next = 5;
                for k in 0..n {
                    let p = range.part(k, n);
                    assert_eq!(p.start, next, "len {len}, part {k} of {n}");
                    next = p.end;
                }
                assert_eq!(next, range.end);
            }
        }
    }

    #[test]
    fn a_2d_range_splits_its_longer_side_and_parts_cover_it() {
        let r = Range2d::new(0..10, 0..100);
        let (a, b) = r.split();
        assert_eq!((a.rows.clone(), a.cols.clone()), (0..10, 0..50));
        assert_eq!(b.cols, 50..100);
        // Fewer rows than parts and more columns: columns are cut.
        let r = Range2d::new(0..2, 0..30);
        let cells: usize = (0..4).map(|k| r.part(k, 4).cells()).sum();
        assert_eq!(cells, 60);
        let r = Range2d::new(0..3, 0..3);
        assert_eq!(r.max_parts(), 3);
        assert!((0..3).all(|k| r.part(k, 3).cells() == 3));
        assert!(!Range2d::new(0..4, 0..4).grain(4, 4).divisible());
    }
}
