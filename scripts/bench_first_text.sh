#!/usr/bin/env bash
# How soon a streamed /query answer shows text: starts `ragd serve` (release build) on a
# free port with a temp data dir and the default SmolLM2-135M-Instruct on 2 LLM threads,
# uploads the documents of examples/eval_assistant/docs.json, then asks the questions of
# examples/eval_assistant/questions.json (the first N, sequentially, after one warm-up)
# with `"stream": true` and times, from the request, the first `token` event (the first
# grounded text: every piece /query shows has passed the check or is quoted from the
# sources), the last `token` event and `done`. Prints p50 / p95 / mean of each, the
# answer modes, and how much text a client would have seen replaced had the quoted
# sentences been swapped for the model's (the characters quoted before a generated
# sentence; ragd only ever appends, so nothing is replaced). Then the same for the chat:
# the first C questions (default 12) as new conversations over stream_ai_response, timing
# the first and last `content` event and `done`.
#
# Usage: scripts/bench_first_text.sh [--bin PATH] [--json FILE] [--chat C] [N_QUESTIONS]
#        (default: all questions; --chat 0 skips the chat)
#   --bin PATH   time this binary as it is (e.g. an older build, for a before/after
#                table); without it the release build of this checkout is built first
#   --json FILE  also write every question's times there
# Env:   RAGD_LLM_THREADS (default 2), RAGD_BENCH_KEEP=1 keeps the temp dir.
# Needs: python3 (standard library only) and the default models (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"

bin=""
json_out=""
chat_n=12
n=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --bin) bin="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2 ;;
    --json) json_out="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2 ;;
    --chat) chat_n="$2"; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) n="$1"; shift ;;
  esac
done

if [ -z "$bin" ]; then
  # Niced: the build shares the machine; the measurement below is not niced.
  nice -n 5 cargo build --release --quiet --bin ragd
  bin="${CARGO_TARGET_DIR:-$root/target}/release/ragd"
fi
[ -x "$bin" ] || { echo "no $bin; build it first" >&2; exit 1; }
[ -f "$root/models/all-MiniLM-L6-v2/model.safetensors" ] && [ -f "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" ] || {
  echo "the default models are missing from models/; run scripts/setup.sh" >&2
  exit 1
}

tmp="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ "${RAGD_BENCH_KEEP:-0}" = 1 ]; then
    echo "kept $tmp" >&2
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT INT TERM

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
# A user for the chat (its API key and secret, the CLI's last line).
mkdir -p "$tmp/data"
creds="$("$bin" user add bench@localhost --data-dir "$tmp/data" 2>/dev/null | tail -n 1)"
# Started from the temp dir so that no ./ragd.toml of the checkout is picked up.
(
  cd "$tmp"
  RAGD_LLM_THREADS="${RAGD_LLM_THREADS:-2}" RUST_LOG="${RUST_LOG:-warn}" exec "$bin" serve \
    --host 127.0.0.1 --port "$port" --data-dir "$tmp/data" --models-dir "$root/models"
) >"$tmp/server.log" 2>&1 &
server_pid=$!

python3 - "$port" "$root/examples/eval_assistant" "$server_pid" "$tmp/server.log" "${n:-0}" "$json_out" "$bin" "$chat_n" "$creds" <<'PY'
import http.client, json, os, statistics, sys, time, urllib.parse, uuid

port, data, pid, log, n, json_out, binary = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3]),
                                             sys.argv[4], int(sys.argv[5]), sys.argv[6], sys.argv[7])
chat_n, creds = int(sys.argv[8]), sys.argv[9]

def alive():
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False

deadline = time.time() + 120
while True:
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/api/v1/health/ready")
        r = c.getresponse()
        body = json.loads(r.read())
        if r.status == 200 and body.get("ready"):
            break
    except (OSError, ValueError):
        pass
    if not alive() or time.time() > deadline:
        sys.exit("the server did not become ready:\n" + open(log).read()[-3000:])
    time.sleep(0.2)

uploaded = set()
for doc in json.load(open(os.path.join(data, "docs.json"))):
    if "text" not in doc:
        continue  # a shared fixture (the evaluation uploads those; its questions are left out here)
    uploaded.add(doc["name"])
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{doc['name']}\"\r\n"
            f"Content-Type: text/plain\r\n\r\n{doc['text']}\r\n--{boundary}--\r\n").encode()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/api/v1/upload", body, {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.exit(f"upload of {doc['name']} failed: {r.status}")

questions = [q["question"] for q in json.load(open(os.path.join(data, "questions.json")))
             if q.get("source") is None or q["source"] in uploaded]
if n:
    questions = questions[:n]

def ask(question, chat=False):
    """Streams one answer; returns the times (s) of the first and last piece of text
    (`token` for /query, `content` for the chat) and of done."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    started = time.perf_counter()
    if chat:
        path = "/api/method/assistant.api.stream_ai_response?" + urllib.parse.urlencode({"prompt": question})
        c.request("GET", path, headers={"Authorization": f"token {creds}"})
    else:
        body = json.dumps({"question": question, "stream": True})
        c.request("POST", "/api/v1/query", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        sys.exit(f"{question!r}: {r.status} {r.read()[:300]!r}")
    text_event = "content" if chat else "token"
    first = last = None
    event, done, tokens = None, None, []
    while True:
        line = r.readline()
        if not line:
            break
        line = line.decode().rstrip("\n").rstrip("\r")
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            payload = json.loads(line[5:].strip())
            now = time.perf_counter() - started
            if event == text_event:
                first = now if first is None else first
                last = now
                tokens.append(payload)
            elif event == "done":
                done = (now, payload)
            elif event == "error":
                sys.exit(f"{question!r}: error event {payload}")
    c.close()
    if done is None or first is None:
        sys.exit(f"{question!r}: the stream ended without text or done")
    # Characters shown as quotes before the first generated piece: what a design that
    # swaps the quotes for the model's sentences would have taken back.
    replaced = 0
    if any(t.get("origin") == "generated" for t in tokens):
        for t in tokens:
            if t.get("origin") != "extractive":
                break
            replaced += len(t["delta"])
    g = done[1].get("grounding") or {}
    return {"question": question, "chat": chat, "first_text": first, "last_text": last, "done": done[0],
            "answer_mode": done[1].get("answer_mode"), "outcome": g.get("outcome"),
            "generated_sentences": g.get("generated_sentences"),
            "extractive_sentences": g.get("extractive_sentences"),
            "pieces": len(tokens),
            "answer_chars": len(done[1].get("response" if chat else "answer") or ""),
            "replaced_chars": replaced}

ask("How many days of leave do I get?")  # warm-up, not timed
results = [ask(q) for q in questions]

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))]

def report(results, what):
    print(f"{binary}: {len(results)} {what}, SmolLM2-135M on "
          f"{os.environ.get('RAGD_LLM_THREADS', '2')} threads")
    print(f"  {'':24} {'p50':>7} {'p95':>7} {'mean':>7}  (seconds from the request)")
    for key, label in [("first_text", "first text (grounded)"), ("last_text", "last text"), ("done", "done")]:
        xs = [r[key] for r in results]
        print(f"  {label:24} {pct(xs, 50):7.3f} {pct(xs, 95):7.3f} {statistics.mean(xs):7.3f}")
    modes = {}
    for r in results:
        k = f"{r['answer_mode']}/{r['outcome']}"
        modes[k] = modes.get(k, 0) + 1
    print("  answer_mode/outcome: " + ", ".join(f"{k} {v}" for k, v in sorted(modes.items())))
    alone = sum(1 for r in results if r["pieces"] == 1)
    print(f"  answers shown in one piece: {alone} of {len(results)}; "
          f"characters a quote-then-replace design would take back: "
          f"{sum(r['replaced_chars'] for r in results)} of {sum(r['answer_chars'] for r in results)} shown "
          f"(ragd appends only: 0)")

report(results, "streamed /query answers")
if chat_n:
    chats = [ask(q, chat=True) for q in questions[:chat_n]]
    report(chats, "streamed chat replies (stream_ai_response, new conversations)")
    results += chats
if json_out:
    json.dump(results, open(json_out, "w"), indent=1)
PY
