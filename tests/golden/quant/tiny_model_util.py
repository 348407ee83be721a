"""Shared by the tiny-model golden scripts: the tiny Llama config, a 256-token byte-level tokenizer
llmctl loads, and the teacher-forced / greedy cases their golden JSON files hold."""
import torch
from transformers import LlamaConfig


def tiny_llama_config():
    # std 0.3 (not transformers' 0.02) so that every layer moves the logits
    return LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, vocab_size=260, max_position_embeddings=128, rms_norm_eps=1e-5,
                       tie_word_embeddings=False, initializer_range=0.3, bos_token_id=1, eos_token_id=2)


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


def golden_cases(model, unquantized, sampled_vocab=256, lengths=(24, 40, 9), new_tokens=16):
    """Top-20 log-probabilities of `model` at every position of seeded random sequences of `lengths`
    (three by default), and `new_tokens`-token greedy continuations of their first 8 ids over the first
    `sampled_vocab` ids (those the tokenizer has); also the largest |dlogprob| of `unquantized` at those
    ids. The first sequences are the same whatever follows them."""
    gen = torch.Generator().manual_seed(7)
    cases, gap = [], 0.0
    for i, length in enumerate(lengths):
        ids = torch.randint(3, 256, (1, length), generator=gen)
        with torch.no_grad():
            lp = torch.log_softmax(model(ids).logits[0].float(), -1)
            lp_dense = torch.log_softmax(unquantized(ids).logits[0].float(), -1)
        top = torch.topk(lp, 20, dim=-1)
        gap = max(gap, (lp_dense.gather(-1, top.indices) - top.values).abs().max().item())
        prompt = ids[:, :8]
        out, margins = prompt, []
        with torch.no_grad():
            for _ in range(new_tokens):
                # ids past the tokenizer's pad the embedding: llmctl never samples them
                logits = model(out).logits[0, -1, :sampled_vocab].float()
                two = torch.topk(logits, 2).values
                margins.append(round((two[0] - two[1]).item(), 5))
                out = torch.cat([out, logits.argmax().view(1, 1)], dim=1)
        cases.append({"name": f"random_{i}", "input_ids": ids[0].tolist(), "top_ids": top.indices.tolist(),
                      "top_logprobs": [[round(x, 6) for x in row] for row in top.values.tolist()],
                      "greedy_prompt_ids": prompt[0].tolist(), "greedy_ids": out[0, 8:].tolist(),
                      "greedy_margins": margins})
    return cases, gap
