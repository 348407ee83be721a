#!/usr/bin/env python3
"""Model families beyond Llama, against transformers: tiny random models under tests/golden/families/
(made by make_family_goldens.py with transformers, and written to GGUF by llama.cpp's own
convert_hf_to_gguf.py), each run from its HF directory and from that GGUF:
  tiny_qwen3  Qwen3ForCausalLM (an RMSNorm over each q and k head before rope; GGUF arch qwen3)
  tiny_qwen2  Qwen2ForCausalLM (q/k/v biases; GGUF arch qwen2, q/k rows not permuted)
  tiny_qwen2_yarn   the same with YaRN rope (factor 4 over 512 original positions; GGUF rope.scaling.*)
  tiny_mistral_swa  MistralForCausalLM, a 5-token sliding window on every layer (HF directory only)
  tiny_qwen2_swa    Qwen2ForCausalLM with use_sliding_window: a 6-token window on layer 1 only
  tiny_phi3         Phi3ForCausalLM (engine/model/phi3/: fused qkv_proj and gate_up_proj; a 7-token window on
                    every layer; GGUF arch phi3, attn_qkv and a 2I-row ffn_up)
  tiny_phi3_longrope  the same with LongRoPE (short factors below the original 64 positions, the attention
                    factor; GGUF rope_factors_short / _long tensors)
  tiny_phi3_partial Phi-4-mini's shape: rope over 12 of each head's 16 dimensions, tied embeddings
                    (GGUF phi3.rope.dimension_count 12)
  tiny_gemma2       Gemma2ForCausalLM (engine/model/gemma/: 5-token sliding layers alternating with global
                    ones, attention scores soft-capped at 8 and logits at 10, no q/k norms); GGUF arch
                    gemma2 (its soft-capping keys; the alternation implied)
  tiny_gemma3       Gemma3ForCausalLM (engine/model/gemma/: (1 + w) and sandwich norms, GeGLU, scaled
                    embeddings, 5:1 sliding layers with their own rope base); GGUF arch gemma3, whose
                    norms llama.cpp stores as 1 + w and whose sliding pattern it leaves implied
The sliding windows are far shorter than the sequences, so every check below (TP, batch invariance,
quantize's calibration) runs tokens past them; the batch check runs them with an int8 KV cache too
(its sequences go through the dequantized path).
Checks per model and source: top-20 log-probabilities within 1e-4 of transformers fp32 at every
position of eight sequences, 32-token greedy continuations identical; tensor parallel (TP=2 under
mpirun, 2 KV heads) equal to one rank within 1e-4 with the same greedy tokens; `llmctl generate`
over 6 prompts batched gives each prompt's tokens alone; `quantize` (RTN int4 g32) writes a
checkpoint that loads and scores, GPTQ on the Phi-3 models (q/k/v and gate/up quantized split, written
fused) too; GPTQ on Qwen3, Gemma 2, Gemma 3 and Phi-3 (calibrated through each family's own forward) makes
the checkpoint tiny_<family>_gptq_golden.json records, which transformers loaded with compressed-tensors, and
llmctl scores it within 1e-3 of transformers; AWQ (the Llama layer only) refuses Qwen3 and the Gemmas by name. Exits 77 when no fixture is present.
Usage: test_families.py BUILD_DIR
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from family_util import batched_alone, check, compare, counts, failures, score as score_with  # noqa: E402

build = sys.argv[1]
src = os.environ.get("LLMCTL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
FDIR = os.path.join(src, "tests/golden/families")
FAMILIES = ["qwen3", "qwen2", "qwen2_yarn", "mistral_swa", "qwen2_swa", "phi3", "phi3_longrope", "phi3_partial", "gemma2",
            "gemma3"]


def score(golden, model, tp=1):
    return score_with(build, golden, model, tp)


FUSED = {"phi3", "phi3_longrope", "phi3_partial"}  # fused qkv_proj / gate_up_proj, quantized split and written fused
present = [f for f in FAMILIES if os.path.exists(os.path.join(FDIR, f"tiny_{f}_golden.json"))]
if not present:
    print(f"SKIP: no family fixture under {FDIR} (tests/golden/families/make_family_goldens.py)")
    sys.exit(77)
golden_of = {}
for f in present:
    golden_path = os.path.join(FDIR, f"tiny_{f}_golden.json")
    golden = golden_of[f] = json.load(open(golden_path))
    hf, gguf = os.path.join(FDIR, f"tiny_{f}"), os.path.join(FDIR, f"tiny_{f}.gguf")
    for model in (hf, gguf) if os.path.exists(gguf) else (hf,):
        compare(f"{os.path.basename(model)} vs transformers", golden, score(golden_path, model))
    if shutil.which("mpirun"):  # TP=2 splits the 4 query and 2 KV heads (and the q/k norms replicate)
        compare(f"tiny_{f} TP=2 vs transformers", golden, score(golden_path, hf, tp=2))
    # batch invariance through llmctl's own engine, from the GGUF (or the directory)
    source = gguf if os.path.exists(gguf) else hf
    kv_dtypes = ["auto"] if os.path.exists(gguf) else ["auto", "int8"]
    for kv in kv_dtypes:
        batched_alone(build, f"{os.path.basename(source)} (KV {kv})", source, golden, kv)


def calibrated(f, out, method):
    """quantize --method METHOD (int4 g32, 8 x 32 calibration tokens) of tiny_F: it runs, and the checkpoint loads and scores."""
    r = subprocess.run([os.path.join(build, "llmctl"), "quantize", os.path.join(FDIR, f"tiny_{f}"), out,
                        "--method", method, "--group-size", "32", "--calib-samples", "8", "--calib-seq-len", "32",
                        "--calib", os.path.join(src, "../shared/data/tinyshakespeare.txt")],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"tiny_{f}: quantize --method {method} ran" + ("" if r.returncode == 0 else ": " + r.stderr[-500:]))
    if r.returncode == 0:
        got = score(os.path.join(FDIR, f"tiny_{f}_golden.json"), out)
        check(got is not None and len(got["cases"]) == len(golden_of[f]["cases"]),
              f"tiny_{f}: its {method.upper()} int4 g32 checkpoint loads and scores")


# quantize: RTN writes every tensor the family reads (Qwen3's q/k norms were dropped once), and the
# result loads and runs; AWQ and GPTQ calibrate through each family's own forward.
for f in present:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "q")
        r = subprocess.run([os.path.join(build, "llmctl"), "quantize", os.path.join(FDIR, f"tiny_{f}"), out, "--group-size", "32"],
                           capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, f"tiny_{f}: quantize --method rtn ran" + ("" if r.returncode == 0 else ": " + r.stderr[-500:]))
        if r.returncode == 0:
            got = score(os.path.join(FDIR, f"tiny_{f}_golden.json"), out)
            check(got is not None and len(got["cases"]) == len(golden_of[f]["cases"]), f"tiny_{f}: its RTN int4 g32 checkpoint loads and scores")
        if f in FUSED:  # GPTQ through the split q/k/v and gate/up, written fused again
            # int8 RTN stays near the dense model (0.6-1.5 here, as Qwen2's 0.67); rows of the fused
            # tensors written out of place would be as far as a model without its window (15)
            r = subprocess.run([os.path.join(build, "llmctl"), "quantize", os.path.join(FDIR, f"tiny_{f}"), out + "8",
                                "--bits", "8", "--group-size", "32"], capture_output=True, text=True, timeout=300)
            check(r.returncode == 0, f"tiny_{f}: quantize --bits 8 ran" + ("" if r.returncode == 0 else ": " + r.stderr[-500:]))
            if r.returncode == 0:
                compare(f"tiny_{f} RTN int8 g32", golden_of[f], score(os.path.join(FDIR, f"tiny_{f}_golden.json"), out + "8"), tol=3.0,
                        greedy=False)
            calibrated(f, out + "g", "gptq")
        if f in ("qwen3", "gemma2", "gemma3"):  # AWQ searches through the family's own forward
            calibrated(f, out + "a", "awq")
        # GPTQ through the family's own forward: the checkpoint the golden's command makes is the one
        # transformers (with compressed-tensors) ran, and llmctl scores it as transformers does
        golden_path = os.path.join(FDIR, f"tiny_{f}_gptq_golden.json")
        if os.path.exists(golden_path):
            golden = json.load(open(golden_path))
            cmd = golden["command"].replace("OUT", out + "q").split()
            r = subprocess.run([os.path.join(os.path.abspath(build), cmd[0])] + cmd[1:], capture_output=True, text=True,
                               cwd=src, timeout=300)
            check(r.returncode == 0, f"tiny_{f}: {golden['command']} ran" + ("" if r.returncode == 0 else ": " + r.stderr[-500:]))
            if r.returncode == 0:
                sha = hashlib.sha256(open(os.path.join(out + "q", "model.safetensors"), "rb").read()).hexdigest()
                check(sha == golden["model_sha256"], f"tiny_{f}: GPTQ checkpoint identical to the golden's ({sha[:16]})")
                compare(f"tiny_{f} GPTQ int4 g32 vs transformers + compressed-tensors", golden, score(golden_path, out + "q"),
                        tol=1e-3)
                if shutil.which("mpirun"):  # the int4 groups split by rank (o and down by their columns)
                    compare(f"tiny_{f} GPTQ int4 g32 TP=2 vs transformers + compressed-tensors", golden,
                            score(golden_path, out + "q", tp=2), tol=1e-3)

print(f"{counts['passed']} checks passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
