"""How the embedder's products would fare at coarser integer arithmetic: the real
all-MiniLM-L6-v2 with its linear layers fake-quantized (as ragd's int16 path rounds them,
or u8 x i8 variants for AVX2's `vpmaddubsw`), scored by the worst cosine to the reference
vectors and to the f32 model over 300 of the peers' passages. Reproduces the
`vpmaddubsw` table in docs/embedder.md. Run with the peers' venv
(scripts/bench_embedder.sh creates it):
    ~/.cache/ragd-bench/venv/bin/python scripts/peers/quant_simulation.py
"""
import json
import os
import sys

import torch
from transformers import AutoModel, AutoTokenizer

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SHARED = os.path.join(ROOT, "..", "shared")
sys.path.insert(0, os.path.join(SHARED, "tools"))
from passages import make_passages  # noqa: E402

torch.set_num_threads(2)
MODEL = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")
tok = AutoTokenizer.from_pretrained(MODEL)
ref = json.load(open(os.path.join(SHARED, "reference", "minilm-embeddings.json")))
texts = [i["text"] for i in ref["items"]]
ref_vectors = torch.nn.functional.normalize(
    torch.tensor([i["embedding"] for i in ref["items"]]), dim=-1
)
passages = make_passages(300, seed=1234)


def symmetric(x, levels, dim):
    """Rounded to +-levels with one scale per slice along `dim`."""
    scale = x.abs().amax(dim=dim, keepdim=True).clamp_min(1e-12) / levels
    return (x / scale).round().clamp(-levels, levels) * scale


def u8_zero_point(x, dim):
    """u8 with a zero point over each slice's range including zero."""
    lo = x.amin(dim=dim, keepdim=True).clamp_max(0)
    hi = x.amax(dim=dim, keepdim=True).clamp_min(0)
    scale = ((hi - lo) / 255).clamp_min(1e-12)
    zero = (-lo / scale).round()
    return (((x / scale).round() + zero).clamp(0, 255) - zero) * scale


def blocks(f, x, size=64):
    return f(x.reshape(*x.shape[:-1], x.shape[-1] // size, size)).reshape(x.shape)


class FakeQuant(torch.nn.Module):
    def __init__(self, linear, mode):
        super().__init__()
        self.bias = linear.bias
        w = linear.weight.data  # [out, in]
        if mode == "int16":  # ragd's int16: per column and per row, sums fit an i32
            q = float(int(((2**31 - 1) / w.shape[1]) ** 0.5))
            self.w, self.act = symmetric(w, q, 1), lambda x: symmetric(x, q, -1)
        elif mode == "u8s7":
            self.w, self.act = symmetric(w, 63, 1), lambda x: u8_zero_point(x, -1)
        elif mode == "u8s8":  # pair saturation ignored
            self.w, self.act = symmetric(w, 127, 1), lambda x: u8_zero_point(x, -1)
        elif mode == "u8s7b64":
            self.w = blocks(lambda v: symmetric(v, 63, -1), w)
            self.act = lambda x: blocks(lambda v: u8_zero_point(v, -1), x)
        else:
            raise ValueError(mode)

    def forward(self, x):
        return torch.nn.functional.linear(self.act(x), self.w, self.bias)


def build(modes):
    """`modes`: layer kind (q k v o f1 f2) -> arithmetic, "rest" for the others."""
    model = AutoModel.from_pretrained(MODEL).eval()
    for layer in model.encoder.layer:
        linears = {
            "q": (layer.attention.self, "query"),
            "k": (layer.attention.self, "key"),
            "v": (layer.attention.self, "value"),
            "o": (layer.attention.output, "dense"),
            "f1": (layer.intermediate, "dense"),
            "f2": (layer.output, "dense"),
        }
        for kind, (parent, attr) in linears.items():
            mode = modes.get(kind, modes["rest"])
            if mode != "f32":
                setattr(parent, attr, FakeQuant(getattr(parent, attr), mode))
    return model


@torch.no_grad()
def embed(model, xs):
    out = []
    for i in range(0, len(xs), 32):
        b = tok(xs[i : i + 32], padding=True, truncation=True, max_length=256, return_tensors="pt")
        h = model(**b).last_hidden_state
        mask = b["attention_mask"].unsqueeze(-1).float()
        out.append(torch.nn.functional.normalize((h * mask).sum(1) / mask.sum(1), dim=-1))
    return torch.cat(out)


exact = embed(build({"rest": "f32"}), passages)
for name, modes in [
    ("int16 everywhere", {"rest": "int16"}),
    ("second FFN u8 x 7-bit, per row/column", {"rest": "int16", "f2": "u8s7"}),
    ("both FFN u8 x 7-bit, per row/column", {"rest": "int16", "f1": "u8s7", "f2": "u8s7"}),
    ("second FFN u8 x 8-bit (no saturation)", {"rest": "int16", "f2": "u8s8"}),
    ("second FFN u8 x 7-bit, blocks of 64", {"rest": "int16", "f2": "u8s7b64"}),
    ("both FFN u8 x 7-bit, blocks of 64", {"rest": "int16", "f1": "u8s7b64", "f2": "u8s7b64"}),
]:
    model = build(modes)
    to_ref = (embed(model, texts) * ref_vectors).sum(-1)
    to_f32 = (embed(model, passages) * exact).sum(-1)
    print(
        f"{name:40s} worst to the reference {to_ref.min():.6f}; "
        f"passages to f32: worst {to_f32.min():.6f}, mean {to_f32.mean():.6f}",
        flush=True,
    )
