#!/usr/bin/env python3
"""A load error that only one rank or stage sees ends the whole multi-rank job, non-zero and with
that rank's message, instead of hanging: the failing rank aborts the run through the communicator
(MPI_Abort) rather than exiting into an MPI_Finalize that waits for peers sitting in a collective.

The checkpoint: the default model quantized (RTN int4 g64), with one weight_scale of the last
layer set to NaN, which only the last pipeline stage (-pp 2) or every rank's slice (-tp 3) reads;
the first layer's for the first stage. One rank alone refuses it in about a second.
Usage: test_rank_failure.py BUILD_DIR   (exit 77 without mpirun or the default model's dense copy)
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

build = os.path.abspath(sys.argv[1])
llmctl = os.path.join(build, "llmctl")
home = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
model = os.path.join(home, "models/SmolLM2-135M-Instruct/hf")
if not shutil.which("mpirun"):
    print("SKIP: mpirun not found (apt-get install openmpi-bin)")
    sys.exit(77)
if not os.path.exists(os.path.join(model, "config.json")):
    print(f"SKIP: the default model's dense copy is not at {model} (scripts/fetch-model.sh --dense)")
    sys.exit(77)
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
failures = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def poison_scale(src, dst, tensor):
    """Copies the checkpoint directory src to dst with every value of `tensor` (an f16/bf16/f32
    weight_scale) set to NaN."""
    shutil.copytree(src, dst)
    path = os.path.join(dst, "model.safetensors")
    with open(path, "r+b") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        info = header[tensor]
        begin, end = info["data_offsets"]
        nan = {"F16": b"\x00\x7e", "BF16": b"\xc0\x7f", "F32": struct.pack("<f", float("nan"))}[info["dtype"]]
        f.seek(8 + n + begin)
        f.write(nan * ((end - begin) // len(nan)))


tmp = tempfile.mkdtemp()
try:
    q = os.path.join(tmp, "q")
    r = subprocess.run([llmctl, "quantize", model, q, "--method", "rtn", "--group-size", "64"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    cases = [("last layer", "model.layers.29.mlp.down_proj.weight_scale", ["-pp", "2"]),
             ("first layer", "model.layers.0.self_attn.q_proj.weight_scale", ["-pp", "2"]),
             ("last layer", "model.layers.29.mlp.down_proj.weight_scale", ["-tp", "3"])]
    for where, tensor, par in cases:
        bad = os.path.join(tmp, "bad-" + tensor.split(".")[2] + "-" + par[0][1:])
        if not os.path.exists(bad):
            poison_scale(q, bad, tensor)
        solo = subprocess.run([llmctl, "generate", "-m", bad, "-n", "2", "hi"], capture_output=True, text=True,
                              timeout=120)
        check(solo.returncode == 1 and "is nan" in solo.stderr,
              f"one rank refuses the NaN scale of the {where} (exit {solo.returncode}: {solo.stderr.strip()[-160:]})")
        t0 = time.time()
        try:
            p = subprocess.run([llmctl, "generate", "-m", bad, *par, "-t", "1", "-n", "2", "hi"], capture_output=True,
                               text=True, env=env, timeout=60)
            rc, err = p.returncode, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, err = None, (e.stderr or b"").decode(errors="replace")
            subprocess.run(["pkill", "-9", "-f", bad])
        took = time.time() - t0
        check(rc not in (None, 0) and "is nan" in err and took < 30,
              f"{' '.join(par)}, NaN scale in the {where}: the job ends non-zero in {took:.1f} s with the rank's "
              f"message (exit {rc}: {err.strip()[-200:]})")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
