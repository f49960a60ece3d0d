#!/usr/bin/env bash
# Continuous batching: aggregate decode tokens/s with 1, 2, 4 and 8 concurrent streams,
# ragd's CPU engine (examples/llm_batch: requests through the LLM worker, as the server
# runs them) against llama.cpp's `llama-batched-bench -npl 1,2,4,8` (its S_TG), back to
# back on the same files: the real default model (SmolLM2-135M-Instruct Q4_1) and a
# random-weight GGUF of Qwen2.5-0.5B's exact shape in Q4_0
# (../shared/tools/make_random_gguf.py, kept in DIR). PP prompt tokens and TG generated
# tokens per stream, 2 threads. Each repetition runs ragd then llama.cpp, alternating,
# REPS times (default 3); the table shows medians, each B's rate over B=1's, and ragd's
# rate over llama.cpp's. ragd's S_TG counts the decode steps while all B streams run
# (llama-batched-bench runs every prompt first and its B streams in step; ragd's join one
# prompt at a time, so the first also end first): its rate up to the last stream's end,
# with fewer than B streams in its last steps, is the table's second ragd column. Speed
# drifts with the machine's load: only ratios from one run mean anything, and the load
# average is printed.
#
# llama-batched-bench comes from ../shared/tools/build_llama_bench.sh
# (~/.cache/llama-bench/build/bin, or $RAGD_LLAMA_BATCHED_BENCH).
#
# Usage: scripts/bench_batch.sh [DIR]   env: REPS (3), THREADS (2), PP (128), TG (128),
#        NPL (1,2,4,8), FILES (smollm2 q4_0)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/ragd-bench"
dir="${1:-$cache/gguf}"
reps="${REPS:-3}" threads="${THREADS:-2}" pp="${PP:-128}" tg="${TG:-128}" npl="${NPL:-1,2,4,8}"
files="${FILES:-smollm2 q4_0}"
mkdir -p "$dir" "$cache"

py="$cache/venv/bin/python"
if ! "$py" -c 'import gguf, numpy' 2>/dev/null; then
  python3 -m venv "$cache/venv"
  "$cache/venv/bin/pip" install --quiet gguf numpy
fi
path_of() {
  case "$1" in
    smollm2) echo "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
    *) echo "$dir/qwen2-0.5b-shape-random-$1.gguf" ;;
  esac
}
for f in $files; do
  p="$(path_of "$f")"
  [ -f "$p" ] && continue
  case "$f" in
    smollm2) echo "$p is missing: run scripts/setup.sh" >&2; exit 1 ;;
    *) "$py" ../shared/tools/make_random_gguf.py --quant "$f" --out-dir "$dir" >&2 ;;
  esac
done

llama="${RAGD_LLAMA_BATCHED_BENCH:-$HOME/.cache/llama-bench/build/bin/llama-batched-bench}"
[ -x "$llama" ] || { echo "llama-batched-bench not found: ragd only (../shared/tools/build_llama_bench.sh builds it)" >&2; llama=""; }

cargo build --release --quiet --example llm_batch
bench="${CARGO_TARGET_DIR:-target}/release/examples/llm_batch"
out="$(mktemp)" run="$(mktemp)"
trap 'rm -f "$out" "$run"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for f in $files; do
  p="$(path_of "$f")"
  for r in $(seq "$reps"); do
    "$bench" "$p" "$threads" "$pp" "$tg" "$npl" | tee >(cat >&2) >"$run"
    sed -nE "s/.* B=([0-9]+) .* S_TG ([0-9.]+) tok\/s.*peak RSS ([0-9]+) MB.*/ragd $f \1 \2 \3/p" "$run" >>"$out"
    sed -nE "s/.* B=([0-9]+) .* to the last end ([0-9.]+) tok\/s.*peak RSS ([0-9]+) MB.*/ragdend $f \1 \2 \3/p" "$run" >>"$out"
    if [ -n "$llama" ]; then
      ctx=$(( ${npl##*,} * (pp + tg) + 256 ))
      args=(-m "$p" -t "$threads" -c "$ctx" -b 2048 -ub 512 -npp "$pp" -ntg "$tg" -npl "$npl"
        --output-format jsonl)
      # llama.cpp's AMX buffers crash where the CPU has AMX but the VM does not let a
      # process use it (ggml_backend_amx_mul_mat): then it runs without its extra
      # (repacked/AMX) weight buffers, and says so.
      if ! ("$llama" "${args[@]}" -npl 1 -ntg 4; exit $?) >/dev/null 2>&1; then
        echo "llama-batched-bench fails with its extra weight buffers here: --no-repack" >&2
        args+=(--no-repack)
      fi
      "$llama" "${args[@]}" 2>/dev/null | grep '^{' |
        "$py" -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print("llama", sys.argv[1], r["pl"], "%.2f" % r["speed_tg"], 0)' "$f" | tee >(cat >&2) >>"$out"
    fi
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$py" - "$out" "$threads" "$pp" "$tg" <<'PY'
import statistics, sys
rows = [r.split() for r in open(sys.argv[1]).read().split("\n") if r]
threads, pp, tg = sys.argv[2:5]
runs = {}
for engine, f, b, rate, rss in rows:
    runs.setdefault(f, {}).setdefault(engine, {}).setdefault(int(b), []).append((float(rate), int(rss)))
print(f"{threads} threads, pp{pp} tg{tg} per stream, medians, aggregate decode tok/s (S_TG)")
print("| file | streams | llama.cpp | x 1 stream | ragd | x 1 stream | ragd / llama.cpp | ragd to the last end | x 1 stream | ragd peak RSS |")
print("|---|---|---|---|---|---|---|---|---|---|")
for f, engines in runs.items():
    ours, theirs = engines.get("ragd", {}), engines.get("llama", {})
    tail = engines.get("ragdend", {})
    med = lambda d, b: statistics.median(x[0] for x in d[b]) if b in d else None
    for b in sorted(ours):
        o, t = med(ours, b), med(theirs, b)
        o1, t1 = med(ours, 1), med(theirs, 1)
        rss = max(x[1] for x in ours[b])
        fmt = lambda v: "-" if v is None else f"{v:.1f}"
        ratio = lambda a, c: "-" if a is None or c is None else f"{a / c:.2f}x"
        e, e1 = med(tail, b), med(tail, 1)
        print(f"| {f} | {b} | {fmt(t)} | {ratio(t, t1)} | {fmt(o)} | {ratio(o, o1)} | {ratio(o, t)} | {fmt(e)} | {ratio(e, e1)} | {rss} MB |")
PY
