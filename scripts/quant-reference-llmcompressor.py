#!/usr/bin/env python3
"""The reference for `llmctl quantize`: llm-compressor (PyPI `llmcompressor`, torch on the CPU) runs GPTQ
or AWQ int4 on the default model with exactly the calibration samples llmctl drew (the JSONL of token
ids that `llmctl quantize --calib-dump FILE` writes), and saves a compressed-tensors checkpoint that
`llmctl bench ppl` then scores like llmctl's own output. Time and peak memory are measured from outside
(scripts/bench-quantize.sh runs it under /usr/bin/time -v).

Usage: quant-reference-llmcompressor.py MODEL_DIR CALIB_JSONL OUT_DIR --method gptq|awq
          [--group-size 64] [--asym] [--dampening 0.01] [--actorder static|none]
Needs: torch, transformers, llmcompressor, compressed-tensors, datasets (a virtual environment).
"""
import argparse
import json
import time

import torch

# llm-compressor's AWQ pins host memory for its caches, which needs a CUDA driver: on a CPU-only
# machine pinning is made a no-op (the tensors stay in ordinary memory).
torch.Tensor.pin_memory = lambda self, *a, **k: self

from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme  # noqa: E402
from datasets import Dataset  # noqa: E402
from llmcompressor import oneshot  # noqa: E402
from llmcompressor.modifiers.quantization import GPTQModifier, QuantizationModifier  # noqa: E402
from llmcompressor.modifiers.transform.awq import AWQModifier  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("calib")
ap.add_argument("out")
ap.add_argument("--method", choices=["gptq", "awq"], required=True)
ap.add_argument("--group-size", type=int, default=64)
ap.add_argument("--asym", action="store_true")
ap.add_argument("--dampening", type=float, default=0.01)
ap.add_argument("--actorder", choices=["static", "none"], default="static",
                help="gptq: llm-compressor's default is static (act-order with static groups)")
ap.add_argument("--threads", type=int, default=2)
a = ap.parse_args()
torch.set_num_threads(a.threads)

samples = [json.loads(line) for line in open(a.calib) if line.strip()]
ds = Dataset.from_dict({"input_ids": samples, "attention_mask": [[1] * len(s) for s in samples]})
scheme = QuantizationScheme(targets=["Linear"], weights=QuantizationArgs(
    num_bits=4, type="int", symmetric=not a.asym, strategy="group", group_size=a.group_size))
if a.method == "gptq":
    recipe = [GPTQModifier(config_groups={"group_0": scheme}, ignore=["lm_head"], dampening_frac=a.dampening,
                           block_size=128, actorder=None if a.actorder == "none" else a.actorder)]
else:
    recipe = [AWQModifier(duo_scaling=True, n_grid=20),
              QuantizationModifier(config_groups={"group_0": scheme}, ignore=["lm_head"])]

model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
tok = AutoTokenizer.from_pretrained(a.model)
t0 = time.time()
oneshot(model=model, dataset=ds, recipe=recipe, num_calibration_samples=len(samples),
        max_seq_length=len(samples[0]), pipeline="sequential")
elapsed = time.time() - t0
model.save_pretrained(a.out, save_compressed=True)
tok.save_pretrained(a.out)
print(json.dumps({"method": a.method, "samples": len(samples), "seq_len": len(samples[0]),
                  "group_size": a.group_size, "symmetric": not a.asym, "oneshot_seconds": round(elapsed, 1),
                  "torch": torch.__version__}))
