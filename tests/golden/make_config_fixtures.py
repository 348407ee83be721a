#!/usr/bin/env python3
"""Writes tests/unit/data/hf_configs/*.json: config.json files as transformers itself writes them
(`save_pretrained`, and one with every field PretrainedConfig holds), for test_model_config's checks that
llmctl reads both rope spellings (transformers 5's rope_parameters, 4.x's rope_theta + rope_scaling)
and knows every field these architectures write. Needs only transformers (no torch).
Usage: python3 tests/golden/make_config_fixtures.py
"""
import json
import os
import tempfile

import transformers
from transformers import LlamaConfig, MistralConfig, Qwen2Config

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "unit", "data", "hf_configs")
small = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=256)
cases = {
    "llama3_rope_parameters": LlamaConfig(**small, max_position_embeddings=131072, rope_parameters={
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "llama_default_rope": LlamaConfig(**small),
    "mistral_window": MistralConfig(**small, sliding_window=4096, max_position_embeddings=4096),
    "qwen2_no_window": Qwen2Config(**small, sliding_window=4096, max_window_layers=2),
    "qwen2_window": Qwen2Config(**small, use_sliding_window=True, sliding_window=64, max_window_layers=2),
}
os.makedirs(OUT, exist_ok=True)
for name, cfg in cases.items():
    cfg.architectures = [type(cfg).__name__.replace("Config", "ForCausalLM")]
    with tempfile.TemporaryDirectory() as d:
        cfg.save_pretrained(d)
        j = json.load(open(os.path.join(d, "config.json")))
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(j, f, indent=1, sort_keys=True)
        f.write("\n")
# Every field PretrainedConfig holds, not only those that differ from the defaults.
full = LlamaConfig(**small, architectures=["LlamaForCausalLM"])
with open(os.path.join(OUT, "llama_every_field.json"), "w") as f:
    json.dump(json.loads(full.to_json_string(use_diff=False)), f, indent=1, sort_keys=True)
    f.write("\n")
print(f"{len(cases) + 1} configs from transformers {transformers.__version__} in {OUT}")
