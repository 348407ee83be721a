#!/usr/bin/env bash
# CPU speed of the default model: llmctl (f32 and bf16 weights) beside llama.cpp's llama-bench on
# the same GGUF with the same thread count. llama.cpp is built from the llama-cpp-python source
# package on PyPI (its vendored llama.cpp) into $LLMCTL_HOME/llama.cpp, once.
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
LLAMA="$HOME_DIR/llama.cpp"

build_llama_bench() {
  [ -x "$LLAMA/build/bin/llama-bench" ] && "$LLAMA/build/bin/llama-bench" --help >/dev/null 2>&1 && return
  local tmp; tmp=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --no-binary=:all: -d "$tmp" llama-cpp-python
  mkdir -p "$LLAMA"
  tar xzf "$tmp"/llama_cpp_python-*.tar.gz -C "$tmp"
  rm -rf "$LLAMA/src"; mv "$tmp"/llama_cpp_python-*/vendor/llama.cpp "$LLAMA/src"
  basename "$tmp"/llama_cpp_python-*.tar.gz > "$LLAMA/VERSION"
  # Every x86 SIMD level this kind of machine has, but not AMX: -march=native turns AMX on, and the
  # virtual machine's kernel does not grant it (llama-bench then dies of an illegal instruction).
  cmake -S "$LLAMA/src" -B "$LLAMA/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
    -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX_VNNI=ON -DGGML_AVX512=ON \
    -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF >/dev/null
  cmake --build "$LLAMA/build" -j "$(nproc)" --target llama-bench llama-server
  rm -rf "$tmp"
}

[ "${BUILD_ONLY:-}" = 1 ] && { build_llama_bench; exit 0; }
"$ROOT/scripts/fetch-model.sh"
build_llama_bench

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
