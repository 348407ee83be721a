#!/usr/bin/env bash
# CPU speed of a mixture of experts: llmctl beside llama.cpp's llama-bench on the same GGUFs, same
# thread count. The model is random (llmctl_random_model, seeded) with realistic proportions: a
# Qwen3-MoE of 16 layers, hidden 1024, 32 experts of width 512, 4 routed per token (~1.0 B
# parameters, ~0.2 B active), SmolLM2's vocabulary; written to GGUF by llama.cpp's own
# convert_hf_to_gguf.py (f16), then quantized by llama-quantize to Q8_0 and Q4_K_M.
# Also prints the bytes a decoded token reads at least: the active parameters' (attention, norms,
# router, the routed experts' share, lm_head) in each file's types.
# llama.cpp is built by scripts/build-llama-cpp.sh; the converter needs torch (PYTHON: an
# interpreter that has it; default python3).
# Usage: scripts/bench-moe.sh [THREADS] [PROMPT_TOKENS] [GEN_TOKENS]   (defaults: nproc 128 64)
# Environment: OUT (default /tmp/llmctl-bench-moe) holds the model and GGUFs; EXPERTS, TOPK, LAYERS,
# HIDDEN, MOE_WIDTH change the shape.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
THREADS=${1:-$(nproc)}
PP=${2:-128}
TG=${3:-64}
HOME_DIR=${LLMCTL_HOME:-$HOME/.cache/llmctl}
BASE="$HOME_DIR/models/SmolLM2-135M-Instruct/hf"
LLMCTL=${LLMCTL_BIN:-$ROOT/build/llmctl}
LLAMA=${LLAMA_CPP_DIR:-$HOME_DIR/llama.cpp}
PYTHON=${PYTHON:-python3}
OUT=${OUT:-/tmp/llmctl-bench-moe}
EXPERTS=${EXPERTS:-32} TOPK=${TOPK:-4} LAYERS=${LAYERS:-16} HIDDEN=${HIDDEN:-1024} MOE_WIDTH=${MOE_WIDTH:-512}

"$ROOT/scripts/fetch-model.sh" --dense
LLAMA_CPP_DIR="$LLAMA" "$ROOT/scripts/build-llama-cpp.sh" llama-bench llama-quantize
mkdir -p "$OUT"
if [ ! -f "$OUT/hf/config.json" ]; then
  "$(dirname "$LLMCTL")/llmctl_random_model" "$BASE" "$OUT/hf" --hidden "$HIDDEN" --heads 16 --kv-heads 4 \
    --layers "$LAYERS" --intermediate $((4 * MOE_WIDTH)) --seed 7 --stddev 0.02 \
    --set 'architectures=["Qwen3MoeForCausalLM"]' --set 'model_type="qwen3_moe"' --set "num_experts=$EXPERTS" \
    --set "num_experts_per_tok=$TOPK" --set "moe_intermediate_size=$MOE_WIDTH" --set 'norm_topk_prob=true' \
    --set 'tie_word_embeddings=false' --set 'head_dim=64'
fi
if [ ! -f "$OUT/moe-f16.gguf" ]; then
  "$PYTHON" "$LLAMA/src/convert_hf_to_gguf.py" "$OUT/hf" --outtype f16 --outfile "$OUT/moe-f16.gguf" >/dev/null 2>&1
fi
for t in Q8_0 Q4_K_M; do
  [ -f "$OUT/moe-$t.gguf" ] || "$LLAMA/build/bin/llama-quantize" "$OUT/moe-f16.gguf" "$OUT/moe-$t.gguf" "$t" >/dev/null 2>&1
done

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), threads $THREADS"
echo "llama.cpp: $(cat "$LLAMA/VERSION")"
"$PYTHON" - "$OUT" "$TOPK" <<'PY'
import sys
sys.path.insert(0, __import__("os").path.expanduser("~/.cache/llmctl/llama.cpp/src/gguf-py"))
import gguf
out, topk = sys.argv[1], int(sys.argv[2])
for t in ("Q8_0", "Q4_K_M"):
    r = gguf.GGUFReader(f"{out}/moe-{t}.gguf")
    total = active = 0
    E = int(r.fields["qwen3moe.expert_count"].parts[-1][0])
    for x in r.tensors:
        n = int(x.n_bytes)
        total += n
        if "_exps" in x.name:
            active += n * topk // E
        elif x.name != "token_embd.weight":
            active += n
    print(f"moe-{t}.gguf: {total / 1e9:.2f} GB of weights; a decoded token reads at least {active / 1e6:.0f} MB "
          f"(attention, norms, routers, {topk} of {E} experts, lm_head)")
PY
PROMPT=$(head -c 20000 "$ROOT/../shared/data/wikitext2-valid.txt" | tr -s ' \n' ' ' | cut -c1-$((PP * 4)))
for t in Q8_0 Q4_K_M; do
  for rep in 1 2 3; do
    "$LLMCTL" generate --model "$OUT/moe-$t.gguf" -t "$THREADS" --temperature 0 --ignore-eos -n "$TG" --json "$PROMPT" \
      2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin); print(f\"llmctl $t rep $rep: prompt {j['prompt_tokens']} tok, prefill {j['prefill_tokens_per_second']:.1f} tok/s, decode {j['decode_tokens_per_second']:.1f} tok/s\")"
  done
  "$LLAMA/build/bin/llama-bench" -m "$OUT/moe-$t.gguf" -t "$THREADS" -p "$PP" -n "$TG" -r 3 -o md | tail -n +3
done
