#!/usr/bin/env python3
"""Quantized HF checkpoints in llmctl (dequantized at load, engine/model/quantized_checkpoint.h), on
tiny random Llamas under tests/golden/quant/:
  tiny_llama_ct_w4g32  quantized by llm-compressor (int4 sym g32, compressed-tensors pack-quantized);
                       golden: transformers' own load of it (it decompresses compressed-tensors)
  tiny_llama_awq_g32   packed by AutoAWQ's WQLinear_GEMM (int4 asym g32, f16 elsewhere)
  tiny_llama_gptq_g32  packed by GPTQModel's TorchLinear, saved as GPTQ v1 (int4 sym g32)
  tiny_llama_gptq_g32_actorder  the same with desc_act (g_idx scatters each group's columns)
                       golden for these three: transformers fp32 with each linear set to the packer's
                       own dequantization (make_awq_gptq_model_golden.py says why)
Checks, for each: top-20 log-probabilities within 1e-3 at every position and identical greedy
continuations (each golden JSON records that the unquantized model is far outside that bound), and
that `llmctl generate`'s stats line names the format and says whether it dequantized at load or runs the
linears quantized (a backend with Int4Group/Int8Group kernels); the act-order one must run quantized
on the CPU backend (its columns permuted once at load), with no weight left dense. On the compressed-tensors
one also: `bench ppl` runs; `llmctl convert` writes a dense checkpoint (no quantization_config, no
packed tensors) that scores the same; compressed-tensors k_scale / v_scale tensors (kv_cache_scheme)
are not refused as unknown; an unsupported quantization_config and a corrupted packed tensor are
refused by name. Exits 77 (skipped) when a fixture is absent and nothing failed.
Usage: test_quantized_checkpoint.py BUILD_DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

build = sys.argv[1]
src = os.environ.get("LLMCTL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
QDIR = os.path.join(src, "tests/golden/quant")
MODELS = [("tiny_llama_ct_w4g32", "compressed-tensors int4 g32 sym"), ("tiny_llama_awq_g32", "awq int4 g32 asym"),
          ("tiny_llama_gptq_g32", "gptq int4 g32 sym"), ("tiny_llama_gptq_g32_actorder", "gptq int4 g32 sym")]
present = [(m, label) for m, label in MODELS
           if os.path.exists(os.path.join(QDIR, m, "model.safetensors")) and os.path.exists(os.path.join(QDIR, m + "_golden.json"))]
missing = [m for m, _ in MODELS if m not in [p for p, _ in present]]
if not present:
    print(f"SKIP: no quantized fixture under {QDIR} (tests/golden/quant/make_*_model_golden.py)")
    sys.exit(77)
model = os.path.join(QDIR, "tiny_llama_ct_w4g32")
golden_path = os.path.join(QDIR, "tiny_llama_ct_w4g32_golden.json")
LLMCTL = os.path.join(build, "llmctl")
TOL = 1e-3
failures = []
tmp = tempfile.mkdtemp()


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def score(model_dir, golden_path):
    r = run([os.path.join(build, "llmctl_score"), golden_path, "--model", model_dir, "--dtype", "f32", "--device", "cpu"])
    if r.returncode != 0:
        failures.append(f"llmctl_score on {model_dir} failed: {r.stderr.strip()}")
        return None
    return json.loads(r.stdout)


def compare(ours, golden_path, label):
    if ours is None:
        return
    golden = json.load(open(golden_path))
    if [c["name"] for c in ours["cases"]] != [c["name"] for c in golden["cases"]]:
        failures.append(f"{label}: cases differ from the golden file")
        return
    for g, o in zip(golden["cases"], ours["cases"]):
        worst = max(abs(a - b) for ra, rb in zip(g["top_logprobs"], o["logprobs_at_ref_ids"]) for a, b in zip(ra, rb))
        rows_ok = len(g["top_logprobs"]) == len(o["logprobs_at_ref_ids"])
        greedy_ok = g["greedy_ids"] == o["greedy_ids"]
        print(f"{label} {g['name']}: max |dlogprob| top-20 = {worst:.2e} (bound {TOL:g}; unquantized model: "
              f"{golden['dense_model_max_dlogprob']:.2f}), greedy {'identical' if greedy_ok else 'DIFFERS'}")
        if worst > TOL or not rows_ok or not greedy_ok:
            failures.append(f"{label} {g['name']}: max |dlogprob| {worst:.2e}, rows {rows_ok}, greedy {greedy_ok}")


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return header, data


def write_safetensors(path, header, data):
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def copy_model(name):
    d = os.path.join(tmp, name)
    shutil.copytree(model, d)
    return d


try:
    # 1. logits against the reference, and generate, for every layout
    for name, label in present:
        d = os.path.join(QDIR, name)
        compare(score(d, os.path.join(QDIR, name + "_golden.json")), os.path.join(QDIR, name + "_golden.json"), label)
        r = run([LLMCTL, "generate", "-m", d, "hello there", "-n", "8", "--temperature", "0"])
        said = any(f"weights {label}, {how}" in r.stderr for how in ("dequantized to f32", "run quantized"))
        if r.returncode != 0 or not said:
            failures.append(f"generate {name}: rc {r.returncode}, stderr: {r.stderr.strip()[-400:]}")
        if name.endswith("_actorder") and (f"weights {label}, run quantized" not in r.stderr or "loaded dense" in r.stderr):
            failures.append(f"generate {name}: act-order weights did not all run quantized: {r.stderr.strip()[-400:]}")
        elif name.endswith("_actorder"):
            print(f"{name}: act-order linears run quantized")
    if not os.path.exists(os.path.join(model, "model.safetensors")):
        raise SystemExit(1 if failures else 77)

    # 2. bench ppl
    text = os.path.join(tmp, "text.txt")
    with open(text, "w") as f:
        f.write("The quick brown fox jumps over the lazy dog. " * 12)
    r = run([LLMCTL, "bench", "ppl", "-m", model, "--text", text, "--ctx", "64", "--stride", "32", "--no-progress",
             "--json", os.path.join(tmp, "ppl.json")])
    if r.returncode != 0:
        failures.append(f"bench ppl: rc {r.returncode}: {r.stderr.strip()[-400:]}")
    else:
        print("bench ppl: ok")

    # 3. convert gives a dense checkpoint that scores the same
    out = os.path.join(tmp, "dense")
    r = run([LLMCTL, "convert", model, out])
    if r.returncode != 0:
        failures.append(f"convert: rc {r.returncode}: {r.stderr.strip()[-400:]}")
    else:
        cfg = json.load(open(os.path.join(out, "config.json")))
        names = set()
        for fn in os.listdir(out):
            if fn.endswith(".safetensors"):
                names |= set(read_safetensors(os.path.join(out, fn))[0])
        if "quantization_config" in cfg:
            failures.append("convert: output config.json still has quantization_config")
        if any(n.endswith(("weight_packed", "weight_scale", "weight_shape")) for n in names):
            failures.append("convert: output still has packed tensors")
        if "model.layers.0.mlp.down_proj.weight" not in names:
            failures.append("convert: output has no dense model.layers.0.mlp.down_proj.weight")
        shutil.copy(os.path.join(model, "tokenizer.json"), out)
        compare(score(out, golden_path), golden_path, "converted")

    # 4. k_scale / v_scale of a compressed-tensors kv_cache_scheme load (another stage reads them)
    d = copy_model("kv_scales")
    header, data = read_safetensors(os.path.join(d, "model.safetensors"))
    extra = b""
    for i in range(2):
        for kv in ("k_scale", "v_scale"):
            header[f"model.layers.{i}.self_attn.{kv}"] = {"dtype": "F32", "shape": [1],
                                                         "data_offsets": [len(data) + len(extra), len(data) + len(extra) + 4]}
            extra += struct.pack("<f", 0.05)
    write_safetensors(os.path.join(d, "model.safetensors"), header, data + extra)
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg["quantization_config"]["kv_cache_scheme"] = {"num_bits": 8, "type": "float", "strategy": "tensor",
                                                     "dynamic": False, "symmetric": True}
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    r = run([LLMCTL, "generate", "-m", d, "hi", "-n", "4", "--temperature", "0"])
    if r.returncode != 0:
        failures.append(f"k_scale/v_scale checkpoint refused: {r.stderr.strip()[-400:]}")
    else:
        print("k_scale / v_scale tensors: loaded")

    # 5. refusals by name
    d = copy_model("fp8")
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic"}
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    r = run([LLMCTL, "generate", "-m", d, "hi", "-n", "4"])
    if r.returncode == 0 or "'fp8' is not supported" not in r.stderr:
        failures.append(f"fp8 quantization_config: rc {r.returncode}, stderr: {r.stderr.strip()[-300:]}")
    else:
        print("fp8 quantization_config: refused by name")
    d = copy_model("bad_packed")
    header, data = read_safetensors(os.path.join(d, "model.safetensors"))
    header["model.layers.1.mlp.up_proj.weight_packed"]["shape"][1] //= 2
    b, e = header["model.layers.1.mlp.up_proj.weight_packed"]["data_offsets"]
    header["model.layers.1.mlp.up_proj.weight_packed"]["data_offsets"] = [b, b + (e - b) // 2]
    write_safetensors(os.path.join(d, "model.safetensors"), header, data)
    r = run([LLMCTL, "generate", "-m", d, "hi", "-n", "4"])
    if r.returncode == 0 or "model.layers.1.mlp.up_proj" not in r.stderr or "weight_packed" not in r.stderr:
        failures.append(f"corrupt weight_packed: rc {r.returncode}, stderr: {r.stderr.strip()[-300:]}")
    else:
        print("corrupt weight_packed: refused by name")
finally:
    shutil.rmtree(tmp, ignore_errors=True)

for f in failures:
    print("FAIL:", f)
for m in missing:
    print(f"SKIP: fixture {m} absent")
print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
sys.exit(1 if failures else (77 if missing else 0))
