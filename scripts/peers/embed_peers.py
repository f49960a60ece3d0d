"""The peers ragd's embedder is compared with, on the same passages and threads:
sentence-transformers + PyTorch, ONNX Runtime fp32 and ONNX Runtime int8 (dynamic
quantization, per-channel weights: what fastembed and Chroma ship). Prints one JSON
object per engine: median passages/s over the runs, and the int8 model's cosine to fp32.

Usage: embed_peers.py MODEL_DIR CACHE_DIR PASSAGES RUNS THREADS BATCH
The model is read from MODEL_DIR only (no hub); the ONNX exports are cached in CACHE_DIR.
"""
import json
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

model_dir, cache, n, runs, threads, batch = sys.argv[1:7]
n, runs, threads, batch = int(n), int(runs), int(threads), int(batch)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../shared/tools"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from passages import make_passages  # noqa: E402

torch.set_num_threads(threads)
passages = make_passages(n, seed=1234)
MAX_SEQ = 256


def timed(fn):
    fn(passages[:batch])  # warm-up
    rates = []
    for _ in range(runs):
        t = time.perf_counter()
        fn(passages)
        rates.append(n / (time.perf_counter() - t))
    return statistics.median(rates), rates


def report(engine, rates, **extra):
    print(json.dumps({"engine": engine, "passages_per_s": rates[0], "runs": rates[1], **extra}),
          flush=True)


# sentence-transformers + PyTorch: its own pipeline (length-sorted batches).
from sentence_transformers import SentenceTransformer  # noqa: E402

st = SentenceTransformer(model_dir, device="cpu")
st.max_seq_length = MAX_SEQ
report("sentence-transformers", timed(
    lambda ps: st.encode(ps, batch_size=batch, normalize_embeddings=True)))

# ONNX Runtime: the transformer exported once, tokenization, mean pooling and
# normalisation as sentence-transformers does them, batches sorted by length.
import onnxruntime as ort  # noqa: E402
from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: E402
from transformers import AutoModel, AutoTokenizer  # noqa: E402

os.makedirs(cache, exist_ok=True)
fp32_path = os.path.join(cache, "minilm-fp32.onnx")
int8_path = os.path.join(cache, "minilm-int8-per-channel.onnx")
tok = AutoTokenizer.from_pretrained(model_dir)
if not os.path.exists(fp32_path):
    class Encoder(torch.nn.Module):
        """The transformer with a fixed signature, as the export wants."""

        def __init__(self):
            super().__init__()
            self.bert = AutoModel.from_pretrained(model_dir).eval()

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    hf = Encoder().eval()
    sample = tok(["an example"], return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {k: {0: "batch", 1: "seq"} for k in names}
    axes["last_hidden_state"] = {0: "batch", 1: "seq"}
    torch.onnx.export(hf, tuple(sample[k] for k in names), fp32_path + ".part",
                      input_names=names, output_names=["last_hidden_state"],
                      dynamic_axes=axes, opset_version=17, dynamo=False)
    os.replace(fp32_path + ".part", fp32_path)
if not os.path.exists(int8_path):
    quantize_dynamic(fp32_path, int8_path + ".part", per_channel=True,
                     weight_type=QuantType.QInt8)
    os.replace(int8_path + ".part", int8_path)


def session(path):
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])


def ort_encoder(sess):
    def encode(ps):
        order = sorted(range(len(ps)), key=lambda i: len(ps[i]))
        out = [None] * len(ps)
        for s in range(0, len(ps), batch):
            idx = order[s:s + batch]
            enc = tok([ps[i] for i in idx], padding=True, truncation=True,
                      max_length=MAX_SEQ, return_tensors="np")
            feed = {k: enc[k].astype(np.int64) for k in
                    ("input_ids", "attention_mask", "token_type_ids")}
            h = sess.run(None, feed)[0]
            m = feed["attention_mask"][..., None].astype(np.float32)
            v = (h * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
            v /= np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)
            for j, i in enumerate(idx):
                out[i] = v[j]
        return np.stack(out)
    return encode


fp32 = ort_encoder(session(fp32_path))
int8 = ort_encoder(session(int8_path))
report("onnxruntime-fp32", timed(fp32))
a, b = fp32(passages[:200]), int8(passages[:200])
cos = (a * b).sum(1)
report("onnxruntime-int8", timed(int8), cosine_to_fp32_mean=float(cos.mean()),
       cosine_to_fp32_min=float(cos.min()))
