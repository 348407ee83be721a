#!/usr/bin/env python3
"""Layer check: DESIGN.md's arrows (down only), on sources and on the built libraries.

  check_layers.py includes [ROOT]   every #include "..." under kernels/ quant/ engine/ server/ bench/ cli/
                                    tools/ points to its own layer or one below it, and only
                                    engine/backend/ calls kernels (engine/core/ may include
                                    kernels/scalar_types.h, which it re-exports; the kernel
                                    benchmarks tools/*_bench.cpp time kernels directly, as tests do).
                                    ctest lint.layers.
  check_layers.py symbols BUILD     no layer's static library (libllmctl_<layer>.a) takes a symbol
                                    that only a library above it defines (nm). A static link can
                                    hide such a reference when the upper object happens to be pulled
                                    in already; this check cannot be fooled that way. ctest
                                    lint.layer_symbols (exit 77, skipped, when the libraries are
                                    not built).
  check_layers.py self-test         plants violations in a scratch tree and in scratch libraries and
                                    checks each is reported, and that clean ones pass.

The table below is the one CMakeLists.txt links by; change both together.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

BELOW = {  # layer -> the layers it may use (itself included), transitively closed
    "kernels": {"kernels"},
    "quant-format": {"quant-format"},
    "core": {"core", "kernels"},
    "model": {"model", "core", "kernels", "quant-format"},
    "engine": {"engine", "model", "core", "kernels", "quant-format"},
}
for upper in ("server", "bench", "quant-algo"):
    BELOW[upper] = {upper} | BELOW["engine"]
BELOW["cli"] = {"cli", "bench", "server", "quant-algo"} | BELOW["engine"]
BELOW["tools"] = {"tools"} | BELOW["cli"]  # developer tools: anything but another tool's main

# libllmctl_<name>.a -> layer
LIBRARIES = {
    "kernels": "kernels", "kernels_cuda": "kernels", "quant_format": "quant-format", "core": "core",
    "model": "model", "engine": "engine", "server": "server", "bench": "bench", "quant_algo": "quant-algo",
}
REQUIRED_LIBRARIES = ("kernels", "quant_format", "core", "model", "engine", "server", "bench")

SOURCE_DIRS = ("kernels", "quant", "engine", "server", "bench", "cli", "tools")
SOURCE_EXT = (".h", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def layer_of(path):
    """The layer a repository path belongs to; None for folders the check ignores (tests)."""
    for prefix, layer in (("kernels/", "kernels"), ("quant/format/", "quant-format"), ("quant/algo/", "quant-algo"),
                          ("engine/core/", "core"), ("engine/backend/", "model"), ("engine/model/", "model"),
                          ("engine/parallel/", "model"),
                          ("server/", "server"), ("engine/", "engine"), ("bench/", "bench"), ("cli/", "cli"),
                          ("tools/", "tools")):
        if path.startswith(prefix):
            return layer
    return None


def include_violations(root):
    out = []
    for top in SOURCE_DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(SOURCE_EXT):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                src = layer_of(path)
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for inc in INCLUDE.findall(text):
                    dst = layer_of(inc)
                    if dst is None:
                        continue
                    if dst not in BELOW[src]:
                        out.append(f"{path}: includes {inc}: layer {src} may not include layer {dst}")
                    elif dst == "kernels" and src != "kernels" and not path.startswith("engine/backend/") and not (
                            path.startswith("engine/core/") and inc == "kernels/scalar_types.h") and not (
                            path.startswith("tools/") and path.endswith("_bench.cpp")):
                        out.append(f"{path}: includes {inc}: only engine/backend/ calls kernels")
    return sorted(out)


def archive_symbols(archive):
    """(defined, undefined) global symbol sets of a static library, mangled names."""
    text = subprocess.run(["nm", "-P", "-A", archive], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        name, kind = parts[1], parts[2]
        if kind == "U":
            undefined.add(name)
        elif kind.isupper() or kind in ("u", "i"):  # global (T, D, B, R, W, V, ...) or GNU unique
            defined.add(name)
    return defined, undefined - defined


def demangle(name):
    try:
        return subprocess.run(["c++filt", name], check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return name


def symbol_violations(libs):
    """libs: {library name: archive path}. One line per (library, symbol it takes from above)."""
    syms = {name: archive_symbols(path) for name, path in libs.items()}
    out = []
    for name, (_, undefined) in sorted(syms.items()):
        layer = LIBRARIES[name]
        for sym in sorted(undefined):
            if any(sym in d for n, (d, _) in syms.items() if LIBRARIES[n] in BELOW[layer]):
                continue
            owners = sorted(n for n, (d, _) in syms.items() if sym in d)
            if owners:
                out.append(f"libllmctl_{name}.a (layer {layer}) uses {demangle(sym)}, defined only in "
                           + ", ".join(f"libllmctl_{o}.a (layer {LIBRARIES[o]})" for o in owners))
    return out


def find_libraries(build):
    libs = {}
    for name in LIBRARIES:
        path = os.path.join(build, f"libllmctl_{name}.a")
        if os.path.exists(path):
            libs[name] = path
    return libs


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def self_test():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        # includes: a clean tree, then four planted violations
        root = os.path.join(tmp, "src")
        write(f"{root}/engine/core/dtype.h", '#include "kernels/scalar_types.h"\n')
        write(f"{root}/engine/model/model.h", '#include "engine/core/dtype.h"\n#include <vector>\n')
        write(f"{root}/engine/backend/cpu.cpp", '#include "kernels/cpu/linear.h"\n#include "engine/model/model.h"\n')
        write(f"{root}/bench/run.cpp", '#include "engine/model/model.h"\n')
        write(f"{root}/cli/bench.cpp", '#include "bench/run.h"\n#include "server/serve.h"\n')
        write(f"{root}/tools/x_bench.cpp", '#include "kernels/cpu/linear.h"\n#include "cli/bench.h"\n')  # a kernel benchmark
        if include_violations(root):
            failures.append(f"includes: a clean tree was reported: {include_violations(root)}")
        write(f"{root}/kernels/cpu/linear.h", '#include "engine/core/error.h"\n')              # kernels -> core
        write(f"{root}/engine/model/model.h", '#include "engine/sched/sequence.h"\n')           # model -> engine
        write(f"{root}/engine/sched/batch.cpp", '#include "kernels/cpu/linear.h"\n')           # not a backend
        write(f"{root}/bench/run.cpp", '#include "server/http.h"\n')                    # bench -> server
        write(f"{root}/tools/score.cpp", '#include "kernels/cpu/linear.h"\n')                 # a tool, not a benchmark
        write(f"{root}/cli/main.cpp", '#include "tools/score.h"\n')                           # cli -> tools
        found = include_violations(root)
        if len(found) != 6:
            failures.append(f"includes: expected 6 violations, got {len(found)}: {found}")

        # symbols: core calls into engine (a violation), engine calls into core (fine)
        cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
        if not cxx:
            failures.append("symbols: no C++ compiler to build the scratch libraries")
        else:
            def archive(name, code):
                src, obj, lib = (os.path.join(tmp, f"{name}.{e}") for e in ("cpp", "o", "a"))
                write(src, code)
                subprocess.run([cxx, "-c", src, "-o", obj], check=True)
                lib = os.path.join(tmp, f"libllmctl_{name}.a")
                subprocess.run(["ar", "rcs", lib, obj], check=True)
                return lib

            libs = {"core": archive("core", "int core_fn() { return 1; }\n"),
                    "engine": archive("engine", "int core_fn();\nint engine_fn() { return core_fn() + 1; }\n")}
            if symbol_violations(libs):
                failures.append(f"symbols: clean libraries were reported: {symbol_violations(libs)}")
            libs["core"] = archive("core", "int engine_fn();\nint core_fn() { return engine_fn(); }\n")
            found = symbol_violations(libs)
            if len(found) != 1 or "engine_fn" not in found[0]:
                failures.append(f"symbols: expected core -> engine_fn reported, got {found}")
    for f in failures:
        print("self-test:", f)
    if not failures:
        print("self-test: planted include and symbol violations found, clean ones passed")
    return 1 if failures else 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "includes":
        root = argv[2] if len(argv) > 2 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        found = include_violations(root)
        print("\n".join(found) if found else "check_layers: includes follow the layers")
        return 1 if found else 0
    if len(argv) == 3 and argv[1] == "symbols":
        libs = find_libraries(argv[2])
        missing = [n for n in REQUIRED_LIBRARIES if n not in libs]
        if missing:
            print(f"SKIP: not built in {argv[2]}: " + ", ".join(f"libllmctl_{n}.a" for n in missing))
            return 77
        found = symbol_violations(libs)
        print("\n".join(found) if found else f"check_layers: {len(libs)} libraries take symbols only from below")
        return 1 if found else 0
    if len(argv) == 2 and argv[1] == "self-test":
        return self_test()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
