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
# Results also go to $OUT (or ./out/gpu_bench) as JSON lines (bench -o jsonl) and logs; the
# exit status is 1 when a bench failed or printed no result this script could read.
#
#   scripts/gpu_bench.sh [--with-tests] [-dev N] [--subgroup W[:vendor]] [--smoke]
# --subgroup 32|64 (or 32:intel ...): MOETIER_VK_SUBGROUP, the device's subgroups emulated W
#   wide (src/gpu/vulkan/vk_context.h): on lavapipe, the code paths of NVIDIA/AMD GPUs.
# --smoke: a 4-layer model with 32 experts and a 4096-token vocabulary, a few tokens per
#   test, a few GPU tests: checks the whole script (build, tests, synth, bench, the parsing of
#   its output) in minutes on a software device; its numbers mean nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
with_tests=0
smoke=0
dev=()
while [ $# -gt 0 ]; do
  case "$1" in
    --with-tests) with_tests=1 ;;
    -dev) dev=(-dev "$2"); shift ;;
    --subgroup) export MOETIER_VK_SUBGROUP="$2"; shift ;;
    --smoke) smoke=1 ;;
    *) echo "gpu_bench: unknown argument '$1' (usage: scripts/gpu_bench.sh [--with-tests] [-dev N] [--subgroup W[:vendor]] [--smoke])" >&2; exit 2 ;;
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
./build/moetier run --list-devices -v | tee "$out/devices.txt"
failures=0

if [ "$with_tests" = 1 ]; then
  stamp "GPU tests on this device"
  # Every GPU test but the command-line ones (parameterized names start "Instance/Suite.").
  filter='*Gpu*:SubgroupEmulation.*:-GpuCli.*'
  [ "$smoke" = 1 ] && filter='*GpuSubgroupEmulation.*:GpuOps.*:*/GpuMatvec.*/Q4_K:Ref/GpuModel.*/qwen35moe_tiny_mixed'
  if MOETIER_REQUIRE_VULKAN=1 timeout 1800 ./build/tests/moetier_gpu_tests --gtest_filter="$filter" \
       >"$out/tests.log" 2>&1; then
    grep -E "^\[  PASSED  \]" "$out/tests.log" || { echo "gpu_bench: no tests ran (filter '$filter')"; failures=$((failures + 1)); }
  else
    grep -E "^\[  FAILED  \]|Failure|^\[  PASSED  \]" "$out/tests.log" | tail -n 60
    failures=$((failures + 1))
  fi
fi

stamp "model"
model="${MODEL:-out/qwen3.6-35b-a3b-8layers-ud-q4_k_xl.gguf}"
synth=(--layers 8)
if [ "$smoke" = 1 ]; then  # 3 DeltaNet layers and an attention layer, the real widths, fewer experts and tokens
  model="${MODEL:-out/qwen3.6-35b-a3b-4layers-32experts-ud-q4_k_xl.gguf}"
  synth=(--layers 4 --experts 32 --n-vocab 4096)
fi
if [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"  # out/ need not exist when $OUT points elsewhere
  ./build/moetier synth --preset qwen3.6-35b-a3b "${synth[@]}" --quant ud-q4_k_xl --seed 1 -t "$jobs" -o "$model.tmp"
  mv "$model.tmp" "$model"
fi

bench() {  # name, flags...
  local name="$1"
  shift
  stamp "bench: $name"
  ./build/moetier bench -m "$model" -mmp 0 -t "$jobs" --profile -o jsonl "${dev[@]}" "$@" \
    >"$out/$name.jsonl" 2>"$out/$name.log" || {
    echo "gpu_bench: $name failed:"
    tail -n 20 "$out/$name.log"
    failures=$((failures + 1))
    return 0
  }
  grep -E "subgroups emulated" "$out/$name.log" | head -n 1 || true
  grep -E "GPU census|dispatches/token|no GPU timestamps" "$out/$name.log" || true
  # The t/s of each test, from its record (one JSON object per line).
  local rates
  rates=$(sed -n 's/.*"n_prompt": \([0-9]*\), "n_gen": \([0-9]*\),.*"avg_ts": \([0-9.e+-]*\),.*/  pp\1 tg\2: \3 t\/s/p' "$out/$name.jsonl")
  if [ -z "$rates" ] || ! grep -q "GPU census" "$out/$name.log"; then
    echo "gpu_bench: $name: no t/s record or GPU census to read (bench's output changed?)"
    failures=$((failures + 1))
  fi
  echo "$rates"
}
if [ "$smoke" = 1 ]; then
  bench all-gpu -ngl 99 -p 16 -n 4 -r 1
  bench users-6gb -ngl 99 -ncmoe 99 --vram-budget 6144 -p 16 -n 4 -r 1
  bench all-gpu-exact -ngl 99 -p 0 -n 2 -r 1 --gpu-kernels exact
  stamp "done: results in $out"
  exit $((failures > 0))
fi
bench all-gpu -ngl 99 -p 512 -n 128 -r 3
bench users-6gb -ngl 99 -ncmoe 99 --vram-budget 6144 -p 512 -n 128 -r 3
bench all-gpu-exact -ngl 99 -p 0 -n 16 -r 1 --gpu-kernels exact
bench users-6gb-exact -ngl 99 -ncmoe 99 --vram-budget 6144 -p 0 -n 16 -r 1 --gpu-kernels exact
stamp "done: results in $out"
exit $((failures > 0))
