//! Row kernels of the CPU forward pass: bias add, bias + GELU (exact erf form),
//! bias + LayerNorm and softmax. Each has a portable version; on x86-64 with AVX2 and
//! FMA a vectorised one is picked once, at load, by [`Simd::detect`].

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2;

/// The instruction set the kernels run with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Simd {
    /// Plain Rust, any CPU.
    Portable,
    /// 256-bit AVX2 + FMA (x86-64 only, checked at run time).
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Simd {
    /// The best instruction set this CPU offers.
    pub(super) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Simd::Avx2;
        }
        Simd::Portable
    }

    /// `rows[r][j] += bias[j]` for every row of `rows` (its length a multiple of the bias').
    pub(super) fn add_bias(self, rows: &mut [f32], bias: &[f32]) {
        for row in rows.chunks_exact_mut(bias.len()) {
            for (x, b) in row.iter_mut().zip(bias) {
                *x += b;
            }
        }
    }

    /// `x = gelu(x + bias)` row by row, GELU in its exact form `x/2 · (1 + erf(x/√2))`.
    pub(super) fn bias_gelu(self, rows: &mut [f32], bias: &[f32]) {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Avx2` is only chosen when the CPU reports AVX2 and FMA.
            Simd::Avx2 => unsafe { avx2::bias_gelu(rows, bias) },
            Simd::Portable => {
                for row in rows.chunks_exact_mut(bias.len()) {
                    for (x, b) in row.iter_mut().zip(bias) {
                        *x = gelu(*x + b);
                    }
                }
            }
        }
    }

    /// `x = LayerNorm(x + bias) · gamma + beta` row by row, the variance biased (over
    /// the row) as in PyTorch.
    pub(super) fn bias_layer_norm(self, rows: &mut [f32], bias: Option<&[f32]>, norm: Norm<'_>) {
        let width = norm.gamma.len();
        for row in rows.chunks_exact_mut(width) {
            match self {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `Avx2` is only chosen when the CPU reports AVX2 and FMA.
                Simd::Avx2 => unsafe { avx2::bias_layer_norm(row, bias, norm) },
                Simd::Portable => layer_norm_row(row, bias, norm),
            }
        }
    }

    /// Softmax of each row of `rows` (rows of `width` values), with max subtraction.
    pub(super) fn softmax(self, rows: &mut [f32], width: usize) {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Avx2` is only chosen when the CPU reports AVX2 and FMA.
            Simd::Avx2 => unsafe { avx2::softmax(rows, width) },
            Simd::Portable => rows.chunks_exact_mut(width).for_each(softmax_row),
        }
    }
}

/// A LayerNorm's parameters.
#[derive(Clone, Copy)]
pub(super) struct Norm<'a> {
    pub gamma: &'a [f32],
    pub beta: &'a [f32],
    pub eps: f32,
}

// Cephes' single-precision exp: e^x = 2^n · e^r with |r| <= ln2/2, e^r by a polynomial.
// The AVX2 version uses the same constants, so both paths agree to rounding.
const EXP_HI: f32 = 88.376_26;
const EXP_LO: f32 = -87.336_55;
const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
const EXP_P: [f32; 6] = [
    1.987_569_1e-4,
    1.398_2e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    0.166_666_65,
    0.5,
];

// Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7), as PyTorch's vectorised erf.
const ERF_P: f32 = 0.327_591_1;
const ERF_A: [f32; 5] = [
    0.254_829_6,
    -0.284_496_74,
    1.421_413_8,
    -1.453_152,
    1.061_405_4,
];

fn exp(x: f32) -> f32 {
    let x = x.clamp(EXP_LO, EXP_HI);
    let n = (x * LOG2E).round();
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut y = EXP_P[0];
    for p in &EXP_P[1..] {
        y = y * r + p;
    }
    let y = y * r * r + r + 1.0;
    // n is within [-126, 127] after the clamp: a normal power of two.
    y * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + ERF_P * a);
    let mut poly = ERF_A[4];
    for c in ERF_A[..4].iter().rev() {
        poly = poly * t + c;
    }
    let y = 1.0 - poly * t * exp(-a * a);
    y.copysign(x)
}

fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

fn layer_norm_row(row: &mut [f32], bias: Option<&[f32]>, norm: Norm<'_>) {
    if let Some(bias) = bias {
        for (x, b) in row.iter_mut().zip(bias) {
            *x += b;
        }
    }
    let n = row.len() as f32;
    let mean = row.iter().sum::<f32>() / n;
    let var = row.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / n;
    let inv = 1.0 / (var + norm.eps).sqrt();
    for ((x, g), b) in row.iter_mut().zip(norm.gamma).zip(norm.beta) {
        *x = (*x - mean) * inv * g + b;
    }
}

fn softmax_row(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for x in row.iter_mut() {
        *x = exp(*x - max);
        sum += *x;
    }
    let inv = 1.0 / sum;
    for x in row.iter_mut() {
        *x *= inv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn erf_exact(x: f64) -> f64 {
        candle_core::cpu::erf::erf_f64(x)
    }

    fn ramp(n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n)
            .map(|i| lo + (hi - lo) * i as f32 / (n - 1) as f32)
            .collect()
    }

    #[test]
    fn exp_and_erf_are_accurate() {
        for x in ramp(2001, -80.0, 80.0) {
            let want = (x as f64).exp();
            let rel = ((exp(x) as f64 - want) / want).abs();
            assert!(rel < 3e-7, "exp({x}): relative error {rel}");
        }
        for x in ramp(2001, -6.0, 6.0) {
            let err = (erf(x) as f64 - erf_exact(x as f64)).abs();
            // The formula's 1.5e-7 plus single-precision rounding.
            assert!(err < 5e-7, "erf({x}): error {err}");
        }
    }

    #[test]
    fn every_instruction_set_gives_the_same_rows() {
        let simd = Simd::detect();
        let width = 37; // not a multiple of the vector width: tails are exercised
        let bias = ramp(width, -0.5, 0.5);
        let gamma = ramp(width, 0.5, 1.5);
        let beta = ramp(width, -0.1, 0.1);
        let norm = Norm {
            gamma: &gamma,
            beta: &beta,
            eps: 1e-12,
        };
        let input = ramp(3 * width, -9.0, 7.0);
        type Kernel<'a> = Box<dyn Fn(Simd, &mut [f32]) + 'a>;
        let kernels: [(&str, Kernel<'_>); 3] = [
            ("gelu", Box::new(|s, r| s.bias_gelu(r, &bias))),
            (
                "layer_norm",
                Box::new(|s, r| s.bias_layer_norm(r, Some(&bias), norm)),
            ),
            ("softmax", Box::new(|s, r| s.softmax(r, width))),
        ];
        for (name, kernel) in &kernels {
            let (mut fast, mut slow) = (input.clone(), input.clone());
            kernel(simd, &mut fast);
            kernel(Simd::Portable, &mut slow);
            for (i, (a, b)) in fast.iter().zip(&slow).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                    "{name}[{i}]: {a} vs {b}"
                );
            }
        }
        // Softmax rows shorter than a vector, of exactly one, and one more: the masked
        // tail alone, no tail, a one-lane tail; every row sums to one.
        for width in [1, 3, 8, 9] {
            let input = ramp(2 * width, -4.0, 6.0);
            let (mut fast, mut slow) = (input.clone(), input.clone());
            simd.softmax(&mut fast, width);
            Simd::Portable.softmax(&mut slow, width);
            for (i, (a, b)) in fast.iter().zip(&slow).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-6,
                    "softmax width {width} [{i}]: {a} vs {b}"
                );
            }
            for row in fast.chunks_exact(width) {
                let sum: f32 = row.iter().sum();
                assert!((sum - 1.0).abs() < 1e-5, "softmax width {width}: sum {sum}");
            }
        }
        let mut gelu_in = ramp(width, -5.0, 5.0);
        Simd::Portable.bias_gelu(&mut gelu_in, &vec![0.0; width]);
        for (x, got) in ramp(width, -5.0, 5.0).into_iter().zip(gelu_in) {
            let x = x as f64;
            let want = 0.5 * x * (1.0 + erf_exact(x / std::f64::consts::SQRT_2));
            assert!(
                (got as f64 - want).abs() < 1e-6,
                "gelu({x}) = {got}, want {want}"
            );
        }
    }
}
