//! A BERT cross-encoder reranker (the ms-marco-MiniLM layout: BertForSequenceClassification
//! safetensors + tokenizer.json + config.json): each (query, passage) pair goes through
//! the transformer together; the pooled `[CLS]` state and the classifier give a logit,
//! reported as a probability (sigmoid), as sentence-transformers' CrossEncoder does.
//! On the CPU the transformer is the embedder's packed forward pass (pairs without
//! padding, the arithmetic chosen by `embed_precision`); on a GPU it is candle's.
//! The model runs on its own thread behind a bounded channel.

use std::path::Path;
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{linear, Linear, VarBuilder};
use candle_transformers::models::bert::Config as BertConfig;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};
use tokio::sync::oneshot;

use super::embedder::candle::CandleBert;
use super::embedder::cpu::{Arithmetic, CpuBert};
use super::{MlError, Precision};

pub mod remote;

/// A model that scores passages against a query: synchronous, driven by
/// [`RerankHandle`] on one thread. The local cross-encoder and a reranking server are
/// the two.
pub trait Reranker: Send + 'static {
    /// Relevance of each passage to `query`, 0-1, in input order.
    fn score(&self, query: &str, passages: &[String]) -> Result<Vec<f32>, MlError>;
}

impl Reranker for CrossEncoder {
    fn score(&self, query: &str, passages: &[String]) -> Result<Vec<f32>, MlError> {
        CrossEncoder::score(self, query, passages)
    }
}

/// Longest (query, passage) pair, in tokens.
const MAX_PAIR_TOKENS: usize = 512;
/// Pairs per forward pass (padded passes on a GPU).
const BATCH: usize = 16;
/// Pairs per packed CPU pass.
const CPU_BATCH: usize = 32;

/// Which forward pass runs the transformer.
enum Backend {
    /// The packed CPU pass, with the pooler and classifier in plain f32.
    Cpu {
        bert: CpuBert,
        /// `[hidden, hidden]` row-major (out × in) and its bias.
        pooler: (Vec<f32>, Vec<f32>),
        /// `[hidden]` and the bias.
        classifier: (Vec<f32>, f32),
    },
    /// ragd's BERT on candle's device, padded; the pooler and classifier in f32.
    Candle {
        bert: CandleBert,
        pooler: Linear,
        classifier: Linear,
    },
}

/// The loaded cross-encoder.
pub struct CrossEncoder {
    backend: Backend,
    tokenizer: Tokenizer,
}

fn flat(t: Tensor) -> Result<Vec<f32>, MlError> {
    Ok(t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?)
}

impl CrossEncoder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`, with the
    /// fastest arithmetic this CPU offers.
    pub fn load(dir: &Path, device: Device) -> Result<Self, MlError> {
        Self::load_with(dir, device, Precision::Auto)
    }

    /// As [`Self::load`], the CPU pass's arithmetic chosen by `precision`.
    pub fn load_with(dir: &Path, device: Device, precision: Precision) -> Result<Self, MlError> {
        Self::load_backend(dir, device, precision, false)
    }

    /// candle's padded f32 pass on the CPU: the reference the packed pass is compared with.
    pub fn load_reference(dir: &Path) -> Result<Self, MlError> {
        Self::load_backend(dir, Device::Cpu, Precision::F32, true)
    }

    /// As [`Self::load_with`]; `force_candle` runs candle's pass even on the CPU.
    fn load_backend(
        dir: &Path,
        device: Device,
        precision: Precision,
        force_candle: bool,
    ) -> Result<Self, MlError> {
        let config: BertConfig = serde_json::from_str(
            &std::fs::read_to_string(dir.join("config.json"))
                .map_err(|e| MlError::Load(format!("config.json: {e}")))?,
        )
        .map_err(|e| MlError::Load(format!("config.json: {e}")))?;
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| MlError::Load(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_PAIR_TOKENS,
                strategy: TruncationStrategy::OnlySecond,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| MlError::Load(format!("tokenizer: {e}")))?;
        let weights = dir.join("model.safetensors");
        let on_cpu = device.is_cpu() && !force_candle && CpuBert::supports(&config);
        if on_cpu && precision == Precision::F16 {
            return Err(MlError::Load(
                "embed_precision f16 runs on a GPU only; on the CPU use auto, f32, bf16, int8 \
                 or int16"
                    .into(),
            ));
        }
        // ragd's CPU pass converts from f32; candle's products run in the precision's
        // dtype on a GPU, in f32 on the CPU unless asked for otherwise.
        let dtype = if on_cpu || (device.is_cpu() && precision == Precision::Auto) {
            DType::F32
        } else {
            super::embedder::candle_dtype(&device, precision)?
        };
        // SAFETY: the weights file is memory-mapped read-only for the model's life.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], dtype, &device) }
            .map_err(|e| MlError::Load(format!("{}: {e}", weights.display())))?;
        let hidden = config.hidden_size;
        let backend = if on_cpu {
            let load = |e: MlError| MlError::Load(format!("cross-encoder weights: {e}"));
            let get = |shape: &[usize], name: &str| -> Result<Vec<f32>, MlError> {
                flat(vb.get(shape.to_vec(), name)?).map_err(load)
            };
            Backend::Cpu {
                bert: CpuBert::load(&vb, &config, Arithmetic::pick(precision)).map_err(load)?,
                pooler: (
                    get(&[hidden, hidden], "bert.pooler.dense.weight")?,
                    get(&[hidden], "bert.pooler.dense.bias")?,
                ),
                classifier: (
                    get(&[1, hidden], "classifier.weight")?,
                    get(&[1], "classifier.bias")?[0],
                ),
            }
        } else {
            let bert = CandleBert::load(vb.pp("bert"), &config)?;
            let f32vb = vb.to_dtype(DType::F32);
            let pooler = linear(hidden, hidden, f32vb.pp("bert.pooler.dense"))
                .map_err(|e| MlError::Load(format!("pooler: {e}")))?;
            let classifier = linear(hidden, 1, f32vb.pp("classifier"))
                .map_err(|e| MlError::Load(format!("classifier: {e}")))?;
            Backend::Candle {
                bert,
                pooler,
                classifier,
            }
        };
        Ok(Self { backend, tokenizer })
    }

    /// The arithmetic of the forward pass: `f32`, `bf16`, `int8`, `q8_0`, `int16`, or
    /// candle's `candle-f16`, `candle-bf16`, `candle-f32`.
    pub fn arithmetic(&self) -> &'static str {
        match &self.backend {
            Backend::Cpu { bert, .. } => bert.arithmetic().name(),
            Backend::Candle { bert, .. } => match bert.dtype_name() {
                "f16" => "candle-f16",
                "bf16" => "candle-bf16",
                _ => "candle-f32",
            },
        }
    }

    /// Relevance of each passage to `query`, 0-1, in input order.
    pub fn score(&self, query: &str, passages: &[String]) -> Result<Vec<f32>, MlError> {
        let batch = match self.backend {
            Backend::Cpu { .. } => CPU_BATCH,
            Backend::Candle { .. } => BATCH,
        };
        let mut out = Vec::with_capacity(passages.len());
        for group in passages.chunks(batch) {
            let pairs: Vec<(String, String)> = group
                .iter()
                .map(|p| (query.to_owned(), p.clone()))
                .collect();
            let enc = self
                .tokenizer
                .encode_batch(pairs, true)
                .map_err(|e| MlError::Inference(format!("tokenizer: {e}")))?;
            let logits = match &self.backend {
                Backend::Cpu {
                    bert,
                    pooler,
                    classifier,
                } => cpu_logits(bert, pooler, classifier, &enc)?,
                Backend::Candle {
                    bert,
                    pooler,
                    classifier,
                } => candle_logits(bert, pooler, classifier, &enc)?,
            };
            out.extend(logits.into_iter().map(|l| 1.0 / (1.0 + (-l).exp())));
        }
        Ok(out)
    }
}

/// The classifier's logit per pair through the packed CPU pass.
fn cpu_logits(
    bert: &CpuBert,
    (pw, pb): &(Vec<f32>, Vec<f32>),
    (cw, cb): &(Vec<f32>, f32),
    enc: &[tokenizers::Encoding],
) -> Result<Vec<f32>, MlError> {
    let ids: Vec<&[u32]> = enc.iter().map(|e| e.get_ids()).collect();
    let types: Vec<&[u32]> = enc.iter().map(|e| e.get_type_ids()).collect();
    let states = bert.cls_states(&ids, &types)?;
    Ok(states
        .iter()
        .map(|cls| {
            // pooled = tanh(W·cls + b); logit = c·pooled + cb. Small: plain loops.
            let pooled = pw
                .chunks_exact(cls.len())
                .zip(pb)
                .map(|(row, b)| (row.iter().zip(cls).map(|(w, x)| w * x).sum::<f32>() + b).tanh());
            pooled.zip(cw).map(|(p, w)| p * w).sum::<f32>() + cb
        })
        .collect())
}

/// The classifier's logit per pair through the padded pass on candle's device.
fn candle_logits(
    bert: &CandleBert,
    pooler: &Linear,
    classifier: &Linear,
    enc: &[tokenizers::Encoding],
) -> Result<Vec<f32>, MlError> {
    let ids: Vec<&[u32]> = enc.iter().map(|e| e.get_ids()).collect();
    let types: Vec<&[u32]> = enc.iter().map(|e| e.get_type_ids()).collect();
    // Contiguous `[n, hidden]`: the pooler's matmul on a GPU takes no strided view.
    let cls = bert.cls_states(&ids, &types)?;
    let pooled = pooler.forward(&cls)?.tanh()?;
    Ok(classifier.forward(&pooled)?.squeeze(1)?.to_vec1::<f32>()?)
}

type Reply = Result<Vec<f32>, MlError>;

struct Request {
    query: String,
    passages: Vec<String>,
    reply: oneshot::Sender<Reply>,
}

/// A cheap, cloneable handle to the reranker's thread.
#[derive(Clone)]
pub struct RerankHandle {
    tx: SyncSender<Request>,
    name: String,
}

impl RerankHandle {
    /// Moves `model` onto its own thread; at most `queue` requests wait.
    pub fn spawn<R: Reranker>(model: R, name: String, queue: usize) -> std::io::Result<Self> {
        let (tx, rx) = sync_channel::<Request>(queue.max(1));
        std::thread::Builder::new()
            .name("ragd-reranker".into())
            .spawn(move || {
                super::priority::lower_this_thread();
                while let Ok(req) = rx.recv() {
                    if req.reply.is_closed() {
                        continue;
                    }
                    let started = std::time::Instant::now();
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        Reranker::score(&model, &req.query, &req.passages)
                    }))
                    .unwrap_or_else(|_| Err(MlError::Inference("the reranker panicked".into())));
                    tracing::debug!(
                        pairs = req.passages.len(),
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "reranked"
                    );
                    let _ = req.reply.send(r);
                }
            })?;
        Ok(Self { tx, name })
    }

    /// Scores `passages` against `query` (0-1, input order); fails fast when busy.
    pub async fn score(&self, query: String, passages: Vec<String>) -> Reply {
        let (reply, rx) = oneshot::channel();
        match self.tx.try_send(Request {
            query,
            passages,
            reply,
        }) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => return Err(MlError::Overloaded),
            Err(TrySendError::Disconnected(_)) => return Err(MlError::WorkerGone),
        }
        rx.await.map_err(|_| MlError::WorkerGone)?
    }

    /// The model's folder name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Layer sizes of a random cross-encoder written by [`write_random_cross_encoder_shaped`].
#[derive(Debug, Clone, Copy)]
pub struct CrossEncoderShape {
    /// Hidden size.
    pub hidden: usize,
    /// Transformer layers.
    pub layers: usize,
    /// Attention heads (must divide `hidden`).
    pub heads: usize,
    /// Feed-forward size.
    pub intermediate: usize,
}

impl CrossEncoderShape {
    /// A tiny model for fast tests.
    pub const TINY: Self = Self {
        hidden: 32,
        layers: 2,
        heads: 2,
        intermediate: 64,
    };
    /// The shape of cross-encoder/ms-marco-MiniLM-L-6-v2, for benches.
    pub const MINILM_L6: Self = Self {
        hidden: 384,
        layers: 6,
        heads: 12,
        intermediate: 1536,
    };
}

/// Writes a cross-encoder with random weights in the real file layout (config.json,
/// model.safetensors; the tokenizer is copied from `tokenizer_json`): for tests and
/// benches of the real loading and inference code.
pub fn write_random_cross_encoder(dir: &Path, tokenizer_json: &Path) -> Result<(), MlError> {
    write_random_cross_encoder_shaped(dir, tokenizer_json, CrossEncoderShape::TINY)
}

/// [`write_random_cross_encoder`] with the given layer sizes (BERT uncased vocabulary).
pub fn write_random_cross_encoder_shaped(
    dir: &Path,
    tokenizer_json: &Path,
    shape: CrossEncoderShape,
) -> Result<(), MlError> {
    std::fs::create_dir_all(dir).map_err(|e| MlError::Load(e.to_string()))?;
    let config = serde_json::json!({
        "architectures": ["BertForSequenceClassification"], "model_type": "bert",
        "vocab_size": 30522, "hidden_size": shape.hidden,
        "num_hidden_layers": shape.layers, "num_attention_heads": shape.heads,
        "intermediate_size": shape.intermediate, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512, "type_vocab_size": 2,
        "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0, "num_labels": 1,
        "position_embedding_type": "absolute"
    });
    std::fs::write(dir.join("config.json"), config.to_string())
        .map_err(|e| MlError::Load(e.to_string()))?;
    std::fs::copy(tokenizer_json, dir.join("tokenizer.json"))
        .map_err(|e| MlError::Load(e.to_string()))?;
    let cfg: BertConfig =
        serde_json::from_value(config).map_err(|e| MlError::Load(e.to_string()))?;
    let varmap = candle_nn::VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    // Loading through a VarMap creates every tensor the model asks for, randomly initialised.
    candle_transformers::models::bert::BertModel::load(vb.pp("bert"), &cfg)?;
    linear(shape.hidden, shape.hidden, vb.pp("bert.pooler.dense"))?;
    linear(shape.hidden, 1, vb.pp("classifier"))?;
    reseed(&varmap)?;
    varmap.save(dir.join("model.safetensors"))?;
    Ok(())
}

/// Replaces the VarMap's random values (candle's CPU generator cannot be seeded) with
/// values from a fixed seed, drawn as candle initialises them: embeddings N(0, 1), linear
/// weights `[out, in]` N(0, 2/in), their biases uniform within ±1/√in; LayerNorm's
/// ones and zeros are kept. The same shape gives the same model every run,
/// so tests that compare paths on it do not pass or fail by chance.
fn reseed(varmap: &candle_nn::VarMap) -> Result<(), MlError> {
    let vars = varmap.data().lock().expect("varmap lock");
    let mut names: Vec<&String> = vars.keys().collect();
    names.sort();
    // splitmix64
    let mut state = 0x5eed_u64;
    let mut uniform = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    for name in names {
        if name.contains("LayerNorm") {
            continue;
        }
        let var = &vars[name];
        let count = var.elem_count();
        let fresh: Vec<f32> = if let [_, inp] = var.dims() {
            let std = if name.ends_with("embeddings.weight") {
                1.0
            } else {
                (2.0 / *inp as f64).sqrt()
            };
            (0..count)
                .map(|_| {
                    // Box-Muller
                    let (u, v) = (uniform().max(f64::MIN_POSITIVE), uniform());
                    let n = (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
                    (n * std) as f32
                })
                .collect()
        } else {
            // A bias: its weight's inputs.
            let inp = vars
                .get(&name.replace(".bias", ".weight"))
                .and_then(|w| w.dims().get(1).copied())
                .unwrap_or(1);
            let bound = 1.0 / (inp as f64).sqrt();
            (0..count)
                .map(|_| ((2.0 * uniform() - 1.0) * bound) as f32)
                .collect()
        };
        var.set(&Tensor::from_vec(fresh, var.shape(), &Device::Cpu)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer_json() -> std::path::PathBuf {
        std::env::var_os("RAGD_MODELS_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("models"))
            .join("all-MiniLM-L6-v2/tokenizer.json")
    }

    #[test]
    fn a_random_cross_encoder_is_the_same_every_time() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for dir in [&a, &b] {
            write_random_cross_encoder(dir.path(), &tokenizer_json())
                .expect("run scripts/setup.sh for the tokenizer");
        }
        // By name: the file's order of tensors follows a hash map's.
        let read = |d: &tempfile::TempDir| {
            candle_core::safetensors::load(d.path().join("model.safetensors"), &Device::Cpu)
                .unwrap()
        };
        let (x, y) = (read(&a), read(&b));
        assert!(x.len() > 10, "{} tensors", x.len());
        assert_eq!(x.len(), y.len());
        for (name, t) in &x {
            let values = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            assert!(
                values(t) == values(&y[name]),
                "{name} differs between two writes"
            );
        }
    }

    #[test]
    fn the_packed_cpu_pass_scores_as_candle_does() {
        let dir = tempfile::tempdir().unwrap();
        // 64 wide: the int8 path's blocks are 64 inputs, so it runs its own kernel.
        let shape = CrossEncoderShape {
            hidden: 64,
            layers: 2,
            heads: 2,
            intermediate: 128,
        };
        write_random_cross_encoder_shaped(dir.path(), &tokenizer_json(), shape)
            .expect("run scripts/setup.sh for the tokenizer");
        let load = |precision, candle| {
            CrossEncoder::load_backend(dir.path(), Device::Cpu, precision, candle).unwrap()
        };
        let reference = load(Precision::F32, true);
        assert_eq!(reference.arithmetic(), "candle-f32");
        let passages: Vec<String> = [
            "a short passage",
            "the pump seal must be replaced every two years or after a leak",
            "quarterly revenue grew while the cost of goods fell",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let want = reference
            .score("when is the pump seal replaced", &passages)
            .unwrap();
        // A tiny random model is the hardest case for rounding: bf16, int8 and int16 are
        // held to looser bounds than f32.
        for (precision, tolerance) in [
            (Precision::F32, 1e-5),
            (Precision::Bf16, 2e-2),
            (Precision::Int8, 2e-2),
            (Precision::Int16, 2e-2),
        ] {
            let fast = load(precision, false);
            assert!(!fast.arithmetic().starts_with("candle"));
            let got = fast
                .score("when is the pump seal replaced", &passages)
                .unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= tolerance,
                    "{}: {g} vs {w}",
                    fast.arithmetic()
                );
            }
        }
    }

    #[test]
    fn the_gpu_pass_in_f16_scores_as_f32_does() {
        // candle's device code path (the one a GPU runs), here on the CPU device: f16 and
        // bf16 products with f32 norms and softmax, several pairs of different lengths
        // (padding, and the pooler's multi-row input).
        let dir = tempfile::tempdir().unwrap();
        let shape = CrossEncoderShape {
            hidden: 64,
            layers: 2,
            heads: 2,
            intermediate: 128,
        };
        write_random_cross_encoder_shaped(dir.path(), &tokenizer_json(), shape)
            .expect("run scripts/setup.sh for the tokenizer");
        let load = |precision| {
            CrossEncoder::load_backend(dir.path(), Device::Cpu, precision, true).unwrap()
        };
        let passages: Vec<String> = [
            "a",
            "the pump seal must be replaced every two years or after a leak",
            "quarterly revenue grew while the cost of goods fell, and the board met twice",
            "seal",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let q = "when is the pump seal replaced";
        let want = load(Precision::F32).score(q, &passages).unwrap();
        // bf16 runs on GPUs only (candle's CPU pass has no bf16 products).
        let m = load(Precision::F16);
        assert_eq!(m.arithmetic(), "candle-f16");
        let got = m.score(q, &passages).unwrap();
        assert_eq!(got.len(), passages.len());
        for (g, w) in got.iter().zip(&want) {
            assert!(g.is_finite() && (g - w).abs() <= 2e-2, "f16: {g} vs {w}");
        }
        // One pair alone scores as it does in a batch (padding changes nothing).
        let alone = load(Precision::F32).score(q, &passages[1..2]).unwrap();
        assert!(
            (alone[0] - want[1]).abs() < 1e-5,
            "{} vs {}",
            alone[0],
            want[1]
        );
    }

    #[test]
    fn f16_is_refused_on_the_cpu_engine_and_int8_on_candle() {
        let dir = tempfile::tempdir().unwrap();
        write_random_cross_encoder(dir.path(), &tokenizer_json())
            .expect("run scripts/setup.sh for the tokenizer");
        let err = |precision, candle| match CrossEncoder::load_backend(
            dir.path(),
            Device::Cpu,
            precision,
            candle,
        ) {
            Ok(_) => panic!("{precision:?} (candle: {candle}) loaded"),
            Err(e) => e.to_string(),
        };
        assert!(err(Precision::F16, false).contains("runs on a GPU only"));
        assert!(err(Precision::Int8, true).contains("CPU engine only"));
        assert!(err(Precision::Int16, true).contains("CPU engine only"));
        assert!(err(Precision::Bf16, true).contains("no bf16 products"));
    }
}
