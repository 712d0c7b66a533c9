#!/bin/sh
# scripts/serve_load.py against a real `moetier serve` on a tiny reference model: a plain load
# run and a --compare-clients run (rounds alternating the client counts) complete with no
# failed request and report what they promise. Skipped (77) without python3.
# usage: serve_load_test.sh MOETIER MODEL SERVE_LOAD_PY
set -u
moetier=$1 model=$2 script=$3
command -v python3 >/dev/null 2>&1 || { echo "serve_load_test: no python3" >&2; exit 77; }
dir=$(mktemp -d) || exit 1
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM
"$moetier" serve -m "$model" -np 2 -c 1024 -t 1 --port 0 > "$dir/serve.log" 2>&1 &
server_pid=$!
url=
for _ in $(seq 1 100); do
  url=$(sed -n 's/^moetier: listening on \(http:[^ ]*\).*/\1/p' "$dir/serve.log")
  [ -n "$url" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$dir/serve.log" >&2; echo "serve_load_test: the server exited" >&2; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { cat "$dir/serve.log" >&2; echo "serve_load_test: the server did not start" >&2; exit 1; }

python3 "$script" --url "$url" --clients 2 --requests 4 --max-tokens 4 --temperature 0 --json "$dir/plain.json" > /dev/null || exit 1
python3 "$script" --url "$url" --compare-clients 1,2 --rounds 2 --requests-per-client 2 --max-tokens 4 --temperature 0 \
  --json "$dir/compare.json" > /dev/null 2> "$dir/compare.err" || { cat "$dir/compare.err" >&2; exit 1; }
python3 - "$dir/plain.json" "$dir/compare.json" <<'PY' || exit 1
import json, sys
plain = json.load(open(sys.argv[1]))
assert plain["requests"] == 4 and plain["failed"] == 0 and 0 < plain["completion_tokens"] <= 16, plain
cmp = json.load(open(sys.argv[2]))
assert cmp["failed"] == 0 and cmp["compare_clients"] == [1, 2] and cmp["rounds"] == 2, cmp
for c in ("1", "2"):
    assert len(cmp["tokens_per_second"][c]) == 2 and all(v > 0 for v in cmp["tokens_per_second"][c]), cmp
    r = cmp["ratio_to_first"][c]
    assert len(r["per_round"]) == 2 and r["min"] <= r["median"] <= r["max"], cmp
assert cmp["ratio_to_first"]["1"]["per_round"] == [1.0, 1.0], cmp
# Each round's ratio is that round's 2-client t/s over its 1-client t/s.
for i in range(2):
    want = cmp["tokens_per_second"]["2"][i] / cmp["tokens_per_second"]["1"][i]
    assert abs(cmp["ratio_to_first"]["2"]["per_round"][i] - want) < 2e-3, cmp
print("serve_load_test: plain", plain["tokens_per_second"], "t/s; 2 clients / 1:", cmp["ratio_to_first"]["2"])
PY
# Bad or conflicting arguments are refused.
for bad in "--compare-clients 2" "--compare-clients 1,1" "--compare-clients 1,2 --clients 4" "--rounds 2" "--requests 0"; do
  # shellcheck disable=SC2086  # the arguments are meant to split
  if python3 "$script" --url "$url" $bad > /dev/null 2>&1; then
    echo "serve_load_test: '$bad' was accepted" >&2
    exit 1
  fi
done
echo "serve_load_test: ok"
