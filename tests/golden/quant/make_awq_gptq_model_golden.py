#!/usr/bin/env python3
"""Writes tests/golden/quant/tiny_llama_awq_g32/ and tiny_llama_gptq_g32/: the tiny random Llama of
tiny_model_util.py with every decoder linear quantized (RTN, int4, group 32; lm_head and embeddings
dense; everything else in f16, as AutoAWQ and GPTQModel save) and packed by the reference projects'
own code, with the quantization_config keys they write:
  awq   AutoAWQ 0.2.9 WQLinear_GEMM.from_linear (asymmetric, zero points), version gemm
  gptq  GPTQModel 7.7.0 TorchLinear.pack_original + its v2 -> v1 qzeros conversion (symmetric,
        checkpoint_format gptq)
  gptq_actorder  the same with desc_act: each linear's columns ordered by descending diag(X^T X) of
        its inputs on 8 x 32 random calibration tokens (GPTQ's act-order), groups of GS consecutive
        columns in that order, so g_idx scatters each group's columns (modules that share an input,
        q/k/v and gate/up, share the order)
and <name>_golden.json: transformers' fp32 run of the same model with each linear replaced by the
reference's own dequantization of the packed tensors (dequantize_gemm / dequantize_weight, scales
widened to f32). Neither project installs on a CPU-only machine, and transformers needs them to load
these formats, so this is the closest reference run available here; the layouts themselves are
checked bit for bit by the unit fixtures (make_layout_fixtures.py).
Usage (in /work/venv-ref): make_awq_gptq_model_golden.py --awq-src DIR --gptqmodel-src DIR [--out DIR]
  [--layouts awq,gptq,gptq_actorder]
(the unpacked `pip download --no-deps autoawq==0.2.9` / `gptqmodel==7.7.0` sdists; reference_packers.py)
"""
import argparse
import json
import os
import shutil
import sys
from types import SimpleNamespace

import torch
from safetensors.torch import save_file

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import transformers  # noqa: E402
from transformers import LlamaForCausalLM  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_packers import awq_packing, gptqmodel_packing  # noqa: E402
from tiny_model_util import golden_cases, tiny_llama_config, tokenizer_json  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--awq-src", required=True)
ap.add_argument("--gptqmodel-src", required=True)
ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
ap.add_argument("--layouts", default="awq,gptq,gptq_actorder")
args = ap.parse_args()
AWQ = awq_packing(args.awq_src)
GPTQ = gptqmodel_packing(args.gptqmodel_src)
assert AWQ and GPTQ, "both reference packers are needed"
GS = 32

torch.manual_seed(1)
cfg = tiny_llama_config()
dense = LlamaForCausalLM(cfg).float().eval()
LINEARS = [n for n, m in dense.named_modules() if isinstance(m, torch.nn.Linear) and n != "lm_head"]


def rtn(w, sym):
    """Per-group RTN of w [N, K] (int4, group GS): codes [N, K], f16-exact scales [N, G], zeros [N, G]."""
    n, k = w.shape
    g = w.reshape(n, k // GS, GS)
    if sym:
        s = (g.abs().amax(-1) / 7).clamp(min=1e-6).half().float()
        z = torch.full_like(s, 8)
    else:
        lo, hi = g.amin(-1).clamp(max=0), g.amax(-1).clamp(min=0)
        s = ((hi - lo) / 15).clamp(min=1e-6).half().float()
        z = torch.round(-lo / s).clamp(1, 15)  # >= 1 keeps one script for both layouts' zero handling
    q = torch.clamp(torch.round(g / s[..., None]) + z[..., None], 0, 15).reshape(n, k)
    return q, s, z


def exact(q, s, z):  # (q - z) * s, exactly: what both references' pack functions invert
    return (q - z.repeat_interleave(GS, 1)) * s.repeat_interleave(GS, 1)


def act_order_perms():
    """GPTQ's desc_act order of each linear's input columns: descending diag(X^T X) over calibration
    tokens (stable, so equal inputs give equal orders)."""
    sq, hooks = {}, []
    for mod in LINEARS:
        def hook(m, inp, out, mod=mod):
            x = inp[0].reshape(-1, inp[0].shape[-1]).float()
            sq[mod] = sq.get(mod, 0) + (x * x).sum(0)
        hooks.append(dense.get_submodule(mod).register_forward_hook(hook))
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        dense(torch.randint(3, 256, (8, 32), generator=gen))
    for h in hooks:
        h.remove()
    return {mod: torch.sort(-sq[mod], stable=True).indices for mod in LINEARS}


def build(layout):
    act_order = layout == "gptq_actorder"
    perms = act_order_perms() if act_order else None
    if act_order:
        layout = "gptq"
    name = f"tiny_llama_{layout}_g{GS}" + ("_actorder" if act_order else "")
    out_dir = os.path.join(args.out, name)
    state = {k: v.half() for k, v in dense.state_dict().items()}  # saved in f16, as both tools save
    ref_state = {k: v.float() for k, v in state.items()}  # the reference run: f16 values in f32
    for mod in LINEARS:
        w = dense.get_submodule(mod).weight.data.float()
        n, k = w.shape
        lin = torch.nn.Linear(k, n, bias=False)
        g_idx = (torch.arange(k) // GS).int()
        if act_order:  # quantized in the permuted order; column perm[i] is in group i // GS
            perm = perms[mod]
            q, s, z = rtn(w[:, perm], sym=True)
            lin.weight.data = torch.empty_like(w)
            lin.weight.data[:, perm] = exact(q, s, z)
            g_idx = torch.empty(k, dtype=torch.int32)
            g_idx[perm] = (torch.arange(k) // GS).int()
        else:
            q, s, z = rtn(w, sym=(layout == "gptq"))
            lin.weight.data = exact(q, s, z)
        del state[mod + ".weight"]
        if layout == "awq":
            WQLinear_GEMM, dequantize_gemm, _ = AWQ
            m = WQLinear_GEMM.from_linear(lin, 4, GS, scales=s.t().contiguous(), zeros=z.t().contiguous())
            ref = dequantize_gemm(m.qweight, m.qzeros, m.scales.float(), 4, GS).t().contiguous()
            state.update({f"{mod}.qweight": m.qweight, f"{mod}.qzeros": m.qzeros, f"{mod}.scales": m.scales})
        else:
            TorchLinear, v2_to_v1, _ = GPTQ
            m = TorchLinear(bits=4, group_size=GS, sym=True, desc_act=act_order, in_features=k, out_features=n,
                            bias=False)
            m.pack_original(lin, s, z, g_idx)
            m.post_init()
            f16 = m.scales
            m.scales = f16.float()
            ref = m.dequantize_weight().t().contiguous().float()
            m.scales = f16
            v2_to_v1(module=m, quantize_config=SimpleNamespace(bits=4, pack_dtype=torch.int32))
            state.update({f"{mod}.qweight": m.qweight, f"{mod}.qzeros": m.qzeros, f"{mod}.scales": m.scales,
                          f"{mod}.g_idx": m.g_idx})
        assert torch.equal(ref, lin.weight.data), mod
        ref_state[mod + ".weight"] = ref
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    save_file({k: v.contiguous() for k, v in state.items()}, os.path.join(out_dir, "model.safetensors"),
              metadata={"format": "pt"})
    config = json.loads(cfg.to_json_string())
    config["architectures"] = ["LlamaForCausalLM"]
    config["torch_dtype"] = "float16"
    if layout == "awq":  # AutoAWQ's AwqConfig.to_transformers_dict
        config["quantization_config"] = {"quant_method": "awq", "zero_point": True, "group_size": GS, "bits": 4,
                                         "version": "gemm", "modules_to_not_convert": None}
    else:  # GPTQModel's QuantizeConfig as saved
        config["quantization_config"] = {"bits": 4, "group_size": GS, "desc_act": act_order, "sym": True,
                                         "lm_head": False, "quant_method": "gptq", "checkpoint_format": "gptq",
                                         "pack_dtype": "int32", "true_sequential": True, "damp_percent": 0.01,
                                         "static_groups": False, "meta": {"quantizer": [f"gptqmodel:{GPTQ[2]}"]}}
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    with open(os.path.join(out_dir, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(), f)

    ref_model = LlamaForCausalLM(cfg).float().eval()
    ref_model.load_state_dict(ref_state)
    cases, gap = golden_cases(ref_model, dense)
    version = AWQ[2] if layout == "awq" else GPTQ[2]
    golden = {"model": f"tests/golden/quant/{name} (random Llama, int4 g{GS} RTN"
                       f"{' in act-order (desc_act, g_idx scattered)' if act_order else ''} packed by "
                       f"{'AutoAWQ' if layout == 'awq' else 'GPTQModel'} {version}; f16 elsewhere)",
              "reference": "transformers fp32 with each linear = the packer's own dequantization (f32 scales)",
              "script": "tests/golden/quant/make_awq_gptq_model_golden.py", "transformers": transformers.__version__,
              "torch": torch.__version__, "top_k": 20, "dense_model_max_dlogprob": round(gap, 6), "cases": cases}
    with open(os.path.join(args.out, f"{name}_golden.json"), "w") as f:
        json.dump(golden, f)
    print(f"wrote {out_dir} and {name}_golden.json; unquantized model differs by up to {gap:.3f} in logprob")


for layout in args.layouts.split(","):
    build(layout)
