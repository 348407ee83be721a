#!/usr/bin/env python3
"""llmctl's tokenizers against llama.cpp's tokenizer test vectors: every models/ggml-vocab-*.gguf of
llama.cpp's source that has .inp/.out files (texts, and the ids llama.cpp's test-tokenizer-0 gets
for them without special tokens) is loaded by llmctl from the GGUF itself (llmctl_tokenize --gguf)
and must give the same ids for every text. The vocabularies of the families llmctl runs must load
and match; a vocabulary of a tokenizer type llmctl does not read (BERT, T5, Gemma 4's) must be
refused by name, and is listed. Exits 77 without llama.cpp's source (scripts/fetch-llama-cpp.sh).
Usage: test_llama_cpp_vocabs.py BUILD_DIR
"""
import glob
import os
import subprocess
import sys

build = sys.argv[1]
home = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
MODELS = os.path.join(os.environ.get("LLAMA_CPP_DIR", os.path.join(home, "llama.cpp")), "src", "models")
# The vocabularies of the families llmctl runs (Llama 1-3, SmolLM2, Mistral, Qwen2/2.5/3, Phi-3, DeepSeek-Coder
# as a Llama), and two it reads for models it does not run yet (GPT-2's, Qwen3.5's). Any other vocabulary
# that loads must match too.
REQUIRED = {"llama-bpe", "llama-spm", "qwen2", "qwen35", "phi-3", "gpt-2", "deepseek-coder"}
files = sorted(f for f in glob.glob(os.path.join(MODELS, "ggml-vocab-*.gguf"))
               if os.path.exists(f + ".inp") and os.path.exists(f + ".out"))
if not files:
    print(f"SKIP: no llama.cpp vocab test vectors under {MODELS} (scripts/fetch-llama-cpp.sh)")
    sys.exit(77)
failures, matched, refused = [], [], []
for f in files:
    name = os.path.basename(f)[len("ggml-vocab-"):-len(".gguf")]
    r = subprocess.run([os.path.join(build, "llmctl_tokenize"), "--gguf", f, "--encode-cases", f + ".inp"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "(no message)"
        if name in REQUIRED or "not supported" not in msg:
            failures.append(f"{name}: {msg}")
        else:
            refused.append(f"{name} ({msg[-120:]})")
        continue
    want = open(f + ".out", encoding="utf-8").read().split("\n")[:-1]
    got = r.stdout.split("\n")[:-1]
    texts = open(f + ".inp", encoding="utf-8", errors="replace").read().split("\n__ggml_vocab_test__\n")
    bad = [i for i, (a, b) in enumerate(zip(want, got)) if a.split() != b.split()]
    if len(want) != len(got) or bad:
        i = bad[0] if bad else 0
        failures.append(f"{name}: {len(bad)} of {len(want)} texts differ (got {len(got)} lines); first: "
                        f"{texts[i][:60]!r}: llama.cpp{want[i][:80]} vs llmctl{got[i][:80] if i < len(got) else ''}")
    else:
        matched.append(f"{name} ({len(want)} texts)")
print("identical ids:", ", ".join(matched))
print("refused by name:", ", ".join(refused) or "none")
for msg in failures:
    print("FAIL", msg)
missing = REQUIRED - {m.split()[0] for m in matched}
if missing:
    print("FAIL required vocabularies not matched:", ", ".join(sorted(missing)))
sys.exit(1 if failures or missing else 0)
