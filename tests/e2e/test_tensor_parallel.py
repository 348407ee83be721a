#!/usr/bin/env python3
"""Tensor and pipeline parallelism on CPU ranks (Open MPI), against one rank and against
transformers' goldens.

1. Golden cases through llmctl_score under `mpirun -np N`: the default model (9 query heads, 3 KV
   heads: TP=3) and a tiny int4 Llama packed by llm-compressor (4 query heads, 2 KV heads: TP=2
   splits them and its quantized row-parallel weights on group boundaries; TP=4 replicates the KV
   heads and cuts o_proj's groups of 32 into 16 columns a rank, each keeping the group's scale; so
   does its dense conversion). Every greedy continuation identical to one rank's, top-20
   log-probabilities within 1e-4 of one rank's and within the golden test's tolerance of
   transformers'. Pipeline parallel: the default model in 2 stages of 15 layers (bitwise equal to
   one rank: no sum changes order), and the tiny llama at TP=2 x PP=2 (4 ranks); -pp 4 of 30
   layers is refused.
2. `llmctl generate -tp 3` / `-pp 2` starts its own ranks: 32 prompts batched give exactly the
   tokens each gives alone (--max-num-seqs 1 runs them one at a time, through the same ranks);
   under -pp 2 two steps of different sequences are in flight at once (and large ones are cut into
   micro-batches). The same under -tp 3 over an fp8 KV cache (each rank keeps its kv heads' exact
   open-block rows), and on the Q4_1 GGUF with int8 activations (the all-reduce sums in rank order
   whatever the batch's size; int8 rounding turned any other order into different tokens).
3. A size that does not divide (TP=2 of 9 heads) is refused before any weight is read, with the
   numbers, and no rank hangs. The default model's Q4_1 GGUF, run quantized with exact
   activations, gives one rank's greedy text at -tp 3 (its prompt read from stdin there).
4. `llmctl serve -tp 3`: chat and completions requests (streamed and not) answer as one rank does;
   SIGTERM stops every rank; a rank killed mid-stream ends the server non-zero within 10 s.
5. The OpenAI client suite (test_server_openai.py) passes against `serve -tp 3` and `serve -pp 2`.
Skips (77) without Open MPI's mpirun or the default model.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from server_util import HOME, MODEL, SRC, Server, check, finish  # noqa: E402

build = sys.argv[1]
if not shutil.which("mpirun"):
    print("SKIP: mpirun not found (apt-get install openmpi-bin)")
    sys.exit(77)
if not os.path.exists(MODEL):
    print(f"SKIP: default model not found at {MODEL}")
    sys.exit(77)
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
TINY = os.path.join(SRC, "tests/golden/quant/tiny_llama_ct_w4g32")


def score(golden, model, tp, expect_ok=True, pp=1):
    cmd = [os.path.join(build, "llmctl_score"), golden, "--model", model, "--device", "cpu"]
    if tp * pp > 1:
        cmd = ["mpirun", "-np", str(tp * pp), "--oversubscribe", "--bind-to", "none"] + cmd + [
            "--tensor-parallel-size", str(tp), "--pipeline-parallel-size", str(pp)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if not expect_ok:
        return r
    check(r.returncode == 0, f"llmctl_score TP={tp} PP={pp} on {os.path.basename(model)} ran" + ("" if r.returncode == 0 else ": " + r.stderr[-2000:]))
    return json.loads(r.stdout) if r.returncode == 0 else None


def compare(name, golden_path, one, many, tp, golden_tol):
    golden = json.load(open(golden_path))
    if not one or not many:
        return
    check([c["name"] for c in many["cases"]] == [c["name"] for c in golden["cases"]], f"{name} TP={tp}: every case")
    worst_one = worst_ref = 0.0
    for g, a, b in zip(golden["cases"], one["cases"], many["cases"]):
        if "top_logprobs" in g:
            for rg, ra, rb in zip(g["top_logprobs"], a["logprobs_at_ref_ids"], b["logprobs_at_ref_ids"]):
                for x, y, z in zip(rg, ra, rb):
                    worst_one, worst_ref = max(worst_one, abs(z - y)), max(worst_ref, abs(z - x))
        for key in a:
            if key.startswith("greedy"):
                check(a[key] == b[key], f"{name} TP={tp} {g['name']}: greedy continuation equals TP=1's")
    check(worst_one <= 1e-4, f"{name} TP={tp}: top-20 logprobs within 1e-4 of TP=1 (worst {worst_one:.2e})")
    check(worst_ref <= golden_tol, f"{name} TP={tp}: within {golden_tol} of transformers (worst {worst_ref:.2e})")


# 1. Goldens.
golden = os.path.join(SRC, "tests/golden/smollm2_golden.json")
one = score(golden, MODEL, 1)
compare("default model", golden, one, score(golden, MODEL, 3), 3, 2e-3)
compare("default model", golden, one, score(golden, MODEL, 1, pp=2), "1 x PP=2", 2e-3)
tiny_golden = os.path.join(SRC, "tests/golden/quant/tiny_llama_ct_w4g32_golden.json")
tiny_one = score(tiny_golden, TINY, 1)
compare("tiny int4 llama", tiny_golden, tiny_one, score(tiny_golden, TINY, 2), 2, 1e-3)
compare("tiny int4 llama", tiny_golden, tiny_one, score(tiny_golden, TINY, 2, pp=2), "2 x PP=2", 1e-3)
# TP=4 cuts o_proj's groups of 32 inputs into 16 columns a rank: each keeps its half-group with the
# group's scale; 16 columns are too few for the kernels, so o_proj's slices load dense, with a note.
r = score(tiny_golden, TINY, 4, expect_ok=False)
check(r.returncode == 0 and "groups of 16 inputs over K = 16" in r.stderr,
      f"TP=4 of the int4 g32 llama: o_proj's 16-column slices load dense, with a note (exit {r.returncode}) "
      + r.stderr[-1000:])
compare("tiny int4 llama", tiny_golden, tiny_one, json.loads(r.stdout) if r.returncode == 0 else None, 4, 1e-3)
with tempfile.TemporaryDirectory() as tmp:
    dense = os.path.join(tmp, "dense")
    c = subprocess.run([os.path.join(build, "llmctl"), "convert", TINY, dense, "--dtype", "f32"], capture_output=True, text=True)
    check(c.returncode == 0, "convert the tiny int4 llama to f32" + ("" if c.returncode == 0 else ": " + c.stderr[-500:]))
    if c.returncode == 0:
        compare("tiny llama (dense)", tiny_golden, score(tiny_golden, dense, 1), score(tiny_golden, dense, 4), 4, 1e-3)

# 2. Batched equals alone, through llmctl's own launcher (32 prompts of 3 to 34 words: each config's
# one-at-a-time run is most of this test's time, and it runs alone in CI).
NPROMPTS = 32
words = open(os.path.join(SRC, "../shared/data/wikitext2-valid.txt")).read().split()[:4000] \
    if os.path.exists(os.path.join(SRC, "../shared/data/wikitext2-valid.txt")) else ["The", "cat", "sat"] * 400
with tempfile.TemporaryDirectory() as tmp:
    prompts = os.path.join(tmp, "prompts.jsonl")
    with open(prompts, "w") as f:
        for i in range(NPROMPTS):
            start = (i * 37) % 3000
            f.write(json.dumps({"prompt": " ".join(words[start:start + 3 + i % 40]), "max_tokens": 8 + i % 9,
                                "temperature": 0}) + "\n")

    def run_prompts(*flags, model=MODEL):
        r = subprocess.run([os.path.join(build, "llmctl"), "generate", "--model", model, "--device", "cpu",
                            "-t", "1", "--prompts", prompts, *flags], capture_output=True, text=True, env=env, timeout=600)
        check(r.returncode == 0, f"generate --prompts {' '.join(flags)} ran" + ("" if r.returncode == 0 else ": " + r.stderr[-2000:]))
        return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]

    def tokens(r):
        return r["outputs"][0]["token_ids"] if "outputs" in r else None

    # (-tp 3 again over an fp8 cache: each rank keeps its kv heads' exact open-block rows; and on the
    # Q4_1 GGUF with int8 activations, whose rounding turned the all-reduce's size-dependent order of
    # additions into different tokens)
    gguf = os.path.join(HOME, "models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
    for par in (["-tp", "3"], ["-pp", "2"], ["-tp", "3", "--kv-cache-dtype", "fp8"], ["-tp", "3", "--model", gguf]):
        t0 = time.time()
        model = MODEL
        if "--model" in par:
            model, par = par[par.index("--model") + 1], par[:par.index("--model")] + ["--act-quant", "int8"]
            if not os.path.exists(model):
                check(False, f"the default model's GGUF at {model}")
                continue
        batched = run_prompts(*par, "--max-num-seqs", str(NPROMPTS), model=model)
        alone = run_prompts(*par, "--max-num-seqs", "1", model=model)
        check(len(batched) == NPROMPTS and len(alone) == NPROMPTS,
              f"{NPROMPTS} answers each way ({len(batched)}, {len(alone)})")
        same = sum(1 for a, b in zip(batched, alone) if tokens(a) is not None and tokens(a) == tokens(b))
        check(all(len(tokens(a) or []) >= 8 for a in batched), f"{' '.join(par)}: every answer has its 8-16 tokens")
        check(same == NPROMPTS, f"{' '.join(par)}: {NPROMPTS} batched prompts equal their runs alone "
                                f"({same}/{NPROMPTS}; {time.time() - t0:.0f} s)")

# 3. A size that does not divide.
t0 = time.time()
r = subprocess.run([os.path.join(build, "llmctl"), "generate", "--model", MODEL, "--device", "cpu", "-tp", "2", "-n", "4",
                    "hello"], capture_output=True, text=True, env=env, timeout=120)
check(r.returncode != 0 and "9" in r.stderr and "query heads" in r.stderr and "2" in r.stderr,
      f"-tp 2 of 9 query heads refused with the numbers, exit {r.returncode} in {time.time() - t0:.1f} s: "
      + r.stderr.strip().splitlines()[0][:200] if r.stderr.strip() else "(no message)")


r = subprocess.run([os.path.join(build, "llmctl"), "generate", "--model", MODEL, "--device", "cpu", "-pp", "4", "-n", "4",
                    "hello"], capture_output=True, text=True, env=env, timeout=120)
check(r.returncode != 0 and "cannot split 30 layers over 4 pipeline stages" in r.stderr,
      f"-pp 4 of 30 layers refused with the numbers (exit {r.returncode})")

# The default model's own Q4_1 GGUF, run quantized: each rank decodes only its rows (q/k/v, gate/up)
# and input columns (o, down) of the blocks. Exact activations: the same greedy text as one rank.
GGUF = os.path.join(HOME, "models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
check(os.path.exists(GGUF), f"the default model's GGUF at {GGUF}")
if os.path.exists(GGUF):
    texts = []
    for par in (["-tp", "1"], ["-tp", "3"]):  # -tp 3 reads the prompt from stdin (rank 0 gets it from mpirun)
        stdin = par[1] == "3"
        r = subprocess.run([os.path.join(build, "llmctl"), "generate", "--model", GGUF, "--device", "cpu", "-t", "1", *par,
                            "-n", "24", "--temperature", "0", "--act-quant", "none"] + ([] if stdin else ["The capital of France is"]),
                           input="The capital of France is" if stdin else None, capture_output=True, text=True, env=env,
                           timeout=300)
        check(r.returncode == 0, f"Q4_1 GGUF {' '.join(par)} ran" + ("" if r.returncode == 0 else ": " + r.stderr[-1000:]))
        texts.append(r.stdout)
    check(texts[0] == texts[1] and len(texts[0]) > 20, f"Q4_1 GGUF: -tp 3 greedy text equals -tp 1's: {texts}")


# 4. serve -tp 3.
def ranks_of(pid):
    """Pids of the ranks under pid (llmctl's launcher -> mpirun -> ranks), by OMPI_COMM_WORLD_RANK."""
    parent = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                parent[int(p)] = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    below, grew = {pid}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in below} - below
        below |= more
        grew = bool(more)
    out = {}
    for p in below - {pid}:
        try:
            for e in open(f"/proc/{p}/environ", "rb").read().split(b"\0"):
                if e.startswith(b"OMPI_COMM_WORLD_RANK="):
                    out[int(e.split(b"=")[1])] = p
        except (OSError, ValueError, IndexError):
            pass
    return out


os.environ.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
ref = Server(build, "--device", "cpu")
srv = Server(build, "--device", "cpu", "-tp", "3", "-t", "1")
chat = {"messages": [{"role": "user", "content": "Name three colours."}], "max_tokens": 24, "temperature": 0}
comp = {"prompt": "The capital of France is", "max_tokens": 16, "temperature": 0, "logprobs": 3}
for path, body in (("/v1/chat/completions", chat), ("/v1/completions", comp)):
    s1, a = ref.request("POST", path, body)
    s2, b = srv.request("POST", path, body)
    key = "message" if "messages" in body else "text"
    ta = a["choices"][0][key] if s1 == 200 else None
    tb = b["choices"][0][key] if s2 == 200 else None
    check(s2 == 200 and ta == tb, f"serve -tp 3 {path}: same answer as one rank ({s1}, {s2})")
s, streamed = srv.request("POST", "/v1/completions", dict(comp, stream=True))
check(s == 200 and "[DONE]" in str(streamed), "serve -tp 3: a streamed completion ends with [DONE]")
ref.proc.terminate()
ref.proc.wait(timeout=30)

ranks = ranks_of(srv.proc.pid)
check(sorted(ranks) == [0, 1, 2], f"serve -tp 3 runs ranks 0, 1, 2 under mpirun ({sorted(ranks)})")
# A rank killed mid-stream: the server (mpirun) exits non-zero within 10 s, every rank with it.
import threading  # noqa: E402


def stream_until_cut():
    try:  # the stream is cut when the rank dies: the error is expected
        srv.request("POST", "/v1/completions", dict(comp, max_tokens=2000, stream=True, ignore_eos=True), timeout=60)
    except Exception as e:  # noqa: BLE001
        print(f"     (stream ended: {type(e).__name__})")


streaming = threading.Thread(target=stream_until_cut)
streaming.start()
time.sleep(1.0)
if 1 in ranks:
    os.kill(ranks[1], signal.SIGKILL)
    t0 = time.time()
    try:
        rc = srv.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        rc = None
    check(rc is not None and rc != 0, f"rank 1 killed: the server exited non-zero ({rc}) in {time.time() - t0:.1f} s")
    time.sleep(0.5)
    alive = [p for p in ranks.values() if os.path.exists(f"/proc/{p}") and "zombie" not in open(f"/proc/{p}/status").read().lower()]
    check(not alive, f"no rank left running ({alive})")
if srv.proc.poll() is None:
    srv.proc.kill()
streaming.join(timeout=30)

# SIGTERM stops every rank (exit 0 and the rest: tests/e2e/test_tensor_parallel_launch.py).
srv2 = Server(build, "--device", "cpu", "-tp", "3", "-t", "1")
ranks = ranks_of(srv2.proc.pid)
srv2.proc.terminate()
t0 = time.time()
try:
    rc = srv2.proc.wait(timeout=10)
except subprocess.TimeoutExpired:
    rc = None
    srv2.proc.kill()
time.sleep(0.5)
alive = [p for p in ranks.values() if os.path.exists(f"/proc/{p}") and "zombie" not in open(f"/proc/{p}/status").read().lower()]
check(rc is not None and not alive, f"SIGTERM: server and its {len(ranks)} ranks gone in {time.time() - t0:.1f} s (exit {rc})")

# 5. The OpenAI client suite (tests/e2e/test_server_openai.py) against `serve -tp 3` and `serve -pp 2`
# (two steps in flight: streaming, aborts, n > 1 and stops while another step is in the pipeline); its
# load of 64 concurrent clients with one request each (three each in its own ctest entry).
if os.path.exists(os.path.join(SRC, "tests/e2e/test_server_openai.py")):
    for par in ("-tp 3", "-pp 2"):
        t0 = time.time()
        r = subprocess.run([sys.executable, os.path.join(SRC, "tests/e2e/test_server_openai.py"), build],
                           capture_output=True, text=True,
                           env=dict(env, LLMCTL_TEST_SERVE_ARGS=f"--device cpu {par} -t 1", LLMCTL_TEST_LOAD_ROUNDS="1"),
                           timeout=900)
        fails = [line for line in r.stdout.splitlines() if line.startswith("FAIL")]
        if r.returncode == 77:  # its reference (the openai package) is absent: not a pass
            print(f"SKIP OpenAI client suite against serve {par}: " + r.stdout.strip().splitlines()[-1][:200])
        else:
            check(r.returncode == 0 and not fails,
                  f"OpenAI client suite against serve {par}: exit {r.returncode} in {time.time() - t0:.0f} s"
                  + ("" if not fails else ": " + "; ".join(fails[:5])))
finish()
