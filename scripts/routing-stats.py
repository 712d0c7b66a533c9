#!/usr/bin/env python3
"""Expert-reuse statistics of a MoE routing trace (what an expert cache would see).

Trace format (text, one line per token per MoE layer, any order of layers; lines that are
empty or start with '#' are ignored):

    layer token_index e1 e2 ... ek

`layer` and `token_index` are integers (token_index counts the sequence's tokens from 0,
prompt included), e1..ek the expert ids the router selected for that token in that layer.
A token index that appears twice in one layer (e.g. a second run appended to the file)
starts a new sequence for that layer: its statistics restart from an empty history.

Per layer, over the selections of tokens >= --warmup of each sequence (earlier tokens only
fill the history and the cache):
  median_dist  median reuse distance: tokens since the same expert was last selected in this
               layer (inf when never before in this sequence)
  within1/8    fraction of selections whose expert was selected within the last 1 / 8 tokens
  lru@P%       hit rate of an LRU cache holding P% of the layer's experts (selections of one
               token looked up in order, each inserted or refreshed right after its lookup)
  top10%       share of all selections (warm-up included) that went to the 10% most used
               experts: 0.10 would be perfectly even; short traces read higher by chance
               (uniform routing of 256 tokens x 8 over 256 experts gives about 0.17)
The last row is the mean over layers. --json prints the same numbers as JSON.

Usage: scripts/routing-stats.py TRACE [--experts N] [--warmup W] [--json]
"""

import argparse
import json
import math
import statistics
import sys
from collections import OrderedDict, defaultdict

CACHE_FRACTIONS = (0.10, 0.20, 0.40, 0.60)


def read_trace(path):
    """Returns {layer: [sequence, ...]}, a sequence being a list of expert-id lists by token."""
    layers = defaultdict(list)
    last_token = {}
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split()
            if len(fields) < 3:
                sys.exit(f"{path}:{line_no}: expected 'layer token e1 ... ek'")
            layer, token = int(fields[0]), int(fields[1])
            experts = [int(x) for x in fields[2:]]
            if layer not in last_token or token <= last_token[layer]:
                layers[layer].append([])  # a new sequence
            seq = layers[layer][-1]
            while len(seq) < token:  # tolerate gaps (tokens the trace left out)
                seq.append([])
            seq.append(experts)
            last_token[layer] = token
    return layers


def layer_stats(sequences, n_expert, warmup):
    distances = []
    counts = defaultdict(int)
    capacities = [max(1, round(fr * n_expert)) for fr in CACHE_FRACTIONS]
    hits = [0] * len(capacities)
    lookups = 0
    for seq in sequences:
        last_seen = {}
        caches = [OrderedDict() for _ in capacities]
        for t, experts in enumerate(seq):
            warm = t >= warmup
            for e in experts:
                counts[e] += 1
                if warm:
                    distances.append(t - last_seen[e] if e in last_seen else math.inf)
                    lookups += 1
                for i, cap in enumerate(capacities):
                    cache = caches[i]
                    if e in cache:
                        if warm:
                            hits[i] += 1
                        cache.move_to_end(e)
                    else:
                        cache[e] = True
                        if len(cache) > cap:
                            cache.popitem(last=False)
            for e in experts:
                last_seen[e] = t
    total = sum(counts.values())
    top = sorted(counts.values(), reverse=True)[: max(1, math.ceil(0.10 * n_expert))]
    n = len(distances)
    return {
        "selections": n,
        "median_dist": statistics.median(distances) if n else math.nan,
        "within1": sum(d <= 1 for d in distances) / n if n else math.nan,
        "within8": sum(d <= 8 for d in distances) / n if n else math.nan,
        **{f"lru@{round(fr * 100)}%": (h / lookups if lookups else math.nan) for fr, h in zip(CACHE_FRACTIONS, hits)},
        "top10%": sum(top) / total if total else math.nan,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--experts", type=int, default=0, help="experts per layer (default: largest id + 1)")
    ap.add_argument("--warmup", type=int, default=32, help="tokens per sequence that only fill history (default 32)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    layers = read_trace(args.trace)
    if not layers:
        sys.exit(f"{args.trace}: no trace lines")
    n_expert = args.experts or 1 + max(e for seqs in layers.values() for seq in seqs for tok in seq for e in tok)
    rows = {layer: layer_stats(layers[layer], n_expert, args.warmup) for layer in sorted(layers)}
    keys = [k for k in next(iter(rows.values())) if k != "selections"]
    mean = {k: statistics.fmean(r[k] for r in rows.values()) for k in keys}
    if args.json:
        print(json.dumps({"n_expert": n_expert, "warmup": args.warmup, "layers": rows, "mean": mean}, indent=1))
        return
    print(f"{n_expert} experts per layer, warm-up {args.warmup} tokens")
    print(f"{'layer':>5} " + " ".join(f"{k:>11}" for k in keys))
    for layer, r in rows.items():
        print(f"{layer:>5} " + " ".join(f"{r[k]:>11.3f}" for k in keys))
    print(f"{'mean':>5} " + " ".join(f"{mean[k]:>11.3f}" for k in keys))


if __name__ == "__main__":
    main()
