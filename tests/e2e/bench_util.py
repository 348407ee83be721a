"""Shared checks for the `llmctl bench` end-to-end tests: the JSON, CSV and SVG a run writes."""
import csv
import json
import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"


def paths():
    build = sys.argv[1]
    src = os.environ.get("LLMCTL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
    home = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
    return os.path.join(build, "llmctl"), src, os.path.join(home, "models/SmolLM2-135M-Instruct/hf")


def cpu_isa():
    """--cpu-isa X after BUILD_DIR: the ctest entries that step the CPU kernels down pass it on to
    every llmctl command that takes it."""
    return sys.argv[sys.argv.index("--cpu-isa") + 1] if "--cpu-isa" in sys.argv[2:] else None


def native_isa():
    """The CPU kernels llmctl picks by itself (kernels/cpu/qlinear.cpp's CPUID rule)."""
    flags = set()
    if os.path.exists("/proc/cpuinfo"):
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    if {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"} <= flags:
        return "avx512-vnni"
    return "avx2" if {"avx2", "fma", "f16c"} <= flags else "scalar"


def skip_unless_stepping_down():
    """--step-down-only (the ctest entries that rerun a test at a lower ISA): exit 77 when that ISA is
    the CPU's own, where the run would repeat the plain entry's."""
    if "--step-down-only" in sys.argv[2:] and cpu_isa() == native_isa():
        print(f"SKIP: this CPU's own kernels are {native_isa()}: the plain entry runs them")
        sys.exit(77)


def run(cmd, timeout=300):
    isa = cpu_isa()
    if isa and len(cmd) > 2 and (cmd[1] in ("generate", "chat", "serve") or
                                 (cmd[1] == "bench" and cmd[2] in ("throughput", "latency", "ppl"))):
        at = 3 if cmd[1] == "bench" else 2
        cmd = cmd[:at] + ["--cpu-isa", isa] + cmd[at:]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        print("command:", " ".join(cmd))
        print(p.stdout)
        print(p.stderr)
        raise SystemExit(f"exit {p.returncode}")
    return p


def close(a, b, rel=1e-6, abs_=1e-9):
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=abs_)


def check_meta(meta, engine=True):
    for k in ("hostname", "cpu", "cores"):
        assert k in meta["machine"], k
    assert meta["machine"]["cores"] >= 1
    for k in ("version", "git", "build_type"):
        assert meta["build"][k], k
    for k in ("backend", "device", "model", "dense_dtype"):
        assert meta[k], k
    if engine:
        assert meta["device"] in ("cpu", "cuda")
        assert meta["dense_dtype"] in ("f32", "f16", "bf16")
        assert meta["weights"] and meta["threads"] >= (1 if meta["device"] == "cpu" else 0), meta


def check_percentiles(row, prefix):
    """mean within [min, max] and min <= median <= p90 <= p99 <= max."""
    v = [row[f"{prefix}_{k}"] for k in ("min", "median", "p90", "p99", "max")]
    assert all(a <= b + 1e-9 for a, b in zip(v, v[1:])), (prefix, v)
    assert v[0] - 1e-9 <= row[f"{prefix}_mean"] <= v[-1] + 1e-9, (prefix, row[f"{prefix}_mean"], v)
    assert row[f"{prefix}_std"] >= 0


def check_csv(path, report):
    """One line per JSON row, every line as wide as the header, the figures equal to the JSON's."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head, body = rows[0], rows[1:]
    assert head[:2] == ["mode", "interrupted"], head[:2]
    assert len(body) == len(report["rows"]), (len(body), len(report["rows"]))
    for line, jrow in zip(body, report["rows"]):
        assert len(line) == len(head)
        d = dict(zip(head, line))
        assert d["mode"] == report["mode"]
        assert d["meta.machine.hostname"] == report["meta"]["machine"]["hostname"]
        for k, v in jrow.items():
            if isinstance(v, bool) or isinstance(v, (list, dict)) or v is None:
                continue
            if isinstance(v, (int, float)):
                assert close(d[k], v, 1e-9), (k, d[k], v)
            else:
                assert d[k] == v, (k, d[k], v)


def check_svg(path, min_series=1):
    """Parses as XML (an SVG root), with axes (lines), tick and axis labels (text) and data lines."""
    root = ET.parse(path).getroot()
    assert root.tag == SVG + "svg", root.tag
    texts = ["".join(t.itertext()) for t in root.iter(SVG + "text")]
    lines = list(root.iter(SVG + "line"))
    polylines = list(root.iter(SVG + "polyline"))
    assert len(texts) >= 8 and len(lines) >= 6, (len(texts), len(lines))
    assert len(polylines) >= min_series, len(polylines)
    for p in polylines:
        for pt in p.get("points").split():
            x, y = map(float, pt.split(","))
            assert 0 <= x <= float(root.get("width")) and 0 <= y <= float(root.get("height"))
    return texts


def load(path):
    with open(path) as f:
        return json.load(f)
