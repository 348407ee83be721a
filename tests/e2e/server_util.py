"""Starting `llmctl serve` for the server tests: a free port, the default model, readiness wait."""
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

SRC = os.environ.get("LLMCTL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
HOME = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
MODEL = os.path.join(HOME, "models/SmolLM2-135M-Instruct/hf")
GGUF = os.path.join(HOME, "models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")  # the default model as shipped


failures = []


def check(cond, what, quiet=False):
    """Records a result; prints it (only failures when quiet)."""
    if not (quiet and cond):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def finish():
    print(f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


def require_model():
    if not os.path.exists(MODEL):
        print(f"SKIP: default model not found at {MODEL}")
        sys.exit(77)


class Server:
    def __init__(self, build, *flags, api_key=None, model=None):
        self.api_key = api_key
        # LLMCTL_TEST_SERVE_ARGS: flags added to every server a test starts (e.g. "-tp 3 -t 1": the
        # OpenAI client suite against tensor-parallel ranks, tests/e2e/test_tensor_parallel.py).
        extra = os.environ.get("LLMCTL_TEST_SERVE_ARGS", "").split()
        model = model or MODEL  # (read now: tests point MODEL at models of their own)
        cmd = [os.path.join(build, "llmctl"), "serve", "--model", model, "--port", "0", *flags, *extra]
        if api_key:
            cmd += ["--api-key", api_key]
        self.log_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"llmctl-serve-{os.getpid()}-{time.time_ns()}.log")
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log)
        self.port = None
        deadline = time.time() + 120
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError("llmctl serve exited: " + open(self.log_path).read())
            m = re.search(r"listening on http://[\d.]+:(\d+)", open(self.log_path).read())
            if m:
                self.port = int(m.group(1))
            time.sleep(0.1)
        assert self.port, "llmctl serve did not start: " + open(self.log_path).read()
        self.url = f"http://127.0.0.1:{self.port}"
        while time.time() < deadline:
            status, _ = self.request("GET", "/ready")
            if status == 200:
                return
            time.sleep(0.1)
        raise RuntimeError("llmctl serve never became ready")

    def request(self, method, path, body=None, headers=None, timeout=120):
        """(status, parsed JSON or text) for one request; body may be bytes, str or a JSON value."""
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
        h = {"Content-Type": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        h.update(headers or {})
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, raw, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            status, raw, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
        text = raw.decode("utf-8", "replace")
        if "json" in ctype:
            return status, json.loads(text)
        return status, text

    def normal_request_works(self):
        """A short greedy completion answers 200 with its two tokens."""
        status, body = self.request("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 2, "temperature": 0})
        return status == 200 and body["usage"]["completion_tokens"] == 2

    def metrics(self):
        status, text = self.request("GET", "/metrics")
        assert status == 200
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def wait_idle(self, seconds=10):
        """True once no request runs or waits and no KV block is in use."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            m = self.metrics()
            if m["llmctl_requests_running"] == 0 and m["llmctl_requests_waiting"] == 0 and m["llmctl_kv_cache_usage_ratio"] == 0:
                return True
            time.sleep(0.1)
        return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(2)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.returncode

    def output(self):
        return open(self.log_path).read()


def recv_until_close(s):
    """Everything the server writes on socket s until it closes the connection or the socket's
    timeout passes; closes s."""
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    s.close()
    return data
