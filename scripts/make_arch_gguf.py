#!/usr/bin/env python3
"""Writes random-weight GGUFs with the exact tensor layout and metadata of today's model
families, for comparing ragd's engine with llama.cpp (logits and speed) on identical bytes:

  qwen3-0.6b     arch qwen3: hidden 1024, 28 layers, 16 heads / 8 KV heads of 128 (explicit
                 head dimension), FFN 3072, vocab 151936, per-head q/k RMSNorm, tied output
  gemma3-1b      arch gemma3: hidden 1152, 26 layers, 4 heads / 1 KV head of 256, FFN 6912,
                 vocab 262144, q/k norms, post-attention and post-FFN norms, sliding window
                 512 (every 6th layer global), tied output
  phi3.5-mini    arch phi3: hidden 3072, 32 layers, 32 heads of 96, fused QKV and gate/up,
                 FFN 8192, vocab 32064, LongRoPE (rope_factors_long/short, original context
                 4096 of 131072, attention factor), separate output
  mistral-nemo   arch llama: hidden 5120, 40 layers, 32 heads / 8 KV heads of 128 (not
                 5120 / 32), FFN 14336, vocab 131072, separate output

The shapes come from each model's config.json; tensor names and metadata keys are the ones
llama.cpp's convert_hf_to_gguf.py writes. Weights are random (normal, std 0.02; norms near
1), so quality is meaningless but the arithmetic is the real model's. --layers and --vocab
cut a file down for tests (every layer keeps its real shape); the LongRoPE factors are
smooth stand-ins of the real ranges (short 1.0..2.8, long 1.08..64).

The file is written in F16 (or F32 / Q8_0); llama.cpp's llama-quantize turns it into the
real mixes (Q4_K_M, Q3_K_M, IQ4_XS, ...), as a downloaded file would be. A synthetic
SentencePiece-style vocabulary lets llama.cpp load it.

Usage: make_arch_gguf.py SHAPE OUT.gguf [--type f16|f32|q8_0] [--layers N] [--vocab N]
       [--seed N]            (needs: pip install gguf numpy)
"""
import argparse
import math

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

SHAPES = {
    "qwen3-0.6b": dict(arch="qwen3", vocab=151936, hidden=1024, layers=28, heads=16,
                       kv_heads=8, head_dim=128, ffn=3072, ctx=40960, rope_base=1e6,
                       eps=1e-6, tied=True),
    "gemma3-1b": dict(arch="gemma3", vocab=262144, hidden=1152, layers=26, heads=4,
                      kv_heads=1, head_dim=256, ffn=6912, ctx=32768, rope_base=1e6,
                      eps=1e-6, tied=True, window=512),
    "phi3.5-mini": dict(arch="phi3", vocab=32064, hidden=3072, layers=32, heads=32,
                        kv_heads=32, head_dim=96, ffn=8192, ctx=131072, rope_base=10000.0,
                        eps=1e-5, tied=False, original_ctx=4096),
    "mistral-nemo": dict(arch="llama", vocab=131072, hidden=5120, layers=40, heads=32,
                         kv_heads=8, head_dim=128, ffn=14336, ctx=1024000, rope_base=1e6,
                         eps=1e-5, tied=False),
}


def vocab(n):
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * 256
    i = 0
    while len(toks) < n:
        toks.append(f"\u2581tok{i}")
        types.append(gguf.TokenType.NORMAL)
        i += 1
    scores = [0.0] * 259 + [-float(j) for j in range(n - 259)]
    # llama.cpp looks this control token up by name in Phi-3 files (Phi's own vocabulary
    # has it at 32000).
    end = min(32000, n - 1)
    toks[end], types[end] = "<|endoftext|>", gguf.TokenType.CONTROL
    return toks, scores, [int(t) for t in types]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("out")
    ap.add_argument("--type", default="f16", choices=["f16", "f32", "q8_0"])
    ap.add_argument("--layers", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    s = dict(SHAPES[a.shape])
    if a.layers:
        s["layers"] = a.layers
    if a.vocab:
        s["vocab"] = a.vocab
    rng = np.random.default_rng(a.seed)
    arch, h, hd = s["arch"], s["hidden"], s["head_dim"]
    q_w, kv_w = s["heads"] * hd, s["kv_heads"] * hd
    w = gguf.GGUFWriter(a.out, arch, use_temp_file=False)
    cut = "" if (s["layers"], s["vocab"]) == (SHAPES[a.shape]["layers"], SHAPES[a.shape]["vocab"]) else \
        f", cut to {s['layers']} layers / vocab {s['vocab']}"
    w.add_name(f"random-weights {a.shape}-shaped{cut}")
    w.add_context_length(s["ctx"])
    w.add_embedding_length(h)
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["ffn"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(s["rope_base"])
    w.add_layer_norm_rms_eps(s["eps"])
    if "window" in s:
        w.add_sliding_window(s["window"])
    if "original_ctx" in s:
        scale = s["ctx"] / s["original_ctx"]
        w.add_rope_scaling_orig_ctx_len(s["original_ctx"])
        w.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(s["original_ctx"])))
    ftype = {"f16": gguf.LlamaFileType.MOSTLY_F16, "f32": gguf.LlamaFileType.ALL_F32,
             "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[a.type]
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    toks, scores, types = vocab(s["vocab"])
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)

    def mat(name, rows, cols):
        x = rng.standard_normal((rows, cols), dtype=np.float32) * 0.02
        if a.type == "f16":
            w.add_tensor(name, x.astype(np.float16))
        elif a.type == "f32":
            w.add_tensor(name, x)
        else:
            w.add_tensor(name, gguf.quants.quantize(x, QT.Q8_0), raw_dtype=QT.Q8_0)

    def norm(name, n):
        w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32))

    mat("token_embd.weight", s["vocab"], h)
    if arch == "phi3":
        half = hd // 2
        w.add_tensor("rope_factors_short.weight", np.geomspace(1.0, 2.8, half).astype(np.float32))
        w.add_tensor("rope_factors_long.weight", np.geomspace(1.08, 64.0, half).astype(np.float32))
    for i in range(s["layers"]):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight", h)
        if arch == "phi3":
            mat(p + "attn_qkv.weight", q_w + 2 * kv_w, h)
        else:
            mat(p + "attn_q.weight", q_w, h)
            mat(p + "attn_k.weight", kv_w, h)
            mat(p + "attn_v.weight", kv_w, h)
        if arch in ("qwen3", "gemma3"):
            norm(p + "attn_q_norm.weight", hd)
            norm(p + "attn_k_norm.weight", hd)
        mat(p + "attn_output.weight", h, q_w)
        if arch == "gemma3":
            norm(p + "post_attention_norm.weight", h)
        norm(p + "ffn_norm.weight", h)
        if arch == "phi3":
            mat(p + "ffn_up.weight", 2 * s["ffn"], h)
        else:
            mat(p + "ffn_gate.weight", s["ffn"], h)
            mat(p + "ffn_up.weight", s["ffn"], h)
        mat(p + "ffn_down.weight", h, s["ffn"])
        if arch == "gemma3":
            norm(p + "post_ffw_norm.weight", h)
    norm("output_norm.weight", h)
    if not s["tied"]:
        mat("output.weight", s["vocab"], h)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(a.out)


if __name__ == "__main__":
    main()
