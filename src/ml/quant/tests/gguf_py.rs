//! The new types (Q2_K, Q3_K, IQ4_NL, IQ4_XS) against references outside candle: the
//! scalar kernel against the float product of the dequantized weights and activations,
//! and decoding against gguf-py's `gguf.quants.dequantize` (the python package is found in
//! `$RAGD_GGUF_PYTHON` or the bench venv, `~/.cache/ragd-bench/venv`; without it the test
//! says so and skips).

use std::path::PathBuf;
use std::process::Command;

use super::super::*;
use super::{random_bytes, rel_l2, run_tier, Rng};

const NEW: [WeightType; 4] = [
    WeightType::Q2K,
    WeightType::Q3K,
    WeightType::IQ4_NL,
    WeightType::IQ4_XS,
];

#[test]
fn scalar_kernel_matches_the_dequantized_product() {
    let mut rng = Rng(11);
    for ty in NEW {
        let (rows, cols, tokens) = (19, 768, 3);
        let packed =
            PackedMatrix::from_gguf(ty, rows, cols, &random_bytes(ty, rows, cols, &mut rng))
                .unwrap();
        let x = rng.vec(tokens * cols, 1.0);
        let ours = run_tier(Tier::Scalar, &packed, &x, tokens);
        // The same product in f64 from the dequantized weights and activations.
        let mut acts = Acts::new();
        acts.quantize(Tier::Scalar, ty.act_kind(), &x, tokens, cols);
        let block = if ty.act_kind() == ActKind::Q8 {
            32
        } else {
            256
        };
        let mut want = vec![0f32; tokens * rows];
        let mut w = vec![0f32; cols];
        for r in 0..rows {
            packed.dequantize_row(r, &mut w);
            for t in 0..tokens {
                let s: f64 = (0..cols)
                    .map(|k| {
                        let xk = f64::from(acts.qs[t * cols + k])
                            * f64::from(acts.d[(t * cols + k) / block]);
                        f64::from(w[k]) * xk
                    })
                    .sum();
                want[t * rows + r] = s as f32;
            }
        }
        let e = rel_l2(&ours, &want);
        assert!(e < 1e-5, "{}: relative L2 {e}", ty.name());
    }
}

/// The python with gguf and numpy, if there is one.
fn gguf_python() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("RAGD_GGUF_PYTHON").map(PathBuf::from),
        std::env::var_os("HOME")
            .map(|h| PathBuf::from(h).join(".cache/ragd-bench/venv/bin/python")),
    ];
    candidates.into_iter().flatten().find(|p| {
        Command::new(p)
            .args(["-c", "import gguf, numpy"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

const DEQUANTIZE: &str = r#"
import sys, numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize
src, ty, rows, dst = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
raw = np.fromfile(src, dtype=np.uint8).reshape(rows, -1)
dequantize(raw, T[ty]).astype(np.float32).tofile(dst)
"#;

#[test]
fn decoding_matches_gguf_py() {
    let Some(python) = gguf_python() else {
        eprintln!("SKIPPED: no python with gguf and numpy (set RAGD_GGUF_PYTHON or run scripts/bench_llm.sh once)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(12);
    for ty in NEW {
        let (rows, cols) = (21, 512);
        let bytes = random_bytes(ty, rows, cols, &mut rng);
        let (src, dst) = (dir.path().join("in.bin"), dir.path().join("out.bin"));
        std::fs::write(&src, &bytes).unwrap();
        let out = Command::new(&python)
            .arg("-c")
            .arg(DEQUANTIZE)
            .arg(&src)
            .arg(ty.name())
            .arg(rows.to_string())
            .arg(&dst)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let theirs: Vec<f32> = std::fs::read(&dst)
            .unwrap()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(theirs.len(), rows * cols);
        let packed = PackedMatrix::from_gguf(ty, rows, cols, &bytes).unwrap();
        let mut row = vec![0f32; cols];
        for r in 0..rows {
            packed.dequantize_row(r, &mut row);
            assert_eq!(
                &row[..],
                &theirs[r * cols..(r + 1) * cols],
                "{} row {r}",
                ty.name()
            );
        }
    }
}
