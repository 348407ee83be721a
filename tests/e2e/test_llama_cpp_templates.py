#!/usr/bin/env python3
"""The real chat templates in llama.cpp's source (models/templates/*.jinja: current models' own,
many with tools and reasoning) rendered by llmctl's Jinja sandbox (llmctl_render) and by Python
jinja2 set up as transformers sets it up (tests/golden/chat_templates/make_renders.py's
environment), on the same contexts: one turn, a system prompt and several turns, and a tool call
with its result (tools and documents none when absent, as transformers passes them). Each render
must be identical, or both must fail (a template's raise_exception message identical). Reports
k/N per context; fails on any difference outside KNOWN, the templates listed with the feature the
sandbox refuses. Exits 77 without llama.cpp's source (scripts/fetch-llama-cpp.sh) or jinja2.
Usage: test_llama_cpp_templates.py BUILD_DIR
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

build = sys.argv[1]
src = os.environ.get("LLMCTL_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
home = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
TEMPLATES = os.path.join(os.environ.get("LLAMA_CPP_DIR", os.path.join(home, "llama.cpp")), "src", "models", "templates")
try:
    import jinja2  # noqa: F401
except ImportError:
    print("SKIP: jinja2 is not installed (pip install jinja2)")
    sys.exit(77)
files = sorted(glob.glob(os.path.join(TEMPLATES, "*.jinja")))
if not files:
    print(f"SKIP: no templates under {TEMPLATES} (scripts/fetch-llama-cpp.sh)")
    sys.exit(77)
sys.path.insert(0, os.path.join(src, "tests/golden/chat_templates"))
import make_renders as ref  # noqa: E402

# Templates whose render needs a feature the sandbox refuses (by name, with the feature).
KNOWN = {
    "tools/llama-cpp-deepseek-r1": "jinja2's map() yields a generator, which its tojson cannot serialize (a TypeError); "
                                   "llmctl's map() yields a list, so the template renders",
}
CONTEXTS = {
    "one_turn": ref.CONVERSATIONS["one_turn"],
    "system_multi_turn": ref.CONVERSATIONS["system_multi_turn"] + [ref.U2],
    "tools": ref.TOOL_CONVERSATION,
}
TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}
failures, counts = [], {}
with tempfile.TemporaryDirectory() as tmp:
    for ctx_name, messages in CONTEXTS.items():
        ok = 0
        for f in files:
            name = os.path.basename(f)[: -len(".jinja")]
            source = open(f, encoding="utf-8").read()
            ctx = {"messages": messages, "tools": ref.TOOLS if ctx_name == "tools" else None, "documents": None,
                   "add_generation_prompt": True, **TOKENS}
            want = ref.render(source, ctx)
            path = os.path.join(tmp, "ctx.json")
            with open(path, "w") as fh:
                json.dump(ctx, fh, ensure_ascii=False)
            r = subprocess.run([os.path.join(build, "llmctl_render"), f, path], capture_output=True, timeout=60)
            got_err = r.returncode != 0
            err = r.stderr.decode("utf-8", "replace").strip()
            if "expected" in want:
                same = not got_err and r.stdout.decode("utf-8", "replace") == want["expected"]
                why = err[-200:] if got_err else "output differs"
            else:
                kind = want["error"]["type"]
                # raise_exception's message passes through; the sandbox's own refusals (list.append is
                # "unsafe" in transformers' immutable sandbox) need only be refusals in llmctl too
                own = kind == "TemplateError" and "is unsafe" not in want["error"]["message"]
                same = got_err and (not own or want["error"]["message"] in err)
                why = f"jinja2 {kind}: {want['error']['message'][:100]}; llmctl: " + (err[-100:] if got_err else "rendered")
            if same:
                ok += 1
            elif f"{ctx_name}/{name}" not in KNOWN:
                failures.append(f"{ctx_name}/{name}: {why}")
        counts[ctx_name] = ok
for ctx_name, ok in counts.items():
    print(f"{ctx_name}: {ok}/{len(files)} templates render as jinja2 renders them")
for k, v in KNOWN.items():
    print(f"known: {k}: {v}")
for msg in failures:
    print("FAIL", msg)
sys.exit(1 if failures else 0)
