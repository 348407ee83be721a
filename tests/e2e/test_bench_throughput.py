#!/usr/bin/env python3
"""`llmctl bench throughput` on the default model: a tiny max-num-seqs sweep (random prompts, fixed
lengths) and a JSONL dataset; the JSON, CSV and SVG are checked for shape and sense (every request
completed, token counts add up, throughput = tokens / time, percentiles ordered); then Ctrl-C
during a run still prints and writes what was measured (exit 130, "interrupted": true).
Usage: test_bench_throughput.py BUILD_DIR
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import check_csv, check_meta, check_percentiles, check_svg, close, load, paths, run  # noqa: E402

llmctl, src, model = paths()
if not os.path.exists(model):
    print(f"SKIP: default model not found at {model}")
    sys.exit(77)
tmp = tempfile.mkdtemp()
N, IN, OUT = 6, 24, 6
out = {k: os.path.join(tmp, f"tp.{k}") for k in ("json", "csv", "svg")}
p = run([llmctl, "bench", "throughput", "--model", model, "--num-prompts", str(N), "--input-len", str(IN),
         "--output-len", str(OUT), "--sweep", "max-num-seqs=1,6", "--json", out["json"], "--csv", out["csv"],
         "--plot", out["svg"]])
print(p.stdout)
rep = load(out["json"])
assert rep["mode"] == "throughput" and rep["interrupted"] is False
check_meta(rep["meta"])
assert [r["max_num_seqs"] for r in rep["rows"]] == [1, 6]
for r in rep["rows"]:
    assert r["completed"] == N
    assert r["input_tokens"] == N * IN, r["input_tokens"]
    assert r["output_tokens"] == N * OUT, r["output_tokens"]  # EOS ignored: exactly OUT each
    assert r["total_tokens"] == r["input_tokens"] + r["output_tokens"]
    assert close(r["output_tokens_per_s"], r["output_tokens"] / r["elapsed_s"])
    assert close(r["total_tokens_per_s"], r["total_tokens"] / r["elapsed_s"])
    assert close(r["requests_per_s"], r["completed"] / r["elapsed_s"])
    assert 0 < r["peak_kv_usage_pct"] <= 100
    for m in ("ttft_ms", "tpot_ms", "e2e_ms"):
        check_percentiles(r, m)
    assert r["e2e_ms_max"] <= r["elapsed_s"] * 1000 + 1
# Six sequences at once hold more KV than one at a time.
assert rep["rows"][1]["peak_kv_usage_pct"] > rep["rows"][0]["peak_kv_usage_pct"]
assert "output tok/s" in p.stdout and p.stdout.count("\n") >= 4
check_csv(out["csv"], rep)
texts = check_svg(out["svg"], min_series=3)
assert "max-num-seqs" in texts and "output tokens/s" in texts, texts

# A JSONL dataset: the lines' max_tokens are the output lengths.
ds = os.path.join(tmp, "reqs.jsonl")
with open(ds, "w") as f:
    for i, n in enumerate([3, 5, 7]):
        f.write(json.dumps({"prompt": f"Request {i}: the quick brown fox jumps over the lazy dog.", "max_tokens": n}) + "\n")
run([llmctl, "bench", "throughput", "--model", model, "--dataset", ds, "--num-prompts", "3", "--json", out["json"]])
r = load(out["json"])["rows"][0]
assert r["completed"] == 3 and r["output_tokens"] == 15, r

# Ctrl-C: a run too long to finish is stopped once its progress line shows a completed request (on a
# loaded machine that can take a while, so no fixed sleep); the report is still written.
cmd = [llmctl, "bench", "throughput", "--model", model, "--num-prompts", "64", "--input-len", "64", "--output-len",
       "64", "--max-num-seqs", "4", "--json", out["json"], "--csv", out["csv"]]
proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
err_lines = []
progress = re.compile(r"(\d+)/64 \(")


def read_stderr():
    for line in proc.stderr:
        err_lines.append(line)


reader = threading.Thread(target=read_stderr, daemon=True)
reader.start()
deadline = time.time() + 180
while time.time() < deadline and proc.poll() is None:
    if any(m and int(m.group(1)) > 0 for m in map(progress.search, list(err_lines))):
        break
    time.sleep(0.2)
assert proc.poll() is None, ("the run ended before it was interrupted", proc.returncode, "".join(err_lines))
proc.send_signal(signal.SIGINT)
stdout = proc.stdout.read()
proc.wait(timeout=60)
reader.join(timeout=10)
stderr = "".join(err_lines)
assert proc.returncode == 130, (proc.returncode, stderr)
assert "interrupted" in stdout, stdout
rep = load(out["json"])
assert rep["interrupted"] is True
r = rep["rows"][0]
assert 0 < r["completed"] < 64, r["completed"]
assert r["output_tokens"] >= r["completed"] * 64
assert close(r["output_tokens_per_s"], r["output_tokens"] / r["elapsed_s"])
check_csv(out["csv"], rep)
print("bench throughput: OK")
