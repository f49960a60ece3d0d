#!/usr/bin/env bash
# Sets up everything the tests need (idempotent), then builds and runs every test
# target: unit, integration (real server on port 0, real models), benches in test mode.
# The last line totals every test binary's results.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
cargo test --all-targets "$@" 2>&1 | tee "$log" || status=$?
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "total: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
