#!/usr/bin/env bash
# The spellings llama.cpp and vLLM users type (aliases), "did you mean" for unknown flags and
# commands, and the cases that used to be silently surprising: each is an error with a clear message
# or does what it says. Also: the default model runs its GGUF as it is, and the stats line says so.
set -uo pipefail
BUILD=${1:?usage: test_cli_habits.sh BUILD_DIR}
LLMCTL="$BUILD/llmctl"
HOME_DIR=${LLMCTL_HOME:-$HOME/.cache/llmctl}
GGUF="$HOME_DIR/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

# expect_error NAME PATTERN -- command...: a non-zero exit (not a signal) and PATTERN on stderr
expect_error() {
  local name=$1 pattern=$2; shift 3
  "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -lt 128 ] && grep -q -i -E -e "$pattern" "$TMP/err"; then pass "$name"
  else fail "$name (exit $rc, stderr: $(head -c 300 "$TMP/err"))"; fi
}

# Commands and flags: unknown ones fail with the closest name; usage lines name llmctl.
expect_error "unknown command with --help fails" "unknown command 'bogus'" -- "$LLMCTL" bogus --help
expect_error "misspelt command: did you mean" "did you mean 'generate'" -- "$LLMCTL" generat "hi"
expect_error "misspelt flag: did you mean" "unknown option '--temprature'.*did you mean '--temperature'" -- \
  "$LLMCTL" generate --temprature 0 "hi"
expect_error "misspelt bench mode" "did you mean 'latency'" -- "$LLMCTL" bench latncy
expect_error "a stray argument" "unexpected argument 'world'" -- "$LLMCTL" generate --model /nonexistent hello world
"$LLMCTL" generate --help >"$TMP/help" 2>&1
grep -q "Usage: llmctl generate" "$TMP/help" && pass "usage line names llmctl" || fail "usage: $(head -2 "$TMP/help")"
for flag in "-p,--prompt" "-f,--file" "--temperature,--temp" "-n,--max-tokens,--n-predict" "-c,--ctx-size,--max-model-len" \
            "--n-gpu-layers,--gpu-layers"; do
  grep -q -e "$flag" "$TMP/help" && pass "generate --help lists $flag" || fail "generate --help lacks $flag"
done
"$LLMCTL" serve --help >"$TMP/shelp" 2>&1
grep -q "Usage: llmctl serve .*MODEL" "$TMP/shelp" && pass "serve takes MODEL" || fail "serve usage: $(head -2 "$TMP/shelp")"
expect_error "serve MODEL is the model" "model '/nonexistent/m' does not exist" -- "$LLMCTL" serve /nonexistent/m
expect_error "serve MODEL and --model" "given twice" -- "$LLMCTL" serve /a --model /b
expect_error "hub-looking model not cached" "not in the Hugging Face cache.*hf download" -- \
  env HF_HUB_CACHE="$TMP/hub" "$LLMCTL" generate --model Qwen/Qwen2.5-0.5B-Instruct "hi"

# Silent surprises, now errors.
expect_error "--system without --chat" "--system needs --chat" -- "$LLMCTL" generate --system "Be brief." "hi"
echo '{"prompt": "x"}' >"$TMP/p.jsonl"
expect_error "prompt beside --prompts" "one way" -- "$LLMCTL" generate --prompts "$TMP/p.jsonl" "hi"
expect_error "prompt and -p" "one way" -- "$LLMCTL" generate -p "a" "b"
expect_error "-f of a missing file" "cannot read" -- "$LLMCTL" generate -f "$TMP/none.txt"

if [ ! -f "$GGUF" ]; then
  echo "SKIP: the default model's GGUF is not at $GGUF (run scripts/fetch-model.sh)"; exit 77
fi
mkdir -p "$TMP/out.dir" && echo x >"$TMP/out.dir/keep"
expect_error "convert refuses an existing OUT" "exists and is not an empty directory" -- "$LLMCTL" convert "$GGUF" "$TMP/out.dir"
[ "$(cat "$TMP/out.dir/keep")" = x ] && pass "convert left the existing OUT alone" || fail "convert touched OUT"
expect_error "convert refuses OUT.gguf" "HF directory" -- "$LLMCTL" convert "$GGUF" "$TMP/x.gguf"
[ ! -e "$TMP/x.gguf" ] && pass "convert wrote no x.gguf" || fail "convert made x.gguf"

# The default model (no --model) is the GGUF, run quantized; the stats line says so, on its own line.
LLMCTL_FETCH_SCRIPT=/nonexistent "$LLMCTL" generate --temperature 0 -n 8 "The capital of France is" >"$TMP/all" 2>&1
tail -1 "$TMP/all" | grep -q "^llmctl: .*SmolLM2-135M-Instruct.Q4_1.gguf | weights Q4_1 GGUF, run quantized" \
  && pass "default model: its GGUF, run quantized (stats line)" || fail "default model stats: $(tail -2 "$TMP/all")"
[ "$(grep -c '^llmctl: ' "$TMP/all")" -ge 1 ] && ! head -1 "$TMP/all" | grep -q "llmctl: " \
  && pass "with 2>&1 the stats line is not glued to the text" || fail "glued: $(cat "$TMP/all")"
"$LLMCTL" generate -m "$GGUF" --dtype f32 --temperature 0 -n 4 "Hi" 2>"$TMP/err" >/dev/null
grep -q "weights Q4_1 GGUF, dequantized to f32" "$TMP/err" && pass "--dtype f32 asks for a dense copy" \
  || fail "--dtype f32: $(cat "$TMP/err")"

# Aliases give the same tokens as the long spellings.
want=$("$LLMCTL" generate -m "$GGUF" --temperature 0 -n 8 "The capital of France is" 2>/dev/null)
got=$("$LLMCTL" generate -m "$GGUF" --temp 0 --n-predict 8 -p "The capital of France is" 2>/dev/null)
[ -n "$want" ] && [ "$got" = "$want" ] && pass "--temp --n-predict -p" || fail "aliases: '$got' vs '$want'"
printf 'The capital of France is' >"$TMP/prompt.txt"
got=$("$LLMCTL" generate -m "$GGUF" --temperature 0 -n 8 -f "$TMP/prompt.txt" 2>/dev/null)
[ "$got" = "$want" ] && pass "-f FILE" || fail "-f: '$got' vs '$want'"
got=$("$LLMCTL" generate -m "$GGUF" --temperature 0 -n 8 -ngl 99 "The capital of France is" 2>"$TMP/err")
[ "$got" = "$want" ] && grep -q "n-gpu-layers 99 has no effect" "$TMP/err" && pass "-ngl 99 on the CPU: a note, same text" \
  || fail "-ngl: '$got' / $(cat "$TMP/err")"
expect_error "-c smaller than the prompt" "context" -- "$LLMCTL" generate -m "$GGUF" -c 4 "The capital of France is"
"$LLMCTL" generate -m "$GGUF" --temperature 0 --ignore-eos -c 16 --json - "The capital of France is" >"$TMP/c.json" 2>/dev/null
python3 -c "
import json; j = json.load(open('$TMP/c.json'))
assert j['prompt_tokens'] + j['completion_tokens'] == 16 and j['finish_reason'] == 'length', j
" && pass "-c without -n: generates up to the context" || fail "-c 16: $(cat "$TMP/c.json")"

# --json: '-' (or nothing) is stdout on every subcommand; a file gets the JSON while the text streams.
"$LLMCTL" generate -m "$GGUF" --temperature 0 -n 4 --json "$TMP/g.json" "Hi" >"$TMP/text" 2>/dev/null
python3 -c "import json; j = json.load(open('$TMP/g.json')); assert j['weights'].startswith('Q4_1 GGUF'), j" \
  && [ -s "$TMP/text" ] && pass "generate --json FILE.json" || fail "generate --json FILE"
"$LLMCTL" bench latency -m "$GGUF" --batch 1 --input-len 16 --output-len 4 --repetitions 1 --warmup 0 --no-progress \
  --json - >"$TMP/b.json" 2>"$TMP/table"
python3 -c "
import json; j = json.load(open('$TMP/b.json')); m = j['meta']
assert m['weights'].startswith('Q4_1 GGUF, run quantized') and m['threads'] >= 1, m
" && grep -q "| model .*| weights .*| threads |" "$TMP/table" && pass "bench --json -: JSON on stdout, table (model, weights, threads) on stderr" \
  || fail "bench --json -: $(head -c 300 "$TMP/b.json") / $(head -3 "$TMP/table")"
[ ! -e ./- ] && pass "no file named '-'" || fail "a file named '-' was written"
# The default thread count: one per physical core this process may use (an affinity mask bounds it).
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  taskset -c 0 "$LLMCTL" bench latency -m "$GGUF" --batch 1 --input-len 8 --output-len 2 --repetitions 1 --warmup 0 \
    --no-progress --json - >"$TMP/t.json" 2>/dev/null
  python3 -c "import json; m = json.load(open('$TMP/t.json'))['meta']; assert m['threads'] == 1, m" \
    && pass "taskset -c 0: one thread by default" || fail "taskset -c 0: $(head -c 300 "$TMP/t.json")"
else
  echo "skip taskset -c 0 (no taskset, or one CPU)"
fi

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
