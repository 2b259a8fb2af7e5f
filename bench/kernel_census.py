"""Kernel census of single modules: the kernels an eager implementation launches and the bytes it
moves, counted by intercepting every ATen op of the real PyTorch / Hugging Face module on the CPU.

This is the measurement behind the eager constants of `perfmodel/kernels/work.py` (`EAGER`): for
each kernel kind, variant, dtype and phase, the kernels launched and the HBM bytes moved as a
linear function of the work's size. Counted modules (transformers 5.x, torch 2.13):

- norm: Hugging Face `LlamaRMSNorm` (upcast to fp32, pow, mean, rsqrt, mul, cast, weight mul);
  `torch.nn.LayerNorm` (native_layer_norm); `torch.nn.RMSNorm` (CPU: the composite; on CUDA torch
  dispatches `_fused_rms_norm`, one kernel: see work.py)
- activation: `F.silu(gate) * up` (LlamaMLP's act_fn * up), `F.gelu(gate, approximate="tanh") * up`
  (GeGLU), `F.gelu` (BERT), `NewGELUActivation` (GPT-2), `F.relu`, `F.silu`
- rotary: Hugging Face `apply_rotary_pos_emb(q, k, cos, sin)` (q/k (b, heads, s, head_dim))
- elementwise: residual add, mul, cast, softmax (`F.softmax`); dropout is written down from the
  CUDA source (CPU dropout decomposes, CUDA runs `native_dropout`: see work.py)
- loss: Hugging Face `ForCausalLMLoss` (logits `.float()` upcast, label shift, `F.cross_entropy`)
- embedding: `torch.nn.Embedding`
- optimizer: `torch.optim.AdamW` with foreach=False (for-loop), foreach=True, fused=True;
  `torch.optim.SGD` (foreach, with and without momentum); `torch.nn.utils.clip_grad_norm_`
  (foreach and for-loop), the gradient clipping before a step; GradScaler's unscaling kernel
  (`_amp_foreach_non_finite_check_and_unscale_`, fp16 autocast)

Per op: bytes = the bytes of its tensor inputs + its outputs, each counted once over the memory it
spans (a broadcast operand, stride 0, counts its real size), views free (no kernel). Ops whose
tensors are all 0-dim are host-side scalars on a GPU (the optimizer's step counters live on the
CPU) and are not kernels. Backward is driven by a dense upstream gradient (no `.sum()` in the graph).

Sizes: each module runs at three sizes; bytes = a * main + b * cols + c * rows is solved exactly
(main = the main tensor's elements, cols = its last dimension, rows = the rest), which a fourth size
checks (max relative residual reported).

    python bench/kernel_census.py > bench/kernel_census.json
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

FREE_OPS = {
    "detach",
    "alias",
    "lift_fresh",
    "empty",
    "empty_like",
    "empty_strided",
    "_local_scalar_dense",
    "_record_function_enter_new",
    "_record_function_exit",
}
GATHER_OPS = {"nll_loss_forward": 0, "embedding": 0, "index_select": 0}
"""Ops that read only the rows they gather from their first input (the output's size), not all of it."""
SHAPE_ONLY_ARGS = {"nll_loss_backward": ("self",)}
"""Tensor arguments an op takes for their shape only (nll_loss_backward zero-fills and scatters into a
gradient shaped like `self`; the CUDA kernel never reads it)."""
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def _span_bytes(t: torch.Tensor) -> int:
    """Bytes a tensor really spans: stride-0 (broadcast) dimensions count once."""
    n = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if stride != 0:
            n *= size
    return n * t.element_size()


def _tensors(tree: Any) -> list[torch.Tensor]:
    flat, _ = tree_flatten(tree)
    return [t for t in flat if isinstance(t, torch.Tensor)]


class Census(TorchDispatchMode):
    """Counts kernels (non-view ATen ops) and the bytes they move while active."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels = 0
        self.bytes = 0
        self.ops: Counter[str] = Counter()
        self.foreach_depths: list[int] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if func.is_view or name in FREE_OPS:
            return out
        ins, outs = _tensors((args, kwargs)), _tensors(out)
        if ins + outs and all(t.dim() == 0 for t in ins + outs):
            return out  # host-side scalar work (optimizer step counters on the CPU)
        written = [
            t
            for a, v in zip(func._schema.arguments, args, strict=False)
            if a.alias_info is not None and a.alias_info.is_write
            for t in _tensors(v)
        ]  # in-place and out= arguments: read and written (foreach ops return nothing)
        seen = {id(t) for t in written}
        outs = [
            t for t in outs if id(t) not in seen and not any(t.data_ptr() == w.data_ptr() for w in written)
        ]
        unread = {
            id(t)
            for a, v in zip(func._schema.arguments, args, strict=False)
            if a.name in SHAPE_ONLY_ARGS.get(name, ())
            for t in _tensors(v)
        }
        read = sum(_span_bytes(t) for t in ins if id(t) not in unread)
        if name in GATHER_OPS:  # reads only the gathered rows of its first input
            read += sum(_span_bytes(t) for t in _tensors(out)[:1]) - _span_bytes(ins[0])
        self.kernels += 1
        self.ops[name] += 1
        self.bytes += read + sum(_span_bytes(t) for t in written + outs)
        if name.startswith(("_foreach", "_fused", "_amp_foreach")):
            lists = [a for a in args if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor)]
            in_place = name.endswith("_") and not name.startswith("_fused")
            self.foreach_depths.append(len(lists) + (0 if in_place or name.startswith("_fused") else 1))
        return out


def _count(fn: Callable[[], Any]) -> dict[str, Any]:
    with Census() as c:
        fn()
    return {
        "kernels": c.kernels,
        "bytes": c.bytes,
        "ops": dict(sorted(c.ops.items())),
        "foreach_depths": c.foreach_depths,
    }


def _forward_backward(build: Callable[[], tuple[Callable[[], Any], list[torch.Tensor]]]) -> dict[str, Any]:
    """Census of the forward and of the backward (dense upstream gradients, `autograd.grad`: the
    gradients are returned, not accumulated into `.grad`, as inside a network) of one call."""
    _one_pass(build)  # warm-up: lazy initialisation outside the census
    return _one_pass(build)


def _one_pass(build: Callable[[], tuple[Callable[[], Any], list[torch.Tensor]]]) -> dict[str, Any]:
    run, leaves = build()
    holder: dict[str, Any] = {}
    fwd = _count(lambda: holder.setdefault("out", run()))
    outs = [t for t in _tensors(holder["out"]) if t.requires_grad]
    grads = [torch.randn_like(t) for t in outs]
    bwd = _count(lambda: torch.autograd.grad(outs, leaves, grads, allow_unused=True))
    return {"forward": fwd, "backward": bwd}


def _leaf(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype).requires_grad_(True)


# --- the modules ---------------------------------------------------------------------------------


def norm_rms_hf(rows: int, cols: int, dtype: torch.dtype):  # type: ignore[no-untyped-def]
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    def build():  # type: ignore[no-untyped-def]
        m = LlamaRMSNorm(cols).to(dtype)
        x = _leaf((rows, cols), dtype)
        return (lambda: m(x)), [x, *m.parameters()]

    return build


def norm_rms_torch(rows: int, cols: int, dtype: torch.dtype):  # type: ignore[no-untyped-def]
    def build():  # type: ignore[no-untyped-def]
        m = torch.nn.RMSNorm(cols).to(dtype)
        x = _leaf((rows, cols), dtype)
        return (lambda: m(x)), [x, *m.parameters()]

    return build


def norm_layer(rows: int, cols: int, dtype: torch.dtype):  # type: ignore[no-untyped-def]
    def build():  # type: ignore[no-untyped-def]
        m = torch.nn.LayerNorm(cols).to(dtype)
        x = _leaf((rows, cols), dtype)
        return (lambda: m(x)), [x, *m.parameters()]

    return build


def _gated(act: Callable[[torch.Tensor], torch.Tensor]):  # type: ignore[no-untyped-def]
    def make(rows: int, cols: int, dtype: torch.dtype):  # type: ignore[no-untyped-def]
        def build():  # type: ignore[no-untyped-def]
            g, u = _leaf((rows, cols), dtype), _leaf((rows, cols), dtype)
            return (lambda: act(g) * u), [g, u]

        return build

    return make


def _unary(act: Callable[[torch.Tensor], torch.Tensor]):  # type: ignore[no-untyped-def]
    def make(rows: int, cols: int, dtype: torch.dtype):  # type: ignore[no-untyped-def]
        def build():  # type: ignore[no-untyped-def]
            x = _leaf((rows, cols), dtype)
            return (lambda: act(x)), [x]

        return build

    return make


def _new_gelu(x: torch.Tensor) -> torch.Tensor:
    from transformers.activations import NewGELUActivation

    return NewGELUActivation()(x)


def rotary_hf(rows: int, cols: int, dtype: torch.dtype, q_heads: int = 4, kv_heads: int = 2):  # type: ignore[no-untyped-def]
    """rows = tokens (batch 1), cols = head_dim."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    def build():  # type: ignore[no-untyped-def]
        q, k = _leaf((1, q_heads, rows, cols), dtype), _leaf((1, kv_heads, rows, cols), dtype)
        cos, sin = torch.randn(1, rows, cols, dtype=dtype), torch.randn(1, rows, cols, dtype=dtype)
        return (lambda: apply_rotary_pos_emb(q, k, cos, sin)), [q, k]

    return build


def residual_add(rows: int, cols: int, dtype: torch.dtype):  # type: ignore[no-untyped-def]
    """x + y: the forward add (its backward passes the gradient through unchanged; the add that sums
    the two gradients where the residual stream forks is written down in work.py)."""

    def build():  # type: ignore[no-untyped-def]
        x, y = _leaf((rows, cols), dtype), _leaf((rows, cols), dtype)
        return (lambda: x + y), [x, y]

    return build


def softmax(rows: int, cols: int, dtype: torch.dtype):  # type: ignore[no-untyped-def]
    def build():  # type: ignore[no-untyped-def]
        x = _leaf((rows, cols), dtype)
        return (lambda: F.softmax(x, dim=-1)), [x]

    return build


def cross_entropy_hf(rows: int, cols: int, dtype: torch.dtype):  # type: ignore[no-untyped-def]
    """rows = tokens (batch 1), cols = vocabulary."""
    from transformers.loss.loss_utils import ForCausalLMLoss

    def build():  # type: ignore[no-untyped-def]
        logits = _leaf((1, rows, cols), dtype)
        labels = torch.randint(0, cols, (1, rows))
        return (lambda: ForCausalLMLoss(logits, labels, vocab_size=cols)), [logits]

    return build


def embedding(rows: int, cols: int, dtype: torch.dtype, vocab: int = 512):  # type: ignore[no-untyped-def]
    """rows = tokens, cols = hidden size; the vocabulary is fixed (the per-col term carries it)."""

    def build():  # type: ignore[no-untyped-def]
        m = torch.nn.Embedding(vocab, cols).to(dtype)
        ids = torch.randint(0, vocab, (rows,))
        return (lambda: m(ids)), list(m.parameters())

    return build


def attention_math_hf(batch: int, heads: int, seq: int, head_dim: int, dtype: torch.dtype):  # type: ignore[no-untyped-def]
    """Hugging Face `eager_attention_forward` (attn_implementation="eager") with a causal additive mask
    and attention dropout 0 (Llama's default): QK^T, scale, mask add, fp32 softmax, cast, PV."""
    from types import SimpleNamespace

    from transformers.models.llama.modeling_llama import eager_attention_forward

    def build():  # type: ignore[no-untyped-def]
        q, k, v = (_leaf((batch, heads, seq, head_dim), dtype) for _ in range(3))
        mask = torch.full((seq, seq), float("-inf"), dtype=dtype).triu(1)[None, None]
        module = SimpleNamespace(num_key_value_groups=1, training=True)
        return (lambda: eager_attention_forward(module, q, k, v, mask, head_dim**-0.5)[0]), [q, k, v]

    return build


def batch_norm_2d(rows: int, cols: int, dtype: torch.dtype):  # type: ignore[no-untyped-def]
    """torch.nn.BatchNorm2d in training: rows = N * H * W (H = W = 4), cols = channels."""

    def build():  # type: ignore[no-untyped-def]
        m = torch.nn.BatchNorm2d(cols).to(dtype)
        x = _leaf((rows // 16, cols, 4, 4), dtype)
        return (lambda: m(x)), [x, *m.parameters()]

    return build


MODULES: dict[str, Callable[..., Any]] = {
    "norm/rms": norm_rms_hf,
    "norm/rms-torch": norm_rms_torch,
    "norm/layer": norm_layer,
    "norm/batch": batch_norm_2d,
    "activation/swiglu": _gated(F.silu),
    "activation/geglu": _gated(lambda g: F.gelu(g, approximate="tanh")),
    "activation/gelu": _unary(F.gelu),
    "activation/gelu-new": _unary(_new_gelu),
    "activation/relu": _unary(F.relu),
    "activation/silu": _unary(F.silu),
    "rotary/rope": rotary_hf,
    "elementwise/add": residual_add,
    "elementwise/softmax": softmax,
    "loss/cross_entropy": cross_entropy_hf,
    "embedding/lookup": embedding,
    "attention/math": attention_math_hf,
}
SIZES = ((64, 128), (96, 256), (160, 384), (128, 512))
"""(rows, cols): three to solve bytes = a*rows*cols + b*cols + c*rows exactly, one to check."""
ROTARY_SIZES = ((64, 64, 4, 2), (96, 128, 4, 4), (160, 64, 8, 2), (128, 128, 8, 4))
"""(tokens, head_dim, q_heads, kv_heads) for rotary: bytes = a * (q + k elements) + b * tokens * head_dim
(the cos/sin tables) + c * tokens."""
ATTENTION_SIZES = ((1, 2, 64, 32), (2, 2, 96, 64), (1, 4, 128, 32), (2, 4, 160, 64))
"""(batch, heads, seq, head_dim) for the math attention: bytes = a * scores (batch * heads * seq^2)
+ b * q/k/v elements (batch * heads * seq * head_dim) + c * mask elements (seq^2)."""


_COEF_NAMES = {
    "rotary/rope": ("bytes_per_table_element", "bytes_per_row"),
    "attention/math": ("bytes_per_qkv_element", "bytes_per_mask_element"),
}


def census_module(key: str, dtype_name: str) -> dict[str, Any]:
    dtype = DTYPES[dtype_name]
    if key == "rotary/rope":
        runs = [_forward_backward(rotary_hf(t, d, dtype, hq, hkv)) for t, d, hq, hkv in ROTARY_SIZES]
        features = [[t * (hq + hkv) * d, t * d, t] for t, d, hq, hkv in ROTARY_SIZES]
    elif key == "attention/math":
        runs = [_forward_backward(attention_math_hf(b, h, s, d, dtype)) for b, h, s, d in ATTENTION_SIZES]
        features = [[b * h * s * s, b * h * s * d, s * s] for b, h, s, d in ATTENTION_SIZES]
    else:
        runs = [_forward_backward(MODULES[key](r, c, dtype)) for r, c in SIZES]
        features = [[r * c, c, r] for r, c in SIZES]
    out: dict[str, Any] = {}
    for phase in ("forward", "backward"):
        A = np.array(features, dtype=float)
        y = np.array([run[phase]["bytes"] for run in runs], dtype=float)
        if key == "attention/math" and phase == "backward":  # the mask has no gradient: 2 regressors
            coef = np.append(np.linalg.lstsq(A[:, :2], y, rcond=None)[0], 0.0)
        else:
            coef = np.linalg.solve(A[:3], y[:3])
        resid = float(np.max(np.abs(A @ coef - y) / np.maximum(y, 1)))
        launches = sorted({run[phase]["kernels"] for run in runs})
        out[phase] = {
            "launches": launches[-1],  # the most any size launched (batch-1 shapes skip a contiguous copy)
            "launches_seen": launches,
            "bytes_per_element": round(float(coef[0]), 4),
            **dict(
                zip(
                    _COEF_NAMES.get(key, ("bytes_per_col", "bytes_per_row")),
                    (round(float(c), 4) for c in coef[1:]),
                    strict=True,
                )
            ),
            "max_rel_residual": resid,
            "ops": runs[0][phase]["ops"],
        }
    return out


# --- optimizers ----------------------------------------------------------------------------------

class ClipGradNorm:
    """torch.nn.utils.clip_grad_norm_(params, 1.0) as a step (what the Hugging Face Trainer, Ludwig and
    Megatron run before each optimizer step), counted like one."""

    def __init__(self, params: list[torch.Tensor], *, foreach: bool) -> None:
        self.params, self.foreach = params, foreach

    def step(self) -> None:
        torch.nn.utils.clip_grad_norm_(self.params, 1.0, foreach=self.foreach)


class AmpUnscale:
    """GradScaler.unscale_'s kernel over the gradients (fp16 autocast's loss scaling, each step):
    _amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)."""

    def __init__(self, params: list[torch.Tensor]) -> None:
        self.params, self.found_inf, self.inv_scale = params, torch.zeros(()), torch.ones(())

    def step(self) -> None:
        grads = [p.grad for p in self.params if p.grad is not None]
        torch._amp_foreach_non_finite_check_and_unscale_(grads, self.found_inf, self.inv_scale)


OPTIMIZERS: dict[str, Callable[[list[torch.Tensor]], Any]] = {
    "adamw-forloop": lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=False),
    "adamw-foreach": lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=True),
    "adamw-fused": lambda p: torch.optim.AdamW(p, lr=1e-3, fused=True),
    "sgd-foreach": lambda p: torch.optim.SGD(p, lr=1e-3, foreach=True),
    "sgd-momentum-foreach": lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9, foreach=True),
    "sgd-momentum-forloop": lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9, foreach=False),
    "clip-foreach": lambda p: ClipGradNorm(p, foreach=True),
    "clip-forloop": lambda p: ClipGradNorm(p, foreach=False),
    "amp-unscale": lambda p: AmpUnscale(p),
}


def census_optimizer(name: str, dtype_name: str) -> dict[str, Any]:
    """The second step (the first creates the state) over t tensors of e elements each:
    launches = a * tensors + b (for-loop) or foreach calls; bytes = c * params + d * tensors."""
    dtype = DTYPES[dtype_name]
    rows = []
    for tensors, elems in ((4, 1000), (8, 1000), (4, 3000)):
        params = [torch.randn(elems, dtype=dtype, requires_grad=True) for _ in range(tensors)]
        opt = OPTIMIZERS[name](params)
        for p in params:
            p.grad = torch.randn_like(p)
        opt.step()
        got = _count(opt.step)
        rows.append((tensors, elems, got))
    (t1, e1, a), (t2, _, b), (_, e3, c) = rows
    per_tensor_launches = (b["kernels"] - a["kernels"]) / (t2 - t1)
    fixed_launches = a["kernels"] - per_tensor_launches * t1
    bytes_per_param = (c["bytes"] - a["bytes"]) / (t1 * (e3 - e1))
    bytes_per_tensor = (a["bytes"] - bytes_per_param * t1 * e1) / t1
    return {
        "launches_per_tensor": per_tensor_launches,
        "launches_fixed": fixed_launches,
        "bytes_per_param": round(bytes_per_param, 4),
        "bytes_per_tensor": round(bytes_per_tensor, 4),
        "foreach_depths": a["foreach_depths"],
        "ops": a["ops"],
    }


def main() -> None:
    import transformers

    torch.manual_seed(0)
    modules = {}
    for key in MODULES:
        for dtype_name in DTYPES:
            modules[f"{key}/{dtype_name}"] = census_module(key, dtype_name)
            f = modules[f"{key}/{dtype_name}"]
            print(
                f"{key} {dtype_name}: fwd {f['forward']['launches']} kernels {f['forward']['bytes_per_element']} B/el, "
                f"bwd {f['backward']['launches']} kernels {f['backward']['bytes_per_element']} B/el",
                file=sys.stderr,
            )
    optimizers = {f"{n}/{d}": census_optimizer(n, d) for n in OPTIMIZERS for d in DTYPES}
    print(
        json.dumps(
            {
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                "sizes": SIZES,
                "modules": modules,
                "optimizers": optimizers,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
