//! Loads a quantized GGUF with candle: the architecture decides which of candle's
//! quantized model implementations reads the weights; the metadata gives the context
//! window and the model's name.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::{Device, Tensor};
use candle_transformers::models::{
    quantized_gemma3, quantized_llama, quantized_phi3, quantized_qwen2, quantized_qwen3,
};

use super::cpu::{CpuModel, CpuOptions};
use super::MlError;

/// The model families ragd runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// `llama` (Llama 2/3, Mistral, Mistral-Nemo, TinyLlama and other Llama-shaped models).
    Llama,
    /// `qwen2` (Qwen2, Qwen2.5).
    Qwen2,
    /// `qwen3` (Qwen3 dense models).
    Qwen3,
    /// `phi3` (Phi-3, Phi-3.5 mini, Phi-4).
    Phi3,
    /// `gemma3` (Gemma 3 text models).
    Gemma3,
}

impl Arch {
    /// The `general.architecture` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Phi3 => "phi3",
            Arch::Gemma3 => "gemma3",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "llama" => Some(Arch::Llama),
            "qwen2" => Some(Arch::Qwen2),
            "qwen3" => Some(Arch::Qwen3),
            "phi3" => Some(Arch::Phi3),
            "gemma3" => Some(Arch::Gemma3),
            _ => None,
        }
    }
}

/// What the rest of ragd needs to know about a loaded model.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    /// `general.name`, else the file's stem.
    pub name: String,
    /// The family (`general.architecture`: `llama`, `qwen2`, `qwen3`, `phi3`, `gemma3`), or `remote` for a
    /// model behind an inference server.
    pub family: String,
    /// Tokens the model can attend to (prompt and answer together).
    pub context_length: usize,
    /// Whether the model's own chat template shows tool definitions
    /// ([`Prompt::ToolChat`](super::Prompt::ToolChat) goes through it); otherwise they are
    /// described in the system message.
    pub template_tools: bool,
}

/// The weights of one of the supported families, in candle's models.
///
/// candle 0.9.2's Gemma 3 differs from the model (and from llama.cpp and ragd's engine):
/// its feed-forward gate is SiLU, not GELU; its window lets a query see the key exactly
/// `sliding_window` positions back (llama.cpp and Hugging Face hide it); decoding one
/// token applies no window at all; and a prompt after cached positions hides them all.
/// Its Qwen3 runs in f16 unless the file sets `general.dtype` to 0. Its Llama and Phi-3
/// read neither an explicit head dimension, a sliding window nor LongRoPE factors.
pub(super) enum Weights {
    Llama(quantized_llama::ModelWeights),
    Qwen2(quantized_qwen2::ModelWeights),
    Qwen3(quantized_qwen3::ModelWeights),
    Phi3(quantized_phi3::ModelWeights),
    Gemma3(quantized_gemma3::ModelWeights),
}

impl Weights {
    /// Runs `input` (shape `[1, n]`) from position `pos`; returns the last position's
    /// logits. Position 0 starts a new sequence (the KV cache is reset).
    pub(super) fn forward(&mut self, input: &Tensor, pos: usize) -> candle_core::Result<Tensor> {
        match self {
            Weights::Llama(m) => m.forward(input, pos),
            Weights::Qwen2(m) => m.forward(input, pos),
            Weights::Qwen3(m) => {
                // Its cache appends whatever the position; 0 starts a new sequence.
                if pos == 0 {
                    m.clear_kv_cache();
                }
                m.forward(input, pos)
            }
            Weights::Phi3(m) => m.forward(input, pos),
            Weights::Gemma3(m) => m.forward(input, pos),
        }
    }
}

/// A GGUF file's header, read once for the model and the tokenizer.
pub(super) struct GgufFile {
    pub(super) content: Content,
    reader: BufReader<File>,
    pub(super) arch: Arch,
}

impl GgufFile {
    /// Reads the header of `path`; fails with [`MlError::Load`] for a file that is not a
    /// GGUF or whose architecture ragd does not run.
    pub(super) fn open(path: &Path) -> Result<Self, MlError> {
        let file = File::open(path)
            .map_err(|e| MlError::Load(format!("cannot open {}: {e}", path.display())))?;
        let mut reader = BufReader::new(file);
        let content = crate::ml::quant::gguf::read_content(&mut reader).map_err(|e| {
            MlError::Load(format!("{} is not a readable GGUF: {e}", path.display()))
        })?;
        let arch_name = md_str(&content.metadata, "general.architecture").ok_or_else(|| {
            MlError::Load(format!("{} has no general.architecture", path.display()))
        })?;
        let arch = Arch::parse(arch_name).ok_or_else(|| {
            MlError::Load(format!(
                "{}: architecture {arch_name:?} is not supported (llama, qwen2, qwen3, phi3, gemma3 are)",
                path.display()
            ))
        })?;
        Ok(Self {
            content,
            reader,
            arch,
        })
    }

    /// The model's name and window.
    pub(super) fn info(&self, path: &Path) -> ModelInfo {
        let md = &self.content.metadata;
        let name = md_str(md, "general.name")
            .map(str::to_owned)
            .or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "llm".to_owned());
        let declared = md_u64(md, &format!("{}.context_length", self.arch.as_str()))
            .map(|v| v as usize)
            .unwrap_or(2048);
        // candle's Llama precomputes rotary tables for MAX_SEQ_LEN positions only.
        let context_length = match self.arch {
            Arch::Llama => declared.min(quantized_llama::MAX_SEQ_LEN),
            Arch::Gemma3 => declared.min(quantized_gemma3::MAX_SEQ_LEN),
            Arch::Qwen2 | Arch::Qwen3 | Arch::Phi3 => declared,
        };
        ModelInfo {
            name,
            family: self.arch.as_str().to_owned(),
            context_length,
            // Set once the tokenizer has read the template.
            template_tools: false,
        }
    }

    /// Reads and repacks the weights for ragd's CPU engine.
    pub(super) fn load_cpu(&mut self, options: CpuOptions) -> Result<CpuModel, MlError> {
        CpuModel::load(self.arch, &self.content, &mut self.reader, options)
    }

    /// Reads the weights onto `device` for ragd's candle engine.
    pub(super) fn load_candle(
        &mut self,
        device: &Device,
        kv: super::cpu::KvType,
    ) -> Result<super::candle::CandleModel, MlError> {
        super::candle::CandleModel::load(self.arch, &self.content, &mut self.reader, device, kv)
    }

    /// Reads the weights onto `device` for candle's models.
    pub(super) fn load_weights(self, device: &Device) -> Result<Weights, MlError> {
        let GgufFile {
            content,
            mut reader,
            arch,
        } = self;
        let loaded = match arch {
            Arch::Llama => quantized_llama::ModelWeights::from_gguf(content, &mut reader, device)
                .map(Weights::Llama),
            Arch::Qwen2 => quantized_qwen2::ModelWeights::from_gguf(content, &mut reader, device)
                .map(Weights::Qwen2),
            Arch::Qwen3 => quantized_qwen3::ModelWeights::from_gguf(content, &mut reader, device)
                .map(Weights::Qwen3),
            Arch::Phi3 => {
                quantized_phi3::ModelWeights::from_gguf(false, content, &mut reader, device)
                    .map(Weights::Phi3)
            }
            Arch::Gemma3 => quantized_gemma3::ModelWeights::from_gguf(content, &mut reader, device)
                .map(Weights::Gemma3),
        };
        loaded.map_err(|e| MlError::Load(format!("{} weights: {e}", arch.as_str())))
    }
}

/// A string value of the metadata.
pub(super) fn md_str<'a>(md: &'a HashMap<String, Value>, key: &str) -> Option<&'a str> {
    match md.get(key) {
        Some(Value::String(s)) => Some(s.as_str()),
        _ => None,
    }
}

/// An integer value of the metadata, whatever its width.
pub(super) fn md_u64(md: &HashMap<String, Value>, key: &str) -> Option<u64> {
    match md.get(key)? {
        Value::U8(v) => Some(u64::from(*v)),
        Value::U16(v) => Some(u64::from(*v)),
        Value::U32(v) => Some(u64::from(*v)),
        Value::U64(v) => Some(*v),
        Value::I8(v) => u64::try_from(*v).ok(),
        Value::I16(v) => u64::try_from(*v).ok(),
        Value::I32(v) => u64::try_from(*v).ok(),
        Value::I64(v) => u64::try_from(*v).ok(),
        _ => None,
    }
}

/// A boolean value of the metadata.
pub(super) fn md_bool(md: &HashMap<String, Value>, key: &str) -> Option<bool> {
    match md.get(key) {
        Some(Value::Bool(b)) => Some(*b),
        _ => None,
    }
}
