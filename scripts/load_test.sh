#!/usr/bin/env bash
# ragd under load, from outside: builds the release server and the load generator
# (examples/load_test), starts `ragd serve` on a temp data dir with the models a server
# finds in models/ (the default LLM when it is installed; --env RAGD_LLM_MODEL=none for
# extractive answers only), seeds 200 small documents, then runs CLIENTS clients, each on its own
# keep-alive connection, for SECONDS seconds over a mix of /search (55%), /query (10%),
# uploads (13%), /documents listing (8%), deletes by source (5%), the assistant's
# chat_with_tools (6%) and search_conversations (3%), with a /health prober every 250 ms.
# Clients honour Retry-After on a 429. It prints requests/s and p50/p95/p99 per operation
# and every non-2xx answer by status, then checks that every acknowledged upload is listed
# and searchable and every acknowledged delete is gone.
# Exit status: non-zero on any 5xx, a request without an answer, a failed health check,
# a lost or resurrected document, or (with --max-search-p99-ms MS) a slower /search.
#
# Usage: scripts/load_test.sh [--debug] [CLIENTS [SECONDS]] [load_test flags...]
#          (defaults: 50 clients, 60 s; the issue's second run: scripts/load_test.sh 200 60)
#        --debug   use target/debug/{ragd,examples/load_test} as they are (scripts/test.sh
#                  runs a short load this way after `cargo test` has built them)
#        flags     --corpus N, --users N, --timeout S, --max-search-p99-ms MS, --keep,
#                  --env KEY=VALUE (a server setting, e.g. --env RAGD_SEARCH_THREADS=4)
# Env:   RAGD_LOAD_SKIP_BUILD=1   use target/release binaries as they are
# Needs: the default embedder in models/ (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

profile=release
if [ "${1:-}" = "--debug" ]; then
  profile=debug
  shift
fi
clients=50
seconds=60
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then clients="$1"; shift; fi
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then seconds="$1"; shift; fi

[ -f models/all-MiniLM-L6-v2/model.safetensors ] || {
  echo "no embedder in models/; run scripts/setup.sh" >&2
  exit 1
}
if [ "$profile" = release ] && [ "${RAGD_LOAD_SKIP_BUILD:-0}" != 1 ]; then
  # Niced: the build shares the machine; the measurement below is not niced.
  nice -n 5 cargo build --release --quiet --bin ragd --example load_test
fi
bin="${CARGO_TARGET_DIR:-target}/$profile/ragd"
gen="${CARGO_TARGET_DIR:-target}/$profile/examples/load_test"
for f in "$bin" "$gen"; do
  [ -x "$f" ] || { echo "no $f; build it first" >&2; exit 1; }
done
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) before the run"
exec "$gen" --server "$bin" --models-dir models --clients "$clients" --seconds "$seconds" "$@"
