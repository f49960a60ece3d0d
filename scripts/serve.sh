#!/usr/bin/env bash
# Sets up everything ragd needs (idempotent), then builds it optimised and serves both
# APIs on the default models. Extra arguments go to `ragd serve` (e.g. --port 9000).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
exec cargo run --release -- serve "$@"
