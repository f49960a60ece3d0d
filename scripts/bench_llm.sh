#!/usr/bin/env bash
# LLM speed, ragd's CPU engine against llama.cpp, back to back on the same GGUF files:
# prompt processing (pp512) and decode (tg128) tokens/s, token ids in, 2 threads.
#
# Files: random-weight GGUFs with the exact shape of Qwen2.5-0.5B in Q8_0 and Q4_0
# (../shared/tools/make_random_gguf.py) and in a Q4_K_M-style mix (scripts/make_q4km_gguf.py:
# Q4_K / Q6_K with llama.cpp's Q5_0 / Q8_0 fallbacks); q3_k_m, iq4_xs and q2_k are the F16
# random file quantized by llama.cpp's own llama-quantize (its real mix: rows of 896 fall
# back to IQ4_NL and others; $RAGD_LLAMA_QUANTIZE or the llama-bench build's); and the real default model
# models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/setup.sh installs it). The generated
# files (~1.3 GB) are kept in DIR between runs; the python packages they need (gguf, numpy)
# go into a venv under ${XDG_CACHE_HOME:-~/.cache}/ragd-bench.
#
# llama.cpp's side runs when llama-bench is found: $RAGD_LLAMA_BENCH, or the build of
# ../shared/tools/build_llama_bench.sh (~/.cache/llama-bench/build/bin/llama-bench);
# RAGD_BUILD_LLAMA=1 builds it first (~10-15 min on 2 cores).
#
# Each repetition runs ragd (`cargo run --release --example llm_speed -- FILE 2 512 128`)
# and then `llama-bench -t 2 -p 512 -n 128 -r 1`, alternating, REPS times per file
# (default 3); the table shows medians and ragd / llama.cpp. Speed drifts with the
# machine's load: only ratios from one run mean anything, and the load average is printed.
#
# Newer families (scripts/make_arch_gguf.py writes the F16 random file of the real shape,
# llama-quantize the mix): qwen3_q4_k_m, qwen3_q3_k_m, qwen3_iq4_xs (Qwen3-0.6B shape),
# gemma3_1b_q4_k_m (Gemma-3-1B shape), and gemma3_270m, the real Gemma 3 270M Q4_K_M file
# (scripts/llama_ref.sh installs it).
#
# Usage: scripts/bench_llm.sh [DIR]     env: REPS, THREADS (2), PP (512), TG (128), FILES
#        (space-separated subset of: q8_0 q4_0 q4_k_m q3_k_m iq4_xs q2_k smollm2
#        qwen3_q4_k_m qwen3_q3_k_m qwen3_iq4_xs gemma3_1b_q4_k_m gemma3_270m)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/ragd-bench"
dir="${1:-$cache/gguf}"
reps="${REPS:-3}" threads="${THREADS:-2}" pp="${PP:-512}" tg="${TG:-128}"
files="${FILES:-q8_0 q4_0 q4_k_m smollm2}"
mkdir -p "$dir" "$cache"

py="$cache/venv/bin/python"
if ! "$py" -c 'import gguf, numpy' 2>/dev/null; then
  echo "creating $cache/venv with gguf and numpy" >&2
  python3 -m venv "$cache/venv"
  "$cache/venv/bin/pip" install --quiet gguf numpy
fi

path_of() {
  case "$1" in
    smollm2) echo "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
    gemma3_270m) "$root/scripts/llama_ref.sh" | sed -n 's/^GEMMA3=//p' ;;
    qwen3_*) echo "$dir/qwen3-0.6b-shape-random-${1#qwen3_}.gguf" ;;
    gemma3_1b_*) echo "$dir/gemma3-1b-shape-random-${1#gemma3_1b_}.gguf" ;;
    *) echo "$dir/qwen2-0.5b-shape-random-$1.gguf" ;;
  esac
}
for f in $files; do
  p="$(path_of "$f")"
  [ -f "$p" ] && continue
  case "$f" in
    q8_0|q4_0) "$py" ../shared/tools/make_random_gguf.py --quant "$f" --out-dir "$dir" >&2 ;;
    q4_k_m) "$py" scripts/make_q4km_gguf.py "$p" >&2 ;;
    q3_k_m|iq4_xs|q2_k)
      quantize="${RAGD_LLAMA_QUANTIZE:-$HOME/.cache/llama-bench/build/bin/llama-quantize}"
      f16="$(path_of f16)"
      [ -f "$f16" ] || "$py" ../shared/tools/make_random_gguf.py --quant f16 --out-dir "$dir" >&2
      "$quantize" --allow-requantize "$f16" "$p" "$(tr a-z A-Z <<<"$f")" 2 >&2 ;;
    smollm2) echo "$p is missing: run scripts/setup.sh" >&2; exit 1 ;;
    qwen3_*|gemma3_1b_*)
      quantize="${RAGD_LLAMA_QUANTIZE:-$HOME/.cache/llama-bench/build/bin/llama-quantize}"
      shape="$([ "${f%%_*}" = qwen3 ] && echo qwen3-0.6b || echo gemma3-1b)"
      f16="$dir/$shape-shape-random-f16.gguf"
      [ -f "$f16" ] || "$py" scripts/make_arch_gguf.py "$shape" "$f16" >&2
      "$quantize" "$f16" "$p" "$(sed -E 's/^(qwen3|gemma3_1b)_//' <<<"$f" | tr a-z A-Z)" 2 >&2 ;;
    *) echo "unknown file kind $f" >&2; exit 1 ;;
  esac
done

llama="${RAGD_LLAMA_BENCH:-$HOME/.cache/llama-bench/build/bin/llama-bench}"
if [ ! -x "$llama" ] && [ "${RAGD_BUILD_LLAMA:-0}" = 1 ]; then
  llama="$(bash ../shared/tools/build_llama_bench.sh | tail -n 1)"
fi
[ -x "$llama" ] || { echo "llama-bench not found: ragd only (RAGD_BUILD_LLAMA=1 builds it)" >&2; llama=""; }

cargo build --release --quiet --example llm_speed
speed="${CARGO_TARGET_DIR:-target}/release/examples/llm_speed"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for f in $files; do
  p="$(path_of "$f")"
  for r in $(seq "$reps"); do
    line="$("$speed" "$p" "$threads" "$pp" "$tg")"
    echo "ragd $f $r: $line" >&2
    echo "ragd $f $(sed -E 's/.* pp[0-9]+ ([0-9.]+) tok\/s.* tg[0-9]+ ([0-9.]+) tok\/s.*/\1 \2/' <<<"$line")" >>"$out"
    if [ -n "$llama" ]; then
      json="$("$llama" -m "$p" -t "$threads" -p "$pp" -n "$tg" -r 1 -o json 2>/dev/null)"
      "$py" - "$f" "$json" >>"$out" <<'PY'
import json, sys
rows = json.loads(sys.argv[2])
ts = {("pp" if r["n_prompt"] else "tg"): r["avg_ts"] for r in rows}
print(f"llama {sys.argv[1]} {ts['pp']:.2f} {ts['tg']:.2f}")
PY
      echo "llama.cpp $f $r: $(tail -n 1 "$out")" >&2
    fi
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$py" - "$out" "$threads" "$pp" "$tg" <<'PY'
import statistics, sys
rows, threads, pp, tg = open(sys.argv[1]).read().split("\n"), sys.argv[2], sys.argv[3], sys.argv[4]
runs = {}
for row in filter(None, rows):
    engine, f, a, b = row.split()
    runs.setdefault(f, {}).setdefault(engine, []).append((float(a), float(b)))
med = lambda xs, i: statistics.median(x[i] for x in xs)
print(f"{threads} threads, medians of {max(len(v.get('ragd', [])) for v in runs.values())} runs, tok/s")
print(f"| file | llama.cpp pp{pp} / tg{tg} | ragd pp{pp} / tg{tg} | ratio pp / tg |")
print("|---|---|---|---|")
for f, v in runs.items():
    ours = (med(v["ragd"], 0), med(v["ragd"], 1))
    if "llama" in v:
        theirs = (med(v["llama"], 0), med(v["llama"], 1))
        print(f"| {f} | {theirs[0]:.1f} / {theirs[1]:.1f} | {ours[0]:.1f} / {ours[1]:.1f} "
              f"| {ours[0]/theirs[0]:.2f}x / {ours[1]/theirs[1]:.2f}x |")
    else:
        print(f"| {f} | - | {ours[0]:.1f} / {ours[1]:.1f} | - |")
PY
