#!/usr/bin/env bash
# Retrieval quality of the embedder's default path against its exact f32 path
# (target: nDCG@10 within 0.005), on a set built from public data: Debian's English
# package descriptions (bookworm main), each package's synopsis the query for its long
# description. apt fetches the descriptions into a private lists folder (the system's
# apt state is left alone). Usage: scripts/bench_retrieval.sh [docs] [queries]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh >/dev/null
CACHE="${RAGD_BENCH_CACHE:-$HOME/.cache/ragd-bench}"
LISTS="$CACHE/apt-lists"
SET="$CACHE/debian-retrieval-${1:-4000}-${2:-800}.json"
if [ ! -s "$SET" ]; then
  mkdir -p "$LISTS/partial"
  if ! ls "$LISTS"/*bookworm_main_i18n_Translation-en* >/dev/null 2>&1; then
    echo "[bench] fetching Debian's English package descriptions with apt" >&2
    apt-get update -qq -o Dir::State::Lists="$LISTS" -o Acquire::Languages=en \
      -o APT::Get::List-Cleanup=0 -o APT::Sandbox::User=root >&2
  fi
  src="$(ls "$LISTS"/*dists_bookworm_main_i18n_Translation-en* | head -n 1)"
  plain="$CACHE/Translation-en"
  case "$src" in
    *.lz4) lz4cat "$src" >"$plain" ;;
    *.xz) xzcat "$src" >"$plain" ;;
    *.gz) zcat "$src" >"$plain" ;;
    *) cp "$src" "$plain" ;;
  esac
  python3 scripts/peers/debian_retrieval_set.py "$plain" "$SET" "${1:-4000}" "${2:-800}"
fi
cargo build --release --quiet --example retrieval_quality
echo "load before: $(uptime)"
target/release/examples/retrieval_quality "$SET"
echo "load after: $(uptime)"
