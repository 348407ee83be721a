#!/usr/bin/env python3
"""Writes gguf_blocks_ref.gguf: for each GGML block format, a quantized tensor "<TYPE>.q" and its
dequantization by the reference (gguf.quants.dequantize from the Python `gguf` package) as the f32
tensor "<TYPE>.ref". test_gguf_blocks.cpp checks llmctl's dequantization against it bit for bit.

Legacy formats are quantized from random normal data with gguf.quants.quantize. The K-quants and
the table formats (IQ4_NL, IQ4_XS, MXFP4) have no Python quantizer used here, so their blocks are
random bytes with sane scale fields (one block per tensor gets a subnormal f16 scale, to cover the
f16 conversion edge; MXFP4's e8m0 exponents include 0 and 1, its subnormal scales).

Usage: python3 make_gguf_blocks_ref.py [out.gguf]
"""
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

ROWS, COLS = 3, 512
# Byte offsets of the f16 scale fields inside one block.
K_SCALE_OFFSETS = {
    T.Q2_K: [80, 82],
    T.Q3_K: [108],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
    T.IQ4_NL: [0],
    T.IQ4_XS: [0],
}


def random_k_blocks(rng, qtype):
    block, size = GGML_QUANT_SIZES[qtype]
    nblocks = ROWS * COLS // block
    raw = rng.integers(0, 256, size=(nblocks, size), dtype=np.uint8)
    for off in K_SCALE_OFFSETS[qtype]:
        scales = rng.uniform(1e-3, 0.1, size=nblocks).astype(np.float16)
        scales[1] = np.float16(3e-6)  # subnormal in f16
        raw[:, off:off + 2] = scales.view(np.uint8).reshape(nblocks, 2)
    return raw.reshape(ROWS, COLS // block * size)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "gguf_blocks_ref.gguf")
    rng = np.random.default_rng(1234)
    w = gguf.GGUFWriter(out, arch="llmctl-test")
    for qtype in [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]:
        data = rng.standard_normal((ROWS, COLS)).astype(np.float32)
        q = gguf.quants.quantize(data, qtype)
        ref = gguf.quants.dequantize(q, qtype)
        w.add_tensor(f"{qtype.name}.q", q, raw_dtype=qtype)
        w.add_tensor(f"{qtype.name}.ref", ref.astype(np.float32))
    for qtype in K_SCALE_OFFSETS:
        q = random_k_blocks(rng, qtype)
        ref = gguf.quants.dequantize(q, qtype)
        w.add_tensor(f"{qtype.name}.q", q, raw_dtype=qtype)
        w.add_tensor(f"{qtype.name}.ref", ref.astype(np.float32))
    block, size = GGML_QUANT_SIZES[T.MXFP4]
    raw = rng.integers(0, 256, size=(ROWS * COLS // block, size), dtype=np.uint8)
    raw[:, 0] = rng.integers(100, 140, size=raw.shape[0])  # e8m0 exponents near 2^0
    raw[:2, 0] = [0, 1]  # the subnormal scales
    q = raw.reshape(ROWS, COLS // block * size)
    w.add_tensor("MXFP4.q", q, raw_dtype=T.MXFP4)
    w.add_tensor("MXFP4.ref", gguf.quants.dequantize(q, T.MXFP4).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
