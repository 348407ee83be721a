#!/usr/bin/env bash
# Runs the whole test suite: builds (Release, CUDA code compiled where nvcc exists), installs the
# Python reference packages the tests compare against, runs every ctest (GPU tests report
# "skipped" without a GPU), then rebuilds with AddressSanitizer + UBSan and runs the unit tests
# (malformed checkpoint files among them) and the fuzz corpus replays under the sanitizers.
# Usage: scripts/test.sh [--no-sanitize]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=$(nproc)

# References written by others: HF tokenizers / transformers (tokenizer), gguf (dequantization),
# jinja2 (chat templates), openai (the server), jsonschema (structured output), huggingface_hub (its cache layout). No torch is needed to run the tests.
python3 -m pip install --quiet --disable-pip-version-check tokenizers transformers gguf numpy jinja2 openai jsonschema huggingface_hub 2>&1 \
  | grep -v -i "warning: running pip as" || true

# CUDA code is compiled wherever nvcc is (so its compile errors are caught without a GPU), unless
# LLMCTL_CUDA=OFF says otherwise; setup.sh leaves it out on a machine without a GPU.
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLMCTL_CUDA="${LLMCTL_CUDA:-AUTO}" ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "test.sh: built in ${SECONDS} s"
# The default model's GGUF and its dense f32 copy, which the exactness tests run.
LLMCTL_BIN="$PWD/$BUILD_DIR/llmctl" scripts/fetch-model.sh --dense
# llama.cpp's source: its tokenizer test vectors (a test reports skipped without them).
scripts/fetch-llama-cpp.sh || echo "test.sh: llama.cpp's source could not be fetched; its vocab tests will skip"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
echo "test.sh: tests passed at ${SECONDS} s"

if [ "${1:-}" != "--no-sanitize" ]; then
  source scripts/sanitizer-pass.sh
  sanitizer_build "$BUILD_DIR-asan" "$JOBS"
  sanitizer_tests "$BUILD_DIR-asan" "$JOBS"
fi
echo "test.sh: all tests passed (${SECONDS} s)"
