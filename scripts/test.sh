#!/usr/bin/env bash
# Sets up everything the tests need (idempotent), then builds and runs every test
# target: unit, integration (real server on port 0, real models), benches in test mode,
# and (without arguments) a short load run of the debug build just made: 50 clients x
# 10 s of scripts/load_test.sh, which fails on any 5xx, unanswered request, or lost or
# resurrected document; then the CUDA build is type-checked (scripts/build_cuda.sh --check).
# The layer rules of scripts/check_layers.sh are checked first.
# The remote backends' tests get llama-server and the embedder's GGUF from
# scripts/llama_server.sh, as $RAGD_TEST_LLAMA_SERVER and $RAGD_TEST_MINILM_GGUF; the
# comparisons with llama.cpp get theirs from scripts/llama_ref.sh.
# The last line totals every test binary's results.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/check_layers.sh
scripts/setup.sh
# The remote backends' tests start a real llama-server on loopback: build it and convert the
# embedder to GGUF (scripts/llama_server.sh; ~15 min cold, two file checks once done), unless
# both are named already.
if [ -z "${RAGD_TEST_LLAMA_SERVER:-}" ] || [ -z "${RAGD_TEST_MINILM_GGUF:-}" ]; then
  remote="$(scripts/llama_server.sh)"
  RAGD_TEST_LLAMA_SERVER="$(sed -n 's/^LLAMA_SERVER=//p' <<<"$remote")"
  RAGD_TEST_MINILM_GGUF="$(sed -n 's/^MINILM_GGUF=//p' <<<"$remote")"
fi
export RAGD_TEST_LLAMA_SERVER RAGD_TEST_MINILM_GGUF
# The engine's comparisons with llama.cpp (tests/llm_reference.rs) get the reference tool,
# the real Gemma 3 270M file and a python for scripts/make_arch_gguf.py from
# scripts/llama_ref.sh (seconds once llama.cpp is built).
ref="$(scripts/llama_ref.sh)"
export RAGD_TEST_LLAMA_REF="${RAGD_TEST_LLAMA_REF:-$(sed -n 's/^LLAMA_REF=//p' <<<"$ref")}"
export RAGD_TEST_GEMMA3="${RAGD_TEST_GEMMA3:-$(sed -n 's/^GEMMA3=//p' <<<"$ref")}"
export RAGD_TEST_GGUF_PYTHON="${RAGD_TEST_GGUF_PYTHON:-$(sed -n 's/^PYTHON=//p' <<<"$ref")}"
# The compatibility tests (/v1, /mcp) drive ragd with the real openai, anthropic and mcp
# SDKs from a venv of their own (scripts/py_clients.sh; seconds once made).
clients="$(scripts/py_clients.sh)"
export RAGD_TEST_CLIENT_PYTHON="${RAGD_TEST_CLIENT_PYTHON:-$(sed -n 's/^PYTHON=//p' <<<"$clients")}"
# A one-off full build gains nothing from incremental caches, which would double the
# target directory's size on disk (set CARGO_INCREMENTAL=1 to keep them).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
cargo test --all-targets --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?
if [ "$#" -eq 0 ]; then
  load=passed
  cargo build --quiet --bin ragd --example load_test &&
    scripts/load_test.sh --debug 50 10 --corpus 20 --timeout 60 --env RAGD_LLM_MODEL=none ||
    { load=failed; status=1; }
  echo "load test (50 clients x 10 s, debug build): $load"
fi
# The CUDA build keeps compiling: `cargo check --features cuda --all-targets` with the
# toolchain of NVIDIA's PyPI wheels (scripts/build_cuda.sh --check, in its own target
# directory). RAGD_SKIP_CUDA_CHECK=1 skips it.
if [ "$#" -eq 0 ] && [ -z "${RAGD_SKIP_CUDA_CHECK:-}" ]; then
  cuda=passed
  cuda_log="$(mktemp)"
  CARGO_TARGET_DIR="${RAGD_CUDA_TARGET_DIR:-$PWD/target-cuda}" scripts/build_cuda.sh --check \
    >"$cuda_log" 2>&1 || { cuda=failed; status=1; tail -40 "$cuda_log"; }
  grep 'build_cuda:' "$cuda_log" || true
  rm -f "$cuda_log"
  echo "cuda check (cargo check --features cuda --all-targets): $cuda"
fi
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "total: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
