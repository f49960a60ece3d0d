#!/usr/bin/env bash
# Builds ragd with `--features cuda` on an x86-64 Debian machine that needs no GPU, no
# driver and no system CUDA: the toolchain is CUDA 13.0 from NVIDIA's PyPI wheels with a
# libcuda stub (../shared/tools/cuda_toolchain.sh, or $RAGD_CUDA_TOOLCHAIN). The 13.0 line
# is pinned: PTX from a newer nvcc does not load on an R580 driver.
#
#   scripts/build_cuda.sh             release binary: $CARGO_TARGET_DIR/release/ragd
#   scripts/build_cuda.sh --check     `cargo check --features cuda --all-targets` (CI)
#
# CUDA_COMPUTE_CAP (default 90, the H100/H200) sets the architecture candle's kernels are
# compiled for (PTX, which the driver compiles for the GPU on first use: ragd warms its
# kernels up at start so no request pays for that). The binary runs where the driver
# provides libcuda.so.1 and the CUDA 13 runtime libraries (cuBLAS, cuRAND, NVRTC, cudart)
# are on LD_LIBRARY_PATH. The target directory defaults to target-cuda/ so that a CUDA
# build never invalidates the CPU one. Prints the binary's path and size at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

mode=build
case "${1:-}" in
  --check) mode=check ;;
  "") ;;
  *) echo "usage: scripts/build_cuda.sh [--check]" >&2; exit 2 ;;
esac

TOOL="${RAGD_CUDA_TOOLCHAIN:-$ROOT/../shared/tools/cuda_toolchain.sh}"
[ -f "$TOOL" ] || { echo "build_cuda: no toolchain script at $TOOL (set RAGD_CUDA_TOOLCHAIN)" >&2; exit 1; }
# The machine's own prerequisites (compilers, libtesseract, ...) as for the CPU build.
scripts/setup.sh >&2
started=$(date +%s)
eval "$(bash "$TOOL")"
export CUDA_COMPUTE_CAP="${RAGD_CUDA_COMPUTE_CAP:-$CUDA_COMPUTE_CAP}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target-cuda}"
echo "build_cuda: nvcc $(nvcc --version | grep -o 'release [0-9.]*'), compute capability $CUDA_COMPUTE_CAP, target $CARGO_TARGET_DIR" >&2
if [ "$mode" = check ]; then
  cargo check --features cuda --all-targets
  echo "build_cuda: cargo check --features cuda passed in $(($(date +%s) - started)) s" >&2
  exit 0
fi
cargo build --release --features cuda --bin ragd
bin="$CARGO_TARGET_DIR/release/ragd"
size=$(stat -c %s "$bin")
echo "build_cuda: built in $(($(date +%s) - started)) s; $bin is $((size / 1048576)) MiB" >&2
echo "$bin"
