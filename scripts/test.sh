#!/usr/bin/env bash
# Sets up, builds and runs every test, as CI does:
#   1. the unit, kernel and end-to-end tests (ctest) on a Release build;
#   2. the GGUF robustness corpus and parser tests again under AddressSanitizer +
#      UndefinedBehaviorSanitizer, and the libFuzzer targets for the GGUF parser and the
#      server's HTTP/JSON request layer, each for a bounded time (MOETIER_FUZZ_SECONDS,
#      default 60), from one clang build;
#   3. the Windows build (scripts/build-windows.sh: MinGW-w64, PCRE2 and cpp-httplib from
#      Debian's source packages) and its tests under Wine (scripts/windows-tests.sh): unit and
#      kernel tests, reference logits bit-identical to the Linux build's, serve with the openai
#      npm client, the GPU tests through Wine's Vulkan on lavapipe.
# The server tests include one with the official `openai` npm package (tests/node), which
# this script installs with npm ci, and one of the web UI in headless Chromium (puppeteer-core;
# a missing browser fails it); so do the capability-v1 suite's tests (tools/eval/capability).
# The GPU tests run every Vulkan kernel and whole models on lavapipe (Mesa's Vulkan on the CPU).
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
(cd tests/node && npm ci --no-audit --no-fund --loglevel=error)
(cd tools/eval/capability && npm ci --no-audit --no-fund --loglevel=error)
export MOETIER_REQUIRE_NODE=1
export MOETIER_REQUIRE_CHROMIUM=1
# The GPU tests run on Mesa's lavapipe here; a missing Vulkan device fails them instead of skipping.
export MOETIER_REQUIRE_VULKAN=1
# The chat-template parity tests need Python's Jinja2 (setup.sh installs python3-jinja2).
export MOETIER_REQUIRE_JINJA2=1
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMOETIER_REF_DIR="$ref_dir" >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build -j"$jobs" --output-on-failure | tee build/ctest.log
n_ctest=$(sed -n 's/.*tests passed, 0 tests failed out of \([0-9]*\).*/\1/p' build/ctest.log | tail -n 1)

echo "== 2/3 GGUF parser, damaged-file corpus and tensor formats under ASan+UBSan; libFuzzer (${MOETIER_FUZZ_SECONDS:-60} s each)"
# One clang build with the sanitizers serves both the sanitized tests and the fuzz targets.
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOETIER_FUZZ=ON \
  -DMOETIER_SANITIZE=ON -DMOETIER_TESTS=ON -DMOETIER_REF_DIR="$ref_dir" >/dev/null
cmake --build build-fuzz -j"$jobs" --target moetier_sanitized_tests fuzz_gguf fuzz_openai_request
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ./build-fuzz/tests/moetier_sanitized_tests | tee build-fuzz/gtest.log
n_asan=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\..*/\1/p' build-fuzz/gtest.log | tail -n 1)
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
mkdir -p "$corpus"/gguf "$corpus"/http
cp "$ref_dir"/models/qwen35moe-tiny-mixed.gguf "$corpus"/gguf/seed.gguf
./build-fuzz/tests/fuzz_gguf -max_total_time="${MOETIER_FUZZ_SECONDS:-60}" -max_len=65536 -rss_limit_mb=2048 \
  -timeout=10 -print_final_stats=1 "$corpus"/gguf 2>&1 | tail -n 20
echo '{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":5,"stop":["a","b"],"temperature":0.5,"top_p":0.9,"stream":true,"stream_options":{"include_usage":true},"logprobs":true,"top_logprobs":2,"chat_template_kwargs":{"enable_thinking":false}}' >"$corpus"/http/chat.json
echo '{"prompt":[1,2,3],"logprobs":3,"echo":true,"seed":4,"n_predict":-1,"cache_prompt":false}' >"$corpus"/http/tokens.json
echo '{"prompt":"<think>x\n</think>\n\ny","n":1,"top_k":3,"reasoning_format":"none"}' >"$corpus"/http/text.json
echo '{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer","minimum":3,"maximum":120},"b":{"type":"string","pattern":"^[a-z]{2,5}$"}},"required":["a"]}}}],"tool_choice":"required","n":2,"logit_bias":{"5":-1}}' >"$corpus"/http/tools.json
echo '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"array","items":{"enum":["a",1,null]},"maxItems":3}}}}' >"$corpus"/http/schema.json
echo '{"prompt":["a",5,"b"],"n_probs":3,"grammar":"root ::= [a-c]+ (\"x\" | r)?\nr ::= \"y\"{1,3}","input_prefix":"p","input_suffix":"s"}' >"$corpus"/http/native.json
./build-fuzz/tests/fuzz_openai_request -max_total_time="${MOETIER_FUZZ_SECONDS:-60}" -max_len=8192 -rss_limit_mb=2048 \
  -timeout=10 -print_final_stats=1 "$corpus"/http 2>&1 | tail -n 8

echo "== 3/3 Windows: moetier.exe and its tests cross-built with MinGW-w64, run under Wine"
JOBS=$jobs MOETIER_REF_DIR="$ref_dir" scripts/build-windows.sh
MOETIER_REF_DIR="$ref_dir" scripts/windows-tests.sh build/moetier | tee build-win/windows-tests.log
n_win=$(sed -n 's/^windows: \([0-9]*\) passed, 0 failed$/\1/p' build-win/windows-tests.log | tail -n 1)

# One closing line in the plain "N passed, N failed" form (each fuzz run counts as one).
echo "test: $(( ${n_ctest:-0} + ${n_asan:-0} + 2 + ${n_win:-0} )) passed, 0 failed"
