#!/usr/bin/env bash
# Embedder throughput on the peers' 2,000 passages (see ../shared/reference/peers.md),
# release build. Usage: scripts/bench_embedder.sh [passages] [runs]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh >/dev/null
cargo run --release --quiet --example embed_throughput -- "${1:-2000}" "${2:-3}"
