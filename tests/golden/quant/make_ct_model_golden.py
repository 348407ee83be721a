#!/usr/bin/env python3
"""Writes tests/golden/quant/tiny_llama_ct_w4g32/ (a tiny random Llama quantized by llm-compressor:
QuantizationModifier, int4 weights, symmetric, group 32, lm_head left dense; data-free RTN, saved
compressed as pack-quantized by compressed-tensors) and tiny_llama_ct_w4g32_golden.json: what
transformers computes from that checkpoint (it decompresses compressed-tensors at load), in fp32:
top-20 log-probabilities at every position of a few teacher-forced sequences, and greedy
continuations. tests/e2e/test_quantized_checkpoint.py runs llmctl on the same directory.

The weights are initialised with std 0.3 (not transformers' 0.02) so that every layer moves the
logits: the JSON also records how far the unquantized model's log-probabilities are from the
quantized one's, which shows that the 1e-3 test bound separates a right dequantization from none.
Usage (in /work/venv-ref, offline): make_ct_model_golden.py [--out DIR]
"""
import argparse
import json
import os
import shutil
import tempfile

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, LlamaForCausalLM  # noqa: E402

import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_model_util import golden_cases, tiny_llama_config, tokenizer_json  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
args = ap.parse_args()
NAME = "tiny_llama_ct_w4g32"
model_dir = os.path.join(args.out, NAME)


torch.manual_seed(0)
cfg = tiny_llama_config()
dense = LlamaForCausalLM(cfg).float().eval()

tmp = tempfile.mkdtemp()
dense.save_pretrained(os.path.join(tmp, "dense"))
from llmcompressor import oneshot  # noqa: E402
from llmcompressor.modifiers.quantization import QuantizationModifier  # noqa: E402

model = LlamaForCausalLM.from_pretrained(os.path.join(tmp, "dense"), dtype=torch.float32)
recipe = QuantizationModifier(config_groups={"group_0": {"targets": ["Linear"], "weights": {
    "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 32}}}, ignore=["lm_head"])
oneshot(model=model, recipe=recipe)
shutil.rmtree(model_dir, ignore_errors=True)
model.save_pretrained(model_dir, save_compressed=True)
with open(os.path.join(model_dir, "tokenizer.json"), "w") as f:
    json.dump(tokenizer_json(), f)
shutil.rmtree(tmp)

# transformers' run of the saved, compressed checkpoint
q = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
assert q.config.quantization_config is not None
cases, dense_gap = golden_cases(q, dense)

import compressed_tensors  # noqa: E402
import llmcompressor  # noqa: E402

golden = {"model": f"tests/golden/quant/{NAME} (random Llama, llm-compressor int4 sym g32, lm_head dense)",
          "script": "tests/golden/quant/make_ct_model_golden.py", "transformers": transformers.__version__,
          "torch": torch.__version__, "compressed_tensors": compressed_tensors.__version__,
          "llmcompressor": llmcompressor.__version__, "top_k": 20,
          "dense_model_max_dlogprob": round(dense_gap, 6), "cases": cases}
with open(os.path.join(args.out, f"{NAME}_golden.json"), "w") as f:
    json.dump(golden, f)
print(f"wrote {model_dir} and {NAME}_golden.json; unquantized model differs by up to {dense_gap:.3f} in logprob")
