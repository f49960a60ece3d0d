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

bulk() {
  serve "bulk-$1"
  local files=("$work"/files/*)
  local t0 t1
  t0=$(now)
  for ((i = 0; i < n; i += 50)); do
    args=()
    for f in "${files[@]:i:50}"; do args+=(-F "files=@$f"); done
    curl -sf -o /dev/null "${args[@]}" "http://127.0.0.1:$PORT/api/v1/upload/bulk"
  done
  t1=$(now)
  stop
  echo "$t0 $t1" >"$work/t-bulk-$1"
}
cli() {
  serve "cli-$1"
  local t0 t1
  t0=$(now)
  "$BIN" ingest --server "http://127.0.0.1:$PORT" --state-file "$work/state-$1.json" --json "$work/files" >"$work/cli-$1.json"
  t1=$(now)
  stop
  echo "$t0 $t1" >"$work/t-cli-$1"
}
bar() {
  serve "bar-$1"
  local t0 t1
  t0=$(now)
  # On a pseudo-terminal the bar is drawn (its output is kept to check it was).
  script -qefc "'$BIN' ingest --server http://127.0.0.1:$PORT --state-file '$work/state-bar-$1.json' '$work/files'" "$work/bar-$1.txt" >/dev/null
  t1=$(now)
  stop
  echo "$t0 $t1" >"$work/t-bar-$1"
}

# Odd rounds run bulk, ingest, bar; even rounds the reverse, so a drift in the machine's
# speed does not favour one side.
for round in $(seq 1 "$ROUNDS"); do
  if ((round % 2)); then bulk "$round"; cli "$round"; bar "$round"; else bar "$round"; cli "$round"; bulk "$round"; fi
  python3 - "$n" "$work" "$round" <<'PY'
import json, sys
n, work, r = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rate = lambda side: n / (lambda t: t[1] - t[0])(list(map(float, open(f"{work}/t-{side}-{r}").read().split())))
s = json.load(open(f"{work}/cli-{r}.json"))
assert s["added"] == n, s
drawn = open(f"{work}/bar-{r}.txt", errors="replace").read()
assert "files" in drawn and f"{n}" in drawn, "the progress bar was not drawn"
bulk, cli, bar = rate("bulk"), rate("cli"), rate("bar")
print(f"round {r}: /upload/bulk {bulk:.1f} passages/s, ragd ingest {cli:.1f} passages/s "
      f"(ratio {cli / bulk:.2f}), with the bar drawn {bar:.1f} passages/s (ratio {bar / bulk:.2f}; "
      f"bar/no bar {bar / cli:.2f})", flush=True)
open(f"{work}/ratios", "a").write(f"{cli / bulk} {bar / bulk} {bar / cli}\n")
PY
done
python3 - "$work/ratios" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
med = [statistics.median(c) for c in zip(*rows)]
print(f"medians over {len(rows)} rounds: ingest/bulk {med[0]:.2f} (target >= 0.9), "
      f"ingest with bar/bulk {med[1]:.2f}, bar/no bar {med[2]:.2f}")
PY
