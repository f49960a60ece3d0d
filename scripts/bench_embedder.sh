#!/usr/bin/env bash
# The embedder against the peers, back to back in one run, on the peers' 2,000 passages
# (../shared/reference/peers.md: batch 32, max_seq 256, 2 threads): ragd's default path
# and its exact f32 path, sentence-transformers + PyTorch, ONNX Runtime fp32 and ONNX
# Runtime int8 (dynamic, per-channel), in rounds (each engine once per round). Prints
# passages/s (median of the rounds), the ratios (median of the rounds' ratios), and
# each ragd path's worst cosine to sentence-transformers' reference vectors; then the cross-encoder reranker's pairs/s. The peers run in a Python venv this script
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
# Rounds: each engine once per round, one after another, so a drift of the machine's
# speed (often +-15% within minutes on a shared host) falls on every engine alike. Each
# engine's figure is its median over the rounds; each ratio is the median of the rounds'
# ratios.
for round in $(seq 1 "$RUNS"); do
  echo "round $round of $RUNS"
  target/release/examples/embed_throughput "$N" 1 auto | tee -a "$out"
  "$VENV/bin/python" scripts/peers/embed_peers.py models/all-MiniLM-L6-v2 "$CACHE/onnx" \
    "$N" 1 "$THREADS" 32 | tee -a "$out"
  target/release/examples/embed_throughput "$N" 1 f32 | tee -a "$out"
done
echo "load after: $(uptime)"

python3 - "$out" <<'PY'
import json, statistics, sys
rounds = []  # one {engine: record} per round, in order
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        default_path = r["engine"].startswith("ragd-") and r["engine"] != "ragd-f32"
        if default_path:
            rounds.append({})  # the default path opens each round
        rounds[-1]["default" if default_path else r["engine"]] = r
def rate(name):
    return statistics.median(r[name]["passages_per_s"] for r in rounds)
def ratio(name):
    return statistics.median(r["default"]["passages_per_s"] / r[name]["passages_per_s"] for r in rounds)
def worst(name, key):
    return min(r[name][key] for r in rounds)
default, last = rounds[0]["default"], rounds[-1]
int8_last = last["onnxruntime-int8"]
print()
print("%d rounds; per round, passages/s:" % len(rounds))
for name in ["default", "ragd-f32", "sentence-transformers", "onnxruntime-fp32", "onnxruntime-int8"]:
    print("  %-24s %s" % (name, " / ".join("%.1f" % r[name]["passages_per_s"] for r in rounds)))
print()
print("| engine | passages/s (median) | ragd default is (median of the rounds' ratios) | cosine |")
print("|---|---|---|---|")
for label, name, cos in [
    (f"ragd default ({default['engine'][5:]})", "default", "worst %.6f to the reference" % worst("default", "worst_reference_cosine")),
    ("ragd exact (f32)", "ragd-f32", "worst %.6f to the reference" % worst("ragd-f32", "worst_reference_cosine")),
    ("sentence-transformers + PyTorch", "sentence-transformers", "(reference)"),
    ("ONNX Runtime fp32", "onnxruntime-fp32", ""),
    ("ONNX Runtime int8 (dynamic, per-channel)", "onnxruntime-int8", "mean %.4f, min %.4f to fp32" % (int8_last["cosine_to_fp32_mean"], int8_last["cosine_to_fp32_min"])),
]:
    print("| %s | %.1f | %.2fx | %s |" % (label, rate(name), ratio(name) if name != "default" else 1.0, cos))
checks = [
    ("default >= 1.2x ONNX Runtime int8", ratio("onnxruntime-int8") >= 1.2),
    ("default >= 2x sentence-transformers", ratio("sentence-transformers") >= 2),
    ("default cosine >= 0.999 on every reference vector", worst("default", "worst_reference_cosine") >= 0.999),
    ("f32 cosine >= 0.9999 on every reference vector", worst("ragd-f32", "worst_reference_cosine") >= 0.9999),
]
print()
for name, ok in checks:
    print("%-55s %s" % (name, "ok" if ok else "NOT MET"))
PY

echo
echo "reranker (random weights of cross-encoder/ms-marco-MiniLM-L-6-v2's shape), one query x 100 passages of 100 words:"
target/release/examples/rerank_throughput "$RUNS"
