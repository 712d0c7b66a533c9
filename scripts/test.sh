#!/usr/bin/env bash
# Sets up, builds and runs every test, as CI does:
#   1. the unit, kernel and end-to-end tests (ctest) on a Release build;
#   2. the GGUF robustness corpus and parser tests again under AddressSanitizer +
#      UndefinedBehaviorSanitizer;
#   3. the libFuzzer target for the GGUF parser (clang), for a bounded time
#      (MOETIER_FUZZ_SECONDS, default 60).
# Reference data is read from ../shared/ref (override with MOETIER_REF_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
ref_dir="${MOETIER_REF_DIR:-$(cd .. && pwd)/shared/ref}"
if [ ! -f "$ref_dir/README.md" ]; then
  echo "test: reference data not found at $ref_dir (set MOETIER_REF_DIR)" >&2
  exit 1
fi

echo "== 1/3 release build and tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMOETIER_REF_DIR="$ref_dir" >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build -j"$jobs" --output-on-failure | tee build/ctest.log
n_ctest=$(sed -n 's/.*tests passed, 0 tests failed out of \([0-9]*\).*/\1/p' build/ctest.log | tail -n 1)

echo "== 2/3 GGUF parser, damaged-file corpus and tensor formats under ASan+UBSan"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOETIER_SANITIZE=ON -DMOETIER_REF_DIR="$ref_dir" >/dev/null
cmake --build build-asan -j"$jobs" --target moetier_sanitized_tests
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ./build-asan/tests/moetier_sanitized_tests | tee build-asan/gtest.log
n_asan=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\..*/\1/p' build-asan/gtest.log | tail -n 1)

echo "== 3/3 libFuzzer on the GGUF parser (${MOETIER_FUZZ_SECONDS:-60} s)"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOETIER_FUZZ=ON \
  -DMOETIER_SANITIZE=ON -DMOETIER_TESTS=ON -DMOETIER_REF_DIR="$ref_dir" >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_gguf
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp "$ref_dir"/models/qwen35moe-tiny-mixed.gguf "$corpus"/seed.gguf
./build-fuzz/tests/fuzz_gguf -max_total_time="${MOETIER_FUZZ_SECONDS:-60}" -max_len=65536 -rss_limit_mb=2048 \
  -timeout=10 -print_final_stats=1 "$corpus" 2>&1 | tail -n 20
# One closing line in the plain "N passed, N failed" form (the fuzz run counts as one).
echo "test: $(( ${n_ctest:-0} + ${n_asan:-0} + 1 )) passed, 0 failed"
