#!/usr/bin/env bash
# What the OpenAI-compatible route costs over the assistant API for the same generation
# (issue: <= 5% on first token and total), through the real server (release build) on the
# default LLM (SmolLM2-135M-Instruct Q4_1), 2 LLM threads, greedy, an empty knowledge base:
#
# 1. overhead: a server with the prompt cache off, RUNS (default 9) pairs back to back, in
#    alternating order: `assistant.api.stream_ai_response` (system_prompt, prompt,
#    max_tokens, tool_choice none) and `POST /v1/chat/completions` (stream, the same system
#    and user message, max_tokens, temperature 0). Each pair uses its own message, so
#    neither side reuses the other's state. Prints median first-token and total times and
#    the ratios /v1 : assistant.
# 2. prompt cache: a server at default settings; a /v1 conversation of three turns, each
#    resending the whole conversation; prints the `cached_tokens` the engine logged for
#    each turn (a later turn should reuse the earlier turns' tokens).
#
# Usage: scripts/bench_v1.sh     env: RUNS, MAX_TOKENS (default 48), KEEP_LOGS=1
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo build --release --quiet --bin ragd
bin="${CARGO_TARGET_DIR:-$PWD/target}/release/ragd"
python="$(scripts/py_clients.sh | sed -n 's/^PYTHON=//p')"
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [ "${KEEP_LOGS:-0}" = 1 ]; then echo "logs: $work/*/server.log"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# start NAME [ENV=VALUE...]: a server on a fresh data dir; prints "PORT PID CREDS".
start() {
  local name="$1"; shift
  local data="$work/$name"
  mkdir -p "$data"
  local port
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  local creds
  creds="$("$bin" user add bench@localhost --data-dir "$data" 2>/dev/null | tail -n 1)"
  env RAGD_LLM_THREADS=2 RAGD_LLM_TEMPERATURE=0 RUST_LOG=info "$@" \
    "$bin" serve --port "$port" --data-dir "$data" >"$data/server.log" 2>&1 &
  echo "$port $! $creds"
}

read -r oport opid ocreds < <(start overhead RAGD_LLM_PROMPT_CACHE_MB=0)
pids+=("$opid")
read -r cport cpid ccreds < <(start cache)
pids+=("$cpid")

"$python" - "$work" "$oport" "$ocreds" "$cport" "$ccreds" <<'PY'
import json, os, re, statistics, sys, time
import httpx

work, oport, ocreds, cport, ccreds = sys.argv[1:6]
RUNS = int(os.environ.get("RUNS", 9))
MAX_TOKENS = int(os.environ.get("MAX_TOKENS", 48))
SYSTEM = "You are ragd, a helpful assistant. Answer clearly and briefly."
TOPICS = ["tea", "bicycles", "rain", "libraries", "bread", "trains", "gardens", "rivers",
          "music", "clocks", "bridges", "maps", "winter", "paper", "salt", "owls"]

def wait_ready(base):
    for _ in range(1200):
        try:
            if httpx.get(base + "/api/v1/health/ready", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    sys.exit(f"server at {base} did not become ready")

def assistant(base, creds, message):
    """(first content s, total s) of one stream_ai_response turn."""
    params = {"prompt": message, "system_prompt": SYSTEM, "max_tokens": MAX_TOKENS,
              "tool_choice": "none"}
    t0 = time.perf_counter(); first = None; event = None
    with httpx.stream("GET", base + "/api/method/assistant.api.stream_ai_response",
                      params=params, headers={"Authorization": f"token {creds}"},
                      timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
                if event == "content" and first is None:
                    first = time.perf_counter() - t0
                if event in ("done", "error"):
                    if event == "error":
                        sys.exit(f"assistant stream error")
                    break
    total = time.perf_counter() - t0
    return (first if first is not None else total), total

def v1(base, creds, messages):
    """(first content s, total s, text) of one streamed /v1/chat/completions."""
    body = {"model": MODEL, "messages": messages, "stream": True, "max_tokens": MAX_TOKENS,
            "temperature": 0}
    t0 = time.perf_counter(); first = None; text = []
    with httpx.stream("POST", base + "/v1/chat/completions", json=body,
                      headers={"Authorization": f"Bearer {creds}"}, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                break
            chunk = json.loads(line[6:])
            for c in chunk.get("choices", []):
                piece = (c.get("delta") or {}).get("content")
                if piece:
                    text.append(piece)
                    if first is None:
                        first = time.perf_counter() - t0
    total = time.perf_counter() - t0
    return (first if first is not None else total), total, "".join(text)

obase, cbase = f"http://127.0.0.1:{oport}", f"http://127.0.0.1:{cport}"
wait_ready(obase); wait_ready(cbase)
MODEL = next(m["id"] for m in httpx.get(obase + "/v1/models",
             headers={"Authorization": f"Bearer {ocreds}"}).json()["data"]
             if m["id"].endswith(".gguf"))

# Warm both paths once (first use pays page faults).
assistant(obase, ocreds, "Say hello.")
v1(obase, ocreds, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Say hello."}])
a_first, a_total, o_first, o_total = [], [], [], []
for i in range(RUNS):
    message = f"Write two sentences about {TOPICS[i % len(TOPICS)]}."
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": message}]
    order = [0, 1] if i % 2 == 0 else [1, 0]
    for which in order:
        if which == 0:
            f, t = assistant(obase, ocreds, message); a_first.append(f); a_total.append(t)
        else:
            f, t, _ = v1(obase, ocreds, msgs); o_first.append(f); o_total.append(t)
med = statistics.median
print(f"model {MODEL}, {RUNS} pairs, max_tokens {MAX_TOKENS}, prompt cache off")
print(f"{'':28s} {'first token':>12s} {'total':>10s}")
print(f"{'assistant stream_ai_response':28s} {med(a_first)*1000:9.0f} ms {med(a_total)*1000:7.0f} ms")
print(f"{'/v1/chat/completions':28s} {med(o_first)*1000:9.0f} ms {med(o_total)*1000:7.0f} ms")
print(f"{'ratio /v1 : assistant':28s} {med(o_first)/med(a_first):12.3f} {med(o_total)/med(a_total):10.3f}")

# The prompt cache across resent turns.
log = os.path.join(work, "cache", "server.log")
def cached():
    out = []
    for line in open(log, errors="replace"):
        if "generated" in line and "prompt_tokens" in line:
            f = dict(re.findall(r"(\w+)=(\d+)", line))
            out.append((int(f["prompt_tokens"]), int(f.get("cached_tokens", 0))))
    return out
conv = [{"role": "system", "content": SYSTEM}]
for q in ["Name a colour.", "Name another one.", "And one more?"]:
    conv.append({"role": "user", "content": q})
    before = len(cached())
    _, _, text = v1(cbase, ccreds, conv)
    conv.append({"role": "assistant", "content": text})
    time.sleep(0.2)
    rows = cached()[before:]
    p, c = rows[-1] if rows else (0, 0)
    print(f"turn {len(conv) // 2}: prompt {p} tokens, {c} from the prompt cache")
PY
