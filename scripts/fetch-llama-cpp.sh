#!/usr/bin/env bash
# Fetches llama.cpp's source from the llama-cpp-python source package on PyPI (its vendored
# llama.cpp) into $LLAMA_CPP_DIR/src (default $LLMCTL_HOME/llama.cpp/src), once. It holds the
# baseline tools' source (scripts/build-llama-cpp.sh builds them), its GGUF converter, and the
# tokenizer test vectors (models/ggml-vocab-*.gguf with .inp/.out) that tests/e2e/test_llama_cpp_vocabs.py
# checks llmctl's tokenizers against.
# Usage: scripts/fetch-llama-cpp.sh
set -euo pipefail
LLAMA=${LLAMA_CPP_DIR:-${LLMCTL_HOME:-$HOME/.cache/llmctl}/llama.cpp}
[ -f "$LLAMA/src/CMakeLists.txt" ] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --disable-pip-version-check --no-deps --no-binary=:all: -d "$tmp" llama-cpp-python
mkdir -p "$LLAMA"
tar xzf "$tmp"/llama_cpp_python-*.tar.gz -C "$tmp"
rm -rf "$LLAMA/src"
mv "$tmp"/llama_cpp_python-*/vendor/llama.cpp "$LLAMA/src"
basename "$tmp"/llama_cpp_python-*.tar.gz > "$LLAMA/VERSION"
