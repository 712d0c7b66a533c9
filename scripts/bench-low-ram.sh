#!/usr/bin/env bash
# Generation speed of moetier and llama.cpp on a model bigger than the RAM left over (a 16 GB
# laptop with a 20 GB model), measured on a machine with more RAM:
#   1. scripts/hold-ram.py holds anonymous memory until MemAvailable is LEAVE_GIB, and keeps
#      that amount held (fixed) until the end;
#   2. per engine run, when /proc/sys/vm/drop_caches is writable (root), the page cache is
#      dropped first, so each engine starts with none of the file cached (the second one
#      would otherwise inherit the first one's pages);
#   3. `moetier bench` and llama-bench run alternately, both -p 0 -n 64 -t 2 -r 3 and their
#      default flags, while MemAvailable, the engine's read_bytes (/proc/PID/io) and the
#      model's block device (/proc/diskstats) are sampled once a second;
#   4. a table: t/s, GB the engine read from storage and its average rate, the device's
#      average read GB/s over the run (other processes included), the lowest MemAvailable.
#
#   scripts/bench-low-ram.sh MODEL.gguf LEAVE_GIB [extra moetier bench args]
#
# Environment: MOETIER (default build/moetier), LLAMA_BENCH (default: llama-bench on PATH,
# else /work/tmp/llama-build/bin/llama-bench), LLAMA_EXTRA (extra llama-bench args),
# N_GEN (64), THREADS (2), REPS (3), ROUNDS (1: one run of each engine; more alternate the
# order A B, B A, ...), NO_DROP=1 (never drop caches), OUT (default out/bench-low-ram/<time>).
# The holder is always stopped on exit. If the holder dies during a run (the OOM killer
# picks it first), the results are marked invalid: the engine had more RAM than LEAVE_GIB.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"

if [ $# -lt 2 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
  [ $# -lt 2 ] && exit 2 || exit 0
fi
model="$1"; leave="$2"; shift 2
extra=("$@")
[ -r "$model" ] || { echo "bench-low-ram: cannot read $model" >&2; exit 2; }
moetier="${MOETIER:-$root/build/moetier}"
if [ -n "${LLAMA_BENCH:-}" ]; then llama_bench="$LLAMA_BENCH"
elif command -v llama-bench >/dev/null 2>&1; then llama_bench="$(command -v llama-bench)"
else llama_bench=/work/tmp/llama-build/bin/llama-bench; fi
for b in "$moetier" "$llama_bench"; do
  [ -x "$b" ] || { echo "bench-low-ram: not an executable: $b (set MOETIER / LLAMA_BENCH)" >&2; exit 2; }
done
n_gen="${N_GEN:-64}"; threads="${THREADS:-2}"; reps="${REPS:-3}"; rounds="${ROUNDS:-1}"
read -r -a llama_extra <<< "${LLAMA_EXTRA:-}"
out="${OUT:-$root/out/bench-low-ram/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out"

# The block device holding the model: its line in /proc/diskstats (field 6: sectors read).
dev_majmin="$(stat -L -c '%Hd %Ld' "$model")"
disk_sectors() { awk -v mm="$dev_majmin" '($1" "$2)==mm {print $6; found=1} END {if (!found) print 0}' /proc/diskstats; }
mem_avail_kb() { awk '/^MemAvailable:/ {print $2}' /proc/meminfo; }
model_gib="$(awk -v b="$(stat -L -c %s "$model")" 'BEGIN {printf "%.2f", b / 2^30}')"

holder_pid=""
engine_pid=""
cleanup() {
  if [ -n "$engine_pid" ] && kill -0 "$engine_pid" 2>/dev/null; then
    pkill -TERM -P "$engine_pid" 2>/dev/null || true
    kill -TERM "$engine_pid" 2>/dev/null || true
  fi
  if [ -n "$holder_pid" ] && kill -0 "$holder_pid" 2>/dev/null; then
    kill -TERM "$holder_pid" 2>/dev/null || true
    wait "$holder_pid" 2>/dev/null || true
  fi
  rm -f "$out/holder.ready"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "bench-low-ram: model $model ($model_gib GiB), leaving ${leave} GiB available; results in $out"
python3 "$here/hold-ram.py" --leave "${leave}G" --ready-file "$out/holder.ready" > "$out/holder.log" 2>&1 &
holder_pid=$!
while [ ! -e "$out/holder.ready" ]; do
  if ! kill -0 "$holder_pid" 2>/dev/null; then
    wait "$holder_pid" && rc=0 || rc=$?
    holder_pid=""
    echo "bench-low-ram: the holder failed (exit $rc):" >&2; cat "$out/holder.log" >&2; exit 1
  fi
  sleep 0.5
done
grep '^hold-ram:' "$out/holder.log" | sed 's/^/bench-low-ram: /'

can_drop=0
if [ "${NO_DROP:-0}" != 1 ] && [ -w /proc/sys/vm/drop_caches ]; then can_drop=1; fi
[ "$can_drop" = 1 ] && echo "bench-low-ram: dropping the page cache before each engine run (drop_caches is writable)" \
  || echo "bench-low-ram: not dropping the page cache (drop_caches not writable or NO_DROP=1): a run may start with part of the file cached"

# run_engine NAME OUTFILE CMD...: runs CMD (stdout = JSON to OUTFILE) under a shell that, once
# the engine has been reaped, writes its own /proc/$$/io: a parent's counters include its
# reaped children's, so that file holds the engine's exact read_bytes. Meanwhile one sample a
# second: seconds, engine read_bytes, device sectors read, MemAvailable kB.
run_engine() {
  local name="$1" json="$2"; shift 2
  [ "$can_drop" = 1 ] && { sync; echo 1 > /proc/sys/vm/drop_caches; }
  local samples="$out/$name.samples" t0 s0
  t0=$(date +%s.%N); s0=$(disk_sectors)
  echo "bench-low-ram: + $*" | tee -a "$out/commands.txt"
  sh -c 'io=$1; shift; "$@"; rc=$?; cat /proc/$$/io > "$io"; exit $rc' sh "$out/$name.io" "$@" \
    > "$json" 2> "$out/$name.log" &
  local wrapper=$! child="" rb
  engine_pid=$wrapper
  : > "$samples"
  while kill -0 "$wrapper" 2>/dev/null; do
    [ -z "$child" ] && child="$(pgrep -P "$wrapper" | head -1 || true)"
    rb=""
    [ -n "$child" ] && rb="$(awk '/^read_bytes:/ {print $2}' "/proc/$child/io" 2>/dev/null || true)"
    echo "$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN {printf "%.1f", a - b}') ${rb:-NA} $(( $(disk_sectors) - s0 )) $(mem_avail_kb)" >> "$samples"
    sleep 1
  done
  local rc=0
  wait "$wrapper" || rc=$?
  engine_pid=""
  local wall; wall=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN {printf "%.1f", a - b}')
  echo "wall $wall sectors $(( $(disk_sectors) - s0 )) rc $rc" > "$out/$name.summary"
  if [ "$rc" != 0 ]; then echo "bench-low-ram: $name exited with $rc (see $out/$name.log)" >&2; fi
  if ! kill -0 "$holder_pid" 2>/dev/null; then
    echo "bench-low-ram: the holder died during $name (OOM killer?): the engine had more than ${leave} GiB; results INVALID" >&2
    holder_pid=""
    exit 1
  fi
}

common=(-m "$model" -p 0 -n "$n_gen" -t "$threads" -r "$reps" -o json)
for ((round = 1; round <= rounds; round++)); do
  order=(moetier llama)
  (( round % 2 == 0 )) && order=(llama moetier)
  for e in "${order[@]}"; do
    if [ "$e" = moetier ]; then
      run_engine "moetier.r$round" "$out/moetier.r$round.json" "$moetier" bench "${common[@]}" "${extra[@]}"
    else
      run_engine "llama.r$round" "$out/llama.r$round.json" "$llama_bench" "${common[@]}" "${llama_extra[@]}"
    fi
  done
done

python3 - "$out" "$rounds" <<'EOF'
import json, os, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print()
print(f"{'engine':<9} {'round':>5} {'test':>6} {'t/s':>16} {'wall s':>7} {'read GB':>8} {'read GB/s':>9} {'disk GB/s':>9} {'MemAvail min GiB':>16}")
for r in range(1, rounds + 1):
    for e in ("moetier", "llama"):
        name = f"{e}.r{r}"
        summ = dict(zip(*[iter(open(f"{out}/{name}.summary").read().split())] * 2))
        wall = float(summ["wall"])
        try:
            recs = json.load(open(f"{out}/{name}.json"))
        except (OSError, ValueError):
            recs = []
        read = None
        try:
            for line in open(f"{out}/{name}.io"):
                if line.startswith("read_bytes:"):
                    read = int(line.split()[1])
        except OSError:
            pass
        mins = [int(l.split()[3]) for l in open(f"{out}/{name}.samples") if l.strip()]
        memmin = f"{min(mins) / 2**20:.2f}" if mins else "NA"
        gbps = int(summ["sectors"]) * 512 / 1e9 / wall if wall > 0 else 0.0
        rd = f"{read / 1e9:.2f}" if read is not None else "NA"
        rgbps = f"{read / 1e9 / wall:.2f}" if read is not None and wall > 0 else "NA"
        label = "llama.cpp" if e == "llama" else e
        if not recs:
            print(f"{label:<9} {r:>5} {'-':>6} {'failed':>16} {wall:>7.1f} {rd:>8} {rgbps:>9} {gbps:>9.2f} {memmin:>16}")
        for rec in recs:
            test = f"tg{rec.get('n_gen')}" if rec.get("n_prompt", 0) == 0 else f"pp{rec.get('n_prompt')}"
            ts = f"{rec['avg_ts']:.2f} ± {rec.get('stddev_ts', 0):.2f}"
            print(f"{label:<9} {r:>5} {test:>6} {ts:>16} {wall:>7.1f} {rd:>8} {rgbps:>9} {gbps:>9.2f} {memmin:>16}")
print()
print("read GB: what the engine read from storage (its /proc/PID/io read_bytes, load included);")
print("read GB/s: that / wall s (the engine's own average read rate);")
print("disk GB/s: the model's block device, sectors read over the engine's whole run (load included,")
print("other processes too) / wall s; MemAvail min: lowest MemAvailable sampled once a second.")
EOF
