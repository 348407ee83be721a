#!/usr/bin/env python3
"""The cost of structured output, on one machine in one run (numbers, not a test):

1. decode speed under a 20-field JSON schema against unconstrained, batch 1 (`generate --json -`,
   greedy, decode tokens/s) and batch 32 (`generate --prompts`, generated tokens/s) sampled at
   temperature 0.7 twice: with generate's defaults (top-k 40, top-p 0.95, min-p 0.05: the masked
   top-k looked for token by token) and with OpenAI's (no truncation: a mask only where the grammar
   refuses the unmasked draw); the unconstrained runs generate as many tokens as the constrained ones
   did (--ignore-eos / max_tokens), alternating;
2. first-token latency through `serve` (max_tokens 1) for a schema never seen (compiled) against
   the same schema again (cached): what compiling adds.
Usage: scripts/bench-structured.py [BUILD_DIR] [ROUNDS] [PARTS]
PARTS: some of batch1, batch32, batch32-plain, compile (comma-separated; default all).
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
LLMCTL = os.path.join(BUILD, "llmctl")
sys.path.insert(0, os.path.join(ROOT, "tests/e2e"))
from server_util import GGUF as MODEL, Server  # noqa: E402

S = lambda n: {"type": "string", "maxLength": n}  # noqa: E731
I = lambda lo, hi: {"type": "integer", "minimum": lo, "maximum": hi}  # noqa: E731
FIELDS = {"first_name": S(16), "last_name": S(16), "age": I(0, 120), "email": S(32), "city": S(20), "country": S(20),
          "zip": {"type": "string", "pattern": "^[0-9]{5}$"}, "employed": {"type": "boolean"}, "salary": I(0, 1000000),
          "title": S(24), "company": S(24), "department": {"enum": ["sales", "engineering", "support", "finance"]},
          "start_year": I(1970, 2026), "manager": S(20), "phone": {"type": "string", "pattern": "^[0-9]{10}$"},
          "skills": {"type": "array", "items": S(12), "maxItems": 3}, "level": {"enum": ["junior", "mid", "senior"]},
          "remote": {"type": "boolean"}, "rating": I(1, 5), "notes": S(40)}
SCHEMA = {"type": "object", "properties": FIELDS, "required": list(FIELDS), "additionalProperties": False}
# The same fields with strings of any length: xgrammar expands each maxLength / {m,n} bound into
# states whose token masks it precomputes, so length bounds are what compiling costs.
OPEN = json.loads(json.dumps(SCHEMA).replace('"maxLength"', '"maxLengthDropped"'))
for v in OPEN["properties"].values():
    v.pop("maxLengthDropped", None)
    if "items" in v:
        v["items"].pop("maxLengthDropped", None)
PROMPT = "Make up an employee record as JSON."


def run(args):
    p = subprocess.run([LLMCTL, *args], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"llmctl {' '.join(args)} failed: {p.stderr}")
    return p


def batch1(tmp):
    schema = os.path.join(tmp, "schema.json")
    json.dump(SCHEMA, open(schema, "w"))
    con, unc = [], []
    for _ in range(ROUNDS):
        j = json.loads(run(["generate", "-m", MODEL, "--chat", PROMPT, "--json-schema", schema, "--temp", "0", "-n", "400",
                            "--json", "-"]).stdout)
        n = j["completion_tokens"]
        con.append(j["decode_tokens_per_second"])
        u = json.loads(run(["generate", "-m", MODEL, "--chat", PROMPT, "--temp", "0", "-n", str(n), "--ignore-eos",
                            "--json", "-"]).stdout)
        unc.append(u["decode_tokens_per_second"])
    return statistics.median(con), statistics.median(unc), n


def batch32(tmp, **sampling):
    lines = [{"messages": [{"role": "user", "content": f"{PROMPT} Employee number {i}."}], "temperature": 0.7, "seed": i,
              **sampling} for i in range(32)]
    con_path, unc_path = os.path.join(tmp, "con.jsonl"), os.path.join(tmp, "unc.jsonl")
    with open(con_path, "w") as f:
        for line in lines:
            f.write(json.dumps({**line, "max_tokens": 400, "response_format": {
                "type": "json_schema", "json_schema": {"name": "employee", "schema": SCHEMA}}}) + "\n")
    rate = re.compile(r"([\d.]+) generated tok/s")
    con, unc = [], []
    for _ in range(ROUNDS):
        p = run(["generate", "-m", MODEL, "--prompts", con_path, "--max-num-seqs", "32"])
        outs = [json.loads(l) for l in p.stdout.splitlines()]
        tokens = [len(o["outputs"][0]["token_ids"]) if "outputs" in o else len(o["token_ids"]) for o in outs]
        con.append(float(rate.search(p.stderr).group(1)))
        with open(unc_path, "w") as f:
            for line, n in zip(lines, tokens):
                f.write(json.dumps({**line, "max_tokens": n, "ignore_eos": True}) + "\n")
        p = run(["generate", "-m", MODEL, "--prompts", unc_path, "--max-num-seqs", "32"])
        unc.append(float(rate.search(p.stderr).group(1)))
    return statistics.median(con), statistics.median(unc), sum(tokens)


def compile_latency(schema):
    srv = Server(BUILD, model=MODEL)
    try:
        port = srv.port

        def ask(schema):
            body = json.dumps({"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 1, "temperature": 0,
                               "response_format": {"type": "json_schema", "json_schema": {"name": "e", "schema": schema}}})
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body.encode(),
                                         {"Content-Type": "application/json"})
            t = time.perf_counter()
            with urllib.request.urlopen(req, timeout=120) as r:
                r.read()
            return time.perf_counter() - t

        ask({"type": "object"})  # the compiler's vocabulary tables are built once, on the first request
        fresh, cached = [], []
        for i in range(10):
            s = json.loads(json.dumps(schema))
            s["properties"]["notes"]["description"] = f"variant {i} {time.time_ns()}"  # never seen
            fresh.append(ask(s))
            cached.append(ask(s))
        return statistics.median(fresh) * 1e3, statistics.median(cached) * 1e3
    finally:
        srv.stop()


def main():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    flags = open("/proc/cpuinfo").read()
    isa = "avx512_vnni" if "avx512_vnni" in flags else "avx2" if "avx2" in flags else "scalar"
    print(f"machine: {cpu}, {os.cpu_count()} cores, best ISA {isa}; model {os.path.basename(MODEL)}; {ROUNDS} rounds, medians")
    parts = sys.argv[3].split(",") if len(sys.argv) > 3 else ["batch1", "batch32", "batch32-plain", "compile"]
    with tempfile.TemporaryDirectory() as tmp:
        if "batch1" in parts:
            c1, u1, n1 = batch1(tmp)
            print(f"batch 1 (greedy): schema {c1:.1f} tok/s, unconstrained {u1:.1f} tok/s ({n1} tokens each): {c1 / u1:.3f}x")
        for part, what, sampling in (("batch32", "top-k 40, top-p 0.95, min-p 0.05", {}),
                                     ("batch32-plain", "no truncation", {"top_k": 0, "top_p": 1.0, "min_p": 0.0})):
            if part in parts:
                c32, u32, n32 = batch32(tmp, **sampling)
                print(f"batch 32 (temperature 0.7, {what}): schema {c32:.1f} tok/s, unconstrained {u32:.1f} tok/s "
                      f"({n32} tokens each run): {c32 / u32:.3f}x")
    if "compile" not in parts:
        return
    for what, schema in (("20 fields, strings with maxLength", SCHEMA), ("20 fields, strings of any length", OPEN)):
        fresh, cached = compile_latency(schema)
        print(f"first token (max_tokens 1), {what}: never-seen schema {fresh:.1f} ms, cached {cached:.1f} ms: "
              f"compiling adds {fresh - cached:.1f} ms")


if __name__ == "__main__":
    main()
