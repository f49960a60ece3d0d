#!/usr/bin/env bash
# Parse quality over ../shared/fixtures/docling: word recall/precision against the
# reference Markdown, heading recall, table-cell recall, PDF pages/s.
# Usage: scripts/parse_eval.sh [csv docx html md pdf pptx xlsx ocr ...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo run --quiet --example parse_eval -- "$@"
