#!/usr/bin/env bash
# Chat latency through the real server (release build): time to the first `content` event
# and to `done` of GET /api/method/assistant.api.stream_ai_response, for N turns, plus the
# whole chat_with_tools round trip. Extractive mode by default (no LLM); give a GGUF with
# RAGD_LLM_MODEL=FILE (e.g. a random-weight file from ../shared/tools/make_random_gguf.py)
# to time generation; RAGD_LLM_MAX_TOKENS (default 32) bounds each answer.
#
# Usage: scripts/bench_chat.sh [N]     (default 10)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
n="${1:-10}"

cargo build --release --quiet
bin=target/release/ragd
data="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
creds="$("$bin" user add bench@localhost --data-dir "$data" 2>/dev/null | tail -n 1)"
RAGD_LLM_MODEL="${RAGD_LLM_MODEL:-none}" RAGD_LLM_MAX_TOKENS="${RAGD_LLM_MAX_TOKENS:-32}" \
  RAGD_LLM_TEMPERATURE=0 "$bin" serve --port "$port" --data-dir "$data" >"$data/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$data"' EXIT

python3 - "$port" "$creds" "$n" <<'PY'
import json, sys, time, urllib.request, urllib.parse, statistics
port, creds, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
base = f"http://127.0.0.1:{port}"
for _ in range(600):
    try:
        urllib.request.urlopen(base + "/api/v1/health", timeout=2); break
    except Exception:
        time.sleep(0.5)
else:
    sys.exit("server did not start")
docs = [
    ("pumps.md", "# Pumps\n\nPump P-104 circulates coolant at 12 cubic metres per minute. Its seals are replaced every 18 months."),
    ("leave.md", "# Leave policy\n\nEmployees get 25 days of paid leave per year; up to 5 days carry over."),
    ("returns.md", "# Returns\n\nA product can be returned within 30 days of delivery with its receipt."),
]
for name, text in docs:
    boundary = "ragdbench"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
            f"Content-Type: text/markdown\r\n\r\n{text}\r\n--{boundary}--\r\n").encode()
    req = urllib.request.Request(base + "/api/v1/upload", data=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    urllib.request.urlopen(req, timeout=120).read()
auth = {"Authorization": f"token {creds}"}
ready = json.load(urllib.request.urlopen(base + "/api/v1/health/ready"))
llm = next(c for c in ready["components"] if c["name"] == "llm")
print(f"llm: {'loaded: ' + llm['detail'] if llm['healthy'] else 'none (extractive)'}")
questions = ["How often are the pump seals replaced?", "How many days of leave do employees get?",
             "Within how many days can a product be returned?"]
first, total, whole = [], [], []
for i in range(n):
    q = questions[i % len(questions)]
    url = base + "/api/method/assistant.api.stream_ai_response?" + urllib.parse.urlencode(
        {"prompt": q, "tool_choice": "none"})
    t0 = time.perf_counter(); t_first = None
    with urllib.request.urlopen(urllib.request.Request(url, headers=auth), timeout=3600) as r:
        for raw in r:
            line = raw.decode().strip()
            if line == "event: content" and t_first is None:
                t_first = time.perf_counter() - t0
            if line in ("event: done", "event: error"):
                if line == "event: error":
                    sys.exit("stream error: " + r.readline().decode())
                break
    total.append(time.perf_counter() - t0); first.append(t_first or total[-1])
    body = json.dumps({"user_message": q, "tool_choice": "none"}).encode()
    t0 = time.perf_counter()
    urllib.request.urlopen(urllib.request.Request(base + "/api/method/assistant.api.chat_with_tools",
        data=body, headers={**auth, "Content-Type": "application/json"}), timeout=3600).read()
    whole.append(time.perf_counter() - t0)
def row(name, xs):
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]
    print(f"{name:34s} p50 {statistics.median(xs)*1000:9.1f} ms  p95 {p95*1000:9.1f} ms  mean {statistics.mean(xs)*1000:9.1f} ms")
print(f"{n} turns")
row("stream_ai_response first content", first)
row("stream_ai_response done", total)
row("chat_with_tools round trip", whole)
PY
