#!/usr/bin/env python3
"""Load test for a running `moetier serve` (or any OpenAI-compatible server): N clients send
requests concurrently and the script reports failures, latency percentiles and throughput.

  scripts/serve_load.py --url http://127.0.0.1:8080 --clients 8 --requests 200 --max-tokens 32
  scripts/serve_load.py --url ... --stream --chat --json out.json

Standard library only. Every request is checked: HTTP 200, a complete body (a finish_reason;
for streams the final `data: [DONE]`). Latency is per request, from sending to the last byte;
time to the first generated text is reported for streams. tokens/s = completion tokens of all requests /
wall time of the whole run.
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=200, help="total requests")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--chat", action="store_true", help="/v1/chat/completions instead of /v1/completions")
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", help="write the summary as JSON to this file")
    args = ap.parse_args()

    results = []
    lock = threading.Lock()
    counter = iter(range(args.requests))

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
    threads = [threading.Thread(target=worker) for _ in range(args.clients)]
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
        "requests": len(results), "failed": len(failed), "clients": args.clients, "wall_s": round(wall, 3),
        "latency_ms_p50": round(pct(lat, 50), 1), "latency_ms_p99": round(pct(lat, 99), 1),
        "latency_ms_mean": round(statistics.mean(lat), 1) if lat else None,
        "ttft_ms_p50": round(pct(ttft, 50), 1) if ttft else None,
        "completion_tokens": tokens, "tokens_per_second": round(tokens / wall, 2) if wall > 0 else None,
        "requests_per_second": round(len(ok) / wall, 2) if wall > 0 else None,
    }
    print(json.dumps(summary, indent=1))
    for r in failed[:5]:
        print("failure:", r[4], file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
