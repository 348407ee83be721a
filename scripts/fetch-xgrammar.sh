#!/usr/bin/env bash
# Fetches xgrammar's source (the grammar engine behind structured output: its C++ core, built by
# CMakeLists.txt as a static library without its Python bindings) from its PyPI source package at a
# pinned version, checks the archive's SHA-256 and unpacks it into $LLMCTL_HOME/src/ (default
# ~/.cache/llmctl). Never committed. Idempotent. Prints the source directory.
# Usage: scripts/fetch-xgrammar.sh
set -euo pipefail
VERSION="0.2.8"
SHA256="8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80"
HOME_DIR=${LLMCTL_HOME:-$HOME/.cache/llmctl}
DEST="$HOME_DIR/src/xgrammar-$VERSION"

if [ ! -f "$DEST/.llmctl-verified" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "fetch-xgrammar: downloading the xgrammar==$VERSION source package (pip)" >&2
  # --no-binary: the source archive, not a wheel; pip prepares its metadata with the package's own
  # build backend (wheels), which compiles nothing.
  python3 -m pip download --quiet --no-deps --no-binary xgrammar -d "$tmp" "xgrammar==$VERSION" >&2
  archive="$tmp/xgrammar-$VERSION.tar.gz"
  echo "$SHA256  $archive" | sha256sum -c --status || {
    echo "fetch-xgrammar: checksum mismatch for xgrammar-$VERSION.tar.gz" >&2; exit 1; }
  mkdir -p "$HOME_DIR/src"
  rm -rf "$DEST" "$DEST.part"
  mkdir "$DEST.part"
  tar -xzf "$archive" -C "$DEST.part" --strip-components=1
  touch "$DEST.part/.llmctl-verified"
  mv "$DEST.part" "$DEST"
fi
echo "$DEST"
