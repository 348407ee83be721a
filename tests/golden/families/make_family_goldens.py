#!/usr/bin/env python3
"""Writes tests/golden/families/tiny_<family>/ (a tiny random model made by transformers, seeded),
tiny_<family>.gguf (the same model written by llama.cpp's convert_hf_to_gguf.py, f32) and
tiny_<family>_golden.json (what transformers computes from the HF directory in fp32: top-20
log-probabilities at every position of eight seeded sequences, 32-token greedy continuations).
tests/e2e/test_families.py runs llmctl_score on both the directory and the GGUF.

Families: Qwen3 (q/k head norms), Qwen2 (q/k/v biases), Qwen2 with YaRN rope, Phi-3 (fused
projections, a sliding window on every layer), Phi-3 with LongRoPE, and with rope over 3/4 of each head
(Phi-4-mini's partial rotary); sliding-window attention: Mistral with a
5-token window on every layer and Qwen2 with use_sliding_window (a 6-token window on layer 1 only,
max_window_layers 1), both far shorter than the 24- and 40-token sequences; Gemma 2 (alternating
5-token sliding layers, attention and final logit soft-capping); Gemma 3 (Gemma3ForCausalLM:
(1 + w) norms, sandwich norms, GeGLU, sqrt(hidden) embedding scale, query_pre_attn_scalar (= head_dim 16, as in the 1B-12B models: a GGUF cannot say another), five
5-token sliding layers with rope base 1e4 to one global layer with linear-scaled rope base 1e6).
The first two have no GGUF: llama.cpp's converter writes no window for them. Gemma 3's GGUF is
llama.cpp's own form (norm weights stored as 1 + w, sliding pattern and local rope base implied). Weights are drawn with std 0.3, and the
norm weights (1 + 0.3 N(0, 1)) and biases (0.3 N(0, 1)) too, so that every part moves the logits:
transformers initialises norms to 1 and biases to 0, which would leave a missing q_norm or bias
unseen. The byte-level 256-token tokenizer is tiny_model_util's; llama.cpp's converter does not know
its hash, so its pre-tokenizer is named "gpt-2" (a byte-level BPE without merges splits the same).

Needs torch, transformers, numpy, safetensors, and llama.cpp's source (scripts/build-llama-cpp.sh
fetches it to $LLMCTL_HOME/llama.cpp/src). Usage: make_family_goldens.py [LLAMA_CPP_SRC]
"""
import json
import os
import sys

import torch
import transformers
from transformers import (Gemma2Config, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig, MistralConfig, MistralForCausalLM,
                          MixtralConfig, MixtralForCausalLM, Phi3Config, Phi3ForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen2MoeConfig, Qwen2MoeForCausalLM, Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig,
                          Qwen3MoeForCausalLM)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "quant"))
from tiny_model_util import golden_cases, tokenizer_json  # noqa: E402

HOME = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
LLAMA_CPP = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HOME, "llama.cpp", "src")

# Eight sequences (three as the other goldens have, five more), each scored at every position, and a
# 32-token greedy continuation of each one's first 8 ids. Every length, and 8 + 32, stays within the
# LongRoPE models' original 64 positions (transformers switches a whole forward to the long factors
# past it; llmctl switches per position, as vLLM does).
LENGTHS = (24, 40, 9, 17, 33, 12, 28, 48)
SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=258, max_position_embeddings=128, rms_norm_eps=1e-6,
             tie_word_embeddings=False, initializer_range=0.3, bos_token_id=1, eos_token_id=2)
FAMILIES = {
    "qwen3": (Qwen3Config(**SMALL, head_dim=16, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
              Qwen3ForCausalLM),
    "qwen2": (Qwen2Config(**SMALL, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}), Qwen2ForCausalLM),
    "mistral_swa": (MistralConfig(**SMALL, sliding_window=5, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
                    MistralForCausalLM),
    "qwen2_swa": (Qwen2Config(**SMALL, use_sliding_window=True, sliding_window=6, max_window_layers=1,
                              rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}), Qwen2ForCausalLM),
    # YaRN (Qwen2.5's long-context rope): factor 4 over an original 512 tokens at base 1e4 blends
    # the interpolated and extrapolated frequencies over dimensions 0-4 of 8, and scales the scores.
    "qwen2_yarn": (Qwen2Config(**dict(SMALL, max_position_embeddings=2048),
                               rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 512,
                                                "rope_theta": 10000.0}), Qwen2ForCausalLM),
    # Phi-3: fused qkv_proj / gate_up_proj, a 7-token window on every layer; then LongRoPE with its
    # short factors (every position here is below the original 64) and attention factor
    # sqrt(1 + ln(256 / 64) / ln(64)).
    "phi3": (Phi3Config(**SMALL, pad_token_id=0, sliding_window=7, rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
             Phi3ForCausalLM),
    "phi3_longrope": (Phi3Config(**dict(SMALL, max_position_embeddings=256), pad_token_id=0,
                                 original_max_position_embeddings=64,
                                 rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                                                  "short_factor": [1.0 + 0.3 * i for i in range(8)],
                                                  "long_factor": [2.0 + i for i in range(8)]}), Phi3ForCausalLM),
    # Phi-4-mini's shape: rope over 3/4 of each head (12 of 16 dimensions, 6 LongRoPE factors), tied embeddings.
    "phi3_partial": (Phi3Config(**dict(SMALL, max_position_embeddings=256, tie_word_embeddings=True), pad_token_id=0,
                                original_max_position_embeddings=64,
                                rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
                                                 "short_factor": [1.0 + 0.4 * i for i in range(6)],
                                                 "long_factor": [3.0 + i for i in range(6)]}), Phi3ForCausalLM),
    # Gemma 2: 5-token sliding layers alternating with global ones, no q/k norms, attention scores
    # soft-capped at 8 and logits at 10 (both bite: scores and logits here reach well past them);
    # eager attention, as transformers' SDPA path drops the soft-capping.
    "gemma2": (Gemma2Config(**dict(SMALL, num_hidden_layers=4, tie_word_embeddings=True), head_dim=16, pad_token_id=0,
                            sliding_window=5, query_pre_attn_scalar=16, attn_logit_softcapping=8.0,
                            final_logit_softcapping=10.0, attn_implementation="eager",
                            rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
               Gemma2ForCausalLM),
    "gemma3": (Gemma3TextConfig(**dict(SMALL, num_hidden_layers=6, tie_word_embeddings=True), head_dim=16, pad_token_id=0,
                                sliding_window=5, query_pre_attn_scalar=16,
                                rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                                                 "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}),
               Gemma3ForCausalLM),
    # Mixtures of experts: every expert of every sparse layer is reached by the golden sequences
    # (checked below, recorded as experts_reached). Qwen3-MoE: 16 experts, top 4 renormalized; and 8
    # experts with the middle layer dense (mlp_only_layers; llama.cpp's converter cannot write that);
    # Mixtral: 8 experts, top 2; Qwen2-MoE: 16 experts, top 8 not renormalized, and a shared expert
    # under its sigmoid gate.
    "qwen3_moe": (Qwen3MoeConfig(**SMALL, head_dim=16, num_experts=16, num_experts_per_tok=4,
                                 moe_intermediate_size=32, norm_topk_prob=True,
                                 rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}), Qwen3MoeForCausalLM),
    "qwen3_moe_dense1": (Qwen3MoeConfig(**dict(SMALL, num_hidden_layers=3), head_dim=16, num_experts=8,
                                        num_experts_per_tok=2, moe_intermediate_size=32, norm_topk_prob=True,
                                        mlp_only_layers=[1],
                                        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
                         Qwen3MoeForCausalLM),
    "mixtral": (MixtralConfig(**dict(SMALL, intermediate_size=48), num_local_experts=8, num_experts_per_tok=2,
                              rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}), MixtralForCausalLM),
    "qwen2_moe": (Qwen2MoeConfig(**SMALL, num_experts=16, num_experts_per_tok=8, moe_intermediate_size=24,
                                 shared_expert_intermediate_size=40, norm_topk_prob=False,
                                 rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}), Qwen2MoeForCausalLM),
}
NO_GGUF = {"mistral_swa", "qwen2_swa", "qwen3_moe_dense1"}


def experts_reached(model, cases):
    """Per sparse layer, how many of its experts the golden sequences route at least one token to
    (transformers' own router logits, its top k)."""
    cfg = model.config
    E = getattr(cfg, "num_experts", None) or cfg.num_local_experts
    seen = None
    for case in cases:
        with torch.no_grad():
            out = model(torch.tensor([case["input_ids"]]), output_router_logits=True)
        logits = [r for r in out.router_logits if r is not None]
        if seen is None:
            seen = [set() for _ in logits]
        for s, r in zip(seen, logits):
            s.update(torch.topk(r.float(), cfg.num_experts_per_tok, dim=-1).indices.flatten().tolist())
    return [len(s) for s in seen], E


def convert_to_gguf(model_dir, out):
    sys.path.insert(0, LLAMA_CPP)
    sys.path.insert(0, os.path.join(LLAMA_CPP, "gguf-py"))
    import convert_hf_to_gguf
    from conversion import base
    base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
    # Gemma 2's converter reads only a SentencePiece tokenizer.model; the tiny models have a byte-level
    # BPE, written as the other families' are (the vocabulary is not what these files test)
    from conversion import gemma
    gemma.Gemma2Model.set_vocab = lambda self: self._set_vocab_gpt2()
    argv = sys.argv
    sys.argv = ["convert_hf_to_gguf.py", model_dir, "--outtype", "f32", "--outfile", out]
    try:
        convert_hf_to_gguf.main()
    finally:
        sys.argv = argv


def main():
    only = set(os.environ.get("FAMILIES", "").split(",")) - {""}  # FAMILIES=a,b: remake only these
    for name, (cfg, cls) in FAMILIES.items():
        if only and name not in only:
            continue
        torch.manual_seed(0)
        cfg.architectures = [cls.__name__]
        model = cls(cfg).float().eval()
        assert name != "gemma2" or model.config._attn_implementation == "eager"
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if "norm" in pname:
                    p.copy_(1 + 0.3 * torch.randn_like(p))
                elif pname.endswith(".bias"):
                    p.copy_(0.3 * torch.randn_like(p))
        model_dir = os.path.join(HERE, f"tiny_{name}")
        model.save_pretrained(model_dir, safe_serialization=True)
        tok = tokenizer_json()  # with the fields the tokenizers library now requires of ByteLevel
        tok["pre_tokenizer"]["trim_offsets"] = False
        tok["decoder"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True}
        # transformers' Qwen2 tokenizer adds <|endoftext|> (id 256) whatever the file says; so does the file
        tok["added_tokens"] = [{"id": 256 + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                                "normalized": False, "special": True} for i, t in enumerate(["<|endoftext|>", "<|im_end|>"])]
        with open(os.path.join(model_dir, "tokenizer.json"), "w") as f:
            json.dump(tok, f)
        with open(os.path.join(model_dir, "tokenizer_config.json"), "w") as f:
            # llama.cpp's Phi-3 converter reads a SentencePiece model unless the class is GPT-2's
            json.dump({"tokenizer_class": "GPT2Tokenizer" if name.startswith("phi3") else "PreTrainedTokenizerFast",
                       "model_max_length": 128, "eos_token": "<|endoftext|>"}, f)
        cases, _ = golden_cases(model, model, sampled_vocab=cfg.vocab_size, lengths=LENGTHS, new_tokens=32)
        golden = {"model": f"tiny_{name} (random, seeded; {cls.__name__})", "transformers": transformers.__version__,
                  "torch": torch.__version__, "cases": cases,
                  "parameters": sum(p.numel() for p in model.parameters())}
        if "_moe" in name or name == "mixtral":
            reached, E = experts_reached(model, cases)
            assert all(n == E for n in reached), f"{name}: experts reached per sparse layer {reached} of {E}"
            golden["experts_reached"] = reached
        with open(os.path.join(HERE, f"tiny_{name}_golden.json"), "w") as f:
            json.dump(golden, f, indent=None, separators=(",", ":"))
            f.write("\n")
        if name not in NO_GGUF:
            convert_to_gguf(model_dir, os.path.join(HERE, f"tiny_{name}.gguf"))
        print(name, golden["parameters"], "parameters", file=sys.stderr)


if __name__ == "__main__":
    main()
