#!/usr/bin/env python3
"""Interleaved A/B benchmark: moetier bench against llama.cpp's llama-bench.

Runs the two engines alternately (A B A B ...) on the same files with the same threads and
test sizes, in one sitting, as docs/benchmarking.md asks, and prints per test the median
tokens/s of each engine over the rounds and the ratio moetier / llama.cpp.

  scripts/ab_bench.py --llama-bench /path/to/llama-bench -m a.gguf -m b.gguf -p 512 -n 128 -t 2 --rounds 3

Both tools are called with -o json; every round's raw records are kept in --raw (JSON lines).
Flags for both tools go in one --extra argument written with '=' (it starts with a dash):
  --extra="-mmp 0"
and flags for one of them in --moetier-extra / --llama-extra, e.g. the users' AVX2 path on an
AVX-512 machine against a llama.cpp built without AVX-512:
  --llama-bench ~/llama.cpp/build-avx2/bin/llama-bench --moetier-extra="--cpu-isa avx2"
"""
import argparse
import json
import statistics
import subprocess
import sys


def run_json(cmd):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def test_name(rec):
    if rec.get("n_prompt", 0) and rec.get("n_gen", 0):
        name = f"pp{rec['n_prompt']}+tg{rec['n_gen']}"
    elif rec.get("n_prompt", 0):
        name = f"pp{rec['n_prompt']}"
    else:
        name = f"tg{rec['n_gen']}"
    if rec.get("n_depth", 0):
        name += f" @ d{rec['n_depth']}"
    # -mmp 0,1 gives one row per load mode: moetier records use_mmap, newer llama-benches
    # load_mode ("auto" and "mmap" map the file; "none" reads it, as -mmp 0 does).
    if "use_mmap" in rec:
        name += " mmap" if rec["use_mmap"] else " no-mmap"
    elif "load_mode" in rec:
        name += " no-mmap" if rec["load_mode"] in ("none", "dio") else " mmap"
    return name


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-bench", required=True, help="path to llama.cpp's llama-bench")
    ap.add_argument("--moetier", default="build/moetier", help="path to moetier (default build/moetier)")
    ap.add_argument("-m", "--model", action="append", required=True,
                    help="GGUF file (repeatable, or comma-separated as llama-bench takes them); each file is its own "
                         "pair of runs, so the engines alternate per file and moetier's --membw is measured per file")
    ap.add_argument("-p", default="512", help="prompt sizes (default 512)")
    ap.add_argument("-n", default="128", help="generation sizes (default 128)")
    ap.add_argument("-t", default="2", help="threads (default 2)")
    ap.add_argument("-r", default="3", help="repetitions per tool run (default 3)")
    ap.add_argument("--rounds", type=int, default=3, help="A/B rounds (default 3)")
    ap.add_argument("--extra", default="", help="extra flags for both tools, e.g. --extra='-mmp 0'")
    ap.add_argument("--moetier-extra", default="", help="extra flags for moetier only, e.g. --moetier-extra='--cpu-isa avx2'")
    ap.add_argument("--llama-extra", default="", help="extra flags for llama-bench only")
    ap.add_argument("--raw", default=None, help="write every record here (JSON lines)")
    args = ap.parse_args()
    args.model = [m for arg in args.model for m in arg.split(",") if m]

    common = ["-p", args.p, "-n", args.n, "-t", args.t, "-r", args.r, "-o", "json"] + args.extra.split()
    results = {}  # (model, test) -> {"llama.cpp": [ts...], "moetier": [ts...]}
    raw = open(args.raw, "w") if args.raw else None
    for rnd in range(args.rounds):
        for model in args.model:
            runs = [("llama.cpp", [args.llama_bench, "-m", model] + common + args.llama_extra.split()),
                    ("moetier", [args.moetier, "bench", "-m", model] + common + args.moetier_extra.split())]
            if rnd % 2 == 1:  # alternate which engine goes first: B A in odd rounds
                runs.reverse()
            for engine, cmd in runs:
                for rec in run_json(cmd):
                    key = (model, test_name(rec))
                    results.setdefault(key, {}).setdefault(engine, []).append(rec["avg_ts"])
                    if raw:
                        raw.write(json.dumps({"round": rnd, "engine": engine, **rec}) + "\n")
    print(f"| model | test | llama.cpp t/s | moetier t/s | ratio |")
    print(f"|---|---|---|---|---|")
    for (model, test), by_engine in results.items():
        a = statistics.median(by_engine.get("llama.cpp", [float("nan")]))
        b = statistics.median(by_engine.get("moetier", [float("nan")]))
        print(f"| {model.split('/')[-1]} | {test} | {a:.2f} | {b:.2f} | {b / a:.2f}x |")


if __name__ == "__main__":
    main()
