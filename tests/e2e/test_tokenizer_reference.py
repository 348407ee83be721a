#!/usr/bin/env python3
"""The BPE tokenizer against independent references, on the default model's GGUF vocabulary.

Texts: wikitext2-valid.txt and tinyshakespeare.txt (whole), plus a generated mix (fixed seed) of
code, emoji, CJK and other scripts, runs of whitespace and newlines, numbers, exotic whitespace and
special tokens inside text.

llmctl side: `llmctl_tokenize --gguf-vocab-json` (the vocab dumped from the GGUF by the `gguf`
package, see tokenizer/dump_gguf_vocab.py), which also writes tokenizer.json from it.

References:
  1. `tokenizers` on the tokenizer.json llmctl wrote             -- every text, ids must match
  2. SmolLM2's real pipeline, built in Python with `tokenizers` from the GGUF
     vocabulary, merges and token types as the `gguf` package reads them (byte-level
     BPE, control and user-defined tokens special, pre-tokenizer
     Sequence[Digits(individual_digits), ByteLevel] as in SmolLM2's own
     tokenizer.json; independent of llmctl's reader and writer)  -- every text, ids must match
  3. transformers `AutoTokenizer.from_pretrained(dir, gguf_file=...)` as is, when
     torch is installed (transformers reads GGUF files only with torch; scripts/test.sh
     does not install it). It ignores tokenizer.ggml.pre = "smollm" (its GGUF
     converter only knows the llama3/qwen2/... splits) and so does not split digits.
     It is compared on the texts with every \\p{N} character removed, where digit
     splitting cannot matter; on the full texts the disagreement with reference 2 is
     measured and every differing stretch must contain a digit.

Also: transformers loading the tokenizer.json + tokenizer_config.json llmctl wrote (what
`llmctl convert` produces) encodes the generated mix identically. (The config names
PreTrainedTokenizerFast: with "GPT2Tokenizer", transformers 5 replaces tokenizer.json's
pre-tokenizer with a plain ByteLevel one and loses the digit split.)

argv[1]: the build directory. Exit 77 (skipped) when the model, the data or a package is missing.
"""
import bisect
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

SKIP = 77
MODEL_DIR = os.path.expanduser(os.environ.get("LLMCTL_MODEL_DIR", "~/.cache/llmctl/models/SmolLM2-135M-Instruct"))
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("LLMCTL_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
DATA_DIR = os.path.join(os.path.dirname(SOURCE_DIR), "shared", "data")


def skip(msg):
    print(f"SKIPPED: {msg}")
    sys.exit(SKIP)


def generated_mix(seed=1234, target_bytes=300_000):
    """Varied text with the cases byte-level BPE gets wrong most easily."""
    rng = random.Random(seed)
    specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<file_sep>", "<jupyter_code>"]
    code = [
        "def f(x):\n    return x**2 + 3*x - 1\n",
        "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
        "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); }\n",
        "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;\n",
        "const re = /^[a-z0-9_-]{3,16}$/i;  // user names\n",
        "    if (x != y && !z) { return -1; }\r\n",
        "{\"key\": [1, 2.5, -3e10, null, true], \"s\": \"a\\tb\"}\n",
    ]
    words = [
        "hello", "world", "Hello", "WORLD", "don't", "I'm", "we've", "they'll", "it's", "She'd",
        "DON'T", "O'Neil", "naïve", "café", "résumé", "Straße", "Ελληνικά", "русский", "язык",
        "日本語", "中文字符", "한국어", "ภาษาไทย", "العربية", "हिन्दी", "עברית", "Ωmega", "ﬁne",
        "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "❤️", "∑∫√∞", "→←↑↓", "①②③", "½¾", "²³", "Ⅻ", "٣٤٥", "१२३",
        "e\u0301", "a\u0308\u0323", "\u200b", "\u00ad", "x\u200dy", "ſ", "K", "İ",
    ]
    spaces = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\n\n\n\n", " \t ", "\u00a0", "\u3000",
              "\u2028", "\u0085", "\u2003", "\u202f", "        "]
    numbers = lambda: rng.choice([
        str(rng.randint(0, 10**rng.randint(1, 12))), f"{rng.random() * 1000:.3f}", "3.14159",
        "1,234,567", "2024-01-15", "10:45:00", "0x1F", "1e-9", "v1.2.3", "$99.99", "50%", "007",
    ])
    parts, size = [], 0
    while size < target_bytes:
        r = rng.random()
        if r < 0.35:
            s = rng.choice(words)
        elif r < 0.5:
            s = numbers()
        elif r < 0.65:
            s = rng.choice(spaces)
        elif r < 0.72:
            s = rng.choice(code)
        elif r < 0.76:
            s = rng.choice(specials)
        elif r < 0.80:
            s = " " * rng.randint(1, 40) + rng.choice(["\n", "x", "1", ""])
        elif r < 0.83:
            s = "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(rng.randint(1, 8)))
        elif r < 0.86:
            s = "".join(chr(rng.randint(0x1F300, 0x1FAFF)) for _ in range(rng.randint(1, 4)))
        elif r < 0.88:
            s = "".join(chr(rng.randint(0x20, 0x7E)) for _ in range(rng.randint(1, 20)))
        elif r < 0.90:
            s = "".join(chr(rng.randint(0xA0, 0x2FFF)) for _ in range(rng.randint(1, 6)))
        else:
            s = rng.choice(["'s", "'S", "'LL", "'ve", "''", "...", "!!!", "??", "--", "—", "«»", "“”", "''t"])
        parts.append(s)
        parts.append(rng.choice(["", "", " ", " ", "\n"]))
        size += len(s.encode("utf-8")) + 1
    # Never produce lone surrogates; chr() ranges above avoid them. Keep valid UTF-8.
    return "".join(parts)


def first_mismatch(name, ref_name, ours, ref, decode):
    n = min(len(ours), len(ref))
    i = next((k for k in range(n) if ours[k] != ref[k]), n)
    lo, hi = max(0, i - 8), i + 8
    return (f"{name}: llmctl vs {ref_name}: first mismatch at token {i} "
            f"(llmctl {len(ours)} tokens, {ref_name} {len(ref)})\n"
            f"  llmctl : {ours[lo:hi]}\n  {ref_name}: {ref[lo:hi]}\n"
            f"  context: {decode(ref[lo:i])!r} | llmctl {decode(ours[i:hi])!r} vs {decode(ref[i:hi])!r}")


def run_tool(build, args):
    tool = os.path.join(build, "llmctl_tokenize")
    r = subprocess.run([tool] + args, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr)
        raise SystemExit(f"llmctl_tokenize failed: {' '.join(args)}")
    return r.stderr


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    gguf_path = os.path.join(MODEL_DIR, GGUF_NAME)
    if not os.path.exists(gguf_path):
        skip(f"model not found: {gguf_path} (scripts/fetch-model.sh)")
    corpora = {}
    for name in ("wikitext2-valid.txt", "tinyshakespeare.txt"):
        p = os.path.join(DATA_DIR, name)
        if not os.path.exists(p):
            skip(f"data file not found: {p}")
        with open(p, encoding="utf-8") as f:
            corpora[name] = f.read()
    try:
        import tokenizers  # noqa: F401
        from tokenizers import Tokenizer
        import gguf  # noqa: F401
        import transformers
        from transformers import AutoTokenizer
    except ImportError as e:
        skip(f"Python package missing: {e}")
    corpora["generated-mix"] = generated_mix()

    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        vocab_json = os.path.join(tmp, "vocab.json")
        subprocess.run([sys.executable, os.path.join(HERE, "tokenizer", "dump_gguf_vocab.py"), gguf_path, vocab_json],
                       check=True)
        tok_json = os.path.join(tmp, "tokenizer.json")
        cfg_json = os.path.join(tmp, "tokenizer_config.json")
        run_tool(build, ["--gguf-vocab-json", vocab_json, "--write-tokenizer-json", tok_json,
                         "--write-tokenizer-config", cfg_json])

        # Reference 1: tokenizers on llmctl's tokenizer.json.
        ref_written = Tokenizer.from_file(tok_json)
        with open(vocab_json, encoding="utf-8") as f:
            gguf_vocab = json.load(f)
        vocab_tokens = gguf_vocab["tokens"]
        # Reference 2: the GGUF's vocabulary and merges with SmolLM2's real pre-tokenizer.
        ref_smol = smollm2_reference(gguf_vocab)
        # Reference 3: transformers' own GGUF loading, where it can run.
        hf_gguf = None
        try:
            import torch  # noqa: F401
        except ImportError:
            print("reference 3 (transformers' GGUF loader) not run: transformers reads GGUF files only with torch, "
                  "which is not installed")
        else:
            t0 = time.time()
            hf_gguf = AutoTokenizer.from_pretrained(MODEL_DIR, gguf_file=GGUF_NAME)
            print(f"transformers {transformers.__version__} loaded the GGUF tokenizer in {time.time() - t0:.1f} s; "
                  f"its pre-tokenizer: {hf_gguf.backend_tokenizer.pre_tokenizer}")

        byte_of = gpt2_byte_decoder()
        token_bytes = [bytes(byte_of[c] for c in t) if all(c in byte_of for c in t) else t.encode() for t in vocab_tokens]
        total_bytes = total_tokens = 0
        for name, text in corpora.items():
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)
            ids_path = path + ".ids"
            log = run_tool(build, ["--gguf-vocab-json", vocab_json, "--encode", path, "--out", ids_path,
                                   "--roundtrip", path])
            print(f"[{name}] {log.strip().splitlines()[1]}")
            with open(ids_path) as f:
                ours = [int(x) for x in f.read().split()]
            nbytes = len(text.encode("utf-8"))
            total_bytes += nbytes
            total_tokens += len(ours)
            decode = lambda ids: ref_written.decode(ids, skip_special_tokens=False)

            for ref_name, ref in (("tokenizers(llmctl tokenizer.json)", ref_written), ("SmolLM2 pipeline", ref_smol)):
                ref_ids = ref.encode(text, add_special_tokens=False).ids
                if ref_ids != ours:
                    failures.append(first_mismatch(name, ref_name, ours, ref_ids, decode))
                else:
                    print(f"[{name}] {nbytes} bytes, {len(ours)} tokens: identical to {ref_name}")
            if decode(ours) != text:
                failures.append(f"{name}: tokenizers' decode of llmctl's ids differs from the text")

            if hf_gguf is None:
                continue
            # transformers as is: identical where no \p{N} character can be split off.
            no_digits = "".join(c for c in text if not c.isnumeric())
            nd_path = path + ".nodigits"
            with open(nd_path, "w", encoding="utf-8", newline="") as f:
                f.write(no_digits)
            run_tool(build, ["--gguf-vocab-json", vocab_json, "--encode", nd_path, "--out", nd_path + ".ids"])
            with open(nd_path + ".ids") as f:
                ours_nd = [int(x) for x in f.read().split()]
            hf_nd = hf_gguf.encode(no_digits, add_special_tokens=False)
            if hf_nd != ours_nd:
                failures.append(first_mismatch(name + " (no digits)", "transformers-gguf", ours_nd, hf_nd, decode))
            else:
                print(f"[{name}] without digits ({len(no_digits.encode('utf-8'))} bytes, {len(ours_nd)} tokens): "
                      f"identical to transformers-gguf")
            # On the full text: where transformers-gguf differs, the difference is digit splitting.
            hf_full = hf_gguf.encode(text, add_special_tokens=False)
            diff = describe_digit_disagreement(hf_full, ours, token_bytes, text)
            if diff is None:
                print(f"[{name}] full text: transformers-gguf identical too")
            elif diff[0]:
                failures.append(f"{name}: transformers-gguf differs where no digit is involved: {diff[1]}")
            else:
                print(f"[{name}] full text: transformers-gguf gives {len(hf_full)} tokens vs {len(ours)}; "
                      f"{diff[1]}")

        # parse_special off: special tokens are plain text (tokenizers: encode_special_tokens).
        mix_path = os.path.join(tmp, "generated-mix")
        run_tool(build, ["--gguf-vocab-json", vocab_json, "--encode", mix_path, "--out", mix_path + ".ns",
                         "--no-special"])
        with open(mix_path + ".ns") as f:
            ours_ns = [int(x) for x in f.read().split()]
        ref_written.encode_special_tokens = True
        ref_ns = ref_written.encode(corpora["generated-mix"], add_special_tokens=False).ids
        if ours_ns != ref_ns:
            failures.append(first_mismatch("generated-mix (no special)", "tokenizers", ours_ns, ref_ns, decode))
        else:
            print(f"[generated-mix] parse_special off: {len(ours_ns)} tokens, identical to tokenizers")

        # What `convert` writes (tokenizer.json + tokenizer_config.json) loads in transformers too.
        hf_dir = os.path.join(tmp, "hf")
        os.makedirs(hf_dir)
        for src in (tok_json, cfg_json):
            os.replace(src, os.path.join(hf_dir, os.path.basename(src)))
        hf_ours = AutoTokenizer.from_pretrained(hf_dir)
        mix_ids = hf_ours.encode(corpora["generated-mix"])
        with open(mix_path + ".ids") as f:
            ours_mix = [int(x) for x in f.read().split()]
        if mix_ids != ours_mix:
            failures.append(first_mismatch("generated-mix", "transformers(llmctl's files)", ours_mix, mix_ids, decode))
        else:
            print(f"[generated-mix] transformers loading llmctl's tokenizer.json + tokenizer_config.json "
                  f"({type(hf_ours).__name__}): identical")
        cfg_json = os.path.join(hf_dir, "tokenizer_config.json")
        with open(cfg_json) as f:
            cfg = json.load(f)
        if cfg.get("eos_token") != "<|im_end|>" or cfg.get("bos_token") != "<|im_start|>" or not cfg.get("chat_template"):
            failures.append(f"tokenizer_config.json: unexpected {dict((k, cfg.get(k)) for k in ('bos_token', 'eos_token'))}")

    print(f"compared {total_bytes} bytes, {total_tokens} tokens")
    if failures:
        print("FAILED:\n" + "\n".join(failures))
        return 1
    print("OK")
    return 0


def smollm2_reference(v):
    """Byte-level BPE from the GGUF's tokens and merges (as the `gguf` package read them), control
    (type 3) and user-defined (type 4) tokens matched as special tokens, SmolLM2's pre-tokenizer."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    vocab = {t: i for i, t in enumerate(v["tokens"])}
    merges = [tuple(m.split(" ", 1)) for m in v["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    types = v.get("token_types") or []
    special = [v["tokens"][i] for i, t in enumerate(types) if t in (3, 4)]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    print(f"reference 2: {len(vocab)} tokens, {len(merges)} merges, {len(special)} special tokens from the GGUF")
    return tok


def gpt2_byte_decoder():
    """Character -> byte of GPT-2's byte-level alphabet (printable Latin-1 kept, the rest moved to U+0100..)."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, n = {}, 0
    for b in range(256):
        if b in keep:
            chars[chr(b)] = b
        else:
            chars[chr(256 + n)] = b
            n += 1
    return chars


def describe_digit_disagreement(hf_ids, ours, token_bytes, text):
    """None when equal; else (bad, message). Walks both id lists, resynchronising on the bytes:
    each differing stretch of text, with one character on either side, must contain a numeric one."""
    starts = []  # byte offset at which each character of `text` starts
    off = 0
    for c in text:
        starts.append(off)
        off += len(c.encode("utf-8"))
    if hf_ids == ours:
        return None
    tb = lambda ids: b"".join(token_bytes[t] for t in ids)
    i = j = 0
    pos = 0  # byte offset of ours[j] in the text
    stretches = 0
    while i < len(hf_ids) and j < len(ours):
        if hf_ids[i] == ours[j]:
            pos += len(token_bytes[ours[j]])
            i += 1
            j += 1
            continue
        a, b = i + 1, j + 1
        while tb(hf_ids[i:a]) != tb(ours[j:b]):
            if len(tb(hf_ids[i:a])) < len(tb(ours[j:b])):
                a += 1
            else:
                b += 1
            if a > len(hf_ids) or b > len(ours):
                return (True, "could not resynchronise")
        stretches += 1
        # Digit splitting changes the pieces a digit touches, and the whitespace run before it
        # ("\n\n1": GPT-2's regex leaves the last "\n" alone, the Digits split does not).
        end = pos + len(tb(ours[j:b]))
        c0 = bisect.bisect_right(starts, pos) - 1
        c1 = bisect.bisect_right(starts, end - 1) - 1
        around = text[max(0, c0 - 1):c1 + 2]
        if not any(c.isnumeric() for c in around):
            return (True, f"stretch {around!r}: transformers {hf_ids[i:a]} vs llmctl {ours[j:b]}")
        pos = end
        i, j = a, b
    return (False, f"{stretches} differing stretches, each next to a digit (transformers ignores pre='smollm')")

if __name__ == "__main__":
    sys.exit(main())
