#!/usr/bin/env bash
# `ragd ingest` through a running server against `/upload/bulk` on the same files: the
# peers' 2,000 passages (../shared/tools/passages.py), one .txt file each. Each round
# starts a fresh server on a new data directory for each side: /upload/bulk gets 50 files
# per request, one request at a time (as scripts/bench_ingest.sh sends them), then
# `ragd ingest --server` the folder twice more, each on its own fresh server: with
# `--json` (no progress bar) and on a pseudo-terminal (`script`), where the progress bar
# is drawn. Prints passages/s of each, the ratio to bulk (target: ingest >= 0.9x bulk)
# and the bar's cost (drawn / not drawn).
# Usage: scripts/bench_cli_ingest.sh [ragd binary (default target/release/ragd)] [rounds]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN="${1:-target/release/ragd}"
ROUNDS="${2:-2}"
PORT=$((20000 + RANDOM % 20000))
work="$(mktemp -d)"
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/files"
python3 - "$work/files" <<'PY'
import sys
sys.path.insert(0, "../shared/tools")
from passages import make_passages
for i, p in enumerate(make_passages(2000)):
    open(f"{sys.argv[1]}/passage-{i:05d}.txt", "w").write(p)
PY
n=$(ls "$work/files" | wc -l)

serve() {
  RAGD_LLM_MODEL=none RUST_LOG=warn "$BIN" serve --port "$PORT" --data-dir "$work/data-$1" >"$work/log-$1" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$PORT/api/v1/health" >/dev/null && return; sleep 0.1; done
  echo "the server did not start" >&2; cat "$work/log-$1" >&2; exit 1
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }
now() { date +%s.%N; }

for round in $(seq 1 "$ROUNDS"); do
  serve "bulk-$round"
  files=("$work"/files/*)
  t0=$(now)
  for ((i = 0; i < n; i += 50)); do
    args=()
    for f in "${files[@]:i:50}"; do args+=(-F "files=@$f"); done
    curl -sf -o /dev/null "${args[@]}" "http://127.0.0.1:$PORT/api/v1/upload/bulk"
  done
  t1=$(now)
  stop
  serve "cli-$round"
  t2=$(now)
  "$BIN" ingest --server "http://127.0.0.1:$PORT" --state-file "$work/state-$round.json" --json "$work/files" >"$work/cli-$round.json"
  t3=$(now)
  stop
  serve "bar-$round"
  t4=$(now)
  # On a pseudo-terminal the bar is drawn (its output is kept to check it was).
  script -qefc "'$BIN' ingest --server http://127.0.0.1:$PORT --state-file '$work/state-bar-$round.json' '$work/files'" "$work/bar-$round.txt" >/dev/null
  t5=$(now)
  stop
  python3 - "$n" "$t0" "$t1" "$t2" "$t3" "$t4" "$t5" "$work/cli-$round.json" "$round" "$work/bar-$round.txt" <<'PY'
import json, sys
n, t0, t1, t2, t3, t4, t5 = int(sys.argv[1]), *map(float, sys.argv[2:8])
s = json.load(open(sys.argv[8]))
assert s["added"] == n, s
drawn = open(sys.argv[10], errors="replace").read()
assert "files" in drawn and f"{n}" in drawn, "the progress bar was not drawn"
bulk, cli, bar = n / (t1 - t0), n / (t3 - t2), n / (t5 - t4)
print(f"round {sys.argv[9]}: /upload/bulk {bulk:.1f} passages/s, ragd ingest {cli:.1f} passages/s "
      f"(ratio {cli / bulk:.2f}), with the bar drawn {bar:.1f} passages/s (ratio {bar / bulk:.2f}; "
      f"bar/no bar {bar / cli:.2f})")
PY
done
