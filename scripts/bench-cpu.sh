#!/usr/bin/env bash
# CPU speed of the default model: llmctl beside llama.cpp's llama-bench, same thread count.
#  - default: the Q4_1 GGUF as `llmctl generate` runs it without --model, beside llama-bench on it;
#  - dense: llmctl on the f32 directory (f32 and bf16 weights);
#  - quantized: llmctl running GGUF quants as they are (the model's own Q4_1, and Q8_0 / Q4_0 made by
#    llama-quantize from it) and `llmctl quantize` int4 g32 and g64 asym output, with int8 activations
#    (default) and exact f32 ones (--act-quant none), beside llama-bench on the same GGUFs; the
#    `llmctl quantize` output also with its dense tensors in bf16 (--dtype bf16).
# llama.cpp is built by scripts/build-llama-cpp.sh into $LLMCTL_HOME/llama.cpp, once.
# Usage: scripts/bench-cpu.sh [THREADS] [PROMPT_TOKENS] [GEN_TOKENS]   (defaults: nproc 128 64)
# Environment: QUANT=0 leaves out the quantized rows; OUT (default /tmp/llmctl-bench-cpu) holds the
# made GGUFs and checkpoint; GGUF_TYPES the llama-quantize types made from the Q4_1 (default Q8_0 Q4_0
# Q4_K_M Q5_K_M Q6_K Q3_K_M Q2_K IQ4_XS); ISA (amx, avx512-vnni, avx-vnni, avx2, scalar) forces llmctl's kernels
# (--cpu-isa) for the runs on a machine that has more, to set beside a llama.cpp built with
# GGML_NATIVE=OFF GGML_AVX512=OFF (LLAMA_CPP_DIR: that build). Accuracy per type: bench-cpu-ppl.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
THREADS=${1:-$(nproc)}
PP=${2:-128}
TG=${3:-64}
HOME_DIR=${LLMCTL_HOME:-$HOME/.cache/llmctl}
MODEL_DIR="$HOME_DIR/models/SmolLM2-135M-Instruct"
GGUF="$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
LLMCTL=${LLMCTL_BIN:-$ROOT/build/llmctl}
LLAMA=${LLAMA_CPP_DIR:-$HOME_DIR/llama.cpp}

[ "${BUILD_ONLY:-}" = 1 ] && LLAMA_CPP_DIR="$LLAMA" exec "$ROOT/scripts/build-llama-cpp.sh"
"$ROOT/scripts/fetch-model.sh" --dense
LLAMA_CPP_DIR="$LLAMA" "$ROOT/scripts/build-llama-cpp.sh"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), threads $THREADS"
echo "llama.cpp: $(cat "$LLAMA/VERSION")"
# A prompt of exactly PP tokens is not needed: llmctl reports tokens/s for whatever the prompt is.
PROMPT=$(head -c 20000 "$ROOT/../shared/data/wikitext2-valid.txt" | tr -s ' \n' ' ' | cut -c1-$((PP * 4)))
ISA_FLAGS=()
[ -n "${ISA:-}" ] && ISA_FLAGS=(--cpu-isa "$ISA")
run_llmctl() {  # LABEL MODEL FLAGS...: three runs of generate, prefill and decode tok/s
  local label=$1 model=$2; shift 2
  for rep in 1 2 3; do
    "$LLMCTL" generate --model "$model" -t "$THREADS" --temperature 0 --ignore-eos -n "$TG" --json "${ISA_FLAGS[@]}" "$@" "$PROMPT" \
      2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin); print(f\"llmctl $label rep $rep: prompt {j['prompt_tokens']} tok, prefill {j['prefill_tokens_per_second']:.1f} tok/s, decode {j['decode_tokens_per_second']:.1f} tok/s\")"
  done
}
# What a new user gets first: `llmctl generate` on the default model (its Q4_1 GGUF as it is).
run_llmctl "default model (Q4_1 GGUF as is, int8 activations)" "$GGUF"
"$LLAMA/build/bin/llama-bench" -m "$GGUF" -t "$THREADS" -p "$PP" -n "$TG" -r 3 -o md
for dtype in f32 bf16; do run_llmctl "$dtype" "$MODEL_DIR/hf" --dtype "$dtype"; done
[ "${QUANT:-1}" = 1 ] || exit 0

OUT=${OUT:-/tmp/llmctl-bench-cpu}
mkdir -p "$OUT"
LLAMA_CPP_DIR="$LLAMA" "$ROOT/scripts/build-llama-cpp.sh" llama-quantize llama-imatrix
TYPES=${GGUF_TYPES:-Q8_0 Q4_0 Q4_K_M Q5_K_M Q6_K Q3_K_M Q2_K IQ4_XS}
for t in $TYPES; do LLAMA_CPP_DIR="$LLAMA" "$ROOT/scripts/make-gguf-type.sh" "$t" "$OUT" "$THREADS"; done
for gs in 32 64; do
  [ -d "$OUT/int4-g$gs-asym" ] || "$LLMCTL" quantize "$MODEL_DIR/hf" "$OUT/int4-g$gs-asym" --method rtn --group-size "$gs" \
    --asym --threads "$THREADS" 2>/dev/null
done
files=("Q4_1:$GGUF")
for t in $TYPES; do files+=("$t:$OUT/$t.gguf"); done
for g in "${files[@]}"; do
  for aq in int8 none; do run_llmctl "${g%%:*} act-quant $aq" "${g#*:}" --act-quant "$aq"; done
  "$LLAMA/build/bin/llama-bench" -m "${g#*:}" -t "$THREADS" -p "$PP" -n "$TG" -r 3 -o md | tail -n +3
done
for aq in int8 none; do run_llmctl "quantize int4 g32 asym act-quant $aq" "$OUT/int4-g32-asym" --act-quant "$aq"; done
# The default model's HF directory is f32 (made from the GGUF), so the checkpoint's dense tensors, the
# tied embedding / lm_head among them (113 MB read a token), are f32; a checkpoint quantized from a
# real bf16 model keeps them in bf16. --dtype bf16 gives that case.
for gs in 32 64; do
  run_llmctl "quantize int4 g$gs asym, dense tensors bf16, act-quant int8" "$OUT/int4-g$gs-asym" --dtype bf16
done
run_llmctl "quantize int4 g64 asym act-quant int8" "$OUT/int4-g64-asym" --act-quant int8
