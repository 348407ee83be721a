"""Shared by the model-family tests (test_families.py, test_moe_families.py): checks counted,
llmctl_score runs (one rank, or tensor parallel under mpirun), and a score compared with
transformers' golden (top-20 log-probs within a tolerance, greedy continuations identical)."""
import json
import os
import subprocess
import tempfile

TOL = 1e-4
failures = []
counts = {"passed": 0}
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if cond:
        counts["passed"] += 1
    else:
        failures.append(what)


def score(build, golden, model, tp=1):
    cmd = [os.path.join(build, "llmctl_score"), golden, "--model", model, "--device", "cpu"]
    if tp > 1:
        cmd = ["mpirun", "-np", str(tp), "--oversubscribe", "--bind-to", "none"] + cmd + ["--tensor-parallel-size", str(tp)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)
    check(r.returncode == 0, f"llmctl_score {os.path.basename(model)} TP={tp} ran" + ("" if r.returncode == 0 else ": " + r.stderr[-800:]))
    return json.loads(r.stdout) if r.returncode == 0 else None


def compare(name, golden, got, tol=TOL, greedy=True):
    """Worst |dlogprob| at the reference's top-20 ids, and (greedy) greedy continuations equal."""
    if not got:
        return
    worst = 0.0
    for g, c in zip(golden["cases"], got["cases"]):
        for rg, rc in zip(g["top_logprobs"], c["logprobs_at_ref_ids"]):
            worst = max(worst, max(abs(x - y) for x, y in zip(rg, rc)))
        if greedy:
            check(g["greedy_ids"] == c.get("greedy_ids"), f"{name} {g['name']}: {len(g['greedy_ids'])} greedy tokens identical")
    check(len(got["cases"]) == len(golden["cases"]) and worst <= tol, f"{name}: top-20 log-probs within {tol} (worst {worst:.2e})")


def batched_alone(build, name, model, golden, kv="auto"):
    """`llmctl generate` over 6 prompts (prefixes of the golden's first 3 sequences, twice) batched and
    one at a time: each prompt's 12 greedy tokens are the same either way."""
    with tempfile.TemporaryDirectory() as tmp:
        prompts = os.path.join(tmp, "p.jsonl")
        with open(prompts, "w") as fh:
            for i, case in enumerate(golden["cases"][:3] * 2):
                fh.write(json.dumps({"prompt": case["input_ids"][: 5 + 3 * i], "max_tokens": 12, "temperature": 0}) + "\n")
        outs = []
        for n in ("6", "1"):
            r = subprocess.run([os.path.join(build, "llmctl"), "generate", "--model", model, "--device", "cpu", "-t", "2",
                                "--kv-cache-dtype", kv, "--prompts", prompts, "--max-num-seqs", n],
                               capture_output=True, text=True, timeout=300)
            check(r.returncode == 0, f"{name} generate --max-num-seqs {n} ran" + ("" if r.returncode == 0 else ": " + r.stderr[-800:]))
            outs.append([json.loads(line)["outputs"][0]["token_ids"] for line in r.stdout.splitlines() if line.startswith("{")])
        check(len(outs[0]) == 6 and outs[0] == outs[1], f"{name}: 6 prompts batched give their tokens alone")
