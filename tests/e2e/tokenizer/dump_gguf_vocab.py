#!/usr/bin/env python3
"""Test helper: dump a GGUF file's tokenizer.ggml.* metadata to the JSON that
`llmctl_tokenize --gguf-vocab-json` reads (uses the `gguf` Python package, not llmctl's reader).

usage: dump_gguf_vocab.py MODEL.gguf OUT.json
"""
import json
import sys

from gguf import GGUFReader


def field(reader, key):
    f = reader.fields.get(key)
    if f is None:
        return None
    return f.contents()


def main():
    reader = GGUFReader(sys.argv[1])
    out = {
        "model": field(reader, "tokenizer.ggml.model"),
        "pre": field(reader, "tokenizer.ggml.pre") or "default",
        "tokens": field(reader, "tokenizer.ggml.tokens"),
        "token_types": field(reader, "tokenizer.ggml.token_type") or [],
        "merges": field(reader, "tokenizer.ggml.merges") or [],
        "bos": field(reader, "tokenizer.ggml.bos_token_id"),
        "eos": field(reader, "tokenizer.ggml.eos_token_id"),
        "pad": field(reader, "tokenizer.ggml.padding_token_id"),
        "add_bos": bool(field(reader, "tokenizer.ggml.add_bos_token") or False),
        "chat_template": field(reader, "tokenizer.chat_template") or "",
    }
    for k in ("bos", "eos", "pad"):
        if out[k] is None:
            out[k] = -1
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
