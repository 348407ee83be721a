#!/usr/bin/env python3
"""Reference outputs of RTN and GPTQ for tests/unit/test_quant_rtn.cpp and test_quant_gptq.cpp.

Runs llm-compressor's and compressed-tensors' own functions (nothing reimplemented here) on seeded
random data and writes tests/golden/quant/gptq_fixture.safetensors:

  w          F32 [48, 256]        the weight (a few outliers)
  x          F16 [8, 48, 256]     calibration inputs: 8 "sequences" of 48 rows; columns of very
                                  different magnitude, correlated; column 5 always zero (a dead input)
  h          F32 [256, 256]       llm-compressor's Hessian: accumulate_hessian over x in two batches of
                                  4 sequences, divided by the sample count (8: it counts sequences)
  rtn.<s>.{codes I8 [48, 256], scale F32 [48, G], zero I32 [48, G]}
             the weight observer (memoryless_minmax) + compressed_tensors quantize, for
             s in int4_g32_sym, int4_g32_asym, int4_g64_sym, int4_g64_asym, int8_ch_sym
  gptq.<s>.{deq F32 [48, 256], codes I8, scale F32, zero I32, loss F32 [1]}
             llm-compressor's quantize_weight (block size 128, dampening 0.01) with the observer's
             qparams, for s in int4_g64_sym, int4_g64_asym, int4_g64_sym_actorder (static), int8_ch_sym
  gptq.<s>.{codes64 I8, loss64 F32 [1]}
             the same function run in fp64 (its module's GPTQ_PRECISION set to float64, fp64 inputs):
             the fp32 run's codes differ from it where accumulated fp32 error crosses a rounding
             boundary (int8 steps are small), so llmctl's fp64 GPTQ is compared with both

Codes and zero points are compressed-tensors' signed values ([-8, 7] for int4). Run in the reference
virtual environment: python tests/golden/quant/make_gptq_fixture.py
"""
import json
import os

import torch
import llmcompressor.modifiers.gptq.gptq_quantize as gptq_module
from compressed_tensors.quantization import QuantizationArgs
from compressed_tensors.quantization.lifecycle.forward import quantize
from llmcompressor.modifiers.gptq.gptq_quantize import quantize_weight
from llmcompressor.modifiers.gptq.helpers import accumulate_hessian, make_empty_hessian
from llmcompressor.observers import Observer
from safetensors.torch import save_file

N, K, SEQS, ROWS = 48, 256, 8, 48
DEAD = 5
BLOCK, DAMP = 128, 0.01


def scheme(bits, group, sym, actorder=None):
    if group is None:
        return QuantizationArgs(num_bits=bits, type="int", symmetric=sym, strategy="channel", actorder=actorder)
    return QuantizationArgs(num_bits=bits, type="int", symmetric=sym, strategy="group", group_size=group,
                            actorder=actorder)


RTN = {
    "int4_g32_sym": scheme(4, 32, True),
    "int4_g32_asym": scheme(4, 32, False),
    "int4_g64_sym": scheme(4, 64, True),
    "int4_g64_asym": scheme(4, 64, False),
    "int8_ch_sym": scheme(8, None, True),
}
GPTQ = {
    "int4_g64_sym": scheme(4, 64, True),
    "int4_g64_asym": scheme(4, 64, False),
    "int4_g64_sym_actorder": scheme(4, 64, True, actorder="static"),
    "int8_ch_sym": scheme(8, None, True),
}


def observe(w, args):
    """The weight observer llm-compressor attaches to a Linear (calibration.py: memoryless_minmax)."""
    obs = Observer.load_from_registry("memoryless_minmax", base_name="weight", args=args)
    obs(w)
    q = obs.get_qparams()
    return q["scale"], q["zero_point"]


def main():
    g = torch.Generator().manual_seed(1405)
    w = torch.randn(N, K, generator=g) * 0.05
    outliers = torch.randint(0, N * K, (24,), generator=g)
    w.view(-1)[outliers] *= 8

    magnitude = torch.exp(torch.randn(K, generator=g) * 0.8)
    mixing = torch.randn(16, K, generator=g) * 0.5
    x = torch.randn(SEQS, ROWS, K, generator=g) * magnitude + torch.randn(SEQS, ROWS, 16, generator=g) @ mixing
    x[..., DEAD] = 0
    x = x.half()

    linear = torch.nn.Linear(K, N, bias=False)
    h = make_empty_hessian(linear, device="cpu")
    samples = torch.zeros(())
    for b in range(0, SEQS, 4):
        h, samples = accumulate_hessian(x[b:b + 4].float(), linear, h, samples)
    h = h / samples

    out = {"w": w.contiguous(), "x": x.contiguous(), "h": h.contiguous()}
    for name, args in RTN.items():
        scale, zero = observe(w, args)
        codes = quantize(w, scale, zero, args)
        out[f"rtn.{name}.codes"] = codes.to(torch.int8).contiguous()
        out[f"rtn.{name}.scale"] = scale.float().contiguous()
        out[f"rtn.{name}.zero"] = zero.to(torch.int32).contiguous()

    for name, args in GPTQ.items():
        scale, zero = observe(w, args)
        deq, losses, fallback = quantize_weight(w.clone().unsqueeze(0), h.clone().unsqueeze(0), scale.unsqueeze(0),
                                                zero.unsqueeze(0), None, args, blocksize=BLOCK, percdamp=DAMP)
        assert not bool(fallback[0]), name
        deq = deq[0]
        codes = quantize(deq, scale, zero, args)  # deq = (code - zero) * scale exactly: recovers the codes
        out[f"gptq.{name}.deq"] = deq.contiguous()
        out[f"gptq.{name}.codes"] = codes.to(torch.int8).contiguous()
        out[f"gptq.{name}.scale"] = scale.float().contiguous()
        out[f"gptq.{name}.zero"] = zero.to(torch.int32).contiguous()
        out[f"gptq.{name}.loss"] = losses.float().reshape(1).contiguous()

        precision = gptq_module.GPTQ_PRECISION
        gptq_module.GPTQ_PRECISION = torch.float64
        try:
            deq64, losses64, fallback = quantize_weight(w.double().unsqueeze(0), h.double().unsqueeze(0),
                                                        scale.unsqueeze(0), zero.unsqueeze(0), None, args,
                                                        blocksize=BLOCK, percdamp=DAMP)
        finally:
            gptq_module.GPTQ_PRECISION = precision
        assert not bool(fallback[0]), name
        out[f"gptq.{name}.codes64"] = quantize(deq64[0].float(), scale, zero, args).to(torch.int8).contiguous()
        out[f"gptq.{name}.loss64"] = losses64.float().reshape(1).contiguous()

    import compressed_tensors
    import llmcompressor
    meta = {
        "dead_column": str(DEAD), "samples": str(int(samples)), "block_size": str(BLOCK), "dampening": str(DAMP),
        "llmcompressor": llmcompressor.__version__, "compressed_tensors": compressed_tensors.__version__,
        "torch": torch.__version__,
        "schemes": json.dumps({k: v.model_dump(mode="json", exclude_none=True) for k, v in {**RTN, **GPTQ}.items()}),
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gptq_fixture.safetensors")
    save_file(out, path, metadata=meta)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    for name in GPTQ:
        differ = int((out[f"gptq.{name}.codes"] != out[f"gptq.{name}.codes64"]).sum())
        print(f"{name}: loss {float(out[f'gptq.{name}.loss'][0])} (fp64: {float(out[f'gptq.{name}.loss64'][0])}),"
              f" {differ} codes differ between the fp32 and fp64 runs")


if __name__ == "__main__":
    main()
