#!/usr/bin/env bash
# Compares two builds of `embed_throughput` (say, main's and a change's) on a host whose
# speed jumps between states from one minute to the next (docs/embedder.md, "paired
# runs"): both run at the same time, one thread each, pinned to two cores, swapping the
# cores every pair, so each pair meets the same moment of the host. Prints each pair's
# passages/s and B's ratio to A, then the median and mean ratio. Two runs of one build
# give ratios of 0.91-1.08 here: use 16 pairs or more to see a few percent.
# Usage: scripts/pair_embedder.sh BUILD_A BUILD_B [pairs] [passages] [precision]
# (a build is a copy of target/release/examples/embed_throughput).
set -euo pipefail
A="${1:?build A (a copy of target/release/examples/embed_throughput)}"
B="${2:?build B}"
PAIRS="${3:-16}"
N="${4:-100}"
PRECISION="${5:-auto}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
export RAYON_NUM_THREADS=1
rate() { # the passages/s of a run's first line
  sed -nE '1s/.*: ([0-9.]+) passages\/s.*/\1/p' "$1"
}
for pair in $(seq 1 "$PAIRS"); do
  if (( pair % 2 )); then ca=0 cb=1; else ca=1 cb=0; fi
  taskset -c "$ca" "$A" "$N" 1 "$PRECISION" >"$out/a" 2>/dev/null &
  taskset -c "$cb" "$B" "$N" 1 "$PRECISION" >"$out/b" 2>/dev/null &
  wait
  echo "$(rate "$out/a") $(rate "$out/b")"
done | python3 -c '
import statistics, sys
ratios = []
for line in sys.stdin:
    a, b = map(float, line.split())
    ratios.append(b / a)
    print(f"A {a:.1f}  B {b:.1f} passages/s  B/A {b / a:.3f}", flush=True)
print(f"B/A over {len(ratios)} pairs: median {statistics.median(ratios):.3f}, "
      f"mean {statistics.mean(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}")
'
