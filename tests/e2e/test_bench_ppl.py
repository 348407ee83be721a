#!/usr/bin/env python3
"""`llmctl bench ppl` of the default model equals HF transformers' strided perplexity
(tests/golden/smollm2_ppl.json, made by tests/golden/make_ppl_golden.py: ctx 128, stride 64, the
first 1000 tokens of WikiText-2 validation, fp32) within 1e-3 relative, window by window too.
Usage: test_bench_ppl.py BUILD_DIR
"""
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import check_csv, check_meta, check_svg, load, paths, run  # noqa: E402

llmctl, src, model = paths()
data = os.path.join(src, "../shared/data/wikitext2-valid.txt")
if not os.path.exists(model) or not os.path.exists(data):
    print(f"SKIP: default model ({model}) or WikiText ({data}) not found")
    sys.exit(77)
golden = load(os.path.join(src, "tests/golden/smollm2_ppl.json"))
tmp = tempfile.mkdtemp()
text = os.path.join(tmp, "text.txt")
with open(data, encoding="utf-8") as f, open(text, "w", encoding="utf-8") as g:
    g.write(f.read()[:golden["chars"]])
out = {k: os.path.join(tmp, f"ppl.{k}") for k in ("json", "csv", "svg")}
p = run([llmctl, "bench", "ppl", "--model", model, "--text", text, "--ctx", str(golden["ctx"]), "--stride",
         str(golden["stride"]), "--max-tokens", str(golden["max_tokens"]), "--json", out["json"], "--csv", out["csv"],
         "--plot", out["svg"]])
print(p.stdout)
rep = load(out["json"])
check_meta(rep["meta"])
r = rep["rows"][0]
assert r["tokens"] == golden["tokens"], (r["tokens"], golden["tokens"])
assert r["scored_tokens"] == golden["scored_tokens"], (r["scored_tokens"], golden["scored_tokens"])
assert r["windows"] == len(golden["windows"])
assert math.isclose(r["ppl"], math.exp(r["nll_mean"]), rel_tol=1e-12)
rel = abs(r["ppl"] - golden["ppl"]) / golden["ppl"]
print(f"llmctl ppl {r['ppl']:.6f}, transformers {golden['ppl']:.6f}, relative difference {rel:.2e}")
assert rel < 1e-3, rel
for ours, ref in zip(rep["extra"]["windows"], golden["windows"]):
    assert (ours["begin"], ours["end"], ours["scored"]) == (ref["begin"], ref["end"], ref["scored"]), (ours, ref)
    assert abs(ours["nll"] - ref["nll"]) < 2e-3, (ours, ref)
check_csv(out["csv"], rep)
check_svg(out["svg"])
print("bench ppl: OK")
