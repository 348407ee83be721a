#!/usr/bin/env bash
# The quantize evidence of docs/PERFORMANCE.md: llmctl quantize (RTN, GPTQ, AWQ) on the default model
# beside llm-compressor on the same calibration token ids, all scored by the same `llmctl bench ppl`,
# with wall time and peak memory from /usr/bin/time -v.
#   scripts/bench-quantize.sh OUT_DIR [THREADS] [SAMPLES] [SEQ_LEN]
# Environment: LLMCTL_BIN (default build/llmctl); AWQ_SAMPLES (default 16); REF_PYTHON: a Python with torch, transformers,
# llmcompressor (without it the llm-compressor rows are left out); LLAMA_CPP=0 leaves out the llama.cpp rows
# (llama-quantize's Q8_0 / Q4_0 / Q4_K_M of the model's Q4_1 GGUF, built by scripts/build-llama-cpp.sh,
# LLAMA_CPP_DIR), scored by the same `bench ppl` and by llama-perplexity. Hours on 2 cores: AWQ dominates.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bench-quantize.sh OUT_DIR [THREADS] [SAMPLES] [SEQ_LEN]}
THREADS=${2:-2} SAMPLES=${3:-64} SEQ=${4:-512}
BIN=${LLMCTL_BIN:-build/llmctl}
MODEL=${LLMCTL_HOME:-$HOME/.cache/llmctl}/models/SmolLM2-135M-Instruct/hf
GGUF=$(dirname "$MODEL")/SmolLM2-135M-Instruct.Q4_1.gguf
CALIB=../shared/data/tinyshakespeare.txt TEXT=../shared/data/wikitext2-valid.txt
mkdir -p "$OUT"

timed() {  # NAME CMD...: runs CMD under /usr/bin/time -v into OUT/NAME.log
  local name=$1; shift
  rm -rf "${OUT:?}/$name"
  /usr/bin/time -v "$@" > "$OUT/$name.log" 2>&1
  echo "$name: $(grep -E 'Elapsed' "$OUT/$name.log" | awk '{print $NF}') wall, $(grep -E 'Maximum resident' "$OUT/$name.log" | awk '{print $NF}') KB peak"
}
ppl() {  # DIR [FLAGS...]: perplexity of 4096 wikitext tokens
  local d=$1; shift
  "$BIN" bench ppl -m "$d" --text "$TEXT" --ctx 512 --stride 256 --max-tokens 4096 --threads "$THREADS" --no-progress "$@" \
    2>/dev/null | grep -A2 "mean NLL" | tail -1 | awk -F'|' '{gsub(/ /, "", $8); print $8}'
}
Q=("$BIN" quantize "$MODEL")  # then OUT/NAME and the flags (/usr/bin/time runs programs, not functions)

echo "f32: ppl $(ppl "$MODEL")"
if [ "${LLAMA_CPP:-1}" = 1 ]; then
  # llama-perplexity: its own windows (512-token chunks, second half of each scored), 8 chunks
  LLAMA=${LLAMA_CPP_DIR:-${LLMCTL_HOME:-$HOME/.cache/llmctl}/llama.cpp}
  scripts/build-llama-cpp.sh llama-quantize llama-perplexity
  lppl() { "$LLAMA/build/bin/llama-perplexity" -m "$1" -f "$TEXT" -c 512 --chunks 8 -t "$THREADS" 2>&1 |
           grep -o 'Final estimate: PPL = [0-9.]*' | awk '{print $NF}'; }
  echo "llama.cpp Q4_1 (the model's own GGUF): ppl $(ppl "$GGUF"), llama-perplexity $(lppl "$GGUF")"
  for t in Q8_0 Q4_0 Q4_K_M; do
    "$LLAMA/build/bin/llama-quantize" --allow-requantize "$GGUF" "$OUT/llama-$t.gguf" "$t" "$THREADS" > "$OUT/llama-$t.log" 2>&1
    echo "llama.cpp $t (llama-quantize of the Q4_1 GGUF): ppl $(ppl "$OUT/llama-$t.gguf"), llama-perplexity $(lppl "$OUT/llama-$t.gguf")"
  done
fi
for cfg in "rtn-int8:--bits 8 --group-size -1" "rtn-g64-sym:--group-size 64" "rtn-g32-sym:--group-size 32" \
           "rtn-g64-asym:--group-size 64 --asym" "rtn-g32-asym:--group-size 32 --asym"; do
  name=${cfg%%:*}
  timed "$name" "${Q[@]}" "$OUT/$name" --method rtn ${cfg#*:} --threads "$THREADS"
  echo "  ppl $(ppl "$OUT/$name")"
done
CAL=(--calib "$CALIB" --calib-seq-len "$SEQ" --threads "$THREADS")
timed gptq "${Q[@]}" "$OUT/gptq" --method gptq --group-size 64 "${CAL[@]}" --calib-samples "$SAMPLES" \
  --calib-dump "$OUT/calib.jsonl"
echo "  ppl $(ppl "$OUT/gptq")"
# AWQ on the first AWQ_SAMPLES of the same draw (its grid search is the slow part), searched on all of them
AWQ_N=${AWQ_SAMPLES:-16}
head -n "$AWQ_N" "$OUT/calib.jsonl" > "$OUT/calib-awq.jsonl"
timed awq "${Q[@]}" "$OUT/awq" --method awq --asym --group-size 64 "${CAL[@]}" --calib-samples "$AWQ_N" \
  --awq-search-samples 0
echo "  ppl $(ppl "$OUT/awq")"
timed kv-fp8 "${Q[@]}" "$OUT/kv-fp8" --method rtn --bits 8 --group-size -1 --kv-cache fp8 "${CAL[@]}" --calib-samples 16
for kv in auto int8 fp8; do echo "  int8 weights, --kv-cache-dtype $kv: ppl $(ppl "$OUT/kv-fp8" --kv-cache-dtype "$kv")"; done

if [ -n "${REF_PYTHON:-}" ]; then
  REF=scripts/quant-reference-llmcompressor.py
  timed ref-gptq "$REF_PYTHON" $REF "$MODEL" "$OUT/calib.jsonl" "$OUT/ref-gptq" --method gptq --actorder none --threads "$THREADS"
  echo "  ppl $(ppl "$OUT/ref-gptq")"
  timed ref-awq "$REF_PYTHON" $REF "$MODEL" "$OUT/calib-awq.jsonl" "$OUT/ref-awq" --method awq --asym --threads "$THREADS"
  echo "  ppl $(ppl "$OUT/ref-awq")"
fi
