#!/usr/bin/env python3
"""Writes tests/golden/families/tiny_<family>_gptq_golden.json: transformers' fp32 run (the
compressed-tensors package decompressing the checkpoint) of the tiny family models quantized by
`llmctl quantize --method gptq` -- the proof that what llmctl's GPTQ writes for these families loads in
transformers and means there what it means in llmctl. GPTQ calibrates through each family's own
forward (quant/algo/family_calibration.h): Qwen3's q/k norms, Gemma's sandwich norms, GeGLU,
soft-capping and windows, Phi-3's fused projections.

The checkpoint is made by the command recorded in the JSON ("command", run from the repository root
with ../shared beside it); quantize is deterministic, so tests/e2e/test_families.py makes it again,
checks its sha256 equals "model_sha256", and scores it with llmctl against these cases (the format of
make_family_goldens.py; "gap": the largest |dlogprob| of the dense model at the same ids).

The mixtures of experts (Qwen3-MoE, Mixtral, Qwen2-MoE; GPTQ per expert on the tokens routed to it,
routers dense) need transformers 4.x: transformers 5 holds a mixture's experts as fused 3-D parameters,
which compressed-tensors' "Linear" targets do not cover, so the per-expert packed modules llmctl (and
llm-compressor) write are not what it runs. The script writes the families the running transformers
can load: the dense ones under 5.x, the mixtures under 4.x (e.g. transformers 4.57 on PYTHONPATH).

Needs torch, transformers, compressed-tensors. Usage: make_gptq_goldens.py BUILD_DIR (from the repository root)
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import compressed_tensors
import torch
import transformers
from transformers import AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "quant"))
from make_family_goldens import LENGTHS  # noqa: E402
from tiny_model_util import golden_cases  # noqa: E402

# family -> group size (one that divides every linear's input width: Mixtral's experts are 48 wide,
# Qwen2-MoE's 24 and its shared expert 40)
DENSE = {"qwen3": 32, "gemma2": 32, "gemma3": 32, "phi3": 32}
MOE = {"qwen3_moe": 32, "mixtral": 16, "qwen2_moe": 8}
COMMAND = ("{llmctl} quantize tests/golden/families/tiny_{family} {out} --method gptq --group-size {group} "
           "--calib-samples 8 --calib-seq-len 32 --calib ../shared/data/tinyshakespeare.txt")


def load(path):
    # eager attention: transformers' SDPA path drops Gemma 2's soft-capping
    kwargs = {}
    config = json.load(open(os.path.join(path, "config.json")))
    if (int(transformers.__version__.split(".")[0]) < 5 and config.get("model_type", "").startswith("qwen")
            and "num_local_experts" in config and "num_experts" not in config):
        kwargs["num_experts"] = config["num_local_experts"]  # the Qwen MoE name before transformers 5
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager", **kwargs).eval()


def main():
    build = sys.argv[1]
    families = DENSE if int(transformers.__version__.split(".")[0]) >= 5 else MOE
    for family, group in families.items():
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "q")
            cmd = COMMAND.format(llmctl=os.path.join(build, "llmctl"), family=family, out=out, group=group)
            subprocess.run(cmd.split(), check=True, capture_output=True)
            sha = hashlib.sha256(open(os.path.join(out, "model.safetensors"), "rb").read()).hexdigest()
            torch.manual_seed(0)
            model, dense = load(out), load(os.path.join(HERE, f"tiny_{family}"))
            cases, gap = golden_cases(model, dense, sampled_vocab=model.config.vocab_size, lengths=LENGTHS, new_tokens=32)
        golden = {"model": f"tiny_{family} quantized by llmctl (GPTQ int4 g{group} sym, compressed-tensors), loaded by transformers",
                  "command": COMMAND.format(llmctl="llmctl", family=family, out="OUT", group=group), "model_sha256": sha,
                  "transformers": transformers.__version__, "compressed_tensors": compressed_tensors.__version__,
                  "torch": torch.__version__, "gap": gap, "cases": cases}
        with open(os.path.join(HERE, f"tiny_{family}_gptq_golden.json"), "w") as f:
            json.dump(golden, f, indent=None, separators=(",", ":"))
            f.write("\n")
        print(family, sha[:16], "gap to the dense model", round(gap, 3), file=sys.stderr)


if __name__ == "__main__":
    main()
