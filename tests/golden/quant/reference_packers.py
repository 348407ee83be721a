"""Imports the packing code of AutoAWQ and GPTQModel from their unpacked PyPI sdists (neither
installs on a CPU-only machine: AutoAWQ's build needs CUDA, GPTQModel has compiled extensions and a
long dependency list). Used by make_layout_fixtures.py and make_awq_gptq_model_golden.py.

  awq_packing(src)       -> (WQLinear_GEMM, dequantize_gemm, version) or None
                            src: the autoawq-0.2.9 folder of `pip download --no-deps autoawq==0.2.9`
  gptqmodel_packing(src) -> (TorchLinear, convert_gptq_v2_to_v1_format_module, version) or None
                            src: the gptqmodel-7.7.0 folder of `pip download --no-deps gptqmodel==7.7.0`;
                            the third-party packages it imports at module level for logging, device
                            queries, tokenizers and calibration data (STUBBED) are replaced by stubs:
                            the packing math does not call them.
"""
import importlib.abc
import importlib.machinery
import sys
from unittest import mock

STUBBED = {"pcre", "logbar", "device_smi", "tokenicer", "defuser", "torchao", "threadpoolctl", "maturin",
           "datasets", "dill", "pyarrow", "triton"}


class _Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] not in STUBBED:
            return None
        for f in sys.meta_path:  # a real installed package wins
            if f is not self and getattr(f, "find_spec", None) and f.find_spec(name, path, target):
                return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        m = mock.MagicMock(name=spec.name)
        m.__path__, m.__spec__, m.__name__ = [], spec, spec.name
        return m

    def exec_module(self, module):
        pass


def awq_packing(src):
    if src:
        sys.path.insert(0, src)
    try:
        import awq
        from awq.modules.linear.gemm import WQLinear_GEMM
        from awq.utils.packing_utils import dequantize_gemm
        return WQLinear_GEMM, dequantize_gemm, awq.__version__
    except Exception as e:  # noqa: BLE001
        print(f"AutoAWQ's packing code is not importable ({e}); pass --awq-src")
        return None


def gptqmodel_packing(src):
    if not src:
        return None
    if not any(isinstance(f, _Stubs) for f in sys.meta_path):
        sys.meta_path.append(_Stubs())
    sys.path.insert(0, src)
    try:
        import gptqmodel
        from gptqmodel.nn_modules.qlinear.torch import TorchLinear
        from gptqmodel.utils.model import convert_gptq_v2_to_v1_format_module
        return TorchLinear, convert_gptq_v2_to_v1_format_module, gptqmodel.__version__
    except Exception as e:  # noqa: BLE001
        print(f"GPTQModel's packing code is not importable ({e})")
        return None
