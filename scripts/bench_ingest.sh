#!/usr/bin/env bash
# Ingestion throughput (release build): a 100-page PDF and 1,000 small Markdown files
# through the HTTP API, with the share of time in parsing, embedding and storage.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh >/dev/null
RUST_LOG=warn cargo run --release --quiet --example ingest_throughput
