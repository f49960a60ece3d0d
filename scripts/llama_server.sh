#!/usr/bin/env bash
# Makes ready what the "remote" backends' tests and benchmarks start on loopback: llama.cpp's
# `llama-server` (an OpenAI-compatible LLM and /v1/embeddings server) and a GGUF of the
# installed embedder, models/all-MiniLM-L6-v2 (scripts/setup.sh installs it).
# Idempotent, and cheap once done (two file checks).
#
# - llama-server: built by ../shared/tools/build_llama_bench.sh from the llama.cpp sources
#   vendored in the llama-cpp-python sdist (~/.cache/llama-bench/build/bin; ~10-30 min cold
#   on 2 cores, depending on what else runs).
# - The GGUF: converted, f32, by llama.cpp's own convert_hf_to_gguf.py from those same
#   sources, into ${XDG_CACHE_HOME:-~/.cache}/ragd-remote/all-MiniLM-L6-v2.f32.gguf (91 MB).
#   The converter imports torch at top level (it also reads safetensors through torch), and
#   PyPI's only Linux torch wheels pull in the CUDA libraries: the venv it needs is ~5.6 GB,
#   ~3 min to install and convert. It is built under the cache dir, used once and removed again
#   (RAGD_KEEP_CONVERT_VENV=1 keeps it); pip's cache is bypassed so the wheels leave no copy.
#   Versions are the converter's own requirements file's pins (without its CPU-only index,
#   which is not reachable here); sentencepiece and protobuf are left out: BERT's WordPiece
#   vocabulary does not need them.
#
# Usage: scripts/llama_server.sh      env: RAGD_MODELS_DIR (default models/), XDG_CACHE_HOME
# Prints as its last two lines (for `eval "$(scripts/llama_server.sh | tail -n 2)"`):
#   LLAMA_SERVER=<path of llama-server>
#   MINILM_GGUF=<path of the GGUF>
# Everything else goes to stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
models="${RAGD_MODELS_DIR:-$root/models}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/ragd-remote"
builder="$root/../shared/tools/build_llama_bench.sh"
model="$models/all-MiniLM-L6-v2"
gguf="$cache/all-MiniLM-L6-v2.f32.gguf"
mkdir -p "$cache"

# Two runs at once (say, tests started twice) would build and convert over each other.
exec 9>"$cache/.lock"
flock 9

# llama-server. The build script prints llama-bench's path; llama-server sits beside it.
[ -f "$builder" ] || { echo "$builder is missing (../shared beside the repo)" >&2; exit 1; }
bench="$(bash "$builder" | tail -n 1)"
server="$(dirname "$bench")/llama-server"
[ -x "$server" ] || { echo "build_llama_bench.sh did not produce $server" >&2; exit 1; }

# The GGUF.
if [ ! -s "$gguf" ]; then
  [ -f "$model/model.safetensors" ] || { echo "$model is missing: run scripts/setup.sh" >&2; exit 1; }
  version="$(sed -n 's/^VERSION=//p' "$builder")"
  src="$(cd "$(dirname "$bench")/../.." && pwd)/src/llama_cpp_python-$version/vendor/llama.cpp"
  [ -f "$src/convert_hf_to_gguf.py" ] || { echo "no convert_hf_to_gguf.py in $src" >&2; exit 1; }
  venv="$cache/convert-venv"
  started=$SECONDS
  if ! "$venv/bin/python" -c 'import torch, transformers, numpy' 2>/dev/null; then
    echo "creating $venv (torch from PyPI, ~5.6 GB with its CUDA libraries; ~3 min)" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --no-cache-dir --disable-pip-version-check \
      'torch==2.11.0' 'numpy~=2.2.6' 'transformers==4.57.6' >&2
    echo "venv ready in $((SECONDS - started)) s" >&2
  fi
  echo "converting $model to $gguf" >&2
  # The converter imports the vendored gguf-py by itself (unless NO_LOCAL_GGUF is set).
  # Offline: the tokenizer is read from the model folder, nothing is fetched.
  rm -f "$gguf.partial"
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$venv/bin/python" "$src/convert_hf_to_gguf.py" \
    "$model" --outtype f32 --outfile "$gguf.partial" >"$cache/convert.log" 2>&1 ||
    { tail -n 30 "$cache/convert.log" >&2; echo "conversion failed (log: $cache/convert.log)" >&2; exit 1; }
  mv "$gguf.partial" "$gguf"
  echo "converted, $((SECONDS - started)) s so far" >&2
  [ "${RAGD_KEEP_CONVERT_VENV:-0}" = 1 ] || rm -rf "$venv"
fi

echo "LLAMA_SERVER=$server"
echo "MINILM_GGUF=$gguf"
