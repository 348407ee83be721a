#!/usr/bin/env bash
# Accuracy of each GGUF type as llmctl runs it on the CPU, on WikiText-2 (valid): `llmctl bench ppl`
# (windows of 512 tokens, stride 256) with the quantized kernels, int8 activations (the default) and
# f32 ones (--act-quant none), beside the same file dequantized at load and run dense (--dtype f32: the
# reference the f32-activation run should equal, within summation order), and llama.cpp's
# llama-perplexity on the same file (its own method: chunks of 512, the second half of each scored;
# a different number, set beside for scale).
# The GGUFs are the ones scripts/bench-cpu.sh makes with llama-quantize from the default model's Q4_1.
# Usage: scripts/bench-cpu-ppl.sh [THREADS] [TOKENS]   (defaults: nproc 4096)
# Environment: OUT (default /tmp/llmctl-bench-cpu, where bench-cpu.sh put the GGUFs), GGUF_TYPES (default
# Q4_0 Q8_0 Q4_K_M Q5_K_M Q6_K Q3_K_M Q2_K IQ4_XS; a missing file is made by scripts/make-gguf-type.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
THREADS=${1:-$(nproc)}
TOKENS=${2:-4096}
HOME_DIR=${LLMCTL_HOME:-$HOME/.cache/llmctl}
LLMCTL=${LLMCTL_BIN:-$ROOT/build/llmctl}
LLAMA=${LLAMA_CPP_DIR:-$HOME_DIR/llama.cpp}
OUT=${OUT:-/tmp/llmctl-bench-cpu}
TEXT="$ROOT/../shared/data/wikitext2-valid.txt"

"$ROOT/scripts/fetch-model.sh"
LLAMA_CPP_DIR="$LLAMA" "$ROOT/scripts/build-llama-cpp.sh" llama-quantize llama-perplexity llama-imatrix
mkdir -p "$OUT"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), threads $THREADS, $TOKENS tokens"
printf '| %-7s | %-13s | %-13s | %-13s | %-18s |\n' GGUF "int8 act" "f32 act" "dense f32" "llama-perplexity"
printf '|---|---|---|---|---|\n'
ppl() {  # MODEL FLAGS...: "mean NLL / perplexity" of llmctl bench ppl
  "$LLMCTL" bench ppl -m "$1" --text "$TEXT" --max-tokens "$TOKENS" -t "$THREADS" "${@:2}" 2>/dev/null |
    tail -1 | awk -F'|' '{gsub(/ /, "", $10); gsub(/ /, "", $11); print $10 " / " $11}'
}
for t in ${GGUF_TYPES:-Q4_0 Q8_0 Q4_K_M Q5_K_M Q6_K Q3_K_M Q2_K IQ4_XS}; do
  f="$OUT/$t.gguf"
  LLAMA_CPP_DIR="$LLAMA" "$ROOT/scripts/make-gguf-type.sh" "$t" "$OUT" "$THREADS"
  lp=$("$LLAMA/build/bin/llama-perplexity" -m "$f" -f "$TEXT" -c 512 -t "$THREADS" --chunks $((TOKENS / 512)) 2>&1 |
    sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p')
  printf '| %-7s | %-13s | %-13s | %-13s | %-18s |\n' "$t" "$(ppl "$f")" "$(ppl "$f" --act-quant none)" \
    "$(ppl "$f" --dtype f32)" "${lp:-?}"
done
