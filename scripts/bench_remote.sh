#!/usr/bin/env bash
# ragd's remote backends against llama.cpp's llama-server alone, back to back in one run
# (release build, 2 threads for the server): the time to first token and decode
# tokens/s of the same chat prompts sent directly and through ragd's RemoteGenerator
# (SmolLM2), then ingestion of the peers' passages with `embed_url` at llama-server
# (all-MiniLM-L6-v2 as GGUF) against the server's own embedding rate. Prints two tables
# (targets: ragd adds <= 5% to the first token and loses <= 2% of decode speed;
# ingestion >= 0.9x the server alone).
# Usage: scripts/bench_remote.sh [llm_rounds] [passages] [embed_rounds]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh >/dev/null
eval "$(scripts/llama_server.sh | grep -E '^(LLAMA_SERVER|MINILM_GGUF)=')"
# RAGD_BENCH_PROFILE=dev measures the test build (dependencies optimised, ragd at -O2)
# when a release build of everything is not at hand.
if [ "${RAGD_BENCH_PROFILE:-release}" = dev ]; then
  cargo build --quiet --example bench_remote; bin=target/debug/examples/bench_remote
else
  cargo build --release --quiet --example bench_remote; bin=target/release/examples/bench_remote
fi
THREADS="${RAGD_BENCH_THREADS:-2}"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
# SIGKILL: llama-server can hang on SIGTERM while a request is running.
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done' EXIT
start() {  # start PORT ARGS...: llama-server on loopback, waits until it is ready
  local port="$1"; shift
  "$LLAMA_SERVER" --host 127.0.0.1 --port "$port" -t "$THREADS" "$@" >/dev/null 2>&1 &
  pids+=("$!")
  for _ in $(seq 1 600); do
    curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "llama-server on port $port did not start" >&2; exit 1
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load before: $(uptime)"
port="$(free_port)"
start "$port" -m models/SmolLM2-135M-Instruct.Q4_1.gguf -c 4096 -np 1
RUST_LOG=warn "$bin" llm "http://127.0.0.1:$port" "${1:-5}"
kill -KILL "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
[ "${3:-3}" = 0 ] && exit 0  # embed_rounds 0: the LLM part only
echo
port="$(free_port)"
start "$port" -m "$MINILM_GGUF" --embedding --pooling mean -c 8192 -b 8192 -ub 8192 -np 1
RUST_LOG=warn "$bin" embed "http://127.0.0.1:$port" "${2:-2000}" "${3:-3}"
echo "load after: $(uptime)"
