#!/usr/bin/env python3
"""Writes gguf_code_blocks_ref.gguf: for each IQ grid format (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
IQ1_S, IQ1_M) and ternary format (TQ1_0, TQ2_0), a tensor "<TYPE>.q" of random blocks and its
dequantization by the reference (gguf.quants.dequantize from the Python `gguf` package) as the f32
tensor "<TYPE>.ref". test_gguf_blocks.cpp checks llmctl's dequantization against it bit for bit.

The blocks are random bytes (every grid index, sign pattern and sub-block scale) with a sane f16
block scale (one block per tensor gets a subnormal one); IQ1_M's scale is split over the top
nibbles of its four 16-bit scale words, so those nibbles are set from it.

Usage: python3 make_gguf_code_blocks_ref.py [out.gguf]
"""
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

ROWS, COLS = 3, 512
SCALE_OFFSET = {T.IQ2_XXS: 0, T.IQ2_XS: 0, T.IQ2_S: 0, T.IQ3_XXS: 0, T.IQ3_S: 0, T.IQ1_S: 0, T.TQ1_0: 52,
                T.TQ2_0: 64, T.IQ1_M: None}


def random_blocks(rng, qtype):
    block, size = GGML_QUANT_SIZES[qtype]
    nblocks = ROWS * COLS // block
    raw = rng.integers(0, 256, size=(nblocks, size), dtype=np.uint8)
    scales = rng.uniform(1e-3, 0.1, size=nblocks).astype(np.float16)
    scales[1] = np.float16(3e-6)  # subnormal in f16
    bits = scales.view(np.uint16)
    off = SCALE_OFFSET[qtype]
    if off is not None:
        raw[:, off:off + 2] = scales.view(np.uint8).reshape(nblocks, 2)
    else:  # IQ1_M: nibble i of the f16 is the top nibble of 16-bit word i at bytes 48..55
        for i in range(4):
            nibble = ((bits >> (4 * i)) & 0xF).astype(np.uint8)
            raw[:, 49 + 2 * i] = (raw[:, 49 + 2 * i] & 0x0F) | (nibble << 4)
    return raw.reshape(ROWS, COLS // block * size)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "gguf_code_blocks_ref.gguf")
    rng = np.random.default_rng(4321)
    w = gguf.GGUFWriter(out, arch="llmctl-test")
    for qtype in SCALE_OFFSET:
        q = random_blocks(rng, qtype)
        ref = gguf.quants.dequantize(q, qtype)
        w.add_tensor(f"{qtype.name}.q", q, raw_dtype=qtype)
        w.add_tensor(f"{qtype.name}.ref", ref.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
