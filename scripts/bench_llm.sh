#!/usr/bin/env bash
# LLM prompt processing (pp512) and decode (tg128) tokens/s, token ids in, 2 threads, on
# random-weight GGUFs with the exact shape of Qwen2.5-0.5B (Q8_0 and Q4_0), written by
# ../shared/tools/make_random_gguf.py (needs the PyPI packages gguf and numpy; about
# 800 MB of disk). Compare with llama.cpp in ../shared/reference/peers.md.
#
# Usage: scripts/bench_llm.sh [DIR]   (DIR keeps the GGUF files between runs)
# RAGD_BENCH_NATIVE=1 builds with -C target-cpu=native (AVX2 kernels) in target/bench-native.
# RAGD_BENCH_PP / RAGD_BENCH_TG (default 512 / 128): prompt and decode lengths. criterion
# takes at least 11 runs of each (10 samples + warm-up); on a default x86-64 build
# (scalar kernels, ~2-3 tok/s) pp512 alone then takes ~30 min per file, so shorter runs
# (e.g. 64 / 16) are the practical choice there: candle processes a prompt row by row
# (no batched quantized matmul), so its tok/s hardly depends on these lengths.
# Each line also prints the load average (uptime) before and after: the figures are only
# comparable on a quiet machine.
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

pp="${RAGD_BENCH_PP:-512}"
tg="${RAGD_BENCH_TG:-128}"
export RAGD_BENCH_PP="$pp" RAGD_BENCH_TG="$tg"
# Build first (niced: the machine may be shared), so that the runs below time only the bench.
nice -n 5 cargo bench --quiet --bench llm --no-run >&2
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

summary=""
for q in q8_0 q4_0; do
  f="$dir/qwen2-0.5b-shape-random-$q.gguf"
  before=$(loadavg)
  RAGD_BENCH_GGUF="$f" RAGD_BENCH_THREADS=2 RAYON_NUM_THREADS=2 \
    cargo bench --quiet --bench llm -- --noplot >&2
  after=$(loadavg)
  line=$(python3 - "$target/criterion/llm" "$q" "$pp" "$tg" <<'PY'
import json, sys, os
base, q, pp, tg = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
out = [q]
for name, n in ((f"pp{pp}", pp), (f"tg{tg}", tg)):
    est = json.load(open(os.path.join(base, name, "new", "estimates.json")))
    ns = est["mean"]["point_estimate"]
    out.append(f"{name} {n / (ns / 1e9):.1f} tok/s")
print("  ".join(out))
PY
)
  summary+="$line  (load average before: $before; after: $after)"$'\n'
done
echo "ragd (candle), 2 threads:"
printf '%s' "$summary"
echo "llama.cpp 0c1e570 (peers.md): q8_0  pp512 87.5 tok/s  tg128 19.8 tok/s"
echo "                              q4_0  pp512 153 tok/s  tg128 33.9 tok/s"
