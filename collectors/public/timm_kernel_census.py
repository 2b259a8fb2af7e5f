"""How many kernels each timm model of the RTX 3090 training sweep launches per step, counted on this CPU.

The CNN plan (perfmodel.analytic.step `_cnn`) knows a timm model by its FLOPs and what it saves for
backward, not by its layers, and used to cut its FLOPs into convolutions of one reference size
(ResNet-50's third stage): ResNet-50 came out as 19 such convolutions, a ghostnet_050 as 0.2 and
a resnetv2_152x4 at 480 px as 3,657. Eager PyTorch launches one kernel per operator, so the count
sets the per-kernel device and host time; the sweep's small models ran slower than that plan and
its large ones faster (docs/accuracy-history.md). This script counts what each model really dispatches.

For every (model, train image size) of the sweep it builds the model on PyTorch's meta device
(shapes only: no memory, no arithmetic; timm 0.9.16, as timm_activations.py; a model whose
constructor reads a tensor's value is built on the CPU and moved there), runs one training
step (forward on 2 images, cross-entropy, backward) under a dispatch mode that counts every aten
operator that computes (views and other aliasing operators excluded: they launch no kernel), and
writes one row per (model, image size) to TABLE:

  forward_gemm    convolutions and matmuls of the forward (the plan's layer count)
  forward_norm    normalisation operators of the forward (batch, layer, group norm)
  forward_ops     every computing operator of the forward
  backward_ops    every computing operator of the backward
  grouped_conv_layers     grouped and depthwise convolutions of the forward (groups > 1: few input
                          channels per output: one small GEMM per group, not one large one)
  grouped_conv_gflops     their forward GFLOPs per sample (2 x outputs x inputs per group x kernel)
  grouped_conv_melements  the elements they read and write per sample, millions (input + output)
  depthwise_conv_layers   of those, the depthwise ones (one input channel per group: cuDNN runs them
                          as direct stencil kernels that stream their input and output, not as GEMMs)
  depthwise_conv_gflops   their forward GFLOPs per sample
  depthwise_conv_melements  the elements they read and write per sample, millions (input + output)
  attention_bmm           batched matmuls of the forward (bmm, baddbmm: two activations, an
                          attention's scores and its weighted values)
  attention_gflops        their forward GFLOPs per sample
  attention_softmax       softmaxes of the forward (over the scores; on this meta device SDPA runs
                          its math path, as timm's 2022 explicit attention did)
  attention_mscores       the elements those softmaxes normalise per sample, millions
  params_m        parameters (millions) of the model built (timm maps some old names to others)
  (the optimizer step is the plan's own term and is not counted here)

collectors.public.timm reads TABLE; a model missing from it keeps the reference-size plan, and its
row's notes say so.

    make timm-census     # in the timm venv (make timm-env); ~15 min on 2 cores

Opt-in (not in CI): timm needs torchvision, which the project's CPU torch cannot load.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TABLE = Path(__file__).with_name("timm_kernel_census.csv")
COLUMNS = (
    "model",
    "img_size",
    "forward_gemm",
    "forward_norm",
    "forward_ops",
    "backward_ops",
    "grouped_conv_layers",
    "grouped_conv_gflops",
    "grouped_conv_melements",
    "depthwise_conv_layers",
    "depthwise_conv_gflops",
    "depthwise_conv_melements",
    "attention_bmm",
    "attention_gflops",
    "attention_softmax",
    "attention_mscores",
    "params_m",
    "timm_version",
    "torch_version",
)
SOURCE = "timm_benchmark_train.csv"
GEMM_OPS = frozenset(
    {
        "convolution",
        "mm",
        "addmm",
        "bmm",
        "baddbmm",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
    }
)
"""aten operators (overload packet names) that run a GEMM-like kernel."""
NORM_OPS = frozenset(
    {
        "native_batch_norm",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_functional",
        "native_layer_norm",
        "native_group_norm",
        "_batch_norm_with_update",
    }
)
"""aten operators of a normalisation layer's forward."""
BMM_OPS = frozenset({"bmm", "baddbmm"})
"""Batched matmuls of two activations (an attention's q k^T and p v; a linear layer runs mm/addmm)."""
SOFTMAX_OPS = frozenset({"_softmax", "_safe_softmax"})
"""Softmax kernels (SDPA's math path runs _safe_softmax)."""
NO_KERNEL = frozenset(
    {
        "_unsafe_view",
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "lift_fresh",
        "_local_scalar_dense",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "is_same_size",
    }
)
"""Operators that launch no kernel though their schema does not mark an alias (a view that
_unsafe_view returns, allocations, metadata)."""


def _aliases(func: Any) -> bool:
    """The operator returns a view of an input (view, permute, expand, split, ...): no kernel."""
    returns = func._schema.returns
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


def count_step(model: Any, x: Any, y: Any) -> dict[str, float]:
    """The counts of one training step of `model` (forward on x, cross-entropy against y,
    backward), run as it is (on the meta device: shapes only)."""
    # torch: the timm venv, or the project's (tests run this on a plain torch module)
    import torch.nn.functional as F
    from torch.utils._python_dispatch import TorchDispatchMode

    counts: dict[str, Counter[str]] = {"forward": Counter(), "backward": Counter()}
    phase = ["forward"]
    grouped = {"layers": 0.0, "flops": 0.0, "elements": 0.0}
    depthwise = {"layers": 0.0, "flops": 0.0, "elements": 0.0}
    attention = {"bmm": 0.0, "flops": 0.0, "softmax": 0.0, "scores": 0.0}

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            packet = func.overloadpacket.__name__
            if packet not in NO_KERNEL and not _aliases(func):
                counts[phase[0]][packet] += 1
            result = func(*args, **(kwargs or {}))
            # aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
            if phase[0] == "forward" and packet in BMM_OPS:
                inner = (args[0] if packet == "bmm" else args[1]).shape[-1]
                attention["bmm"] += 1
                attention["flops"] += 2.0 * result.numel() * inner
            if phase[0] == "forward" and packet in SOFTMAX_OPS:
                attention["softmax"] += 1
                attention["scores"] += result.numel()
            if packet == "convolution" and phase[0] == "forward" and int(args[8]) > 1:
                weight = args[1]
                per_output = 2.0 * weight.shape[1] * math.prod(weight.shape[2:])
                for tally in (grouped, depthwise) if weight.shape[1] == 1 else (grouped,):
                    tally["layers"] += 1
                    tally["flops"] += per_output * result.numel()
                    tally["elements"] += args[0].numel() + result.numel()
            return result

    batch = float(x.shape[0])
    with Count():
        loss = F.cross_entropy(model(x), y)
        phase[0] = "backward"
        loss.backward()
    fwd = counts["forward"]
    return {
        "forward_gemm": sum(v for k, v in fwd.items() if k in GEMM_OPS),
        "forward_norm": sum(v for k, v in fwd.items() if k in NORM_OPS),
        "forward_ops": sum(fwd.values()),
        "backward_ops": sum(counts["backward"].values()),
        "grouped_conv_layers": grouped["layers"],
        "grouped_conv_gflops": float(f"{grouped['flops'] / batch / 1e9:.6g}"),
        "grouped_conv_melements": float(f"{grouped['elements'] / batch / 1e6:.6g}"),
        "depthwise_conv_layers": depthwise["layers"],
        "depthwise_conv_gflops": float(f"{depthwise['flops'] / batch / 1e9:.6g}"),
        "depthwise_conv_melements": float(f"{depthwise['elements'] / batch / 1e6:.6g}"),
        "attention_bmm": attention["bmm"],
        "attention_gflops": float(f"{attention['flops'] / batch / 1e9:.6g}"),
        "attention_softmax": attention["softmax"],
        "attention_mscores": float(f"{attention['scores'] / batch / 1e6:.6g}"),
        "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 3),
    }


def census(name: str, image: int) -> dict[str, float]:
    """The counts of one timm model (see the module docstring), from one meta-device training step."""
    # timm, torch: only the timm venv has them (timm needs torchvision)
    import timm
    import torch

    try:
        with torch.device("meta"):
            model = timm.create_model(name, pretrained=False, num_classes=1000)
    except (RuntimeError, NotImplementedError):  # its constructor reads a tensor's value: build it on the CPU
        model = timm.create_model(name, pretrained=False, num_classes=1000).to("meta")
    model.train()
    x = torch.randn(2, 3, image, image, device="meta")
    y = torch.randint(0, 1000, (2,), device="meta")
    return count_step(model, x, y)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", default=str(ROOT.parent / "shared" / "data" / "public" / SOURCE))
    parser.add_argument("--out", default=str(TABLE))
    parser.add_argument("--limit", type=int, default=0, help="count at most this many models (0: all)")
    parser.add_argument("--models", nargs="*", default=None, help="only these model names")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    # timm, torch: only the timm venv has them
    import timm
    import torch

    from collectors.public.timm_activations import over_sweep, todo_of

    out = Path(args.out)
    todo = todo_of(out, Path(args.sweep), args.limit, args.models)

    def row(name: str, image: int) -> tuple[Any, ...]:
        counts = census(name, image)
        return (*(counts[c] for c in COLUMNS[2:-2]), timm.__version__, torch.__version__)

    # a model the meta device cannot run keeps the fallback
    failed = over_sweep(out, COLUMNS, todo, row, skip=(Exception,))
    print(f"counted {len(todo) - failed}, skipped {failed}; table: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
