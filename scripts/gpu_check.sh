#!/usr/bin/env bash
# One prepared run of ragd on an NVIDIA GPU, sized for the device tool (one command of at
# most 10 minutes; at most 64 MiB travels with the working tree), printing one table:
# where each model runs, embedding passages/s through ragd against transformers fp16 with
# sentence-transformers' pooling on the same GPU and model, /upload/bulk ingestion,
# reranker pairs/s, LLM prompt and decode rates (one stream and eight), a ~6,500-token
# prompt with 128 generated, and search with rerank and /query end to end.
#
#   scripts/gpu_check.sh pack        here: build (scripts/build_cuda.sh) or take $RAGD_CUDA_BIN,
#                                    and put in target-gpu-check/ the xz-compressed binary,
#                                    the libraries it needs that are not the C runtime or CUDA's,
#                                    the embedder's tokenizer and configs, the gguf wheel and the
#                                    random-GGUF tool. Carry target-gpu-check to the GPU machine.
#   scripts/gpu_check.sh run         there: unpack, generate random-weight models of the real
#                                    shapes (all-MiniLM-L6-v2 and its cross-encoder with
#                                    transformers, a Qwen2.5-0.5B-shaped Q4_0 GGUF), start
#                                    `ragd serve --device cuda`, measure, stop.
#   scripts/gpu_check.sh run --cpu   the same on this machine's CPU build (target/release/ragd
#                                    or $RAGD_BIN) with the installed models and SmolLM2; the
#                                    GPU-only rows say "no GPU". Proves the script end to end.
#
# The CUDA 13 runtime libraries on the GPU machine are under
# /usr/local/cuda-13.0/targets/x86_64-linux/lib (override with $CUDA_LIB); LD_LIBRARY_PATH is
# set for ragd alone (carried libraries would break the machine's own tools).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
PACK="$ROOT/target-gpu-check"
mode="${1:-}"
shift || true

log() { printf '[gpu_check] %s\n' "$*" >&2; }

pack() {
  rm -rf "$PACK" && mkdir -p "$PACK/lib" "$PACK/minilm/1_Pooling" "$PACK/wheels"
  local bin="${RAGD_CUDA_BIN:-}"
  if [ -z "$bin" ]; then bin="$(scripts/build_cuda.sh | tail -1)"; fi
  log "packing $bin"
  cp "$bin" "$PACK/ragd" && strip "$PACK/ragd" && xz -T0 -6 -f "$PACK/ragd"
  # Every library ragd loads except the C/C++ runtime, the driver and CUDA's own.
  ldd "$bin" | awk '/=> \//{print $1" "$3}' | while read -r name path; do
    case "$name" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libgcc_s.so*|libstdc++.so*|ld-linux*) ;;
      libcuda.so*|libcudart.so*|libcublas*|libcurand.so*|libnvrtc*) ;;
      *) cp -L "$path" "$PACK/lib/$name" ;;
    esac
  done
  tar -C "$PACK" -cJf "$PACK/lib.tar.xz" lib && rm -rf "$PACK/lib"
  local m="$ROOT/models/all-MiniLM-L6-v2"
  cp "$m"/{config.json,tokenizer.json,tokenizer_config.json,special_tokens_map.json,vocab.txt,sentence_bert_config.json,modules.json} "$PACK/minilm/"
  cp "$m/1_Pooling/config.json" "$PACK/minilm/1_Pooling/"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$PACK/wheels" "gguf==0.19.0" >&2
  cp "$ROOT/../shared/tools/make_random_gguf.py" "$PACK/"
  du -sh "$PACK" >&2
  log "carry target-gpu-check (at most 64 MiB): $(du -sm "$PACK" | cut -f1) MiB"
}

# Waits for ragd at $1 to be ready; fails after $2 seconds.
wait_ready() {
  local base="$1" limit="$2" t=0
  until curl -sf "$base/api/v1/health/ready" >/dev/null 2>&1; do
    sleep 0.5; t=$((t + 1))
    if [ "$t" -ge $((limit * 2)) ]; then log "ragd was not ready within ${limit}s"; return 1; fi
  done
}

run() {
  local cpu=0
  [ "${1:-}" = "--cpu" ] && cpu=1
  local bin models embedder llm device extra_lib=""
  work="$(mktemp -d)"
  trap 'kill "${pid:-0}" 2>/dev/null || true; rm -rf "${work:-/nonexistent}"' EXIT
  if [ "$cpu" = 1 ]; then
    bin="${RAGD_BIN:-$ROOT/target/release/ragd}"
    [ -x "$bin" ] || cargo build --release --quiet --bin ragd
    models="$ROOT/models"; embedder="all-MiniLM-L6-v2"
    llm="$models/SmolLM2-135M-Instruct.Q4_1.gguf"; device=auto
  else
    [ -d "$PACK" ] || { log "no $PACK: run 'scripts/gpu_check.sh pack' where the binary was built"; exit 1; }
    xz -dc "$PACK/ragd.xz" >"$work/ragd" && chmod +x "$work/ragd" && bin="$work/ragd"
    tar -C "$work" -xJf "$PACK/lib.tar.xz"
    extra_lib="$work/lib:${CUDA_LIB:-/usr/local/cuda-13.0/targets/x86_64-linux/lib}"
    models="$work/models"; mkdir -p "$models"
    # The gguf wheel beside the machine's own Python packages (torch, transformers, numpy),
    # whatever environment that Python is.
    python3 -m pip install --quiet --no-index --no-deps --target "$work/pylib" "$PACK"/wheels/*.whl >&2
    log "random-weight models of the real shapes"
    python3 - "$PACK/minilm" "$models" <<'PY'
import os, shutil, sys
from transformers import BertConfig, BertForSequenceClassification, BertModel
src, out = sys.argv[1], sys.argv[2]
def copy_tokenizer(d):
    for f in os.listdir(src):
        p = os.path.join(src, f)
        if f != "config.json":
            (shutil.copytree if os.path.isdir(p) else shutil.copy)(p, os.path.join(d, f))
cfg = BertConfig.from_json_file(os.path.join(src, "config.json"))
d = os.path.join(out, "minilm-random")
BertModel(cfg).save_pretrained(d, safe_serialization=True)
copy_tokenizer(d)
cfg = BertConfig.from_json_file(os.path.join(src, "config.json"))
cfg.num_labels = 1
d = os.path.join(out, "reranker-random")
BertForSequenceClassification(cfg).save_pretrained(d, safe_serialization=True)
copy_tokenizer(d)
PY
    PYTHONPATH="$work/pylib" python3 "$PACK/make_random_gguf.py" --quant q4_0 --out-dir "$models" >&2
    embedder="minilm-random"; llm="$(ls "$models"/*q4_0*.gguf | head -1)"; device=cuda
  fi
  local port=18931 base
  base="http://127.0.0.1:$port"
  log "starting ragd ($device) on $base"
  env ${extra_lib:+LD_LIBRARY_PATH="$extra_lib"} RAGD_DEVICE="$device" RAGD_PORT="$port" \
    RAGD_DATA_DIR="$work/data" RAGD_MODELS_DIR="$models" RAGD_EMBEDDING_MODEL="$embedder" \
    RAGD_RERANKER_MODEL="${RAGD_RERANKER_MODEL:-reranker-random}" RAGD_LLM_MODEL="$llm" \
    RAGD_MAX_BULK_FILES=100 RUST_LOG="${RUST_LOG:-info}" \
    "$bin" serve >"$work/ragd.log" 2>&1 &
  pid=$!
  local started=$SECONDS
  if ! wait_ready "$base" 300; then tail -30 "$work/ragd.log" >&2; exit 1; fi
  log "ready after $((SECONDS - started)) s"
  grep -E "models (placed|run on the CPU)|embedder loaded|reranker loaded|LLM loaded|engine ready" "$work/ragd.log" | cut -c1-300 >&2 || true
  local t0 t1 first
  t0=$(date +%s.%N)
  curl -sf "$base/v1/embeddings" -H 'Content-Type: application/json' \
    -d "{\"model\":\"$(basename "$embedder")\",\"input\":[\"the first request after start\"]}" >/dev/null
  t1=$(date +%s.%N)
  first=$(python3 -c "print($t1 - $t0)")
  local quick=()
  [ "$cpu" = 1 ] && quick=(--quick --passages 400)
  python3 scripts/gpu_check.py "$base" "$models/$embedder" --first-embed-s "$first" "${quick[@]}"
  grep -ciE "panicked|error" "$work/ragd.log" | xargs -I{} echo "[gpu_check] ragd log lines with error/panic: {}" >&2
}

case "$mode" in
  pack) pack ;;
  run) run "$@" ;;
  *) echo "usage: scripts/gpu_check.sh pack | run [--cpu]" >&2; exit 2 ;;
esac
