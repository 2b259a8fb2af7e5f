"""Peak device memory per GPU of one training step: three numbers and their intervals.

  * allocated peak: the tensors alive at the step's worst moment, what
    `torch.cuda.max_memory_allocated` reports: weights, gradients, optimizer state, what autograd
    keeps for backward (perfmodel.analytic.activations, kernel by kernel as the framework recipe
    runs them) and the temporaries of the moment (the loss over the vocabulary, a layer's backward,
    the optimizer step's own buffers, gathered FSDP layers, DDP buckets);
  * reserved: what PyTorch's caching allocator holds for them (`max_memory_reserved`: block
    rounding, cached free blocks, fragmentation);
  * device total: reserved plus what lives outside the allocator (CUDA context and kernels, NCCL
    communication buffers): what nvidia-smi shows, and what must fit in the GPU's memory.

The step's worst moment is the largest of its phases: the loss forward (logits, their fp32 copy,
the log-probabilities) and backward (two fp32 gradients of the logits beside the kept
log-probabilities), the backward of the last layer (its recomputation under checkpointing), the end
of backward (every gradient) and the optimizer step (its temporaries: foreach AdamW's square-root
copy of the second moments). With gradient accumulation the gradients of earlier micro-batches
are held throughout.

Checked against the FakeTensor oracle (perfmodel/measure/memory_oracle.py, exact for what it runs) on a
grid of shapes (docs/memory.md, tests/test_memory_oracle.py) and against published measurements
(`perfmodel memcheck`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from perfmodel.analytic import activations as act
from perfmodel.analytic import conventions as cv
from perfmodel.analytic.params import ParamCounts, count_params
from perfmodel.catalog.frameworks import recipe_of
from perfmodel.workload import Workload

GB = 1e9

NF4_BYTES_PER_WEIGHT = 0.5 + 4 / 64
"""bitsandbytes NF4 storage: 4 bits per weight plus one fp32 absmax per 64 (transformers'
BitsAndBytesConfig default: bnb_4bit_use_double_quant=False)."""
INT8_BYTES_PER_WEIGHT = 1.0
"""bitsandbytes LLM.int8(): one byte per weight (the per-row fp32 scales are negligible)."""
BNB_8BIT_STATE_BYTES = 1 + 4 / 256
"""bitsandbytes block-wise 8-bit optimizer state: one byte per element plus an fp32 absmax per 256
(Optimizer8bit, block_wise=True); tensors under 4096 elements keep fp32 states."""
BNB_8BIT_MIN_SIZE = 4096
TORCHTUNE_LOSS_CHUNKS = 8
"""Chunks of torchtune's CEWithChunkedOutputLoss (num_output_chunks)."""

RESERVED_FACTOR = (1.00, 1.10, 1.50)
"""(low, estimate, high) `max_memory_reserved` / `max_memory_allocated` of one training step. The
caching allocator rounds blocks to 512 bytes and keeps freed blocks for reuse; with fixed shapes
(one sequence length) it reuses them nearly exactly, with many shapes (eager attention's per-layer
temporaries, a loop optimizer, variable-length batches) it fragments: Hugging Face's bert-large
V100 runs show nvidia-smi at up to 1.5x the oracle's allocated peak after the context
(`perfmodel memcheck`). The estimate is an assumption inside that span; the allocator frees its
cache and retries before it reports out of memory, so reserved above the peak need not fail."""
CUDA_CONTEXT_GB = (0.3, 0.5, 1.3)
"""(low, estimate, high) device memory outside PyTorch's allocator on one CUDA GPU: the context and
loaded kernels (CUDA >= 11.7 loads modules lazily: ~0.3-0.6 GB on Ampere/Hopper; Hugging Face's
V100 measurements include ~1.3 GB of context, datasets/public hf_transformers_perf_docs)."""
NCCL_BUFFERS_GB = (0.2, 0.5, 1.5)
"""(low, estimate, high) NCCL's own buffers per GPU when it communicates (several channels of
NCCL_BUFFSIZE = 4 MiB per peer and protocol): outside the allocator. An assumption."""
ALLOCATED_INTERVAL = (0.93, 1.10)
"""The allocated peak's interval as multiples of its estimate: the analytic model against the
FakeTensor oracle (docs/memory.md: median 1-2%, worst ~6% low) plus what a real run allocates beside
the step the oracle runs (cuBLAS workspaces, the allocator's block rounding, framework buffers:
+1-3% on the H200 peaks the issue cites)."""
ORACLE_INTERVAL = (1.00, 1.03)
"""The allocated peak's interval as multiples of the FakeTensor oracle's count
(perfmodel/measure/memory_oracle.py; `perfmodel predict --memory exact`): the oracle counts every
tensor of the step it runs (equal to the byte to the CPU allocator on 7 of 8 small models,
docs/memory.md), and a real run allocates 1-3% more beside it (cuBLAS workspaces, the allocator's
block rounding): issue 28's H200 runs of a 125M Llama peaked at 6.99 and 8.78 GiB against the
oracle's 6.92 and 8.59 GiB (+1.0%, +2.2%), the same source as ALLOCATED_INTERVAL's +1-3%."""
PARTS = ("weights", "gradients", "optimizer", "activations", "temporary")
"""The parts of the allocated peak (MemoryBreakdown's `*_gb` fields that sum to it)."""
FOREACH_TEMP_STATES = 1
"""foreach AdamW (torch.optim._multi_tensor_adamw) allocates one copy of the second moments for
their square root (torch._foreach_sqrt) during the step; the fused kernel allocates nothing."""
LAYER_BACKWARD_TEMPS = {"gated": 3, "gated-fused": 1, "plain": 2}
"""f-wide gradients alive together at the start of the last layer's backward, beside two d-wide
ones (the residual's gradient and the final norm's): a gated MLP's product, silu(gate) and up
(down-projection, then mul backward, before the saved factors are freed); Liger's SwiGLU
backward writes into its saved inputs (only the product's gradient is new); GELU's input and
output."""


@dataclass(frozen=True, kw_only=True)
class MemoryBreakdown:
    """Bytes per GPU at the peak of a training step, in GB (1e9 bytes). The first five sum to the
    allocated peak; `overhead_gb` is the rest of the device total."""

    weights_gb: float
    gradients_gb: float
    optimizer_gb: float
    activations_gb: float
    """Kept for backward at the peak (autocast weight copies included)."""
    temporary_gb: float
    """The moment's own tensors: the loss over the vocabulary, a layer's backward, the optimizer
    step's buffers, gathered FSDP/ZeRO-3 layers, DDP buckets."""
    overhead_gb: float
    """Device total minus the allocated peak: allocator caching and fragmentation, CUDA context,
    NCCL buffers."""
    phase: str = ""
    """Where the allocated peak is: forward/loss, loss backward, layer backward, end of backward,
    optimizer step (or 'steady' for models without a phase model)."""
    reserved_gb: float | None = None
    """Estimated max_memory_reserved (None: allocated + overhead, no allocator model)."""
    allocated_range_gb: tuple[float, float] | None = None
    reserved_range_gb: tuple[float, float] | None = None
    device_range_gb: tuple[float, float] | None = None
    paged_gb: float = 0.0
    """Optimizer state in CUDA managed memory (bitsandbytes paged optimizers): outside the allocator,
    paged to host memory when the device is short, so not counted against capacity."""
    offloaded_gb: float = 0.0
    """State kept in host memory instead (CPU offload)."""
    activations_by_kernel_gb: dict[str, float] = field(default_factory=dict)
    """What one micro-batch's forward keeps for backward, by kernel kind (norm, attention,
    activation, lora, autocast weight copies, ...), at the end of the forward."""

    @property
    def allocated_gb(self) -> float:
        """The allocated peak (what torch.cuda.max_memory_allocated reports)."""
        return self.weights_gb + self.gradients_gb + self.optimizer_gb + self.activations_gb + self.temporary_gb

    @property
    def total_gb(self) -> float:
        """The device total: allocated peak + overhead (what must fit in the GPU's memory)."""
        return self.allocated_gb + self.overhead_gb

    @property
    def reserved(self) -> float:
        return self.reserved_gb if self.reserved_gb is not None else self.total_gb

    def ranges(self) -> dict[str, tuple[float, float, float]]:
        """(low, estimate, high) of the three numbers: allocated, reserved, device."""
        alloc = self.allocated_gb
        lo, hi = self.allocated_range_gb or (alloc, alloc)
        r_lo, r_hi = self.reserved_range_gb or (self.reserved, self.reserved)
        d_lo, d_hi = self.device_range_gb or (self.total_gb, self.total_gb)
        return {"allocated": (lo, alloc, hi), "reserved": (r_lo, self.reserved, r_hi), "device": (d_lo, self.total_gb, d_hi)}


def _shard(strategy: str, dp: int) -> tuple[float, float, float]:
    """Divisors for (weights, gradients, optimizer state) under a data-parallel strategy."""
    if strategy in ("fsdp", "zero3"):
        return dp, dp, dp
    if strategy == "zero2":
        return 1, dp, dp
    if strategy == "zero1":
        return 1, 1, dp
    return 1, 1, 1


def weight_bytes_per_param(w: Workload) -> float:
    """Bytes per frozen/base weight, honouring quantization (the traffic model's convention)."""
    bits = w.training.quantization_bits
    if bits:
        # NF4/int8 storage plus block-wise quantization constants
        return (bits + cv.QUANT_SCALE_BITS_PER_PARAM) / 8
    # a frozen base is stored like any weight of its precision: 16-bit when the model is cast
    # (bf16/fp16), fp32 under autocast (amp_*), where only the matmuls run in 16-bit
    return float(cv.WEIGHT_BYTES[w.training.precision])


@dataclass(frozen=True, kw_only=True)
class _Params:
    """Parameter counts by role (parameters, not bytes)."""

    total: float
    linear: float
    """Weights of the blocks' linear layers (what quantization and autocast copies concern)."""
    head: float
    """The LM head's own weights (0 when tied or absent)."""
    lora: float
    trainable: float
    largest: float
    """The largest single trainable tensor (a for-loop optimizer's temporaries)."""


def _params(w: Workload, p: ParamCounts) -> _Params:
    m, t = w.model, w.training
    d, f = float(m.hidden_size or 0), float(m.ffn_size)
    q, kv = m.attention_width, m.kv_heads * m.head_width
    layers = float(m.num_layers or 0)
    per_layer = d * q + 2 * d * kv + q * d + (3 if m.gated_mlp else 2) * d * f * max(1, m.num_experts)
    head = float(m.vocab_size or 0) * d if m.arch in ("decoder", "encoder-decoder") and not m.tied_embeddings else 0.0
    shapes = {"q": d + q, "k": d + kv, "v": d + kv, "o": q + d, "gate": d + f, "up": d + f, "down": f + d}
    lora = 0.0
    if t.lora_r:
        order = act.lora_order(m.gated_mlp)
        targets = order[: t.lora_target_modules]
        extra = max(0, t.lora_target_modules - len(order))
        lora = layers * t.lora_r * (sum(shapes[x] for x in targets) + extra * (d + d))
    base_total = p.total - p.lora
    if t.lora_r:
        trainable = lora
        largest = t.lora_r * max(d, f)
    else:
        fraction = 1.0 if t.trainable_fraction is None else float(t.trainable_fraction)
        trainable = base_total * fraction
        largest = max(float(m.vocab_size or 0) * d, d * f) if fraction else 0.0
    return _Params(total=base_total + lora, linear=layers * per_layer, head=head, lora=lora, trainable=trainable, largest=largest)


def estimate_memory(w: Workload, params: ParamCounts | None = None) -> MemoryBreakdown:
    """The step's peak memory per GPU (see the module docstring)."""
    p = params or count_params(w.model, w.training)
    if not w.model.is_transformer:
        layout = act.resnet_layout(w)
        t = w.training
        if layout is not None and t.trainable_fraction in (None, 1.0) and not t.lora_r and not t.quantization_bits:
            return _finish(w, _resnet(w, p, layout))
        return _finish(w, _non_transformer(w, p))
    return _finish(w, _transformer(w, p))


@dataclass(frozen=True, kw_only=True)
class _Peak:
    weights: float
    gradients: float
    optimizer: float
    activations: float
    temporary: float
    phase: str
    paged: float = 0.0
    offloaded: float = 0.0
    by_kernel: dict[str, float] = field(default_factory=dict)


def _states(w: Workload, pr: _Params, grad_bytes: float) -> tuple[float, float, float]:
    """(optimizer state bytes on the device, in managed memory, one step's temporaries) before sharding."""
    t = w.training
    recipe = recipe_of(w)
    states = cv.OPTIMIZER_STATES.get(t.optimizer, 2)
    fmt = t.optimizer_state or recipe.optimizer_state
    if not states:
        return 0.0, 0.0, 0.0
    if fmt in ("8bit", "paged-8bit"):
        small = pr.trainable if pr.largest < BNB_8BIT_MIN_SIZE else 0.0
        per = BNB_8BIT_STATE_BYTES
        total = states * ((pr.trainable - small) * per + small * 4.0)
        temp = 0.0  # one fused kernel, in place
    else:
        # torch.optim keeps states in the parameters' dtype (fp8 training: fp32 states)
        per = 4.0 if t.precision == "fp8" else grad_bytes
        total = states * pr.trainable * per
        impl = recipe.optimizer_impl if w.gpu.vendor != "cpu" else "for-loop"
        if t.optimizer in ("adamw", "adam"):
            temp = FOREACH_TEMP_STATES * pr.trainable * per if impl == "foreach" else 0.0
            if impl == "for-loop":
                temp = pr.largest * per
        else:
            temp = 0.0
    if fmt.startswith("paged"):
        return 0.0, total, temp
    return total, 0.0, temp


def _transformer(w: Workload, p: ParamCounts) -> _Peak:
    m, t, par = w.model, w.training, w.parallel
    recipe = recipe_of(w)
    pr = _params(w, p)
    prec = t.precision
    amp = prec.startswith("amp")
    res = 4 if prec in ("fp32", "tf32") or amp else 2
    a = 4 if prec in ("fp32", "tf32") else 2
    wb = float(cv.WEIGHT_BYTES[prec])
    lora_bytes = 4.0 if recipe.lora_dtype == "fp32" or res == 4 else float(res)
    d, V = float(m.hidden_size or 0), float(m.vocab_size or 0)
    split_model = par.model_split
    div_w, div_g, div_o = _shard(par.strategy, par.shard_group)
    fsdp = par.strategy in ("fsdp", "zero3") and par.shard_group > 1

    # --- parameters, gradients, optimizer state -------------------------------------------------
    frozen = pr.total - pr.trainable
    if t.quantization_bits:
        q_bytes = NF4_BYTES_PER_WEIGHT if t.quantization_bits == 4 else INT8_BYTES_PER_WEIGHT
        weights = pr.linear * q_bytes + max(0.0, frozen - pr.linear) * wb
    else:
        weights = frozen * wb
    grad_bytes = lora_bytes if t.lora_r else (2.0 if prec == "fp8" else wb)
    weights += pr.trainable * (lora_bytes if t.lora_r else wb)
    if prec == "fp8":
        weights += pr.trainable * cv.MASTER_BYTES["fp8"]
    weights /= split_model * div_w
    in_backward = t.optimizer_in_backward if t.optimizer_in_backward is not None else recipe.optimizer_in_backward
    grads_all = pr.trainable * grad_bytes / (split_model * div_g)
    optimizer, paged, opt_temp = _states(w, pr, grad_bytes)
    optimizer, paged, opt_temp = (x / (split_model * div_o) for x in (optimizer, paged, opt_temp))
    offloaded = 0.0
    if par.cpu_offload:
        # ZeRO-Offload: fp32 master weights and Adam moments live on the host, the step runs there
        offloaded = optimizer
        optimizer, opt_temp = 0.0, 0.0
        if prec == "fp8":
            master = pr.trainable * cv.MASTER_BYTES["fp8"] / (split_model * div_w)
            weights -= master
            offloaded += master
    if in_backward:  # one parameter's gradient and step at a time
        step_grads = pr.largest * grad_bytes
        opt_temp = min(opt_temp, pr.largest * grad_bytes) if opt_temp else 0.0
    else:
        step_grads = grads_all
    held = grads_all if t.grad_accum_steps > 1 and not in_backward else 0.0

    # --- what one micro-batch keeps for backward ------------------------------------------------
    b, s = float(t.micro_batch_size), float(t.seq_len)
    split = float(par.activation_split)
    tokens = b * s / split
    local_layers = max(1, int(m.num_layers or 0) // par.pipeline_parallel)
    first, rest = act.layer(w, first=True), act.layer(w)
    by_kernel: dict[str, float] = {}
    if t.activation_checkpointing:
        kept_layer = res * d
        if t.checkpointing_policy == "selective":
            kept_layer += sum(rest.mm_outputs[0::2]) + rest.sdpa_outputs
        layers_kept = tokens * local_layers * kept_layer
        by_kernel["checkpoint"] = layers_kept
        if recipe.activation_offload:  # offloaded checkpoints: one layer's input on the device at a time
            layers_kept = tokens * kept_layer
            by_kernel["checkpoint"] = layers_kept
        recompute = tokens * rest.bytes_per_token
    else:
        layers_kept = tokens * (first.bytes_per_token + (local_layers - 1) * rest.bytes_per_token)
        for kernel, value in rest.by_kernel().items():
            by_kernel[kernel] = tokens * value * (local_layers - 1)
        for kernel, value in first.by_kernel().items():
            by_kernel[kernel] = by_kernel.get(kernel, 0.0) + tokens * value
        recompute = 0.0
    first_saved = recompute if t.activation_checkpointing else tokens * first.bytes_per_token
    model_level = _model_level(w, tokens, res, a, d)
    for kernel, value in model_level.items():
        by_kernel[kernel] = by_kernel.get(kernel, 0.0) + value
    kept = layers_kept + sum(model_level.values())
    if par.pipeline_parallel > 1:  # 1F1B: the first stage holds up to pp micro-batches in flight
        kept *= min(par.pipeline_parallel, t.grad_accum_steps)
    copies, layer_copies = 0.0, 0.0
    copies_bwd: float | None = None
    if amp and not fsdp and not t.quantization_bits:
        # autocast: a 16-bit copy of every matmul weight, kept for its input's gradient (none for
        # the first layer's q/k/v when the embedding is frozen: their input needs no gradient)
        head = pr.head + (V * d if m.tied_embeddings and m.arch == "decoder" else 0.0)
        first_qkv = 0.0 if first_input_grad(w) else d * (m.attention_width + 2 * m.kv_heads * m.head_width)
        copies = 2.0 * (pr.linear - first_qkv + head + pr.lora) / split_model  # LoRA adapters: cached casts
        by_kernel["autocast weight copies"] = copies
        if t.activation_checkpointing:
            # the copies live in autocast's cache until the forward's autocast region exits
            # (torch/amp/autocast_mode.py __exit__: torch.clear_autocast_cache()); a checkpointed
            # layer keeps no matmul's weight, so from the loss's backward on only the head's copy is
            # kept, and one layer's copies while its recomputation (under the autocast state
            # checkpoint recorded) is being backpropagated
            copies_bwd = 2.0 * head / split_model
            layer_copies = 2.0 * (pr.linear + pr.lora) / max(1, int(m.num_layers or 1)) / split_model
    elif amp and t.quantization_bits:
        copies = 2.0 * pr.head / split_model
        by_kernel["autocast weight copies"] = copies
    copies_bwd = copies if copies_bwd is None else copies_bwd

    # --- the temporaries of each phase ----------------------------------------------------------
    kv_cache = 0.0
    if recipe.kv_cache and not t.activation_checkpointing and m.gated_mlp and amp and "rotary" not in recipe.fused:
        # transformers' DynamicCache: attention reads each layer's keys and values from the cache
        # (torch.cat copies), so the saved ones are the cache's; under autocast the keys after
        # rotary are fp32 there and attention keeps their 16-bit cast: the fp32 keys are extra
        kv_cache = tokens * local_layers * m.kv_heads * m.head_width * act.FP32
    # the final norm's output, held by the model's output object while the loss runs (transformers'
    # CausalLMOutputWithPast; a chunked or fused loss over the body's output)
    final_out = tokens * res * d if m.arch == "decoder" and (recipe.kv_cache or recipe.loss != "materialized") else 0.0
    loss_fwd, loss_bwd = _loss_terms(w, tokens * split / max(1, par.tensor_parallel), res, a, d, V, pr, wb)
    comm = 0.0
    if fsdp and m.num_layers:
        layer_params = pr.linear / float(m.num_layers) / par.tensor_parallel
        comm += cv.FSDP_GATHERED_LAYERS * layer_params * 2.0  # gathered in 16-bit
    elif par.shard_group > 1:
        comm += cv.DDP_BUCKETS_IN_FLIGHT * cv.DDP_BUCKET_BYTES
    ddp_buckets = grads_all if par.strategy == "ddp" and par.shard_group > 1 else 0.0
    # torch DistributedDataParallel: gradient_as_bucket_view=False (the default) keeps a flat bucket
    # copy of every gradient for the all-reduce (torch/nn/parallel/distributed.py docstring)
    layer_temp = _layer_backward_temp(w, a, res, d) * tokens
    # the LM head's gradient (the embedding's, when tied) comes first in backward
    head_grad = V * d * grad_bytes / split_model if m.arch == "decoder" and first_input_grad(w) else 0.0
    base = weights + optimizer
    phases = {
        "forward/loss": (held, kept + copies, loss_fwd + kv_cache + final_out + comm),
        "loss backward": (held, kept + copies_bwd, loss_bwd + comm),
        "layer backward": (held + head_grad, kept + copies_bwd + layer_copies + recompute, layer_temp + comm),
        # the first layer's backward, the last one: every other layer's gradients are there, its own
        # activations (recomputed under checkpointing) and gradients of the moment beside them
        "first layer backward": (step_grads + ddp_buckets, first_saved, layer_temp + comm),
        "end of backward": (step_grads + ddp_buckets, 0.0, comm),
        "optimizer step": (step_grads + ddp_buckets, 0.0, opt_temp),
    }
    if not pr.trainable or t.optimizer == "none":
        phases = {"forward/loss": (0.0, kept + copies, loss_fwd + kv_cache + final_out + comm)}
    phase = max(phases, key=lambda k: sum(phases[k]))
    grads, saved, temp = phases[phase]
    return _Peak(
        weights=base - optimizer, gradients=grads, optimizer=optimizer, activations=saved, temporary=temp, phase=phase,
        paged=paged, offloaded=offloaded, by_kernel={k: v for k, v in by_kernel.items() if v},
    )  # fmt: skip


def first_input_grad(w: Workload) -> bool:
    """Whether the first layer's input needs a gradient (the embedding trains)."""
    t = w.training
    return not t.lora_r and t.trainable_fraction != 0 and not t.quantization_bits


def _layer_backward_temp(w: Workload, a: int, res: int, d: float) -> float:
    """Bytes per token of the gradients alive together early in the last layer's backward."""
    m = w.model
    kind = ("gated-fused" if "activation" in recipe_of(w).fused else "gated") if m.gated_mlp else "plain"
    temp = LAYER_BACKWARD_TEMPS[kind] * a * float(m.ffn_size) + 2 * res * d
    if w.training.attention_kernel == "eager":  # the fp32 gradient of the s x s probabilities
        temp = max(temp, act.FP32 * float(m.num_heads or 1) * float(w.training.seq_len) + 2 * res * d)
    return temp


def _model_level(w: Workload, tokens: float, res: int, a: int, d: float) -> dict[str, float]:
    """What the model keeps outside its layers, in bytes for one micro-batch: rotary tables, the
    embedding's dropout, the final norm and the LM head's input."""
    m, t = w.model, w.training
    recipe = recipe_of(w)
    full = not t.lora_r and t.trainable_fraction != 0 and not t.quantization_bits
    out: dict[str, float] = {}
    if m.gated_mlp and m.arch == "decoder":  # cos and sin, (1, s, head_dim) each, shared by every layer
        out["rotary"] = 2 * m.head_width * res * tokens / t.micro_batch_size
    if m.dropout and full:
        out["dropout"] = act.MASK * d * tokens
    if m.arch == "encoder" and full:  # the embeddings' LayerNorm
        out["norm"] = (res * d + 2 * act.FP32) * tokens
    if m.arch in ("decoder", "encoder-decoder"):
        grad = full or bool(t.lora_r)
        norm = 0.0
        if grad and m.gated_mlp:
            if "norm" in recipe.fused:
                norm = res * d + act.FP32
            else:
                norm = act.FP32 * d + act.FP32 + (
                    ((act.FP32 if recipe.native_norm else res) * d) if full else 0.0
                )
        elif grad:
            norm = res * d + 2 * act.FP32
        out["norm"] = out.get("norm", 0.0) + norm * tokens
        if full and recipe.loss != "fused-linear":  # the LM head keeps its input for its weight's gradient
            out["loss"] = (2 if t.precision.startswith("amp") else res) * d * tokens
    return out


def _loss_terms(
    w: Workload, tokens: float, res: int, a: int, d: float, vocab: float, pr: _Params, wb: float
) -> tuple[float, float]:
    """(forward peak, backward peak) of the loss over the vocabulary, bytes for one micro-batch
    (`tokens` on this GPU, the vocabulary split over tensor-parallel ranks)."""
    m, t = w.model, w.training
    recipe = recipe_of(w)
    if m.arch not in ("decoder", "encoder-decoder") or not vocab:
        return 0.0, 0.0
    mode = "fused-linear" if t.fused_cross_entropy else recipe.loss
    if mode == "fused-linear":
        # Liger fused_linear_cross_entropy: grad_input (input dtype) and grad_weight (weight dtype)
        # computed chunk by chunk in forward and kept; one chunk of logits at a time
        inc = math.ceil(vocab / max(d, 1.0))
        chunk = 2 ** math.ceil(math.log2(max(1.0, math.ceil(tokens / inc))))
        grad_weight = vocab * d * wb if not t.lora_r and t.trainable_fraction != 0 and not t.quantization_bits else 0.0
        kept = tokens * res * d + grad_weight
        return kept + chunk * vocab * a + chunk * d * a, kept
    if mode == "chunked":
        # torchtune CEWithChunkedOutputLoss: every chunk's 16-bit logits, each chunk upcast in turn,
        # the fp32 log-probabilities kept; backward: two fp32 gradients of one chunk
        n = TORCHTUNE_LOSS_CHUNKS
        return tokens * vocab * (a + 4 + 4 / n), tokens * vocab * (4 + 8 / n)
    # ForCausalLMLoss / F.cross_entropy(logits.float()): 16-bit logits, their fp32 copy, the fp32
    # log-probabilities (_log_softmax keeps its result); backward: nll_loss's gradient and
    # _log_softmax_backward_data's beside the kept log-probabilities
    upcast = 4.0 if a != 4 else 0.0
    return tokens * vocab * (a + upcast + 4), tokens * vocab * 12


LAST_BLOCK_GRADIENTS = 2
"""Gradients of a ResNet block's output size alive at the start of its backward (beside everything
still kept): the gradient arriving from above (for the last block, `mean`'s backward expands the
pooled gradient into a new full-size tensor: derivatives.yaml mean.dim `grad.expand(...) / N`) and
threshold_backward's new gradient of the block's ReLU, before the ReLU's node releases its input
and its kept result. Checked against the oracle: 2 x the last block's output at the peak."""


def _resnet(w: Workload, p: ParamCounts, layout: act.ResNetLayout) -> _Peak:
    """A ResNet trained in full, part by part (perfmodel.analytic.activations.convnet: what each
    convolution, BatchNorm, ReLU, max-pool and the classifier keep, from their autograd
    definitions). Phases: the end of the forward (everything kept, the loss); the backward, block by
    block from the last (what earlier blocks keep, the block's own kept tensors, recomputed under
    checkpointing, the two gradients of its output, the gradients of later blocks' parameters,
    the autocast weight copies not yet used); the end of backward; the optimizer step."""
    t, par = w.training, w.parallel
    net = act.convnet(layout, t.precision)
    div_w, div_g, div_o = _shard(par.strategy, par.shard_group)
    b = float(t.micro_batch_size)
    amp = t.precision.startswith("amp")
    wb, grad_bytes = float(cv.WEIGHT_BYTES[t.precision]), float(cv.GRAD_BYTES[t.precision])
    total = float(p.total)
    pr = _Params(total=total, linear=float(net.conv_weights), head=0.0, lora=0.0, trainable=total,
                 largest=float(net.largest_param))  # fmt: skip
    weights = total * wb / div_w
    optimizer, paged, opt_temp = (x / div_o for x in _states(w, pr, grad_bytes))
    offloaded = 0.0
    if par.cpu_offload:
        offloaded, optimizer = optimizer, 0.0
    grads_all = total * grad_bytes / div_g
    held = grads_all if t.grad_accum_steps > 1 else 0.0
    images = net.images * b
    comm = cv.DDP_BUCKETS_IN_FLIGHT * cv.DDP_BUCKET_BYTES if par.shard_group > 1 else 0.0
    ddp_buckets = grads_all if par.strategy == "ddp" and par.shard_group > 1 else 0.0
    # autocast: a 16-bit copy of every convolution's and the classifier's weight, cached for the
    # step (torch autocast cached_cast) and kept by each convolution for its input's gradient
    copy = 2.0 if amp else 0.0
    stem = sum(net.stem.values()) * b
    head = sum(net.head.values()) * b
    blocks = net.blocks
    ckpt = t.activation_checkpointing
    # under checkpointing each block keeps only its input (the first block's is the stem's output)
    kept_blocks = [blk.input * b if ckpt and i else (0.0 if ckpt else blk.saved * b) for i, blk in enumerate(blocks)]
    by_kernel = {k: v * b for k, v in net.by_kernel().items()}
    if ckpt:
        by_kernel["conv/norm/relu"] = by_kernel.get("conv/norm/relu", 0.0) - sum(x.saved for x in blocks) * b
        by_kernel["checkpoint"] = sum(kept_blocks)
    copies = copy * net.conv_weights
    if copies:
        by_kernel["autocast weight copies"] = copies
    base = weights + optimizer + images
    phases = {"forward/loss": held + base + copies + stem + sum(kept_blocks) + head + comm}
    grads_later = (net.conv_weights - net.stem_weights - sum(x.conv_weights for x in blocks)) * grad_bytes / div_g
    # from the backward on, the copies of checkpointed blocks are gone with autocast's cache (see
    # _transformer): the stem's and the classifier's stay, and the block being recomputed makes its own
    copies_left = copy * (net.stem_weights + layout.features * layout.classes) if ckpt else copies
    walk = 0.0
    for i in range(len(blocks) - 1, -1, -1):
        blk = blocks[i]
        # what earlier blocks keep, this block's own (under checkpointing: its kept input and its
        # recomputed tensors; the recomputation's transient sum before the last ReLU is one of
        # the two output-sized tensors counted below, beside the gradient from above)
        earlier = sum(kept_blocks[: i + 1]) + (blk.saved * b if ckpt else 0.0)
        own_copies = copy * blk.conv_weights if ckpt else 0.0
        alive = held + base + copies_left + own_copies + grads_later + stem + earlier
        walk = max(walk, alive + LAST_BLOCK_GRADIENTS * blk.output * b + comm)
        grads_later += blk.params * grad_bytes / div_g
        if not ckpt:
            copies_left -= copy * blk.conv_weights
    phases["layer backward"] = walk
    phases["end of backward"] = base + grads_all + ddp_buckets + comm
    phases["optimizer step"] = base + grads_all + ddp_buckets + opt_temp
    phase = max(phases, key=lambda k: phases[k])
    value = phases[phase]
    grads = {"forward/loss": held, "end of backward": grads_all + ddp_buckets, "optimizer step": grads_all + ddp_buckets}
    g = grads.get(phase, 0.0)
    if phase == "layer backward":  # the split of the walk's maximum is not tracked: its rest is activations
        g = held
    temp = opt_temp if phase == "optimizer step" else comm
    # the input images count with the activations (the first convolution keeps them, or their
    # 16-bit copy under autocast while the caller holds the batch)
    by_kernel["input images"] = images
    return _Peak(
        weights=weights, gradients=g, optimizer=optimizer, activations=value - weights - optimizer - g - temp,
        temporary=temp, phase=phase, paged=paged, offloaded=offloaded, by_kernel={k: v for k, v in by_kernel.items() if v},
    )  # fmt: skip


def _non_transformer(w: Workload, p: ParamCounts) -> _Peak:
    """CNNs and MLPs: a per-sample activation figure from the catalog (no phase model)."""
    t, m, par = w.training, w.model, w.parallel
    div_w, div_g, div_o = _shard(par.strategy, par.shard_group)
    precision = t.precision
    trainable = p.trainable
    frozen = p.total - trainable
    trainable_w = 4.0 if precision.startswith("amp") else float(cv.WEIGHT_BYTES[precision])
    weights = (frozen * weight_bytes_per_param(w) + trainable * (trainable_w + cv.MASTER_BYTES.get(precision, 0))) / div_w
    gradients = trainable * float(cv.GRAD_BYTES[precision]) / div_g
    states = cv.OPTIMIZER_STATES.get(t.optimizer, 2)
    optimizer = trainable * states * cv.optimizer_state_bytes(precision) / div_o
    offloaded = 0.0
    if par.cpu_offload:
        offloaded, optimizer = optimizer, 0.0
    act_scale = cv.ACTIVATION_BYTES[precision] / 2.0  # coefficients are for 16-bit
    kept = float(m.activation_mb_per_sample or 0.0) * 1e6 * act_scale * float(t.micro_batch_size)
    if t.activation_checkpointing:
        kept /= cv.NON_TRANSFORMER_CHECKPOINT_DIVISOR
    if t.trainable_fraction == 0 and not t.lora_r:
        kept /= cv.FROZEN_NON_TRANSFORMER_ACTIVATION_DIVISOR
    temp = cv.DDP_BUCKETS_IN_FLIGHT * cv.DDP_BUCKET_BYTES if par.shard_group > 1 else 0.0
    return _Peak(weights=weights, gradients=gradients, optimizer=optimizer, activations=kept, temporary=temp,
                 phase="steady", offloaded=offloaded)  # fmt: skip


def _finish(w: Workload, peak: _Peak) -> MemoryBreakdown:
    """The allocated peak, then reserved and device total with their intervals."""
    return _with_ranges(
        w,
        MemoryBreakdown(
            weights_gb=peak.weights / GB,
            gradients_gb=peak.gradients / GB,
            optimizer_gb=peak.optimizer / GB,
            activations_gb=peak.activations / GB,
            temporary_gb=peak.temporary / GB,
            overhead_gb=0.0,
            phase=peak.phase,
            paged_gb=peak.paged / GB,
            offloaded_gb=peak.offloaded / GB,
            activations_by_kernel_gb={k: v / GB for k, v in peak.by_kernel.items()},
        ),
        ALLOCATED_INTERVAL,
    )


def _with_ranges(w: Workload, m: MemoryBreakdown, interval: tuple[float, float]) -> MemoryBreakdown:
    """`m` with its allocated interval (`interval`: multiples of the allocated peak), reserved
    and device total (with theirs) computed from its allocated peak: the one rule for both."""
    alloc_gb = m.allocated_gb
    lo_a, hi_a = alloc_gb * interval[0], alloc_gb * interval[1]
    on_gpu = w.gpu.vendor != "cpu"
    r_lo, r_est, r_hi = (alloc_gb * f for f in RESERVED_FACTOR) if on_gpu else (alloc_gb,) * 3
    r_lo, r_hi = lo_a * RESERVED_FACTOR[0], hi_a * RESERVED_FACTOR[2]
    if not on_gpu:
        r_lo, r_est, r_hi = lo_a, alloc_gb, hi_a
    outside = [0.0, 0.0, 0.0]
    if on_gpu:
        outside = list(CUDA_CONTEXT_GB)
        if w.parallel.num_gpus > 1:
            outside = [a + b for a, b in zip(outside, NCCL_BUFFERS_GB, strict=True)]
    device = (r_lo + outside[0], r_est + outside[1], r_hi + outside[2])
    return dataclasses.replace(
        m,
        overhead_gb=device[1] - alloc_gb,
        reserved_gb=r_est,
        allocated_range_gb=(lo_a, hi_a),
        reserved_range_gb=(r_lo, r_hi),
        device_range_gb=(device[0], device[2]),
    )


def with_allocated(
    w: Workload, m: MemoryBreakdown, parts_gb: Mapping[str, float], *, interval: tuple[float, float],
    paged_gb: float | None = None,
) -> MemoryBreakdown:
    """`m` (an estimate of `w`) with another allocated peak: `parts_gb` (weights, gradients,
    optimizer, activations, temporary, GB; each given replaces `m`'s) with its interval
    (`interval`: multiples of the new peak), reserved and device total recomputed from it by the
    same rule as the analytic estimate's (`_with_ranges`); the phase and the activations by kernel
    stay `m`'s."""
    unknown = set(parts_gb) - set(PARTS)
    if unknown:
        raise ValueError(f"unknown memory parts {sorted(unknown)}; the parts are {', '.join(PARTS)}")
    fields: dict[str, Any] = {f"{k}_gb": float(v) for k, v in parts_gb.items()}
    if paged_gb is not None:
        fields["paged_gb"] = paged_gb
    return _with_ranges(w, dataclasses.replace(m, **fields), interval)


def scaled(w: Workload, m: MemoryBreakdown, factor: float) -> MemoryBreakdown:
    """`m` with every part of its allocated peak multiplied by `factor` (the analytic model
    anchored to another count of the same run: `perfmodel predict --memory exact`'s fit
    suggestions), with the analytic interval; `factor` 1 gives `m` itself."""
    if factor == 1.0:
        return m
    return with_allocated(w, m, {k: getattr(m, f"{k}_gb") * factor for k in PARTS}, interval=ALLOCATED_INTERVAL)
