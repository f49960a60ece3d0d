//! A bounds-checked matrix view and the one call into the `gemm` crate. The forward
//! pass parallelises over rows itself, so every product runs on the calling thread.

/// A read-only strided matrix: element `(r, c)` is `data[r * rs + c * cs]`.
#[derive(Clone, Copy)]
pub(super) struct Mat<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

/// A writable strided matrix, laid out as [`Mat`].
pub(super) struct MatMut<'a> {
    data: &'a mut [f32],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

/// Panics unless every element of a `rows × cols` view with these strides lies in `len`:
/// a wrong shape is a bug in the caller, and `gemm` must never read out of bounds.
fn check(len: usize, rows: usize, cols: usize, rs: usize, cs: usize) {
    if rows > 0 && cols > 0 {
        let last = (rows - 1) * rs + (cols - 1) * cs;
        assert!(
            last < len,
            "matrix view {rows}x{cols} (strides {rs},{cs}) past {len}"
        );
    }
}

impl<'a> Mat<'a> {
    /// A `rows × cols` view with explicit row and column strides.
    pub(super) fn new(data: &'a [f32], rows: usize, cols: usize, rs: usize, cs: usize) -> Self {
        check(data.len(), rows, cols, rs, cs);
        Self {
            data,
            rows,
            cols,
            rs,
            cs,
        }
    }

    /// A row-major view whose rows are `rs` apart.
    pub(super) fn rows(data: &'a [f32], rows: usize, cols: usize, rs: usize) -> Self {
        Self::new(data, rows, cols, rs, 1)
    }

    /// The transposed view (no copy).
    pub(super) fn t(self) -> Self {
        Self {
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }
}

impl<'a> MatMut<'a> {
    /// A row-major writable view whose rows are `rs` apart.
    pub(super) fn rows(data: &'a mut [f32], rows: usize, cols: usize, rs: usize) -> Self {
        check(data.len(), rows, cols, rs, 1);
        Self {
            data,
            rows,
            cols,
            rs,
            cs: 1,
        }
    }
}

/// `dst = scale · a · b`, or `dst += scale · a · b` when `accumulate`.
pub(super) fn matmul(dst: MatMut<'_>, a: Mat<'_>, b: Mat<'_>, scale: f32, accumulate: bool) {
    assert_eq!(a.rows, dst.rows, "matmul: rows of a and dst");
    assert_eq!(b.cols, dst.cols, "matmul: columns of b and dst");
    assert_eq!(a.cols, b.rows, "matmul: inner dimensions");
    if dst.rows == 0 || dst.cols == 0 {
        return;
    }
    if a.cols == 0 {
        if !accumulate {
            for r in 0..dst.rows {
                for c in 0..dst.cols {
                    dst.data[r * dst.rs + c * dst.cs] = 0.0;
                }
            }
        }
        return;
    }
    // SAFETY: the three views were bounds-checked when built (`check`), so every
    // element gemm touches is inside its slice; `dst` is a unique borrow, so it cannot
    // alias `a` or `b`. Strides fit `isize` because they index live slices.
    unsafe {
        gemm::gemm(
            dst.rows,
            dst.cols,
            a.cols,
            dst.data.as_mut_ptr(),
            dst.cs as isize,
            dst.rs as isize,
            accumulate,
            a.data.as_ptr(),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr(),
            b.cs as isize,
            b.rs as isize,
            1.0,
            scale,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_products_match_the_definition() {
        let a: Vec<f32> = (0..15).map(|i| i as f32 * 0.5 - 3.0).collect(); // 3x5
        let w: Vec<f32> = (0..20).map(|i| (i % 7) as f32 - 2.0).collect(); // 4x5, used as bᵀ
        let mut dst = vec![1.0f32; 3 * 6];
        matmul(
            MatMut::rows(&mut dst, 3, 4, 6),
            Mat::rows(&a, 3, 5, 5),
            Mat::rows(&w, 4, 5, 5).t(),
            2.0,
            true,
        );
        for r in 0..3 {
            for c in 0..4 {
                let dot: f32 = (0..5).map(|k| a[r * 5 + k] * w[c * 5 + k]).sum();
                assert_eq!(dst[r * 6 + c], 1.0 + 2.0 * dot);
            }
            assert_eq!(&dst[r * 6 + 4..r * 6 + 6], &[1.0, 1.0]);
        }
    }

    #[test]
    #[should_panic(expected = "past")]
    fn a_view_past_its_slice_is_refused() {
        let a = vec![0.0f32; 10];
        Mat::rows(&a, 3, 4, 4);
    }
}
