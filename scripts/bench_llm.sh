#!/usr/bin/env bash
# LLM prompt processing (pp512) and decode (tg128) tokens/s, token ids in, 2 threads, on
# random-weight GGUFs with the exact shape of Qwen2.5-0.5B (Q8_0 and Q4_0), written by
# ../shared/tools/make_random_gguf.py (needs the PyPI packages gguf and numpy; about
# 800 MB of disk). Compare with llama.cpp in ../shared/reference/peers.md.
#
# Usage: scripts/bench_llm.sh [DIR]   (DIR keeps the GGUF files between runs)
# RAGD_BENCH_NATIVE=1 builds with -C target-cpu=native (AVX2 kernels) in target/bench-native.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

dir="${1:-$(mktemp -d)}"
mkdir -p "$dir"
if ! python3 -c 'import gguf, numpy' 2>/dev/null; then
  echo "installing the python packages gguf and numpy" >&2
  python3 -m pip install --quiet gguf numpy || {
    echo "cannot install gguf and numpy; give a GGUF to: RAGD_BENCH_GGUF=FILE cargo bench --bench llm" >&2
    exit 1
  }
fi
for q in q8_0 q4_0; do
  f="$dir/qwen2-0.5b-shape-random-$q.gguf"
  [ -f "$f" ] || python3 ../shared/tools/make_random_gguf.py --quant "$q" --out-dir "$dir" >&2
done

if [ "${RAGD_BENCH_NATIVE:-0}" = 1 ]; then
  export RUSTFLAGS="${RUSTFLAGS:-} -C target-cpu=native"
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/bench-native}"
fi
target="${CARGO_TARGET_DIR:-target}"

summary=""
for q in q8_0 q4_0; do
  f="$dir/qwen2-0.5b-shape-random-$q.gguf"
  RAGD_BENCH_GGUF="$f" RAGD_BENCH_THREADS=2 RAYON_NUM_THREADS=2 \
    cargo bench --quiet --bench llm -- --noplot >&2
  line=$(python3 - "$target/criterion/llm" "$q" <<'PY'
import json, sys, os
base, q = sys.argv[1], sys.argv[2]
out = [q]
for name, n in (("pp512", 512), ("tg128", 128)):
    est = json.load(open(os.path.join(base, name, "new", "estimates.json")))
    ns = est["mean"]["point_estimate"]
    out.append(f"{name} {n / (ns / 1e9):.1f} tok/s")
print("  ".join(out))
PY
)
  summary+="$line"$'\n'
done
echo "ragd (candle), 2 threads:"
printf '%s' "$summary"
echo "llama.cpp 0c1e570 (peers.md): q8_0  pp512 87.5 tok/s  tg128 19.8 tok/s"
echo "                              q4_0  pp512 153 tok/s  tg128 33.9 tok/s"
