#!/usr/bin/env python3
"""llmctl's own launcher of tensor/pipeline-parallel ranks (engine/parallel/launcher.h).

1. Sizes the model cannot be split over are refused from its config before any rank starts:
   `-tp 1000`, `-tp 2`, `-tp 9` (9 query heads, MLP 1536) and `-pp 31` (30 layers) of the default
   model each within 2 s, with the numbers, and no mpirun or rank ever appears; a split the model
   allows but no node should run (`-tp 3 -pp 30`: 90 ranks) is refused by the per-node limit
   (4 ranks a core, at least 8) when this machine is below it.
2. `serve -tp 3`: SIGTERM to the process the user started ends the run with exit 0 (as one rank's
   serve), within 20 s, and leaves no mpirun or rank behind.
3. A malformed weight is refused at -tp N as at -tp 1: a compressed-tensors module whose
   weight_shape tensor lies (a rank cuts its rows or columns and used to write its own
   weight_shape over it), and a dense weight of the wrong shape (a random 3-head model at -tp 3).
Skips (77) without Open MPI's mpirun or the default model.
"""
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from server_util import MODEL, SRC, check, finish  # noqa: E402

build = sys.argv[1]
LLMCTL = os.path.join(build, "llmctl")
if not shutil.which("mpirun"):
    print("SKIP: mpirun not found (apt-get install openmpi-bin)")
    sys.exit(77)
if not os.path.exists(MODEL):
    print(f"SKIP: default model not found at {MODEL}")
    sys.exit(77)
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def processes():
    """{pid: (ppid, command line)} of every process now."""
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            ppid = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
            cmd = open(f"/proc/{p}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            out[int(p)] = (ppid, cmd)
        except (OSError, ValueError, IndexError):
            pass
    return out


def descendants(pid, procs=None):
    procs = procs if procs is not None else processes()
    below, grew = {pid}, True
    while grew:
        more = {p for p, (pp, _) in procs.items() if pp in below} - below
        below |= more
        grew = bool(more)
    return below - {pid}


def alive(pids):
    out = []
    for p in pids:
        try:
            if "zombie" not in open(f"/proc/{p}/status").read().lower():
                out.append(p)
        except OSError:
            pass
    return out


def refused_fast(flags, reason, model=MODEL):
    """Runs generate with flags; checks it is refused within 2 s naming `reason`, and that no
    process it started (mpirun, a rank: anything with its marker but itself) ever appeared."""
    marker = f"tp-launch-{os.getpid()}-{time.time_ns()}"
    cmd = [LLMCTL, "generate", "--model", model, "--device", "cpu", "-t", "1", *flags, "-n", "2", "hello " + marker]
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    started = set()
    while proc.poll() is None and time.time() - t0 < 120:
        started |= {p for p, (_, c) in processes().items() if marker in c and p != proc.pid}
        time.sleep(0.02)
    if proc.poll() is None:
        proc.kill()
    out, err = proc.communicate()
    took = time.time() - t0
    time.sleep(0.2)
    left = [p for p, (_, c) in processes().items() if marker in c]
    first = err.strip().splitlines()[0][:200] if err.strip() else "(no message)"
    check(proc.returncode == 1 and reason in err and took < 2.0,
          f"generate {' '.join(flags)}: refused in {took:.2f} s (exit {proc.returncode}): {first}")
    check(not started and not left, f"generate {' '.join(flags)}: no mpirun or rank started ({len(started)} seen, "
                                    f"{len(left)} left)")


# 1. Sizes, from the config, before any rank.
refused_fast(["-tp", "1000"], "cannot split 9 query heads over 1000 tensor-parallel ranks")
refused_fast(["-tp", "2"], "cannot split 9 query heads over 2 tensor-parallel ranks")
refused_fast(["-tp", "9"], "cannot split 1536 MLP intermediate features over 9 tensor-parallel ranks")
refused_fast(["-pp", "31"], "cannot split 30 layers over 31 pipeline stages")
cores = os.cpu_count() or 1
if 90 > max(8, 4 * cores):
    refused_fast(["-tp", "3", "-pp", "30"], f"asks for 90 ranks, more than llmctl starts on one node of {cores} cores")
else:
    print(f"skip -tp 3 -pp 30 (90 ranks): this node of {cores} cores would run them")
GGUF = os.path.join(os.path.dirname(MODEL), "SmolLM2-135M-Instruct.Q4_1.gguf")
if os.path.exists(GGUF):  # the config from GGUF metadata
    refused_fast(["-tp", "2"], "cannot split 9 query heads over 2 tensor-parallel ranks", model=GGUF)

# 2. serve -tp 3 stops on SIGTERM with exit 0, as one rank does.
log = tempfile.NamedTemporaryFile("w+", prefix="llmctl-tp-launch-", suffix=".log", delete=False)
srv = subprocess.Popen([LLMCTL, "serve", "--model", MODEL, "--device", "cpu", "-tp", "3", "-t", "1", "--port", "0"],
                       stdout=log, stderr=log, env=env)
port, deadline = None, time.time() + 120
while port is None and time.time() < deadline and srv.poll() is None:
    for line in open(log.name):
        if "listening on http://" in line:
            port = int(line.split("listening on http://", 1)[1].split()[0].rsplit(":", 1)[1])
    time.sleep(0.1)
healthy = False
while port and not healthy and time.time() < deadline:
    r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"http://127.0.0.1:{port}/health"],
                       capture_output=True, text=True)
    healthy = r.stdout == "200"
    time.sleep(0.1)
check(healthy, f"serve -tp 3 answers /health on port {port}" + ("" if healthy else ": " + open(log.name).read()[-1500:]))
tree = descendants(srv.pid)
check(len(tree) >= 4, f"serve -tp 3: mpirun and 3 ranks below the launcher ({len(tree)} processes)")
srv.send_signal(signal.SIGTERM)
t0 = time.time()
try:
    rc = srv.wait(timeout=20)
except subprocess.TimeoutExpired:
    rc = None
    srv.kill()
took = time.time() - t0
time.sleep(0.5)
left = alive(tree)
check(rc == 0, f"serve -tp 3: SIGTERM ends it with exit 0 in {took:.1f} s (exit {rc}): "
      + " | ".join(open(log.name).read().strip().splitlines()[-3:]))
check(not left, f"serve -tp 3: no mpirun or rank left after SIGTERM ({left})")
for p in left:
    os.kill(p, signal.SIGKILL)
os.unlink(log.name)


# 3. A malformed weight is refused at -tp N as at -tp 1.
def generate(model, tp):
    r = subprocess.run([LLMCTL, "generate", "--model", model, "--device", "cpu", "-t", "1", "-tp", str(tp), "-n", "2",
                        "--temperature", "0", "hello"], capture_output=True, text=True, env=env, timeout=300)
    return r.returncode, r.stderr


def header(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return raw, n, json.loads(raw[8:8 + n])


with tempfile.TemporaryDirectory() as tmp:
    # compressed-tensors: q_proj's weight_shape says [64, 128] where the config implies [64, 64].
    ct = os.path.join(tmp, "ct_bad_weight_shape")
    shutil.copytree(os.path.join(SRC, "tests/golden/quant/tiny_llama_ct_w4g32"), ct)
    path = os.path.join(ct, "model.safetensors")
    raw, n, h = header(path)
    name = "model.layers.0.self_attn.q_proj.weight_shape"
    at = 8 + n + h[name]["data_offsets"][0]
    raw = bytearray(raw)
    raw[at:at + 16] = struct.pack("<qq", 64, 128)
    open(path, "wb").write(bytes(raw))
    want = "tensor 'weight_shape' says [64, 128], the config implies [64, 64]"
    for tp in (1, 2, 4):  # 2: rows and columns cut on whole groups; 4: o_proj's columns cut inside one
        rc, err = generate(ct, tp)
        check(rc == 1 and want in err, f"compressed-tensors weight_shape [64, 128] of a [64, 64] q_proj refused at "
                                       f"-tp {tp} (exit {rc}): " + (err.strip().splitlines() or ["(no message)"])[-1][:200])

    # dense: a random 3-head model whose layer-1 q_proj is stored [48, 192] instead of [96, 96].
    tool = os.path.join(build, "llmctl_random_model")
    if os.path.exists(tool):
        dense = os.path.join(tmp, "dense_bad_shape")
        r = subprocess.run([tool, MODEL, dense, "--hidden", "96", "--heads", "3", "--kv-heads", "3", "--layers", "3",
                            "--intermediate", "192"], capture_output=True, text=True)
        check(r.returncode == 0, "llmctl_random_model made a 3-head model" + ("" if r.returncode == 0 else ": " + r.stderr))
        if r.returncode == 0:
            path = os.path.join(dense, "model.safetensors")
            raw, n, h = header(path)
            h["model.layers.1.self_attn.q_proj.weight"]["shape"] = [48, 192]
            hb = json.dumps(h).encode()
            hb += b" " * (-len(hb) % 8)
            open(path, "wb").write(struct.pack("<Q", len(hb)) + hb + raw[8 + n:])
            want = "model.layers.1.self_attn.q_proj.weight has shape [48, 192], expected [96, 96]"
            for tp in (1, 3):
                rc, err = generate(dense, tp)
                check(rc == 1 and want in err, f"dense q_proj [48, 192] of [96, 96] refused at -tp {tp} (exit {rc})")
    else:
        print(f"skip the dense wrong-shape case: {tool} not built")
finish()
