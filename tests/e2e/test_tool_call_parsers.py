#!/usr/bin/env python3
"""Tool-call parsers against real chat templates (llama.cpp's models/templates/*.jinja): each
template renders an assistant turn with tool_calls (llmctl_render, the same Jinja sandbox `serve`
uses), and the text the template wrote for that turn is read back by the parser `serve` picks for
that template (llmctl_tool_calls --template). The calls read back must be exactly the calls
rendered: same names, same arguments (as JSON values, and in the same key order), no content
left over (a reasoning template's <think> block is taken off first, as the server's reasoning
parser does); and the stream deltas (the text fed 1 and 7 bytes at a time) must add up to the same
content and arguments. Then the same templates through `serve` on a tiny random model (tiny_qwen3,
byte vocabulary): tool_choice required and named give calls that parse and follow the schemas,
whole and streamed. Exits 77 without llama.cpp's source (scripts/fetch-llama-cpp.sh).
Usage: test_tool_call_parsers.py BUILD_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

build = sys.argv[1]
home = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
TEMPLATES = os.path.join(os.environ.get("LLAMA_CPP_DIR", os.path.join(home, "llama.cpp")), "src", "models", "templates")
if not os.path.isdir(TEMPLATES):
    print(f"SKIP: no templates under {TEMPLATES} (scripts/fetch-llama-cpp.sh)")
    sys.exit(77)

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer"}, "detail": {"type": "boolean"}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "filters": {"type": "object"}, "limit": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "string"}}}}}},
]
# Arguments as a client sends them (a JSON text each); the key order is not alphabetical on purpose.
CALL_A = ("get_weather", '{"city": "Zürich \\"old town\\"", "unit": "celsius", "days": 3, "detail": true}')
CALL_B = ("search", '{"query": "a < b && c > d", "limit": 2.5, "tags": ["x", "y z"], "filters": {"since": 2024, "lang": "de"}}')

# template file -> (parser it must pick, whether it renders several calls in one turn)
CASES = {
    "Qwen-Qwen3-0.6B": ("hermes", True),
    "Qwen-Qwen2.5-7B-Instruct": ("hermes", True),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": ("hermes", True),
    "meta-llama-Llama-3.1-8B-Instruct": ("llama3_json", False),
    "meta-llama-Llama-3.2-3B-Instruct": ("llama3_json", False),
    "meta-llama-Llama-3.3-70B-Instruct": ("llama3_json", False),
    "mistralai-Mistral-Nemo-Instruct-2407": ("mistral_v3", True),
    "Mistral-Small-3.2-24B-Instruct-2506": ("mistral", True),
    "unsloth-mistral-Devstral-Small-2507": ("mistral", True),
    "Qwen3-Coder": ("qwen3_coder", True),
}
END_MARKERS = ["<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>", "<|endoftext|>"]
IDS = ["abcDEF123", "xyz789QRS"]  # Mistral's templates want 9 letters or digits


def render(tmp, template, messages, add_generation_prompt):
    ctx = {"messages": messages, "tools": TOOLS, "documents": None, "add_generation_prompt": add_generation_prompt,
           "bos_token": "<s>", "eos_token": "</s>"}
    path = os.path.join(tmp, "ctx.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(ctx, f, ensure_ascii=False)
    r = subprocess.run([os.path.join(build, "llmctl_render"), template, path], capture_output=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.decode("utf-8", "replace"))
    return r.stdout.decode("utf-8")


def assistant_text(tmp, template, calls):
    """The text the template writes for an assistant turn with these calls (what the model would generate)."""
    user = {"role": "user", "content": "Weather in Zürich, and search the news."}
    # As the server gives them to templates: arguments as objects, in the client's key order.
    tool_calls = [{"id": IDS[i], "type": "function",
                   "function": {"name": n, "arguments": json.loads(a)}} for i, (n, a) in enumerate(calls)]
    prefix = render(tmp, template, [user], True)
    full = render(tmp, template, [user, {"role": "assistant", "content": "", "tool_calls": tool_calls}], False)
    if not full.startswith(prefix):  # e.g. a template that writes the generation prompt differently
        common = os.path.commonprefix([prefix, full])
        prefix = prefix[: len(common)]
    text = full[len(prefix):].rstrip()
    for m in END_MARKERS:
        if text.endswith(m):
            text = text[: -len(m)].rstrip()
    # A reasoning model's (empty) <think> block: the server's reasoning parser takes it off first.
    if text.startswith("<think>") and "</think>" in text:
        text = text.split("</think>", 1)[1]
    return text


def parse(tmp, template, text, chunk):
    tools = os.path.join(tmp, "tools.json")
    with open(tools, "w") as f:
        json.dump(TOOLS, f)
    path = os.path.join(tmp, "text.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    r = subprocess.run([os.path.join(build, "llmctl_tool_calls"), "--template", template, tools, path, str(chunk)],
                       capture_output=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.decode("utf-8", "replace"))
    return json.loads(r.stdout)


def ordered(text):
    return json.loads(text, object_pairs_hook=list)


failures, checked = [], 0
with tempfile.TemporaryDirectory() as tmp:
    for name, (want_format, several) in CASES.items():
        template = os.path.join(TEMPLATES, name + ".jinja")
        if not os.path.exists(template):
            failures.append(f"{name}: template missing")
            continue
        for calls in ([CALL_A], [CALL_A, CALL_B]) if several else ([CALL_A],):
            label = f"{name} ({len(calls)} call{'s' if len(calls) > 1 else ''})"
            try:
                text = assistant_text(tmp, template, calls)
                results = [parse(tmp, template, text, chunk) for chunk in (1, 7)]
            except RuntimeError as e:
                failures.append(f"{label}: {str(e)[-300:]}")
                continue
            got = results[0]
            problems = []
            if got["format"] != want_format:
                problems.append(f"parser {got['format']}, expected {want_format}")
            names = [c["name"] for c in got["calls"]]
            if names != [n for n, _ in calls]:
                problems.append(f"calls {names}")
            else:
                for (n, a), c in zip(calls, got["calls"]):
                    try:
                        if ordered(c["arguments"]) != ordered(a):
                            problems.append(f"{n} arguments {c['arguments']!r}, rendered {a!r}")
                    except json.JSONDecodeError:
                        problems.append(f"{n} arguments are not JSON: {c['arguments']!r}")
            if got["content"].strip():
                problems.append(f"content left over: {got['content']!r}")
            for r in results:
                if r["streamed"] != {"content": got["content"], "calls": got["calls"]}:
                    problems.append(f"stream deltas add up to {r['streamed']}, not to the whole parse")
            checked += 1
            if problems:
                failures.append(f"{label}: " + "; ".join(problems) + f"\n    text: {text!r}")
            else:
                print(f"ok {label}: {got['format']}")
print(f"{checked - len([f for f in failures if 'template missing' not in f])}/{checked} renders read back exactly")

# Through `serve`: a tiny random model (tests/golden/families/tiny_qwen3, byte vocabulary) carrying
# each real template. The template gets the tools itself (it handles them), the parser is the
# template's, and tool_choice "required" / named make even random weights write calls that parse
# and follow the schemas (enums, bounded integers, booleans: every walk ends).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import Server  # noqa: E402

TINY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../golden/families/tiny_qwen3")
SERVE_TOOLS = [
    {"type": "function", "function": {"name": "set_mode", "parameters": {"type": "object", "properties": {
        "mode": {"enum": ["on", "off"]}, "level": {"type": "integer", "minimum": 0, "maximum": 99},
        "force": {"type": "boolean"}}, "required": ["mode", "level"]}}},
    {"type": "function", "function": {"name": "reset", "parameters": {"type": "object", "properties": {}}}},
]
SERVED = {"Qwen-Qwen3-0.6B": "hermes", "meta-llama-Llama-3.1-8B-Instruct": "llama3_json",
          "Mistral-Small-3.2-24B-Instruct-2506": "mistral", "Qwen3-Coder": "qwen3_coder"}
served_ok = 0
for name in SERVED:
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model")
        shutil.copytree(TINY, model)
        cfg_path = os.path.join(model, "tokenizer_config.json")
        cfg = json.load(open(cfg_path))
        cfg["chat_template"] = open(os.path.join(TEMPLATES, name + ".jinja"), encoding="utf-8").read()
        json.dump(cfg, open(cfg_path, "w"))
        # The templates' tool prompts run to thousands of bytes (tokens, here): room for them.
        mcfg_path = os.path.join(model, "config.json")
        mcfg = json.load(open(mcfg_path))
        mcfg["max_position_embeddings"] = 4096
        json.dump(mcfg, open(mcfg_path, "w"))
        srv = Server(build, "--max-num-seqs", "4", model=model)
        try:
            problems = []
            for choice in ("required", {"type": "function", "function": {"name": "set_mode"}}):
                for stream in (False, True):
                    body = {"messages": [{"role": "user", "content": "Turn it on."}], "tools": SERVE_TOOLS,
                            "tool_choice": choice, "max_tokens": 400, "temperature": 0}
                    if not stream:
                        status, r = srv.request("POST", "/v1/chat/completions", body)
                        if status != 200:
                            problems.append(f"{status}: {r}")
                            continue
                        ch = r["choices"][0]
                        calls = [(c["function"]["name"], c["function"]["arguments"]) for c in ch["message"].get("tool_calls") or []]
                        reason = ch["finish_reason"]
                    else:
                        status, text = srv.request("POST", "/v1/chat/completions", dict(body, stream=True))
                        if status != 200:
                            problems.append(f"stream {status}: {text}")
                            continue
                        acc, reason = {}, None
                        for line in text.splitlines():
                            if not line.startswith("data: {"):
                                continue
                            for ch in json.loads(line[6:])["choices"]:
                                reason = ch.get("finish_reason") or reason
                                for d in ch["delta"].get("tool_calls") or []:
                                    a = acc.setdefault(d["index"], ["", ""])
                                    a[0] += d["function"].get("name") or ""
                                    a[1] += d["function"].get("arguments") or ""
                        calls = [tuple(v) for _, v in sorted(acc.items())]
                    where = f"{'named' if isinstance(choice, dict) else choice}{' stream' if stream else ''}"
                    if reason != "tool_calls" or not calls:
                        problems.append(f"{where}: finish_reason {reason}, {len(calls)} calls")
                    for n, a in calls:
                        try:
                            args = json.loads(a)
                        except json.JSONDecodeError:
                            problems.append(f"{where}: {n} arguments not JSON: {a!r}")
                            continue
                        if isinstance(choice, dict) and n != "set_mode":
                            problems.append(f"{where}: called {n}")
                        if n == "set_mode" and not (args.get("mode") in ("on", "off") and isinstance(args.get("level"), int)
                                                    and 0 <= args["level"] <= 99 and set(args) <= {"mode", "level", "force"}):
                            problems.append(f"{where}: set_mode arguments {a!r}")
                        if n == "reset" and args != {}:
                            problems.append(f"{where}: reset arguments {a!r}")
        finally:
            srv.stop()
        if problems:
            failures.append(f"serve with {name}: " + "; ".join(problems))
        else:
            served_ok += 1
            print(f"ok serve with {name}: required and named calls parse and follow the schemas, whole and streamed")
print(f"{served_ok}/{len(SERVED)} templates served with tool calls")
for f in failures:
    print("FAIL", f)
sys.exit(1 if failures else 0)
