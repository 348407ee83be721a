#!/usr/bin/env python3
"""Renders the chat templates under templates/ and a table of expression edge cases with Python
jinja2, set up the way transformers renders chat templates, and writes renders.json: the expected
output (or expected error) per case. tests/unit/test_chat_template.cpp replays every case through
llmctl's Jinja interpreter and compares byte for byte.

    python3 tests/golden/chat_templates/make_renders.py   # needs jinja2 (3.1.x)
"""
import json
import os
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))


# --- the environment transformers builds (transformers/utils/chat_template_utils.py) -----------
def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers overrides jinja2's tojson, which would HTML-escape
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


class AssistantTracker(Extension):
    """transformers' {% generation %} tag; it renders its body unchanged (the real one also records
    where assistant text went, for return_assistant_tokens_mask)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


ENV = ImmutableSandboxedEnvironment(
    trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, "jinja2.ext.loopcontrols"]
)
ENV.filters["tojson"] = tojson
ENV.globals["raise_exception"] = raise_exception
ENV.globals["strftime_now"] = strftime_now


def render(source, context):
    try:
        return {"expected": ENV.from_string(source).render(**context)}
    except jinja2.exceptions.TemplateSyntaxError as e:
        return {"error": {"type": "TemplateSyntaxError", "message": e.message, "lineno": e.lineno}}
    except jinja2.exceptions.UndefinedError as e:
        return {"error": {"type": "UndefinedError", "message": str(e)}}
    except jinja2.exceptions.TemplateError as e:  # raise_exception()
        return {"error": {"type": "TemplateError", "message": str(e)}}
    except Exception as e:  # TypeError, ZeroDivisionError, ... from Python operators
        return {"error": {"type": type(e).__name__, "message": str(e)}}


# --- conversations --------------------------------------------------------------------------------
SYS = {"role": "system", "content": "You are a helpful assistant."}
U1 = {"role": "user", "content": "Hello! How are you?"}
A1 = {"role": "assistant", "content": "I'm fine, thanks. And you?"}
U2 = {"role": "user", "content": "What is 2 + 2?"}
A2 = {"role": "assistant", "content": "2 + 2 = 4."}

CONVERSATIONS = {
    "one_turn": [U1],
    "system_one_turn": [SYS, U1],
    "multi_turn": [U1, A1, U2],
    "system_multi_turn": [SYS, U1, A1, U2, A2],
    "unicode": [
        {"role": "system", "content": "Réponds en français, s'il te plaît. 🤖"},
        {"role": "user", "content": "日本語は話せますか？ Ünïcödé ✓ — “quotes” 👩‍💻🎉"},
        {"role": "assistant", "content": "はい、少し。 Ça va 😊"},
        {"role": "user", "content": "Emoji only: 🐍🦀 \u00a0nbsp\u200bzwsp"},
    ],
    "tricky_content": [
        {"role": "system", "content": "  Leading and trailing spaces  \n\n"},
        {"role": "user", "content": "Quotes ' and \" and `backticks`,\nnewlines\n\n\tand a tab, braces {{ not_a_var }} {% if %} {# c #}, backslash \\n \\"},
        {"role": "assistant", "content": "\n  <b>html</b> & {\"json\": [1, 2]}  \n"},
        {"role": "user", "content": "</s> <|im_end|> [INST] special-looking text"},
    ],
    "bad_alternation": [U1, {"role": "user", "content": "Second user message in a row."}],
    "empty_content": [{"role": "user", "content": ""}],
    "reasoning": [
        U1,
        {"role": "assistant", "content": "<think>\nThe user greets me.\n</think>\n\nHi there!"},
        U2,
        {"role": "assistant", "content": "<think>\nSimple sum.\n</think>\n\n4"},
    ],
}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city, e.g. \"Paris\".",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    }
]
TOOL_CONVERSATION = [
    SYS,
    {"role": "user", "content": "What's the weather in Zürich?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}}]},
    {"role": "tool", "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"},
]

# Special tokens as the model's tokenizer_config passes them.
TEMPLATES = {
    "smollm2": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
    "chatml": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
    "chatml_indented": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
    "llama2": {"bos_token": "<s>", "eos_token": "</s>"},
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "llama31": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "mistral_v01": {"bos_token": "<s>", "eos_token": "</s>"},
    "mistral_v03": {"bos_token": "<s>", "eos_token": "</s>"},
    "gemma": {"bos_token": "<bos>", "eos_token": "<eos>"},
    "phi3": {"bos_token": "<s>", "eos_token": "<|endoftext|>"},
    "zephyr": {"bos_token": "<s>", "eos_token": "</s>"},
    "qwen25": {"bos_token": None, "eos_token": "<|im_end|>"},
    "qwen3_style": {"bos_token": None, "eos_token": "<|im_end|>"},
}


def template_cases():
    cases = []
    for name, tokens in TEMPLATES.items():
        for conv_name, messages in CONVERSATIONS.items():
            for gen in (True, False):
                # transformers always passes tools and documents (None when absent)
                ctx = {"messages": messages, "tools": None, "documents": None, "add_generation_prompt": gen, **tokens}
                cases.append({"name": f"{name}/{conv_name}/gen={gen}", "template": name, "context": ctx})
        if name in ("qwen25", "llama31"):
            for gen in (True, False):
                ctx = {"messages": TOOL_CONVERSATION, "tools": TOOLS, "documents": None, "add_generation_prompt": gen, **tokens}
                cases.append({"name": f"{name}/tools/gen={gen}", "template": name, "context": ctx})
        if name == "llama31":
            ctx = {"messages": [SYS, U1], "tools": TOOLS, "tools_in_user_message": False, "date_string": "01 Jan 2025",
                   "builtin_tools": ["brave_search", "code_interpreter"], "add_generation_prompt": True, **tokens}
            cases.append({"name": "llama31/tools_in_system/builtin", "template": name, "context": ctx})
        if name == "qwen3_style":
            ctx = {"messages": CONVERSATIONS["reasoning"][:3], "enable_thinking": False, "add_generation_prompt": True, **tokens}
            cases.append({"name": "qwen3_style/no_thinking", "template": name, "context": ctx})
    return cases


# --- expression edge cases (inline sources, one shared context) ---------------------------------
EXPR_CONTEXT = {
    "x": [1, 2, 3], "e": [], "s": "Hello World", "u": "héllo wörld ünïcode 🎉", "f": 0.1, "big": 1e20, "n": None,
    "t": True, "d": {"b": 1, "a": [1.5, None, True], "items": "shadowed"}, "nested": {"k": {"j": [10, 20]}},
    "text": "  padded \n", "pairs": [["a", 1], ["b", 2]],
    "msgs": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
}

EXPRESSIONS = [
    # whitespace control, trim_blocks, lstrip_blocks
    "a  {{- 1 -}}  b",
    "a\n  {%- if true -%}\n  b\n  {%- endif -%}\n c",
    "{% for i in x %}\n  {{ i }}\n{% endfor %}\n",
    "  {# comment #}\nX",
    "  {%+ if true %}y{% endif %}",
    "{% if true +%}\nkeep{% endif %}",
    "line1\n    {% if true %}\n    inner\n    {% endif %}\nline2\n",
    "{{ 'a' }}\n{{ 'b' }}\n",
    "{{ 'a' }}\n\n",
    "{% raw %}{{ not parsed }} {% if %}{% endraw %}",
    "  {%- raw -%}  x  {%- endraw -%}  y",
    "x\r\ny\rz",
    "\t{% if true %}tab{% endif %}",
    "{{ 1 }}  {% if true %}x{% endif %}",
    "  {{ 1 }}\n",
    "{%- if true %}\n\nA{% endif %}",
    "{#- c -#}  \n  Z",
    "A\n  {# c #}  \nB",
    "A {% if true %}  \nB{% endif %}",
    "{% for i in x %}{{ i }},\n{%- endfor %}",
    "{% if true %}\r\nwin{% endif %}",
    "{%- for i in [1, 2] +%}\n  {{- 'v' }} \n{%+ endfor -%} x",
    " \n {#+ c -#} \n{% if true -%}\t{%+ else %}{% endif +%}\n\n",
    "{% for i in x %}\n    {% if loop.first %}\n    first\n    {% else %}\n    other\n    {% endif %}\n{% endfor %}",

    # loops
    "{% for i in x %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }};{% endfor %}",
    "{% for i in x %}{% for j in 'ab' %}{{ loop.index }}{{ j }}{% endfor %}{{ loop.index }}|{% endfor %}",
    "{% for i in x %}{{ loop.previtem }}<{{ i }}>{{ loop.nextitem }} {% endfor %}",
    "{% for i in x %}{{ loop.cycle('odd', 'even') }} {% endfor %}",
    "{% for i in e %}{{ i }}{% else %}empty{% endfor %}",
    "{% for i in x if i != 2 %}{{ i }}{{ loop.last }}{% endfor %}",
    "{% for c in 'añ🎉' %}[{{ c }}]{% endfor %}",
    "{% for k in d %}{{ k }} {% endfor %}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
    "{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}",
    "{% for a, b in pairs %}{{ a }}{{ b }}{% endfor %}",
    "{% set c = 0 %}{% for i in x %}{% set c = c + i %}{{ c }}{% endfor %}/{{ c }}",
    "{% set ns = namespace(total=0, seen=[]) %}{% for i in x %}{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }}",
    "{% for i in x %}{% if i == 2 %}{% continue %}{% endif %}{{ i }}{% if i == 3 %}{% break %}{% endif %}{% endfor %}",
    "{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(1, 10, 4) %}{{ i }}{% endfor %}",
    "{% for m in msgs %}{% if m.role == 'user' %}{% set last_user = m.content %}{% endif %}{% endfor %}[{{ last_user }}]",
    # slices and subscripts
    "{{ x[1:] }} {{ x[:-1] }} {{ x[::2] }} {{ x[::-1] }} {{ x[-1] }} {{ x[1:2] }} {{ x[5:] }} {{ x[-10:1] }}",
    "{{ s[1:3] }} {{ s[::-1] }} {{ u[::-1] }} {{ u[0] }} {{ u[-1] }} {{ u|length }} {{ u[2:5] }}",
    "{{ x[5] is defined }} {{ x[-4] is defined }} {{ e[0] is defined }} {{ x.0 }} {{ nested.k.j.1 }} {{ nested['k']['j'][-1] }}",
    "{{ msgs[0]['role'] }} {{ msgs[1].content }} {{ msgs[-1]['content'] }} {{ (msgs|last).role }}",
    "{{ d.items is callable }}|{{ d['items'] }}|{{ d.b }}",
    # str() formatting
    "{{ [1, 'a', None, True, 1.5, {'k': (1,)}] }}",
    "{{ (1, 2) }} {{ 1, 2 }} {{ () }} {{ (1,) }}",
    "{{ f }} {{ big }} {{ 1e-5 }} {{ 1/3 }} {{ 10/2 }} {{ 2.0*3 }} {{ -0.0 }} {{ 1e16 }} {{ 1e15 }} {{ 123456789012345678 }} {{ 0.0001 }} {{ 1.5e300 * 1 }}",
    "{{ n }} {{ t }} {{ false }} {{ none }} {{ True }}",
    "{{ ['a\\nb', \"it's\", 'say \"hi\"', \"both ' \\\"\", 'back\\\\slash'] }}",
    "{{ ['é', '🎉', '\\t', '\\x01', '\\u00a0', '\\u200b'] }}",
    "{{ d }} {{ msgs[0] }} {{ {} }} {{ [] }}",
    # tojson (transformers: json.dumps, ensure_ascii=False)
    "{{ d|tojson }} {{ msgs|tojson }}",
    "{{ u|tojson }} {{ 'q \" b \\\\ n \\n t \\t c \\x01 d \\x7f'|tojson }}",
    "{{ x|tojson(indent=2) }}\n{{ {}|tojson(indent=2) }} {{ []|tojson(indent=2) }}\n{{ {'a': {}, 'b': [1, {'c': none}]}|tojson(indent=4) }}",
    "{{ d|tojson(sort_keys=true) }} {{ 1.0|tojson }} {{ none|tojson }} {{ f|tojson }} {{ big|tojson }} {{ true|tojson }}",
    "{{ u|tojson(ensure_ascii=true) }} {{ d|tojson(separators=(',', ':')) }} {{ (1, 2)|tojson }}",
    # filters
    "[{{ text|trim }}] [{{ '--a--'|trim('-') }}] {{ s|upper }} {{ s|lower }} {{ u|upper }} {{ s|length }} {{ x|count }}",
    "{{ x|first }} {{ x|last }} {{ s|first }} {{ x|join(', ') }} {{ x|join }} {{ msgs|join('|', attribute='role') }}",
    "{{ missing|default('dflt') }} {{ n|default('dflt') }} {{ ''|default('dflt', true) }} {{ 0|d('z', boolean=true) }}",
    "{{ 42|string }} {{ '42'|int + 1 }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '2.5'|float }} {{ 3|float }}",
    "{{ s|list }} {{ d|list }} {{ s|replace('o', '0') }} {{ s|replace('o', '0', 1) }} {{ 'hELLO wORLD'|capitalize }} {{ 'hello-world foo(bar)'|title }}",
    "{{ msgs|selectattr('role', 'equalto', 'user')|list }} {{ msgs|rejectattr('role', 'equalto', 'user')|map(attribute='role')|list }}",
    "{{ msgs|selectattr('role', '==', 'system')|list|length }} {{ msgs|map(attribute='missing', default='?')|list }} {{ x|map('string')|join('-') }}",
    "{{ x|select('odd')|list }} {{ x|reject('odd')|list }} {{ [0, 1, '', 'a']|select|list }} {{ msgs|selectattr('content')|list|length }}",
    "{{ 3|round }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 1.2345|round(2, 'floor') }} {{ 1.2345|round(1, 'ceil') }} {{ -3|abs }} {{ -2.5|abs }}",
    "{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ [1, 1, 2, 1]|unique|list }} {{ ['a', 'A', 'b']|unique|list }}",
    "{{ x|reverse|list }} {{ s|reverse }} {{ x|min }} {{ x|max }} {{ ['b', 'A', 'c']|max }} {{ x|sum }} {{ msgs|map(attribute='role')|list }}",
    "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', blank=true) }}",
    "{{ {'b': 1, 'A': 2, 'c': 0}|dictsort }} {{ {'b': 1, 'A': 2}|dictsort(true) }} {{ {'b': 1, 'a': 2}|dictsort(by='value', reverse=true) }}",
    "{{ '%s-%d'|format('a', 3) }} {{ '%(a)s!'|format(a=1) }} {{ '%5.1f|%-4d|%04d|%x|%r|%s' % (3.14159, 7, 42, 255, 'q', none) }} {{ '%s' % x }} {{ '%d%%' % 5 }}",
    "{{ 'abc'|center(9) }}|{{ 'abc'|center(8) }}|{{ 'ab'|center(7) }}|{{ s|truncate(5) }}|{{ 'aaa bbb ccc ddd eee'|truncate(10) }}|{{ x|batch(2)|list }}",
    "{{ '<a href=\"x\">'|e }} {{ '<b>'|safe }} {{ d|items|list }} {{ 'one two  three'|wordcount }}",
    # filters over none, as functionary's template applies them to tools = none: jinja2's `if seq:` yields nothing
    "{{ none|selectattr('type', 'equalto', 'x')|list }} {{ none|rejectattr('type')|list }} {{ none|select|list|length }} {{ none|reject('odd')|list }} {{ none|map(attribute='a')|list }} {{ ''|select|list }}",
    # str.format (tencent-Hy3's template builds its special tokens with it)
    "{{ '<tok{}>'.format(':x') }} {{ '{0}-{1}-{0}'.format('a', 2) }} {{ '{{}} {}'.format(none) }} {{ '{a}+{b}'.format(a=1, b=[1, 'x']) }} {{ '{!r}'.format('q') }} {{ '{:}'.format(3) }}",
    "{{ '{0} {}'.format('a', 'b') }}",
    "{{ '{2}'.format('a') }}",
    # Markup (|safe, |e) + str escapes the plain str, even with autoescape off (functionary's template)
    "{{ 'a<'|safe + '<b>' }} {{ '<x>' + 'y\"'|safe }} {{ ('q'|e) + \"'\" }} {{ ('<'|e)|e }} {{ 1|safe }} {{ ('a'|safe + 'b&')|length }} {{ 'k'|safe + {'a': '\"'}|tojson }}",
    # string and dict methods
    "[{{ text.strip() }}] [{{ text.lstrip() }}] [{{ text.rstrip() }}] [{{ 'xxhixx'.strip('x') }}] [{{ '\\n\\nhi\\n'.lstrip('\\n') }}]",
    "{{ ' a  b c '.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'a b c'.split(none, 1) }}",
    "{{ s.startswith('He') }} {{ s.endswith(('x', 'ld')) }} {{ s.upper() }} {{ s.lower() }} {{ s.replace('l', 'L') }} {{ 'hello wORLD 3rd'.title() }}",
    "{{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('z') }} {{ s.count('l') }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ '-'.join(['a', 'b']) }} {{ 'abc'.capitalize() }}",
    "{{ d.keys()|list }} {{ d.values()|list }} {{ d.get('b') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ msgs[0].get('role') }}",
    "{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ '   '.isspace() }} {{ 'abc'.islower() }} {{ 'ABC'.isupper() }}",
    # operators
    "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ -2 ** 2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
    "{{ 'a' ~ 1 ~ none ~ missing }} {{ 'ab' * 3 }} {{ [1] + [2, 3] }} {{ 'a' + 'b' }} {{ 1 + 1.5 }} {{ true + 1 }}",
    "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' and 'z' }} {{ none or [] }} {{ not 0 }} {{ not x }}",
    "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 != 2 }} {{ 2 >= 2 }} {{ true == 1 }}",
    "{{ 2 in x }} {{ 5 not in x }} {{ 'ell' in s }} {{ 'b' in d }} {{ 'zz' in d }} {{ 'a' in missing }}",
    "{{ 'yes' if x else 'no' }}|{{ 'yes' if e }}|{{ 'a' if false else 'b' if true else 'c' }}",
    # tests
    "{{ x is defined }} {{ missing is defined }} {{ missing is undefined }} {{ n is none }} {{ n is not none }} {{ s is string }} {{ x is string }}",
    "{{ d is mapping }} {{ x is mapping }} {{ x is iterable }} {{ s is iterable }} {{ 3 is iterable }} {{ missing is iterable }} {{ x is sequence }}",
    "{{ 3 is number }} {{ 3.5 is number }} {{ true is number }} {{ '3' is number }} {{ 3 is integer }} {{ true is integer }} {{ 3.5 is float }} {{ true is boolean }}",
    "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 3 is equalto 3 }} {{ 'a' is in 'abc' }} {{ 'abc' is lower }} {{ 'aBc' is upper }}",
    "{{ true is true }} {{ 1 is true }} {{ false is false }} {{ n is sameas none }} {{ 2 is gt 1 }} {{ 2 is lt 1 }} {{ raise_exception is callable }}",
    # undefined behaviour
    "[{{ missing }}] [{{ missing|length }}] [{{ missing|upper }}] [{{ missing|list }}] {% for a in missing %}never{% endfor %}[{{ d.zz }}] [{{ d['zz'] }}] [{{ n.attr }}] [{{ x[10] }}]",
    "{{ missing.attr }}",
    "{{ missing + 1 }}",
    "{{ missing['k'] }}",
    "{{ missing() }}",
    # set, macros, with, namespace, scoping
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set l = [a, b] %}{{ l }}",
    "{% set block %}captured {{ 1 + 1 }}{% endset %}[{{ block }}]",
    "{% macro m(a, b='x', c=none) %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}{{ m(4, 5, 6) }}{{ m() }}",
    "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}",
    "{% with y = 5 %}{{ y }}{% endwith %}[{{ y }}]",
    "{% set ns = namespace(items=[]) %}{% for m in msgs %}{% set ns.items = ns.items + [m.role] %}{% endfor %}{{ ns.items }}",
    "{% if true %}{% set inner = 'leaks from if' %}{% endif %}{{ inner }}",
    "{% set x = x + [4] %}{{ x }}",
    "{% generation %}gen body {{ 1 }}{% endgeneration %}",
    # errors raised by the template or by Python operators
    "{{ raise_exception('Custom message: ' ~ s) }}",
    "{% for i in x %}{% if i == 2 %}{{ raise_exception('stop at ' ~ i) }}{% endif %}{{ i }}{% endfor %}",
    "{{ 'a' + 1 }}",
    "{{ 1 / 0 }}",
    "{{ 1 < 'a' }}",
    "{% for a in 3 %}{% endfor %}",
    "{% set a, b = x %}",
    # syntax errors (line numbers must match)
    "{% if %}",
    "line 1\nline 2\n{{ 1 + }}",
    "a\n{% for i in x %}\nb\n",
    "{% endif %}",
    "one\ntwo {% unknowntag %}",
    "{{ 'unterminated }}",
    "x\n\n{# never closed",
    "{{ (1, 2 }}",
    "{% if true %}\n{% else %}\n{% else %}{% endif %}",
]


def main():
    cases = []
    for case in template_cases():
        with open(os.path.join(HERE, "templates", case["template"] + ".jinja"), encoding="utf-8") as f:
            source = f.read()
        case.update(render(source, case["context"]))
        cases.append(case)
    for k, source in enumerate(EXPRESSIONS):
        case = {"name": f"expr/{k:03d}", "source": source, "context": EXPR_CONTEXT}
        case.update(render(source, EXPR_CONTEXT))
        cases.append(case)
    out = {
        "generator": "tests/golden/chat_templates/make_renders.py",
        "jinja2_version": jinja2.__version__,
        "cases": cases,
    }
    with open(os.path.join(HERE, "renders.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_err = sum("error" in c for c in cases)
    print(f"wrote {len(cases)} cases ({n_err} expected errors) to renders.json")


if __name__ == "__main__":
    main()
