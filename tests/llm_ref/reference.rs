//! A plain-loop f32 forward pass of every family ragd runs, written from llama.cpp's
//! model graphs (llama.cpp, qwen3.cpp, phi3.cpp, gemma3.cpp) for the tests: every weight
//! dequantized to f32, every product a double loop, attention over every earlier token
//! with llama.cpp's sliding-window mask (a key `window` or more positions back is hidden).
//! Slow and obviously correct; it shares no code with ragd's engine.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::Device;

/// A dequantized model and the metadata its graph reads.
pub struct Reference {
    arch: String,
    md: HashMap<String, Value>,
    t: HashMap<String, Vec<f32>>,
    hidden: usize,
    heads: usize,
    kv_heads: usize,
    hd: usize,
    ffn: usize,
    layers: usize,
    eps: f32,
}

fn num(v: &Value) -> f32 {
    match v {
        Value::U32(x) => *x as f32,
        Value::U64(x) => *x as f32,
        Value::I32(x) => *x as f32,
        Value::F32(x) => *x,
        Value::F64(x) => *x as f32,
        other => panic!("not a number: {other:?}"),
    }
}

fn rms_norm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let ms = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let d = (ms + eps).sqrt();
    x.iter().zip(w).map(|(v, w)| v / d * w).collect()
}

/// `w` (rows of `x.len()` values) times `x`.
fn matvec(w: &[f32], x: &[f32]) -> Vec<f32> {
    w.chunks(x.len())
        .map(|r| r.iter().zip(x).map(|(a, b)| a * b).sum())
        .collect()
}

impl Reference {
    /// Reads every tensor of the GGUF at `path`.
    pub fn load(path: &Path) -> Self {
        let mut f = File::open(path).unwrap();
        let ct = Content::read(&mut f).unwrap();
        let mut t = HashMap::new();
        for name in ct.tensor_infos.keys() {
            let q = ct.tensor(&mut f, name, &Device::Cpu).unwrap();
            let v = q.dequantize(&Device::Cpu).unwrap();
            t.insert(
                name.clone(),
                v.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            );
        }
        let md = ct.metadata;
        let arch = match &md["general.architecture"] {
            Value::String(s) => s.clone(),
            _ => panic!("no architecture"),
        };
        let g = |k: &str| num(&md[&format!("{arch}.{k}")]);
        let (hidden, heads) = (
            g("embedding_length") as usize,
            g("attention.head_count") as usize,
        );
        let hd = md
            .get(&format!("{arch}.attention.key_length"))
            .map_or(hidden / heads, |v| num(v) as usize);
        Self {
            hidden,
            heads,
            kv_heads: g("attention.head_count_kv") as usize,
            hd,
            ffn: g("feed_forward_length") as usize,
            layers: g("block_count") as usize,
            eps: g("attention.layer_norm_rms_epsilon"),
            arch,
            md,
            t,
        }
    }

    fn key(&self, k: &str) -> Option<f32> {
        self.md.get(&format!("{}.{k}", self.arch)).map(num)
    }

    fn w(&self, name: &str) -> &[f32] {
        &self.t[name]
    }

    /// Whether layer `l` is windowed, and the window.
    fn window(&self, l: usize) -> Option<usize> {
        let w = self.key("attention.sliding_window")? as usize;
        match self.arch.as_str() {
            "llama" => Some(w),
            "gemma3" => {
                let n = self.key("attention.sliding_window_pattern").unwrap_or(6.0) as usize;
                (l % n < n - 1).then_some(w)
            }
            _ => None,
        }
    }

    /// Rotates `x` (one head) at position `p` as layer `l` does.
    fn rope(&self, l: usize, x: &mut [f32], p: usize) {
        let dim = self
            .key("rope.dimension_count")
            .map_or(self.hd, |v| v as usize);
        let mut base = self.key("rope.freq_base").unwrap_or(10_000.0);
        let mut pos = p as f32;
        let mut mscale = 1.0;
        let mut factors: Option<&[f32]> = self.t.get("rope_freqs.weight").map(Vec::as_slice);
        match self.arch.as_str() {
            "gemma3" if self.window(l).is_some() => {
                base = self.key("rope.freq_base_swa").unwrap_or(10_000.0);
            }
            "gemma3" => pos /= self.key("rope.scaling.factor").unwrap_or(1.0),
            "phi3" if self.t.contains_key("rope_factors_long.weight") => {
                let ctx = self.key("context_length").unwrap();
                let orig = self
                    .key("rope.scaling.original_context_length")
                    .unwrap_or(ctx);
                let which = if ctx > orig { "long" } else { "short" };
                factors = Some(self.w(&format!("rope_factors_{which}.weight")));
                mscale = self.key("rope.scaling.attn_factor").unwrap_or(1.0);
            }
            _ => {}
        }
        let neox = self.arch != "llama";
        for i in 0..dim / 2 {
            let mut theta = 1.0 / base.powf((2 * i) as f32 / dim as f32);
            if let Some(f) = factors {
                theta /= f[i];
            }
            let (s, c) = (pos * theta).sin_cos();
            let (a, b) = if neox {
                (i, i + dim / 2)
            } else {
                (2 * i, 2 * i + 1)
            };
            let (x0, x1) = (x[a], x[b]);
            x[a] = (x0 * c - x1 * s) * mscale;
            x[b] = (x0 * s + x1 * c) * mscale;
        }
    }

    /// The logits after every token of `ids` (run from position 0).
    pub fn forward(&self, ids: &[u32]) -> Vec<Vec<f32>> {
        let (h, hd, f) = (self.hidden, self.hd, self.ffn);
        let gemma = self.arch == "gemma3";
        let qk_norm = matches!(self.arch.as_str(), "qwen3" | "gemma3");
        let embed = self.w("token_embd.weight");
        let mut x: Vec<Vec<f32>> = ids
            .iter()
            .map(|&id| {
                let row = &embed[id as usize * h..(id as usize + 1) * h];
                let s = if gemma { (h as f32).sqrt() } else { 1.0 };
                row.iter().map(|v| v * s).collect()
            })
            .collect();
        let (qn, kvn) = (self.heads * hd, self.kv_heads * hd);
        let group = self.heads / self.kv_heads;
        for l in 0..self.layers {
            let p = |s: &str| format!("blk.{l}.{s}");
            let mut qs = Vec::new();
            let mut ks = Vec::new();
            let mut vs = Vec::new();
            for (pos, xt) in x.iter().enumerate() {
                let xn = rms_norm(xt, self.w(&p("attn_norm.weight")), self.eps);
                let qkv = if let Some(w) = self.t.get(&p("attn_qkv.weight")) {
                    matvec(w, &xn)
                } else {
                    let mut v = matvec(self.w(&p("attn_q.weight")), &xn);
                    v.extend(matvec(self.w(&p("attn_k.weight")), &xn));
                    v.extend(matvec(self.w(&p("attn_v.weight")), &xn));
                    v
                };
                let mut q = qkv[..qn].to_vec();
                let mut k = qkv[qn..qn + kvn].to_vec();
                let v = qkv[qn + kvn..].to_vec();
                for (buf, norm) in [
                    (&mut q, "attn_q_norm.weight"),
                    (&mut k, "attn_k_norm.weight"),
                ] {
                    for head in buf.chunks_mut(hd) {
                        if qk_norm {
                            let n = rms_norm(head, self.w(&p(norm)), self.eps);
                            head.copy_from_slice(&n);
                        }
                        self.rope(l, head, pos);
                    }
                }
                qs.push(q);
                ks.push(k);
                vs.push(v);
            }
            let scale = 1.0 / (hd as f32).sqrt();
            let window = self.window(l);
            for t in 0..x.len() {
                let mut att = vec![0f32; qn];
                for head in 0..self.heads {
                    let kvh = head / group;
                    let q = &qs[t][head * hd..(head + 1) * hd];
                    let seen: Vec<usize> = (0..=t)
                        .filter(|&j| window.is_none_or(|w| t - j < w))
                        .collect();
                    let scores: Vec<f32> = seen
                        .iter()
                        .map(|&j| {
                            let k = &ks[j][kvh * hd..(kvh + 1) * hd];
                            q.iter().zip(k).map(|(a, b)| a * b).sum::<f32>() * scale
                        })
                        .collect();
                    let m = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                    let e: Vec<f32> = scores.iter().map(|s| (s - m).exp()).collect();
                    let sum: f32 = e.iter().sum();
                    for (&j, w) in seen.iter().zip(&e) {
                        let v = &vs[j][kvh * hd..(kvh + 1) * hd];
                        for d in 0..hd {
                            att[head * hd + d] += w / sum * v[d];
                        }
                    }
                }
                let mut o = matvec(self.w(&p("attn_output.weight")), &att);
                if gemma {
                    o = rms_norm(&o, self.w(&p("post_attention_norm.weight")), self.eps);
                }
                for (a, b) in x[t].iter_mut().zip(&o) {
                    *a += b;
                }
                let xn = rms_norm(&x[t], self.w(&p("ffn_norm.weight")), self.eps);
                let (gate, up) = if self.t.contains_key(&p("ffn_gate.weight")) {
                    (
                        matvec(self.w(&p("ffn_gate.weight")), &xn),
                        matvec(self.w(&p("ffn_up.weight")), &xn),
                    )
                } else {
                    let gu = matvec(self.w(&p("ffn_up.weight")), &xn);
                    (gu[..f].to_vec(), gu[f..].to_vec())
                };
                let act: Vec<f32> = gate
                    .iter()
                    .zip(&up)
                    .map(|(&g, &u)| {
                        let a = if gemma {
                            let c = (2.0 / std::f32::consts::PI).sqrt();
                            0.5 * g * (1.0 + (c * (g + 0.044715 * g * g * g)).tanh())
                        } else {
                            g / (1.0 + (-g).exp())
                        };
                        a * u
                    })
                    .collect();
                let mut d = matvec(self.w(&p("ffn_down.weight")), &act);
                if gemma {
                    d = rms_norm(&d, self.w(&p("post_ffw_norm.weight")), self.eps);
                }
                for (a, b) in x[t].iter_mut().zip(&d) {
                    *a += b;
                }
            }
        }
        let out = self
            .t
            .get("output.weight")
            .unwrap_or_else(|| &self.t["token_embd.weight"]);
        x.iter()
            .map(|xt| matvec(out, &rms_norm(xt, self.w("output_norm.weight"), self.eps)))
            .collect()
    }
}
