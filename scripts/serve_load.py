#!/usr/bin/env python3
"""Load test for a running `moetier serve` (or any OpenAI-compatible server): N clients send
requests concurrently and the script reports failures, latency percentiles and throughput.

  scripts/serve_load.py --url http://127.0.0.1:8080 --clients 8 --requests 200 --max-tokens 32
  scripts/serve_load.py --url ... --stream --chat --json out.json
  scripts/serve_load.py --url ... --compare-clients 1,4 --rounds 3 --max-tokens 64 --temperature 0

Standard library only. Every request is checked: HTTP 200, a complete body (a finish_reason;
for streams the final `data: [DONE]`). Latency is per request, from sending to the last byte;
time to the first generated text is reported for streams. tokens/s = completion tokens of all requests /
wall time of the whole run.

--compare-clients A,B,... measures how aggregate throughput scales with concurrent streams (a
server with -np slots) on a noisy machine: it runs each client count in turn, --requests-per-client
requests per client, for --rounds rounds, alternating the order (A B, then B A, ...) so that a
machine slowing down or speeding up does not favour one count, and reports each count's tokens/s
per round and its ratio to the first count's in the same round (the median and the range).
"""
import argparse
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse

PROMPTS = ["The river", "def main():", "1 2 3 4", "Über den Wolken", "<html>", "東京の天気は", "Once upon a time",
           "SELECT * FROM"]


def one_request(url, args, index):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=args.timeout)
    prompt = PROMPTS[index % len(PROMPTS)]
    body = {"max_tokens": args.max_tokens, "temperature": args.temperature, "seed": index}
    if args.chat:
        path = "/v1/chat/completions"
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        path = "/v1/completions"
        body["prompt"] = prompt
    if args.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = "Bearer " + args.api_key
    t0 = time.perf_counter()
    first = None
    tokens = 0
    conn.request("POST", path, json.dumps(body), headers)
    resp = conn.getresponse()
    if resp.status != 200:
        return False, time.perf_counter() - t0, None, 0, f"HTTP {resp.status}: {resp.read()[:200]!r}"
    if args.stream:
        done = False
        finish = None
        buffer = b""
        while True:
            chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(1)
            if not chunk:
                break
            buffer += chunk
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                if not event.startswith(b"data: "):
                    continue
                payload = event[6:]
                if payload == b"[DONE]":
                    done = True
                    continue
                j = json.loads(payload)
                if "error" in j:
                    return False, time.perf_counter() - t0, first, 0, j["error"].get("message")
                for c in j.get("choices", []):
                    finish = c.get("finish_reason") or finish
                    delta = c.get("delta") or {}
                    if first is None and (c.get("text") or delta.get("content") or delta.get("reasoning_content")):
                        first = time.perf_counter() - t0  # time to the first generated text
                if "usage" in j:
                    tokens = j["usage"]["completion_tokens"]
        ok = done and finish is not None
        return ok, time.perf_counter() - t0, first, tokens, None if ok else "incomplete stream"
    j = json.loads(resp.read())
    ok = bool(j.get("choices")) and j["choices"][0].get("finish_reason") is not None
    return ok, time.perf_counter() - t0, None, j.get("usage", {}).get("completion_tokens", 0), None if ok else str(j)[:200]


def run_load(args, clients, n_requests):
    """n_requests requests from `clients` concurrent clients; returns (summary, failures)."""
    results = []
    lock = threading.Lock()
    counter = iter(range(n_requests))

    def worker():
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            try:
                r = one_request(args.url, args, i)
            except Exception as e:  # connection refused/reset, timeout
                r = (False, 0.0, None, 0, repr(e))
            with lock:
                results.append(r)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ok = [r for r in results if r[0]]
    failed = [r for r in results if not r[0]]
    lat = sorted(r[1] * 1000 for r in ok)
    ttft = sorted(r[2] * 1000 for r in ok if r[2] is not None)
    tokens = sum(r[3] for r in ok)

    def pct(v, p):
        return v[min(len(v) - 1, int(len(v) * p / 100))] if v else float("nan")

    summary = {
        "requests": len(results), "failed": len(failed), "clients": clients, "wall_s": round(wall, 3),
        "latency_ms_p50": round(pct(lat, 50), 1), "latency_ms_p99": round(pct(lat, 99), 1),
        "latency_ms_mean": round(statistics.mean(lat), 1) if lat else None,
        "ttft_ms_p50": round(pct(ttft, 50), 1) if ttft else None,
        "completion_tokens": tokens, "tokens_per_second": round(tokens / wall, 2) if wall > 0 else None,
        "requests_per_second": round(len(ok) / wall, 2) if wall > 0 else None,
    }
    return summary, failed


def compare_clients(args, counts):
    """Each count in turn per round, the order alternating; ratios to counts[0] within a round."""
    per_count = {c: [] for c in counts}
    ratios = {c: [] for c in counts}
    failures = []
    for r in range(args.rounds):
        order = counts if r % 2 == 0 else list(reversed(counts))
        tps = {}
        for c in order:
            summary, failed = run_load(args, c, c * args.requests_per_client)
            failures += failed
            tps[c] = summary["tokens_per_second"] or 0.0
            per_count[c].append(tps[c])
            print(f"round {r + 1}/{args.rounds}: {c} client(s): {tps[c]:.2f} tokens/s", file=sys.stderr)
        for c in counts:
            ratios[c].append(tps[c] / tps[counts[0]] if tps[counts[0]] > 0 else float("nan"))
    summary = {
        "compare_clients": counts, "rounds": args.rounds, "requests_per_client": args.requests_per_client,
        "failed": len(failures),
        "tokens_per_second": {str(c): [round(v, 2) for v in per_count[c]] for c in counts},
        "ratio_to_first": {str(c): {"median": round(statistics.median(ratios[c]), 3), "min": round(min(ratios[c]), 3),
                                    "max": round(max(ratios[c]), 3), "per_round": [round(v, 3) for v in ratios[c]]}
                           for c in counts},
    }
    return summary, failures


def client_counts(text):
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected client counts like 1,4, got {text!r}")
    if len(counts) < 2 or any(c < 1 for c in counts) or len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(f"expected two or more distinct client counts >= 1, got {text!r}")
    return counts


def positive(text):
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {text!r}")
    return int(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--clients", type=positive, help="concurrent clients (default 8)")
    ap.add_argument("--requests", type=positive, help="total requests (default 200)")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--chat", action="store_true", help="/v1/chat/completions instead of /v1/completions")
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", help="write the summary as JSON to this file")
    ap.add_argument("--compare-clients", type=client_counts, metavar="A,B,...",
                    help="compare these client counts' throughput, alternated in rounds (instead of --clients/--requests)")
    ap.add_argument("--rounds", type=positive, help="--compare-clients: rounds (default 3)")
    ap.add_argument("--requests-per-client", type=positive,
                    help="--compare-clients: requests per client in each run (default 3)")
    args = ap.parse_args()
    if args.compare_clients and (args.clients is not None or args.requests is not None):
        ap.error("--compare-clients sets the clients and requests of each run (--requests-per-client); "
                 "drop --clients/--requests")
    if not args.compare_clients and (args.rounds is not None or args.requests_per_client is not None):
        ap.error("--rounds and --requests-per-client go with --compare-clients")
    args.rounds = args.rounds or 3
    args.requests_per_client = args.requests_per_client or 3

    if args.compare_clients:
        summary, failed = compare_clients(args, args.compare_clients)
    else:
        summary, failed = run_load(args, args.clients or 8, args.requests or 200)
    print(json.dumps(summary, indent=1))
    for r in failed[:5]:
        print("failure:", r[4], file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
