#!/usr/bin/env python3
"""The default model's own Q4_1 GGUF runs quantized (issue: quantized inference).
- `generate`'s stats line says the GGUF's linears run quantized (and the f32 directory's are f32);
  `--quantized-weights dequantize` runs the GGUF's dense copy (the HF directory's tokens).
- `bench ppl` (--ctx 512 --stride 256, the first 1024 tokens of WikiText-2 validation): with exact
  activations (--act-quant none) the quantized kernels give the perplexity of the same weights
  dequantized to f32 (the HF directory is the GGUF dequantized) within 1e-3 relative -- they add no
  error of their own; with int8 activations (default) within 1%: that is activation quantization's cost.
- Batch invariance: four greedy prompts in one batch give the tokens each gives alone.
Usage: test_quantized_inference.py BUILD_DIR [--cpu-isa ISA]
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import cpu_isa, load, paths, run, skip_unless_stepping_down  # noqa: E402

skip_unless_stepping_down()

llmctl, src, model = paths()
gguf = os.path.join(os.path.dirname(model), "SmolLM2-135M-Instruct.Q4_1.gguf")
data = os.path.join(src, "../shared/data/wikitext2-valid.txt")
if not os.path.exists(model) or not os.path.exists(gguf) or not os.path.exists(data):
    print(f"SKIP: default model ({model}, {gguf}) or WikiText ({data}) not found")
    sys.exit(77)
tmp = tempfile.mkdtemp()

p = run([llmctl, "generate", "--model", gguf, "-n", "4", "--temperature", "0", "Hello"])
assert "weights Q4_1 GGUF, run quantized" in p.stderr, p.stderr
if cpu_isa() == "avx2":  # the ctest entry that steps down: it does
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    if all(f" {f} " in flags.replace("\n", " ") for f in ("avx2", "fma", "f16c")):
        assert "quantized avx2" in p.stderr, p.stderr
p = run([llmctl, "generate", "--model", model, "-n", "4", "--temperature", "0", "Hello"])
assert "| weights f32 |" in p.stderr, p.stderr
# --quantized-weights dequantize: the GGUF's dense copy, the same tokens as the HF directory (the GGUF
# dequantized by convert); keep is the CPU's default.
dense = run([llmctl, "generate", "--model", model, "-n", "16", "--temperature", "0", "--json", "Hello"])
p = run([llmctl, "generate", "--model", gguf, "--quantized-weights", "dequantize", "-n", "16", "--temperature", "0",
         "--json", "Hello"])
assert "weights Q4_1 GGUF, dequantized to f32" in p.stderr, p.stderr
assert json.loads(p.stdout)["token_ids"] == json.loads(dense.stdout)["token_ids"], (p.stdout, dense.stdout)
p = run([llmctl, "generate", "--model", gguf, "--quantized-weights", "keep", "-n", "4", "--temperature", "0", "Hello"])
assert "weights Q4_1 GGUF, run quantized" in p.stderr, p.stderr

ppl = {}
for name, path, flags in (("dense f32", model, []), ("Q4_1 act-quant none", gguf, ["--act-quant", "none"]),
                          ("Q4_1 act-quant int8", gguf, ["--act-quant", "int8"])):
    out = os.path.join(tmp, f"ppl.{len(ppl)}.json")
    run([llmctl, "bench", "ppl", "--model", path, "--text", data, "--ctx", "512", "--stride", "256",
         "--max-tokens", "1024", "--no-progress", "--json", out, *flags], timeout=900)
    ppl[name] = load(out)["rows"][0]["ppl"]
base = ppl["dense f32"]
for name, bound in (("Q4_1 act-quant none", 1e-3), ("Q4_1 act-quant int8", 0.01)):
    rel = (ppl[name] - base) / base
    print(f"{name}: ppl {ppl[name]:.5f} ({100 * rel:+.4f}% against dense f32 {base:.5f})")
    assert abs(rel) < bound, (name, ppl)

prompts = os.path.join(tmp, "prompts.jsonl")
texts = ["The capital of France is", "def fibonacci(n):", "Once upon a time", "List three colors:"]
with open(prompts, "w") as f:
    for t in texts:
        f.write(json.dumps({"prompt": t, "max_tokens": 24, "temperature": 0}) + "\n")
p = run([llmctl, "generate", "--model", gguf, "--prompts", prompts, "--max-num-seqs", "4"], timeout=600)
batched = [json.loads(line)["outputs"][0]["token_ids"] for line in p.stdout.strip().splitlines()]
assert len(batched) == len(texts), p.stdout
for t, want in zip(texts, batched):
    p = run([llmctl, "generate", "--model", gguf, "-n", "24", "--temperature", "0", "--json", t])
    alone = json.loads(p.stdout)["token_ids"]
    assert alone == want, (t, alone, want)
print("quantized inference: OK (batched tokens equal each prompt alone)")
