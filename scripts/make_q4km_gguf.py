#!/usr/bin/env python3
"""Writes a random-weight GGUF of Qwen2.5-0.5B's exact shape with the tensor types that
llama.cpp's Q4_K_M quantization gives that model, for speed comparisons on identical bytes.

Qwen2.5-0.5B's width (896) is not a multiple of 256, so llama.cpp cannot store the
matrices that read it as K-quants and falls back: Q4_K -> Q5_0, Q6_K -> Q8_0. Per llama.cpp's
rules for Q4_K_M the file then holds:
  token_embd (tied output layer)      Q6_K -> Q8_0
  attn_q, attn_k, attn_output         Q4_K -> Q5_0
  attn_v                              Q6_K -> Q8_0 on the "more bits" layers, else Q5_0
  ffn_gate, ffn_up                    Q4_K -> Q5_0
  ffn_down (rows of 4864 = 19 x 256)  Q6_K on the "more bits" layers, else Q4_K
Weights are random (quality is meaningless; the bytes streamed and the kernels run are a
real file's). A synthetic SentencePiece-style vocabulary lets llama.cpp load the file.

Usage: make_q4km_gguf.py OUT.gguf [--seed N] [--layers N]   (needs: pip install gguf numpy)
"""
import argparse

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

VOCAB, EMBD, LAYERS, HEADS, KV_HEADS, FF = 151936, 896, 24, 14, 2, 4864


def more_bits(i, n):
    """llama.cpp's use_more_bits: the layers that get more bits in Q4_K_M."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def kquant(rng, rows, cols, t):
    """Random K-quant blocks with small positive scales."""
    nb = cols // 256
    half = lambda v: np.frombuffer(np.float16(v).tobytes(), np.uint8)
    if t == QT.Q4_K:  # d, dmin, scales[12], qs[128]
        b = rng.integers(0, 256, size=(rows, nb, 144), dtype=np.uint8)
        b[:, :, 0:2] = half(2e-5)
        b[:, :, 2:4] = half(2e-5)
    else:  # Q6_K: ql[128], qh[64], scales[16] (i8), d
        b = rng.integers(0, 256, size=(rows, nb, 210), dtype=np.uint8)
        b[:, :, 192:208] = rng.integers(1, 16, size=(rows, nb, 16), dtype=np.uint8)
        b[:, :, 208:210] = half(4e-5)
    return b.reshape(rows, nb * b.shape[2])


def vocab(n):
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    i = 0
    while len(toks) < n:
        toks.append(f"\u2581tok{i}")
        types.append(gguf.TokenType.NORMAL)
        i += 1
    scores = [0.0] * 259 + [-float(j) for j in range(n - 259)]
    return toks, scores, [int(t) for t in types]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=LAYERS)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    w = gguf.GGUFWriter(a.out, "qwen2", use_temp_file=False)
    w.add_name("random-weights qwen2.5-0.5b-shaped (Q4_K_M with fallbacks)")
    w.add_context_length(32768)
    w.add_embedding_length(EMBD)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(1_000_000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    toks, scores, types = vocab(VOCAB)
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(False)
    counts = {}

    def mat(name, rows, cols, t):
        if t in (QT.Q4_K, QT.Q6_K):
            q = kquant(rng, rows, cols, t)
        else:
            q = gguf.quants.quantize(rng.standard_normal((rows, cols), dtype=np.float32) * 0.02, t)
        w.add_tensor(name, q, raw_dtype=t)
        counts[t.name] = counts.get(t.name, 0) + 1

    def vec(name, n, fill):
        w.add_tensor(name, np.full((n,), fill, dtype=np.float32))

    kv = EMBD // HEADS * KV_HEADS
    mat("token_embd.weight", VOCAB, EMBD, QT.Q8_0)
    for i in range(a.layers):
        p, more = f"blk.{i}.", more_bits(i, a.layers)
        vec(p + "attn_norm.weight", EMBD, 1.0)
        mat(p + "attn_q.weight", EMBD, EMBD, QT.Q5_0)
        vec(p + "attn_q.bias", EMBD, 0.0)
        mat(p + "attn_k.weight", kv, EMBD, QT.Q5_0)
        vec(p + "attn_k.bias", kv, 0.0)
        mat(p + "attn_v.weight", kv, EMBD, QT.Q8_0 if more else QT.Q5_0)
        vec(p + "attn_v.bias", kv, 0.0)
        mat(p + "attn_output.weight", EMBD, EMBD, QT.Q5_0)
        vec(p + "ffn_norm.weight", EMBD, 1.0)
        mat(p + "ffn_gate.weight", FF, EMBD, QT.Q5_0)
        mat(p + "ffn_up.weight", FF, EMBD, QT.Q5_0)
        mat(p + "ffn_down.weight", EMBD, FF, QT.Q6_K if more else QT.Q4_K)
    vec("output_norm.weight", EMBD, 1.0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(a.out, ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
