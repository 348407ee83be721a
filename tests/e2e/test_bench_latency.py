#!/usr/bin/env python3
"""`llmctl bench latency` on the default model: a 2 x 1 x 1 matrix with 2 repetitions after a
warm-up; each case reports prefill, TPOT and E2E with their spread, consistent with each other
(prefill <= E2E, the fastest prefill gives the highest pp tok/s); JSON, CSV and SVG checked. With
--simulate-threads (8 modelled threads): the modelled time below the one-thread wall time, its serial
share and loop efficiency fractions, the backend named as modelled.
Usage: test_bench_latency.py BUILD_DIR
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import check_csv, check_meta, check_percentiles, check_svg, close, load, paths, run  # noqa: E402

llmctl, src, model = paths()
if not os.path.exists(model):
    print(f"SKIP: default model not found at {model}")
    sys.exit(77)
tmp = tempfile.mkdtemp()
out = {k: os.path.join(tmp, f"lat.{k}") for k in ("json", "csv", "svg")}
p = run([llmctl, "bench", "latency", "--model", model, "--batch", "1,4", "--input-len", "32", "--output-len", "6",
         "--repetitions", "2", "--warmup", "1", "--json", out["json"], "--csv", out["csv"], "--plot", out["svg"]])
print(p.stdout)
rep = load(out["json"])
assert rep["mode"] == "latency" and not rep["interrupted"]
check_meta(rep["meta"])
assert [(r["batch"], r["input_len"], r["output_len"]) for r in rep["rows"]] == [(1, 32, 6), (4, 32, 6)]
for r in rep["rows"]:
    assert r["repetitions"] == 2
    for m in ("prefill_ms", "tpot_ms", "e2e_ms", "pp_tok_s", "tg_tok_s"):
        check_percentiles(r, m)
    assert 0 < r["prefill_ms_min"] and r["prefill_ms_max"] <= r["e2e_ms_max"]
    assert r["tpot_ms_mean"] > 0
    # pp tok/s per repetition = batch * input / prefill: its max comes from the fastest prefill.
    assert close(r["pp_tok_s_max"], r["batch"] * r["input_len"] / (r["prefill_ms_min"] / 1000), 1e-9)
    # E2E >= prefill + (output - 1) decode steps.
    assert r["e2e_ms_mean"] >= r["prefill_ms_mean"]
check_csv(out["csv"], rep)
texts = check_svg(out["svg"], min_series=3)
assert "b1 i32 o6" in texts and "b4 i32 o6" in texts, texts
for r in rep["rows"]:
    assert "serial_share" not in r and "loop_efficiency" not in r  # real threads: no model

p = run([llmctl, "bench", "latency", "--model", model, "-t", "8", "--simulate-threads", "--input-len", "64",
         "--output-len", "8", "--repetitions", "2", "--warmup", "1", "--json", out["json"]])
print(p.stdout)
rep = load(out["json"])
assert rep["meta"]["config"]["modelled_threads"] == 8, rep["meta"]["config"]
assert "8 modelled threads" in str(rep["meta"]), rep["meta"]
(r,) = rep["rows"]
assert r["modelled_threads"] == 8 and r["loops"] > 0
assert 0 < r["modelled_s"] < r["one_thread_s"], r
assert 0 < r["serial_share"] < 1 and 0 < r["loop_efficiency"] <= 1, r
assert 0 < r["prefill_ms_min"] <= r["e2e_ms_min"] <= 1000 * r["one_thread_s"]
print("bench latency: OK")
