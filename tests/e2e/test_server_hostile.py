#!/usr/bin/env python3
"""`llmctl serve` against a hostile client and a hostile model publisher: each case is a finding
that once crashed, hung or wedged the server, kept as a regression test.

Client: JSON nested 8,000 deep on every route (400, server alive); a chunked body past
--max-body-bytes (413 while it is still being sent); pipelined requests on one connection (all
answered, in order); curl -d's form content type on a 20 KB JSON body (accepted); slowloris
connections (the key checked on the head, /health answered meanwhile, the stalled ones dropped);
a burst of 256 new connections (every one answered); max_completion_tokens validated beside
max_tokens; TGI max_new_tokens 2^63-1 (400 naming it); llmctl_requests_running counts requests.
Model: a chat template that calls itself, loops 10^10 times, repeats a string or list 10^10
times, or computes INT64_MIN % -1: each chat request fails with a 400 naming the limit, 40 such
requests at once leave /health answering, and SIGTERM stops the server in time; a template nested
100,000 deep loads with a warning and fails chat requests (and `generate --chat`) with its error.
Usage: test_server_hostile.py BUILD_DIR
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import MODEL, Server, check, finish, require_model  # noqa: E402

build = sys.argv[1]
require_model()


def http_raw(port, payload, read_until_close=True, timeout=20):
    """Sends bytes, returns everything the server wrote before closing (or timing out)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(payload)
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            if not read_until_close and data.count(b"HTTP/1.1 ") >= read_until_close:
                break
    except socket.timeout:
        pass
    s.close()
    return data


def statuses(data):
    return [int(code) for code in re.findall(rb"HTTP/1\.[01] (\d{3}) ", data)]


KEY = "sk-hostile"
srv = Server(build, "--max-body-bytes", "100000", "--max-num-seqs", "4", api_key=KEY)
AUTH = b"Authorization: Bearer " + KEY.encode() + b"\r\n"



try:
    # 1. deep JSON: refused while parsing on every route, the server stays up
    deep = "[" * 8000 + "]" * 8000
    for path, body in [("/tokenize", '{"messages": %s}' % deep), ("/v1/chat/completions", '{"messages": %s}' % deep),
                       ("/v1/completions", '{"prompt": %s}' % deep), ("/generate", '{"inputs": "x", "parameters": %s}' % deep),
                       ("/detokenize", '{"tokens": %s}' % deep)]:
        status, resp = srv.request("POST", path, body)
        check(status == 400 and "nested deeper" in json.dumps(resp) and srv.normal_request_works(),
              f"{path}: JSON nested 8,000 deep -> {status}")

    # 2. a chunked body is held to --max-body-bytes while it is read
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"10000\r\n" + b"a" * 0x10000 + b"\r\n"
    sent, answer = 0, b""
    try:
        while sent < 64 << 20:
            s.sendall(chunk)
            sent += len(chunk)
            s.setblocking(False)
            try:
                answer += s.recv(65536)
            except BlockingIOError:
                pass
            s.setblocking(True)
            if answer:
                break
    except OSError:
        pass
    s.settimeout(5)
    try:
        answer += s.recv(65536)
    except OSError:
        pass
    s.close()
    check(statuses(answer)[:1] == [413] and sent < 8 << 20,
          f"chunked body past --max-body-bytes: {statuses(answer)[:1]} after {sent >> 10} KiB sent")

    # 3. pipelined requests: every one answered, in order
    tok = json.dumps({"prompt": "hello"}).encode()
    pipe = (b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" +
            b"POST /tokenize HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Content-Length: " + str(len(tok)).encode() + b"\r\n\r\n" + tok +
            b"GET /v1/nothing HTTP/1.1\r\nHost: x\r\n" + AUTH + b"\r\n" +
            b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + AUTH + b"Connection: close\r\n\r\n")
    data = http_raw(srv.port, pipe)
    check(statuses(data) == [200, 200, 404, 200] and data.index(b'"tokens"') < data.index(b'"no route') < data.index(b'"data"'),
          f"4 pipelined requests answered in order: {statuses(data)}")

    # 4. curl -d sends application/x-www-form-urlencoded: JSON is JSON whatever the content type says
    big = json.dumps({"prompt": "Hello " + "x" * 20000}).encode()
    status, resp = srv.request("POST", "/tokenize", big, headers={"Content-Type": "application/x-www-form-urlencoded"})
    check(status == 200, f"20 KB JSON body sent as a form: {status}")
    curl = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"{srv.url}/tokenize",
                           "-H", f"Authorization: Bearer {KEY}", "-d", big.decode()], capture_output=True, text=True)
    check(curl.stdout == "200", f"curl -d with a 20 KB body: {curl.stdout}")

    # 5. slowloris: connections that trickle their head hold no worker; a wrong key is refused on the head
    slow = []
    for i in range(200):
        c = socket.create_connection(("127.0.0.1", srv.port))
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        slow.append(c)
    t0 = time.time()
    status, _ = srv.request("GET", "/health", timeout=5)
    check(status == 200 and time.time() - t0 < 2, f"200 trickling connections: /health in {time.time() - t0:.2f} s")
    check(srv.normal_request_works(), "200 trickling connections: a generation request still works")
    for c in slow[:50]:
        c.sendall(b"X-Slow: 1\r\n")  # still inside the header deadline
    data = http_raw(srv.port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n"
                    b"Content-Length: 50000\r\n\r\n", timeout=5)
    check(statuses(data) == [401], f"wrong key refused on the head, before the body arrives: {statuses(data)}")
    t0 = time.time()
    slow[0].settimeout(30)
    try:
        got = slow[0].recv(4096)
    except OSError:
        got = b""
    check(time.time() - t0 < 15 and (not got or b" 408 " in got), f"a stalled head dropped after {time.time() - t0:.1f} s: {got[:20]!r}")
    for c in slow:
        c.close()

    # 6. a burst of new connections: every one answered (listen backlog sized for it)
    results = []

    def one():
        try:
            results.append(statuses(http_raw(srv.port, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))[:1])
        except OSError as e:
            results.append(str(e))

    threads = [threading.Thread(target=one) for _ in range(256)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(results.count([200]) == 256, f"256 simultaneous connections: {results.count([200])} answered 200")

    # Minor: max_completion_tokens validated beside max_tokens; huge TGI max_new_tokens; running counts requests
    msgs = [{"role": "user", "content": "hi"}]
    for bad in ["x", 0, -3, 1.5]:
        status, resp = srv.request("POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 3, "max_completion_tokens": bad})
        check(status == 400 and resp["error"]["param"] == "max_completion_tokens", f"max_completion_tokens {bad!r} beside max_tokens: {status}")
    status, resp = srv.request("POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 50, "max_completion_tokens": 2})
    check(status == 200 and resp["usage"]["completion_tokens"] <= 2, "max_completion_tokens wins over max_tokens")
    status, resp = srv.request("POST", "/generate", {"inputs": "x", "parameters": {"max_new_tokens": 2 ** 63 - 1}})
    check(status == 400 and str(2 ** 63 - 1) in resp["error"]["message"], f"TGI max_new_tokens 2^63-1: {status} {resp['error']['message'][:80]!r}")
    done = []
    t = threading.Thread(target=lambda: done.append(srv.request("POST", "/v1/completions", {"prompt": "Once", "n": 8, "max_tokens": 300, "ignore_eos": True})))
    t.start()
    time.sleep(1.5)
    running = srv.metrics()["llmctl_requests_running"]
    t.join()
    check(running == 1, f"one request with n=8: llmctl_requests_running = {running:.0f}")
finally:
    rc = srv.stop()
check(rc == 0, f"SIGINT: exit code {rc}")

# --- hostile chat templates ------------------------------------------------------------------
TEMPLATE = (
    "{% macro f(x) %}{{ f(x) }}{% endmacro %}"
    "{% set c = messages[-1]['content'] %}"
    "{% if c == 'recurse' %}{{ f(1) }}"
    "{% elif c == 'loops' %}{% for i in range(99999) %}{% for j in range(99999) %}{{ '' }}{% endfor %}{% endfor %}"
    "{% elif c == 'string' %}{{ 'x' * 100000000000 }}"
    "{% elif c == 'list' %}{{ ([1] * 10000000000) | length }}"
    "{% elif c == 'fpe' %}{{ (-9223372036854775807 - 1) % -1 }}"
    "{% else %}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}{% endif %}")


def model_with_template(template):
    d = tempfile.mkdtemp(prefix="llmctl-hostile-")
    for f in os.listdir(MODEL):
        if f != "tokenizer_config.json":
            os.symlink(os.path.join(MODEL, f), os.path.join(d, f))
    cfg = json.load(open(os.path.join(MODEL, "tokenizer_config.json")))
    cfg["chat_template"] = template
    json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w"))
    return d


import server_util  # noqa: E402

hostile_model = model_with_template(TEMPLATE)
server_util.MODEL = hostile_model
srv = Server(build, "--request-timeout", "20")
try:
    def chat(content):
        return srv.request("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": content}], "max_tokens": 2},
                           timeout=60)

    status, _ = chat("hello")
    check(status == 200, f"the template renders a normal chat: {status}")
    for case, words in [("recurse", "recursion"), ("loops", "loop iteration"), ("string", "string repetition"),
                        ("list", "list repetition")]:
        t0 = time.time()
        status, resp = chat(case)
        msg = resp["error"]["message"] if isinstance(resp, dict) and "error" in resp else str(resp)
        check(status == 400 and words in msg and time.time() - t0 < 15,
              f"template '{case}': {status} in {time.time() - t0:.1f} s: {msg[:100]!r}")
        status, resp = srv.request("POST", "/tokenize", {"messages": [{"role": "user", "content": case}]})
        check(status == 400 and words in resp["error"]["message"], f"/tokenize with template '{case}': {status}")
    # INT64_MIN % -1 traps in C (SIGFPE); in Python, as in jinja2, it is 0.
    status, resp = srv.request("POST", "/tokenize", {"messages": [{"role": "user", "content": "fpe"}]})
    _, zero = srv.request("POST", "/tokenize", {"prompt": "0", "add_special_tokens": False})
    check(status == 200 and resp["tokens"] == zero["tokens"], f"template INT64_MIN % -1 renders 0, as jinja2 does: {status}")
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(chat("loops")[0])) for _ in range(40)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    t0 = time.time()
    status, _ = srv.request("GET", "/health", timeout=10)
    check(status == 200 and time.time() - t0 < 3, f"40 looping templates in flight: /health in {time.time() - t0:.2f} s")
    threads[0].join(60)
    srv.proc.terminate()
    t0 = time.time()
    try:
        srv.proc.wait(30)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
    check(time.time() - t0 < 15 and srv.proc.returncode == 0, f"SIGTERM with looping templates in flight: exit {srv.proc.returncode} "
          f"after {time.time() - t0:.1f} s")
    for t in threads:
        t.join(60)
    check(all(a in (400, 429, 503) for a in answers) and len(answers) == 40, f"40 looping requests answered: {sorted(set(answers))}")
finally:
    srv.stop()

# A template nested 100,000 deep: the model loads with a warning; chat use fails with the error.
deep_model = model_with_template("{{ " + "(" * 100000 + "1" + ")" * 100000 + " }}")
server_util.MODEL = deep_model
srv = Server(build)
try:
    status, resp = srv.request("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
    check(status == 400 and "nest" in resp["error"]["message"], f"template nested 100,000 deep: {status} {resp['error']['message'][:100]!r}")
    status, _ = srv.request("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 1})
    check(status == 200, "plain completions still work on that model")
finally:
    srv.stop()
check("chat template" in srv.output(), "a warning about the chat template at load")
p = subprocess.run([os.path.join(build, "llmctl"), "generate", "--model", deep_model, "--chat", "hi", "-n", "2"],
                   capture_output=True, text=True, timeout=120)
check(p.returncode != 0 and p.returncode != -11 and "nest" in p.stderr, f"generate --chat on it: exit {p.returncode}, {p.stderr.strip()[-100:]!r}")
p = subprocess.run([os.path.join(build, "llmctl"), "generate", "--model", hostile_model,
                    "--chat", "recurse", "-n", "2"], capture_output=True, text=True, timeout=120)
check(p.returncode not in (0, -11) and "recursion" in p.stderr, f"generate --chat with a self-calling macro: exit {p.returncode}")

finish()
