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

Needs: torch, transformers, accelerate, gguf (PyPI). Usage:
  python3 tests/golden/make_golden.py [PATH/TO/SmolLM2-135M-Instruct.Q4_1.gguf [CONVERTED_DIR]]
"""
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

HOME = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
GGUF = sys.argv[1] if len(sys.argv) > 1 else f"{HOME}/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
CONVERTED = sys.argv[2] if len(sys.argv) > 2 else f"{HOME}/models/SmolLM2-135M-Instruct/hf"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "smollm2_golden.json")
SEQ, TOPK, NEW = 64, 20, 64

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
           "seq_len": SEQ, "top_k": TOPK, "new_tokens": NEW}
    out["cases"] = run_cases(model, tok)
    if os.path.exists(os.path.join(CONVERTED, "config.json")):
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
            seq = list(gen_prompt)
            margins = []
            for _ in range(NEW):  # greedy, no EOS stop; margin = top1 - top2 logit (near-ties)
                logits = model(torch.tensor([seq])).logits[0, -1]
                t2 = torch.topk(logits, 2)
                margins.append(round(float(t2.values[0] - t2.values[1]), 5))
                seq.append(int(t2.indices[0]))
            case["greedy_prompt_ids"] = list(gen_prompt)
            case["greedy_ids"] = seq[len(gen_prompt):]
            case["greedy_margins"] = margins
        cases.append(case)
        print(name, len(ids), "tokens;", repr(tok.decode(case["greedy_ids"])[:80]), file=sys.stderr)
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
