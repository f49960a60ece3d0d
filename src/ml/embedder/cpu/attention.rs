//! Multi-head self-attention over packed sequences: each sequence attends only to its
//! own tokens, so there is no padding and no mask. Work is split into tasks of
//! (sequence, block of query rows), each writing its own rows of the output.

use rayon::prelude::*;

use super::kernels::Simd;
use super::matmul::{matmul, Mat, MatMut};
use super::with_scratch;

/// A sequence's place in the packed batch: rows `start .. start + len`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    pub start: usize,
    pub len: usize,
}

/// Attention's shape.
#[derive(Debug, Clone, Copy)]
pub(super) struct Heads {
    pub hidden: usize,
    pub count: usize,
}

struct Task<'a> {
    span: Span,
    /// First query row, relative to the sequence.
    first: usize,
    /// This task's rows of the output, `hidden` wide.
    out: &'a mut [f32],
}

/// Query rows per task: whole sequences when the batch alone keeps every thread busy,
/// smaller blocks when there are few sequences (a single long text still uses all cores).
fn rows_per_task(spans: &[Span], len: usize) -> usize {
    let wanted = 4 * rayon::current_num_threads();
    let blocks = wanted
        .div_ceil(spans.len().max(1))
        .clamp(1, len.div_ceil(16).max(1));
    len.div_ceil(blocks).max(1)
}

/// `out = softmax(Q·Kᵀ/√d)·V` for every head of every sequence. `qkv` holds each token's
/// query, key and value side by side (`3·hidden` wide); `out` is `hidden` wide. With
/// `int16` (only chosen where its kernel runs) the two products are i16's, else f32's.
pub(super) fn attend(
    simd: Simd,
    int16: bool,
    qkv: &[f32],
    out: &mut [f32],
    spans: &[Span],
    heads: Heads,
) {
    let hidden = heads.hidden;
    let mut tasks = Vec::new();
    let mut rest = out;
    for &span in spans {
        let (mut seq_out, tail) = rest.split_at_mut(span.len * hidden);
        rest = tail;
        let block = rows_per_task(spans, span.len);
        let mut first = 0;
        while first < span.len {
            let rows = block.min(span.len - first);
            let (mine, later) = seq_out.split_at_mut(rows * hidden);
            seq_out = later;
            tasks.push(Task {
                span,
                first,
                out: mine,
            });
            first += rows;
        }
    }
    tasks
        .into_par_iter()
        .for_each(|task| attend_rows(simd, int16, qkv, task, heads));
}

#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
fn attend_rows(simd: Simd, int16: bool, qkv: &[f32], task: Task<'_>, heads: Heads) {
    let Task { span, first, out } = task;
    let (hidden, width) = (heads.hidden, 3 * heads.hidden);
    let d = hidden / heads.count;
    let rows = out.len() / hidden;
    let len = span.len;
    let scale = 1.0 / (d as f32).sqrt();
    let seq = &qkv[span.start * width..(span.start + len) * width];
    with_scratch(rows * len, |scores| {
        for h in 0..heads.count {
            #[cfg(target_arch = "x86_64")]
            if int16 {
                let head = super::int16::attention::Head {
                    q: &seq[first * width + h * d..],
                    k: &seq[hidden + h * d..],
                    v: &seq[2 * hidden + h * d..],
                    ld: width,
                    rows,
                    len,
                    d,
                    scale,
                };
                super::int16::attention::attend(head, scores, &mut out[h * d..], hidden);
                continue;
            }
            let q = Mat::rows(&seq[first * width + h * d..], rows, d, width);
            let k = Mat::rows(&seq[hidden + h * d..], len, d, width);
            let v = Mat::rows(&seq[2 * hidden + h * d..], len, d, width);
            matmul(MatMut::rows(scores, rows, len, len), q, k.t(), scale, false);
            simd.softmax(scores, len);
            let probs = Mat::rows(scores, rows, len, len);
            matmul(
                MatMut::rows(&mut out[h * d..], rows, d, hidden),
                probs,
                v,
                1.0,
                false,
            );
        }
    });
}
