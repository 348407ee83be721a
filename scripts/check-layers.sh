#!/usr/bin/env bash
# Layer check (ctest lint.layers, label cpu): every #include "..." in the sources must point to the
# same layer or to one below it, by DESIGN.md's arrows (the table CMakeLists.txt links by), and only
# engine/backend/ calls kernels (engine/core/ may include kernels/scalar_types.h, which it re-exports).
# Usage: scripts/check-layers.sh [ROOT]     checks the tree at ROOT (default: this repository)
#        scripts/check-layers.sh --self-test checks that a violating tree fails and a clean one passes
set -euo pipefail

# The layer a path belongs to; empty when the checker ignores it (tests/, tools/, scripts/).
layer_of() {
  case "$1" in
    kernels/*) echo kernels ;;
    quant/format/*) echo quant-format ;;
    quant/algo/*) echo quant-algo ;;
    engine/core/*) echo core ;;
    engine/backend/* | engine/model/*) echo model ;;
    engine/server/*) echo server ;;
    engine/*) echo engine ;;
    bench/*) echo bench ;;
    cli/*) echo cli ;;
    *) echo "" ;;
  esac
}

# Layers each layer may include (itself included), transitively closed.
allowed() {
  case "$1" in
    kernels) echo "kernels" ;;
    quant-format) echo "quant-format" ;;
    core) echo "core kernels" ;;
    model) echo "model core kernels quant-format" ;;
    engine) echo "engine model core kernels quant-format" ;;
    server | bench | quant-algo) echo "$1 engine model core kernels quant-format" ;;
    cli) echo "cli bench server quant-algo engine model core kernels quant-format" ;;
  esac
}

# Prints one line per violation under ROOT; returns 1 when there is any.
check_tree() {
  local root=$1 bad=0 file from inc to
  while IFS= read -r file; do
    from=$(layer_of "$file")
    [[ -n "$from" ]] || continue
    while IFS= read -r inc; do
      to=$(layer_of "$inc")
      [[ -n "$to" ]] || continue  # system, third-party or same-folder includes
      if [[ " $(allowed "$from") " != *" $to "* ]]; then
        echo "$file: includes $inc: layer $from may not include layer $to"
        bad=1
      elif [[ "$to" == kernels && "$from" != kernels && "$file" != engine/backend/* &&
              ! ("$file" == engine/core/* && "$inc" == kernels/scalar_types.h) ]]; then
        echo "$file: includes $inc: only engine/backend/ calls kernels"
        bad=1
      fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$root/$file")
  done < <(cd "$root" && find kernels quant engine bench cli -type f \
             \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | sort)
  return $bad
}

self_test() {
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$tmp"/{kernels/cpu,engine/core,engine/model,engine/sched,engine/backend,bench,cli}
  printf '#include "kernels/scalar_types.h"\n' >"$tmp/engine/core/dtype.h"
  printf '#include "engine/core/dtype.h"\n#include <vector>\n' >"$tmp/engine/model/model.h"
  printf '#include "kernels/cpu/linear.h"\n#include "engine/model/model.h"\n' >"$tmp/engine/backend/cpu.cpp"
  printf '#include "engine/model/model.h"\n' >"$tmp/bench/run.cpp"
  printf '#include "bench/run.h"\n' >"$tmp/cli/bench.cpp"
  if ! check_tree "$tmp" >/dev/null; then
    echo "self-test: a clean tree was reported"; check_tree "$tmp" || true; return 1
  fi
  printf '#include "engine/core/error.h"\n' >"$tmp/kernels/cpu/linear.h"           # kernels -> core
  printf '#include "engine/sched/request.h"\n' >>"$tmp/engine/model/model.h"      # model -> engine
  printf '#include "kernels/cpu/linear.h"\n' >"$tmp/engine/sched/batch.cpp"       # not a backend
  printf '#include "cli/commands.h"\n' >>"$tmp/bench/run.cpp"                      # bench -> cli
  local out n
  out=$(check_tree "$tmp" || true)
  n=$(grep -c . <<<"$out" || true)
  if [[ "$n" != 4 ]]; then
    echo "self-test: expected 4 violations, got $n:"; echo "$out"; return 1
  fi
  echo "self-test: 4 planted violations found, clean tree passed"
}

if [[ "${1:-}" == --self-test ]]; then
  self_test
  exit
fi
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
if check_tree "$root"; then
  echo "check-layers: includes follow the layers"
else
  echo "check-layers: layer violations above (see CMakeLists.txt's layer table and DESIGN.md)"
  exit 1
fi
