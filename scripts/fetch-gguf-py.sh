#!/usr/bin/env bash
# Fetches the Python `gguf` package (GGML's own GGUF reader and writer) at a pinned version from its
# PyPI wheel, checks the archive's SHA-256 and unpacks its quants.py into $LLMCTL_HOME/src/ (default
# ~/.cache/llmctl). The build reads the IQ formats' grids from it (scripts/gen-iq-grids.py): they
# are tables of data, not derived, so they come from the format's own package, not a copy in this
# tree. Never committed. Idempotent. Prints the path of quants.py.
# Usage: scripts/fetch-gguf-py.sh
set -euo pipefail
VERSION="0.19.0"
SHA256="70bcd10edfe697fb2dad6e40af2234b9d8ece9a41a99761405121ebda1c3c1cd"
HOME_DIR=${LLMCTL_HOME:-$HOME/.cache/llmctl}
DEST="$HOME_DIR/src/gguf-py-$VERSION"

if [ ! -f "$DEST/.llmctl-verified" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "fetch-gguf-py: downloading the gguf==$VERSION wheel (pip)" >&2
  python3 -m pip download --quiet --no-deps --only-binary :all: -d "$tmp" "gguf==$VERSION" >&2
  archive="$tmp/gguf-$VERSION-py3-none-any.whl"
  echo "$SHA256  $archive" | sha256sum -c --status || {
    echo "fetch-gguf-py: checksum mismatch for gguf-$VERSION-py3-none-any.whl" >&2; exit 1; }
  mkdir -p "$HOME_DIR/src"
  rm -rf "$DEST" "$DEST.part"
  mkdir "$DEST.part"
  python3 - "$archive" "$DEST.part" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    with open(sys.argv[2] + "/quants.py", "wb") as f:
        f.write(z.read("gguf/quants.py"))
PY
  touch "$DEST.part/.llmctl-verified"
  mv "$DEST.part" "$DEST"
fi
echo "$DEST/quants.py"
