#!/usr/bin/env python3
"""Every field of every route against a table of wrong-typed and out-of-range values.

For each route (OpenAI completions and chat, TGI generate and generate_stream, tokenize,
detokenize) and each field it accepts, a valid base request gets that field replaced by each
value of a table (strings, negative/zero/fractional/huge numbers, booleans, null, lists,
objects, control characters, deep-ish nesting). Whatever the value, the answer is 200 or a 4xx
with an OpenAI-shaped JSON error body, never a 5xx, a hang or a crash; where the value is wrong by
type for the field, it must be a 400 whose message or param names the field. The server answers a
normal request afterwards, and the number of distinct inputs sent is reported (at least 200).
Usage: test_server_bad_fields.py BUILD_DIR
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import Server, check, finish, require_model  # noqa: E402

build = sys.argv[1]
require_model()


VALUES = ["text", "", -1, 0, 1.5, -2.5, 10 ** 20, -(10 ** 20), True, None, [], {}, [None], {"a": [1]}, [[[[1]]]],
          "\u0000\u001f", [1, "a"], 1e308]

# field -> kind; the kind says which values are wrong by type (and so must be a 400 naming it)
INT = {"text", "", 1.5, -2.5, True, "[]", "{}", "[None]", "{'a': [1]}", "[[[[1]]]]", "\x00\x1f", "[1, 'a']", 1e308}
NUM = {"text", "", True, "[]", "{}", "[None]", "{'a': [1]}", "[[[[1]]]]", "\x00\x1f", "[1, 'a']"}
BOOL = {"text", "", -1, 1.5, -2.5, 10 ** 20, -(10 ** 20), "[]", "{}", "[None]", "{'a': [1]}", "[[[[1]]]]", "\x00\x1f",
        "[1, 'a']", 1e308}
OBJ = {"text", "", -1, 0, 1.5, -2.5, 10 ** 20, -(10 ** 20), True, "[]", "[None]", "[[[[1]]]]", "\x00\x1f", "[1, 'a']", 1e308}
STOP = {-1, 0, 1.5, -2.5, 10 ** 20, -(10 ** 20), True, "{}", "[None]", "{'a': [1]}", "[[[[1]]]]", "[1, 'a']", 1e308}
ANY = set()

COMMON = {"temperature": NUM, "top_p": NUM, "top_k": INT, "min_p": NUM, "n": INT, "stop": STOP, "stop_token_ids": OBJ - {"[]"},
          "seed": INT, "presence_penalty": NUM, "frequency_penalty": NUM, "repetition_penalty": NUM, "logit_bias": OBJ,
          "min_tokens": INT, "ignore_eos": BOOL, "max_tokens": INT, "stream": BOOL, "user": ANY, "model": ANY}
ROUTES = [
    ("/v1/completions", {"prompt": "Hi", "max_tokens": 1}, None,
     dict(COMMON, prompt=ANY, best_of=INT, logprobs=INT, echo=BOOL, stream_options=ANY, suffix=ANY)),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}, None,
     dict(COMMON, messages=ANY, max_completion_tokens=INT, logprobs=BOOL, top_logprobs=INT, stream_options=ANY,
          response_format=OBJ, structured_outputs=OBJ, guided_choice=OBJ, guided_json=OBJ - {True},
          tools=ANY)),
    ("/generate", {"inputs": "Hi", "parameters": {"max_new_tokens": 1}}, "parameters",
     {"max_new_tokens": INT, "temperature": NUM, "top_k": INT, "top_p": NUM, "repetition_penalty": NUM,
      "frequency_penalty": NUM, "seed": INT, "stop": ANY, "do_sample": BOOL, "details": BOOL, "return_full_text": BOOL,
      "decoder_input_details": BOOL, "watermark": ANY, "best_of": ANY, "grammar": OBJ}),
    ("/generate_stream", {"inputs": "Hi", "parameters": {"max_new_tokens": 1}}, "parameters",
     {"max_new_tokens": INT, "temperature": NUM, "seed": INT, "do_sample": BOOL, "details": BOOL}),
    ("/generate", {"inputs": "Hi", "parameters": {"max_new_tokens": 1}}, None, {"inputs": ANY, "parameters": OBJ, "stream": ANY}),
    ("/tokenize", {"prompt": "Hi"}, None, {"prompt": ANY, "add_special_tokens": BOOL}),
    ("/tokenize", {"messages": [{"role": "user", "content": "Hi"}]}, None, {"messages": ANY, "add_generation_prompt": BOOL}),
    ("/detokenize", {"tokens": [1, 2]}, None, {"tokens": ANY}),
]


# A null max_tokens is "until the context ends" (as in vLLM); with random sampling that can be thousands of
# tokens at the model's own 8192, so the context is bounded to keep every answer within the timeout.
srv = Server(build, "--max-num-seqs", "8", "--max-model-len", "512")
sent = set()
counts = {}
try:
    for path, base, nest, fields in ROUTES:
        for field, wrong in fields.items():
            for value in VALUES:
                body = json.loads(json.dumps(base))
                (body[nest] if nest else body)[field] = value
                text = json.dumps(body)
                sent.add((path, text))
                try:
                    status, resp = srv.request("POST", path, text, timeout=60)
                except TimeoutError:
                    check(False, f"{path} {text[:160]}: no answer within 60 s", quiet=True)
                    continue
                counts[status] = counts.get(status, 0) + 1
                what = f"{path} {nest + '.' if nest else ''}{field}={json.dumps(value)[:40]}: {status}"
                if status >= 500 or status not in (200, 400, 404, 413, 422):
                    check(False, what + f" {str(resp)[:160]}", quiet=True)
                    continue
                if status != 200:
                    ok = isinstance(resp, dict) and isinstance(resp.get("error"), dict) and resp["error"].get("message")
                    check(ok, what + " without an OpenAI error body", quiet=True)
                k = value if not isinstance(value, (list, dict)) else repr(value)
                if k in wrong and not (isinstance(value, bool) and value is not True):
                    named = status == 400 and (field in resp["error"]["message"] or resp["error"].get("param") == field)
                    check(named, what + f" (wrong type: a 400 naming '{field}' expected) {str(resp)[:160]}", quiet=True)
    status, body = srv.request("POST", "/v1/completions", {"prompt": "Hello", "max_tokens": 2, "temperature": 0})
    check(status == 200 and body["usage"]["completion_tokens"] == 2, "a normal request after the table")
finally:
    rc = srv.stop()
check(rc == 0, f"SIGINT: exit code {rc}")
check(len(sent) >= 200, f"{len(sent)} distinct inputs")
print(f"{len(sent)} distinct inputs over {len(ROUTES)} route shapes; answers by status: {dict(sorted(counts.items()))}")
finish()
