#!/usr/bin/env bash
# CPU decode speed deep into a context: llmctl beside llama.cpp's llama-bench on the default model's
# Q4_1 GGUF, the same threads. Per depth D and round: llmctl `bench latency --input-len D` (time per
# output token over N tokens decoded after a D-token prompt; int8 and f32 KV caches) and, optionally,
# a second llmctl binary (LLMCTL_BASE, e.g. the one before a change), then `llama-bench -p 0 -n N -d D`
# (its f16 KV cache). Rounds alternate the programs, so the VM's drifts hit all of them alike.
# Usage: scripts/bench-cpu-depth.sh [THREADS] [DEPTHS] [GEN_TOKENS] [ROUNDS]
#        (defaults: nproc "1024 4096" 64 2)
# Environment: ISA forces llmctl's kernels (--cpu-isa), to set beside a llama.cpp built with
# GGML_NATIVE=OFF GGML_AVX512=OFF (LLAMA_CPP_DIR: that build); KV_DTYPES (default "auto int8");
# GGUF another model file (default: the default model's Q4_1); PREFILL=1 also times a D-token prompt
# (llmctl `bench latency --output-len 1`, prompt tok/s, the default KV cache, beside `llama-bench -p D -n 0`;
# both warm up first: a run's first long prompt also faults in the KV cache's pages).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
THREADS=${1:-$(nproc)}
DEPTHS=${2:-1024 4096}
TG=${3:-64}
ROUNDS=${4:-2}
HOME_DIR=${LLMCTL_HOME:-$HOME/.cache/llmctl}
GGUF=${GGUF:-$HOME_DIR/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf}
LLMCTL=${LLMCTL_BIN:-$ROOT/build/llmctl}
LLAMA=${LLAMA_CPP_DIR:-$HOME_DIR/llama.cpp}
"$ROOT/scripts/fetch-model.sh" >/dev/null
LLAMA_CPP_DIR="$LLAMA" "$ROOT/scripts/build-llama-cpp.sh" llama-bench

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), threads $THREADS"
echo "llama.cpp: $(cat "$LLAMA/VERSION") ($LLAMA)"
ISA_FLAGS=()
[ -n "${ISA:-}" ] && ISA_FLAGS=(--cpu-isa "$ISA")
bins=("$LLMCTL")
[ -n "${LLMCTL_BASE:-}" ] && bins+=("$LLMCTL_BASE")
for round in $(seq "$ROUNDS"); do
  for d in $DEPTHS; do
    if [ "${PREFILL:-0}" = 1 ]; then
      for bin in "${bins[@]}"; do
        "$bin" bench latency -m "$GGUF" -t "$THREADS" --input-len "$d" --output-len 1 --repetitions 1 --warmup 1 \
          --no-progress "${ISA_FLAGS[@]}" --json - 2>/dev/null |
          python3 -c "import json,sys; r=json.load(sys.stdin)['rows'][0]; print(f\"round $round prompt $d llmctl ($bin): prefill {r['pp_tok_s_median']:.1f} tok/s\")"
      done
      "$LLAMA/build/bin/llama-bench" -m "$GGUF" -t "$THREADS" -p "$d" -n 0 -r 1 -o csv 2>/dev/null |
        python3 -c "import csv,sys; r=list(csv.DictReader(sys.stdin))[-1]; print(f\"round $round prompt $d llama.cpp: prefill {float(r['avg_ts']):.1f} tok/s\")"
    fi
    for kv in ${KV_DTYPES:-auto int8}; do
      for bin in "${bins[@]}"; do
        "$bin" bench latency -m "$GGUF" -t "$THREADS" --input-len "$d" --output-len "$TG" --repetitions 1 --warmup 0 \
          --no-progress --kv-cache-dtype "$kv" "${ISA_FLAGS[@]}" --json - 2>/dev/null |
          python3 -c "import json,sys; r=json.load(sys.stdin)['rows'][0]; print(f\"round $round depth $d llmctl ($bin) kv $kv: decode {1000 / r['tpot_ms_median']:.1f} tok/s\")"
      done
    done
    "$LLAMA/build/bin/llama-bench" -m "$GGUF" -t "$THREADS" -p 0 -n "$TG" -d "$d" -r 1 -o csv 2>/dev/null |
      python3 -c "import csv,sys; r=list(csv.DictReader(sys.stdin))[-1]; print(f\"round $round depth $d llama.cpp: decode {float(r['avg_ts']):.1f} tok/s\")"
  done
done
