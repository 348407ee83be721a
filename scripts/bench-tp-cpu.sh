#!/usr/bin/env bash
# Tensor parallelism on CPU ranks: TP=2 (one thread a rank) against one rank (two threads) on the
# same machine. The default model's 9 heads do not split in two, so the model is a random Llama of
# the same family with 12 heads, 4 KV heads, hidden 768, 12 layers, intermediate 2048 and the
# default model's vocabulary (tools/llmctl_random_model; ~113 M parameters, f32). Reports per run:
# prefill / decode tokens/s (llmctl generate --json), peak RSS of every process (GNU time), and
# for TP=2 each rank's time inside all-reduce / all-gather (--comm-stats), divided by steps.
# Usage: scripts/bench-tp-cpu.sh [PROMPT_TOKENS] [GEN_TOKENS]   (defaults 128 64)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PP=${1:-128}
TG=${2:-64}
BUILD=${BUILD:-$ROOT/build}
HOME_DIR=${LLMCTL_HOME:-$HOME/.cache/llmctl}
BASE="$HOME_DIR/models/SmolLM2-135M-Instruct/hf"
MODEL=${MODEL:-/tmp/llmctl-bench-tp-model}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$ROOT/scripts/fetch-model.sh" --dense >/dev/null
[ -f "$MODEL/config.json" ] || "$BUILD/llmctl_random_model" "$BASE" "$MODEL" --hidden 768 --heads 12 --kv-heads 4 \
  --layers 12 --intermediate 2048 --seed 7
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); model $MODEL"
PROMPT=$(head -c 20000 "$ROOT/../shared/data/wikitext2-valid.txt" | tr -s ' \n' ' ' | cut -c1-$((PP * 4)))
summary() {  # reads generate --json on stdin
  python3 -c "import json,sys; j=json.load(sys.stdin); print(f\"prompt {j['prompt_tokens']} tok, prefill {j['prefill_tokens_per_second']:.1f} tok/s, decode {j['decode_tokens_per_second']:.1f} tok/s\")"
}
for rep in 1 2 3; do
  echo "TP=1 (2 threads) rep $rep: $(/usr/bin/time -f '%M' -o /tmp/llmctl-tp1.rss "$BUILD/llmctl" generate -m "$MODEL" \
    --device cpu -t 2 --temperature 0 --ignore-eos -n "$TG" --json "$PROMPT" 2>/dev/null | summary), peak RSS $(( $(cat /tmp/llmctl-tp1.rss) / 1024 )) MiB"
  mpirun -np 2 --oversubscribe --bind-to none /usr/bin/time -f 'peak RSS %M KiB' "$BUILD/llmctl" generate \
    -m "$MODEL" --device cpu -tp 2 -t 1 --comm-stats --temperature 0 --ignore-eos -n "$TG" --json "$PROMPT" \
    >/tmp/llmctl-tp2.json 2>/tmp/llmctl-tp2.err
  echo "TP=2 (1 thread a rank) rep $rep: $(summary </tmp/llmctl-tp2.json), $(grep -o 'peak RSS [0-9]* KiB' /tmp/llmctl-tp2.err \
    | awk '{printf "%s%d MiB", (NR>1?" / ":"rank peak RSS "), $3/1024}')"
  grep 'comm:' /tmp/llmctl-tp2.err | sed "s/^/  /; s/\$/ over $((TG + 1)) steps/"
done

# Offline throughput, where pipeline stages can overlap: by default one step a stage is in flight
# (the first stage starts the next step while the last finishes the previous one), and a large
# step is also cut into micro-batches. --pp-steps-in-flight 1 runs one step at a time (its
# micro-batches still overlap), --pp-micro-batches 1 turns the micro-batches off too.
tput() {  # INPUT OUTPUT PROMPTS LABEL ENV... -- FLAGS...
  local in=$1 out=$2 n=$3 label=$4; shift 4
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "$label: $(env "${envs[@]}" "$BUILD/llmctl" bench throughput -m "$MODEL" --device cpu --input-len "$in" \
    --output-len "$out" --num-prompts "$n" --max-num-batched-tokens 2048 "$@" 2>/dev/null |
    awk -F'|' '$2 ~ /[0-9]/ {printf "%s s, output %s tok/s, total %s tok/s, TTFT p50 %s ms, TPOT p50 %s ms", $5, $7, $8, $9, $10}' |
    tr -s ' ')"
}
for shape in "512 8 16" "32 64 64"; do
  read -r in out n <<<"$shape"
  echo "== bench throughput: $n prompts of $in tokens, $out generated each"
  for rep in 1 2; do
    tput $in $out $n "PP=1 TP=1 (2 threads) rep $rep" X=1 -- -t 2
    tput $in $out $n "PP=2 (1 thread a rank), steps in flight (default) rep $rep" X=1 -- -pp 2 -t 1
    tput $in $out $n "PP=2, one step at a time rep $rep" X=1 -- -pp 2 -t 1 --pp-steps-in-flight 1
    tput $in $out $n "PP=2, one step at a time, no micro-batches rep $rep" X=1 -- -pp 2 -t 1 \
      --pp-steps-in-flight 1 --pp-micro-batches 1
    tput $in $out $n "TP=2 (1 thread a rank) rep $rep" X=1 -- -tp 2 -t 1
  done
done
