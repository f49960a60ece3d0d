#!/usr/bin/env bash
# The embedder against the peers, back to back in one run, on the peers' 2,000 passages
# (../shared/reference/peers.md: batch 32, max_seq 256, 2 threads): ragd's default path
# and its exact f32 path, sentence-transformers + PyTorch, ONNX Runtime fp32 and ONNX
# Runtime int8 (dynamic, per-channel). Prints passages/s (median of the runs), the
# ratios, and each ragd path's worst cosine to sentence-transformers' reference vectors;
# then the cross-encoder reranker's pairs/s. The peers run in a Python venv this script
# creates from PyPI, kept in $RAGD_BENCH_VENV (default ~/.cache/ragd-bench/venv).
# Usage: scripts/bench_embedder.sh [passages] [runs]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh >/dev/null
N="${1:-2000}"
RUNS="${2:-3}"
THREADS="${RAGD_BENCH_THREADS:-2}"
CACHE="${RAGD_BENCH_CACHE:-$HOME/.cache/ragd-bench}"
VENV="${RAGD_BENCH_VENV:-$CACHE/venv}"
PEERS=("sentence-transformers==6.2.0" "onnxruntime==1.31.1" "onnx==1.23.2" "onnxscript==0.7.2")

if ! "$VENV/bin/python" -c "import sentence_transformers, onnxruntime, onnx, onnxscript" 2>/dev/null; then
  echo "[bench] creating the peers' venv in $VENV (PyPI: ${PEERS[*]})" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet "${PEERS[@]}"
fi
cargo build --release --quiet --example embed_throughput --example rerank_throughput
export RAYON_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT

echo "load before: $(uptime)"
target/release/examples/embed_throughput "$N" "$RUNS" auto | tee -a "$out"
"$VENV/bin/python" scripts/peers/embed_peers.py models/all-MiniLM-L6-v2 "$CACHE/onnx" \
  "$N" "$RUNS" "$THREADS" 32 | tee -a "$out"
target/release/examples/embed_throughput "$N" "$RUNS" f32 | tee -a "$out"
echo "load after: $(uptime)"

python3 - "$out" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        rows[r["engine"]] = r
default = next(v for k, v in rows.items() if k.startswith("ragd-") and k != "ragd-f32")
exact = rows["ragd-f32"]
st, fp32, int8 = rows["sentence-transformers"], rows["onnxruntime-fp32"], rows["onnxruntime-int8"]
print()
print("| engine | passages/s | ragd default is | cosine |")
print("|---|---|---|---|")
for name, r, cos in [
    (f"ragd default ({default['engine'][5:]})", default, "worst %.6f to the reference" % default["worst_reference_cosine"]),
    ("ragd exact (f32)", exact, "worst %.6f to the reference" % exact["worst_reference_cosine"]),
    ("sentence-transformers + PyTorch", st, "(reference)"),
    ("ONNX Runtime fp32", fp32, ""),
    ("ONNX Runtime int8 (dynamic, per-channel)", int8, "mean %.4f, min %.4f to fp32" % (int8["cosine_to_fp32_mean"], int8["cosine_to_fp32_min"])),
]:
    print("| %s | %.1f | %.2fx | %s |" % (name, r["passages_per_s"], default["passages_per_s"] / r["passages_per_s"], cos))
checks = [
    ("default >= 1.2x ONNX Runtime int8", default["passages_per_s"] >= 1.2 * int8["passages_per_s"]),
    ("default >= 2x sentence-transformers", default["passages_per_s"] >= 2 * st["passages_per_s"]),
    ("default cosine >= 0.999 on every reference vector", default["worst_reference_cosine"] >= 0.999),
    ("f32 cosine >= 0.9999 on every reference vector", exact["worst_reference_cosine"] >= 0.9999),
]
print()
for name, ok in checks:
    print("%-55s %s" % (name, "ok" if ok else "NOT MET"))
PY

echo
echo "reranker (random weights of cross-encoder/ms-marco-MiniLM-L-6-v2's shape), one query x 100 passages of 100 words:"
target/release/examples/rerank_throughput "$RUNS"
