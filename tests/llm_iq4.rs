//! IQ4_NL and IQ4_XS models, which candle 0.9.2 cannot run: a tiny F32 model
//! (`ragd::ml::llm::tiny`) quantized by llama.cpp's own `llama-quantize`, so the blocks
//! are real ggml ones. Each IQ4 tensor's decoding is checked against gguf-py's
//! `gguf.quants.dequantize`; then ragd's engine on the quantized file is compared with
//! candle's engine on the same model with every weight dequantized to F32 by ragd's
//! decoder. Skips, saying why, without `llama-quantize` (`$RAGD_LLAMA_QUANTIZE` or
//! `~/.cache/llama-bench/build/bin/llama-quantize`) or without a python with gguf
//! (`$RAGD_GGUF_PYTHON` or `~/.cache/ragd-bench/venv/bin/python`) for the decoding check.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use ragd::ml::llm::tiny::write_tiny_gguf_typed;
use ragd::ml::llm::{Arch, Backend, CpuOptions, KvType, LlmEngine};
use ragd::ml::quant::{formats, gguf, PackedMatrix, WeightType};

fn home_path(env: &str, rel: &str) -> Option<PathBuf> {
    std::env::var_os(env)
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(rel)))
}

fn llama_quantize() -> Option<PathBuf> {
    home_path(
        "RAGD_LLAMA_QUANTIZE",
        ".cache/llama-bench/build/bin/llama-quantize",
    )
    .filter(|p| p.is_file())
}

fn gguf_python() -> Option<PathBuf> {
    home_path("RAGD_GGUF_PYTHON", ".cache/ragd-bench/venv/bin/python").filter(|p| {
        Command::new(p)
            .args(["-c", "import gguf, numpy"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// A tensor: name, type, dims, its weights as f32 (decoded by ragd).
type Decoded = (String, WeightType, Vec<usize>, Vec<f32>);

/// The metadata (without ragd's type keys) and every tensor of `path`.
fn decode_all(path: &Path) -> (Vec<(String, Value)>, Vec<Decoded>) {
    let mut reader = BufReader::new(File::open(path).unwrap());
    let content = gguf::read_content(&mut reader).unwrap();
    let metadata = content
        .metadata
        .iter()
        .filter(|(k, _)| !k.starts_with(gguf::TYPE_KEY))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut tensors = Vec::new();
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    for name in names {
        let info = &content.tensor_infos[name];
        let ty = gguf::tensor_type(&content, name, info.ggml_dtype).unwrap();
        let dims = info.shape.dims().to_vec();
        let cols = *dims.last().unwrap();
        let rows = info.shape.elem_count() / cols;
        let mut bytes = vec![0u8; rows * formats::row_bytes(ty, cols)];
        reader
            .seek(SeekFrom::Start(content.tensor_data_offset + info.offset))
            .unwrap();
        reader.read_exact(&mut bytes).unwrap();
        let w: Vec<f32> = match ty {
            WeightType::F32 | WeightType::F16 | WeightType::BF16 => formats::row_to_f32(ty, &bytes),
            _ => {
                let m = PackedMatrix::from_gguf(ty, rows, cols, &bytes).unwrap();
                let mut all = vec![0f32; rows * cols];
                for (r, row) in all.chunks_exact_mut(cols).enumerate() {
                    m.dequantize_row(r, row);
                }
                all
            }
        };
        tensors.push((name.clone(), ty, dims, w));
    }
    (metadata, tensors)
}

/// gguf-py's dequantization of every tensor of `path` whose type is in `types`.
const PY: &str = r#"
import sys, numpy as np, gguf
r = gguf.GGUFReader(sys.argv[1])
for t in r.tensors:
    if t.tensor_type.name in sys.argv[3].split(","):
        gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).tofile(f"{sys.argv[2]}/{t.name}.f32")
"#;

#[test]
fn iq4_models_match_their_f32_dequantization_run_by_candle() {
    let Some(quantize) = llama_quantize() else {
        eprintln!("SKIPPED: llama-quantize not found (set RAGD_LLAMA_QUANTIZE)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f32_path = dir.path().join("tiny-f32.gguf");
    write_tiny_gguf_typed(&f32_path, Arch::Llama, WeightType::F32).unwrap();
    let python = gguf_python();
    if python.is_none() {
        eprintln!("no python with gguf: the decoding check against gguf-py is skipped");
    }
    for (ftype, ty) in [
        ("IQ4_XS", WeightType::IQ4_XS),
        ("IQ4_NL", WeightType::IQ4_NL),
    ] {
        let q_path = dir.path().join(format!("tiny-{ftype}.gguf"));
        let out = Command::new(&quantize)
            .arg("--allow-requantize")
            .arg(&f32_path)
            .arg(&q_path)
            .arg(ftype)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (metadata, tensors) = decode_all(&q_path);
        let n_iq4 = tensors.iter().filter(|t| t.1 == ty).count();
        assert!(n_iq4 >= 7, "{ftype}: only {n_iq4} tensors of that type");

        if let Some(python) = &python {
            let py_dir = dir.path().join(format!("py-{ftype}"));
            std::fs::create_dir_all(&py_dir).unwrap();
            let out = Command::new(python)
                .args(["-c", PY])
                .arg(&q_path)
                .arg(&py_dir)
                .arg(ftype)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            for (name, t, _, ours) in tensors.iter().filter(|t| t.1 == ty) {
                let theirs: Vec<f32> = std::fs::read(py_dir.join(format!("{name}.f32")))
                    .unwrap()
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                assert_eq!(ours, &theirs, "{} {name}", t.name());
            }
        }

        // The same model in F32, from ragd's decoding, run by candle.
        let ref_path = dir.path().join(format!("tiny-{ftype}-as-f32.gguf"));
        let qtensors: Vec<(String, QTensor)> = tensors
            .into_iter()
            .map(|(name, _, dims, w)| {
                let t = Tensor::from_vec(w, dims, &Device::Cpu).unwrap();
                (name, QTensor::quantize(&t, GgmlDType::F32).unwrap())
            })
            .collect();
        let md: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let ts: Vec<(&str, &QTensor)> = qtensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
        gguf_file::write(&mut File::create(&ref_path).unwrap(), &md, &ts).unwrap();

        let mut reference = LlmEngine::load(&ref_path, Backend::reference()).unwrap();
        let backend = Backend::Cpu {
            options: CpuOptions {
                threads: Some(2),
                tier: None,
                kv: KvType::F32,
            },
            prompt_cache_bytes: 0,
        };
        let mut ours = LlmEngine::load(&q_path, backend).unwrap();
        let vocab = ours.tokenizer().vocab_size();
        let ids: Vec<u32> = (0..23).map(|i| ((i * 7919 + 13) % vocab) as u32).collect();
        let want = reference.forward(&ids, 0).unwrap();
        let got = ours.forward(&ids, 0).unwrap();
        let num: f32 = got.iter().zip(&want).map(|(a, b)| (a - b) * (a - b)).sum();
        let den: f32 = want.iter().map(|b| b * b).sum();
        let e = (num / den).sqrt();
        let argmax = |v: &[f32]| {
            v.iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map(|(i, _)| i)
        };
        eprintln!("{ftype}: ragd vs candle on the F32 dequantization: relative L2 {e:.2e}");
        // ragd quantizes activations to int8 (as llama.cpp does); candle's F32 model
        // does not: a few 1e-3 apart, not more.
        assert!(e < 3e-2, "{ftype}: relative L2 {e}");
        assert_eq!(argmax(&got), argmax(&want), "{ftype}: greedy token");
    }
}
