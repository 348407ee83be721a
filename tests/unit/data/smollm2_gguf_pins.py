#!/usr/bin/env python3
"""Pins for test_checkpoint.cpp: loads SmolLM2-135M-Instruct.Q4_1.gguf with the Python `gguf`
package + numpy, undoes llama.cpp's q/k row permutation the way transformers does, and prints sums
of a few rows of q_proj / k_proj (the C++ test checks the same numbers). With --transformers it also
loads the file through transformers (needs torch) and checks that its q_proj / k_proj equal ours.

Usage: python3 smollm2_gguf_pins.py [path/to/model.gguf] [--transformers]
"""
import os
import sys

import numpy as np
import gguf

DEFAULT = os.path.join(os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl")),
                       "models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
N_HEAD, N_KV = 9, 3
ROWS = [0, 1, 31, 32, 63, 64, 200, 575]


def reverse_permute(w, n_head):
    # transformers' reverse_permute_weights (modeling_gguf_pytorch_utils.py)
    dim = w.shape[0] // n_head // 2
    return w.reshape(n_head, dim, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)


def load(reader, name):
    t = next(t for t in reader.tensors if t.name == name)
    shape = tuple(reversed([int(x) for x in t.shape]))
    return gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    path = args[0] if args else DEFAULT
    r = gguf.GGUFReader(path)
    ours = {}
    for layer in (0, 29):
        q = reverse_permute(load(r, f"blk.{layer}.attn_q.weight"), N_HEAD)
        k = reverse_permute(load(r, f"blk.{layer}.attn_k.weight"), N_KV)
        ours[f"model.layers.{layer}.self_attn.q_proj.weight"] = q
        ours[f"model.layers.{layer}.self_attn.k_proj.weight"] = k
        for name, w, rows in (("q_proj", q, ROWS), ("k_proj", k, [0, 1, 31, 32, 63, 64, 191])):
            for row in rows:
                print(f"layer {layer} {name} row {row}: sum {float(w[row].astype(np.float64).sum()):.9g} "
                      f"first {float(w[row, 0]):.9g}")
    if "--transformers" in sys.argv:
        import torch  # noqa: F401
        from transformers import AutoModelForCausalLM
        m = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                 torch_dtype="float32")
        sd = m.state_dict()
        for name, w in ours.items():
            theirs = sd[name].numpy()
            assert theirs.shape == w.shape, (name, theirs.shape, w.shape)
            assert np.array_equal(theirs, w), name
            print("transformers agrees:", name)
        cfg = m.config
        print("config:", cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads,
              cfg.intermediate_size, cfg.vocab_size, cfg.tie_word_embeddings,
              getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_theta", None))


if __name__ == "__main__":
    main()
