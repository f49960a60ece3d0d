#!/usr/bin/env bash
# End-to-end latency of the knowledge-base API on a release build: starts `ragd serve`
# on a free port with a temp data dir, ingests N deterministic passages (one .txt file
# each, `make_passages(N, seed=1234)` from ../shared/tools/passages.py) through
# /api/v1/upload/bulk, then times M sequential POST /api/v1/search and M sequential
# POST /api/v1/query (include_timing) over one keep-alive connection, after warm-up
# requests of each (3 by default). Prints p50 / p95 / mean ms per endpoint, the server's own /query
# timing breakdown (means) and the answer mode. The server is stopped on exit.
#
# Usage: scripts/bench_latency.sh [N_PASSAGES] [M_REQUESTS]      (defaults: 2000 50)
# Env:   RAGD_LLM_MODEL=FILE.gguf   a generative /query (passed through to the server;
#                                   without it /query answers extractively)
#                                   (e.g. with RAGD_LLM_MAX_TOKENS=32: on a CPU build a
#                                   generative /query takes seconds to minutes)
#        RAGD_BENCH_TOP_K=K         passages per request (default 5)
#        RAGD_BENCH_WARMUP=W        warm-up requests per endpoint, not timed (default 3)
#        RAGD_BENCH_SKIP_BUILD=1    use target/release/ragd as it is
#        RAGD_BENCH_KEEP=1          keep the temp dir (data, server log) and print it
# Needs: python3 (standard library only) and the default embedder (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"

n="${1:-2000}"
m="${2:-50}"

if [ "${RAGD_BENCH_SKIP_BUILD:-0}" != 1 ]; then
  # Niced: the build shares the machine; the measurement below is not niced.
  nice -n 5 cargo build --release --quiet --bin ragd
fi
bin="$root/target/release/ragd"
[ -x "$bin" ] || { echo "no $bin; build it first" >&2; exit 1; }
[ -f "$root/models/all-MiniLM-L6-v2/model.safetensors" ] || {
  echo "no embedder in models/; run scripts/setup.sh" >&2
  exit 1
}
if [ -n "${RAGD_LLM_MODEL:-}" ]; then
  RAGD_LLM_MODEL="$(cd "$(dirname "$RAGD_LLM_MODEL")" && pwd)/$(basename "$RAGD_LLM_MODEL")"
  export RAGD_LLM_MODEL
fi

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
# Started from the temp dir so that no ./ragd.toml of the checkout is picked up.
(
  cd "$tmp"
  RUST_LOG="${RUST_LOG:-warn}" exec "$bin" serve --host 127.0.0.1 --port "$port" \
    --data-dir "$tmp/data" --models-dir "$root/models"
) >"$tmp/server.log" 2>&1 &
server_pid=$!

python3 - "$port" "$n" "$m" "$root/../shared/tools" "$server_pid" "$tmp/server.log" <<'PY'
import http.client, json, os, random, statistics, sys, time, uuid

port, n, m, tools, pid, log = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6]
top_k = int(os.environ.get("RAGD_BENCH_TOP_K", "5"))
warmup = int(os.environ.get("RAGD_BENCH_WARMUP", "3"))
sys.path.insert(0, tools)
from passages import make_passages, _WORDS, fingerprint

def alive():
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False

def conn():
    return http.client.HTTPConnection("127.0.0.1", port, timeout=600)

def call(c, method, path, body=None, headers=None):
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        raise SystemExit(f"{method} {path}: HTTP {r.status}: {data[:500]!r}")
    return json.loads(data)

# Wait for the server (the embedder loads at start-up).
deadline = time.time() + 300
while True:
    if not alive():
        sys.stderr.write(open(log).read()[-4000:])
        raise SystemExit("the server exited during start-up")
    try:
        c = conn()
        ready = call(c, "GET", "/api/v1/health/ready")
        if ready.get("ready"):
            break
    except (ConnectionError, OSError, http.client.HTTPException):
        pass
    if time.time() > deadline:
        raise SystemExit("the server did not become ready in 300 s")
    time.sleep(0.2)
llm = [x for x in ready["components"] if x["name"] == "llm"]
print(f"server ready on port {port}; llm: {llm[0]['detail'] if llm else '?'}")

# Ingest: 100 files per /upload/bulk request (the default max_bulk_files).
passages = make_passages(n, seed=1234)
print(f"{n} passages (fingerprint {fingerprint(passages)}), {sum(len(p.split()) for p in passages) / n:.0f} words on average")
started = time.time()
for start in range(0, n, 100):
    boundary = uuid.uuid4().hex
    parts = []
    for i in range(start, min(n, start + 100)):
        parts.append(
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"passage-{i:05d}.txt\"\r\n"
            f"Content-Type: text/plain\r\n\r\n".encode() + passages[i].encode() + b"\r\n")
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    call(c, "POST", "/api/v1/upload/bulk", body, {"Content-Type": f"multipart/form-data; boundary={boundary}"})
ingest_s = time.time() - started
stats = call(c, "GET", "/api/v1/health/stats")
print(f"ingested in {ingest_s:.1f} s ({n / ingest_s:.1f} passages/s); documents: {stats.get('document_count')}")

# Deterministic questions: 4-8 words of the passages' vocabulary.
rng = random.Random(42)
questions = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 8))) for _ in range(m + warmup)]
js = {"Content-Type": "application/json"}

def bench(path, make_body):
    lat, bodies = [], []
    for i, q in enumerate(questions):
        t = time.perf_counter()
        out = call(c, "POST", path, json.dumps(make_body(q)), js)
        dt = (time.perf_counter() - t) * 1e3
        if i >= warmup:
            lat.append(dt)
            bodies.append(out)
    lat.sort()
    p = lambda q: lat[min(len(lat) - 1, round(q * (len(lat) - 1)))]
    print(f"POST {path:<15} n={len(lat)}  p50 {p(0.5):8.1f} ms  p95 {p(0.95):8.1f} ms  mean {statistics.mean(lat):8.1f} ms  max {lat[-1]:8.1f} ms")
    return bodies

load = lambda: " ".join(f"{x:.2f}" for x in os.getloadavg())
print(f"load average before: {load()}")
bench("/api/v1/search", lambda q: {"query": q, "top_k": top_k})
bodies = bench("/api/v1/query", lambda q: {"question": q, "top_k": top_k, "include_timing": True})
timings = [b["timing"] for b in bodies if b.get("timing")]
if timings:
    keys = list(timings[0].keys())
    print("  /query server timing, mean ms: " + "  ".join(
        f"{k} {statistics.mean(t[k] for t in timings) * 1e3:.1f}" for k in keys))
modes = sorted({b.get("answer_mode", "?") for b in bodies})
words = statistics.mean(len(b.get("answer", "").split()) for b in bodies)
print(f"  answer_mode: {', '.join(modes)}; answer length: {words:.0f} words on average")
print(f"load average after: {load()}")
PY
