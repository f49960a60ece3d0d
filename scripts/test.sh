#!/usr/bin/env bash
# Sets up everything the tests need (idempotent), then builds and runs every test
# target: unit, integration (real server on port 0, real models), benches in test mode.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
cargo test --all-targets "$@"
