"""Peak device memory per GPU: weights, gradients, optimizer state, activations, overhead."""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.analytic import conventions as cv
from perfmodel.analytic.params import ParamCounts, count_params
from perfmodel.workload import Workload

GB = 1e9


@dataclass(frozen=True, kw_only=True)
class MemoryBreakdown:
    """Bytes per GPU at the peak of a training step, in GB (1e9 bytes)."""

    weights_gb: float
    gradients_gb: float
    optimizer_gb: float
    activations_gb: float
    temporary_gb: float
    """Gathered FSDP/ZeRO-3 layers, communication buckets, logits."""
    overhead_gb: float
    """Framework context and allocator fragmentation."""

    @property
    def total_gb(self) -> float:
        return (
            self.weights_gb
            + self.gradients_gb
            + self.optimizer_gb
            + self.activations_gb
            + self.temporary_gb
            + self.overhead_gb
        )


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
    """Bytes per frozen/base weight, honouring quantization."""
    bits = w.training.quantization_bits
    if bits:
        # NF4/int8 storage plus block-wise quantization constants
        return (bits + cv.QUANT_SCALE_BITS_PER_PARAM) / 8
    # a frozen base is stored like any weight of its precision: 16-bit when the model is cast
    # (bf16/fp16), fp32 under autocast (amp_*), where only the matmuls run in 16-bit
    return float(cv.WEIGHT_BYTES[w.training.precision])


def estimate_memory(w: Workload, params: ParamCounts | None = None) -> MemoryBreakdown:
    p = params or count_params(w.model, w.training)
    t, par = w.training, w.parallel
    model_split = par.model_split
    div_w, div_g, div_o = _shard(par.strategy, par.shard_group)
    precision = t.precision
    frozen = p.total - p.trainable
    trainable = p.trainable
    if t.lora_r:
        frozen = p.total - p.lora
    trainable_w_bytes = (
        4.0 if (t.lora_r or precision.startswith("amp")) else float(cv.WEIGHT_BYTES[precision])
    )
    weights = frozen * weight_bytes_per_param(w) + trainable * (
        trainable_w_bytes + cv.MASTER_BYTES.get(precision, 0)
    )
    weights /= model_split * div_w
    grad_bytes = 4.0 if t.lora_r else float(cv.GRAD_BYTES[precision])
    gradients = trainable * grad_bytes / (model_split * div_g)
    states = cv.OPTIMIZER_STATES.get(t.optimizer, 2)
    state_bytes = 4 if t.lora_r else cv.optimizer_state_bytes(precision)
    optimizer = trainable * states * state_bytes / (model_split * div_o)
    if par.cpu_offload:
        # optimizer offload (ZeRO-Offload): fp32 master weights and Adam moments live on the host
        optimizer = 0.0
        if cv.MASTER_BYTES.get(precision):
            weights -= trainable * cv.MASTER_BYTES[precision] / (model_split * div_w)
    activations, temporary = _activation_bytes(w, p)
    tensors = weights + gradients + optimizer + activations + temporary
    is_gpu = w.gpu.vendor != "cpu"
    overhead = (cv.FRAMEWORK_OVERHEAD_GB * GB if is_gpu else 0.0) + cv.FRAGMENTATION_FRACTION * tensors
    return MemoryBreakdown(
        weights_gb=weights / GB,
        gradients_gb=gradients / GB,
        optimizer_gb=optimizer / GB,
        activations_gb=activations / GB,
        temporary_gb=temporary / GB,
        overhead_gb=overhead / GB,
    )


def _activation_bytes(w: Workload, p: ParamCounts) -> tuple[float, float]:
    """(activations kept for backward, temporary buffers) in bytes per GPU."""
    t, par, m = w.training, w.parallel, w.model
    b = float(t.micro_batch_size)
    act_scale = cv.ACTIVATION_BYTES[t.precision] / 2.0  # coefficients are for 16-bit
    fully_frozen = t.trainable_fraction == 0 and not t.lora_r
    if not m.is_transformer:
        per_sample = float(m.activation_mb_per_sample or 0.0) * 1e6 * act_scale
        kept = per_sample * b
        if t.activation_checkpointing:
            kept /= cv.NON_TRANSFORMER_CHECKPOINT_DIVISOR
        if fully_frozen:
            kept /= cv.FROZEN_NON_TRANSFORMER_ACTIVATION_DIVISOR
        return kept, 0.0
    s, d = float(t.seq_len), float(m.hidden_size or 0)
    layers_per_gpu = float(m.num_layers or 0) / par.pipeline_parallel
    split = par.activation_split  # sequence parallelism over tensor ranks, context parallelism
    per_layer = cv.ACTIVATION_BYTES_PER_LAYER_COEFF * s * b * d * act_scale / split
    if t.attention_kernel == "eager":  # the s x s scores are kept for backward
        per_layer += cv.EAGER_ATTENTION_SAVED_BYTES_PER_SCORE * b * float(m.num_heads or 1) * s * s / split
    if fully_frozen:
        kept = per_layer  # no graph is kept: one layer's working set
    elif t.activation_checkpointing:
        # layer inputs are sharded over tensor-parallel ranks too (sequence parallelism)
        kept = (
            cv.CHECKPOINT_BYTES_PER_LAYER_COEFF * s * b * d * act_scale * layers_per_gpu / split + per_layer
        )
    else:
        kept = per_layer * layers_per_gpu
    # 1F1B pipeline: the first stage holds up to `pp` micro-batches in flight
    kept *= min(par.pipeline_parallel, t.grad_accum_steps) if par.pipeline_parallel > 1 else 1
    temporary = 0.0
    if m.arch in ("decoder", "encoder-decoder") and m.vocab_size and not t.fused_cross_entropy:
        temporary += s * b * float(m.vocab_size) * cv.LOGITS_BYTES_PER_ELEMENT / split
    if par.strategy in ("fsdp", "zero3") and par.shard_group > 1 and m.num_layers:
        layer_params = p.blocks / float(m.num_layers) / par.tensor_parallel
        temporary += cv.FSDP_GATHERED_LAYERS * layer_params * 2.0  # gathered in 16-bit
    elif par.shard_group > 1:
        temporary += cv.DDP_BUCKETS_IN_FLIGHT * cv.DDP_BUCKET_BYTES
    return kept, temporary
