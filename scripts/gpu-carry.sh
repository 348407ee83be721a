#!/usr/bin/env bash
# gpu-carry: prepares, on a dev machine, what a GPU machine without a package registry needs to run
# scripts/gpu-check.sh: a CUDA build (sm_90a unless CUDA_ARCHS says otherwise), stripped, the shared
# libraries it links beyond the C/C++ runtime and CUDA, and the default model's GGUF. A transfer to
# the GPU machine holds at most 64 MiB, so everything is cut into parts .carry/a, .carry/b, ...
# (binaries and libraries in a, the model spread over the rest), plus .carry/mpi (Open MPI's
# launcher, for the multi-rank checks), one call carrying each; the last call puts the model back
# together and runs the check:
#
#   scripts/gpu-carry.sh            then, on the GPU machine (repository root), one call per part:
#   carry .carry/a:  true                       (and the same for .carry/mpi and every part but the last)
#   carry the last:  scripts/gpu-carry.sh --unpack && LD_LIBRARY_PATH=$PWD/.carry/a/lib \
#                    scripts/gpu-check.sh .carry/a/build-gpu
# A machine keeps what earlier calls left only while it stays warm (30 s after a call): make the
# calls back to back, and start again from a if it went back. --unpack joins the model parts into
# $LLMCTL_HOME (default ~/.cache/llmctl).
set -euo pipefail
cd "$(dirname "$0")/.."
HOME_DIR=${LLMCTL_HOME:-$HOME/.cache/llmctl}
MODEL_REL=models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf

if [[ "${1:-}" == "--unpack" ]]; then
  mkdir -p "$(dirname "$HOME_DIR/$MODEL_REL")"
  cat .carry/?/model.part-? >"$HOME_DIR/$MODEL_REL"  # a, b, c, ... in order
  echo "gpu-carry: model at $HOME_DIR/$MODEL_REL ($(stat -c %s "$HOME_DIR/$MODEL_REL") bytes)"
  exit 0
fi

BUILD=${BUILD_DIR:-build-gpu}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLMCTL_CUDA=ON \
  -DLLMCTL_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90a}" >/dev/null
cmake --build "$BUILD" -j "$(nproc)"
MODEL="$HOME_DIR/$MODEL_REL"
[[ -f "$MODEL" ]] || { echo "gpu-carry: $MODEL missing (scripts/fetch-model.sh)" >&2; exit 2; }

rm -rf .carry/? .carry/rest.*
mkdir -p .carry/a/build-gpu/tests .carry/a/lib
bins=(llmctl llmctl_score llmctl_gpu_bench llmctl_tokenize tests/llmctl_gpu_tests)
for b in "${bins[@]}"; do strip -o ".carry/a/build-gpu/$b" "$BUILD/$b"; done
# Libraries beyond libc/libstdc++, OpenSSL, zlib and CUDA (the GPU image has those; carrying them would
# also reach its python3 through LD_LIBRARY_PATH), as this machine resolves them.
skip_libs='/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libssl|libcrypto|libz)\.so|/libcu|/libnccl|/libnvidia'
for b in "${bins[@]}"; do ldd "$BUILD/$b"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -v -E "$skip_libs" |
  while read -r lib; do cp -L "$lib" .carry/a/lib/; done
# Open MPI's launcher (the GPU image has none), for the multi-rank checks, in a part of its own
# (.carry/mpi): mpirun/orted, their plugins and help files under a prefix of their own (Open MPI
# relocates to OPAL_PREFIX; gpu-check.sh sets it when it finds .carry/mpi), their libraries in deps.
rm -rf .carry/mpi
if command -v orterun >/dev/null; then
  ompi_path() { ompi_info --path "$1" 2>/dev/null | sed -n 's/.*: *//p'; }
  prefix=$(ompi_path prefix) libdir=$(ompi_path libdir) pkglib=$(ompi_path pkglibdir) data=$(ompi_path pkgdatadir)
  o=.carry/mpi
  mkdir -p "$o/bin" "$o/deps" "$o${libdir#"$prefix"}" "$o$(dirname "${data#"$prefix"}")"
  cp "$(command -v orterun)" "$(command -v orted)" "$o/bin/" && cp "$o/bin/orterun" "$o/bin/mpirun"  # no links: a carry drops them
  cp -r "$pkglib" "$o${libdir#"$prefix"}/"
  cp -r "$data" "$o$(dirname "${data#"$prefix"}")/"
  for f in "$o/bin/orterun" "$o/bin/orted" "$pkglib"/*.so "$(ldconfig -p | awk '/libmpi.so.40 /{print $NF; exit}')"; do
    ldd "$f"
  done | awk '$3 ~ /^\// {print $3}' | sort -u | grep -v -E "$skip_libs" | while read -r lib; do cp -L "$lib" "$o/deps/"; done
fi
# The model: what fits beside the binaries in a, the rest in b, c, ... (each part, with the
# repository's own files, stays under the transfer limit).
limit=$((58 * 1024 * 1024))
used=$(du -sb .carry/a | cut -f1)
room=$((limit - used - 65536))  # the part folder itself counts too
((room > 0)) || room=0           # the binaries fill a: the model starts in b
head -c "$room" "$MODEL" >.carry/a/model.part-a
tail -c +$((room + 1)) "$MODEL" | split -b $((limit - 65536)) -a 1 - .carry/rest.
parts=(a)
letters=(b c d e f g h)
for f in .carry/rest.*; do
  p=${letters[${#parts[@]} - 1]}
  mkdir -p ".carry/$p" && mv "$f" ".carry/$p/model.part-$p" && parts+=("$p")
done
for p in "${parts[@]}"; do
  size=$(du -sb ".carry/$p" | cut -f1)
  echo "gpu-carry: .carry/$p $((size / 1024 / 1024)) MiB"
  ((size <= limit)) || { echo "gpu-carry: .carry/$p is over $limit bytes" >&2; exit 1; }
done
echo "gpu-carry: ready in ${#parts[@]} parts (${parts[*]}); libraries carried: $(ls .carry/a/lib | tr '\n' ' ')"
[[ -d .carry/mpi ]] && echo "gpu-carry: Open MPI in .carry/mpi ($(du -sb .carry/mpi | cut -f1) bytes): carry it in a call of its own"

