#!/usr/bin/env python3
"""`llmctl serve`: the memory budget of the tokenize routes and of over-long prompts.

Findings of a reliability review, kept as regression tests: a 4 MB /detokenize body answered
56 MB and cost ~170 MB of RSS, a 4 MB /tokenize or /v1/completions prompt ~145 MB, and neither
tokenize route took a concurrency slot (36 such clients: 5.2 GB RSS, /health at 7 s).
Checked here: /detokenize refuses more than max_model_len ids and /tokenize answers at most that
many tokens (400s naming the limit); a 4 MB prompt to /v1/completions, /v1/chat/completions,
/generate and /tokenize is refused in well under a second; a body of 200,000 small JSON objects
is parsed in well under a second (nlohmann's callback parser took 15 s); the tokenize routes take
a place among --max-concurrent-requests (429 beyond); 8 clients sending ~4 MB bodies at once grow
the server's peak RSS (VmHWM) by less than 200 MB (~60 MB; the old code: 470-740 MB) while /health answers
within a second. scripts/serve-memory-flood.py measures the full 36-client flood.
Usage: test_server_memory.py BUILD_DIR
"""
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import Server, check, finish, require_model  # noqa: E402

build = sys.argv[1]
require_model()

CTX = 8192  # SmolLM2-135M's context: the tokenize routes' limit
BODY = (4 << 20) - 4096  # just under the default --max-body-bytes
LONG_TOKEN = 9225  # "\n" + 48 spaces: a long text per id


def status_kb(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def text_of(size, unit="The quick brown fox jumps over the lazy dog. "):
    return (unit * (size // len(unit) + 1))[:size]


def post_raw(port, path, body, timeout=120):
    """(status, elapsed seconds, response length) of one POST on its own connection."""
    t0 = time.time()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " +
              str(len(body)).encode() + b"\r\n\r\n" + body)
    data = b""
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    s.close()
    return int(data.split(b" ", 2)[1]) if data else 0, time.time() - t0, len(data)


srv = Server(build)
try:
    # 1. the limits, named in the 400s
    _, one = srv.request("POST", "/detokenize", {"tokens": [LONG_TOKEN]})
    status, resp = srv.request("POST", "/detokenize", {"tokens": [LONG_TOKEN] * CTX})
    check(status == 200 and resp["prompt"] == one["prompt"] * CTX, f"/detokenize of {CTX} ids (the limit): {status}")
    status, resp = srv.request("POST", "/detokenize", {"tokens": [LONG_TOKEN] * (CTX + 1)})
    check(status == 400 and resp["error"]["param"] == "tokens" and str(CTX) in resp["error"]["message"] and
          "max_model_len" in resp["error"]["message"], f"/detokenize of {CTX + 1} ids: {status} {json.dumps(resp)[:160]}")
    tokens_body = json.dumps({"tokens": [LONG_TOKEN] * ((BODY - 16) // 5)}, separators=(",", ":")).encode()
    status, secs, size = post_raw(srv.port, "/detokenize", tokens_body)
    check(status == 400 and secs < 1 and size < 4096, f"/detokenize of a 4 MB body: {status} in {secs:.2f} s, {size} bytes")

    status, resp = srv.request("POST", "/tokenize", {"prompt": "hello " * 8000})
    check(status == 200 and resp["count"] <= CTX, f"/tokenize of ~8,000 tokens: {status}")
    status, resp = srv.request("POST", "/tokenize", {"prompt": "hello " * 8300})
    check(status == 400 and resp["error"]["param"] == "prompt" and str(CTX) in resp["error"]["message"],
          f"/tokenize of ~8,300 tokens: {status} {json.dumps(resp)[:160]}")

    # 2. 4 MB prompts: refused after counting about a context's worth, not after tokenizing 4 MB
    text = text_of(BODY - 64)
    for path, body in [("/tokenize", {"prompt": text}),
                       ("/tokenize", {"messages": [{"role": "user", "content": text}]}),
                       ("/v1/completions", {"prompt": text, "max_tokens": 1}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": text}], "max_tokens": 1}),
                       ("/generate", {"inputs": text})]:
        status, secs, size = post_raw(srv.port, path, json.dumps(body).encode())
        check(status == 400 and secs < 1.0, f"{path} with a 4 MB prompt: {status} in {secs:.2f} s")
    status, resp = srv.request("POST", "/v1/completions", {"prompt": text, "max_tokens": 1})
    check(status == 400 and resp["error"]["code"] == "context_length_exceeded" and f"more than {CTX - 1}" in resp["error"]["message"],
          f"/v1/completions with a 4 MB prompt names the context: {resp['error']['message'][:120]!r}")

    # 3. many small JSON values: the tokenize routes refuse them while parsing; every route parses them fast
    many = json.dumps({"messages": [{}] * 200000}).encode()
    for path in ["/tokenize", "/v1/chat/completions"]:
        status, secs, _ = post_raw(srv.port, path, many)
        check(status == 400 and secs < 1.0, f"{path} with 200,000 empty objects: {status} in {secs:.2f} s")

    # 4. 8 clients with ~4 MB bodies at once: bounded RSS growth, /health answers
    bodies = [("/tokenize", json.dumps({"prompt": text}).encode()), ("/detokenize", tokens_body),
              ("/v1/completions", json.dumps({"prompt": text, "max_tokens": 1}).encode())]
    rss0 = status_kb(srv.proc.pid, "VmRSS")
    answers, health = [], []
    done = threading.Event()

    def client(i):
        path, body = bodies[i % len(bodies)]
        answers.append(post_raw(srv.port, path, body)[0])

    def poll_health():
        while not done.is_set():
            t0 = time.time()
            status, _ = srv.request("GET", "/health", timeout=30)
            health.append((status, time.time() - t0))
            time.sleep(0.05)

    hp = threading.Thread(target=poll_health)
    hp.start()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    hp.join()
    growth_mb = (status_kb(srv.proc.pid, "VmHWM") - rss0) / 1024
    check(sorted(answers) == [400] * 8, f"8 clients with 4 MB bodies: {sorted(answers)}")
    check(growth_mb < 200, f"8 clients with 4 MB bodies: peak RSS grew {growth_mb:.0f} MB (bound 200 MB)")
    slowest = max(s for _, s in health)
    check(all(st == 200 for st, _ in health) and slowest < 1.0, f"/health during the flood: slowest {slowest:.2f} s")
    check(srv.normal_request_works(), "a generation request works after the flood")
finally:
    rc = srv.stop()
check(rc == 0, f"SIGINT: exit code {rc}")

# 5. the tokenize routes hold a place among --max-concurrent-requests
srv = Server(build, "--max-concurrent-requests", "1")
try:
    started = threading.Event()

    def long_stream():
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
        body = json.dumps({"prompt": "Once", "max_tokens": 2000, "ignore_eos": True, "stream": True}).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() +
                  b"\r\n\r\n" + body)
        s.recv(4096)  # the head and a first event: the slot is taken
        started.set()
        time.sleep(3)
        s.close()  # the request is aborted

    t = threading.Thread(target=long_stream)
    t.start()
    started.wait(30)
    for path, body in [("/tokenize", {"prompt": "hi"}), ("/detokenize", {"tokens": [1, 2]})]:
        status, resp = srv.request("POST", path, body)
        check(status == 429 and resp["error"]["type"] == "rate_limit_error", f"{path} beyond --max-concurrent-requests 1: {status}")
    t.join()
    check(srv.wait_idle(30), "the aborted stream leaves the server idle")
    status, resp = srv.request("POST", "/tokenize", {"prompt": "hi"})
    check(status == 200, f"/tokenize once the slot is free: {status}")
finally:
    rc = srv.stop()
check(rc == 0, f"SIGINT: exit code {rc}")
finish()
