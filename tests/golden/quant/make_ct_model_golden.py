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
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
args = ap.parse_args()
NAME = "tiny_llama_ct_w4g32"
model_dir = os.path.join(args.out, NAME)


def byte_unicode():  # GPT-2's byte -> printable character map (a 256-token byte-level BPE)
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tokenizer_json():
    u = byte_unicode()
    return {"version": "1.0", "added_tokens": [], "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
            "post_processor": None, "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "vocab": {u[b]: b for b in range(256)}, "merges": []}}


torch.manual_seed(0)
cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=260, max_position_embeddings=128, rms_norm_eps=1e-5,
                  tie_word_embeddings=False, initializer_range=0.3, bos_token_id=1, eos_token_id=2)
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
gen = torch.Generator().manual_seed(7)
cases, dense_gap = [], 0.0
for i, length in enumerate((24, 40, 9)):
    ids = torch.randint(3, 256, (1, length), generator=gen)
    with torch.no_grad():
        lp = torch.log_softmax(q(ids).logits[0].float(), -1)
        lp_dense = torch.log_softmax(dense(ids).logits[0].float(), -1)
    top = torch.topk(lp, 20, dim=-1)
    dense_gap = max(dense_gap, (lp_dense.gather(-1, top.indices) - top.values).abs().max().item())
    prompt = ids[:, :8]
    out, margins = prompt, []
    with torch.no_grad():
        for _ in range(16):
            # ids 256..259 pad the embedding past the 256-token tokenizer: llmctl never samples them
            logits = q(out).logits[0, -1, :256].float()
            two = torch.topk(logits, 2).values
            margins.append(round((two[0] - two[1]).item(), 5))
            out = torch.cat([out, logits.argmax().view(1, 1)], dim=1)
    cases.append({"name": f"random_{i}", "input_ids": ids[0].tolist(), "top_ids": top.indices.tolist(),
                  "top_logprobs": [[round(x, 6) for x in row] for row in top.values.tolist()],
                  "greedy_prompt_ids": prompt[0].tolist(), "greedy_ids": out[0, 8:].tolist(),
                  "greedy_margins": margins})

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
