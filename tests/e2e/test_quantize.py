#!/usr/bin/env python3
"""`llmctl quantize` end to end on the default model.

- Bad input is a clear error (exit 1, the reason named): gptq without --calib, a group size that
  does not divide 576, an unknown method, 8-bit AWQ, asymmetric GPTQ v1, an OUT that exists, an
  already-quantized input, --device cuda.
- RTN int4 g64 (compressed-tensors) is byte-identical run to run and from the GGUF or the HF
  directory, and its sha256 is that of the checkpoint transformers scored for
  tests/golden/quant/smollm2_rtn_w4g64_golden.json: llmctl's logprobs on it are within 1e-3 of
  transformers' (top-20) and greedy continuations identical (test_golden.py with that golden).
- GPTQ (true-sequential, small calibration) gives the same bytes on 1 and 2 threads, and every
  format written (compressed-tensors, AutoAWQ, GPTQ) loads back in llmctl with a finite perplexity
  near f32's; int8 per-channel RTN stays within 0.5% of f32's perplexity, and generates the same
  greedy text on 3 tensor-parallel ranks as on one.
- AWQ with --kv-cache fp8 writes per-head k_scale / v_scale that generate then uses.
- Ctrl-C during a run leaves no OUT.
Usage: test_quantize.py BUILD_DIR
"""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

build = sys.argv[1]
src = os.environ.get("LLMCTL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
home = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
model = os.path.join(home, "models/SmolLM2-135M-Instruct/hf")
gguf = os.path.join(home, "models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
calib = os.path.join(src, "../shared/data/tinyshakespeare.txt")
wiki = os.path.join(src, "../shared/data/wikitext2-valid.txt")
golden = os.path.join(src, "tests/golden/quant/smollm2_rtn_w4g64_golden.json")
for path, what in ((model, "default model"), (calib, "tinyshakespeare"), (wiki, "wikitext2"), (golden, "golden")):
    if not os.path.exists(path):
        print(f"SKIP: {what} not found at {path}")
        sys.exit(77)
llmctl = os.path.join(build, "llmctl")
tmp = tempfile.mkdtemp(prefix="llmctl-quantize-")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def run(*args, timeout=900):
    r = subprocess.run([llmctl, *args], capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def quantize(out, *flags):
    rc, log = run("quantize", model, out, *flags)
    if rc != 0:
        print(log[-2000:])
    return rc


def sha(d):
    return hashlib.sha256(open(os.path.join(d, "model.safetensors"), "rb").read()).hexdigest()


def ppl(d, tokens=1024, *flags):
    r = subprocess.run([llmctl, "bench", "ppl", "-m", d, "--text", wiki, "--ctx", "512", "--stride", "256",
                        "--max-tokens", str(tokens), "--no-progress", "--json", "-", *flags],
                       capture_output=True, text=True, timeout=900)
    return float(json.loads(r.stdout)["rows"][-1]["ppl"]) if r.returncode == 0 else float("nan")


try:
    # Bad input: exit 1 with the reason.
    out = os.path.join(tmp, "bad")
    for flags, reason in ((["--method", "gptq"], "--calib"),
                          (["--group-size", "128"], "576"),
                          (["--method", "magic"], "unknown --method"),
                          (["--format", "awq", "--bits", "8"], "4-bit"),
                          (["--format", "gptq", "--asym"], "zero point"),
                          (["--format", "exl2"], "exl2"),
                          (["--device", "cuda"], "CPU")):
        rc, log = run("quantize", model, out, *([] if "--group-size" in flags else ["--group-size", "64"]), *flags)
        check(rc == 1 and reason in log and not os.path.exists(out), f"quantize {' '.join(flags)}: exit {rc}, "
              f"names '{reason}': {log.strip().splitlines()[-1][:150] if log.strip() else ''}")

    # RTN: deterministic, the same from the GGUF, the checkpoint transformers scored.
    rtn = os.path.join(tmp, "rtn")
    check(quantize(rtn, "--method", "rtn", "--bits", "4", "--group-size", "64") == 0, "rtn int4 g64")
    rtn2 = os.path.join(tmp, "rtn-gguf")
    if os.path.exists(gguf):
        rc, log = run("quantize", gguf, rtn2, "--method", "rtn", "--bits", "4", "--group-size", "64")
        check(rc == 1 and "already quantized (Q4_1" in log and "--allow-requantize" in log and not os.path.exists(rtn2),
              "a quantized GGUF is refused without --allow-requantize")
        rc, _ = run("quantize", gguf, rtn2, "--method", "rtn", "--bits", "4", "--group-size", "64", "--allow-requantize")
        check(rc == 0 and sha(rtn2) == sha(rtn), "rtn from the GGUF: the same model.safetensors as from the HF dir")
    rc, log = run("quantize", model, os.path.join(tmp, "out.gguf"), "--method", "rtn", "--group-size", "64")
    check(rc == 1 and "HF directory" in log and not os.path.exists(os.path.join(tmp, "out.gguf")),
          "an OUT named .gguf is refused (quantize writes a directory)")
    ref = json.load(open(golden))
    check(sha(rtn) == ref["model_sha256"], f"rtn output sha256 {sha(rtn)[:16]} = golden's {ref['model_sha256'][:16]}")
    r = subprocess.run([sys.executable, os.path.join(src, "tests/e2e/test_golden.py"), build, "--model", rtn,
                        "--golden", golden, "--tol", "1e-3"], capture_output=True, text=True)
    print(r.stdout.strip())
    check(r.returncode == 0, "llmctl on its own RTN output equals transformers on it (top-20 within 1e-3, greedy)")
    rc, log = run("quantize", model, rtn, "--method", "rtn", "--group-size", "64")
    check(rc == 1 and "exists" in log, "an OUT that exists and is not empty is refused")
    rc, log = run("quantize", rtn, os.path.join(tmp, "again"), "--group-size", "64")
    check(rc == 1 and "already quantized" in log, "an already-quantized input is refused")

    # GPTQ: the same bytes on 1 and 2 threads; each layout loads back.
    base = ppl(model)
    g1, g2 = os.path.join(tmp, "gptq-t1"), os.path.join(tmp, "gptq-t2")
    gflags = ["--method", "gptq", "--bits", "4", "--group-size", "64", "--calib", calib, "--calib-samples", "4",
              "--calib-seq-len", "128", "--format", "gptq"]
    check(quantize(g1, *gflags, "--threads", "1") == 0 and quantize(g2, *gflags, "--threads", "2") == 0, "gptq runs")
    check(sha(g1) == sha(g2), "gptq: byte-identical output on 1 and 2 threads")
    qc = json.load(open(os.path.join(g1, "config.json")))["quantization_config"]
    check(qc.get("quant_method") == "gptq" and qc.get("checkpoint_format") == "gptq", f"gptq config: {qc}")
    awq = os.path.join(tmp, "awq")
    # (2 samples of 64 tokens: the scale and clip searches cost ~3 s per layer, most of this test)
    check(quantize(awq, "--method", "awq", "--asym", "--bits", "4", "--group-size", "64", "--calib", calib,
                   "--calib-samples", "2", "--calib-seq-len", "64", "--format", "awq", "--kv-cache", "fp8",
                   "--awq-clip") == 0,
          "awq --format awq --kv-cache fp8 --awq-clip runs")
    for d, name in ((rtn, "rtn compressed-tensors"), (g1, "gptq"), (awq, "awq")):
        p = ppl(d)
        check(base < p < 2.5 * base, f"{name}: perplexity {p:.3f} (f32 {base:.3f})")
    i8 = os.path.join(tmp, "int8")
    check(quantize(i8, "--method", "rtn", "--bits", "8", "--group-size", "-1") == 0, "rtn int8 per channel")
    p8 = ppl(i8, 1024, "--act-quant", "none")  # the weights' error alone (int8 activations add theirs)
    check(abs(p8 / base - 1) < 0.005, f"int8 per channel: perplexity {p8:.4f} within 0.5% of f32 {base:.4f}")
    if shutil.which("mpirun"):  # tensor parallel: each rank's columns of a per-channel row-parallel weight
        mpi = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        texts = []
        for tp in ("1", "3"):
            r = subprocess.run([llmctl, "generate", "-m", i8, "--device", "cpu", "-t", "1", "-tp", tp, "-n", "24",
                                "--temperature", "0", "--act-quant", "none", "The capital of France is"],
                               capture_output=True, text=True, env=mpi, timeout=300)
            check(r.returncode == 0, f"int8 per channel, generate -tp {tp}: exit {r.returncode} " + r.stderr[-300:])
            texts.append(r.stdout)
        check(texts[0] == texts[1] and len(texts[0]) > 20, f"int8 per channel: -tp 3 greedy text equals -tp 1's: {texts}")

    # fp8 KV scales: per kv head, used by generate.
    from_ck = subprocess.run([sys.executable, "-c", "import json,struct,sys;f=open(sys.argv[1],'rb');n=struct.unpack('<Q',f.read(8))[0];"
                              "h=json.loads(f.read(n));print(h['model.layers.0.self_attn.k_scale']['shape'])",
                              os.path.join(awq, "model.safetensors")], capture_output=True, text=True)
    check(from_ck.stdout.strip() == "[3]", f"k_scale per kv head: shape {from_ck.stdout.strip()}")
    rc, log = run("generate", "-m", awq, "--kv-cache-dtype", "fp8", "--max-tokens", "8", "--temperature", "0", "Hello")
    check(rc == 0 and "scale 1.0" not in log, f"generate with --kv-cache-dtype fp8 on the calibrated scales: exit {rc}")

    # Ctrl-C: no OUT.
    cut = os.path.join(tmp, "cut")
    p = subprocess.Popen([llmctl, "quantize", model, cut, *gflags[:-2]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(4)
    p.send_signal(signal.SIGINT)
    p.wait(60)
    check(p.returncode != 0 and not os.path.exists(cut), f"Ctrl-C: exit {p.returncode}, no {os.path.basename(cut)}")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
