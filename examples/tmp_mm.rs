use ragd::ml::quant::{self, Acts, PackedMatrix, Tier, WeightType};
use std::time::Instant;
fn main() {
    let tier = Tier::detect();
    let (rows, cols) = (3072usize, 576usize);
    let ty = match std::env::args().nth(1).as_deref() {
        Some("q8") => WeightType::Q8_0,
        _ => WeightType::Q4_1,
    };
    let nm: usize = std::env::args()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let mut seed = 1u64;
    let mut rnd = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
    };
    let w: Vec<f32> = (0..rows * cols).map(|_| rnd()).collect();
    let m0 = PackedMatrix::quantize(ty, rows, cols, &w).unwrap();
    let ms: Vec<PackedMatrix> = (0..nm)
        .map(|_| PackedMatrix::quantize(ty, rows, cols, &w).unwrap())
        .collect();
    for n in [1usize, 4, 8] {
        let x: Vec<f32> = (0..n * cols).map(|_| rnd()).collect();
        let mut a = Acts::new();
        a.quantize(tier, ty.act_kind(), &x, n, cols);
        let mut out = vec![0f32; n * rows];
        let mut cold = vec![];
        let mut hot = vec![];
        for _ in 0..9 {
            let t = Instant::now();
            for m in &ms {
                quant::matmul(tier, m, &a, &mut out, rows, 0..m.groups());
            }
            cold.push(t.elapsed().as_secs_f64() / nm as f64);
            let t = Instant::now();
            for _ in 0..nm {
                quant::matmul(tier, &m0, &a, &mut out, rows, 0..m0.groups());
            }
            hot.push(t.elapsed().as_secs_f64() / nm as f64);
        }
        cold.sort_by(f64::total_cmp);
        hot.sort_by(f64::total_cmp);
        let (c, h) = (cold[4], hot[4]);
        let bytes = m0.bytes() as f64;
        println!(
            "{:?} n={n}: cold {:.1} us ({:.1} GB/s)  hot {:.1} us",
            ty,
            c * 1e6,
            bytes / c / 1e9,
            h * 1e6
        );
    }
}
