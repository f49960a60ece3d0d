#!/usr/bin/env bash
# The real client SDKs the compatibility tests drive ragd with (openai, anthropic, mcp;
# prometheus_client reads /metrics),
# in a venv of their own under ~/.cache/ragd-clients (idempotent: seconds once made).
# Prints PYTHON=<the venv's python>.
set -euo pipefail
DIR="${RAGD_CLIENTS_DIR:-$HOME/.cache/ragd-clients}"
VENV="$DIR/venv"
# Pinned to the major versions the tests were written against.
PACKAGES=("openai>=1.50,<3" "anthropic>=0.40,<1" "mcp>=1.20,<3" "httpx>=0.27,<1" "prometheus_client>=0.20,<1")
stamp="$VENV/.ragd-packages"
want="$(printf '%s\n' "${PACKAGES[@]}")"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "installing the client SDKs into $VENV" >&2
  mkdir -p "$DIR"
  python3 -m venv "$VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
  "$VENV/bin/python" -m pip install --quiet "${PACKAGES[@]}" >&2
  printf '%s\n' "$want" >"$stamp"
fi
echo "PYTHON=$VENV/bin/python"
