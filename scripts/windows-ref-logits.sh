#!/usr/bin/env bash
# Checks that the Windows build computes the Linux build's logits bit for bit: for every
# reference model (MOETIER_REF_DIR/models/*.gguf) and every setting below, runs
#   moetier logits -m MODEL -f PROMPT -o OUT --all SETTING
# with the Linux binary and with the Windows one under Wine, and compares the files byte
# for byte. Prints one line per model, prompt and setting (the max |Δ| over the logits when
# the bytes differ) and exits 1 on any difference or failed run.
#
#   scripts/windows-ref-logits.sh LINUX_BIN WINDOWS_EXE
#
# Environment: MOETIER_REF_DIR (default ../shared/ref), PROMPTS (prompt ids, default
# "p5_long": 615–752 tokens, two micro-batches, every layer kind), WINE (default
# /usr/lib/wine/wine64), RUN_TIMEOUT (seconds per run, default 300).
# Needs python3 (only to compute the max |Δ| of files that differ).
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 LINUX_BIN WINDOWS_EXE" >&2
  exit 2
fi
linux_bin=$1
windows_exe=$2
root=$(cd "$(dirname "$0")/.." && pwd)
ref_dir=${MOETIER_REF_DIR:-$(cd "$root/.." && pwd)/shared/ref}
prompts=${PROMPTS:-p5_long}
wine=${WINE:-/usr/lib/wine/wine64}
run_timeout=${RUN_TIMEOUT:-300}
settings=("" "-t 1" "-t 2" "--cpu-isa avx2" "--cpu-isa scalar" "-fa off")

for f in "$linux_bin" "$windows_exe"; do
  [ -f "$f" ] || { echo "$0: no file '$f'" >&2; exit 2; }
done
shopt -s nullglob
models=("$ref_dir"/models/*.gguf)
[ ${#models[@]} -gt 0 ] || { echo "$0: no models in $ref_dir/models" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

max_abs_diff() {
  python3 - "$1" "$2" <<'EOF'
import array, math, sys
a, b = array.array('f'), array.array('f')
a.frombytes(open(sys.argv[1], 'rb').read())
b.frombytes(open(sys.argv[2], 'rb').read())
if len(a) != len(b):
    print(f"sizes differ: {len(a)} vs {len(b)} values")
else:
    d = max((abs(x - y) if not (math.isnan(x) and math.isnan(y)) else 0.0 for x, y in zip(a, b)), default=0.0)
    n = sum(1 for x, y in zip(a, b) if x != y and not (math.isnan(x) and math.isnan(y)))
    print(f"max |diff| {d:.3g} ({n} of {len(a)} values differ)")
EOF
}

failures=0
for model in "${models[@]}"; do
  name=$(basename "$model" .gguf)
  for prompt_id in $prompts; do
    prompt=$ref_dir/prompts/$prompt_id.txt
    [ -f "$prompt" ] || { echo "$0: no prompt '$prompt'" >&2; exit 2; }
    for setting in "${settings[@]}"; do
      label="$name $prompt_id ${setting:-default}"
      lin=$tmp/linux.bin
      win=$tmp/windows.bin
      rm -f "$lin" "$win"
      # shellcheck disable=SC2086  # a setting is several words
      if ! timeout "$run_timeout" "$linux_bin" logits -m "$model" -f "$prompt" -o "$lin" --all $setting \
          >"$tmp/linux.log" 2>&1; then
        echo "FAIL  $label: the Linux run failed: $(tail -n 1 "$tmp/linux.log")"
        failures=$((failures + 1))
        continue
      fi
      # shellcheck disable=SC2086
      if ! WINEDEBUG=-all timeout "$run_timeout" "$wine" "$windows_exe" logits -m "$model" -f "$prompt" -o "$win" \
          --all $setting </dev/null >"$tmp/windows.log" 2>&1; then
        echo "FAIL  $label: the Windows run failed or timed out: $(tail -n 1 "$tmp/windows.log")"
        failures=$((failures + 1))
        continue
      fi
      if cmp -s "$lin" "$win"; then
        echo "same  $label ($(stat -c %s "$lin") bytes)"
      else
        echo "DIFF  $label: $(max_abs_diff "$lin" "$win")"
        failures=$((failures + 1))
      fi
    done
  done
done

if [ "$failures" -gt 0 ]; then
  echo "windows-ref-logits: $failures of the runs differ or failed"
  exit 1
fi
echo "windows-ref-logits: every run gave the same bytes"
