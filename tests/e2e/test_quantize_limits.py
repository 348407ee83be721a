"""convert and quantize against careless use: an OUT.part that llmctl did not leave is refused and
kept (one it left is replaced), Ctrl-C during quantize exits 130 leaving neither OUT nor OUT.part,
thread counts and calibration sizes are bounded with a message (never thousands of threads or an
out-of-memory "internal error"), an unwritable OUT and a --calib directory are input errors naming
the path.
Usage: test_quantize_limits.py BUILD_DIR   (exit 77 when the default model's dense copy is absent)
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

build = os.path.abspath(sys.argv[1])
llmctl = os.path.join(build, "llmctl")
home = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
model = os.path.join(home, "models/SmolLM2-135M-Instruct/hf")
gguf = os.path.join(home, "models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.exists(os.path.join(model, "config.json")) or not os.path.exists(gguf):
    print(f"SKIP: the default model's dense copy is not at {model} (scripts/fetch-model.sh --dense)")
    sys.exit(77)
failures = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def run(*args, timeout=600):
    r = subprocess.run([llmctl, *args], capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stderr


tmp = tempfile.mkdtemp()
# 1. An OUT.part holding files llmctl did not write is refused and left alone, by both commands.
for cmd in (["convert", gguf], ["quantize", model, "--group-size", "64"]):
    out = os.path.join(tmp, cmd[0] + "-out")
    os.makedirs(out + ".part")
    open(os.path.join(out + ".part", "precious.txt"), "w").write("keep me")
    rc, err = run(cmd[0], cmd[1], out, *cmd[2:])
    check(rc == 1 and "was not left by an interrupted llmctl run" in err and
          open(os.path.join(out + ".part", "precious.txt")).read() == "keep me" and not os.path.exists(out),
          f"{cmd[0]}: a foreign OUT.part is refused and kept (exit {rc}: {err.strip()[-200:]})")

# 2. One that an interrupted run left (it holds llmctl's marker) is replaced; the run completes.
out = os.path.join(tmp, "conv")
os.makedirs(out + ".part")
open(os.path.join(out + ".part", ".llmctl-partial"), "w").write("convert\n")
open(os.path.join(out + ".part", "stale.bin"), "w").write("x")
rc, err = run("convert", gguf, out)
check(rc == 0 and os.path.exists(os.path.join(out, "config.json")) and not os.path.exists(out + ".part") and
      not os.path.exists(os.path.join(out, ".llmctl-partial")) and not os.path.exists(os.path.join(out, "stale.bin")),
      f"convert replaces an OUT.part it left before (exit {rc}: {err.strip()[-200:]})")

# 3. Ctrl-C during quantize: exit 130, no OUT, no OUT.part.
out = os.path.join(tmp, "interrupted")
p = subprocess.Popen([llmctl, "quantize", model, out, "--method", "rtn", "--group-size", "64", "-t", "1"],
                     stderr=subprocess.PIPE, text=True)
seen = ""
deadline = time.time() + 300
while time.time() < deadline:
    line = p.stderr.readline()
    if not line:
        break
    seen += line
    if "] layer 0:" in line:  # the first layer is done: the run is inside the layer loop
        p.send_signal(signal.SIGINT)
        break
rc = p.wait(timeout=300)
rest = p.stderr.read()
check(rc == 130 and "interrupted" in rest and not os.path.exists(out) and not os.path.exists(out + ".part"),
      f"Ctrl-C in quantize: exit 130, nothing left (exit {rc}; {(seen + rest).strip()[-200:]})")

# 4. Bounds with a message.
rc, err = run("quantize", model, os.path.join(tmp, "t"), "--group-size", "64", "--threads", "100000")
check(rc != 0 and rc < 128 and "1024" in err, f"quantize --threads 100000 refused (exit {rc}: {err.strip()[-150:]})")
rc, err = run("generate", "-m", gguf, "-t", "100000", "-n", "2", "hi", timeout=60)
check(rc != 0 and rc < 128 and "1024" in err, f"generate -t 100000 refused (exit {rc}: {err.strip()[-150:]})")
calib = os.path.join(tmp, "calib.txt")
open(calib, "w").write("The quick brown fox jumps over the lazy dog. " * 200)
rc, err = run("quantize", model, os.path.join(tmp, "c"), "--method", "gptq", "--group-size", "64", "--calib", calib,
              "--calib-samples", "65536", "--calib-seq-len", "512")
check(rc == 1 and "calibration tokens: at most" in err and "internal error" not in err,
      f"--calib-samples 65536 x 512 refused before any work (exit {rc}: {err.strip()[-150:]})")
rc, err = run("quantize", model, os.path.join(tmp, "d"), "--method", "gptq", "--group-size", "64", "--calib", tmp)
check(rc == 1 and "is not a file" in err, f"--calib DIRECTORY (exit {rc}: {err.strip()[-150:]})")
rc, err = run("quantize", model, "/proc/llmctl-no/out", "--group-size", "64")
check(rc == 1 and "/proc/llmctl-no/out" in err and "internal error" not in err,
      f"an unwritable OUT is an input error naming it (exit {rc}: {err.strip()[-150:]})")
rc, err = run("convert", gguf, "/proc/llmctl-no/out")
check(rc == 1 and "/proc/llmctl-no/out" in err and "internal error" not in err,
      f"convert: an unwritable OUT is an input error naming it (exit {rc}: {err.strip()[-150:]})")

subprocess.run(["rm", "-rf", tmp])
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
