#!/usr/bin/env bash
# Runs the Windows build (build-win/, made by scripts/build-windows.sh) under Wine, as CI does:
#   1. the unit tests (the tokenizer corpus included) and the kernel tests, each binary in one
#      Wine process;
#   2. the reference logits: moetier.exe against the Linux build, bit for bit, on every model
#      in the reference data (scripts/windows-ref-logits.sh);
#   3. `serve` under Wine driven from the Linux side: the official openai npm client
#      (tests/node/openai_client.mjs) and the web UI's page;
#   4. the GPU tests on Mesa's lavapipe through Wine's Vulkan (needs an X display: xvfb-run),
#      when the Windows build has them (scripts/windows-gpu-tests.sh).
#
#   scripts/windows-tests.sh [LINUX_MOETIER]     default: build/moetier
#
# Prints one closing line "windows: N passed, M failed" and exits non-zero on any failure.
# Environment: MOETIER_REF_DIR (default ../shared/ref), WINEPREFIX (Wine's default ~/.wine;
# created on first use).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
linux_bin=${1:-build/moetier}
win=$root/build-win
ref_dir=${MOETIER_REF_DIR:-$(cd "$root/.." && pwd)/shared/ref}
wine=$(command -v wine64 || true)
[ -n "$wine" ] || { [ -x /usr/lib/wine/wine64 ] && wine=/usr/lib/wine/wine64; }
if [ -z "$wine" ]; then
  echo "windows-tests: wine64 not found (apt-get install wine64)" >&2
  exit 1
fi
for f in "$win/moetier.exe" "$win/tests/moetier_unit_tests.exe" "$win/tests/moetier_kernel_tests.exe" "$linux_bin"; do
  [ -f "$f" ] || { echo "windows-tests: $f missing (build it first: scripts/build-windows.sh)" >&2; exit 1; }
done
export WINEDEBUG=-all
export WINEPREFIX=${WINEPREFIX:-${HOME:-$win}/.wine}
# No Mono or Gecko installer prompts when the prefix is created: the tests need neither.
export WINEDLLOVERRIDES="mscoree,mshtml="
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  echo "windows-tests: creating the Wine prefix $WINEPREFIX"
  "$wine" wineboot --init </dev/null >/dev/null 2>&1 || true
fi

passed=0
failed=0
failures=()
count() {  # count NAME RESULT(0 = pass)
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$1"); fi
}

# A gtest binary in one Wine process; its passed and failed tests are added to the totals.
gtest() {
  local name=$1 exe=$2 log=$win/$1.log rc=0
  shift 2
  echo "== windows: $name"
  (cd "$win" && timeout 1800 "$wine" "$exe" --gtest_color=no "$@" </dev/null) >"$log" 2>&1 || rc=$?
  grep -a -E '^\[  (FAILED|PASSED)  \]|^\[==========\]' "$log" | tail -n 20 || true
  local p f
  p=$(LC_ALL=C sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\..*/\1/p' "$log" | tail -n 1)
  f=$(LC_ALL=C sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\?, listed below.*/\1/p' "$log" | tail -n 1)
  passed=$((passed + ${p:-0}))
  if [ -n "$f" ]; then
    failed=$((failed + f))
    failures+=("$name: $f test(s) (see $log)")
  elif [ "$rc" -ne 0 ] || [ -z "$p" ]; then
    failed=$((failed + 1))
    failures+=("$name: exit status $rc without a gtest summary (see $log)")
    tail -n 30 "$log"
  fi
}

echo "== windows: moetier.exe needs no DLL beyond Windows' own"
objdump=$(command -v x86_64-w64-mingw32-objdump || command -v objdump)
dlls=$("$objdump" -p "$win/moetier.exe" | sed -n 's/^[[:space:]]*DLL Name: //p' | tr 'A-Z' 'a-z' | sort -u)
echo "imports:" $dlls
foreign=$(echo "$dlls" | grep -vxE 'kernel32\.dll|advapi32\.dll|ws2_32\.dll|bcrypt\.dll|msvcrt\.dll|ntdll\.dll|user32\.dll|shell32\.dll|ole32\.dll|oleaut32\.dll|dxgi\.dll|api-ms-win-[a-z0-9-]*\.dll' || true)
if [ -n "$foreign" ]; then echo "windows-tests: moetier.exe imports DLLs Windows does not have:" $foreign; fi
count "no DLLs beyond Windows' own" "$([ -z "$foreign" ] && echo 0 || echo 1)"

gtest unit tests/moetier_unit_tests.exe
gtest kernel tests/moetier_kernel_tests.exe

echo "== windows: reference logits, moetier.exe against $linux_bin"
rc=0
scripts/windows-ref-logits.sh "$linux_bin" "$win/moetier.exe" || rc=$?
count "reference logits bit-identical to the Linux build" "$rc"

echo "== windows: serve under Wine, the openai npm client from Linux"
serve_smoke() {
  local port log=$win/serve.log pid i
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$wine" "$win/moetier.exe" serve -m "$ref_dir/models/qwen35moe-small-ud_mix.gguf" -t 2 -np 2 --port "$port" \
    --api-key test-key --alias moetier-small </dev/null >"$log" 2>&1 &
  pid=$!
  for i in $(seq 1 180); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 1
  done
  local ok=0
  if ! curl -sf "http://127.0.0.1:$port/health" >/dev/null; then
    echo "windows-tests: moetier.exe serve did not come up:"; tail -n 20 "$log"; ok=1
  else
    (cd tests/node && node openai_client.mjs "http://127.0.0.1:$port/v1" test-key) || ok=1
    curl -sf "http://127.0.0.1:$port/" | grep -qi "<html" || { echo "windows-tests: the web UI page is missing"; ok=1; }
  fi
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  return $ok
}
rc=0
serve_smoke || rc=$?
count "serve + openai client" "$rc"

wineserver=$(dirname "$wine")/wineserver
if [ -f "$win/tests/moetier_gpu_tests.exe" ] && [ -x scripts/windows-gpu-tests.sh ]; then
  echo "== windows: GPU tests on lavapipe through Wine's Vulkan"
  # A Wine server started without an X display keeps its processes from reaching Vulkan: the
  # GPU tests (under xvfb-run) start a fresh one.
  "$wineserver" -k 2>/dev/null || true
  "$wineserver" -w 2>/dev/null || true
  rc=0
  scripts/windows-gpu-tests.sh "$win" | tee "$win/gpu-tests.log" || rc=$?
  n_gpu=$(sed -n 's/^windows-gpu-tests: \([0-9]*\) passed, 0 failed.*/\1/p' "$win/gpu-tests.log" | tail -n 1)
  if [ "$rc" -eq 0 ] && [ -n "$n_gpu" ]; then
    passed=$((passed + n_gpu))
  else
    count "GPU tests under Wine (exit $rc)" 1
  fi
fi

# Wine's server (and any process left) ends with the prefix's last user.
"$wineserver" -k 2>/dev/null || true
if [ ${#failures[@]} -gt 0 ]; then
  printf 'windows-tests: FAILED: %s\n' "${failures[@]}" >&2
fi
echo "windows: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
