#!/usr/bin/env python3
"""A kernel's hot loop in a built binary through llvm-mca: cycles an iteration per CPU model and the
ports under most pressure, for comparing a tile's variants on cores this machine is not (an Intel core
with two load ports and three vector ALUs, a Zen with four), where a shared VM's timings cannot resolve
a few percent. A model, not a measurement: a change still needs its benchmark.

The loop is an innermost one (a backward jump's body holding no other), by default the one with the
most vector instructions, of the first function whose demangled name contains every PATTERN
(objdump -d -C; the jumps dropped, as llvm-mca takes straight-line code).
Usage: scripts/mca-kernel-loop.py [--binary build/llmctl] [--cpu icelake-server,skylake,znver3] PATTERN...
Needs objdump (binutils) and llvm-mca (Debian's llvm package).
"""
import argparse
import collections
import re
import subprocess
import sys


def function_lines(binary, patterns):
    dump = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", binary], capture_output=True, text=True,
                          check=True).stdout.split("\n")
    for i, line in enumerate(dump):
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m and all(p in m.group(1) for p in patterns):
            end = next((j for j in range(i + 1, len(dump)) if not dump[j].strip()), len(dump))
            return m.group(1), dump[i + 1:end]
    sys.exit(f"no function in {binary} has every pattern of {patterns}")


def hot_loop(lines, index):
    ins = []
    for line in lines:
        m = re.match(r"\s+([0-9a-f]+):\s+(.*)", line)
        if m:
            ins.append((int(m.group(1), 16), re.sub(r"\s*<.*>", "", m.group(2)).strip()))
    at = {a: i for i, (a, _) in enumerate(ins)}
    loops = []  # (first, last) instruction of each backward jump's body
    for i, (_, text) in enumerate(ins):
        m = re.match(r"j\w+\s+([0-9a-f]+)$", text)
        if m and int(m.group(1), 16) in at and at[int(m.group(1), 16)] < i:
            loops.append((at[int(m.group(1), 16)], i))
    # innermost loops (holding no other), the one with the most vector instructions first
    inner = [l for l in loops if not any(o != l and l[0] <= o[0] and o[1] <= l[1] for o in loops)]
    simd = lambda l: sum("%ymm" in t or "%zmm" in t or "%xmm" in t for _, t in ins[l[0]:l[1]])
    inner.sort(key=simd, reverse=True)
    if not inner:
        sys.exit("the function has no backward jump")
    if index >= len(inner):
        sys.exit(f"the function has {len(inner)} innermost loops")
    first, last = inner[index]
    where = f"innermost loop {index} of {len(inner)} (by vector instructions), {ins[first][0]:x}..{ins[last][0]:x}"
    return [text for _, text in ins[first:last] if not text.startswith("j")], where


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("patterns", nargs="+", metavar="PATTERN")
    ap.add_argument("--binary", default="build/llmctl")
    ap.add_argument("--cpu", default="icelake-server,skylake,znver3")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--loop", type=int, default=0, help="which innermost loop, by vector instructions (0: most)")
    args = ap.parse_args()
    name, lines = function_lines(args.binary, args.patterns)
    body, where = hot_loop(lines, args.loop)
    mix = collections.Counter(t.split()[0] for t in body)
    print(f"function: {name[:200]}")
    print(f"{where}: {len(body)} instructions; " + ", ".join(f"{k} {v}" for k, v in mix.most_common(10)))
    for cpu in args.cpu.split(","):
        out = subprocess.run(["llvm-mca", f"-mcpu={cpu}", f"-iterations={args.iterations}", "-resource-pressure=1"],
                             input="\n".join(body) + "\n", capture_output=True, text=True)
        m = re.search(r"Total Cycles:\s+(\d+)", out.stdout)
        if not m:
            print(f"{cpu}: llvm-mca failed: {out.stderr.strip()[:300]}")
            continue
        # the resources ([0] - SKLPort0, [12.0] - ... for units of a group), in the pressure table's column order
        names = [n for _, n in re.findall(r"^\[([\d.]+)\]\s+-\s+(\S+)", out.stdout, re.M)]
        table = out.stdout.split("Resource pressure per iteration:")[1].split("\n")
        values = table[2].split()
        ports = sorted(((float(v), names[k] if k < len(names) else str(k)) for k, v in enumerate(values) if v != "-"),
                       reverse=True)
        top = ", ".join(f"{n} {v:.1f}" for v, n in ports[:4])
        print(f"{cpu}: {int(m.group(1)) / args.iterations:.1f} cycles an iteration; busiest: {top}")


if __name__ == "__main__":
    main()
