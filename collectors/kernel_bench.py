"""Kernel micro-benchmarks: the eager modules a training step is made of, timed on the device one
module at a time, as rows of the kernel table (`perfmodel kernels build` reads them from the
micro-benchmark shards: collectors/public/kernels_misc.import_microbench).

The kinds the kernel table has least of: normalisation, the gated activation, rotary embeddings, the
cross-entropy over the vocabulary and the embedding (docs/kernels.md: each measured on one to three
accelerators, each by another benchmark). Each benchmark is the module bench/kernel_census.py counts
(Hugging Face's code written out here, so that a GPU image needs no transformers;
tests/test_kernel_bench.py checks each against transformers' own), and its row's work comes from the
same `perfmodel.kernels.work` function the step plan prices it with:

| key | module | shape | work |
|---|---|---|---|
| norm/rms | `LlamaRMSNorm` (upcast to fp32, pow, mean, rsqrt, mul, cast, weight mul) | ROWSxCOLS | `norm_work(variant="rms")` |
| norm/layer | `torch.nn.LayerNorm` | ROWSxCOLS | `norm_work(variant="layer")` |
| activation/swiglu | `F.silu(gate) * up` (LlamaMLP's act_fn(gate_proj(x)) * up_proj(x)) | ROWSxCOLS | `activation_work(variant="swiglu")` |
| rotary/rope | `apply_rotary_pos_emb(q, k, cos, sin)`, q/k (1, heads, tokens, head_dim) | TOKENSxQHEADSxKVHEADSxHEADDIM | `rotary_work` |
| loss/cross_entropy | `ForCausalLMLoss` (logits upcast to fp32, labels shifted, `F.cross_entropy`) | TOKENSxVOCAB | `loss_work` |
| embedding/lookup | `torch.nn.Embedding` | TOKENSxVOCABxDIM | `embedding_work` |

Phases, as the census counts them: `forward` (the module's forward, its inputs requiring grad as in
training) and `full` (forward + backward: `torch.autograd.grad` with a dense upstream gradient, the
gradients returned, not accumulated into `.grad`, as inside a network). Each call is timed back to
back with the L2 not flushed (`collectors.microbench._time_call`), as a step runs its kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perfmodel.kernels import work as W
from perfmodel.kernels.work import KernelWork

PHASES = ("forward", "full")
"""Phases a kernel benchmark times (a module's backward alone needs its forward first)."""
DTYPES = ("fp32", "bf16")
"""Dtypes of the memory-bound kinds (fp16 streams as bf16 does)."""
RMS_EPS = 1e-6
"""LlamaRMSNorm's default variance_epsilon."""


@dataclass(frozen=True, kw_only=True)
class KernelBench:
    """One module a training step runs, as a benchmark."""

    key: str
    """kind/variant of the kernel table."""
    dims: tuple[str, ...]
    """Names of the shape's dimensions, in the order the shape string gives them."""
    work: Callable[[tuple[int, ...], str, str], KernelWork]
    """(dims, dtype, phase) -> the work the step plan prices for it."""
    build: Callable[[tuple[int, ...], Any, Any], tuple[Callable[[], Any], list[Any]]]
    """(dims, torch dtype, torch device) -> (forward call, the tensors the backward differentiates)."""


# --- the modules (Hugging Face's code, transformers 5.25, written out) --------------------------


def rms_norm_hf(x: Any, weight: Any, eps: float = RMS_EPS) -> Any:
    """transformers models/llama/modeling_llama.py LlamaRMSNorm.forward."""
    import torch  # torch: only measuring needs it (the importer and the planner do not)

    input_dtype = x.dtype
    hidden = x.to(torch.float32)
    variance = hidden.pow(2).mean(-1, keepdim=True)
    hidden = hidden * torch.rsqrt(variance + eps)
    return weight * hidden.to(input_dtype)


def rotate_half(x: Any) -> Any:
    """transformers models/llama/modeling_llama.py rotate_half."""
    import torch  # torch: only measuring needs it (the importer and the planner do not)

    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb_hf(q: Any, k: Any, cos: Any, sin: Any) -> tuple[Any, Any]:
    """transformers models/llama/modeling_llama.py apply_rotary_pos_emb (unsqueeze_dim 1)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def causal_lm_loss_hf(logits: Any, labels: Any, vocab_size: int, ignore_index: int = -100) -> Any:
    """transformers loss/loss_utils.py ForCausalLMLoss (no num_items_in_batch: reduction 'mean')."""
    import torch.nn.functional as F  # only measuring needs torch

    logits = logits.float()
    labels = F.pad(labels, (0, 1), value=ignore_index)
    shift_labels = labels[..., 1:].contiguous()
    logits = logits.view(-1, vocab_size)
    shift_labels = shift_labels.view(-1).to(logits.device)
    return F.cross_entropy(logits, shift_labels, ignore_index=ignore_index, reduction="mean")


def _leaf(shape: tuple[int, ...], dtype: Any, device: Any) -> Any:
    import torch  # torch: only measuring needs it (the importer and the planner do not)

    return torch.randn(*shape, dtype=dtype, device=device).requires_grad_(True)


def _build_rms(dims: tuple[int, ...], dtype: Any, device: Any) -> tuple[Callable[[], Any], list[Any]]:
    import torch  # torch: only measuring needs it (the importer and the planner do not)

    rows, cols = dims
    x = _leaf((rows, cols), dtype, device)
    weight = torch.ones(cols, dtype=dtype, device=device).requires_grad_(True)
    return (lambda: rms_norm_hf(x, weight)), [x, weight]


def _build_layer(dims: tuple[int, ...], dtype: Any, device: Any) -> tuple[Callable[[], Any], list[Any]]:
    import torch  # torch: only measuring needs it (the importer and the planner do not)

    rows, cols = dims
    m = torch.nn.LayerNorm(cols).to(device=device, dtype=dtype)
    x = _leaf((rows, cols), dtype, device)
    return (lambda: m(x)), [x, *m.parameters()]


def _build_swiglu(dims: tuple[int, ...], dtype: Any, device: Any) -> tuple[Callable[[], Any], list[Any]]:
    import torch.nn.functional as F  # only measuring needs torch

    rows, cols = dims
    gate, up = _leaf((rows, cols), dtype, device), _leaf((rows, cols), dtype, device)
    return (lambda: F.silu(gate) * up), [gate, up]


def _build_rope(dims: tuple[int, ...], dtype: Any, device: Any) -> tuple[Callable[[], Any], list[Any]]:
    import torch  # torch: only measuring needs it (the importer and the planner do not)

    tokens, q_heads, kv_heads, head_dim = dims
    q, k = _leaf((1, q_heads, tokens, head_dim), dtype, device), _leaf((1, kv_heads, tokens, head_dim), dtype, device)
    cos = torch.randn(1, tokens, head_dim, dtype=dtype, device=device)
    sin = torch.randn(1, tokens, head_dim, dtype=dtype, device=device)
    return (lambda: apply_rotary_pos_emb_hf(q, k, cos, sin)), [q, k]


def _build_loss(dims: tuple[int, ...], dtype: Any, device: Any) -> tuple[Callable[[], Any], list[Any]]:
    import torch  # torch: only measuring needs it (the importer and the planner do not)

    tokens, vocab = dims
    logits = _leaf((1, tokens, vocab), dtype, device)
    labels = torch.randint(0, vocab, (1, tokens), device=device)
    return (lambda: causal_lm_loss_hf(logits, labels, vocab)), [logits]


def _build_embedding(dims: tuple[int, ...], dtype: Any, device: Any) -> tuple[Callable[[], Any], list[Any]]:
    import torch  # torch: only measuring needs it (the importer and the planner do not)

    tokens, vocab, dim = dims
    m = torch.nn.Embedding(vocab, dim).to(device=device, dtype=dtype)
    ids = torch.randint(0, vocab, (tokens,), device=device)
    return (lambda: m(ids)), list(m.parameters())


BENCHES: dict[str, KernelBench] = {
    b.key: b
    for b in (
        KernelBench(key="norm/rms", dims=("rows", "cols"), build=_build_rms,
                    work=lambda d, dt, ph: W.norm_work(d[0], d[1], dt, variant="rms", phase=ph)),
        KernelBench(key="norm/layer", dims=("rows", "cols"), build=_build_layer,
                    work=lambda d, dt, ph: W.norm_work(d[0], d[1], dt, variant="layer", phase=ph)),
        KernelBench(key="activation/swiglu", dims=("rows", "cols"), build=_build_swiglu,
                    work=lambda d, dt, ph: W.activation_work(d[0], d[1], dt, variant="swiglu", phase=ph)),
        KernelBench(key="rotary/rope", dims=("tokens", "q_heads", "kv_heads", "head_dim"), build=_build_rope,
                    work=lambda d, dt, ph: W.rotary_work(d[0], d[1], d[2], d[3], dt, phase=ph)),
        KernelBench(key="loss/cross_entropy", dims=("tokens", "vocab"), build=_build_loss,
                    work=lambda d, dt, ph: W.loss_work(d[0], d[1], dt, phase=ph)),
        KernelBench(key="embedding/lookup", dims=("tokens", "vocab", "dim"), build=_build_embedding,
                    work=lambda d, dt, ph: W.embedding_work(d[0], d[1], d[2], dt, phase=ph)),
    )
}  # fmt: skip
"""Every kernel benchmark by key."""

BENCH_PREFIX = "kernel "
"""A kernel benchmark's `bench` column: 'kernel <key> <phase>', e.g. 'kernel norm/rms full'."""


def bench_name(key: str, phase: str) -> str:
    return f"{BENCH_PREFIX}{key} {phase}"


def parse_bench(bench: str, shape: str) -> tuple[KernelBench, str, tuple[int, ...]]:
    """(benchmark, phase, dims) of a row's `bench` and `shape` columns; ValueError when they are not
    a kernel benchmark's."""
    parts = bench.removeprefix(BENCH_PREFIX).split()
    if not bench.startswith(BENCH_PREFIX) or len(parts) != 2 or parts[0] not in BENCHES or parts[1] not in PHASES:
        raise ValueError(f"not a kernel benchmark: {bench!r}")
    spec = BENCHES[parts[0]]
    fields = shape.split("x")
    if len(fields) != len(spec.dims) or not all(f.isdigit() and int(f) > 0 for f in fields):
        raise ValueError(f"{bench}: shape {shape!r} is not {'x'.join(d.upper() for d in spec.dims)}")
    return spec, parts[1], tuple(int(f) for f in fields)


def work_of(bench: str, dtype: str, shape: str) -> KernelWork:
    """The work the step plan prices for a kernel benchmark's row."""
    spec, phase, dims = parse_bench(bench, shape)
    return spec.work(dims, dtype, phase)


def timed_call(bench: str, shape: str, dtype: Any, device: Any) -> Callable[[], Any]:
    """The call one sample of a kernel benchmark repeats: the module's forward, or its forward and
    backward (dense upstream gradients, drawn once)."""
    import torch  # torch: only measuring needs it (the importer and the planner do not)

    spec, phase, dims = parse_bench(bench, shape)
    forward, leaves = spec.build(dims, dtype, device)
    if phase == "forward":
        return forward
    outs = [t for t in _flat(forward()) if t.requires_grad]
    grads = [torch.randn_like(t) for t in outs]

    def forward_backward() -> Any:
        return torch.autograd.grad([t for t in _flat(forward()) if t.requires_grad], leaves, grads, allow_unused=True)

    return forward_backward


def _flat(out: Any) -> list[Any]:
    return list(out) if isinstance(out, tuple | list) else [out]


def plan_entries(
    sizes: dict[str, tuple[tuple[int, ...], ...]], dtypes: tuple[str, ...] = DTYPES
) -> tuple[tuple[str, str, str], ...]:
    """(bench, dtype, shape) of every benchmark of `sizes` (key -> dims tuples) in each dtype and phase."""
    return tuple(
        (bench_name(key, phase), dtype, "x".join(str(d) for d in dims))
        for key, shapes in sizes.items()
        for dims in shapes
        for dtype in dtypes
        for phase in PHASES
    )


GPU_SIZES: dict[str, tuple[tuple[int, ...], ...]] = {
    "norm/rms": ((2048, 4096), (8192, 4096), (16384, 8192)),
    "norm/layer": ((8192, 1024), (8192, 4096)),
    "activation/swiglu": ((2048, 11008), (8192, 14336)),
    "rotary/rope": ((4096, 32, 8, 128), (16384, 32, 32, 128)),
    "loss/cross_entropy": ((2048, 32000), (4096, 128256), (8192, 151936)),
    "embedding/lookup": ((8192, 32000, 4096), (16384, 128256, 4096)),
}
"""Sizes on an H100/H200-class device: a 1-8 B decoder's tokens per micro-batch and widths (all
above a 50 MB L2 but the smallest of each kind), 2-5 GB at most per call."""
