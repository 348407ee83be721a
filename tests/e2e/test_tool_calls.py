#!/usr/bin/env python3
"""Tool calling through `llmctl serve` on the default model (its Q4_1 GGUF; SmolLM2's template knows
no tools, so the server offers them in the system prompt and reads Hermes <tool_call> calls), with
the official `openai` client, checked by Python's `jsonschema`:

1. tool_choice "required" and a named function: every call names a declared tool (the named one)
   and its arguments are valid under the tool's schema; finish_reason "tool_calls"; ids unique;
   parallel_tool_calls false gives one call.
2. The round trip: call -> tool message (tool_call_id) -> the model's answer, for required, named
   and auto.
3. Streaming: delta.tool_calls (index, id, name, then argument pieces) add up to the non-streamed
   calls of the same greedy request.
4. auto: whatever the model writes is either content or calls that follow the schemas.
5. /tokenize with `tools` counts the chat route's prompt tokens (more than without them); `tools`
   without `messages` is a 400.
6. Refusals: tool_choice without tools, a named function that is not declared, required with a
   response_format, malformed tool messages: 400s naming the field.
Usage: test_tool_calls.py BUILD_DIR
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import GGUF, Server, check, finish  # noqa: E402

try:
    import jsonschema
    import openai
except ImportError as e:
    print(f"SKIP: {e.name} is not installed (scripts/test.sh installs jsonschema and openai)")
    sys.exit(77)

build = sys.argv[1]
if not os.path.exists(GGUF):
    print(f"SKIP: the default model is not at {GGUF}")
    sys.exit(77)

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 40},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Get the local time in a timezone",
        "parameters": {"type": "object", "properties": {
            "timezone": {"type": "string", "maxLength": 40}}, "required": ["timezone"]}}},
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
USER = {"role": "user", "content": "What is the weather like in Paris today?"}

srv = Server(build, "--max-num-seqs", "8", model=GGUF)
client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0)
model = client.models.list().data[0].id


def valid_calls(calls, only=None):
    """Each call names a declared tool (`only` if given), with arguments valid under its schema."""
    for c in calls:
        if c.type != "function" or c.function.name not in SCHEMAS or (only and c.function.name != only):
            return f"call to {c.function.name!r}"
        try:
            jsonschema.validate(json.loads(c.function.arguments), SCHEMAS[c.function.name])
        except (json.JSONDecodeError, jsonschema.ValidationError) as e:
            return f"{c.function.name} arguments {c.function.arguments!r}: {str(e)[:200]}"
    return None


def ask(messages, **kw):
    return client.chat.completions.create(**{"model": model, "messages": messages, "tools": TOOLS, "max_tokens": 120,
                                             "temperature": 0, **kw})


try:
    # 1. required and named
    for label, choice, only in (("required", "required", None),
                                ("named", {"type": "function", "function": {"name": "get_time"}}, "get_time")):
        r = ask([USER], tool_choice=choice)
        ch = r.choices[0]
        calls = ch.message.tool_calls or []
        check(len(calls) >= 1, f"{label}: {len(calls)} call(s)")
        problem = valid_calls(calls, only)
        check(problem is None, f"{label}: the calls follow the tools' schemas ({problem or [c.function.arguments for c in calls]})")
        check(ch.finish_reason == "tool_calls", f"{label}: finish_reason {ch.finish_reason}")
        check(len({c.id for c in calls}) == len(calls) and all(c.id.startswith("call_") for c in calls),
              f"{label}: unique call ids {[c.id for c in calls]}")
        check(not ch.message.content, f"{label}: no content beside the calls ({ch.message.content!r})")
        if only:
            check(len(calls) == 1, f"{label}: exactly one call")

        # 2. the round trip: the call, its result, the answer
        history = [USER, {"role": "assistant", "content": None,
                          "tool_calls": [c.model_dump(exclude_none=True) for c in calls]}]
        for c in calls:
            history.append({"role": "tool", "tool_call_id": c.id, "content": json.dumps({"result": "sunny, 21 degrees"})})
        a = ask(history, tool_choice="none", max_tokens=40)
        check(a.choices[0].finish_reason in ("stop", "length") and a.choices[0].message.content,
              f"{label}: the answer after the tool result: {a.choices[0].message.content!r}")
        check(not a.choices[0].message.tool_calls, f"{label}: tool_choice none calls nothing")

    r = ask([USER], tool_choice="required", parallel_tool_calls=False)
    check(len(r.choices[0].message.tool_calls or []) == 1, "parallel_tool_calls false: one call")

    # 3. streaming equals the whole answer
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        whole = ask([USER], tool_choice=choice).choices[0]
        calls, finish_reason, content = {}, None, ""
        for chunk in ask([USER], tool_choice=choice, stream=True):
            for ch in chunk.choices:
                content += ch.delta.content or ""
                finish_reason = ch.finish_reason or finish_reason
                for d in ch.delta.tool_calls or []:
                    if d.index not in calls:
                        check(bool(d.id) and bool(d.function.name), f"stream: call {d.index} opens with its id and name")
                        calls[d.index] = {"id": d.id, "name": d.function.name, "arguments": ""}
                    calls[d.index]["arguments"] += d.function.arguments or ""
        got = [(c["name"], c["arguments"]) for _, c in sorted(calls.items())]
        want = [(c.function.name, c.function.arguments) for c in whole.message.tool_calls or []]
        check(got == want and got, f"stream {choice if isinstance(choice, str) else 'named'}: deltas add up to the whole calls {got}")
        check(finish_reason == "tool_calls" and not content, f"stream: finish_reason {finish_reason}, content {content!r}")

    # 4. auto: content, or calls that follow the schemas; then the round trip
    for q in ("What is the weather like in Paris today? Use a tool.", "Say hello."):
        r = ask([{"role": "user", "content": q}], tool_choice="auto")
        ch = r.choices[0]
        calls = ch.message.tool_calls or []
        problem = valid_calls(calls)
        check(problem is None and (calls or ch.message.content),
              f"auto ({q!r}): {len(calls)} call(s), content {ch.message.content!r} {problem or ''}")
        if calls:
            check(ch.finish_reason == "tool_calls", f"auto: finish_reason {ch.finish_reason}")

    # 5. /tokenize renders tools (and chat_template_kwargs) as the chat route does: same prompt tokens
    r = ask([USER], max_tokens=1)
    status, tk = srv.request("POST", "/tokenize", {"messages": [USER], "tools": TOOLS})
    _, plain = srv.request("POST", "/tokenize", {"messages": [USER]})
    check(status == 200 and tk["count"] == r.usage.prompt_tokens and tk["count"] > plain["count"],
          f"/tokenize with tools counts the chat route's prompt tokens ({tk.get('count')} vs {r.usage.prompt_tokens}; "
          f"{plain.get('count')} without tools)")
    status, resp = srv.request("POST", "/tokenize", {"prompt": "hi", "tools": TOOLS})
    check(status == 400 and resp.get("error", {}).get("param") == "tools", f"/tokenize: tools without messages -> {status}")

    # 6. refusals
    def refused(body, param, what):
        status, resp = srv.request("POST", "/v1/chat/completions", body)
        got = resp.get("error", {}).get("param") if isinstance(resp, dict) else None
        check(status == 400 and got == param, f"refused: {what} -> {status} param={got}")

    refused({"messages": [USER], "tool_choice": "required"}, "tool_choice", "required without tools")
    refused({"messages": [USER], "tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "tool_choice", "a named function not declared")
    refused({"messages": [USER], "tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}},
            "tool_choice", "required with a response_format")
    refused({"messages": [USER, {"role": "tool", "content": "x"}], "tools": TOOLS}, "messages", "a tool message without tool_call_id")
    refused({"messages": [USER, {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{"}}]}]},
            "messages", "a call whose arguments are not JSON")
    refused({"messages": [USER], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "nope"}}}}}],
             "tool_choice": "required"}, "tools", "a tool schema the grammar engine refuses")
    check(srv.normal_request_works(), "the server still answers")
finally:
    srv.stop()
finish()
