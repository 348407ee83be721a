#!/usr/bin/env python3
"""Mixture-of-experts families against transformers: tiny random models under tests/golden/families/
(made by make_family_goldens.py with transformers, seeded; every expert of every sparse layer is
reached by the golden sequences, recorded as experts_reached), run from their HF directories and from the GGUF llama.cpp's convert_hf_to_gguf.py wrote of each
(qwen3moe, qwen2moe, and Mixtral as llama with stacked ffn_*_exps tensors):
  tiny_qwen3_moe  Qwen3MoeForCausalLM: 16 experts, top 4 renormalized, q/k norms
  tiny_qwen3_moe_dense1  the same with 8 experts, top 2, layer 1 dense (mlp_only_layers; no GGUF: llama.cpp's
                  converter cannot write a dense layer in qwen3moe)
  tiny_mixtral    MixtralForCausalLM: 8 experts (w1/w3/w2), top 2
  tiny_qwen2_moe  Qwen2MoeForCausalLM: 16 experts, top 8 not renormalized, q/k/v biases, a shared expert
                  under its sigmoid gate
Checks per model: top-20 log-probabilities within 1e-4 of transformers fp32 at every position of eight
sequences and 32-token greedy continuations identical; tensor parallel (TP=2 under mpirun: each rank
holds half of every expert's intermediate features, the router replicated) the same; `llmctl generate`
over 6 prompts batched gives each prompt's tokens alone (the routing of a token never depends on the
others in the step). Exits 77 when no fixture is present.
Usage: test_moe_families.py BUILD_DIR
"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from family_util import batched_alone, check, compare, counts, failures, score  # noqa: E402

build = sys.argv[1]
src = os.environ.get("LLMCTL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
FDIR = os.path.join(src, "tests/golden/families")
FAMILIES = ["qwen3_moe", "qwen3_moe_dense1", "mixtral", "qwen2_moe"]
present = [f for f in FAMILIES if os.path.exists(os.path.join(FDIR, f"tiny_{f}_golden.json"))]
if not present:
    print(f"SKIP: no MoE fixture under {FDIR} (tests/golden/families/make_family_goldens.py)")
    sys.exit(77)
for f in present:
    golden_path = os.path.join(FDIR, f"tiny_{f}_golden.json")
    golden = json.load(open(golden_path))
    hf = os.path.join(FDIR, f"tiny_{f}")
    print(f"tiny_{f}: experts reached per sparse layer by the golden sequences: {golden.get('experts_reached')}")
    gguf = os.path.join(FDIR, f"tiny_{f}.gguf")
    for model in (hf, gguf) if os.path.exists(gguf) else (hf,):
        compare(f"{os.path.basename(model)} vs transformers", golden, score(build, golden_path, model))
    if shutil.which("mpirun"):
        compare(f"tiny_{f} TP=2 vs transformers", golden, score(build, golden_path, hf, tp=2))
    batched_alone(build, f"tiny_{f}", hf, golden)
print(f"{counts['passed']} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
