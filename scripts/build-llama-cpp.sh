#!/usr/bin/env bash
# Builds llama.cpp tools (the baselines of the CPU benchmarks) from the llama-cpp-python source
# package on PyPI (its vendored llama.cpp) into $LLAMA_CPP_DIR (default $LLMCTL_HOME/llama.cpp):
# src/, build/bin/<target>, VERSION. Only what is missing is built.
# Usage: scripts/build-llama-cpp.sh [TARGET...]
#        (default: llama-bench llama-server llama-quantize llama-perplexity)
# The SIMD flags are those /proc/cpuinfo lists, never -march=native: that turns AMX on, which some
# virtual machines do not grant and with which this version's llama-bench dies of an illegal
# instruction even where it is granted (a tile load before any tile configuration, in its AMX matmul:
# Q4_0, Q8_0 and Q4_K_M, one thread or two, on a Sapphire Rapids class VM), and GGML_AVX_VNNI (the
# VEX-encoded AVX-VNNI) dies of an illegal instruction on AMD EPYC machines that have AVX-512 VNNI
# but not AVX-VNNI.
# LLAMA_CPU=avx2 builds for AVX2 / FMA / F16C alone whatever this CPU has: the baseline beside
# llmctl's --cpu-isa avx2, and a build that runs on any AVX2 machine (scripts/gpu-carry.sh carries
# it); LLAMA_CPU=avx-vnni adds AVX-VNNI (an Alder Lake-class client CPU: beside --cpu-isa avx-vnni,
# on a CPU that has it); give each its own LLAMA_CPP_DIR (the flags are read when the build folder is
# first made).
set -euo pipefail
LLAMA=${LLAMA_CPP_DIR:-${LLMCTL_HOME:-$HOME/.cache/llmctl}/llama.cpp}
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(llama-bench llama-server llama-quantize llama-perplexity)

missing=()
for t in "${TARGETS[@]}"; do [ -x "$LLAMA/build/bin/$t" ] || missing+=("$t"); done
[ ${#missing[@]} -eq 0 ] && exit 0

LLAMA_CPP_DIR="$LLAMA" "$(dirname "$0")/fetch-llama-cpp.sh"

if [ ! -f "$LLAMA/build/CMakeCache.txt" ]; then
  flags=$(grep -m1 '^flags' /proc/cpuinfo)
  [[ "${LLAMA_CPU:-}" == avx2 ]] && flags="flags : avx avx2 fma f16c"
  [[ "${LLAMA_CPU:-}" == avx-vnni ]] && flags="flags : avx avx2 fma f16c avx_vnni"
  has() { [[ " $flags " == *" $1 "* ]] && echo ON || echo OFF; }
  cmake -S "$LLAMA/src" -B "$LLAMA/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
    -DGGML_AVX="$(has avx)" -DGGML_AVX2="$(has avx2)" -DGGML_FMA="$(has fma)" -DGGML_F16C="$(has f16c)" \
    -DGGML_AVX_VNNI="$(has avx_vnni)" -DGGML_AVX512="$(has avx512f)" -DGGML_AVX512_VBMI="$(has avx512vbmi)" \
    -DGGML_AVX512_VNNI="$(has avx512_vnni)" -DGGML_AVX512_BF16="$(has avx512_bf16)" \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$LLAMA/build" -j "${JOBS:-$(nproc)}" --target "${missing[@]}"
