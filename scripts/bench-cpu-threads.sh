#!/usr/bin/env bash
# Thread scaling on the CPU: llmctl's prompt and decode speed at each thread count, beside llama.cpp's
# llama-bench on the same GGUF at the same count, both alternated in one run (which goes first swaps
# each repetition), with each program's speed-up over its own first thread count.
# Usage: scripts/bench-cpu-threads.sh [THREADS] [PROMPT_TOKENS] [GEN_TOKENS]
#        THREADS: a comma-separated list (default 1,2,4,8,16,... up to nproc, and nproc itself)
# Environment: MODEL (default: the default model's Q4_1 GGUF); LLMCTL_BIN (default build/llmctl);
# LLAMA_BENCH (default: $LLMCTL_HOME/llama.cpp/build/bin/llama-bench; "none": llmctl alone); ISA
# forces llmctl's kernels (--cpu-isa; avx2 beside the llama.cpp that `LLAMA_CPU=avx2
# LLAMA_CPP_DIR=... scripts/build-llama-cpp.sh` builds); REPS repetitions per count (default 3, the median reported); DEPTH: decode
# after a prompt of that many tokens (default 0: decode right after PROMPT_TOKENS);
# LLMCTL_ARGS: more flags for llmctl (e.g. "--device cpu" for a CUDA build on a GPU machine);
# RUN_TIMEOUT: seconds one run may take (default 300; a run past it fails the script).
# Decode on a small model is bound by the work between the parallel loops and by memory bandwidth
# sooner than prefill: the table shows where each stops scaling.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
HOME_DIR=${LLMCTL_HOME:-$HOME/.cache/llmctl}
MODEL=${MODEL:-$HOME_DIR/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf}
LLMCTL=${LLMCTL_BIN:-$ROOT/build/llmctl}
LLAMA_BENCH=${LLAMA_BENCH:-$HOME_DIR/llama.cpp/build/bin/llama-bench}
PP=${2:-128}
TG=${3:-64}
REPS=${REPS:-3}
DEPTH=${DEPTH:-0}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
cores=$(nproc)
if [[ -n "${1:-}" ]]; then
  THREADS=${1//,/ }
else
  THREADS=""
  for ((t = 1; t < cores; t *= 2)); do THREADS+="$t "; done
  THREADS+="$cores"
fi
[[ -f "$MODEL" ]] || { echo "bench-cpu-threads: $MODEL not found (scripts/fetch-model.sh, or MODEL=...)" >&2; exit 2; }
[[ -x "$LLMCTL" ]] || { echo "bench-cpu-threads: $LLMCTL not built" >&2; exit 2; }
llama=1
[[ "$LLAMA_BENCH" == none || ! -x "$LLAMA_BENCH" ]] && llama=0
isa=()
[[ -n "${ISA:-}" ]] && isa=(--cpu-isa "$ISA")
read -r -a extra <<<"${LLMCTL_ARGS:-}"

echo "machine: $cores cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "model: $MODEL; prompt $PP, decode $TG tokens after $((DEPTH > 0 ? DEPTH : PP)); $REPS repetitions, median"
echo "llmctl: $LLMCTL ${isa[*]} ${extra[*]}"
((llama)) && echo "llama.cpp: $LLAMA_BENCH" || echo "llama.cpp: none"

CTX=$((DEPTH > 0 ? DEPTH : PP))
# one run of a program; its output (JSON or CSV) read by FIELD (a python expression of r, the first
# row); a failure or a run past RUN_TIMEOUT ends the script with a message
value() {  # FORMAT FIELD WHAT COMMAND...
  local format=$1 field=$2 what=$3 out
  shift 3
  out=$(timeout "$RUN_TIMEOUT" "$@" 2>/dev/null) &&
    python3 -c "
import csv, io, json, sys
r = json.loads(sys.argv[1])['rows'][0] if sys.argv[2] == 'json' else next(csv.DictReader(io.StringIO(sys.argv[1])))
print($field)" "$out" "$format" 2>/dev/null && return 0
  echo "bench-cpu-threads: $what failed or ran past ${RUN_TIMEOUT} s" >&2
  exit 1
}
run_llmctl() {  # prefill tok/s of a PP-token prompt; decode tok/s of TG tokens after CTX
  local t=$1 pp tg
  local common=(bench latency -m "$MODEL" -t "$t" --repetitions 1 --warmup 1 --no-progress --json -)
  pp=$(value json "r['pp_tok_s_median']" "llmctl at $t threads" \
    "$LLMCTL" "${common[@]}" --input-len "$PP" --output-len 1 "${isa[@]}" "${extra[@]}") || exit 1
  tg=$(value json "1000 / r['tpot_ms_median']" "llmctl at $t threads" \
    "$LLMCTL" "${common[@]}" --input-len "$CTX" --output-len "$TG" "${isa[@]}" "${extra[@]}") || exit 1
  echo "$pp $tg"
}
run_llama() {  # the same two measurements
  local t=$1 pp tg
  pp=$(value csv "r['avg_ts']" "llama-bench at $t threads" "$LLAMA_BENCH" -m "$MODEL" -t "$t" -p "$PP" -n 0 -r 1 \
    -o csv) || exit 1
  tg=$(value csv "r['avg_ts']" "llama-bench at $t threads" "$LLAMA_BENCH" -m "$MODEL" -t "$t" -p 0 -n "$TG" -d "$CTX" \
    -r 1 -o csv) || exit 1
  echo "$pp $tg"
}
median() { python3 -c "import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }

printf '%-8s | %-22s | %-22s | %-14s\n' threads "llmctl pp / tg" "llama.cpp pp / tg" "ratio pp / tg"
results=()
for t in $THREADS; do
  lp=() lt=() qp=() qt=()
  for ((r = 0; r < REPS; ++r)); do
    if ((r % 2 == 0 || !llama)); then
      read -r a b < <(run_llmctl "$t")
      ((llama)) && read -r c d < <(run_llama "$t")
    else
      read -r c d < <(run_llama "$t")
      read -r a b < <(run_llmctl "$t")
    fi
    lp+=("$a") lt+=("$b")
    ((llama)) && qp+=("$c") qt+=("$d")
  done
  a=$(median "${lp[@]}") b=$(median "${lt[@]}")
  if ((llama)); then c=$(median "${qp[@]}") d=$(median "${qt[@]}"); else c=0 d=0; fi
  results+=("$t $a $b $c $d")
  python3 -c "
import sys
t, a, b, c, d = sys.argv[1:]
a, b, c, d = map(float, (a, b, c, d))
llama, ratio = (f'{c:8.1f} / {d:8.1f}', f'{a / c:.2f}x / {b / d:.2f}x') if c > 0 else ('-', '-')
print(f'{t:<8} | {a:8.1f} / {b:8.1f}     | {llama:<22} | {ratio}')" "$t" "$a" "$b" "$c" "$d"
done
echo "speed-up over each program's first thread count (pp / tg):"
printf '%s\n' "${results[@]}" | python3 -c "
import sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
t0, a0, b0, c0, d0 = rows[0]
for t, a, b, c, d in rows:
    llama = f'{c / c0:.2f} / {d / d0:.2f}' if c0 > 0 else '-'
    print(f'  {int(t):>3} threads (x{t / t0:g}): llmctl {a / a0:.2f} / {b / b0:.2f}   llama.cpp {llama}')"
