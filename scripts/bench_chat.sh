#!/usr/bin/env bash
# Chat and /query latency and the server's memory, through the real server (release
# build) on the default LLM (models/SmolLM2-135M-Instruct.Q4_1.gguf, installed by
# scripts/setup.sh) at default settings, 2 LLM threads:
#
# 1. cold: a server with the prompt cache off (RAGD_LLM_PROMPT_CACHE_MB=0), COLD new
#    conversations (default 5): time to the first `content` event of each first turn of
#    `stream_ai_response`, every tool offered (tool_choice auto).
# 2. warm: a server at default settings, CONVERSATIONS (5) x TURNS (4) turns: the first
#    turn of each conversation and the next turns (prompt cache hits: the server's log
#    line `generated` shows `cached_tokens`), then QUERIES (10) /query answers; the peak
#    resident memory (VmHWM) of that server after all of it.
# Prints p50 / p95 of each and the cached share of the prompt tokens from the log.
#
# Usage: scripts/bench_chat.sh        env: RAGD_LLM_MODEL (default: the default model),
#        COLD, CONVERSATIONS, TURNS, QUERIES, KEEP_LOGS=1 (keeps the servers' logs)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo build --release --quiet
bin="$PWD/target/release/ragd"
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
  env RAGD_LLM_THREADS=2 "$@" "$bin" serve --port "$port" --data-dir "$data" >"$data/server.log" 2>&1 &
  echo "$port $! $creds"
}

read -r cport cpid ccreds < <(start cold RAGD_LLM_PROMPT_CACHE_MB=0)
pids+=("$cpid")
read -r wport wpid wcreds < <(start warm)
pids+=("$wpid")

python3 - "$work" "$cport" "$ccreds" "$wport" "$wpid" "$wcreds" "$cpid" <<'PY'
import json, os, re, statistics, sys, time, urllib.parse, urllib.request
work, cport, ccreds, wport, wpid, wcreds, cpid = sys.argv[1:8]
env = lambda k, d: int(os.environ.get(k, d))
COLD, CONV, TURNS, QUERIES = env("COLD", 5), env("CONVERSATIONS", 5), env("TURNS", 4), env("QUERIES", 10)

def wait_ready(base):
    for _ in range(1200):
        try:
            urllib.request.urlopen(base + "/api/v1/health", timeout=2)
            return
        except Exception:
            time.sleep(0.25)
    sys.exit(f"server at {base} did not start")

DOCS = [
    ("pumps.md", "# Pumps\n\nPump P-104 circulates coolant at 12 cubic metres per minute. Its seals are replaced every 18 months by the maintenance team."),
    ("leave.md", "# Leave policy\n\nEmployees get 25 days of paid leave per year; up to 5 days carry over to the next year. Requests go to the line manager two weeks ahead."),
    ("returns.md", "# Returns\n\nA product can be returned within 30 days of delivery with its receipt. Refunds are paid to the original card within 5 working days."),
    ("remote.md", "# Remote work\n\nStaff may work from home up to three days a week with their manager's agreement. The office is open from 8 am to 7 pm."),
]

def seed(base):
    for name, text in DOCS:
        b = "ragdbench"
        body = (f"--{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
                f"Content-Type: text/markdown\r\n\r\n{text}\r\n--{b}--\r\n").encode()
        urllib.request.urlopen(urllib.request.Request(base + "/api/v1/upload", data=body,
            headers={"Content-Type": f"multipart/form-data; boundary={b}"}), timeout=300).read()

FIRST = ["How many days of paid leave do employees get?", "How often are the pump seals replaced?",
         "Within how many days can I return a product?", "Can I work from home?",
         "Hello! What can you help me with?"]
NEXT = ["And how many of those days carry over?", "Who do I send the request to?",
        "Thanks. Summarise that in one sentence.", "What time does the office open?",
        "How long do refunds take?", "What does pump P-104 circulate?"]

def turn(base, creds, prompt, conversation=None):
    """One stream_ai_response turn: (seconds to first content, seconds to done, done data)."""
    q = {"prompt": prompt}
    if conversation:
        q["conversation_id"] = conversation
    url = base + "/api/method/assistant.api.stream_ai_response?" + urllib.parse.urlencode(q)
    t0 = time.perf_counter(); first = None; event = None; done = None
    req = urllib.request.Request(url, headers={"Authorization": f"token {creds}"})
    with urllib.request.urlopen(req, timeout=3600) as r:
        for raw in r:
            line = raw.decode().strip()
            if line.startswith("event: "):
                event = line[7:]
                if event == "content" and first is None:
                    first = time.perf_counter() - t0
            elif line.startswith("data: ") and event in ("done", "error"):
                done = json.loads(line[6:])
                if event == "error":
                    sys.exit(f"stream error: {done}")
                break
    total = time.perf_counter() - t0
    return (first if first is not None else total), total, done

def row(name, xs):
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]
    print(f"{name:44s} n={len(xs):2d}  p50 {statistics.median(xs)*1000:8.0f} ms  p95 {p95*1000:8.0f} ms")

def generated(log):
    out = []
    for line in open(log, errors="replace"):
        if "generated" in line and "prompt_tokens" in line:
            f = dict(re.findall(r"(\w+)=(\d+)", line))
            out.append((int(f["prompt_tokens"]), int(f.get("cached_tokens", 0))))
    return out

cold, warm = f"http://127.0.0.1:{cport}", f"http://127.0.0.1:{wport}"
for base in (cold, warm):
    wait_ready(base)
    seed(base)
ready = json.load(urllib.request.urlopen(warm + "/api/v1/health/ready"))
llm = next(c for c in ready["components"] if c["name"] == "llm")
if not llm["healthy"]:
    sys.exit(f"no LLM loaded: {llm}")
print(f"llm: {llm['detail']}")

cold_first = [turn(cold, ccreds, FIRST[i % len(FIRST)])[0] for i in range(COLD)]
cold_log = generated(f"{work}/cold/server.log")

firsts, nexts = [], []
for c in range(CONV):
    f, _, done = turn(warm, wcreds, FIRST[c % len(FIRST)])
    firsts.append(f)
    for t in range(TURNS - 1):
        nexts.append(turn(warm, wcreds, NEXT[(c + t) % len(NEXT)], done["conversation_id"])[0])
warm_log = generated(f"{work}/warm/server.log")
queries = []
for i in range(QUERIES):
    body = json.dumps({"question": FIRST[i % 4]}).encode()
    t0 = time.perf_counter()
    urllib.request.urlopen(urllib.request.Request(warm + "/api/v1/query", data=body,
        headers={"Content-Type": "application/json"}), timeout=3600).read()
    queries.append(time.perf_counter() - t0)
def memory(pid):
    status = open(f"/proc/{pid}/status").read()
    return tuple(int(re.search(rf"{k}:\s+(\d+)", status).group(1)) / 1024 for k in ("VmHWM", "VmRSS"))
hwm, rss = memory(wpid)
chwm, crss = memory(cpid)

print(f"prompts (cold server): {statistics.median(p for p, _ in cold_log):.0f} tokens median, "
      f"{max(p for p, _ in cold_log)} max")
row("first turn, cold cache: first content", cold_first)
row("first turn, warm server: first content", firsts)
row("next turns: first content", nexts)
row("/query: complete", queries)
chat = warm_log[:CONV * TURNS]
print(f"prompt cache (warm server, {len(chat)} chat generations): "
      f"{sum(c for _, c in chat)} of {sum(p for p, _ in chat)} prompt tokens reused; "
      f"generations with a hit: {sum(1 for _, c in chat if c > 0)}")
print(f"server memory after {CONV * TURNS} turns in {CONV} conversations and {QUERIES} queries: "
      f"peak RSS {hwm:.0f} MB, now {rss:.0f} MB (the cold server, no prompt cache, after {COLD} "
      f"turns: peak {chwm:.0f} MB, now {crss:.0f} MB)")
PY
