#!/usr/bin/env bash
# CPU speed of the default model: llmctl (f32 and bf16 weights) beside llama.cpp's llama-bench on
# the same GGUF with the same thread count. llama.cpp is built by scripts/build-llama-cpp.sh into
# $LLMCTL_HOME/llama.cpp, once.
# Usage: scripts/bench-cpu.sh [THREADS] [PROMPT_TOKENS] [GEN_TOKENS]   (defaults: nproc 128 64)
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
"$ROOT/scripts/fetch-model.sh"
LLAMA_CPP_DIR="$LLAMA" "$ROOT/scripts/build-llama-cpp.sh"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), threads $THREADS"
echo "llama.cpp: $(cat "$LLAMA/VERSION")"
# A prompt of exactly PP tokens is not needed: llmctl reports tokens/s for whatever the prompt is.
PROMPT=$(head -c 20000 "$ROOT/../shared/data/wikitext2-valid.txt" | tr -s ' \n' ' ' | cut -c1-$((PP * 4)))
for dtype in f32 bf16; do
  for rep in 1 2 3; do
    "$LLMCTL" generate --model "$MODEL_DIR/hf" --dtype $dtype -t "$THREADS" --temperature 0 --ignore-eos \
      -n "$TG" --json "$PROMPT" 2>/dev/null \
      | python3 -c "import json,sys; j=json.load(sys.stdin); print(f\"llmctl $dtype rep $rep: prompt {j['prompt_tokens']} tok, prefill {j['prefill_tokens_per_second']:.1f} tok/s, decode {j['decode_tokens_per_second']:.1f} tok/s\")"
  done
done
"$LLAMA/build/bin/llama-bench" -m "$GGUF" -t "$THREADS" -p "$PP" -n "$TG" -r 3 -o md
