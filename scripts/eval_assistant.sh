#!/usr/bin/env bash
# The assistant's evaluation (examples/eval_assistant): builds ragd and the evaluator,
# starts `ragd serve` on a temp data dir with the real SmolLM2-135M-Instruct file (the
# server's default LLM), seeds the documents of examples/eval_assistant/docs.json, then
# scores (a) tool selection over the messages of tool_cases.json (every tool plus
# "no tool" messages), (b) arguments where a case says what they must be, (c) high-risk
# calls held for confirmation (and every seeded document still stored), and (d) answer
# correctness, citations, refusal on unanswerable questions and the share of unsupported
# sentences over questions.json, through /query and through the chat.
#
# Usage: scripts/eval_assistant.sh [--llm none|FILE.gguf] [--only tools|questions]
#                                  [--no-chat-questions] [--json FILE] [--keep]
#   --llm none   extractive answers, for comparison
# Needs: the default models in models/ (scripts/setup.sh installs them).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ -f models/all-MiniLM-L6-v2/model.safetensors ] && [ -f models/SmolLM2-135M-Instruct.Q4_1.gguf ] || {
  echo "the default models are missing from models/; run scripts/setup.sh" >&2
  exit 1
}
# The dev profile is optimized (Cargo.toml); niced, as the build shares the machine.
nice -n 15 cargo build --quiet --bin ragd --example eval_assistant
target="${CARGO_TARGET_DIR:-target}"
exec "$target/debug/examples/eval_assistant" --server "$target/debug/ragd" --models-dir models "$@"
