#!/usr/bin/env python3
"""Peak memory of `llmctl serve` under a flood of large tokenize/detokenize/completions bodies (not CI).

Starts `llmctl serve` on the default model, warms it up, then CLIENTS threads each send ROUNDS
requests whose bodies are just under --max-body-bytes (default 4 MiB): /tokenize {"prompt": text},
/detokenize {"tokens": [the id of a long token, ...]} and /v1/completions {"prompt": text}, the
route chosen by the client's index. Meanwhile a thread polls GET /health every 100 ms. Reports, as
one JSON line: the server's RSS before the flood and its peak (VmHWM from /proc/PID/status), the
growth, the statuses answered, the largest response, the slowest /health and the flood's duration.
The review that asked for it (36 clients): 5.2 GB peak and /health at 7 s before the per-request
memory budget of the tokenize routes; tests/e2e/test_server_memory.py runs a small version.
Usage: scripts/serve-memory-flood.py [--build build] [--clients 36] [--rounds 2]
                                     [--routes tokenize,detokenize,completions] [--serve-arg=--flag=value ...]
"""
import argparse
import collections
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--binary", help="the llmctl binary (default BUILD/llmctl)")
ap.add_argument("--clients", type=int, default=36)
ap.add_argument("--rounds", type=int, default=2, help="requests per client")
ap.add_argument("--routes", default="tokenize,detokenize,completions")
ap.add_argument("--body-bytes", type=int, default=(4 << 20) - 4096)
ap.add_argument("--model", default=os.path.expanduser("~/.cache/llmctl/models/SmolLM2-135M-Instruct/hf"))
ap.add_argument("--serve-arg", action="append", default=[], help="extra flag for llmctl serve (repeatable)")
args = ap.parse_args()


def status_kb(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def tokenize_body(size):
    unit = "The quick brown fox jumps over the lazy dog, again and again. "
    return json.dumps({"prompt": (unit * (size // len(unit) + 1))[: size - 16]}).encode()


def detokenize_body(size, token_id):
    n = (size - 16) // (len(str(token_id)) + 1)
    return json.dumps({"tokens": [token_id] * n}, separators=(",", ":")).encode()


def completions_body(size):
    unit = "Once upon a time there was a server that read very long prompts. "
    return json.dumps({"prompt": (unit * (size // len(unit) + 1))[: size - 40], "max_tokens": 1}).encode()


def longest_short_id(model):
    """A token id of at most 4 digits whose text is longest: the most output per body byte."""
    try:
        vocab = json.load(open(os.path.join(model, "tokenizer.json")))["model"]["vocab"]
        return max((len(t), i) for t, i in vocab.items() if i < 10000)[1]
    except (OSError, KeyError, ValueError):
        return 1000


def run():
    binary = args.binary or os.path.join(args.build, "llmctl")
    log = open(f"/tmp/llmctl-memory-flood-{os.getpid()}.log", "w+")
    proc = subprocess.Popen([binary, "serve", "--model", args.model, "--port", "0",
                             "--max-body-bytes", str(max(args.body_bytes + 4096, 4 << 20)), *args.serve_arg],
                            stdout=log, stderr=log)
    port = None
    try:
        for _ in range(1200):
            m = re.search(r"listening on http://[\d.]+:(\d+)", open(log.name).read())
            if m:
                port = int(m.group(1))
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        assert port, open(log.name).read()

        def call(method, path, body=None, timeout=300):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            try:
                c.request(method, path, body, {"Content-Type": "application/json"} if body is not None else {})
                r = c.getresponse()
                return r.status, len(r.read())
            finally:
                c.close()

        for _ in range(600):
            try:
                if call("GET", "/ready")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        tid = longest_short_id(args.model)
        bodies = {"tokenize": ("/tokenize", tokenize_body(args.body_bytes)),
                  "detokenize": ("/detokenize", detokenize_body(args.body_bytes, tid)),
                  "completions": ("/v1/completions", completions_body(args.body_bytes))}
        routes = [bodies[r] for r in args.routes.split(",")]
        # Warm-up: every route once with a small body, so the baseline includes the steady state.
        call("POST", "/tokenize", json.dumps({"prompt": "hello"}).encode())
        call("POST", "/detokenize", json.dumps({"tokens": [tid, tid]}).encode())
        call("POST", "/v1/completions", json.dumps({"prompt": "hello", "max_tokens": 1}).encode())
        rss0, hwm0 = status_kb(proc.pid, "VmRSS"), status_kb(proc.pid, "VmHWM")

        statuses, largest, health = collections.Counter(), [0], []
        done = threading.Event()
        lock = threading.Lock()

        def client(i):
            path, body = routes[i % len(routes)]
            for _ in range(args.rounds):
                try:
                    st, n = call("POST", path, body)
                except OSError as e:
                    st, n = type(e).__name__, 0
                with lock:
                    statuses[f"{path} {st}"] += 1
                    largest[0] = max(largest[0], n)

        def poll_health():
            while not done.is_set():
                t0 = time.time()
                try:
                    call("GET", "/health", timeout=60)
                except OSError:
                    pass
                health.append(time.time() - t0)
                time.sleep(0.1)

        hp = threading.Thread(target=poll_health)
        hp.start()
        t0 = time.time()
        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.time() - t0
        done.set()
        hp.join()
        hwm = status_kb(proc.pid, "VmHWM")
        out = {"binary": binary, "clients": args.clients, "rounds": args.rounds, "body_bytes": args.body_bytes,
               "routes": args.routes, "rss_before_mb": round(rss0 / 1024, 1), "hwm_before_mb": round(hwm0 / 1024, 1),
               "peak_rss_mb": round(hwm / 1024, 1), "growth_mb": round((hwm - rss0) / 1024, 1),
               "largest_response_mb": round(largest[0] / 1e6, 2), "health_max_s": round(max(health or [0]), 2),
               "flood_s": round(elapsed, 1), "statuses": dict(sorted(statuses.items()))}
        print(json.dumps(out))
        return out
    finally:
        proc.send_signal(2)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    run()
    sys.exit(0)
