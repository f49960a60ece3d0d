#!/usr/bin/env bash
# Ingestion against the embedder alone on the same chunks, in one run (release build):
# 2,000 small .txt files through /upload/bulk (50 per request) with /search timed
# meanwhile (a query every 250 ms), and 100-page PDFs through /upload. Prints a table of
# passages/s and the ratios (target: ingestion >= 0.9x the embedder alone; /search p95
# <= 100 ms).
# Usage: scripts/bench_ingest.sh [files] [files_per_request] [requests_in_flight] [rounds]
#        [search_every_ms]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh >/dev/null
cargo build --release --quiet --example ingest_throughput
echo "load before: $(uptime)"
RUST_LOG=warn target/release/examples/ingest_throughput "${1:-2000}" "${2:-50}" "${3:-1}" "${4:-5}" "${5:-250}"
echo "load after: $(uptime)"
