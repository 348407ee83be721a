#!/usr/bin/env bash
# KV cache of a Gemma-3-4B-shaped model with its sliding-window layers in a pool of their own: the
# bytes a token takes in each pool, and the blocks one long sequence holds in each, measured.
# The model is random with Gemma 3 4B's KV bytes per token (34 layers, 5 of them global, a
# 1024-token window; its 4 KV heads of 256 as 8 of 128, the same bytes: the CPU's SIMD attention
# kernels stop at head size 128 and the portable one would take most of an hour here) and a small
# hidden size (the KV cache does not depend on it), made from the tiny Gemma 3 in
# tests/golden/families by build/llmctl_random_model.
# Usage: scripts/kv-window-report.sh [PROMPT_TOKENS]   (default 3072)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
N=${1:-3072}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
types=$(python3 -c 'import json; print(json.dumps(["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(34)]))')
"$ROOT/build/llmctl_random_model" "$ROOT/tests/golden/families/tiny_gemma3" "$W/gemma3-4b-kv" \
  --layers 34 --heads 8 --kv-heads 8 --hidden 64 --intermediate 128 \
  --set head_dim=128 --set query_pre_attn_scalar=256 --set sliding_window=1024 \
  --set max_position_embeddings=32768 --set "layer_types=$types" >/dev/null
# One prompt of N tokens (the tiny vocabulary is byte-level: one token per character here).
python3 -c "import json,sys; print(json.dumps({'prompt': 'ab' * ($N // 2), 'max_tokens': 16}))" >"$W/prompts.jsonl"
echo "kv-window-report: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(git -C "$ROOT" describe --always --dirty)"
"$ROOT/build/llmctl" generate --model "$W/gemma3-4b-kv" --prompts "$W/prompts.jsonl" --temperature 0 --ignore-eos \
  --kv-cache-gb 2 --max-num-batched-tokens 1024 2>&1 >/dev/null | grep -E "KV cache|peak KV|requests"
# The same cache as one pool for all 34 layers, and at 32k tokens, from the per-token sizes above (f32
# on the CPU; bf16 on a GPU halves every number).
python3 - <<'EOF'
layer_token = 2 * 4 * 256 * 4  # k and v, 4 KV heads of 256 (or 8 of 128), f32
full, sliding, window, B = 5, 29, 1024, 16
one_pool = 34 * layer_token * 32768
two_pools = full * layer_token * 32768 + sliding * layer_token * ((window + B - 1) // B + 1) * B
gib = 1 << 30
print(f"kv-window-report: one sequence of 32768 tokens, f32: one pool {one_pool / gib:.2f} GiB, "
      f"two pools {two_pools / gib:.2f} GiB (bf16: {one_pool / 2 / gib:.2f} and {two_pools / 2 / gib:.2f} GiB)")
EOF
