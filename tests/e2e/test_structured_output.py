#!/usr/bin/env python3
"""Structured output through `llmctl serve` on the default model (its Q4_1 GGUF), checked by
references written by others: Python's `jsonschema` (with its format checker) for every JSON
output, `re.fullmatch` for regexes, the official `openai` client's `parse()` with a pydantic model.

1. 120 JSON schemas (structured_schemas.py), each greedy and sampled: every output that ends by
   itself ("stop") is valid under its schema; none runs out of tokens.
2. The openai client: chat.completions.parse(response_format=<pydantic model>); json_object.
3. vLLM's fields (structured_outputs / guided_*: regex, choice, grammar) and TGI's grammar; a
   streamed constrained answer equals the whole one; n = 2.
4. Hostile specs: 1 MB schema, 1,000-deep $ref chain, exponential regexes, a grammar with no
   sentence, unknown keys: 400s naming the field, and the server keeps answering others meanwhile.
5. --reasoning-parser: a <think> block (written under a regex) becomes reasoning_content, whole
   and streamed.
Usage: test_structured_output.py BUILD_DIR
"""
import concurrent.futures as cf
import json
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import GGUF, Server, check, failures, finish  # noqa: E402
from structured_schemas import schemas  # noqa: E402

try:
    import jsonschema
    import openai
    import pydantic
except ImportError as e:
    print(f"SKIP: {e.name} is not installed (scripts/test.sh installs jsonschema and openai)")
    sys.exit(77)

build = sys.argv[1]
if not os.path.exists(GGUF):
    print(f"SKIP: the default model is not at {GGUF}")
    sys.exit(77)

srv = Server(build, "--max-num-seqs", "32", "--max-concurrent-requests", "64", model=GGUF)


def chat(content, response_format=None, **kw):
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": 400, **kw}
    if response_format is not None:
        body["response_format"] = response_format
    return srv.request("POST", "/v1/chat/completions", body, timeout=600)


try:
    # 1. the schema corpus, greedy and sampled, 24 requests at a time
    corpus = schemas()
    jobs = [(name, what, schema, temp) for name, what, schema in corpus for temp in (0.0, 0.8)]

    def run(job):
        name, what, schema, temp = job
        rf = {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
        status, body = chat(f"Reply with JSON: {what}.", rf, temperature=temp, seed=len(name))
        return job, status, body

    t0 = time.time()
    results = list(cf.ThreadPoolExecutor(24).map(run, jobs))
    elapsed = time.time() - t0
    valid = stopped = truncated = 0
    for (name, _, schema, temp), status, body in results:
        check(status == 200, f"{name} (temperature {temp}): 200 ({body if status != 200 else ''})", quiet=True)
        if status != 200:
            continue
        choice = body["choices"][0]
        text = choice["message"]["content"]
        if choice["finish_reason"] != "stop":
            truncated += 1
            print(f"     {name} (temperature {temp}) ran out of tokens: {text[:120]!r}...")
            continue
        stopped += 1
        try:
            jsonschema.validate(json.loads(text), schema, format_checker=jsonschema.FormatChecker())
            valid += 1
        except (ValueError, jsonschema.ValidationError) as e:
            check(False, f"{name} (temperature {temp}) is valid: {text!r}: {str(e).splitlines()[0]}")
    print(f"     {len(jobs)} requests over {len(corpus)} schemas in {elapsed:.1f} s: {valid} valid of {stopped} "
          f"finished, {truncated} ran out of max_tokens")
    check(valid == stopped, f"every finished output is valid under its schema ({valid}/{stopped})")
    # A schema that leaves a field open (an email's local part, a number's fraction digits, a
    # recursive $ref) cannot end it for the model: the 135M model loops in some of them. Counted,
    # and held under a tenth.
    check(truncated <= len(jobs) // 10, f"at most a tenth ran out of max_tokens ({truncated} of {len(jobs)})")
    check(len(corpus) >= 100, f"at least 100 schemas ({len(corpus)})")

    # key order: the schema's, not sorted
    rf = {"type": "json_schema", "json_schema": {"name": "ordered", "strict": True, "schema": {
        "type": "object", "properties": {"zulu": {"type": "boolean"}, "alpha": {"type": "boolean"}},
        "required": ["zulu", "alpha"], "additionalProperties": False}}}
    status, body = chat("Two booleans as JSON.", rf, temperature=0)
    text = body["choices"][0]["message"]["content"] if status == 200 else ""
    check(status == 200 and list(json.loads(text)) == ["zulu", "alpha"], f"keys in the schema's order: {text}")

    # 2. the openai client
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0)

    class City(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=30)
        country: str = pydantic.Field(max_length=30)
        population: int = pydantic.Field(ge=0, le=50_000_000)

    served = client.models.list().data[0].id
    parsed = client.chat.completions.parse(model=served, messages=[{"role": "user", "content": "Describe Paris."}],
                                           response_format=City, temperature=0, max_tokens=200)
    city = parsed.choices[0].message.parsed
    check(isinstance(city, City), f"openai parse(response_format=City) -> {city!r}")
    r = client.chat.completions.create(model=served, messages=[{"role": "user", "content": "A JSON object with a cat's name."}],
                                       response_format={"type": "json_object"}, temperature=0, max_tokens=400)
    content = r.choices[0].message.content
    try:
        ok = r.choices[0].finish_reason == "stop" and isinstance(json.loads(content), dict)
    except ValueError:
        ok = False
    check(ok, f"json_object: a JSON object ({content[:80]!r})")

    # 3. vLLM's and TGI's fields
    def complete(prompt, **kw):
        return srv.request("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 60, **kw})

    for temp in (0.0, 1.0):
        status, body = complete("My phone number is", guided_regex=r"\(\d{3}\) \d{3}-\d{4}", temperature=temp, seed=3)
        text = body["choices"][0]["text"] if status == 200 else ""
        check(re.fullmatch(r"\(\d{3}\) \d{3}-\d{4}", text) is not None, f"guided_regex (temperature {temp}): {text!r}")
        status, body = complete("The best season is", structured_outputs={"choice": ["spring", "summer", "autumn", "winter"]},
                                temperature=temp, seed=4)
        text = body["choices"][0]["text"] if status == 200 else ""
        check(text in ("spring", "summer", "autumn", "winter"), f"structured_outputs.choice (temperature {temp}): {text!r}")
        grammar = 'root ::= sum "=" num\nsum ::= num ("+" num | "-" num)\nnum ::= [1-9] [0-9]? | "(" sum ")"'
        status, body = complete("Write a sum:", structured_outputs={"grammar": grammar}, temperature=temp, seed=5)
        text = body["choices"][0]["text"] if status == 200 else ""
        finished = status == 200 and body["choices"][0]["finish_reason"] == "stop"
        num = r"([1-9][0-9]?|\((?:[^()]|\([^()]*\))*\))"
        check(finished and re.fullmatch(f"{num}[+-]{num}={num}", text) is not None,
              f"structured_outputs.grammar (temperature {temp}): {text!r}")
    status, body = srv.request("POST", "/generate", {"inputs": "Weather:", "parameters": {"max_new_tokens": 80, "grammar": {
        "type": "json", "value": {"type": "object", "properties": {"temp": {"type": "integer", "minimum": -40, "maximum": 50}},
                                  "required": ["temp"], "additionalProperties": False}}}})
    text = body.get("generated_text", "") if status == 200 else ""
    check(status == 200 and re.fullmatch(r'\{"temp":-?[0-9]+\}', text) is not None, f"TGI grammar json: {text!r}")

    # streamed = whole; n = 2 each valid
    rf = {"type": "json_schema", "json_schema": {"name": "p", "schema": corpus[0][2]}}
    whole = client.chat.completions.create(model=served, messages=[{"role": "user", "content": "A person."}],
                                           response_format=rf, temperature=0, max_tokens=200).choices[0].message.content
    stream = client.chat.completions.create(model=served, messages=[{"role": "user", "content": "A person."}],
                                            response_format=rf, temperature=0, max_tokens=200, stream=True)
    streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    check(streamed == whole, f"streamed equals whole: {streamed!r} / {whole!r}")
    status, body = chat("Two people.", rf, temperature=1.0, n=2, seed=9)
    outs = [c["message"]["content"] for c in body.get("choices", [])]
    ok = status == 200 and len(outs) == 2
    for o in outs:
        try:
            jsonschema.validate(json.loads(o), corpus[0][2])
        except (ValueError, jsonschema.ValidationError):
            ok = False
    check(ok, f"n = 2: both valid ({outs})")

    # 4. hostile specs: 400s naming the field, others answered meanwhile
    def refused(body_extra, needle, api="/v1/completions"):
        t = time.time()
        status, body = srv.request("POST", api, {"prompt": "x", "max_tokens": 5, **body_extra}, timeout=60)
        msg = body["error"]["message"] if isinstance(body, dict) and "error" in body else str(body)
        check(status == 400 and needle in msg, f"400 in {time.time() - t:.2f} s for {list(body_extra)}: {msg[:150]}")

    huge = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "x" * 40} for i in range(15000)}}
    refused({"guided_json": huge}, "bytes")
    refused({"guided_regex": "(ab"}, "guided_regex")
    refused({"guided_grammar": 'root ::= root "a"'}, "allows no output")
    refused({"structured_outputs": {"json": {"type": "object"}, "regex": "a"}}, "give one")
    refused({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}, "extra": 1}}},
            "json_schema.extra")
    refused({"guided_choice": []}, "empty")
    deep = {"$defs": {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(1000)}, "$ref": "#/$defs/d0"}
    deep["$defs"]["d1000"] = {"type": "integer"}
    status, body = srv.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 5, "guided_json": deep}, timeout=60)
    check(status in (200, 400), f"1,000-deep $ref chain: answered {status}")

    # exponential regexes compile in the background while a plain request is answered
    answered = []

    def plain():
        t = time.time()
        answered.append((srv.normal_request_works(), time.time() - t))

    hostile = [threading.Thread(target=srv.request, args=("POST", "/v1/completions",
                                                          {"prompt": "x", "max_tokens": 5, "guided_regex": rx}),
                                kwargs={"timeout": 60})
               for rx in ["(a|aa|aaa)*(b|bb)*" * 8, "((a+)+)+b{1,40}" * 6, "[a-z]{1,200}[0-9]{1,200}" * 4]]
    for t in hostile:
        t.start()
    time.sleep(0.2)
    plain()
    for t in hostile:
        t.join()
    check(answered and answered[0][0], f"a plain request is answered while hostile regexes compile ({answered})")
    check(srv.normal_request_works(), "the server still answers afterwards")
    m = srv.metrics()
    check(m["llmctl_grammar_compiles_total"] >= 100 and m["llmctl_grammar_cache_hits_total"] >= 50 and
          m["llmctl_grammar_failures_total"] >= 3 and m["llmctl_jump_forward_tokens_total"] > 1000,
          "/metrics counts compiles, cache hits, failures and jump-forward tokens: " +
          str({k: v for k, v in m.items() if "grammar" in k or "jump" in k}))
finally:
    code = srv.stop()
    check(code == 0, f"serve exits cleanly ({code})")

# 5. reasoning: a grammar makes the model write a <think> block; --reasoning-parser splits it off,
# whole and streamed, and chat_template_kwargs reach the template (a key it may not set is a 400)
srv = Server(build, "--reasoning-parser", "think", model=GGUF)
try:
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0)
    served = client.models.list().data[0].id
    think = r"<think>[a-z]{2,12}( [a-z]{2,12}){0,3}</think>[A-Z][a-z ]{1,20}\."
    args = dict(model=served, messages=[{"role": "user", "content": "Think, then answer."}], temperature=0, max_tokens=80,
                extra_body={"guided_regex": think, "chat_template_kwargs": {"enable_thinking": True}})
    m = client.chat.completions.create(**args).choices[0].message
    reasoning = getattr(m, "reasoning_content", None) or (m.model_extra or {}).get("reasoning_content")
    check(re.fullmatch(r"[a-z]{2,12}( [a-z]{2,12}){0,3}", reasoning or "") is not None and "<think>" not in (m.content or "") and re.fullmatch(r"[A-Z][a-z ]{1,20}\.", m.content or ""),
          f"reasoning_content {reasoning!r}, content {m.content!r}")
    r_parts, c_parts = [], []
    for ch in client.chat.completions.create(stream=True, **args):
        if ch.choices:
            d = ch.choices[0].delta
            r_parts.append((d.model_extra or {}).get("reasoning_content") or "")
            c_parts.append(d.content or "")
    check("".join(r_parts) == reasoning and "".join(c_parts) == m.content,
          f"streamed reasoning and content equal the whole ({''.join(r_parts)!r}, {''.join(c_parts)!r})")
    status, body = srv.request("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                                "chat_template_kwargs": {"messages": []}})
    check(status == 400, f"chat_template_kwargs.messages is refused ({status})")
finally:
    code = srv.stop()
    check(code == 0, f"serve exits cleanly ({code})")
finish()
