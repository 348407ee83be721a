#!/usr/bin/env python3
"""Makes tests/golden/smollm2_golden.json: reference outputs of HF transformers (fp32) for the
default model, SmolLM2-135M-Instruct, loaded by transformers from the GGUF file itself (it
dequantizes the Q4_1/Q8_0 blocks to fp32).

For each case: the first 64 tokens of a text (teacher-forced) with the top-20 log-probabilities at
every position, and a 64-token greedy continuation of a prompt (argmax at every step, no EOS stop).

It also proves that `llmctl convert` output loads in transformers: when the converted directory
exists (default: $LLMCTL_HOME/models/SmolLM2-135M-Instruct/hf, made by scripts/fetch-model.sh --dense), it
is loaded with AutoModelForCausalLM / AutoTokenizer and must give the same logits and token ids
as the GGUF; the result is recorded in the JSON ("converted_check").

With --long it writes tests/golden/smollm2_long_golden.json instead: greedy continuations (LONG_NEW
tokens) of prompts of LONG_PROMPT tokens, long enough that every decoded token's attention reads past
1,024 keys (where the CPU backend spreads a decode token's attention over keys and columns).

Needs: torch, transformers, accelerate, gguf (PyPI). Usage:
  python3 tests/golden/make_golden.py [--long] [PATH/TO/SmolLM2-135M-Instruct.Q4_1.gguf [CONVERTED_DIR]]
"""
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

LONG = "--long" in sys.argv[1:]
ARGS = [a for a in sys.argv[1:] if a != "--long"]
HOME = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
GGUF = ARGS[0] if len(ARGS) > 0 else f"{HOME}/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
CONVERTED = ARGS[1] if len(ARGS) > 1 else f"{HOME}/models/SmolLM2-135M-Instruct/hf"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                   "smollm2_long_golden.json" if LONG else "smollm2_golden.json")
SEQ, TOPK, NEW = 64, 20, 64
LONG_PROMPT, LONG_NEW = 1100, 32
DATA = os.path.join(os.path.dirname(__file__), "../../../shared/data")

CASES = [
    ("wikitext", None, open(os.path.join(os.path.dirname(__file__), "../../../shared/data/wikitext2-valid.txt"),
                            encoding="utf-8").read()[2000:3000]),
    ("shakespeare", None, open(os.path.join(os.path.dirname(__file__), "../../../shared/data/tinyshakespeare.txt"),
                               encoding="utf-8").read()[:1000]),
    ("code", None, "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n"
                   "    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n\nclass Stack:\n"
                   "    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n"
                   "        self.items.append(x)\n"),
    ("chat", [{"role": "user", "content": "What is the capital of France? Answer in one sentence, then list "
                                          "three famous landmarks there."}], None),
    ("chat_system", [{"role": "system", "content": "You are a terse assistant."},
                     {"role": "user", "content": "Explain what a hash table is."}], None),
]


def main():
    torch.manual_seed(0)
    d, f = os.path.split(GGUF)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    model.eval()
    out = {"model": "SmolLM2-135M-Instruct.Q4_1.gguf (dequantized to fp32 by transformers)",
           "transformers": transformers.__version__, "torch": torch.__version__,
           "seq_len": SEQ, "top_k": TOPK, "new_tokens": LONG_NEW if LONG else NEW}
    out["cases"] = run_long_cases(model, tok) if LONG else run_cases(model, tok)
    if not LONG and os.path.exists(os.path.join(CONVERTED, "config.json")):
        out["converted_check"] = check_converted(model, tok)
        print("converted:", out["converted_check"], file=sys.stderr)
    with open(OUT, "w") as fh:
        json.dump(out, fh, indent=None, separators=(",", ":"))
        fh.write("\n")
    print("wrote", OUT, file=sys.stderr)


def run_cases(model, tok):
    """CASES through model: teacher-forced top-K log-probabilities over the first SEQ tokens of each
    text, and a NEW-token greedy continuation (no EOS stop) with the top-1/top-2 margin per step."""
    cases = []
    for name, messages, text in CASES:
        if messages is not None:
            prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        else:
            prompt = text
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        case = {"name": name, "prompt": prompt}
        with torch.no_grad():
            if messages is None:  # teacher-forced log-probabilities over the first SEQ tokens
                assert len(ids) >= SEQ, (name, len(ids))
                x = torch.tensor([ids[:SEQ]])
                logp = torch.log_softmax(model(x).logits[0].double(), dim=-1)
                top = torch.topk(logp, TOPK, dim=-1)
                case["input_ids"] = ids[:SEQ]
                case["top_ids"] = top.indices.tolist()
                case["top_logprobs"] = [[round(v, 6) for v in row] for row in top.values.tolist()]
                gen_prompt = ids[:32]
            else:
                gen_prompt = ids
            case["greedy_prompt_ids"] = list(gen_prompt)
            case["greedy_ids"], case["greedy_margins"] = greedy(model, gen_prompt, NEW)
        cases.append(case)
        print(name, len(ids), "tokens;", repr(tok.decode(case["greedy_ids"])[:80]), file=sys.stderr)
    return cases


def greedy(model, prompt_ids, steps):
    """steps greedy tokens after prompt_ids (no EOS stop), with the top-1/top-2 logit margin per step."""
    seq, margins = list(prompt_ids), []
    with torch.no_grad():
        for _ in range(steps):
            logits = model(torch.tensor([seq])).logits[0, -1]
            t2 = torch.topk(logits, 2)
            margins.append(round(float(t2.values[0] - t2.values[1]), 5))
            seq.append(int(t2.indices[0]))
    return seq[len(prompt_ids):], margins


def run_long_cases(model, tok):
    """Greedy continuations of LONG_PROMPT-token prompts from WikiText-2 (valid) and tinyshakespeare: of
    each text, the first of a few starting points whose continuation has no near-tie (every top-1/top-2
    logit margin at least MIN_MARGIN), so that the test checks the kernels, not a tie's rounding."""
    MIN_MARGIN = 0.02
    cases = []
    for name, path in (("wikitext_long", "wikitext2-valid.txt"), ("shakespeare_long", "tinyshakespeare.txt")):
        data = open(os.path.join(DATA, path), encoding="utf-8").read()
        for start in (0, 30000, 60000, 90000):
            ids = tok(data[start:start + 8 * LONG_PROMPT], add_special_tokens=False)["input_ids"]
            assert len(ids) >= LONG_PROMPT, (name, len(ids))
            prompt = ids[:LONG_PROMPT]
            new, margins = greedy(model, prompt, LONG_NEW)
            print(name, "from character", start, "least margin", min(margins), file=sys.stderr)
            if min(margins) >= MIN_MARGIN:
                break
        assert min(margins) >= MIN_MARGIN, name
        cases.append({"name": name, "prompt": tok.decode(prompt), "greedy_prompt_ids": prompt, "greedy_ids": new,
                      "greedy_margins": margins})
        print(name, len(prompt), "tokens;", repr(tok.decode(new)[:80]), file=sys.stderr)
    return cases


def check_converted(ref_model, ref_tok):
    """Loads llmctl's converted directory in transformers; compares logits and tokenization."""
    model = AutoModelForCausalLM.from_pretrained(CONVERTED, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(CONVERTED)
    text = "The quick brown fox, 2 cats and <|im_start|>user\nhello<|im_end|> 東京 🙂"
    ids = ref_tok(text, add_special_tokens=False)["input_ids"]
    same_ids = tok(text, add_special_tokens=False)["input_ids"] == ids
    with torch.no_grad():
        x = torch.tensor([ids])
        diff = float((model(x).logits - ref_model(x).logits).abs().max())
    assert diff < 1e-4, diff
    return {"class": type(model).__name__, "max_abs_logit_diff": diff, "tokenizer_ids_equal": same_ids,
            "chat_template_equal": tok.chat_template == ref_tok.chat_template}


if __name__ == "__main__":
    main()
