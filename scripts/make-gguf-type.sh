#!/usr/bin/env bash
# Makes OUT/TYPE.gguf from SOURCE (default: the default model's Q4_1 GGUF) with llama.cpp's
# llama-quantize (--allow-requantize), as the CPU benchmarks compare types. The types llama-quantize
# makes only with an importance matrix (IQ1_*, IQ2_*, and IQ3_* for their mixes' IQ2 tensors; Q2_K_S) get
# one, made once from SOURCE into OUT/imatrix.gguf by llama-imatrix on tinyshakespeare (40 chunks of 512
# tokens; not the WikiText the perplexity runs score). Nothing is done when the file exists. Needs
# llama.cpp's tools built (scripts/build-llama-cpp.sh llama-quantize llama-imatrix).
# Usage: scripts/make-gguf-type.sh TYPE OUT [THREADS] [SOURCE]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TYPE=$1
OUT=$2
THREADS=${3:-$(nproc)}
HOME_DIR=${LLMCTL_HOME:-$HOME/.cache/llmctl}
GGUF=${4:-$HOME_DIR/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf}
LLAMA=${LLAMA_CPP_DIR:-$HOME_DIR/llama.cpp}
[ -f "$OUT/$TYPE.gguf" ] && exit 0
mkdir -p "$OUT"
imatrix=()
case "$TYPE" in
  IQ1_S|IQ1_M|IQ2_XXS|IQ2_XS|IQ2_S|IQ3_XXS|IQ3_XS|IQ3_S|IQ3_M|Q2_K_S)
    if [ ! -f "$OUT/imatrix.gguf" ]; then
      "$LLAMA/build/bin/llama-imatrix" -m "$GGUF" -f "$ROOT/../shared/data/tinyshakespeare.txt" -o "$OUT/imatrix.gguf" \
        --chunks 40 -c 512 -t "$THREADS" >"$OUT/imatrix.log" 2>&1
    fi
    imatrix=(--imatrix "$OUT/imatrix.gguf") ;;
esac
if ! "$LLAMA/build/bin/llama-quantize" --allow-requantize "${imatrix[@]}" "$GGUF" "$OUT/$TYPE.gguf" "$TYPE" "$THREADS" \
  >"$OUT/$TYPE.quantize.log" 2>&1; then
  rm -f "$OUT/$TYPE.gguf"  # a partial file would be taken as made next time
  echo "make-gguf-type: llama-quantize $TYPE failed ($OUT/$TYPE.quantize.log):" >&2
  tail -n 3 "$OUT/$TYPE.quantize.log" >&2
  exit 1
fi
