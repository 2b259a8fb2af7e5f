"""What one kernel call is: its kind, implementation, dtype, phase, useful FLOPs, the bytes an ideal
(fused) kernel moves, the bytes and launches the real implementation moves, and its shape.

One constructor per kind builds a `KernelWork` from the dimensions a user knows (rows, columns,
heads, vocabulary ...). Both sides use them: the kernel-table importers (a measured row -> its work)
and the step composer (a workload's layer -> its works), so a measured and a predicted kernel are
described the same way.

`bytes` is the fused ideal: every input read once and every output written once. `bytes_moved` and
`launches` are what the implementation really does: for `impl="eager"` the real PyTorch / Hugging
Face module, op by op, as counted by bench/kernel_census.py (`perfmodel.kernels.census`), corrected
where CUDA dispatches differently from the CPU the census ran on (each correction cites its source);
for `fused` (one hand-written kernel: Liger/Triton, apex, Transformer Engine, unsloth) and
`compiled` (torch.compile / Inductor) the ideal bytes in one or two kernels per phase.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfmodel.kernels.census import CENSUS_VOCAB, EAGER_CENSUS, OPTIMIZER_CENSUS

# fmt: off
KERNEL_KINDS = (
    "matmul", "attention", "norm", "activation", "rotary", "elementwise", "loss", "embedding", "optimizer",
    "dequant", "conv",
)
# fmt: on
"""Kinds of kernel work; each has its constructor below and its efficiency terms."""

IMPLS = ("eager", "fused", "compiled")
"""eager = op by op (PyTorch / Hugging Face modules); fused = one hand-written kernel (Liger/Triton,
apex, Transformer Engine, unsloth); compiled = torch.compile (Inductor)."""

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")
"""What a kernel computes / stores in (tf32 = fp32 tensors with TF32 tensor-core matmuls)."""

PHASES = ("forward", "backward", "full")
"""full = forward + backward (the optimizer step, which has neither, is 'full')."""

BYTES_PER_ELEMENT = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
"""Bytes of one stored element per dtype."""

VARIANTS: dict[str, tuple[str, ...]] = {
    "matmul": ("gemm", "gemm-dgrad", "gemm-wgrad", "bmm", "bmm-dgrad", "bmm-wgrad"),
    "attention": ("flash", "efficient", "math"),
    "norm": ("rms", "rms-torch", "layer", "batch"),
    "activation": ("swiglu", "geglu", "gelu", "gelu-new", "relu", "silu"),
    "rotary": ("rope",),
    "elementwise": ("add", "mul", "cast", "copy", "dropout", "softmax", "scale"),
    "loss": ("cross_entropy",),
    "embedding": ("lookup",),
    "optimizer": tuple(OPTIMIZER_CENSUS),
    "dequant": ("nf4", "int8"),
    "conv": ("conv2d",),
}
"""Allowed variants per kind. matmul '-dgrad' / '-wgrad': a backward with only the input (data) or
only the weight gradient (frozen weights: LoRA bases; the first layer needs no input gradient).
norm 'rms' = Hugging Face LlamaRMSNorm (op by op), 'rms-torch' = torch.nn.RMSNorm (one CUDA kernel).
attention 'math' = the materialised-scores path (Hugging Face eager attention, SDPA's math backend)."""

# --- CUDA facts the CPU census cannot see -------------------------------------------------------

MTA_MAX_TENSORS = {1: 110, 2: 64, 3: 48, 4: 36, 5: 30}
"""Tensors one multi_tensor_apply launch covers, by tensor-list depth (PyTorch
aten/src/ATen/native/cuda/MultiTensorApply.cuh: depth_to_max_tensors = {110, 64, 48, 36, 30})."""

MTA_MAX_BLOCKS = 320
"""Blocks (chunks) one multi_tensor_apply launch covers (MultiTensorApply.cuh depth_to_max_blocks)."""

MTA_CHUNK_ELEMENTS = 65536
"""Elements per chunk (MultiTensorApply.cuh kChunkSize)."""

QUANT_SCALE_BITS_PER_WEIGHT = {"nf4": 0.127, "int8": 0.5}
"""Quantization constants per weight: QLoRA's double-quantized absmax, 8 bits per 64 weights plus
32 bits per 256 blocks = 0.127 bit (Dettmers et al. 2023, "QLoRA", section 3); LLM.int8 keeps one
fp32 scale per row (for a 4096-wide row ~0.008 bit; 0.5 bit bounds the outlier columns too)."""

FLASH_BACKWARD_LAUNCHES = 3
"""FlashAttention-2 backward: the dO.O preprocess, the dq/dk/dv main kernel and the dq fp32->dtype
conversion (Dao-AILab/flash-attention csrc/flash_attn/src/flash_bwd_launch_template.h:
flash_bwd_dot_do_o_kernel, flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel, flash_bwd_convert_dq_kernel)."""

MATH_SCORE_BYTES = {
    ("half", "forward"): (4.0, 4.0, 24.0, 4),
    ("half", "backward"): (8.0, 0.0, 28.0, 4),
    ("fp32", "forward"): (8.0, 8.0, 16.0, 2),
    ("fp32", "backward"): (16.0, 0.0, 20.0, 2),
}
"""The materialised-scores ('math') attention on a GPU, per score element, per (dtype class, phase):
(bytes its batched GEMMs read and write of the scores, bytes of the causal mask add, bytes of its
other elementwise kernels, those kernels' launches without the mask add). Hugging Face
eager_attention_forward (matmul(q, k^T) * scaling, + causal mask, softmax(dtype=float32), .to(dtype),
dropout p=0 - a no-op in at::dropout - matmul(p, v)) and timm's Attention (q @ k^T * scale, softmax
under autocast, @ v) dispatch the same kernels on CUDA:
- forward, 16-bit: QK^T writes e and PV reads e bytes (the GEMMs'); scale 2e; mask add 2e; the cast to
  fp32 e+4 (autocast's cast, or softmax's dtype= on bf16: aten/src/ATen/native/SoftMax.cpp fuses the
  cast only for fp16 input), _softmax 4+4, the cast back 4+e: 24 bytes and 4 kernels at e = 2;
- backward, 16-bit: dP written, P read by dV, dS read by dQ and dK (4e, the GEMMs'); the cast
  back's gradient e+4, _softmax_backward_data 4+4+4, the cast's gradient 4+e, the scale's 2e: 28
  bytes and 4 kernels (the mask add passes the gradient through);
- fp32: no casts; scale 8, softmax 8 forward, softmax 12 and scale 8 backward.
The CPU census of the same module (perfmodel.kernels.census) counts more: the CPU runs softmax's
dtype= as its own cast and copies K^T; on a GPU the bmm reads it transposed."""

SCORES_NATIVE_SOFTMAX = 1
"""`attention_work(scores=...)` flag: softmax in the scores' own dtype, no fp32 casts (a module that
calls torch.softmax on 16-bit scores outside autocast: fxmarty/efficient-attention-benchmark's
attention_pytorch_eager). Per score, 16-bit: forward scale 2e + softmax 2e; backward softmax 3e +
scale 2e; two kernels each (the fp32 path's bytes at e = 4)."""
SCORES_DROPOUT = 2
"""`attention_work(scores=...)` flag: dropout with p > 0 on the probabilities (at::native_dropout
writes the output and a bool mask, e + e + 1 bytes per score; its backward reads the gradient and
the mask and writes e + 1 + e: one kernel each). Models whose attention has a dropout rate (BERT's
attention_probs_dropout_prob) run it in training; p = 0 is a no-op in at::dropout."""
SCORES_FUSED = 4
"""`attention_work(scores=...)` flag: the scale, mask, softmax (and dropout) between the two GEMMs run
as one kernel per phase - a compiler fusing the chain (torch.compile's Inductor, TorchScript with
NVFuser) or a hand-fused kernel (Megatron's FusedScaleMaskSoftmax). Per score: forward reads the
scores and writes the probabilities (e + e); backward reads the probabilities and their gradient
and writes the scores' gradient (3e); with SCORES_DROPOUT the kernel also writes, then reads, a
1-byte mask. Casts inside the kernel move nothing."""

FLASH_BACKWARD_FLOPS_RATIO = 2.5
"""Backward FLOPs / forward FLOPs of attention: 5 matmuls against 2 (flash-attention
benchmarks/benchmark_flash_attention.py: flops backward = 2.5 x forward)."""


@dataclass(frozen=True, kw_only=True)
class KernelWork:
    """One kernel call (or one eager module's chain of calls) and what it costs in work."""

    kind: str
    """One of KERNEL_KINDS."""
    impl: str
    """One of IMPLS."""
    variant: str
    """One of VARIANTS[kind] (e.g. norm: 'rms' | 'layer'; attention: 'flash' | 'efficient' | 'math')."""
    dtype: str
    """One of DTYPES: what the kernel computes and stores in."""
    phase: str
    """One of PHASES."""
    flops: float
    """Useful FLOPs of the call (FLOP): matmul, attention, conv; 0 for memory-bound kinds."""
    bytes: float
    """Minimal HBM traffic (bytes): every input read once, every output written once."""
    bytes_moved: float
    """HBM bytes the implementation really moves (bytes): eager = the sum over its ops; >= bytes."""
    launches: float
    """Kernels the call launches (eager: one per ATen op that is not a view)."""
    shape: tuple[int, ...] = ()
    """matmul (m, n, k, batch); attention (batch, heads, s_q, s_kv, head_dim, causal); conv (m, n, k)
    of its implicit GEMM; rotary (tokens, q_heads, kv_heads, head_dim); embedding (tokens, vocab, dim);
    optimizer (params, tensors); dequant (weights, bits); the others (rows, cols) of the main tensor."""

    def __post_init__(self) -> None:
        for name, allowed in (("kind", KERNEL_KINDS), ("impl", IMPLS), ("dtype", DTYPES), ("phase", PHASES)):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"KernelWork.{name} must be one of {', '.join(allowed)}; got {getattr(self, name)!r}"
                )
        if self.variant not in VARIANTS[self.kind]:
            raise ValueError(
                f"KernelWork.variant for kind {self.kind} must be one of {', '.join(VARIANTS[self.kind])}; "
                f"got {self.variant!r}"
            )
        for name in ("flops", "bytes", "bytes_moved", "launches"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"KernelWork.{name} must be a finite number >= 0; got {value!r}")
        if self.bytes_moved < self.bytes * (1 - 1e-9):
            raise ValueError(
                f"KernelWork.bytes_moved ({self.bytes_moved:g}) must be >= bytes ({self.bytes:g})"
            )


# --- helpers --------------------------------------------------------------------------------------


def _check_dims(where: str, **dims: float) -> None:
    for name, value in dims.items():
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 1
        ):
            raise ValueError(f"{where}: {name} must be a number >= 1; got {value!r}")


def _e(dtype: str) -> int:
    if dtype not in BYTES_PER_ELEMENT:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    return BYTES_PER_ELEMENT[dtype]


def _dtype_class(dtype: str, kind: str) -> str:
    if dtype in ("fp32", "tf32"):
        return "fp32"
    if dtype in ("bf16", "fp16"):
        return "half"
    raise ValueError(
        f"{kind} work in {dtype} is not modelled (only matmul, attention, conv and dequant run in fp8)"
    )


def _phases(phase: str) -> tuple[str, ...]:
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(PHASES)}; got {phase!r}")
    return ("forward", "backward") if phase == "full" else (phase,)


def _check_impl(impl: str) -> None:
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {', '.join(IMPLS)}; got {impl!r}")


def _census(
    kind: str, variant: str, dtype: str, phase: str, terms: tuple[float, float, float]
) -> tuple[float, float]:
    """(launches, bytes_moved) of the eager module from the census, summed over the phases."""
    entry = EAGER_CENSUS[(kind, variant, _dtype_class(dtype, kind))]
    launches = moved = 0.0
    for ph in _phases(phase):
        n, a, b, c = entry[ph]
        launches += n
        moved += a * terms[0] + b * terms[1] + c * terms[2]
    return launches, moved


def _fused_launches(phase: str, backward: int = 1) -> float:
    return float(sum(1 if ph == "forward" else backward for ph in _phases(phase)))


def _work(
    kind: str,
    impl: str,
    variant: str,
    dtype: str,
    phase: str,
    *,
    flops: float,
    ideal: float,
    eager: tuple[float, float] | None,
    shape: tuple[int, ...],
    fused_backward_launches: int = 1,
) -> KernelWork:
    _check_impl(impl)
    if impl == "eager" and eager is not None:
        launches, moved = eager
    else:
        launches, moved = _fused_launches(phase, fused_backward_launches if impl == "fused" else 2), ideal
    return KernelWork(
        kind=kind,
        impl=impl,
        variant=variant,
        dtype=dtype,
        phase=phase,
        flops=float(flops),
        bytes=float(ideal),
        bytes_moved=float(max(moved, ideal)),
        launches=float(launches),
        shape=shape,
    )


# --- constructors ---------------------------------------------------------------------------------


def gemm_parts(m: int, n: int, k: int, phase: str, variant: str) -> list[tuple[int, int, int]]:
    """The (M, N, K) of each GEMM a matmul work runs (each `batch` times): forward C = A B with A
    (M x K); backward dA = dC B^T (M x K x N) and dB = A^T dC (K x N x M)."""
    grads = {"dgrad": ("d",), "wgrad": ("w",)}.get(variant.partition("-")[2], ("d", "w"))
    parts = []
    for ph in _phases(phase):
        if ph == "forward":
            parts.append((m, n, k))
        else:
            if "d" in grads:
                parts.append((m, k, n))
            if "w" in grads:
                parts.append((k, n, m))
    return parts


def matmul_work(
    m: int, n: int, k: int, dtype: str, *, batch: int = 1, phase: str = "forward", variant: str | None = None
) -> KernelWork:
    """C (m x n) = A (m x k) @ B (k x n), `batch` times (torch.mm / bmm / nn.Linear: m = tokens,
    k = in_features, n = out_features). variant 'gemm' (batch 1) or 'bmm' by default; '-dgrad' /
    '-wgrad' for a backward with only the input or only the weight gradient."""
    _check_dims("matmul_work", m=m, n=n, k=k, batch=batch)
    variant = variant or ("gemm" if batch == 1 else "bmm")
    if variant not in VARIANTS["matmul"]:
        raise ValueError(f"matmul variant must be one of {', '.join(VARIANTS['matmul'])}; got {variant!r}")
    e = _e(dtype)
    parts = gemm_parts(m, n, k, phase, variant)
    flops = sum(2.0 * batch * a * b * c for a, b, c in parts)
    ideal = sum(batch * (a * c + c * b + a * b) * e for a, b, c in parts)
    return KernelWork(
        kind="matmul",
        impl="eager",
        variant=variant,
        dtype=dtype,
        phase=phase,
        flops=flops,
        bytes=float(ideal),
        bytes_moved=float(ideal),
        launches=float(len(parts)),
        shape=(m, n, k, batch),
    )


def attention_work(
    batch: int,
    heads: int,
    s_q: int,
    s_kv: int,
    head_dim: int,
    dtype: str,
    *,
    causal: bool,
    variant: str = "flash",
    phase: str = "forward",
    scores: int = 0,
) -> KernelWork:
    """Scaled dot-product attention over (batch, heads, s, head_dim) tensors. FLOPs count the
    unmasked scores only (a causal mask halves them at s_q = s_kv, as flash-attention's benchmarks
    do); the 'math' path computes every score (the mask is applied after QK^T) and moves the
    (s_q x s_kv) matrices through HBM (MATH_SCORE_BYTES; a causal mask adds its add kernel). `scores`
    (math only): SCORES_NATIVE_SOFTMAX and / or SCORES_DROPOUT, kept as the shape's seventh entry
    (absent when 0) so the kernel table reads the work back."""
    _check_dims("attention_work", batch=batch, heads=heads, s_q=s_q, s_kv=s_kv, head_dim=head_dim)
    if variant not in VARIANTS["attention"]:
        raise ValueError(
            f"attention variant must be one of {', '.join(VARIANTS['attention'])}; got {variant!r}"
        )
    e = _e(dtype)
    if scores & ~(SCORES_NATIVE_SOFTMAX | SCORES_DROPOUT | SCORES_FUSED) or scores < 0:
        raise ValueError(
            f"attention scores flags must be a sum of SCORES_NATIVE_SOFTMAX, SCORES_DROPOUT and SCORES_FUSED; got {scores!r}"
        )
    kept = 1.0 - s_q / (2.0 * s_kv) if causal and s_q <= s_kv else 1.0  # bottom-right aligned causal mask
    flags = scores if variant == "math" else 0
    scores_n = float(batch * heads * s_q * s_kv)
    fwd_flops = 4.0 * scores_n * head_dim * (1.0 if variant == "math" else kept)
    qkv = batch * heads * (2 * s_q + 2 * s_kv) * head_dim * e  # q, k, v read; o written
    flops = ideal = launches = 0.0
    for ph in _phases(phase):
        if ph == "forward":
            flops += fwd_flops
            ideal += qkv + batch * heads * s_q * 4  # + the fp32 log-sum-exp kept for backward
            launches += 1
        else:
            flops += FLASH_BACKWARD_FLOPS_RATIO * fwd_flops
            ideal += 2 * qkv + batch * heads * s_q * 4  # read q, k, v, o, dO (+lse); write dq, dk, dv
            launches += FLASH_BACKWARD_LAUNCHES if variant == "flash" else 2
    moved = ideal
    if variant == "math":
        operand, elementwise, launches = _math_scores(dtype, phase, causal, flags)
        moved = ideal + (operand + elementwise) * scores_n
    return KernelWork(
        kind="attention",
        impl="eager",
        variant=variant,
        dtype=dtype,
        phase=phase,
        flops=flops,
        bytes=ideal,
        bytes_moved=max(moved, ideal),
        launches=launches,
        shape=(batch, heads, s_q, s_kv, head_dim, int(causal), *((flags,) if flags else ())),
    )


_RMS_TORCH_CUDA = {"forward": 1, "backward": 1}
"""torch.nn.RMSNorm on CUDA: F.rms_norm dispatches `_fused_rms_norm` (one kernel) and its backward
`_fused_rms_norm_backward` (PyTorch aten/src/ATen/native/layer_norm.cpp rms_norm_symint; the CPU
falls back to rms_norm_composite, which the census counts)."""


def norm_work(
    rows: int, cols: int, dtype: str, *, variant: str = "rms", impl: str = "eager", phase: str = "forward"
) -> KernelWork:
    """Normalisation over the last dimension (`cols` = hidden size) of `rows` vectors (tokens); for
    'batch' (BatchNorm2d) rows = N * H * W and cols = channels."""
    _check_dims("norm_work", rows=rows, cols=cols)
    if variant not in VARIANTS["norm"]:
        raise ValueError(f"norm variant must be one of {', '.join(VARIANTS['norm'])}; got {variant!r}")
    e = _e(dtype)
    el = float(rows * cols)
    ideal = 0.0
    for ph in _phases(phase):  # forward: read x, write y; backward: read dy, x, write dx, dweight (fp32)
        ideal += (
            (2 * el * e + cols * e + rows * 4)
            if ph == "forward"
            else (3 * el * e + cols * (e + 4) + rows * 4)
        )
    eager = None
    if variant == "rms-torch":  # one CUDA kernel per phase, moving the ideal bytes
        eager = (float(sum(_RMS_TORCH_CUDA[ph] for ph in _phases(phase))), ideal)
    else:
        eager = _census("norm", variant, dtype, phase, (el, cols, rows))
    # fused norms reduce the weight gradient in a second kernel (Liger rms_norm: dW partial sums, then .sum)
    return _work(
        "norm",
        impl,
        variant,
        dtype,
        phase,
        flops=0.0,
        ideal=ideal,
        eager=eager,
        shape=(rows, cols),
        fused_backward_launches=2,
    )


def activation_work(
    rows: int, cols: int, dtype: str, *, variant: str = "swiglu", impl: str = "eager", phase: str = "forward"
) -> KernelWork:
    """The elementwise part of an MLP activation over (rows = tokens) x (cols = MLP width): for gated
    variants (swiglu, geglu) act(gate) * up, the projections being matmul works."""
    _check_dims("activation_work", rows=rows, cols=cols)
    if variant not in VARIANTS["activation"]:
        raise ValueError(
            f"activation variant must be one of {', '.join(VARIANTS['activation'])}; got {variant!r}"
        )
    e = _e(dtype)
    el = float(rows * cols)
    gated = variant in ("swiglu", "geglu")
    ideal = 0.0
    for ph in _phases(phase):
        if ph == "forward":
            ideal += (3 if gated else 2) * el * e
        else:
            ideal += (5 if gated else 3) * el * e
    eager = _census("activation", variant, dtype, phase, (el, cols, rows))
    return _work(
        "activation", impl, variant, dtype, phase, flops=0.0, ideal=ideal, eager=eager, shape=(rows, cols)
    )


def rotary_work(
    tokens: int,
    q_heads: int,
    kv_heads: int,
    head_dim: int,
    dtype: str,
    *,
    impl: str = "eager",
    phase: str = "forward",
) -> KernelWork:
    """Rotary position embedding applied to q and k (tokens = batch * seq)."""
    _check_dims("rotary_work", tokens=tokens, q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim)
    e = _e(dtype)
    qk = float(tokens * (q_heads + kv_heads) * head_dim)
    table = float(tokens * head_dim)
    # per phase: read q, k (or dq, dk) and the cos/sin tables, write them
    ideal = sum(2 * qk * e + 2 * table * e for _ in _phases(phase))
    eager = _census("rotary", "rope", dtype, phase, (qk, table, tokens))
    return _work(
        "rotary",
        impl,
        "rope",
        dtype,
        phase,
        flops=0.0,
        ideal=ideal,
        eager=eager,
        shape=(tokens, q_heads, kv_heads, head_dim),
    )


_ELEMENTWISE_BACKWARD: dict[str, tuple[int, int]] = {
    "add": (1, 3),
    "mul": (2, 6),
    "copy": (1, 2),
    "scale": (1, 2),
}
"""Eager backward of simple elementwise ops: (launches, elements moved per element in units of the
dtype). add: the gradient passes through; the two gradients are summed where the residual stream
forks (torch/csrc/autograd/input_buffer.cpp InputBuffer::accumulate: one add). mul: dx = dy * y and
dy_ = dy * x. (cast: the gradient is cast back, the same bytes as forward.)"""


def elementwise_work(
    elements: int,
    dtype: str,
    *,
    variant: str = "add",
    inputs: int = 2,
    outputs: int = 1,
    impl: str = "eager",
    phase: str = "forward",
    source_dtype: str | None = None,
    rows: int | None = None,
) -> KernelWork:
    """A pointwise or row-wise op over `elements` elements with `inputs` inputs and `outputs` outputs:
    add, mul, scale, copy, cast (from `source_dtype` to `dtype`), dropout (writes a 1-byte mask),
    softmax (over rows of `elements / rows` columns)."""
    _check_dims("elementwise_work", elements=elements, inputs=inputs, outputs=outputs)
    if variant not in VARIANTS["elementwise"]:
        raise ValueError(
            f"elementwise variant must be one of {', '.join(VARIANTS['elementwise'])}; got {variant!r}"
        )
    e = _e(dtype)
    el = float(elements)
    if variant == "cast":
        per = _e(source_dtype or "fp32") + e
        fwd, bwd = per * el, per * el
        eager_launches = {"forward": 1, "backward": 1}
    elif variant == "dropout":
        # CUDA: native_dropout reads x, writes y and a bool mask; native_dropout_backward reads dy and
        # the mask, writes dx (aten/src/ATen/native/Dropout.cpp is_fused_kernel_acceptable; the CPU
        # decomposes into bernoulli_/div_/mul)
        fwd, bwd = (2 * e + 1) * el, (2 * e + 1) * el
        eager_launches = {"forward": 1, "backward": 1}
    elif variant == "softmax":
        fwd, bwd = 2 * e * el, 3 * e * el
        eager_launches = {"forward": 1, "backward": 1}
    else:
        fwd = (inputs + outputs) * e * el
        n, per = _ELEMENTWISE_BACKWARD[variant]
        bwd = float(per) * e * el
        eager_launches = {"forward": 1, "backward": n}
    ideal = sum(fwd if ph == "forward" else bwd for ph in _phases(phase))
    launches = float(sum(eager_launches[ph] for ph in _phases(phase)))
    cols = int(elements // rows) if rows else int(elements)
    return _work(
        "elementwise",
        impl,
        variant,
        dtype,
        phase,
        flops=0.0,
        ideal=ideal,
        eager=(launches, ideal),
        shape=(rows or 1, cols),
    )


def loss_work(
    tokens: int, vocab: int, dtype: str, *, impl: str = "eager", phase: str = "forward"
) -> KernelWork:
    """Cross-entropy over the vocabulary on given logits (tokens x vocab in `dtype`; the LM head is a
    matmul work). Eager = Hugging Face ForCausalLMLoss: 16-bit logits are upcast to fp32 first.
    Fused ideal: read the logits once, write their gradient once (Liger computes it in forward)."""
    _check_dims("loss_work", tokens=tokens, vocab=vocab)
    e = _e(dtype)
    el = float(tokens * vocab)
    ideal = 0.0
    for ph in _phases(phase):
        ideal += (el * e + tokens * 8) if ph == "forward" else 2 * el * e
    if phase == "full":
        ideal = 2 * el * e + tokens * 8  # one pass: read the logits, write their gradient
    eager = _census("loss", "cross_entropy", dtype, phase, (el, vocab, tokens))
    return _work(
        "loss",
        impl,
        "cross_entropy",
        dtype,
        phase,
        flops=0.0,
        ideal=ideal,
        eager=eager,
        shape=(tokens, vocab),
    )


def embedding_work(
    tokens: int, vocab: int, dim: int, dtype: str, *, phase: str = "forward", impl: str = "eager"
) -> KernelWork:
    """Embedding lookup of `tokens` ids into a (vocab x dim) table; the backward writes a dense
    (vocab x dim) gradient (embedding_dense_backward zero-fills it, then accumulates the rows)."""
    _check_dims("embedding_work", tokens=tokens, vocab=vocab, dim=dim)
    e = _e(dtype)
    el = float(tokens * dim)
    table = float(vocab * dim)
    ideal = 0.0
    for ph in _phases(phase):
        ideal += (2 * el * e + 8 * tokens) if ph == "forward" else (el * e + table * e + 8 * tokens)
    entry = EAGER_CENSUS[("embedding", "lookup", _dtype_class(dtype, "embedding"))]
    launches = moved = 0.0
    for ph in _phases(phase):
        n, a, b, c = entry[ph]
        launches += n
        moved += a * el + (b / CENSUS_VOCAB) * table + c * tokens  # per-col census term: per vocab row
    return _work(
        "embedding",
        impl,
        "lookup",
        dtype,
        phase,
        flops=0.0,
        ideal=ideal,
        eager=(launches, moved),
        shape=(tokens, vocab, dim),
    )


def _mta_launches(depth: int, params: float, tensors: int) -> float:
    """CUDA launches of one multi_tensor_apply call over `tensors` tensors holding `params` elements."""
    chunks = params / MTA_CHUNK_ELEMENTS + tensors
    return float(max(math.ceil(tensors / MTA_MAX_TENSORS[depth]), math.ceil(chunks / MTA_MAX_BLOCKS), 1))


def optimizer_work(params: float, tensors: int, dtype: str, *, variant: str = "adamw-foreach") -> KernelWork:
    """One optimizer step over `params` trainable elements in `tensors` tensors, state in `dtype`
    (fp32, or bf16 for a model cast to bf16). Launches on CUDA: for-loop = ops x tensors; foreach
    and fused = per op, the multi_tensor_apply launches its tensor-list depth needs. The `clip-*`
    variants are the gradient-norm clipping before it (torch.nn.utils.clip_grad_norm_), `amp-unscale`
    fp16 autocast's GradScaler unscaling the gradients."""
    _check_dims("optimizer_work", params=params, tensors=tensors)
    if variant not in VARIANTS["optimizer"]:
        raise ValueError(
            f"optimizer variant must be one of {', '.join(VARIANTS['optimizer'])}; got {variant!r}"
        )
    e = _e(dtype)
    census = OPTIMIZER_CENSUS[variant]
    ideal = census.ideal_bytes_per_param_fp32 * params * e / 4
    moved = census.bytes_per_param_fp32 * params * e / 4
    if census.launches_per_tensor:
        launches = float(census.launches_per_tensor * tensors)
    else:
        launches = sum(_mta_launches(d, params, tensors) for d in census.foreach_depths)
    launches += census.fixed_launches
    impl = "fused" if variant.endswith("fused") else "eager"
    return KernelWork(
        kind="optimizer",
        impl=impl,
        variant=variant,
        dtype=dtype,
        phase="full",
        flops=0.0,
        bytes=ideal,
        bytes_moved=max(moved, ideal),
        launches=launches,
        shape=(int(params), tensors),
    )


def dequant_work(weights: float, bits: int, dtype: str) -> KernelWork:
    """Dequantize `weights` 4-bit (NF4, bitsandbytes dequantize_4bit) or 8-bit (LLM.int8) weights to
    `dtype` before a matmul: read the packed weights and constants, write the 16-bit weights. NF4 with
    double quantization launches two kernels (the absmax first, then the weights)."""
    _check_dims("dequant_work", weights=weights)
    if bits not in (4, 8):
        raise ValueError(f"dequant_work: bits must be 4 or 8; got {bits!r}")
    variant = "nf4" if bits == 4 else "int8"
    e = _e(dtype)
    ideal = float(weights) * (bits / 8 + QUANT_SCALE_BITS_PER_WEIGHT[variant] / 8 + e)
    return KernelWork(
        kind="dequant",
        impl="eager",
        variant=variant,
        dtype=dtype,
        phase="forward",
        flops=0.0,
        bytes=ideal,
        bytes_moved=ideal,
        launches=2.0 if bits == 4 else 1.0,
        shape=(int(weights), bits),
    )


def conv_work(
    batch: int,
    c_in: int,
    c_out: int,
    height: int,
    width: int,
    kernel: int,
    dtype: str,
    *,
    stride: int = 1,
    phase: str = "forward",
) -> KernelWork:
    """A 2-D convolution (square kernel, 'same' padding) as its implicit GEMM: M = batch * H_out *
    W_out, N = c_out, K = c_in * kernel^2 (cuDNN's implicit-GEMM algorithms); backward = data and
    weight gradients."""
    _check_dims(
        "conv_work",
        batch=batch,
        c_in=c_in,
        c_out=c_out,
        height=height,
        width=width,
        kernel=kernel,
        stride=stride,
    )
    e = _e(dtype)
    h_out, w_out = -(-height // stride), -(-width // stride)
    m, n, k = batch * h_out * w_out, c_out, c_in * kernel * kernel
    x, w, y = batch * c_in * height * width, c_out * k, m * n
    flops = ideal = launches = 0.0
    for ph in _phases(phase):
        if ph == "forward":
            flops += 2.0 * m * n * k
            ideal += (x + w + y) * e
            launches += 1
        else:
            flops += 4.0 * m * n * k
            ideal += 2 * (x + w + y) * e
            launches += 2
    return KernelWork(
        kind="conv",
        impl="eager",
        variant="conv2d",
        dtype=dtype,
        phase=phase,
        flops=flops,
        bytes=ideal,
        bytes_moved=ideal,
        launches=launches,
        shape=(m, n, k),
    )


def _math_scores(dtype: str, phase: str, causal: bool, flags: int = 0) -> tuple[float, float, float]:
    """A 'math' attention over its phases (MATH_SCORE_BYTES, SCORES_* flags): (bytes per score its
    GEMMs move, bytes per score its elementwise kernels move, kernels launched, GEMMs included)."""
    e = _e(dtype)
    cls = "half" if e == 2 else "fp32"
    operand = elementwise = launches = 0.0
    for ph in _phases(phase):
        gemm, mask, other, n = MATH_SCORE_BYTES[(cls, ph)]
        dropout = bool(flags & SCORES_DROPOUT)
        if flags & SCORES_FUSED:  # one kernel; the mask add and the dropout inside it
            other, n, mask = (2 * e if ph == "forward" else 3 * e) + dropout, 1, 0.0
        else:
            if flags & SCORES_NATIVE_SOFTMAX:
                other, n = (4 * e if ph == "forward" else 5 * e), 2
            if dropout:  # native_dropout and its backward: e + e + 1 bytes, one kernel each
                other, n = other + 2 * e + 1, n + 1
        operand += gemm
        elementwise += other + (mask if causal else 0.0)
        launches += (2 if ph == "forward" else 4) + n + (1 if causal and mask else 0)
    return operand, elementwise, launches


def math_elementwise_bytes(work: KernelWork) -> float:
    """Bytes of a 'math' attention's elementwise kernels (scale, mask add, casts, softmax): the
    traffic beyond its batched GEMMs' own, streamed at the elementwise kernels' efficiency."""
    batch, heads, s_q, s_kv, _, causal, *flags = work.shape
    scores = float(batch * heads * s_q * s_kv)
    return _math_scores(work.dtype, work.phase, bool(causal), flags[0] if flags else 0)[1] * scores
