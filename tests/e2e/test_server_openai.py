#!/usr/bin/env python3
"""`llmctl serve` against the official `openai` Python client, curl for the TGI routes, and load.

1. completions and chat, streaming and not, n=2, logprobs (both shapes), stop, echo, a list of
   prompts, seed reproducibility, include_usage; greedy texts equal `llmctl generate --prompts`.
2. TGI /generate, /generate_stream, /info with curl; /tokenize, /detokenize; /metrics names.
3. Load: 64 concurrent streaming clients, 3 requests each (LLMCTL_TEST_LOAD_ROUNDS), every response
   complete and equal to the same request's greedy result from `llmctl generate` on one rank (which
   equals its result run alone: test_batching.py), no errors, KV back to idle.
Usage: test_server_openai.py BUILD_DIR
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import MODEL, SRC, Server, require_model  # noqa: E402

try:
    import openai
except ImportError:
    print("SKIP: the openai package is not installed (scripts/test.sh installs it)")
    sys.exit(77)

build = sys.argv[1]
# Requests per load client: 3, or LLMCTL_TEST_LOAD_ROUNDS (test_tensor_parallel.py runs this suite against
# -tp 3 and -pp 2 ranks with 1: the same 64 clients at once, a third of the requests).
ROUNDS = int(os.environ.get("LLMCTL_TEST_LOAD_ROUNDS", "3"))
require_model()
data = os.path.join(os.path.dirname(os.path.abspath(SRC)), "shared/data/wikitext2-valid.txt")
words = open(data, encoding="utf-8").read().split() if os.path.exists(data) else ("the quick brown fox " * 500).split()


def solo(requests):
    """Each request's outputs through `llmctl generate --prompts` on one rank. Batched there: a batched
    run gives each request its solo output (test_batching.py checks it against --max-num-seqs 1), and
    runs the 192 load requests in a quarter of the time one at a time takes."""
    path = os.path.join(tempfile.mkdtemp(), "reqs.jsonl")
    with open(path, "w") as f:
        for r in requests:
            f.write(json.dumps(r) + "\n")
    p = subprocess.run([os.path.join(build, "llmctl"), "generate", "--model", MODEL, "--prompts", path],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return [json.loads(l) for l in p.stdout.splitlines()]


failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


srv = Server(build, "--max-concurrent-requests", "80", "--max-num-seqs", "64", api_key="sk-test")
try:
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="sk-test", max_retries=0)
    model = client.models.list().data[0].id
    check(model == "SmolLM2-135M-Instruct", f"/v1/models lists the model ({model})")

    prompt = "The capital of France is"
    messages = [{"role": "user", "content": "Name three colors."}]
    ref = solo([{"prompt": prompt, "max_tokens": 12, "temperature": 0},
                {"messages": messages, "max_tokens": 12, "temperature": 0}])

    c = client.completions.create(model=model, prompt=prompt, max_tokens=12, temperature=0)
    check(c.choices[0].text == ref[0]["outputs"][0]["text"], f"completions greedy equals the engine: {c.choices[0].text!r}")
    check(c.usage.prompt_tokens == ref[0]["prompt_tokens"] and c.usage.completion_tokens == ref[0]["completion_tokens"],
          f"completions usage {c.usage.prompt_tokens}/{c.usage.completion_tokens}")
    check(c.choices[0].finish_reason == ref[0]["outputs"][0]["finish_reason"], "completions finish_reason")

    stream = client.completions.create(model=model, prompt=prompt, max_tokens=12, temperature=0, stream=True,
                                       stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    check(text == c.choices[0].text, "completions stream concatenates to the same text")
    check(chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == c.usage.completion_tokens,
          "include_usage: a last chunk with empty choices and the usage")
    check([ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == c.choices[0].finish_reason,
          "stream's last choice chunk carries the finish_reason")

    chat = client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0)
    check(chat.choices[0].message.content == ref[1]["outputs"][0]["text"] and chat.choices[0].message.role == "assistant",
          f"chat greedy equals the engine (chat template): {chat.choices[0].message.content!r}")
    cs = list(client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0, stream=True,
                                             stream_options={"include_usage": True}))
    check(cs[0].choices[0].delta.role == "assistant", "chat stream starts with the assistant role")
    check("".join(ch.choices[0].delta.content or "" for ch in cs if ch.choices) == chat.choices[0].message.content,
          "chat stream concatenates to the same text")
    check(cs[-1].usage.prompt_tokens == chat.usage.prompt_tokens and cs[-1].usage.completion_tokens == chat.usage.completion_tokens,
          "chat stream usage equals the non-streamed usage")

    two = client.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=1.0, n=2, seed=11)
    check(sorted(ch.index for ch in two.choices) == [0, 1] and two.choices[0].text != two.choices[1].text,
          "n=2 gives choices 0 and 1, sampled apart")
    chat2 = client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=1.0, n=2, seed=5)
    check(len(chat2.choices) == 2, "chat n=2")

    s1 = client.completions.create(model=model, prompt=prompt, max_tokens=16, temperature=1.0, seed=1234)
    s2 = client.completions.create(model=model, prompt=prompt, max_tokens=16, temperature=1.0, seed=1234)
    s3 = client.completions.create(model=model, prompt=prompt, max_tokens=16, temperature=1.0, seed=4321)
    check(s1.choices[0].text == s2.choices[0].text, "same seed, same text")
    check(s1.choices[0].text != s3.choices[0].text, "another seed, another text")
    st = "".join(ch.choices[0].text for ch in client.completions.create(
        model=model, prompt=prompt, max_tokens=16, temperature=1.0, seed=1234, stream=True) if ch.choices)
    check(st == s1.choices[0].text, "a seeded stream equals the seeded non-streamed text")

    lp = client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0, logprobs=3)
    L = lp.choices[0].logprobs
    n = lp.usage.completion_tokens
    check(len(L.tokens) == n and len(L.token_logprobs) == n and len(L.top_logprobs) == n and len(L.text_offset) == n,
          "completions logprobs: tokens, token_logprobs, top_logprobs, text_offset per token")
    check(all(len(t) <= 3 and max(t.values()) >= lpv - 1e-6 for t, lpv in zip(L.top_logprobs, L.token_logprobs)),
          "greedy token is the top logprob")
    cl = client.chat.completions.create(model=model, messages=messages, max_tokens=6, temperature=0, logprobs=True, top_logprobs=2)
    content = cl.choices[0].logprobs.content
    check(len(content) == cl.usage.completion_tokens and all(len(e.top_logprobs) == 2 and e.bytes for e in content),
          "chat logprobs: content entries with top_logprobs and bytes")
    cls = [ch for ch in client.chat.completions.create(model=model, messages=messages, max_tokens=6, temperature=0,
                                                        logprobs=True, top_logprobs=2, stream=True) if ch.choices]
    streamed = [e for ch in cls if ch.choices[0].logprobs for e in ch.choices[0].logprobs.content]
    check([e.logprob for e in streamed] == [e.logprob for e in content], "streamed chat logprobs equal the non-streamed")

    stop = client.completions.create(model=model, prompt="1, 2, 3, 4,", max_tokens=30, temperature=0, stop=[" 7"])
    check(stop.choices[0].finish_reason == "stop" and " 7" not in stop.choices[0].text,
          f"stop string ends the text and is not in it: {stop.choices[0].text!r}")
    stops = "".join(ch.choices[0].text for ch in client.completions.create(
        model=model, prompt="1, 2, 3, 4,", max_tokens=30, temperature=0, stop=[" 7"], stream=True) if ch.choices)
    check(stops == stop.choices[0].text, "a streamed stop string is never leaked")

    echo = client.completions.create(model=model, prompt=prompt, max_tokens=4, temperature=0, echo=True, logprobs=1)
    check(echo.choices[0].text.startswith(prompt), "echo puts the prompt first")
    el = echo.choices[0].logprobs
    check(el.token_logprobs[0] is None and len(el.tokens) == echo.usage.prompt_tokens + echo.usage.completion_tokens,
          "echo with logprobs scores the prompt (first entry null)")
    multi = client.completions.create(model=model, prompt=["Hello", "The sky is"], max_tokens=4, temperature=0, n=2)
    check(sorted(ch.index for ch in multi.choices) == [0, 1, 2, 3], "a list of 2 prompts with n=2 gives 4 choices")

    # TGI routes with curl
    def curl(path, body=None):
        cmd = ["curl", "-sS", "-H", "Authorization: Bearer sk-test", srv.url + path]
        if body is not None:
            cmd += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout

    g = json.loads(curl("/generate", {"inputs": prompt, "parameters": {"max_new_tokens": 12, "details": True}}))
    check(g["generated_text"] == ref[0]["outputs"][0]["text"] and g["details"]["generated_tokens"] == len(g["details"]["tokens"]),
          "TGI /generate (greedy) equals the engine, with details")
    events = [json.loads(l[5:]) for l in curl("/generate_stream", {"inputs": prompt, "parameters": {"max_new_tokens": 12}}).splitlines()
              if l.startswith("data:")]
    check(events[-1]["generated_text"] == g["generated_text"] and "".join(e["token"]["text"] for e in events) == g["generated_text"],
          "TGI /generate_stream: token texts and generated_text")
    info = json.loads(curl("/info"))
    check(info["max_total_tokens"] == 8192 and info["model_id"] == model, "TGI /info")
    tk = json.loads(curl("/tokenize", {"prompt": prompt}))
    check(tk["count"] == len(tk["tokens"]) == ref[0]["prompt_tokens"] and tk["max_model_len"] == 8192, "/tokenize")
    dt = json.loads(curl("/detokenize", {"tokens": tk["tokens"]}))
    check(dt["prompt"] == prompt, "/detokenize inverts /tokenize")

    # Load: 64 concurrent streaming clients, ROUNDS requests each, against solo greedy results.
    rng = random.Random(3)
    load = []
    for i in range(64 * ROUNDS):
        s = rng.randrange(len(words) - 100)
        load.append({"prompt": " ".join(words[s:s + rng.randint(3, 60)]), "max_tokens": rng.randint(4, 24), "temperature": 0})
    refs = solo(load)
    results = [None] * len(load)
    errors = []

    def worker(k):
        c = openai.OpenAI(base_url=srv.url + "/v1", api_key="sk-test", max_retries=0, timeout=300)
        for j in range(ROUNDS):
            i = k * ROUNDS + j
            try:
                parts, usage, finish = [], None, None
                for ch in c.completions.create(model=model, stream=True, stream_options={"include_usage": True}, **load[i]):
                    if ch.choices:
                        parts.append(ch.choices[0].text)
                        finish = ch.choices[0].finish_reason or finish
                    if ch.usage:
                        usage = ch.usage
                results[i] = ("".join(parts), usage.completion_tokens if usage else None, finish)
            except Exception as e:  # noqa: BLE001
                errors.append(f"request {i}: {e!r}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not errors, f"64 concurrent streaming clients x {ROUNDS} requests: no errors {errors[:3]}")
    same = sum(1 for r, f in zip(results, refs) if r and r[0] == f["outputs"][0]["text"] and r[1] == f["completion_tokens"]
               and r[2] == f["outputs"][0]["finish_reason"])
    check(same == len(load), f"every streamed response equals its solo greedy result ({same}/{len(load)})")
    check(srv.wait_idle(), "KV usage back to idle after the load")
    m = srv.metrics()
    for name in ["llmctl_requests_running", "llmctl_requests_waiting", "llmctl_kv_cache_usage_ratio",
                 "llmctl_prefix_cache_hit_ratio", "llmctl_time_to_first_token_seconds_count",
                 "llmctl_time_per_output_token_seconds_count", "llmctl_e2e_request_latency_seconds_count",
                 "llmctl_prompt_tokens_total", "llmctl_generation_tokens_total", "llmctl_preemptions_total",
                 "llmctl_spec_decode_draft_tokens_total", "llmctl_spec_decode_accepted_tokens_total",
                 'llmctl_request_success_total{finish_reason="length"}']:
        check(name in m, f"/metrics has {name}")
    check(m["llmctl_e2e_request_latency_seconds_count"] >= len(load), "every load request is in the latency histogram")
finally:
    rc = srv.stop()
# Under -tp/-pp too: llmctl's launcher hands SIGINT to the ranks, rank 0 drains as one rank does, and
# the run exits with their status (test_tensor_parallel.py checks that every rank is gone).
check(rc == 0, f"SIGINT: llmctl serve exits 0 (got {rc})")
log = srv.output()
check(log.count("POST /v1/completions 200") >= 64 * ROUNDS, "one log line per request")
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
