#!/usr/bin/env bash
# Runs the Windows build's GPU tests (moetier_gpu_tests.exe from scripts/build-windows.sh)
# under Wine on this machine's Vulkan driver: Wine's vulkan-1.dll forwards to the host's
# loader, so on a machine without a GPU that is Mesa's lavapipe (apt-get install
# mesa-vulkan-drivers). Wine's Vulkan needs an X display: without one, vkCreateInstance fails
# (VK_ERROR_INCOMPATIBLE_DRIVER), so the tests run inside xvfb-run (apt-get install xvfb xauth)
# unless DISPLAY is set.
#
#   scripts/windows-gpu-tests.sh [BUILD_WIN_DIR]    default: build-win
#
# By default a slice that dispatches every shader variant of src/gpu/vulkan/shaders/shaders.cmake
# at least once (all but copy_rows, which no operation uses), each checked against the CPU or
# the exact kernel: the kernel suites in full (every weight type of mat-vec, mat-mat and the
# expert products; norms, rope, router, combine, KV stores, DeltaNet), a few cases of the long
# shape sweeps (flash attention, plain and split; the fast DeltaNet kernel) and the smallest
# whole model (qwen35moe-tiny-mixed: every quant type) in each placement. About 40 s of test
# time on lavapipe on 2 busy cores; MOETIER_GPU_TEST_FILTER overrides it (a gtest filter; "*"
# runs every test, several times longer).
# Exit status: 0 all passed; 1 a test failed or the binary crashed; 77 no Vulkan device can
# be reached here (nothing was tested: the caller decides whether that fails CI); 2 usage.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-win}
exe=$build/tests/moetier_gpu_tests.exe
moetier=$build/moetier.exe
timeout_s=${MOETIER_GPU_TEST_TIMEOUT:-900}

kernels='GpuOps.*:Shapes/GpuDeltaRule.*:GpuFastDeltaRuleInput.*:AllWeightTypes/GpuMatmul.*:AllWeightTypes/GpuMatvec.*'
kernels+=':GpuMatvecErrors.*:GpuFlashAttentionTuning.*:GpuFlashAttentionScratch.*:GpuFlashAttentionErrors.*'
kernels+=':GpuStream.*:GpuDevice.*'
sweeps='Shapes/GpuFastDeltaRule.*/small_130:Shapes/GpuFastDeltaRule.*/tiny_decode:Shapes/GpuFastDeltaRule.*/real35b_decode'
sweeps+=':Shapes/GpuFlashAttention.*/qwen36_7rows_q8_0:Shapes/GpuFlashAttention.*/qwen36_1row_pos300_q4_0'
sweeps+=':Shapes/GpuFlashAttention.*/tiny_decode_20000keys_q4_0_q8_0'
model='Ref/GpuModel.PlacementsMatchLlamaCppAndTheCpu/qwen35moe_tiny_mixed'
filter=${MOETIER_GPU_TEST_FILTER:-$kernels:$sweeps:$model}

for f in "$exe" "$moetier"; do
  [ -f "$f" ] || { echo "windows-gpu-tests: $f not found (scripts/build-windows.sh moetier moetier_gpu_tests)" >&2; exit 2; }
done
wine=$(command -v wine64 || true)
[ -n "$wine" ] || { [ -x /usr/lib/wine/wine64 ] && wine=/usr/lib/wine/wine64; }
[ -n "$wine" ] || { echo "windows-gpu-tests: wine64 not found (apt-get install wine64)" >&2; exit 2; }
display=()
if [ -z "${DISPLAY:-}" ]; then
  command -v xvfb-run >/dev/null || { echo "windows-gpu-tests: no DISPLAY and no xvfb-run (apt-get install xvfb xauth)" >&2; exit 2; }
  display=(xvfb-run -a)
fi
export WINEDEBUG=-all

# Is a Vulkan device reachable from Wine? moetier.exe lists the devices ("no GPU: ..." if none).
devices=$("${display[@]}" timeout 120 "$wine" "$moetier" run --list-devices </dev/null 2>&1)
if ! printf '%s\n' "$devices" | grep -q '^0: '; then
  echo "windows-gpu-tests: SKIPPED: no Vulkan device reachable under Wine here:"
  printf '%s\n' "$devices" | sed 's/^/  /'
  exit 77
fi
echo "windows-gpu-tests: device $(printf '%s\n' "$devices" | grep -m1 '^0: ')"
echo "windows-gpu-tests: $exe --gtest_filter=$filter"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
MOETIER_REQUIRE_VULKAN=1 "${display[@]}" timeout "$timeout_s" "$wine" "$exe" --gtest_filter="$filter" \
  --gtest_color=no </dev/null >"$log" 2>&1
rc=$?
secs=$(( $(date +%s) - start ))
passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\..*/\1/p' "$log" | tail -n 1)
failed=$(grep -c '^\[  FAILED  \] .*(' "$log" || true)
skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\?,.*/\1/p' "$log" | tail -n 1)
if [ "$rc" -ne 0 ] || [ -z "$passed" ] || [ "${failed:-0}" -ne 0 ]; then
  grep -E '^\[  FAILED  \]|Failure|error' "$log" | head -n 60
  tail -n 20 "$log"
  [ "$rc" -eq 124 ] && echo "windows-gpu-tests: timed out after ${timeout_s} s"
  echo "windows-gpu-tests: FAILED: ${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped (exit $rc) in ${secs} s"
  exit 1
fi
echo "windows-gpu-tests: ${passed} passed, 0 failed, ${skipped:-0} skipped in ${secs} s"
