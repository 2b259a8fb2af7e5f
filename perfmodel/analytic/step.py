"""One training step as the kernels it runs (DESIGN.md, "Analytic backbone: kernels").

`plan_step(w)` lists every kernel call of one micro-batch (forward, loss, backward, recomputation)
and of the optimizer step on one GPU, as `perfmodel.kernels.work.KernelWork` records with how many
times each runs, following the workload's framework recipe (which kinds run fused, the attention
kernel, the optimizer implementation, how the loss over the vocabulary runs). `price_step` turns the
plan into seconds on the workload's accelerator with `perfmodel.kernels.efficiency.kernel_time`:
every kernel costs `work / (ceiling x efficiency)` and never less than its roofline floor.

What one layer of a transformer runs (per micro-batch, `T` tokens on this GPU, tensor parallelism
dividing the head and MLP widths, sequence/context parallelism dividing the tokens):
  norms (2), q/k/v/o projections, rotary on q and k (rotary models), the attention kernel, the
  residual adds (2 forward, 2 gradient accumulations backward), the MLP projections (gate/up/down
  or fc1/fc2), the activation; under autocast the casts of every matmul input and weight; LoRA's
  adapter matmuls, scaling and add on its target matrices; dequantization of 4/8-bit bases before
  every use; with activation checkpointing the layer's forward once more.
Outside the layers: the embedding lookup and its backward, the final norm, the LM head, the loss
(upcast to fp32 first when materialised), the optimizer step over the trainable tensors.
Networks without a layer description (CNNs, MLPs) are one implicit-GEMM convolution work for their
FLOPs plus batch-norm and elementwise work for their activations (an approximation, stated).

Matmuls are always library GEMMs (cuBLAS/hipBLAS/oneDNN): a recipe's fusion changes the kernels
between them. On a CPU, the fused kernels of a recipe (Triton, ATen's CUDA RMSNorm) do not exist:
every kind runs op by op there unless torch.compile fuses it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from perfmodel.analytic import conventions as cv
from perfmodel.analytic.activations import ResNetLayout, lora_order, resnet_layout
from perfmodel.analytic.overhead import framework_floor_per_micro_batch_s, trainable_tensors
from perfmodel.analytic.params import ParamCounts, count_params, trainable_fraction
from perfmodel.catalog.frameworks import recipe_of
from perfmodel.kernels.work import (
    SCORES_DROPOUT,
    SCORES_FUSED,
    SCORES_NATIVE_SOFTMAX,
    KernelWork,
    activation_work,
    attention_work,
    conv_work,
    dequant_work,
    elementwise_work,
    embedding_work,
    loss_work,
    matmul_work,
    norm_work,
    optimizer_work,
    rotary_work,
)
from perfmodel.recipes import FrameworkRecipe
from perfmodel.workload import ModelSpec, Workload

CNN_REFERENCE_SPATIAL = 28 * 28
"""Output pixels of the convolution that stands for a whole CNN (ResNet-50's third stage at 224x224:
the geometric middle of its 112x112 ... 7x7 stages). An assumption: the layer shapes of a CNN are not
in its model description."""
CNN_REFERENCE_CHANNELS = (128, 256)
"""(input, output) channels of that convolution (ResNet stage 3: 128-wide 3x3 convs, 512-wide 1x1)."""
CNN_REFERENCE_KERNEL = 3
"""Its kernel size (3x3: most of a ResNet's FLOPs)."""
CNN_ELEMENTWISE_PER_NORM = 2
"""Elementwise kernels (ReLU, residual add) per batch-norm in a CNN block (ResNet: conv-BN-ReLU, the
residual add every third BN)."""
CNN_SAVED_PER_NORM_INPUT = 2
"""Elements a CNN saves for backward per element its batch norms read: each convolution saves its
input and each batch norm its input (the convolution's output); the ReLU after it runs in place and
its result is the next convolution's input, saved once. So a ResNet's batch norms read half of what
it saves (ResNet-50 at 224 px: 42.7 MB saved per image, collectors/public/timm_saved_activations.csv;
21.3 MB of it against timm's count of convolution outputs, 22.2 MB). Architectures that save more
per convolution (an EfficientNet's SiLUs and squeeze-excitation products) get more batch-norm and
elementwise work per convolution, which they run."""
LOGIT_CHUNKS = {"chunked": 8}
"""Chunks of a chunked loss over the vocabulary (torchtune CEWithChunkedOutputLoss num_output_chunks
= 8; litgpt's 128-token chunks are counted from the tokens, `_loss_chunks`)."""
LITGPT_CHUNK_TOKENS = 128
"""litgpt finetune: model(input_ids, lm_head_chunk_size=128) (litgpt/finetune/lora.py)."""


APPROXIMATE_PLANS: dict[str, str] = {
    "transformer-xl": "relative-position attention, the adaptive softmax and the segment memory are not "
    "costed; the plan is a GPT-style decoder of the same size",
}
"""Model families (the catalog's `family`) whose kernel plan is a stated approximation, with what it
leaves out (docs/accuracy-history.md; `perfmodel.learn.regimes` gives them a kind of their own, and
the feature `plan_approximate` tells the learned residual). Their held-out errors are the plan's (measured 2-8x slower than
their plan on every accelerator and source) and say nothing about how far an LLM or an MLP that
the plan does cost op by op can be off, so they form their own kind: pooled with decoders, they
were 63-84% of the residuals of "1 device, decoder" and "1 device, decoder, fused", which set a
10-14x interval for a one-GPU Liger, unsloth or torch.compile fine-tune with no runs of its own.
NCF was one until model 24, whose plan costs its embedding lookups (`_lookups`)."""


def plan_is_approximate(model: ModelSpec) -> bool:
    """The model's kernel plan leaves out costs it is known to have (`APPROXIMATE_PLANS`)."""
    return model.family in APPROXIMATE_PLANS


@dataclass(frozen=True, kw_only=True)
class PlannedKernel:
    """One kernel work of a step and how often it runs."""

    label: str
    """What it is, e.g. 'layer q_proj forward' (for display and tests)."""
    work: KernelWork
    calls: float
    """Calls per micro-batch (per_step False) or per optimizer step (per_step True), on one GPU."""
    per_step: bool = False
    """True for work once per optimizer step (the optimizer), not once per micro-batch."""


@dataclass(frozen=True, kw_only=True)
class StepPlan:
    """Every kernel one GPU runs for one optimizer step, before any pricing."""

    kernels: tuple[PlannedKernel, ...]
    recipe: FrameworkRecipe
    notes: tuple[str, ...] = ()
    host_serial_s: float = 0.0
    """Host seconds per micro-batch outside the kernel model: on a CPU, the serial mask draws of the
    transformer part's dropouts (conventions.CPU_DROPOUT_S_PER_ELEMENT)."""

    def launches(self, *, per_step: bool) -> float:
        return sum(k.work.launches * k.calls for k in self.kernels if k.per_step == per_step)

    def flops(self, kind: str | None = None) -> float:
        """FLOPs per micro-batch (kinds: all, or one)."""
        return sum(
            k.work.flops * k.calls
            for k in self.kernels
            if not k.per_step and (kind is None or k.work.kind == kind)
        )


def _dtypes(w: Workload) -> tuple[str, str, str]:
    """(matmul dtype, activation dtype, residual-stream dtype) of the workload's precision: autocast
    keeps fp32 weights and residual stream (norms run in fp32) with 16-bit matmul outputs; a model
    cast to 16-bit keeps everything 16-bit; fp8 (Transformer Engine) keeps bf16 activations."""
    p = w.training.precision
    compute = w.training.compute_dtype
    if p in ("fp32", "tf32"):
        return compute, "fp32", "fp32"
    half = "fp16" if p in ("fp16", "amp_fp16") else "bf16"
    if p.startswith("amp"):
        return compute, half, "fp32"
    return compute, half, half


def _norm_variant(w: Workload, recipe: FrameworkRecipe, on_cpu: bool) -> str:
    """'rms' (Hugging Face style, op by op), 'rms-torch' (torch.nn.RMSNorm: one ATen kernel per phase on
    CUDA, recipes with `native_norm`) or 'layer' (torch.nn.LayerNorm: one kernel) for the model."""
    m = w.model
    if not (m.gated_mlp or (m.arch == "decoder" and m.learned_pos_embeddings == 0)):
        return "layer"
    return "rms-torch" if recipe.native_norm and not on_cpu else "rms"


def _impl(recipe: FrameworkRecipe, kind: str, on_cpu: bool) -> str:
    if recipe.compile and kind in ("norm", "activation", "rotary", "elementwise"):
        return "compiled"
    if not on_cpu and kind in recipe.fused:
        return "fused"
    return "eager"


def _i(x: float) -> int:
    return max(1, int(round(x)))


def _matmul(
    out: list[PlannedKernel],
    label: str,
    tokens: int,
    n_in: int,
    n_out: int,
    dtype: str,
    *,
    trainable: bool,
    input_grad: bool,
    recompute: bool,
    calls: float = 1.0,
    weight_share: float = 1.0,
) -> None:
    """A linear layer y = x W (x: tokens x n_in): forward, input gradient, weight gradient.
    `weight_share` < 1: only that share of such weights is trainable (a partly frozen model:
    `training.trainable_fraction`), so the weight gradient runs that share of the calls."""
    out.append(
        PlannedKernel(label=f"{label} forward", work=matmul_work(tokens, n_out, n_in, dtype), calls=calls)
    )
    if recompute:
        out.append(
            PlannedKernel(
                label=f"{label} recompute", work=matmul_work(tokens, n_out, n_in, dtype), calls=calls
            )
        )
    share = weight_share if trainable else 0.0
    if input_grad and share >= 1.0:
        out.append(
            PlannedKernel(
                label=f"{label} backward",
                work=matmul_work(tokens, n_out, n_in, dtype, phase="backward"),
                calls=calls,
            )
        )
        return
    if input_grad:
        out.append(
            PlannedKernel(
                label=f"{label} backward (input gradient)",
                work=matmul_work(tokens, n_out, n_in, dtype, phase="backward", variant="gemm-dgrad"),
                calls=calls,
            )
        )
    if share > 0.0:
        out.append(
            PlannedKernel(
                label=f"{label} backward (weight gradient)",
                work=matmul_work(tokens, n_out, n_in, dtype, phase="backward", variant="gemm-wgrad"),
                calls=calls * share,
            )
        )


def _full(
    out: list[PlannedKernel],
    label: str,
    make: object,
    recompute: bool,
    calls: float = 1.0,
    backward: bool = True,
) -> None:
    """A non-matmul kernel's forward, its backward, and its forward again when recomputed."""
    build = make  # a callable phase -> KernelWork
    out.append(PlannedKernel(label=f"{label} forward", work=build("forward"), calls=calls))  # type: ignore[operator]
    if recompute:
        out.append(PlannedKernel(label=f"{label} recompute", work=build("forward"), calls=calls))  # type: ignore[operator]
    if backward:
        out.append(PlannedKernel(label=f"{label} backward", work=build("backward"), calls=calls))  # type: ignore[operator]


def _dropout(
    out: list[PlannedKernel],
    label: str,
    elements: int,
    dtype: str,
    recompute: bool,
    *,
    calls: float = 1.0,
    backward: bool = True,
    impl: str = "eager",
) -> None:
    """A dropout over `elements` elements: its forward, backward and recompute (`_full`)."""
    _full(
        out,
        label,
        lambda ph: elementwise_work(elements, dtype, variant="dropout", inputs=1, outputs=1, impl=impl, phase=ph),
        recompute,
        calls=calls,
        backward=backward,
    )


def _transformer_layers(
    w: Workload,
    recipe: FrameworkRecipe,
    out: list[PlannedKernel],
    on_cpu: bool,
    activation: str | None = None,
    attention_variant: str | None = None,
) -> None:
    m, t, par = w.model, w.training, w.parallel
    mm, act, res = _dtypes(w)
    tp = par.tensor_parallel
    tokens_mm = _i(t.micro_batch_size * t.seq_len / par.context_parallel)  # a matmul sees the whole sequence shard
    tokens = _i(t.micro_batch_size * t.seq_len / par.activation_split)  # sequence-parallel regions: split over TP too
    d = int(m.hidden_size or 1)
    hd = int(round(m.head_width))
    heads = _i((m.num_heads or 1) / tp)
    kv_heads = _i(m.kv_heads / tp)
    q_w, kv_w = heads * hd, kv_heads * hd
    ffn = _i(m.ffn_size / tp)
    layers = float(m.num_layers or 0) / par.pipeline_parallel
    lora = bool(t.lora_r)
    frozen_all = t.trainable_fraction == 0 and not lora
    trainable = not lora and not frozen_all and (t.trainable_fraction is None or t.trainable_fraction > 0)
    share = trainable_fraction(t)  # a partly frozen model: that share of each weight gradient
    grads = not frozen_all
    ckpt = bool(t.activation_checkpointing) and grads
    norm_variant = _norm_variant(w, recipe, on_cpu)
    rotary = m.arch == "decoder" and m.learned_pos_embeddings == 0
    causal = m.arch == "decoder"
    seq_local = _i(t.seq_len / par.context_parallel)
    batch = t.micro_batch_size
    attn_variant = {"eager": "math", "flash": "flash", "sdpa": "flash"}[t.attention_kernel]
    if attn_variant == "flash" and (act == "fp32" or hd > 256):
        attn_variant = "efficient"  # SDPA's flash backend needs 16-bit and head_dim <= 256
    if on_cpu and t.attention_kernel != "eager":
        attn_variant = "math" if act == "fp32" else "flash"  # CPU SDPA: flash-attention CPU kernel for 16-bit
    attn_variant = attention_variant or attn_variant
    layer: list[PlannedKernel] = []
    n_impl = _impl(recipe, "norm", on_cpu)
    _full(
        layer,
        "norm",
        lambda ph: norm_work(tokens, d, res, variant=norm_variant, impl=n_impl, phase=ph),
        ckpt,
        calls=2.0,
        backward=grads,
    )
    matrices = [("q_proj", d, q_w), ("k_proj", d, kv_w), ("v_proj", d, kv_w), ("o_proj", q_w, d)]
    if m.gated_mlp:
        matrices += [("gate_proj", d, ffn), ("up_proj", d, ffn), ("down_proj", ffn, d)]
    else:
        matrices += [("fc1", d, ffn), ("fc2", ffn, d)]
    experts = max(1, m.experts_per_token)
    for name, n_in, n_out in matrices:
        is_mlp = name not in ("q_proj", "k_proj", "v_proj", "o_proj")
        calls = float(experts) if is_mlp else 1.0
        _matmul(
            layer,
            name,
            tokens_mm,
            n_in,
            n_out,
            mm,
            trainable=trainable,
            input_grad=grads,
            recompute=ckpt,
            calls=calls,
            weight_share=share,
        )
        if (
            t.precision.startswith("amp")
            and name in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "fc1")
        ):
            _full(
                layer,
                f"{name} input cast",
                lambda ph, n=n_in: elementwise_work(
                    tokens_mm * n, act, variant="cast", inputs=1, outputs=1, phase=ph, source_dtype=res
                ),
                ckpt,
                calls=calls,
                backward=grads,
            )
    if t.precision.startswith("amp"):
        weights = sum(a * b for _, a, b in matrices)
        layer.append(
            PlannedKernel(
                label="autocast weight casts",
                work=elementwise_work(
                    _i(weights),
                    act,
                    variant="cast",
                    inputs=1,
                    outputs=1,
                    phase="forward",
                    source_dtype="fp32",
                ),
                calls=1.0 + (1.0 if ckpt else 0.0),
            )
        )
        if trainable:
            layer.append(
                PlannedKernel(
                    label="gradient casts to fp32",
                    work=elementwise_work(
                        _i(weights),
                        "fp32",
                        variant="cast",
                        inputs=1,
                        outputs=1,
                        phase="forward",
                        source_dtype=act,
                    ),
                    calls=share,
                )
            )
    if m.num_experts > 1:
        _matmul(
            layer,
            "router",
            tokens_mm,
            d,
            m.num_experts,
            mm,
            trainable=trainable,
            input_grad=grads,
            recompute=ckpt,
            weight_share=share,
        )
    if rotary:
        r_impl = _impl(recipe, "rotary", on_cpu)
        _full(
            layer,
            "rotary",
            lambda ph: rotary_work(tokens_mm, heads, kv_heads, hd, act, impl=r_impl, phase=ph),
            ckpt,
            backward=grads,
        )
    if kv_heads != heads and attn_variant != "flash":
        _full(
            layer,
            "repeat k/v heads",
            lambda ph: elementwise_work(
                _i(2 * tokens_mm * q_w), act, variant="copy", inputs=1, outputs=1, phase=ph
            ),
            ckpt,
            backward=grads,
        )
    # the kernels between a math attention's two GEMMs: one fused kernel when a compiler fuses the
    # chain (the dropout inside it), else the recipe's softmax, with the dropout a kernel of its own
    fused_scores = attn_variant == "math" and recipe.compile and not on_cpu
    if fused_scores:
        score_kernels = SCORES_FUSED | (SCORES_DROPOUT if m.dropout > 0 and grads else 0)
    else:
        score_kernels = SCORES_NATIVE_SOFTMAX if recipe.softmax == "native" and t.is_half else 0
    _full(
        layer,
        "attention",
        lambda ph: attention_work(
            batch,
            heads,
            seq_local,
            t.seq_len if par.context_parallel > 1 else seq_local,
            hd,
            mm if mm in ("bf16", "fp16") else act,
            causal=causal,
            variant=attn_variant,
            phase=ph,
            scores=score_kernels,
        ),
        ckpt,
        backward=grads,
    )
    e_impl = _impl(recipe, "elementwise", on_cpu)
    if e_impl == "eager":  # attn_output.transpose(1, 2).contiguous() before o_proj (and its gradient back)
        _full(
            layer,
            "attention output transpose",
            lambda ph: elementwise_work(tokens_mm * q_w, act, variant="copy", inputs=1, outputs=1, phase=ph),
            ckpt,
            backward=grads,
        )
    layer.append(
        PlannedKernel(
            label="residual add forward",
            work=elementwise_work(tokens * d, res, variant="add", impl=e_impl, phase="forward"),
            calls=2.0 * (2.0 if ckpt else 1.0),
        )
    )
    if grads:
        layer.append(
            PlannedKernel(
                label="residual gradient accumulation",
                work=elementwise_work(tokens * d, res, variant="add", impl=e_impl, phase="forward"),
                calls=2.0,
            )
        )
    a_impl = _impl(recipe, "activation", on_cpu)
    variant = activation or ("swiglu" if m.gated_mlp else "gelu")
    _full(
        layer,
        "activation",
        lambda ph: activation_work(tokens_mm, ffn, act, variant=variant, impl=a_impl, phase=ph),
        ckpt,
        calls=float(experts),
        backward=grads,
    )
    if m.dropout > 0:  # GPT-2 resid/attn_pdrop, BERT hidden/attention_probs_dropout_prob (model.dropout)
        # after the attention's output projection and after the MLP
        _dropout(layer, "residual dropout", tokens * d, act, ckpt, calls=2.0, backward=grads, impl=e_impl)
        if attn_variant == "math" and not fused_scores:  # SDPA's kernels draw the mask inside, as a fused chain does
            scores = batch * heads * seq_local * (t.seq_len if par.context_parallel > 1 else seq_local)
            probs = mm if mm in ("bf16", "fp16") else act
            _dropout(layer, "attention-probability dropout", scores, probs, ckpt, backward=grads)
    if lora:
        shapes = {"q": (d, q_w), "k": (d, kv_w), "v": (d, kv_w), "o": (q_w, d), "gate": (d, ffn), "up": (d, ffn),
                  "down": (ffn, d)}  # fmt: skip
        _lora(layer, w, tokens_mm, shapes, mm, act, ckpt, recipe)
    if t.quantization_bits:
        passes = 2.0 + (1.0 if ckpt else 0.0)
        for name, n_in, n_out in matrices:
            layer.append(
                PlannedKernel(
                    label=f"{name} dequantize",
                    work=dequant_work(
                        float(
                            n_in
                            * n_out
                            * (experts if name not in ("q_proj", "k_proj", "v_proj", "o_proj") else 1)
                        ),
                        t.quantization_bits,
                        act if act != "fp32" else ("bf16" if w.gpu.supports("bf16") else "fp16"),
                    ),
                    calls=passes,
                )
            )
    for k in layer:
        out.append(PlannedKernel(label=f"layer {k.label}", work=k.work, calls=k.calls * layers))


def _lora(
    out: list[PlannedKernel],
    w: Workload,
    tokens: int,
    shapes: dict[str, tuple[int, int]],
    mm: str,
    act: str,
    ckpt: bool,
    recipe: FrameworkRecipe,
) -> None:
    """LoRA on `lora_target_modules` matrices per layer, the first n of the model's `lora_order`
    (`shapes`: role -> (n_in, n_out); PEFT's default is q_proj and v_proj): per adapted matrix, A
    (n_in x r) and B (r x n_out) matmuls, the scaling and the add into the base output; both adapters
    train.

    Left out: PEFT's fp32 adapters under a 16-bit model also cast each adapter's input to fp32 and
    the sum back (lora Linear.forward), and run the adapters and their scale and add in fp32. Priced
    as this kernel model prices small kernels, those made PEFT's measured LoRA steps (12 rows, L40S,
    q and v) 0.75x the kernel model instead of 0.82x, and held out by source 16.3% -> 21.6% median
    error (2026-12-06): the small kernels are priced too slow already, so adding more moved the
    model away from the measurements. The memory model keeps the fp32 copies (they are allocated)."""
    t = w.training
    r = int(t.lora_r or 1)
    order = lora_order(w.model.gated_mlp)
    d = shapes["q"][0]
    targets = [shapes[x] for x in order[: t.lora_target_modules]]
    targets += [(d, d)] * max(0, t.lora_target_modules - len(order))
    counts: dict[tuple[int, int], float] = {}
    for shape in targets:
        counts[shape] = counts.get(shape, 0.0) + 1.0
    for (n_in, n_out), calls in counts.items():
        if t.lora_dropout > 0 and not recipe.lora_fused:
            _dropout(out, "lora dropout", tokens * n_in, act, ckpt, calls=calls)
        _matmul(out, "lora A", tokens, n_in, r, mm, trainable=True, input_grad=True, recompute=ckpt, calls=calls)
        _matmul(out, "lora B", tokens, r, n_out, mm, trainable=True, input_grad=True, recompute=ckpt, calls=calls)
        if recipe.lora_fused:
            continue
        _full(
            out,
            "lora scale",
            lambda ph, n=n_out: elementwise_work(tokens * n, act, variant="scale", inputs=1, outputs=1, phase=ph),
            ckpt,
            calls=calls,
        )
        _full(
            out,
            "lora add",
            lambda ph, n=n_out: elementwise_work(tokens * n, act, variant="add", phase=ph),
            ckpt,
            calls=calls,
        )


def _loss_chunks(w: Workload, recipe: FrameworkRecipe, tokens: int) -> int:
    if recipe.loss != "chunked":
        return 1
    if w.framework == "litgpt":
        return max(1, math.ceil(w.training.seq_len / LITGPT_CHUNK_TOKENS))
    return LOGIT_CHUNKS["chunked"]


def _outside_layers(
    w: Workload, recipe: FrameworkRecipe, p: ParamCounts, out: list[PlannedKernel], on_cpu: bool
) -> None:
    m, t, par = w.model, w.training, w.parallel
    mm, act, res = _dtypes(w)
    tokens = _i(t.micro_batch_size * t.seq_len / par.activation_split)  # sequence-parallel: embedding, norm
    tokens_mm = _i(t.micro_batch_size * t.seq_len / par.context_parallel)  # the head and loss: whole shard
    d = int(m.hidden_size or 1)
    vocab = int(m.vocab_size or 0)
    lora = bool(t.lora_r)
    frozen_all = t.trainable_fraction == 0 and not lora
    trainable = not lora and not frozen_all
    share = trainable_fraction(t)  # a partly frozen model: that share of each weight gradient
    grads = not frozen_all
    if vocab:
        out.append(
            PlannedKernel(
                label="embedding forward",
                work=embedding_work(tokens, vocab, d, res, phase="forward"),
                calls=1.0 / par.pipeline_parallel,
            )
        )
        if trainable:
            out.append(
                PlannedKernel(
                    label="embedding backward",
                    work=embedding_work(tokens, _i(vocab / par.tensor_parallel), d, res, phase="backward"),
                    calls=share / par.pipeline_parallel,
                )
            )
        if m.dropout > 0:  # GPT-2 embd_pdrop, BERT's embedding dropout
            _dropout(out, "embedding dropout", tokens * d, res, False, calls=1.0 / par.pipeline_parallel,
                     backward=grads, impl=_impl(recipe, "elementwise", on_cpu))  # fmt: skip
    n_impl = _impl(recipe, "norm", on_cpu)
    _full(
        out,
        "final norm",
        lambda ph: norm_work(tokens, d, res, variant=_norm_variant(w, recipe, on_cpu), impl=n_impl, phase=ph),
        False,
        calls=1.0 / par.pipeline_parallel,
        backward=grads,
    )
    if m.arch not in ("decoder", "encoder-decoder") or not vocab:
        return
    v_local = _i(vocab / par.tensor_parallel)
    last = 1.0 / par.pipeline_parallel  # the last stage holds the head
    _matmul(
        out,
        "lm head",
        tokens_mm,
        d,
        v_local,
        mm,
        trainable=trainable,
        input_grad=grads,
        recompute=False,
        calls=last,
        weight_share=share,
    )
    fused_loss = t.fused_cross_entropy or recipe.loss == "fused-linear"
    logits_dtype = act
    if fused_loss:
        out.append(
            PlannedKernel(
                label="loss (fused linear cross-entropy)",
                work=loss_work(tokens_mm, v_local, logits_dtype, impl="fused", phase="full"),
                calls=last,
            )
        )
        return
    chunks = _loss_chunks(w, recipe, tokens_mm)
    per = _i(tokens_mm / chunks)
    if (
        logits_dtype != "fp32"
    ):  # logits.float() before the loss (Hugging Face ForCausalLMLoss, torchtune, litgpt)
        _full(
            out,
            "logits upcast",
            lambda ph: elementwise_work(
                per * v_local,
                "fp32",
                variant="cast",
                inputs=1,
                outputs=1,
                phase=ph,
                source_dtype=logits_dtype,
            ),
            False,
            calls=last * chunks,
            backward=grads,
        )
    _full(
        out,
        "loss",
        lambda ph: loss_work(per, v_local, "fp32", impl="eager", phase=ph),
        False,
        calls=last * chunks,
        backward=grads,
    )


def _clips_gradients(w: Workload, recipe: FrameworkRecipe) -> bool:
    """Whether the step clips the gradients to a global norm: `training.gradient_clipping`, or the
    recipe's default (`grad_clip`)."""
    said = w.training.gradient_clipping
    return recipe.grad_clip if said is None else bool(said)


def _trainable_tensors(w: Workload) -> int:
    return max(1, int(round(trainable_tensors(w))))


def _optimizer(
    w: Workload, recipe: FrameworkRecipe, p: ParamCounts, out: list[PlannedKernel], on_cpu: bool
) -> None:
    t, par = w.training, w.parallel
    if t.optimizer == "none" or p.trainable <= 0:
        return
    params = p.trainable / par.model_split
    if par.strategy in ("zero1", "zero2", "zero3", "fsdp"):
        params /= par.shard_group
    impl = "forloop" if on_cpu else recipe.optimizer_impl.replace("for-loop", "forloop")
    if t.optimizer in ("adamw", "adam", "lbfgs", "lion", "adafactor"):
        variant = f"adamw-{impl}"
    elif t.optimizer == "sgd_momentum":
        variant = f"sgd-momentum-{'forloop' if impl == 'forloop' else 'foreach'}"
    else:
        variant = "sgd-foreach"
    state = t.precision if t.precision in ("bf16", "fp16") and not t.lora_r else "fp32"
    params, tensors = max(1.0, params), _trainable_tensors(w)

    def once_a_step(label: str, work: KernelWork, calls: float = 1.0) -> None:
        out.append(PlannedKernel(label=label, work=work, calls=calls, per_step=True))

    if t.precision == "amp_fp16":  # torch.amp.GradScaler: fp16 autocast's loss scaling (timm's benchmark.py runs without)
        once_a_step("gradient unscaling (GradScaler)", optimizer_work(params, tensors, "fp32", variant="amp-unscale"))
    if par.strategy == "ddp" and par.data_parallel > 1 and recipe.grad_bucket_copies and not on_cpu:
        # DistributedDataParallel: each gradient into its bucket (scaled by 1 / world) before the
        # all-reduce and back after it (recipes.FrameworkRecipe.grad_bucket_copies)
        each = max(1, int(round(params / tensors)))
        for label, op in (("into the buckets", "scale"), ("back from the buckets", "copy")):
            work = elementwise_work(each, state, variant=op, inputs=1, outputs=1)
            once_a_step(f"DDP gradients {label}", work, calls=float(tensors))
    if _clips_gradients(w, recipe):  # on the gradients, which are in the parameters' dtype (as `state`)
        clip = "clip-forloop" if impl == "forloop" else "clip-foreach"
        once_a_step("gradient clipping (global norm)", optimizer_work(params, tensors, state, variant=clip))
    once_a_step(f"optimizer step ({variant})", optimizer_work(params, tensors, state, variant=variant))


def layout_transposed(w: Workload) -> bool:
    """Whether each convolution runs behind NCHW <-> NHWC transpositions: a 16-bit convolution on an
    accelerator in PyTorch's default (contiguous, NCHW) memory format. cuDNN's tensor-core
    convolutions work in NHWC, so for NCHW tensors it transposes the input and the output (and, in
    backward, the gradients) around each kernel; in channels_last they are the network's own layout.
    On timm's sweep of one RTX 3090 (fp16 autocast, results/benchmark-train-amp-{nchw,nhwc}-pt11x)
    channels_last trains ResNet-50 1.44-1.47x faster and a ViT-B/16 (one convolution) 0.99-1.01x."""
    return nchw_transposes(w.training.compute_dtype, w.gpu.vendor) and not w.training.channels_last


def nchw_transposes(compute_dtype: str, vendor: str) -> bool:
    """Whether a convolution in this compute dtype on this vendor's device runs behind NCHW <-> NHWC
    transpositions when its tensors are NCHW (16-bit on an accelerator: `layout_transposed`)."""
    return compute_dtype in ("fp16", "bf16") and vendor != "cpu"


def _transposed(phase: str, inputs: int, outputs: int) -> int:
    """Elements an NCHW convolution transposes in `phase`: its input and output in forward; in
    backward the output's gradient (to NHWC), the input's gradient (back to NCHW) and the input
    again for the weight gradient."""
    return inputs + outputs if phase == "forward" else 2 * inputs + outputs


def _resnet(w: Workload, layout: ResNetLayout, out: list[PlannedKernel]) -> list[str]:
    """A ResNet layer by layer, as torchvision builds it (activations.ResNetLayout): the 7x7/2 stem
    convolution, its BatchNorm and ReLU, the 3x3/2 max-pool; in every block its convolutions (1x1,
    3x3 with the stage's stride, 1x1 for a bottleneck; two 3x3 for a basic block; a strided 1x1
    shortcut where the shape changes), a BatchNorm after each, a ReLU after each but the last, the
    residual add and the block's ReLU; global average pooling, the classifier and the loss over the
    classes (on fp32 logits). Each convolution is the implicit GEMM of its own shape, so a 1x1
    convolution over few channels is as memory-bound as it is on the GPU. Counted though PyTorch
    skips it: the stem's data gradient (the images need none; 1.4% of ResNet-50's backward FLOPs)."""
    t = w.training
    mm, act, _ = _dtypes(w)
    b = t.micro_batch_size
    grads = not (t.trainable_fraction == 0 and not t.lora_r)
    ckpt = bool(t.activation_checkpointing) and grads

    transposed = layout_transposed(w)

    def conv(label: str, c_in: int, c_out: int, side: int, k: int, stride: int) -> int:
        _full(
            out,
            f"{label} conv",
            lambda ph: conv_work(b, c_in, c_out, side, side, k, mm, stride=stride, phase=ph),
            ckpt,
            backward=grads,
        )
        s_out = -(-side // stride)
        if transposed:
            _full(
                out,
                f"{label} NCHW <-> NHWC",
                lambda ph: elementwise_work(_transposed(ph, b * c_in * side * side, b * c_out * s_out * s_out), mm,
                                            variant="copy", inputs=1, phase=ph),  # fmt: skip
                ckpt,
                backward=grads,
            )
        return s_out

    def norm(label: str, channels: int, side: int, relu: bool) -> None:
        rows = b * side * side
        _full(
            out,
            f"{label} batch norm",
            lambda ph: norm_work(rows, channels, act, variant="batch", impl="eager", phase=ph),
            ckpt,
            backward=grads,
        )
        if relu:
            _full(
                out,
                f"{label} relu",
                lambda ph: activation_work(rows, channels, act, variant="relu", phase=ph),
                ckpt,
                backward=grads,
            )

    side = conv("stem", 3, layout.width, layout.image, 7, 2)
    norm("stem", layout.width, side, relu=True)
    _full(  # the max-pool reads the stem's output once (its 1/4-size output and indices are small)
        out,
        "stem max-pool",
        lambda ph: elementwise_work(b * layout.width * side * side, act, variant="copy", inputs=1, phase=ph),
        ckpt,
        backward=grads,
    )
    expansion = 4 if layout.bottleneck else 1
    for i, (cin, width, stride, s_in) in enumerate(layout.blocks()):
        label, cout = f"block {i + 1}", width * expansion
        if layout.bottleneck:
            conv(f"{label} 1x1 reduce", cin, width, s_in, 1, 1)
            norm(f"{label} 1", width, s_in, relu=True)
            s_out = conv(f"{label} 3x3", width, width, s_in, 3, stride)
            norm(f"{label} 2", width, s_out, relu=True)
            conv(f"{label} 1x1 expand", width, cout, s_out, 1, 1)
        else:
            s_out = conv(f"{label} 3x3 a", cin, width, s_in, 3, stride)
            norm(f"{label} 1", width, s_out, relu=True)
            conv(f"{label} 3x3 b", width, width, s_out, 3, 1)
        norm(f"{label} last", cout, s_out, relu=False)
        if stride != 1 or cin != cout:
            conv(f"{label} shortcut", cin, cout, s_in, 1, stride)
            norm(f"{label} shortcut", cout, s_out, relu=False)
        elements = b * cout * s_out * s_out
        _full(
            out,
            f"{label} residual add",
            lambda ph, n=elements: elementwise_work(n, act, variant="add", phase=ph),
            ckpt,
            backward=grads,
        )
        _full(
            out,
            f"{label} relu",
            lambda ph, rows=b * s_out * s_out, c=cout: activation_work(rows, c, act, variant="relu", phase=ph),
            ckpt,
            backward=grads,
        )
        side = s_out
    features = layout.features
    _full(
        out,
        "global average pool",
        lambda ph: elementwise_work(b * features * side * side, act, variant="copy", inputs=1, phase=ph),
        False,
        backward=grads,
    )
    _matmul(out, "classifier", b, features, layout.classes, mm, trainable=grads, input_grad=grads, recompute=False)
    _full(out, "loss", lambda ph: loss_work(b, layout.classes, "fp32", phase=ph), False, backward=grads)
    if t.channels_last and w.gpu.vendor == "cpu":  # the network's own layers: nothing else approximated
        return ["training.channels_last is not costed on a CPU: its convolutions are planned as the same kernels in "
                "either format"]  # fmt: skip
    return []


def _lookups(w: Workload, out: list[PlannedKernel], act: str, grads: bool) -> None:
    """A recommender's embedding lookups (model.embedding_*): each of its lookups a sample makes is a
    row of `embedding_dim` gathered from a table of embedding_params / embedding_dim rows; backward
    writes the dense table gradient (embedding_dense_backward: a zero fill, then the rows
    accumulated), as PyTorch's nn.Embedding does without sparse=True."""
    m, b = w.model, w.training.micro_batch_size
    if not (m.embedding_params and m.embedding_lookups_per_sample and m.embedding_dim):
        return
    vocab = max(1, round(m.embedding_params / m.embedding_dim))
    _full(
        out,
        "embedding lookups",
        lambda ph: embedding_work(_i(b * m.embedding_lookups_per_sample), vocab, m.embedding_dim, act, phase=ph),
        False,
        backward=grads,
    )


def _counted_depthwise(w: Workload, out: list[PlannedKernel], act: str, grads: bool, ckpt: bool) -> int:
    """The depthwise convolutions of a CNN the kernel census counted (model.depthwise_*: one input
    channel per group, so a few FLOPs per element): cuDNN runs them as direct stencil kernels that
    stream their input and output, not as implicit GEMMs, so each is costed as a memory-bound kernel
    over its input and output (forward: read x, write y; backward: dx and dw, two kernels that each
    read two tensors, costed like mul's). Returns how many there are (0: none counted)."""
    m, b = w.model, w.training.micro_batch_size
    layers = int(m.depthwise_layers or 0)
    if layers <= 0 or m.depthwise_melements_per_sample <= 0:
        return 0
    # per layer, half of what it reads and writes is its output
    elements = _i(m.depthwise_melements_per_sample * 1e6 * b / layers / 2.0)
    _full(
        out,
        "depthwise convolutions (counted)",
        lambda ph: elementwise_work(elements, act, variant="mul", inputs=1, phase=ph),
        ckpt,
        calls=layers,
        backward=grads,
    )
    return layers


def _counted_grouped(w: Workload, out: list[PlannedKernel], mm: str, grads: bool, ckpt: bool) -> int:
    """The grouped convolutions with several input channels a group the kernel census counted
    (model.grouped_*): cuDNN runs each as one implicit GEMM per group, so each is costed as a batched
    GEMM of its groups at 28x28 (the plan's reference side), a group's K = FLOPs / (2 x outputs)
    (3x3 kernels: K / 9 channels a group, its N). Returns how many there are (0: none counted)."""
    m, b = w.model, w.training.micro_batch_size
    layers = int(m.grouped_layers or 0)
    if layers <= 0 or m.grouped_melements_per_sample <= 0 or m.grouped_gflops_per_sample <= 0:
        return 0
    flops = m.grouped_gflops_per_sample * 1e9 * b / layers
    outputs = m.grouped_melements_per_sample * 1e6 * b / layers / 2.0  # half of what it moves
    k = max(9, _i(flops / (2.0 * outputs)))
    n = max(1, round(k / 9))
    rows = _i(b * 28 * 28)
    groups = max(1, round(outputs / (rows * n)))
    work = matmul_work(rows, n, k, mm, batch=groups)
    calls = layers * flops / work.flops if work.flops else 0.0
    _full(
        out,
        "grouped convolutions (counted)",
        lambda ph: matmul_work(rows, n, k, mm, batch=groups, phase=ph),
        ckpt,
        calls=calls,
        backward=grads,
    )
    return layers


def _counted_attention(
    w: Workload, out: list[PlannedKernel], mm: str, act: str, grads: bool, ckpt: bool, most_flops: float
) -> float:
    """The attentions of a non-transformer model the kernel census counted (model.attention_*): each
    on the math path (timm's 2022 attention: q k^T, softmax, p v), its scores one head of sqrt(scores)
    queries and keys (heads x queries x keys scores cost the same), its head width attention FLOPs /
    (4 x scores). Returns the forward FLOPs they carry (left out of the convolutions), at most
    `most_flops`."""
    m, b = w.model, w.training.micro_batch_size
    scores = m.attention_mscores_per_sample * 1e6
    head_dim = max(1, round(m.attention_gflops_per_sample * 1e9 / (4.0 * scores)))
    seq = max(1, round(math.sqrt(scores / m.attention_layers)))
    dtype = mm if mm in ("bf16", "fp16") else act
    _full(
        out,
        "attention (counted)",
        lambda ph: attention_work(b, 1, seq, seq, head_dim, dtype, causal=False, variant="math", phase=ph),
        ckpt,
        calls=m.attention_layers,
        backward=grads,
    )
    return min(m.attention_gflops_per_sample * 1e9 * b, most_flops)


def _cnn(
    w: Workload,
    recipe: FrameworkRecipe,
    p: ParamCounts,
    out: list[PlannedKernel],
    on_cpu: bool,
    costed_flops_per_sample: float = 0.0,
) -> list[str]:
    """A CNN/MLP as one implicit-GEMM convolution with its FLOPs (the census's depthwise and grouped
    convolutions apart: `_counted_depthwise`, `_counted_grouped`), plus its batch-norm and elementwise
    traffic over the activations it keeps; a ResNet torchvision builds (activations.resnet_layout)
    layer by layer (`_resnet`). `costed_flops_per_sample`: forward FLOPs already costed kernel by
    kernel (a transformer part), left out here."""
    m, t = w.model, w.training
    layout = resnet_layout(w) if not costed_flops_per_sample else None
    if layout is not None:
        return _resnet(w, layout, out)
    mm, act, _ = _dtypes(w)
    b = t.micro_batch_size
    flops_fwd = max(0.0, float(m.forward_gflops_per_sample or 0.0) * 1e9 - costed_flops_per_sample) * b
    kept_elements = float(m.activation_mb_per_sample or 0.0) * 1e6 / 2.0 * b  # 16-bit MB -> elements
    grads = not (t.trainable_fraction == 0 and not t.lora_r)
    ckpt = bool(t.activation_checkpointing) and grads
    layers_known = bool(m.gemm_layers) and flops_fwd > 0
    if m.arch == "mlp":
        dense = max(1.0, p.total - float(m.embedding_params or 0))  # the tables are looked up, not multiplied
        _lookups(w, out, act, grads)
        rows, width = _i(b), _i(math.sqrt(dense))
        if layers_known:  # gemm_layers matmuls over every row a sample has (a Mixer's patches)
            rows = _i(b * max(1.0, flops_fwd / b / (2.0 * dense)))
            width = _i(math.sqrt(dense / float(m.gemm_layers)))  # type: ignore[arg-type]
        work = matmul_work(rows, width, width, mm)
        calls = flops_fwd / work.flops if work.flops else 0.0
        _matmul(
            out,
            "mlp layers",
            rows,
            width,
            width,
            mm,
            trainable=grads,
            input_grad=grads,
            recompute=ckpt,
            calls=calls,
        )
        layers = max(1.0, calls)
        if kept_elements >= layers:
            # what a layer saves for backward was written by one kernel of its own (its activation,
            # norm or residual add) and is read back by that kernel's backward
            _full(
                out,
                "activation / norm / residual",
                lambda ph: elementwise_work(_i(kept_elements / layers), act, variant="add", phase=ph),
                ckpt,
                calls=layers,
                backward=grads,
            )
        tables = (
            f"; {m.embedding_lookups_per_sample} embedding rows a sample looked up (its {m.embedding_params:,} table "
            "parameters are not multiplied)"
            if m.embedding_params and m.embedding_lookups_per_sample
            else ""
        )
        if layers_known:
            return [
                f"an MLP is costed as {calls:.0f} square {width}-wide matmuls (gemm_layers; width from its "
                f"parameters) over {rows} rows plus one elementwise pass over what it saves for backward{tables}"
            ]
        return [
            "an MLP is costed as square matmuls of its parameter count's root (its layer widths are not known) "
            "plus one elementwise pass over what it saves for backward"
        ]
    c_in, c_out = CNN_REFERENCE_CHANNELS
    k = CNN_REFERENCE_KERNEL
    if layers_known and m.attention_layers and m.attention_mscores_per_sample > 0:
        flops_fwd -= _counted_attention(w, out, mm, act, grads, ckpt, 0.99 * flops_fwd)
    depthwise = _counted_depthwise(w, out, act, grads, ckpt) if layers_known else 0
    if depthwise:
        flops_fwd = max(0.01 * flops_fwd, flops_fwd - m.depthwise_gflops_per_sample * 1e9 * b)
    grouped = _counted_grouped(w, out, mm, grads, ckpt) if layers_known else 0
    if grouped:
        flops_fwd = max(0.01 * flops_fwd, flops_fwd - m.grouped_gflops_per_sample * 1e9 * b)
    if layers_known:  # gemm_layers convolutions of one size: c_in -> 2 c_in channels, 3x3, 28x28
        per_layer = flops_fwd / float(max(1, m.gemm_layers - depthwise - grouped))  # type: ignore[operator]
        unit = conv_work(b, 1, 2, 28, 28, k, mm, phase="forward").flops
        c_in = max(1, round(math.sqrt(per_layer / unit)))
        c_out = 2 * c_in
    conv = conv_work(b, c_in, c_out, 28, 28, k, mm, phase="forward")
    per_image = flops_fwd / conv.flops if conv.flops else 0.0
    out.append(PlannedKernel(label="convolutions forward", work=conv, calls=per_image))
    if ckpt:
        out.append(PlannedKernel(label="convolutions recompute", work=conv, calls=per_image))
    if grads:
        out.append(
            PlannedKernel(
                label="convolutions backward",
                work=conv_work(b, c_in, c_out, 28, 28, k, mm, phase="backward"),
                calls=per_image,
            )
        )
    if kept_elements >= 1:
        # one BN per conv, the depthwise ones too (v1.5: ~ 2 per conv work of the reference size)
        norms = max(1.0, per_image + depthwise + grouped if layers_known else per_image * 2.0)
        cols = c_out
        rows = _i(kept_elements / CNN_SAVED_PER_NORM_INPUT / norms / cols) if norms else 1
        _full(
            out,
            "batch norm",
            lambda ph: norm_work(rows, cols, act, variant="batch", impl="eager", phase=ph),
            ckpt,
            calls=norms,
            backward=grads,
        )
        _full(
            out,
            "relu / residual",
            lambda ph: elementwise_work(rows * cols, act, variant="add", phase=ph),
            ckpt,
            calls=norms * CNN_ELEMENTWISE_PER_NORM,
            backward=grads,
        )
    apart = [f"{depthwise} depthwise convolutions streamed"] if depthwise else []
    apart += [f"{grouped} grouped convolutions as batched GEMMs one group wide"] if grouped else []
    return [
        f"a {m.arch} is costed as {per_image:.0f} convolutions of "
        + ("one size (gemm_layers) " if layers_known else "a representative shape ")
        + f"per step ({c_in}->{c_out} channels, {k}x{k}, 28x28)"
        + "".join(f", {a}" for a in apart)
        + " plus batch-norm and elementwise work over half of what it "
        "saves for backward (the batch norms' inputs)"
        + ("; its memory format (training.channels_last) is not costed" if m.arch == "cnn" else "")
    ]


PART_DROPOUTS_PER_LAYER = 2
"""Dropout layers per Ludwig TransformerBlock: dropout1 after the attention, dropout2 after the
feed-forward (ludwig/modules/attention_modules.py TransformerBlock.forward; p = 0.1 by default)."""
PART_ATTENTION_VARIANT = "flash"
"""Ludwig's MultiHeadSelfAttention calls F.scaled_dot_product_attention without a mask and with
dropout_p 0 (dropout1 runs after it): on a CPU, for fp32 too, PyTorch picks its flash-attention CPU
kernel (aten/src/ATen/native/transformers/sdp_utils_cpp.cpp: use_flash_attention_cpp accepts float,
double, bfloat16 and half), so the scores are never materialised. Checked in the Ludwig venv (torch
2.11.0, this CPU): torch._fused_sdp_choice on (64, 8, 62, 32) fp32 tensors is FLASH_ATTENTION and
the profiler shows aten::_scaled_dot_product_flash_attention_for_cpu and its backward."""


def _transformer_part(
    w: Workload, recipe: FrameworkRecipe, out: list[PlannedKernel], on_cpu: bool
) -> tuple[float, list[str], float]:
    """A transformer stack inside a non-transformer model (model.part_*: a Ludwig ECD model's
    FT-Transformer combiner or transformer sequence encoder), kernel by kernel: per layer what
    `_transformer_layers` runs for an encoder block with layer norms and a ReLU feed-forward (Ludwig's
    TransformerBlock: q/k/v/output projections, attention, the heads' transpose, two residual adds, two
    layer norms, fc1/fc2), plus its two dropouts; before the stack the per-feature input projections
    (one small matmul per feature) with the token stack and [CLS] concatenation, or the token and
    position embeddings with their add and dropout. Returns (forward FLOPs per sample it costed, notes,
    host seconds of the dropouts' serial mask draws on a CPU per micro-batch)."""
    m, t = w.model, w.training
    sub = dataclasses.replace(
        w,
        model=ModelSpec(
            name=f"{m.name} transformer part",
            family=m.family,
            arch="encoder",
            hidden_size=m.part_hidden_size,
            num_layers=m.part_layers,
            num_heads=m.part_num_heads,
            ffn_hidden_size=m.part_ffn_size,
            vocab_size=0,
            learned_pos_embeddings=m.part_tokens,
        ),
        training=dataclasses.replace(t, seq_len=m.part_tokens),
    )
    mm, act, res = _dtypes(w)
    b = t.micro_batch_size
    d = m.part_hidden_size
    tokens = _i(b * m.part_tokens)
    grads = not (t.trainable_fraction == 0 and not t.lora_r)
    part: list[PlannedKernel] = []
    attention = PART_ATTENTION_VARIANT if on_cpu and t.attention_kernel != "eager" else None
    _transformer_layers(sub, recipe, part, on_cpu, activation="relu", attention_variant=attention)
    _dropout(part, "layer dropout", tokens * d, act, False, calls=PART_DROPOUTS_PER_LAYER * float(m.part_layers),
             backward=grads)  # fmt: skip
    if m.part_inputs:
        _matmul(
            part,
            "per-feature input projection",
            _i(b),
            _i(m.part_input_width),
            d,
            mm,
            trainable=grads,
            input_grad=grads,
            recompute=False,
            calls=float(m.part_inputs),
        )
        _full(  # torch.stack of the projected features, torch.cat with the [CLS] token
            part,
            "token stack and [CLS] concat",
            lambda ph: elementwise_work(tokens * d, act, variant="copy", inputs=1, outputs=1, phase=ph),
            False,
            calls=2.0,
            backward=grads,
        )
    if m.part_vocab_size:
        for name, rows in (("token embedding", m.part_vocab_size), ("position embedding", m.part_tokens)):
            part.append(
                PlannedKernel(
                    label=f"{name} forward", work=embedding_work(tokens, rows, d, res, phase="forward"), calls=1.0
                )
            )
            if grads:
                part.append(
                    PlannedKernel(
                        label=f"{name} backward",
                        work=embedding_work(tokens, rows, d, res, phase="backward"),
                        calls=1.0,
                    )
                )
        part.append(
            PlannedKernel(
                label="embedding add forward",
                work=elementwise_work(tokens * d, res, variant="add", phase="forward"),
                calls=1.0,
            )
        )
        _dropout(part, "embedding dropout", tokens * d, act, False, backward=grads)
    out += [dataclasses.replace(k, label=f"transformer part {k.label}") for k in part]
    forward = sum(k.work.flops * k.calls for k in part if k.work.phase == "forward") / b
    note = (
        f"the model's transformer stack ({m.part_layers} layer(s), width {d}, {m.part_num_heads} heads, "
        f"{m.part_tokens} tokens per sample) is costed kernel by kernel; the rest of the model by its FLOPs"
    )
    serial = 0.0
    if on_cpu:
        dropouts = PART_DROPOUTS_PER_LAYER * float(m.part_layers) + (1.0 if m.part_vocab_size else 0.0)
        serial = dropouts * tokens * d * cv.CPU_DROPOUT_S_PER_ELEMENT
        note += f"; on a CPU its dropouts draw their masks serially ({serial * 1e3:.3g} ms per batch)"
    return forward, [note], serial


def plan_step(w: Workload, params: ParamCounts | None = None) -> StepPlan:
    """Every kernel one GPU runs in one optimizer step of the workload."""
    p = params or count_params(w.model, w.training)
    recipe = recipe_of(w)
    if w.training.torch_compile and not recipe.compile:  # the config's training.torch_compile
        recipe = dataclasses.replace(recipe, compile=True)
    on_cpu = w.gpu.vendor == "cpu"
    out: list[PlannedKernel] = []
    notes: list[str] = []
    serial = 0.0
    if w.model.is_transformer:
        _transformer_layers(w, recipe, out, on_cpu)
        _outside_layers(w, recipe, p, out, on_cpu)
    elif w.model.part_layers:
        costed, part_notes, serial = _transformer_part(w, recipe, out, on_cpu)
        notes += part_notes + _cnn(w, recipe, p, out, on_cpu, costed_flops_per_sample=costed)
    else:
        notes += _cnn(w, recipe, p, out, on_cpu)
    _optimizer(w, recipe, p, out, on_cpu)
    return StepPlan(
        kernels=tuple(k for k in out if k.calls > 0), recipe=recipe, notes=tuple(notes), host_serial_s=serial
    )


# --- pricing --------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class StepTime:
    """A step plan priced on one accelerator (seconds on one GPU)."""

    device_micro_s: float
    """Device time of one micro-batch's kernels."""
    device_step_s: float
    """Device time of the once-per-step kernels (the optimizer)."""
    host_micro_s: float
    """Host time launching one micro-batch's kernels (plus the framework's own per-batch work)."""
    host_step_s: float
    """Host time of the once-per-step work (optimizer launches, the framework's per-step work)."""
    floor_micro_s: float
    """Roofline floor of one micro-batch's kernels (each kernel at its floor)."""
    floor_step_s: float
    by_kind_s: dict[str, float]
    """Device seconds per kernel kind for one optimizer step (all micro-batches)."""
    floor_by_kind_s: dict[str, float]
    l2_saved_s: float
    """Device seconds per optimizer step the kernel model's L2 term saves (launches small enough to
    stay in the accelerator's L2, against streaming them from HBM)."""
    launches_micro: float
    launches_step: float


def host_seconds_per_launch(w: Workload) -> float:
    """Host time to dispatch one eager op (conventions.host_seconds_per_kernel), scaled by the recipe."""
    return cv.host_seconds_per_kernel(w.gpu.vendor) * recipe_of(w).launch_scale


def price_many(items: list[tuple[Workload, StepPlan]], params: object = None) -> list[StepTime]:
    """`price_step` of many (workload, plan) pairs, one vectorised kernel_times call per accelerator
    (what building the training data does for thousands of rows)."""
    # numpy: loaded at the first priced step, not on import
    from perfmodel.kernels.efficiency import kernel_times

    groups: dict[tuple[str, str], list[int]] = {}
    for i, (w, _) in enumerate(items):
        groups.setdefault((w.gpu.name, repr(sorted(w.gpu.measured.items()))), []).append(i)
    times: list[list[Any]] = [[] for _ in items]
    for members in groups.values():
        works = [k.work for i in members for k in items[i][1].kernels]
        priced = kernel_times(works, items[members[0]][0].gpu, params)  # type: ignore[arg-type]
        at = 0
        for i in members:
            n = len(items[i][1].kernels)
            times[i] = priced[at : at + n]
            at += n
    return [price_step(w, plan, params, times=t) for (w, plan), t in zip(items, times, strict=True)]


def price_step(w: Workload, plan: StepPlan, params: object = None, times: list[Any] | None = None) -> StepTime:
    """Seconds of every kernel of `plan` on the workload's accelerator (perfmodel.kernels.efficiency);
    `times`: the kernel times already computed (`price_many`)."""
    # numpy: loaded at the first priced step, not on import
    from perfmodel.kernels.efficiency import kernel_times

    accum = w.training.grad_accum_steps
    by_kind: dict[str, float] = {}
    floor_kind: dict[str, float] = {}
    dev = {False: 0.0, True: 0.0}
    floor = {False: 0.0, True: 0.0}
    l2_saved = 0.0
    if times is None:
        times = kernel_times([k.work for k in plan.kernels], w.gpu, params)  # type: ignore[arg-type]
    for k, kt in zip(plan.kernels, times, strict=True):
        seconds, lowest = kt.seconds * k.calls, kt.floor_s * k.calls
        dev[k.per_step] += seconds
        floor[k.per_step] += lowest
        scale = 1.0 if k.per_step else float(accum)
        by_kind[k.work.kind] = by_kind.get(k.work.kind, 0.0) + seconds * scale
        floor_kind[k.work.kind] = floor_kind.get(k.work.kind, 0.0) + lowest * scale
        l2_saved += kt.l2_saved_s * k.calls * scale
    per_launch = host_seconds_per_launch(w)
    recipe = plan.recipe
    framework_floor = recipe.host_s_per_micro_batch or framework_floor_per_micro_batch_s(w)
    return StepTime(
        device_micro_s=dev[False],
        device_step_s=dev[True],
        host_micro_s=plan.launches(per_step=False) * per_launch + framework_floor + plan.host_serial_s,
        host_step_s=plan.launches(per_step=True) * per_launch + recipe.host_s_per_step,
        floor_micro_s=floor[False],
        floor_step_s=floor[True],
        by_kind_s=by_kind,
        floor_by_kind_s=floor_kind,
        l2_saved_s=l2_saved,
        launches_micro=plan.launches(per_step=False),
        launches_step=plan.launches(per_step=True),
    )
