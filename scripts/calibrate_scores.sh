#!/usr/bin/env bash
# Fits and checks the calibration of search scores (examples/score_calibration.rs) on the
# public retrieval set of scripts/bench_retrieval.sh: Debian's English package
# descriptions (bookworm main), each package's synopsis the query for its own long
# description. Prints the fitted weights (the constants of src/kb/search/relevance.rs),
# held-out precision and recall of a 0.5 cut, and the ranking against reciprocal rank
# fusion. Usage: scripts/calibrate_scores.sh [docs] [queries]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CACHE="${RAGD_BENCH_CACHE:-$HOME/.cache/ragd-bench}"
SET="$CACHE/debian-retrieval-${1:-4000}-${2:-800}.json"
if [ ! -s "$SET" ]; then
  # bench_retrieval.sh builds the set (with apt, into a private folder) and caches it.
  echo "[calibrate] building the retrieval set with scripts/bench_retrieval.sh" >&2
  scripts/bench_retrieval.sh "${1:-4000}" "${2:-800}" >&2
fi
scripts/setup.sh >/dev/null
cargo build --release --quiet --example score_calibration
target="${CARGO_TARGET_DIR:-target}"
"$target/release/examples/score_calibration" "$SET"
