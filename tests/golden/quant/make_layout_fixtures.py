#!/usr/bin/env python3
"""Writes tests/golden/quant/layout_fixtures.{safetensors,json}: small packed linear weights in the
three checkpoint layouts llmctl reads and writes, each packed by its reference project's own code
where that code runs here, with the reference's own dequantization of it (fp32).

  compressed-tensors  compressed_tensors.compressors.PackedQuantizationCompressor.compress /
                      .decompress (the installed compressed-tensors, 0.19 at the time of writing)
  awq                 AutoAWQ 0.2.9's WQLinear_GEMM.from_linear and awq.utils.packing_utils.
                      dequantize_gemm. AutoAWQ does not install on CPU (its build needs CUDA), but its
                      pure-Python packing modules import from the unpacked PyPI sdist: pass
                      --awq-src DIR (the autoawq-0.2.9 folder of `pip download --no-deps autoawq==0.2.9`).
  gptq                GPTQModel 7.7.0's TorchLinear.pack_original / dequantize_weight and its v2 -> v1
                      qzeros conversion (convert_gptq_v2_to_v1_format_module). GPTQModel does not
                      install on CPU (compiled extensions, a long dependency list), but its packing
                      code imports from the unpacked PyPI sdist (--gptqmodel-src DIR, the
                      gptqmodel-7.7.0 folder of `pip download --no-deps gptqmodel==7.7.0`) once the
                      packages it imports for logging, device and tokenizer helpers -- none of which
                      the packing math uses -- are stubbed (reference_packers.py). Every GPTQ fixture is also
                      packed here from the published layout (qweight [K*bits/32, N] packed along K,
                      qzeros [G, N*bits/32] holding zero - 1, scales f16 [G, N], g_idx [K]) and the
                      two must agree byte for byte; without --gptqmodel-src only that spec packing
                      is written and "source" says so in the JSON.

Each fixture: random codes, zero points and scales (seeded) -> the reference packs them -> the
reference dequantizes the packed tensors (scales widened to f32, so the values are the exact
products (q - z) * s that llmctl's dequantize computes). Tensors are stored as "<fixture>.<suffix>"
plus "<fixture>.dequant" ([N, K] f32); the JSON lists each fixture's layout, N, K, the
quantization_config that describes it and where its bytes came from.
Usage (in /work/venv-ref): make_layout_fixtures.py [--awq-src DIR] [--gptqmodel-src DIR] [--out DIR]
"""
import argparse
import json
import os
import sys
from types import SimpleNamespace

import numpy as np
import torch
from safetensors.torch import save_file

ap = argparse.ArgumentParser()
ap.add_argument("--awq-src", default="")
ap.add_argument("--gptqmodel-src", default="")
ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
args = ap.parse_args()

import compressed_tensors
from compressed_tensors.compressors.pack_quantized import PackedQuantizationCompressor
from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_packers import awq_packing, gptqmodel_packing  # noqa: E402


gen = torch.Generator().manual_seed(1234)
tensors, fixtures = {}, []


def rand_codes(shape, lo, hi):  # integers in [lo, hi]
    return torch.randint(lo, hi + 1, shape, generator=gen, dtype=torch.int32)


def rand_scales(shape, dtype):  # positive, varied magnitudes, representable in dtype
    s = torch.exp(torch.empty(shape).uniform_(-7, -2, generator=gen))
    return s.to(dtype)


# ---- compressed-tensors -------------------------------------------------------------------------
def ct_fixture(name, n, k, bits, group, sym, scale_dtype):
    strategy = "group" if group > 0 else "channel"
    wargs = QuantizationArgs(num_bits=bits, type="int", symmetric=sym, strategy=strategy,
                             group_size=group if group > 0 else None)
    scheme = QuantizationScheme(targets=["Linear"], weights=wargs)
    G = k // group if group > 0 else 1
    half = 1 << (bits - 1)
    q = rand_codes((n, k), -half, half - 1)  # signed codes, as compressed-tensors quantizes
    zp = torch.zeros((n, G), dtype=torch.int32) if sym else rand_codes((n, G), -half, half - 1)
    scale = rand_scales((n, G), scale_dtype)
    gs = group if group > 0 else k
    rep = lambda t: t.repeat_interleave(gs, dim=1)
    weight = (q - rep(zp)).float() * rep(scale.float())  # exactly representable by (q, zp, scale)
    sd = {"weight": weight, "weight_scale": scale, "weight_zero_point": zp.to(torch.int8)}
    packed = PackedQuantizationCompressor.compress(sd, scheme)
    # the reference's own unpacking and dequantization, scales widened to f32
    back = dict(packed)
    back["weight_scale"] = packed["weight_scale"].float()
    deq = PackedQuantizationCompressor.decompress(back, scheme)["weight"].float()
    assert torch.equal(deq, weight), name
    for suffix in ("weight_packed", "weight_scale", "weight_zero_point", "weight_shape"):
        if suffix in packed and packed[suffix] is not None:
            tensors[f"{name}.{suffix}"] = packed[suffix].contiguous()
    tensors[f"{name}.dequant"] = deq.contiguous()
    qc = {"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
          "config_groups": {"group_0": {"targets": ["Linear"], "format": "pack-quantized",
                                        "weights": json.loads(wargs.model_dump_json()),
                                        "input_activations": None, "output_activations": None}},
          "ignore": ["lm_head"], "kv_cache_scheme": None, "sparsity_config": {}, "transform_config": {},
          "version": compressed_tensors.__version__}
    fixtures.append({"name": name, "layout": "compressed-tensors", "n": n, "k": k, "scale_dtype": str(scale_dtype),
                     "quantization_config": qc,
                     "source": f"compressed_tensors {compressed_tensors.__version__} PackedQuantizationCompressor"})


ct_fixture("ct_int4_g32_sym", 20, 64, 4, 32, True, torch.float32)
ct_fixture("ct_int4_g32_asym", 20, 64, 4, 32, False, torch.float32)
ct_fixture("ct_int4_g64_sym_bf16", 16, 128, 4, 64, True, torch.bfloat16)
ct_fixture("ct_int8_g32_asym_f16", 13, 64, 8, 32, False, torch.float16)
ct_fixture("ct_int8_channel_sym", 12, 40, 8, -1, True, torch.float32)
ct_fixture("ct_int4_channel_asym", 12, 36, 4, -1, False, torch.float32)  # 36 codes: a partly filled word


# ---- AutoAWQ GEMM ---------------------------------------------------------------------------------
def awq_fixtures():
    ref = awq_packing(args.awq_src)
    if ref is None:
        print("no awq fixtures written")
        return
    WQLinear_GEMM, dequantize_gemm, awq_version = ref

    def one(name, n, k, group):
        G = k // group if group > 0 else 1
        gs = group if group > 0 else k
        q = rand_codes((n, k), 0, 15)
        z = rand_codes((n, G), 0, 15)
        s = rand_scales((n, G), torch.float16)
        rep = lambda t: t.repeat_interleave(gs, dim=1)
        weight = (q - rep(z)).float() * rep(s.float())
        lin = torch.nn.Linear(k, n, bias=False)
        lin.weight.data = weight
        # (from_linear sizes qweight as N // 32 * 4 words, so N is a multiple of 32 here.)
        # AutoAWQ's quantizer hands from_linear scales and zeros as [G, N]. Its from_linear indexes
        # groups with idx // group_size, so per-channel (-1) is passed as one group of K columns.
        m = WQLinear_GEMM.from_linear(lin, 4, gs, scales=s.float().t().contiguous(), zeros=z.float().t().contiguous())
        deq = dequantize_gemm(m.qweight, m.qzeros, m.scales.float(), 4, gs).t().contiguous().float()
        assert torch.equal(deq, weight), name
        tensors[f"{name}.qweight"] = m.qweight.contiguous()
        tensors[f"{name}.qzeros"] = m.qzeros.contiguous()
        tensors[f"{name}.scales"] = m.scales.contiguous()
        tensors[f"{name}.dequant"] = deq
        qc = {"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": True, "version": "gemm",
              "modules_to_not_convert": None}
        fixtures.append({"name": name, "layout": "awq", "n": n, "k": k, "quantization_config": qc,
                         "source": f"AutoAWQ {awq_version} WQLinear_GEMM.from_linear / dequantize_gemm"})

    one("awq_int4_g32", 32, 64, 32)
    one("awq_int4_g64", 64, 128, 64)
    one("awq_int4_channel", 32, 48, -1)


awq_fixtures()


# ---- GPTQ v1 ---------------------------------------------------------------------------------------
GPTQMODEL = gptqmodel_packing(args.gptqmodel_src)


def gptq_fixture(name, n, k, bits, group, sym, act_order):
    per = 32 // bits
    G = k // group if group > 0 else 1
    gs = group if group > 0 else k
    maxq = (1 << bits) - 1
    q = rand_codes((n, k), 0, maxq).numpy().astype(np.int64)
    # GPTQ v1 stores zero - 1, so an asymmetric zero point of 0 does not survive it: zeros from 1
    z = np.full((n, G), 1 << (bits - 1), np.int64) if sym else rand_codes((n, G), 1, maxq).numpy().astype(np.int64)
    s = rand_scales((G, n), torch.float16)  # GPTQ stores scales [G, N] f16
    if act_order:  # act-order: g_idx maps each input row to its group (a permutation of k // gs)
        g_idx = (np.arange(k) // gs)[torch.randperm(k, generator=gen).numpy()]
    else:
        g_idx = np.arange(k) // gs
    # the published layout, packed here
    qweight = np.zeros((k // per, n), np.uint32)  # packed along K: row r holds k = r*per + i at bits*i
    for i in range(per):
        qweight |= (q.T[i::per].astype(np.uint32) << np.uint32(bits * i))
    zs = (z.T - 1).astype(np.uint32) & np.uint32(maxq)  # v1 stores zero - 1; [G, N]
    qzeros = np.zeros((G, n // per), np.uint32)  # packed along N
    for i in range(per):
        qzeros |= zs[:, i::per] << np.uint32(bits * i)
    sf = s.float().numpy()
    deq = (q - z[:, g_idx]).astype(np.float32) * sf.T[:, g_idx]
    qweight_t = torch.from_numpy(qweight.view(np.int32).copy())
    qzeros_t = torch.from_numpy(qzeros.view(np.int32).copy())
    deq_t = torch.from_numpy(np.ascontiguousarray(deq, dtype=np.float32))
    source = "written from the published GPTQ v1 layout (GPTQModel's code not given: --gptqmodel-src)"
    if GPTQMODEL:
        TorchLinear, v2_to_v1, version = GPTQMODEL
        weight = torch.from_numpy(deq.copy())  # exactly (q - z) * s: pack_original recovers q
        lin = torch.nn.Linear(k, n, bias=False)
        lin.weight.data = weight
        m = TorchLinear(bits=bits, group_size=group, sym=sym, desc_act=act_order, in_features=k, out_features=n,
                        bias=False)
        m.pack_original(lin, s.float().t().contiguous(), torch.from_numpy(z), torch.from_numpy(g_idx).int())
        m.post_init()
        f16_scales = m.scales
        m.scales = f16_scales.float()  # dequantize in f32: the exact products
        ref = m.dequantize_weight().t().contiguous().float()
        m.scales = f16_scales
        v2_to_v1(module=m, quantize_config=SimpleNamespace(bits=bits, pack_dtype=torch.int32))  # as saved
        assert torch.equal(ref, deq_t), name
        assert torch.equal(m.qweight, qweight_t) and torch.equal(m.qzeros, qzeros_t), name + ": GPTQModel != spec"
        assert torch.equal(m.scales, s) and torch.equal(m.g_idx, torch.from_numpy(g_idx).int()), name
        qweight_t, qzeros_t, deq_t = m.qweight.contiguous(), m.qzeros.contiguous(), ref
        source = f"GPTQModel {version} TorchLinear.pack_original / dequantize_weight, v2 -> v1 qzeros"
    tensors[f"{name}.qweight"] = qweight_t
    tensors[f"{name}.qzeros"] = qzeros_t
    tensors[f"{name}.scales"] = s.contiguous()
    tensors[f"{name}.g_idx"] = torch.from_numpy(g_idx.astype(np.int32))
    tensors[f"{name}.dequant"] = deq_t
    qc = {"quant_method": "gptq", "bits": bits, "group_size": group, "desc_act": act_order, "sym": sym,
          "checkpoint_format": "gptq", "pack_dtype": "int32", "lm_head": False, "true_sequential": True,
          "damp_percent": 0.01, "static_groups": False}
    fixtures.append({"name": name, "layout": "gptq", "n": n, "k": k, "quantization_config": qc, "source": source})


gptq_fixture("gptq_int4_g32_sym", 24, 64, 4, 32, True, False)
gptq_fixture("gptq_int4_g32_asym_actorder", 16, 64, 4, 32, False, True)
gptq_fixture("gptq_int8_g64_asym", 12, 128, 8, 64, False, False)
gptq_fixture("gptq_int4_channel_sym", 16, 40, 4, -1, True, False)

save_file(tensors, os.path.join(args.out, "layout_fixtures.safetensors"))
meta = {"script": "tests/golden/quant/make_layout_fixtures.py", "torch": torch.__version__,
        "compressed_tensors": compressed_tensors.__version__, "fixtures": fixtures}
with open(os.path.join(args.out, "layout_fixtures.json"), "w") as f:
    json.dump(meta, f, indent=1)
print(f"wrote {len(fixtures)} fixtures, {sum(t.numel() * t.element_size() for t in tensors.values())} bytes")
