#!/usr/bin/env bash
# GPU benchmark for a machine with a real Vulkan GPU, in one go (under 8 minutes on a
# 16-core machine with the build tools installed):
#   1. builds moetier (Release; skipped when ./build/moetier already runs), with the tests
#      when --with-tests is given;
#   2. with --with-tests: the GPU op and whole-model tests on the real GPU (fast kernels
#      against the exact ones, the CPU and llama.cpp's logits);
#   3. synthesizes the 8-layer Qwen3.6-35B-A3B-shaped UD-Q4_K_XL-like file (once);
#   4. `moetier bench` pp512 and tg128 with --profile, in two placements:
#        all on the GPU (-ngl 99), and the users' 6 GB laptop placement
#        (-ngl 99 -ncmoe 99 --vram-budget 6144: dense layers on the GPU, experts on the CPU);
#      each prints llama-bench's table, the per-token GPU census (dispatches, barriers,
#      submits, host waits, bytes up/down, weight bytes) and GPU time per shader with the
#      achieved GB/s of the mat-vecs (weight bytes / GPU time);
#   5. the same tg128 census with the exact kernels (--gpu-kernels exact), for comparison.
# Results also go to $OUT (or ./out/gpu_bench) as JSON lines (bench -o jsonl) and logs.
#
#   scripts/gpu_bench.sh [--with-tests] [-dev N]
set -euo pipefail
cd "$(dirname "$0")/.."
with_tests=0
dev=()
while [ $# -gt 0 ]; do
  case "$1" in
    --with-tests) with_tests=1 ;;
    -dev) dev=(-dev "$2"); shift ;;
    *) echo "gpu_bench: unknown argument '$1' (usage: scripts/gpu_bench.sh [--with-tests] [-dev N])" >&2; exit 2 ;;
  esac
  shift
done
out="${OUT:-out/gpu_bench}"
mkdir -p "$out"
jobs=$(nproc 2>/dev/null || echo 4)
t0=$(date +%s)
stamp() { echo "== $(( $(date +%s) - t0 ))s: $*"; }

stamp "build"
if [ "$with_tests" = 1 ] || ! ./build/moetier --version >/dev/null 2>&1; then
  if ! command -v cmake >/dev/null || ! command -v glslc >/dev/null; then scripts/setup.sh; fi
  tests=OFF
  [ "$with_tests" = 1 ] && tests=ON
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMOETIER_TESTS=$tests >/dev/null
  cmake --build build -j"$jobs" 2>&1 | tail -n 2
fi
./build/moetier run --list-devices | tee "$out/devices.txt"

if [ "$with_tests" = 1 ]; then
  stamp "GPU tests on this device"
  MOETIER_REQUIRE_VULKAN=1 timeout 300 ./build/tests/moetier_unit_tests \
    --gtest_filter='*GpuMatvec*:*GpuOps*:*GpuDeltaRule*:*GpuFastDeltaRule*:*GpuFlashAttention*:RealShape*:Ref/GpuModel*' \
    2>&1 | tee "$out/tests.log" | grep -E "^\[ +(OK|FAILED|PASSED) |Failure" | tail -n 60 || true
fi

stamp "model"
model="${MODEL:-out/qwen3.6-35b-a3b-8layers-ud-q4_k_xl.gguf}"
if [ ! -f "$model" ]; then
  ./build/moetier synth --preset qwen3.6-35b-a3b --layers 8 --quant ud-q4_k_xl --seed 1 -t "$jobs" -o "$model.tmp"
  mv "$model.tmp" "$model"
fi

bench() {  # name, flags...
  local name="$1"
  shift
  stamp "bench: $name"
  ./build/moetier bench -m "$model" -mmp 0 -t "$jobs" --profile -o jsonl "${dev[@]}" "$@" \
    >"$out/$name.jsonl" 2>"$out/$name.log" || { echo "gpu_bench: $name failed:"; tail -n 20 "$out/$name.log"; return 0; }
  grep -E "GPU census|dispatches/token|no GPU timestamps" "$out/$name.log" || true
  # The t/s of each test, from its record (one JSON object per line).
  sed -n 's/.*"n_prompt": \([0-9]*\), "n_gen": \([0-9]*\),.*"avg_ts": \([0-9.e+-]*\),.*/  pp\1 tg\2: \3 t\/s/p' "$out/$name.jsonl"
}
bench all-gpu -ngl 99 -p 512 -n 128 -r 3
bench users-6gb -ngl 99 -ncmoe 99 --vram-budget 6144 -p 512 -n 128 -r 3
bench all-gpu-exact -ngl 99 -p 0 -n 16 -r 1 --gpu-kernels exact
bench users-6gb-exact -ngl 99 -ncmoe 99 --vram-budget 6144 -p 0 -n 16 -r 1 --gpu-kernels exact
stamp "done: results in $out"
