#!/usr/bin/env bash
# gpu-carry: prepares, on a dev machine, what a GPU machine without a package registry needs to run
# scripts/gpu-check.sh: a CUDA build (sm_90a unless CUDA_ARCHS says otherwise; BUILD_DIR, default
# build-gpu), its binaries stripped, the shared libraries they link beyond the C/C++ runtime and
# CUDA, Open MPI's launcher (the multi-rank checks), WikiText-2 (perplexity) and the default model's
# config and tokenizer (gpu-check's formats stage), all in one xz tarball, and the default model's
# GGUF. A transfer holds at most 64 MiB, the repository's own files included, so this is cut into
# parts: .carry/a (the tarball and the model's first bytes), .carry/b, .carry/c, ... (the rest of the
# model; three parts in all for the default model beside this repository, one call each: two parts
# together are over a call's limit).
# On the GPU machine (repository root), one call per part, back to back (a machine keeps what
# earlier calls left only while it stays warm, 30 s after a call; start again from a if it went back):
#
#   carry .carry/a:  scripts/gpu-carry.sh --unpack && LD_LIBRARY_PATH=$PWD/.carry/a/lib \
#                      GPU_CHECK_STAGES="tests bench formats" scripts/gpu-check.sh .carry/a/build-gpu
#                    (the GPU tests, micro-benchmarks and formats need no model: the first calls run them)
#   carry .carry/b:  (the next part; any stage that needs no model may run meanwhile)
#   carry .carry/c:  scripts/gpu-carry.sh --unpack && LD_LIBRARY_PATH=$PWD/.carry/a/lib \
#                      GPU_CHECK_STAGES="golden batching nccl pipeline quantized cpu-threads" \
#                      scripts/gpu-check.sh .carry/a/build-gpu
# (bench/results/h200-gpu-check/README.md has the calls as the H200 run made them.)
#
# The tarball also holds llama.cpp's AVX2 build (.carry/a/llama-avx2): gpu-check's cpu-threads stage
# (thread scaling on the GPU machine's cores, with the model) runs it beside llmctl --cpu-isa avx2.
# --unpack extracts the tarball (once) and, when every part is there, joins the model into
# $LLMCTL_HOME (default ~/.cache/llmctl); with parts missing it says which and still exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
HOME_DIR=${LLMCTL_HOME:-$HOME/.cache/llmctl}
MODEL_REL=models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf

if [[ "${1:-}" == "--unpack" ]]; then
  if [[ -f .carry/a/bins.tar.xz && ! -d .carry/a/build-gpu ]]; then  # python: the image may lack xz
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' .carry/a/bins.tar.xz .carry/a
    echo "gpu-carry: binaries, libraries and Open MPI in .carry/a"
  fi
  [[ -d .carry/a/build-gpu ]] || { echo "gpu-carry: .carry/a is not here (carry it first)" >&2; exit 2; }
  missing=$(for p in $(cat .carry/a/parts); do [[ -f .carry/$p/model.part-$p ]] || echo "$p"; done)
  if [[ -n "$missing" ]]; then
    echo "gpu-carry: model parts not here yet: $(echo $missing)"
    exit 0
  fi
  mkdir -p "$(dirname "$HOME_DIR/$MODEL_REL")"
  for p in $(cat .carry/a/parts); do cat ".carry/$p/model.part-$p"; done >"$HOME_DIR/$MODEL_REL"
  echo "gpu-carry: model at $HOME_DIR/$MODEL_REL ($(stat -c %s "$HOME_DIR/$MODEL_REL") bytes)"
  exit 0
fi

BUILD=${BUILD_DIR:-build-gpu}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLMCTL_CUDA=ON \
  -DLLMCTL_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90a}" >/dev/null
cmake --build "$BUILD" -j "$(nproc)"
MODEL="$HOME_DIR/$MODEL_REL"
[[ -f "$MODEL" ]] || { echo "gpu-carry: $MODEL missing (scripts/fetch-model.sh)" >&2; exit 2; }

rm -rf .carry/? .carry/rest.* .carry/mpi .carry/stage
st=.carry/stage  # what the tarball holds: build-gpu/, lib/, mpi/
mkdir -p "$st/build-gpu/tests" "$st/lib" .carry/a
bins=(llmctl llmctl_score llmctl_gpu_bench llmctl_tokenize llmctl_random_model llmctl_thread_pool_bench
      tests/llmctl_gpu_tests)
for b in "${bins[@]}"; do strip -o "$st/build-gpu/$b" "$BUILD/$b"; done
# Libraries beyond libc/libstdc++, OpenSSL, zlib and CUDA (the GPU image has those; carrying them would
# also reach its python3 through LD_LIBRARY_PATH), as this machine resolves them.
skip_libs='/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libssl|libcrypto|libz)\.so|/libcu|/libnccl|/libnvidia'
for b in "${bins[@]}"; do ldd "$BUILD/$b"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -v -E "$skip_libs" |
  while read -r lib; do cp -L "$lib" "$st/lib/"; done
# Open MPI's launcher (the GPU image has none), for the multi-rank checks: mpirun/orted, their
# plugins and help files under a prefix of their own (Open MPI relocates to OPAL_PREFIX; gpu-check.sh
# sets it when it finds .carry/a/mpi), their libraries in deps.
if command -v orterun >/dev/null; then
  ompi_path() { ompi_info --path "$1" 2>/dev/null | sed -n 's/.*: *//p'; }
  prefix=$(ompi_path prefix) libdir=$(ompi_path libdir) pkglib=$(ompi_path pkglibdir) data=$(ompi_path pkgdatadir)
  o=$st/mpi
  mkdir -p "$o/bin" "$o/deps" "$o${libdir#"$prefix"}" "$o$(dirname "${data#"$prefix"}")"
  cp "$(command -v orterun)" "$(command -v orted)" "$o/bin/" && cp "$o/bin/orterun" "$o/bin/mpirun"  # no links: a carry drops them
  cp -r "$pkglib" "$o${libdir#"$prefix"}/"
  cp -r "$data" "$o$(dirname "${data#"$prefix"}")/"
  for f in "$o/bin/orterun" "$o/bin/orted" "$pkglib"/*.so "$(ldconfig -p | awk '/libmpi.so.40 /{print $NF; exit}')"; do
    ldd "$f"
  done | awk '$3 ~ /^\// {print $3}' | sort -u | grep -v -E "$skip_libs" | while read -r lib; do cp -L "$lib" "$o/deps/"; done
fi
# The default model's config and tokenizer (no weights): gpu-check's formats stage makes small random
# models from them, quantized several ways, without waiting for the model's parts.
hf=$HOME_DIR/models/SmolLM2-135M-Instruct/hf
if [[ -f "$hf/tokenizer.json" ]]; then
  mkdir -p "$st/base"
  for f in config.json generation_config.json tokenizer.json tokenizer_config.json; do
    [[ -f "$hf/$f" ]] && cp "$hf/$f" "$st/base/"
  done
fi
# WikiText-2 for gpu-check's perplexity runs (../shared does not travel).
data=${SHARED_DATA:-../shared/data}/wikitext2-valid.txt
[[ -f "$data" ]] && mkdir -p "$st/data" && cp "$data" "$st/data/"
# llama.cpp built for AVX2 alone (llama-bench, llama-quantize and their libraries; CARRY_LLAMA=0: not),
# the baseline of gpu-check's cpu-threads stage on the GPU machine's cores, whatever CPU that is.
if [[ "${CARRY_LLAMA:-1}" == 1 ]]; then
  llama=${LLAMA_AVX2_DIR:-$HOME_DIR/llama-avx2}
  LLAMA_CPU=avx2 LLAMA_CPP_DIR="$llama" scripts/build-llama-cpp.sh llama-bench llama-quantize
  mkdir -p "$st/llama-avx2"
  for b in llama-bench llama-quantize; do strip -o "$st/llama-avx2/$b" "$llama/build/bin/$b"; done
  for b in llama-bench llama-quantize; do ldd "$llama/build/bin/$b"; done | awk '$3 ~ /^\// {print $1, $3}' | sort -u |
    grep -v -E "$skip_libs" | while read -r name lib; do  # under the name the loader asks for (no links)
      strip --strip-unneeded -o "$st/llama-avx2/$name" "$lib"
    done
fi
# One thread and a 64 MiB dictionary: the binaries share most of their code, and xz then stores it once.
tar -C "$st" -cf - . | xz -T1 -9e >.carry/a/bins.tar.xz
rm -rf "$st"
# The model: what fits beside the tarball in a, the rest in b, c, ... A call carries the repository's
# own files (tracked, and untracked ones git does not ignore) beside its part, all under 64 MiB.
repo=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- | tail -1 | cut -f1)
limit=$((64 * 1024 * 1024 - repo - 1024 * 1024))  # 1 MiB to spare for folders and changes made later
((limit > 8 * 1024 * 1024)) || { echo "gpu-carry: the repository's files ($repo bytes) leave no room" >&2; exit 1; }
room=$((limit - $(du -sb .carry/a | cut -f1) - 65536))  # the part folder itself counts too
((room > 0)) || room=0                                   # the tarball fills a: the model starts in b
head -c "$room" "$MODEL" >.carry/a/model.part-a
tail -c +$((room + 1)) "$MODEL" | split -b $((limit - 65536)) -a 1 - .carry/rest.
parts=(a)
letters=(b c d e f g h)
for f in .carry/rest.*; do
  p=${letters[${#parts[@]} - 1]}
  mkdir -p ".carry/$p" && mv "$f" ".carry/$p/model.part-$p" && parts+=("$p")
done
echo "${parts[*]}" >.carry/a/parts
for p in "${parts[@]}"; do
  size=$(du -sb ".carry/$p" | cut -f1)
  echo "gpu-carry: .carry/$p $((size / 1024 / 1024)) MiB"
  ((size <= limit)) || { echo "gpu-carry: .carry/$p is over $limit bytes" >&2; exit 1; }
done
echo "gpu-carry: ready in ${#parts[@]} parts (${parts[*]}), $limit bytes at most each beside the repository's $repo"
