#!/usr/bin/env python3
"""The measurements of scripts/gpu_check.sh against a running ragd (standard library
only, so it runs on a machine with nothing installed), plus the peer figure
(sentence-transformers' pooling with transformers in fp16 on the same GPU and model)
when torch sees a GPU. Prints one Markdown table; "no GPU" where a GPU step cannot run.

Usage: gpu_check.py BASE_URL EMBEDDER_DIR [--passages N] [--quick]
"""
import argparse
import concurrent.futures as cf
import io
import json
import random
import statistics
import time
import urllib.error
import urllib.request
import uuid

WORDS = (
    "pump seal valve pressure maintenance schedule annex report quarterly revenue cost "
    "board office staff manager city country policy refund shipping customer order "
    "invoice payment contract clause warranty repair engineer sensor reading alarm "
    "cooling water filter season inspection safety training document archive search"
).split()


def passages(n, words=90, seed=7):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        body = " ".join(rng.choice(WORDS) for _ in range(words))
        out.append(f"Passage {i}: {body}.")
    return out


def call(base, path, body=None, raw=None, ctype="application/json", timeout=600):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, data=data, method="POST" if data else "GET")
    if data is not None:
        req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


MODELS = {}


def stream_chat(base, messages, max_tokens):
    """(seconds to the first token, seconds in all, completion tokens) of a stream."""
    body = {"model": MODELS["chat"], "messages": messages, "max_tokens": max_tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    first, tokens = None, 0
    with urllib.request.urlopen(req, timeout=900) as r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("choices") and ev["choices"][0]["delta"].get("content") and first is None:
                first = time.perf_counter() - start
            if ev.get("usage"):
                tokens = ev["usage"]["completion_tokens"]
    return first or 0.0, time.perf_counter() - start, tokens


def multipart(files):
    boundary = uuid.uuid4().hex
    buf = io.BytesIO()
    for name, text in files:
        buf.write(f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; "
                  f"filename=\"{name}\"\r\nContent-Type: text/plain\r\n\r\n".encode())
        buf.write(text.encode() + b"\r\n")
    buf.write(f"--{boundary}--\r\n".encode())
    return buf.getvalue(), f"multipart/form-data; boundary={boundary}"


def peer_embedding_rate(model_dir, texts):
    """transformers fp16 with sentence-transformers' mean pooling, batch 32, on the GPU."""
    try:
        import torch
        from transformers import AutoModel, AutoTokenizer
    except ImportError:
        return None, "no GPU (torch is not installed)"
    if not torch.cuda.is_available():
        return None, "no GPU"
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir, torch_dtype=torch.float16).cuda().eval()

    def run(batch):
        enc = tok(batch, padding=True, truncation=True, max_length=256, return_tensors="pt").to("cuda")
        with torch.no_grad():
            out = model(**enc).last_hidden_state
            m = enc["attention_mask"].unsqueeze(-1).to(out.dtype)
            v = (out * m).sum(1) / m.sum(1).clamp(min=1e-9)
            torch.nn.functional.normalize(v.float(), dim=1).cpu()

    run(texts[:32])
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(0, len(texts), 32):
        run(texts[i:i + 32])
    torch.cuda.synchronize()
    return len(texts) / (time.perf_counter() - start), torch.cuda.get_device_name(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("embedder_dir")
    ap.add_argument("--passages", type=int, default=2000)
    ap.add_argument("--quick", action="store_true", help="smaller LLM runs (CPU)")
    ap.add_argument("--first-embed-s", type=float, default=None)
    a = ap.parse_args()
    base = a.base.rstrip("/")
    rows = []

    st, ready = call(base, "/api/v1/health/ready")
    ready = ready or {"components": []}
    devices = {c["name"]: f'{c.get("device", "-")} / {c.get("arithmetic", "-")}'
               for c in ready["components"] if c.get("device")}
    for name, where in devices.items():
        rows.append((f"{name}: device / arithmetic", where, ""))
    on_gpu = any("cuda" in w for w in devices.values())
    if a.first_embed_s is not None:
        rows.append(("first embedding request after ready (s)", f"{a.first_embed_s:.2f}",
                     "target <= 2 s" if on_gpu else "CPU"))

    st, listed = call(base, "/v1/models")
    for m in (listed or {}).get("data", []):
        MODELS.setdefault(m.get("kind"), m["id"])
    emb = MODELS.get("embedding")

    texts = passages(a.passages)
    # Embedding alone, through /v1/embeddings: batches of 32, 4 in flight.
    call(base, "/v1/embeddings", {"model": emb, "input": texts[:32]})
    start = time.perf_counter()
    with cf.ThreadPoolExecutor(4) as ex:
        list(ex.map(lambda i: call(base, "/v1/embeddings", {"model": emb, "input": texts[i:i + 32]}),
                    range(0, len(texts), 32)))
    embed_rate = len(texts) / (time.perf_counter() - start)
    rows.append(("ragd /v1/embeddings, passages/s", f"{embed_rate:,.0f}", ""))

    # Ingestion through /upload/bulk: one passage per file, 100 files per request, 2 in flight.
    files = [(f"p{i}.txt", t) for i, t in enumerate(texts)]
    start = time.perf_counter()

    def upload(i):
        raw, ctype = multipart(files[i:i + 100])
        return call(base, "/api/v1/upload/bulk", raw=raw, ctype=ctype)

    with cf.ThreadPoolExecutor(2) as ex:
        statuses = [s for s, _ in ex.map(upload, range(0, len(files), 100))]
    ingest_rate = len(files) / (time.perf_counter() - start)
    rows.append(("ragd /upload/bulk ingestion, passages/s", f"{ingest_rate:,.0f}",
                 f"statuses {sorted(set(statuses))}"))

    peer, peer_note = peer_embedding_rate(a.embedder_dir, texts)
    if peer is None:
        rows.append(("transformers fp16, ST pooling, batch 32, passages/s", peer_note, ""))
    else:
        rows.append(("transformers fp16, ST pooling, batch 32, passages/s", f"{peer:,.0f}", peer_note))
        rows.append(("ingestion / peer embedding-only", f"{ingest_rate / peer:.2f}x", "target >= 1.0x"))

    # Reranking: one query against 64 passages, 20 times.
    st, _ = call(base, "/v1/rerank", {"model": MODELS.get("rerank", "none"), "query": "pump seal maintenance", "documents": texts[:64]})
    if st == 200:
        start = time.perf_counter()
        for _ in range(20):
            call(base, "/v1/rerank", {"model": MODELS.get("rerank", "none"), "query": "pump seal maintenance", "documents": texts[:64]})
        rows.append(("ragd /v1/rerank, pairs/s", f"{20 * 64 / (time.perf_counter() - start):,.0f}", ""))
    else:
        rows.append(("ragd /v1/rerank", f"status {st}", "no reranker"))
    st, res = call(base, "/api/v1/search", {"query": "pump seal maintenance schedule", "top_k": 5})
    rows.append(("/search with rerank", f"status {st}", f"{len((res or {}).get('results', []))} hits"))

    # The LLM: pp512 (first token of a 512-token prompt, 1 generated), tg128 one stream,
    # 8 streams at once, and a ~6,500-token prompt with 128 generated.
    if "chat" not in MODELS:
        rows.append(("LLM", "none loaded", "no LLM"))
    else:
        word_prompt = lambda n: " ".join(random.Random(n).choice(WORDS) for _ in range(n))
        gen = 32 if a.quick else 128
        pp_words = 128 if a.quick else 480
        t_first, _, _ = stream_chat(base, [{"role": "user", "content": word_prompt(pp_words)}], 1)
        rows.append((f"LLM prompt of ~{pp_words + 20} tokens, first token (s)", f"{t_first:.3f}", ""))
        first, total, n = stream_chat(base, [{"role": "user", "content": "Tell a story."}], gen)
        one = (n - 1) / max(total - first, 1e-9)
        rows.append((f"LLM tg{gen}, one stream, tok/s", f"{one:,.1f}", f"{n} tokens"))
        streams = 8
        start = time.perf_counter()
        with cf.ThreadPoolExecutor(streams) as ex:
            res = list(ex.map(lambda i: stream_chat(base, [{"role": "user", "content": f"Story {i}."}], gen), range(streams)))
        agg = sum(r[2] for r in res) / (time.perf_counter() - start)
        rows.append((f"LLM tg{gen}, {streams} streams, aggregate tok/s", f"{agg:,.1f}",
                     f"{agg / one:.2f}x one stream (target >= 4x)"))
        long_words = 1500 if a.quick else 5000
        first, total, n = stream_chat(base, [{"role": "user", "content": word_prompt(long_words)}], gen)
        rows.append((f"LLM ~{int(long_words * 1.3)}-token prompt + {n} generated (s)", f"{total:.2f}",
                     "target <= 0.5 s on the GPU" if on_gpu else "CPU"))
    st, q = call(base, "/api/v1/query", {"question": "What does the maintenance schedule say about the pump seal?", "top_k": 5})
    rows.append(("/query end to end", f"status {st}",
                 f"{(q or {}).get('timing', {}).get('total', 0):.2f} s, mode {(q or {}).get('answer_mode', '?')}"))

    print("| measure | value | note |\n|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")


if __name__ == "__main__":
    main()
