#!/usr/bin/env bash
# Runs llama.cpp's own HTTP server test suite (tools/server/tests, pytest) against
# `moetier serve`, to see where moetier differs from llama-server.
#
#   scripts/llama-server-suite.sh LLAMA_CPP_DIR [pytest args, e.g. unit/test_completion.py]
#
# The suite starts `llama-server` with flags that download small llama models from Hugging
# Face (--hf-repo/--hf-file/--model-url). A wrapper maps those to a local moetier model
# (MOETIER_SUITE_MODEL, default the tiny qwen3moe reference model) and passes every other
# flag through unchanged, so flags moetier does not know still fail as they would for a user
# (SUITE_FLAGS below selects the other mode: unknown flags dropped). Tests marked slow (real
# models of several GB) are left out as in llama.cpp's own tests.sh; SLOW_TESTS=1 keeps them.
# Python: Debian's python3-pytest, -requests, -aiohttp, -prometheus-client, -numpy, -wget.
# Debian 12 has no `openai` Python package; without one, a stub is put on the path so the
# files that import it can be collected, and the tests that use it fail as "not runnable".
# Output: pytest's report, a JUnit XML file and a per-file summary under $OUT_DIR.
set -euo pipefail
llama_dir="${1:?usage: $0 LLAMA_CPP_DIR [pytest args]}"
shift
root="$(cd "$(dirname "$0")/.." && pwd)"
ref_dir="${MOETIER_REF_DIR:-$(cd "$root/.." && pwd)/shared/ref}"
model="${MOETIER_SUITE_MODEL:-$ref_dir/models/qwen3moe-tiny-f32.gguf}"
bin="${MOETIER_BIN:-$root/build/moetier}"
out_dir="${OUT_DIR:-$root/build/llama-server-suite}"
mkdir -p "$out_dir/shim/openai"
tests_dir="$llama_dir/tools/server/tests"
[ -d "$tests_dir/unit" ] || { echo "no $tests_dir/unit" >&2; exit 1; }
[ -x "$bin" ] || { echo "no moetier binary at $bin (build it first)" >&2; exit 1; }

# SUITE_FLAGS=pass-through (the default): every other llama-server flag reaches moetier as is, so a
# flag moetier does not know stops the server as it would stop a user's.
# SUITE_FLAGS=drop-unknown: flags that `moetier serve --help` does not list are dropped, with their
# value (the next argument unless it looks like a flag), and named in $OUT_DIR/dropped-flags.txt:
# this measures the API alone.
suite_flags="${SUITE_FLAGS:-pass-through}"
case "$suite_flags" in pass-through|drop-unknown) ;; *) echo "SUITE_FLAGS: pass-through or drop-unknown" >&2; exit 1 ;; esac
# The flags moetier lists: "  -c, --ctx-size N   help" -> "-c" and "--ctx-size", one a line.
"$bin" serve --help | sed -n 's/^  \(-[^ ].*\)$/\1/p' | sed 's/  .*//' | tr ',' '\n' |
  awk '{print $1}' | grep '^-' | sort -u >"$out_dir/moetier-flags.txt"
: >"$out_dir/dropped-flags.txt"

cat >"$out_dir/llama-server" <<WRAP
#!/usr/bin/env bash
# llama-server's command line -> moetier serve: download flags become the local model.
args=()
have_model=0
drop_unknown=\$( [ "$suite_flags" = drop-unknown ] && echo 1 || echo 0 )
# moetier, as llama.cpp, takes '_' for '-' in a long flag (--backend_sampling).
known() { local f="\$1"; [[ "\$f" == --* ]] && f="\${f//_/-}"; grep -qxF -e "\$f" "$out_dir/moetier-flags.txt"; }
is_value() { [ \$# -gt 0 ] && { [[ "\$1" != -* ]] || [[ "\$1" =~ ^-[0-9.]+\$ ]]; }; }
while [ \$# -gt 0 ]; do
  case "\$1" in
    --hf-repo|-hfr|--hf-file|-hff|--model-url|-mu) shift 2 ;;
    -hf) shift 2 ;;
    --embedding|--embeddings|--reranking|--rerank) shift ;;  # no such endpoints: their tests fail on the API
    --pooling) shift 2 ;;
    --model-draft|-md) args+=("\$1" "$model"); shift 2 ;;
    -m|--model) have_model=1; args+=("\$1" "\$2"); shift 2 ;;
    *)
      name="\${1%%=*}"
      # A value (of a flag kept before it) is not a flag: only flags are looked up.
      if [ \$drop_unknown = 1 ] && ! is_value "\$1" && ! known "\$name"; then
        inline=\$( [ "\$name" != "\$1" ] && echo 1 || echo 0 )  # --flag=value
        shift
        if [ \$inline = 0 ] && is_value "\$@"; then
          echo "\$name \$1" >>"$out_dir/dropped-flags.txt"; shift
        else
          echo "\$name" >>"$out_dir/dropped-flags.txt"
        fi
      else
        args+=("\$1"); shift
      fi ;;
  esac
done
[ \$have_model = 1 ] || args+=(-m "$model")
exec "$bin" serve "\${args[@]}"
WRAP
chmod +x "$out_dir/llama-server"

if ! /usr/bin/python3 -c 'import openai' 2>/dev/null; then
  cat >"$out_dir/shim/openai/__init__.py" <<'PY'
# Stand-in for the `openai` package (not in Debian 12): importable, unusable.
class OpenAI:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("not runnable here: the openai Python package is not installed")
class AsyncOpenAI(OpenAI):
    pass
class OpenAIError(Exception):
    pass
PY
  export PYTHONPATH="$out_dir/shim${PYTHONPATH:+:$PYTHONPATH}"
fi

export LLAMA_SERVER_BIN_PATH="$out_dir/llama-server"
cd "$tests_dir"
set +e
marker=(-m "not slow")
[ "${SLOW_TESTS:-}" = 1 ] && marker=()
/usr/bin/python3 -m pytest -q -p no:cacheprovider -o addopts="" "${marker[@]}" \
  --junitxml="$out_dir/junit.xml" "${@:-unit}" >"$out_dir/pytest.log" 2>&1
rc=$?
set -e
tail -n 3 "$out_dir/pytest.log"
/usr/bin/python3 - "$out_dir/junit.xml" <<'PY'
import sys, collections, xml.etree.ElementTree as ET
per = collections.OrderedDict()
for case in ET.parse(sys.argv[1]).iter("testcase"):
    f = case.get("classname", "?").split(".")[-1]
    s = per.setdefault(f, collections.Counter())
    if case.find("failure") is not None or case.find("error") is not None: s["failed"] += 1
    elif case.find("skipped") is not None: s["skipped"] += 1
    else: s["passed"] += 1
tot = collections.Counter()
for f, s in per.items():
    tot.update(s)
    print(f"{f:32s} passed {s['passed']:3d}  failed {s['failed']:3d}  skipped {s['skipped']:3d}")
print(f"{'total':32s} passed {tot['passed']:3d}  failed {tot['failed']:3d}  skipped {tot['skipped']:3d}")
PY
echo "flags: $suite_flags"
if [ -s "$out_dir/dropped-flags.txt" ]; then
  echo "dropped (flag, times):"
  awk '{print $1}' "$out_dir/dropped-flags.txt" | sort | uniq -c | awk '{printf "  %s %d\n", $2, $1}'
fi
exit 0
