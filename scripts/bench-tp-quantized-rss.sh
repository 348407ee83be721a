#!/usr/bin/env bash
# Peak RSS of each tensor-parallel rank loading a quantized checkpoint whose row-parallel weight
# (down_proj) dominates: a random Llama with one layer, hidden 1024 and intermediate 65536
# (tools/llmctl_random_model, the default model's vocabulary), quantized int4 g64 RTN by
# `llmctl quantize`. Runs `generate -tp 2 -t 1 -n 4` with each llmctl given, alternating, REPS times,
# and prints every rank's peak RSS (GNU time), the load time and a digest of the text.
# Usage: scripts/bench-tp-quantized-rss.sh LLMCTL [LLMCTL...]   (e.g. a build of main before a change
# and one after). Environment: REPS (3), TP (2), MODEL_DIR (/tmp/llmctl-bench-tp-rss).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -ge 1 ] || { echo "usage: $0 LLMCTL [LLMCTL...]" >&2; exit 2; }
BUILD=${BUILD:-$ROOT/build}
REPS=${REPS:-3}
TP=${TP:-2}
DIR=${MODEL_DIR:-/tmp/llmctl-bench-tp-rss}
BASE="${LLMCTL_HOME:-$HOME/.cache/llmctl}/models/SmolLM2-135M-Instruct/hf"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$ROOT/scripts/fetch-model.sh" --dense >/dev/null
if [ ! -f "$DIR/w4g64/config.json" ]; then
  rm -rf "$DIR" && mkdir -p "$DIR"
  "$BUILD/llmctl_random_model" "$BASE" "$DIR/f32" --hidden 1024 --heads 8 --kv-heads 4 --layers 1 \
    --intermediate 65536 --seed 3 >/dev/null
  "$BUILD/llmctl" quantize "$DIR/f32" "$DIR/w4g64" --method rtn --bits 4 --group-size 64 >/dev/null
  rm -rf "$DIR/f32"
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); model $DIR/w4g64"
for rep in $(seq "$REPS"); do
  for bin in "$@"; do
    text=$(mpirun -np "$TP" --oversubscribe --bind-to none /usr/bin/time -f 'peak RSS %M KiB' "$bin" generate \
      -m "$DIR/w4g64" --device cpu -tp "$TP" -t 1 -n 4 --temperature 0 --ignore-eos "The quick brown fox" \
      2>/tmp/llmctl-tp-rss.err)
    echo "$bin rep $rep: $(grep -o 'peak RSS [0-9]* KiB' /tmp/llmctl-tp-rss.err |
      awk '{printf "%s%d MiB", (NR>1?" / ":"rank peak RSS "), $3/1024}'), $(grep -o 'load [0-9.]* s' \
      /tmp/llmctl-tp-rss.err | head -1), text $(echo "$text" | md5sum | cut -c1-8)"
  done
done
