#!/usr/bin/env python3
"""`llmctl serve`: HTTP edge cases from a reliability review, over raw sockets.

(a) an HTTP/1.0 request with `Expect: 100-continue` gets no interim 100 (RFC 9110 forbids 1xx to
    1.0 clients), while an HTTP/1.1 one still does;
(b) trailer lines after a chunked body's last chunk are field lines: valid ones are skipped and a
    request pipelined after the blank line is answered; a request line sent there (no blank line
    first) is a 400, not a request swallowed as trailers; a folded trailer line is a 400;
(c) a `model` value holding a NUL is quoted whole, JSON-escaped, in the 404 message (it was cut
    at the NUL), and a long one is cut to a bounded length;
(d) a client that half-closes (shuts its write side after a non-streamed generation request, as
    `nc -N` and some proxies do) still reads: it gets its whole 200 answer on every generation route
    (HTTP/1.1 first gets one interim 102, HTTP/1.0 none); it used to get 499 within 0.3 s. (A client
    that closes both sides is still aborted: test_server_bad_input.py.)
Usage: test_server_http_edges.py BUILD_DIR
"""
import json
import os
import re
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import Server, check, finish, recv_until_close, require_model  # noqa: E402

build = sys.argv[1]
require_model()


def exchange(port, parts, pause=0.0, timeout=10):
    """Sends each part (pausing between them), then reads until the server closes or goes quiet."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    before_last = b""
    for i, part in enumerate(parts):
        s.sendall(part)
        if i < len(parts) - 1 and pause:
            s.settimeout(pause)
            try:
                before_last += s.recv(65536)
            except socket.timeout:
                pass
            s.settimeout(timeout)
    s.settimeout(3)
    data = recv_until_close(s)
    return before_last, before_last + data


def statuses(data):
    return [int(code) for code in re.findall(rb"HTTP/1\.[01] (\d{3}) ", data)]


srv = Server(build)
try:
    body = json.dumps({"prompt": "hello"}).encode()
    # (a) Expect: 100-continue
    for version, want_100 in [(b"1.0", False), (b"1.1", True)]:
        head = (b"POST /tokenize HTTP/" + version + b"\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        early, data = exchange(srv.port, [head, body], pause=1.0)
        got_100 = b" 100 Continue" in data
        check(got_100 == want_100 and (early.startswith(b"HTTP/1.1 100 Continue") if want_100 else not early) and
              statuses(data)[-1:] == [200],
              f"HTTP/{version.decode()} with Expect: 100-continue: interim 100 {'sent' if got_100 else 'not sent'}, "
              f"then {statuses(data)[-1:]}")

    # (b) trailers
    chunked = (b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
               format(len(body), "x").encode() + b"\r\n" + body + b"\r\n0\r\n")
    health = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    _, data = exchange(srv.port, [chunked + b"X-Checksum: abc\r\nX-Other: 1\r\n\r\n" + health])
    check(statuses(data) == [200, 200], f"valid trailers, then a pipelined request: {statuses(data)}")
    _, data = exchange(srv.port, [chunked + health])
    check(statuses(data) == [400] and b"trailer" in data,
          f"a request line where a trailer field belongs: {statuses(data)} (not one 200 with the request swallowed)")
    _, data = exchange(srv.port, [chunked + b"X-A: 1\r\n folded\r\n\r\n" + health])
    check(statuses(data) == [400], f"a folded trailer line: {statuses(data)}")
    _, data = exchange(srv.port, [chunked + b"".join(b"X-T%d: 1\r\n" % i for i in range(200)) + b"\r\n" + health])
    check(statuses(data) and statuses(data)[0] in (400, 431), f"200 trailer fields: {statuses(data)}")
    check(srv.normal_request_works(), "the server serves after the trailer cases")

    # (c) the model name in the 404
    status, resp = srv.request("POST", "/v1/completions", {"prompt": "hi", "model": "a\u0000b", "max_tokens": 1})
    msg = resp["error"]["message"] if isinstance(resp, dict) else str(resp)
    check(status == 404 and "'a\\u0000b' does not exist" in msg and resp["error"]["param"] == "model",
          f"a model name with a NUL: {status} {msg!r}")
    status, resp = srv.request("POST", "/v1/chat/completions",
                               {"messages": [{"role": "user", "content": "hi"}], "model": "m" * 10000 + "\u0001"})
    msg = resp["error"]["message"] if isinstance(resp, dict) else str(resp)
    check(status == 404 and len(msg) < 600 and "(10001 bytes)" in msg, f"a 10 KB model name: {status}, message {len(msg)} chars")

    # (d) half-closed clients
    def half_closed(path, payload, version=b"1.1"):
        body = json.dumps(payload).encode()
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
        s.sendall(b"POST " + path.encode() + b" HTTP/" + version + b"\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        s.shutdown(socket.SHUT_WR)
        t0 = time.time()
        data = recv_until_close(s)
        s.close()
        return data, time.time() - t0

    long = {"max_tokens": 160, "ignore_eos": True, "temperature": 0}
    cases = [("/v1/completions", dict(long, prompt="Once upon a time"), b"1.1", b'"text"'),
             ("/v1/chat/completions", dict(long, messages=[{"role": "user", "content": "Tell a story."}]), b"1.1",
              b'"content"'),
             ("/generate", {"inputs": "Once upon a time", "parameters": {"max_new_tokens": 160}},
              b"1.1", b'"generated_text"'),
             ("/v1/completions", dict(long, prompt="Once upon a time"), b"1.0", b'"text"')]
    for path, payload, version, key in cases:
        data, took = half_closed(path, payload, version)
        want = [102, 200] if version == b"1.1" else [200]
        check(statuses(data) == want and key in data,
              f"HTTP/{version.decode()} {path}, write side shut after the request: {statuses(data)} in {took:.1f} s "
              f"(want {want} and the answer){'' if key in data else ': ' + repr(data[-300:])}")
    check(srv.normal_request_works(), "the server serves after the half-closed clients")
finally:
    rc = srv.stop()
check(rc == 0, f"SIGINT: exit code {rc}")
finish()
