#!/usr/bin/env bash
# CPU speed of the GGUF K-quant and IQ types on a dense model whose widths are whole 256-input
# super-blocks, beside llama.cpp's llama-bench, same thread count. The default model's hidden size
# (576) is not, so `llama-quantize` writes most of its "K-quant" files as Q5_0 / Q8_0 fallbacks
# (bench-cpu.sh's rows); this model is random (llmctl_random_model, seeded): a Llama of 12 layers,
# hidden 1024, 16 heads / 4 KV heads, intermediate 2816, SmolLM2's vocabulary (~0.24 B parameters),
# written to GGUF f16 by llama.cpp's convert_hf_to_gguf.py and quantized by llama-quantize.
# Rounds alternate llmctl `generate --json` and `llama-bench -r 1` file by file (a VM's speed drifts);
# each line: round, type, program, prefill and decode tok/s (llmctl also its decode bytes a token).
# REPS > 1: each program's medians of REPS runs instead (llmctl `bench latency --input-len 128
# --output-len 64`, llama-bench -r REPS's samples), no bytes a token: a single prompt of ~0.05 s swings
# by a third on a noisy VM.
# MODEL=default: the default model itself instead (the issue table's files: its own Q4_1 and the types
# llama-quantize makes from it, as bench-cpu.sh makes them; default TYPES then Q4_1 Q4_0 Q8_0 Q4_K_M
# Q5_K_M Q6_K Q3_K_M IQ4_XS; OUT default /tmp/llmctl-bench-cpu, bench-cpu.sh's).
# Usage: scripts/bench-cpu-kquants.sh [THREADS] [ROUNDS]   (defaults: nproc 2)
# Environment: TYPES (default Q4_K_M Q5_K_M Q6_K Q3_K_M Q2_K IQ4_XS; made by make-gguf-type.sh,
# with an importance matrix for IQ1_*, IQ2_*, IQ3_*), OUT (default
# /tmp/llmctl-bench-kquants), PYTHON (an interpreter with torch, for the converter; default python3),
# ISA (llmctl's --cpu-isa) with LLAMA_CPP_DIR (a llama.cpp built for that ISA: GGML_NATIVE=OFF
# GGML_AVX512=OFF ...) for a step-down comparison, BASELINE_BIN (another llmctl binary, run beside
# LLMCTL_BIN in every round, first in even rounds, and labelled "baseline": a change measured against
# what it replaces; or a wrapper script that runs the same binary with a flag added, e.g.
# `exec build/llmctl "$@" --cpu-weight-prefetch wide`: a switch measured against its default).
# At the end, per type: the median over rounds of each round's llmctl / llama.cpp ratio (prefill,
# decode) with its range, and of llmctl / baseline: on a VM whose speed swings between rounds, ratios
# of runs taken side by side, not of medians taken apart.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
THREADS=${1:-$(nproc)}
ROUNDS=${2:-2}
HOME_DIR=${LLMCTL_HOME:-$HOME/.cache/llmctl}
BASE="$HOME_DIR/models/SmolLM2-135M-Instruct/hf"
LLMCTL=${LLMCTL_BIN:-$ROOT/build/llmctl}
LLAMA=${LLAMA_CPP_DIR:-$HOME_DIR/llama.cpp}
PYTHON=${PYTHON:-python3}
[ -z "${MODEL:-}" ] || [ "$MODEL" = default ] || { echo "MODEL: 'default' or unset, not '$MODEL'" >&2; exit 2; }
if [ "${MODEL:-}" = default ]; then
  OUT=${OUT:-/tmp/llmctl-bench-cpu}
  TYPES=${TYPES:-Q4_1 Q4_0 Q8_0 Q4_K_M Q5_K_M Q6_K Q3_K_M IQ4_XS}
else
  OUT=${OUT:-/tmp/llmctl-bench-kquants}
  TYPES=${TYPES:-Q4_K_M Q5_K_M Q6_K Q3_K_M Q2_K IQ4_XS}
fi

"$ROOT/scripts/fetch-model.sh" --dense
LLAMA_CPP_DIR="$HOME_DIR/llama.cpp" "$ROOT/scripts/build-llama-cpp.sh" llama-bench llama-quantize llama-imatrix
mkdir -p "$OUT"
SOURCE=()
if [ "${MODEL:-}" = default ]; then
  SOURCE=("$HOME_DIR/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
  ln -sf "${SOURCE[0]}" "$OUT/Q4_1.gguf"  # the model's own file, as it is
elif [ ! -f "$OUT/hf/config.json" ]; then
  "$(dirname "$LLMCTL")/llmctl_random_model" "$BASE" "$OUT/hf" --hidden 1024 --heads 16 --kv-heads 4 --layers 12 \
    --intermediate 2816 --seed 11 --stddev 0.02 --set 'tie_word_embeddings=false'
fi
if [ -z "${MODEL:-}" ] && [ ! -f "$OUT/f16.gguf" ]; then
  "$PYTHON" "$HOME_DIR/llama.cpp/src/convert_hf_to_gguf.py" "$OUT/hf" --outtype f16 --outfile "$OUT/f16.gguf" >/dev/null 2>&1
fi
[ -n "${MODEL:-}" ] || SOURCE=("$OUT/f16.gguf")
for t in $TYPES; do
  LLAMA_CPP_DIR="$HOME_DIR/llama.cpp" "$ROOT/scripts/make-gguf-type.sh" "$t" "$OUT" "$THREADS" "${SOURCE[0]}"
done

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), threads $THREADS"
echo "llama.cpp: $(cat "$HOME_DIR/llama.cpp/VERSION"), binaries from $LLAMA; llmctl --cpu-isa ${ISA:-auto}"
PROMPT=$(head -c 20000 "$ROOT/../shared/data/wikitext2-valid.txt" | tr -s ' \n' ' ' | cut -c1-512)
REPS=${REPS:-1}
run_llmctl() {  # binary label round type
  if [ "$REPS" -gt 1 ]; then
    "$1" bench latency --model "$OUT/$4.gguf" -t "$THREADS" --input-len 128 --output-len 64 --repetitions "$REPS" \
      --cpu-isa "${ISA:-auto}" --json - 2>/dev/null | python3 -c "import json,sys; r=json.load(sys.stdin)['rows'][0]; \
print(f\"round $3 $4 $2 {r['pp_tok_s_median']:.1f} {r['tg_tok_s_median']:.1f} -\")"
    return
  fi
  "$1" generate --model "$OUT/$4.gguf" -t "$THREADS" --temperature 0 --ignore-eos -n 64 --json \
    --cpu-isa "${ISA:-auto}" "$PROMPT" 2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin); \
print(f\"round $3 $4 $2 {j['prefill_tokens_per_second']:.1f} {j['decode_tokens_per_second']:.1f} \
{j['decode_weight_bytes_per_step'] / 1e6:.1f}MB\")"
}
RUNLOG=$(mktemp)
trap 'rm -f "$RUNLOG"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for t in $TYPES; do
    # with a baseline, the two llmctl binaries swap places every other round (the first run after
    # another file can be the slower one)
    if [ -n "${BASELINE_BIN:-}" ] && [ $((r % 2)) -eq 0 ]; then
      run_llmctl "$BASELINE_BIN" baseline "$r" "$t"
      run_llmctl "$LLMCTL" llmctl "$r" "$t"
    else
      run_llmctl "$LLMCTL" llmctl "$r" "$t"
      [ -z "${BASELINE_BIN:-}" ] || run_llmctl "$BASELINE_BIN" baseline "$r" "$t"
    fi
    "$LLAMA/build/bin/llama-bench" -m "$OUT/$t.gguf" -t "$THREADS" -p 128 -n 64 -r "$REPS" -o json 2>/dev/null |
      python3 -c "
import json, statistics, sys
rows = json.load(sys.stdin)
pp = [statistics.median(r['samples_ts']) for r in rows if r['n_prompt'] != 0]
tg = [statistics.median(r['samples_ts']) for r in rows if r['n_gen'] != 0]
print(f'round $r $t llama.cpp {pp[0]:.1f} {tg[0]:.1f}')"
  done
done | tee "$RUNLOG"
python3 - "$RUNLOG" <<'PY'
import statistics, sys
runs = {}  # type -> round -> program -> (prefill, decode)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 6 and f[0] == "round":
        runs.setdefault(f[2], {}).setdefault(f[1], {})[f[3]] = (float(f[4]), float(f[5]))
def ratios(rounds, a, b, i):
    return [r[a][i] / r[b][i] for r in rounds.values() if a in r and b in r and r[b][i] > 0]
def show(x):
    return f"{statistics.median(x):.2f} [{min(x):.2f}-{max(x):.2f}]" if x else "-"
print("summary: type, then medians over rounds [range] of the per-round ratios, prefill and decode")
for t, rounds in runs.items():
    line = f"summary {t} llmctl/llama.cpp {show(ratios(rounds, 'llmctl', 'llama.cpp', 0))} " \
           f"{show(ratios(rounds, 'llmctl', 'llama.cpp', 1))}"
    if any("baseline" in r for r in rounds.values()):
        line += f" llmctl/baseline {show(ratios(rounds, 'llmctl', 'baseline', 0))} " \
                f"{show(ratios(rounds, 'llmctl', 'baseline', 1))}"
    print(line + f" rounds {len(rounds)}")
PY
