#!/usr/bin/env python3
"""`llmctl bench serve` against `llmctl serve`: the token counts the client reports (from the
server's usage) equal the server's own /metrics counters, every request completes, and the JSON
rows make sense (throughput = tokens / duration, percentiles ordered). Two rates, random prompts of
exact token lengths from the model's tokenizer, EOS ignored so every request makes --output-len.
Usage: test_bench_serve_llmctl.py BUILD_DIR
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import check_percentiles, close, load, run  # noqa: E402
from server_util import MODEL, Server, require_model  # noqa: E402

build = sys.argv[1]
require_model()
N, IN, OUT = 12, 48, 16
srv = Server(build)
try:
    out = os.path.join(tempfile.mkdtemp(), "serve.json")
    run([os.path.join(build, "llmctl"), "bench", "serve", "--url", srv.url, "--tokenizer", MODEL, "--num-prompts", str(N),
         "--input-len", str(IN), "--output-len", str(OUT), "--ignore-eos", "--request-rate", "8,inf", "--seed", "3",
         "--no-progress", "--json", out], timeout=600)
    rep = load(out)
    m = srv.metrics()
    rows = rep["rows"]
    assert len(rows) == 2
    for r in rows:
        assert r["completed"] == N and r["failed"] == 0, r
        assert r["token_counts_from_usage"] is True
        assert r["output_tokens"] == N * OUT, r["output_tokens"]
        assert close(r["output_throughput"], r["output_tokens"] / r["duration_s"])
        for p in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
            check_percentiles(r, p)
    client_in = sum(r["input_tokens"] for r in rows)
    client_out = sum(r["output_tokens"] for r in rows)
    print(f"client: {client_in} prompt + {client_out} generated tokens; server /metrics: "
          f"{m['llmctl_prompt_tokens_total']:.0f} + {m['llmctl_generation_tokens_total']:.0f}")
    # bench serve first asks /v1/models; every completion request is counted by the server.
    assert m["llmctl_generation_tokens_total"] == client_out, (m["llmctl_generation_tokens_total"], client_out)
    assert m["llmctl_prompt_tokens_total"] == client_in, (m["llmctl_prompt_tokens_total"], client_in)
    assert m["llmctl_e2e_request_latency_seconds_count"] == 2 * N
    assert m['llmctl_request_success_total{finish_reason="length"}'] == 2 * N
    # Random token ids decoded to text re-tokenize a little differently: within 10% of the target.
    assert all(abs(r["input_tokens"] - N * IN) <= 0.1 * N * IN for r in rows), [r["input_tokens"] for r in rows]
finally:
    rc = srv.stop()
assert rc == 0, rc
print("ok: bench serve agrees with llmctl serve's metrics")
