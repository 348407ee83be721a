#!/usr/bin/env python3
"""Soak test of `llmctl serve` (not CI): many streaming clients, random requests, disconnects.

Starts `llmctl serve` on the default model (or uses --url), then CLIENTS threads send REQUESTS
requests in all: completions or chat, streamed or not, with random temperature / top_p / top_k /
seed / max_tokens / stop strings / n / logprobs, and about 10% of the streams hang up after their
first event. Reports: errors, streamed vs non-streamed equality (each seeded or greedy streamed
request is replayed non-streamed and the texts compared), usage vs tokens received (logprobs
entries), running requests and KV usage back to 0 at the end, and the server's RSS after 100
and after all requests.
RSS grows while the KV pool's pages are first touched (up to --kv-cache-gb); a small pool
(--serve-arg=--kv-cache-gb=0.2) shows what is left once it is warm.
Usage: scripts/soak.py [--build build] [--url URL] [--clients 64] [--requests 1000] [--seed 1]
                       [--serve-arg=--flag=value ...]
"""
import argparse
import http.client
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from urllib.parse import urlparse

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--url")
ap.add_argument("--clients", type=int, default=64)
ap.add_argument("--requests", type=int, default=1000)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--model", default=os.path.expanduser("~/.cache/llmctl/models/SmolLM2-135M-Instruct/hf"))
ap.add_argument("--serve-arg", action="append", default=[], help="extra flag for llmctl serve (repeatable)")
args = ap.parse_args()

proc = None
if args.url:
    url = urlparse(args.url)
    host, port = url.hostname, url.port
else:
    log = open("/tmp/llmctl-soak-serve.log", "w+")
    proc = subprocess.Popen([os.path.join(args.build, "llmctl"), "serve", "--model", args.model, "--port", "0",
                             "--max-concurrent-requests", str(args.clients + 8), *args.serve_arg], stdout=log, stderr=log)
    host, port = "127.0.0.1", None
    for _ in range(600):
        m = re.search(r"listening on http://[\d.]+:(\d+)", open(log.name).read())
        if m:
            port = int(m.group(1))
            break
        time.sleep(0.1)
    assert port, open(log.name).read()


def call(method, path, body=None, timeout=600):
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    c.request(method, path, json.dumps(body) if body is not None else None, {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


while call("GET", "/ready")[0] != 200:
    time.sleep(0.2)


def rss_mb():
    if not proc:
        return float("nan")
    for line in open(f"/proc/{proc.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def metrics():
    text = call("GET", "/metrics")[1].decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line and line[0] != "#"}


STOPS = ["\n\n", ".", " the", "!", "ing"]
WORDS = "the a model server token stream river mountain story cat code rain light paper".split()


def random_request(rng):
    chat = rng.random() < 0.5
    req = {"max_tokens": rng.randint(1, 48), "temperature": rng.choice([0, 0.5, 0.8, 1.0, 1.3])}
    if rng.random() < 0.5:
        req["top_p"] = rng.choice([0.5, 0.9, 1.0])
    if rng.random() < 0.3:
        req["top_k"] = rng.choice([1, 5, 40])
    if req["temperature"] > 0:
        req["seed"] = rng.randrange(1 << 31)  # seeded: replayable
    if rng.random() < 0.3:
        req["stop"] = rng.sample(STOPS, rng.randint(1, 2))
    req["n"] = rng.choice([1, 1, 1, 2, 3])
    lp = rng.random() < 0.5
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 30)))
    if chat:
        req["messages"] = [{"role": "user", "content": text}]
        if lp:
            req["logprobs"], req["top_logprobs"] = True, rng.randint(0, 3)
        return "/v1/chat/completions", req
    req["prompt"] = text
    if lp:
        req["logprobs"] = rng.randint(0, 3)
    return "/v1/completions", req


def tokens_of(choice_lp, chat):
    if choice_lp is None:
        return None
    return len(choice_lp["content"]) if chat else len(choice_lp["tokens"])


def run_stream(path, req, hang_up):
    """(texts per choice, logprob token counts per choice, usage) or raises."""
    chat = path.endswith("chat/completions")
    body = dict(req, stream=True, stream_options={"include_usage": True})
    c = http.client.HTTPConnection(host, port, timeout=600)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"stream {r.status}: {r.read()[:200]!r}")
    texts, counts, usage = {}, {}, None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: "):
            continue
        if hang_up:
            c.close()  # gone mid-stream
            return None
        if line == "data: [DONE]":
            break
        ev = json.loads(line[6:])
        if "error" in ev:
            raise RuntimeError(f"stream error event: {ev['error']['message']}")
        if ev.get("usage"):
            usage = ev["usage"]
        for ch in ev.get("choices", []):
            i = ch["index"]
            piece = ch["delta"].get("content", "") if chat else ch["text"]
            texts[i] = texts.get(i, "") + (piece or "")
            n = tokens_of(ch.get("logprobs"), chat)
            if n is not None:
                counts[i] = counts.get(i, 0) + n
    c.close()
    return texts, counts, usage


def run_whole(path, req):
    chat = path.endswith("chat/completions")
    status, data = call("POST", path, req)
    if status != 200:
        raise RuntimeError(f"{status}: {data[:200]!r}")
    j = json.loads(data)
    texts = {ch["index"]: (ch["message"]["content"] if chat else ch["text"]) for ch in j["choices"]}
    counts = {ch["index"]: tokens_of(ch.get("logprobs"), chat) for ch in j["choices"] if ch.get("logprobs")}
    return texts, counts, j["usage"]


lock = threading.Lock()
stats = {"done": 0, "errors": [], "streamed": 0, "hung_up": 0, "compared": 0, "mismatch": [], "usage_checked": 0,
         "usage_mismatch": []}
rss_at = {}
next_index = [0]


def client(cid):
    rng = random.Random(args.seed * 1000 + cid)
    while True:
        with lock:
            if next_index[0] >= args.requests:
                return
            next_index[0] += 1
        path, req = random_request(rng)
        stream = rng.random() < 0.7
        hang_up = stream and rng.random() < 0.1
        try:
            if stream:
                got = run_stream(path, req, hang_up)
                if got is not None:
                    whole = run_whole(path, req)  # seeded or greedy: the same request gives the same text
                    with lock:
                        stats["compared"] += 1
                        if got[0] != whole[0]:
                            stats["mismatch"].append((path, req, got[0], whole[0]))
            else:
                got = run_whole(path, req)
            if got is not None:
                texts, counts, usage = got
                if counts and usage:
                    with lock:
                        stats["usage_checked"] += 1
                        if sum(counts.values()) != usage["completion_tokens"]:
                            stats["usage_mismatch"].append((path, req, counts, usage))
        except Exception as e:  # noqa: BLE001 - every failure is counted and reported
            with lock:
                stats["errors"].append(f"{path}: {e}")
        with lock:
            stats["done"] += 1
            stats["streamed"] += stream
            stats["hung_up"] += hang_up
            if stats["done"] in (100, args.requests // 2, args.requests):
                rss_at[stats["done"]] = rss_mb()


t0 = time.time()
rss_at[0] = rss_mb()
threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
elapsed = time.time() - t0
idle = False
for _ in range(100):
    m = metrics()
    if m["llmctl_requests_running"] == 0 and m["llmctl_requests_waiting"] == 0 and m["llmctl_kv_cache_usage_ratio"] == 0:
        idle = True
        break
    time.sleep(0.1)
m = metrics()
print(f"soak: {args.requests} requests from {args.clients} clients in {elapsed:.0f} s "
      f"({stats['streamed']} streamed, {stats['hung_up']} hung up mid-stream)")
print(f"  errors: {len(stats['errors'])}")
for e in stats["errors"][:10]:
    print("    " + e)
print(f"  streamed == non-streamed: {stats['compared'] - len(stats['mismatch'])}/{stats['compared']}")
for mm in stats["mismatch"][:3]:
    print(f"    {mm}")
print(f"  usage.completion_tokens == logprob tokens received: {stats['usage_checked'] - len(stats['usage_mismatch'])}/"
      f"{stats['usage_checked']}")
print(f"  after the run: running {m['llmctl_requests_running']:.0f}, waiting {m['llmctl_requests_waiting']:.0f}, "
      f"KV usage {m['llmctl_kv_cache_usage_ratio']:.3f} ({'idle' if idle else 'NOT idle'})")
print("  RSS: " + ", ".join(f"{k} requests {v:.0f} MB" for k, v in sorted(rss_at.items())))
ok = not stats["errors"] and not stats["mismatch"] and not stats["usage_mismatch"] and idle
if proc:
    proc.send_signal(2)
    proc.wait(60)
    print(f"  serve exit code {proc.returncode}")
    ok = ok and proc.returncode == 0
sys.exit(0 if ok else 1)
