"""Device-memory bytes one GPU moves per optimizer step, by kind of kernel.

Four kinds run one after another on the device, so each is its own term of the step time:
  * matmul weights: every matmul reads its weight (forward, backward input-gradient, recompute);
  * elementwise: norms, activations, rotary, residual adds, casts, the loss over the vocabulary,
    eager attention scores - measured per token and layer by the op census (conventions.py);
  * dequantization of 4/8-bit bases before each matmul that uses them;
  * the optimizer step (weights, gradients and states read and written once).
"""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.analytic import conventions as cv
from perfmodel.analytic.memory import weight_bytes_per_param
from perfmodel.analytic.params import ParamCounts, count_params
from perfmodel.workload import Workload


@dataclass(frozen=True, kw_only=True)
class StepTraffic:
    """HBM bytes per optimizer step on one GPU, by kind of kernel (all micro-batches together)."""

    matmul_weight_bytes: float
    """Weights read by the matmuls (in the dtype the matmul runs in)."""
    nonmatmul_bytes: float
    """Elementwise and reduction kernels, loss over the vocabulary, eager attention scores."""
    dequant_bytes: float
    """Reading 4/8-bit bases and writing their 16-bit copies before each use."""
    optimizer_bytes: float
    """The optimizer step."""

    @property
    def total_bytes(self) -> float:
        return self.matmul_weight_bytes + self.nonmatmul_bytes + self.dequant_bytes + self.optimizer_bytes


def precision_group(precision: str) -> str:
    """Which op-census measurement applies: 'half' (16-bit weights), 'fp32' or 'amp'."""
    if precision.startswith("amp"):
        return "amp"
    return "fp32" if precision in ("fp32", "tf32") else "half"


def is_fused(w: Workload) -> bool:
    """Elementwise work fused into few kernels (torch.compile, or a stack that fuses by default)."""
    return w.training.torch_compile or w.framework in cv.FUSED_FRAMEWORKS


def weight_passes(w: Workload) -> int:
    """Times each micro-batch's matmuls read a weight: forward, backward (input gradient),
    and the recomputed forward; forward only when nothing needs gradients."""
    t = w.training
    if t.trainable_fraction == 0 and not t.lora_r:
        return 1
    return 2 + (1 if t.activation_checkpointing else 0)


def matmul_weight_bytes_per_micro_batch(w: Workload, p: ParamCounts) -> float:
    """Matmul weight reads of one micro-batch on one GPU: quantized bases are read as their
    dequantized 16-bit copies; fp32/tf32 matmuls read 4 bytes, all others 2."""
    t = w.training
    width = 4.0 if t.compute_dtype in ("fp32", "tf32") else 2.0
    return p.matmul_active * width * weight_passes(w) / w.parallel.model_split


def dequant_bytes_per_micro_batch(w: Workload, p: ParamCounts) -> float:
    """Dequantization traffic of one micro-batch: the packed weight read and its 16-bit copy
    written, once per pass of every quantized matrix."""
    t = w.training
    if not t.quantization_bits:
        return 0.0
    quantized = p.blocks  # the LM head and embeddings stay in 16-bit (QLoRA)
    per_pass = quantized * (weight_bytes_per_param(w) + cv.DEQUANT_WRITE_BYTES_PER_WEIGHT)
    return per_pass * weight_passes(w) / w.parallel.model_split


def nonmatmul_bytes_per_micro_batch(w: Workload, p: ParamCounts) -> float:
    """Elementwise traffic of one micro-batch on one GPU (see conventions.py for the census)."""
    t, par, m = w.training, w.parallel, w.model
    b = float(t.micro_batch_size)
    group = precision_group(t.precision)
    fused = cv.FUSED_NONMATMUL_FRACTION if is_fused(w) else 1.0
    if not m.is_transformer:
        act_scale = cv.ACTIVATION_BYTES[t.precision] / 2.0
        kept = float(m.activation_mb_per_sample or 0.0) * 1e6 * b * act_scale
        return kept * cv.NON_TRANSFORMER_NONMATMUL_TOUCHES * fused
    tokens = b * float(t.seq_len) / par.activation_split
    d, f = float(m.hidden_size or 0), float(m.ffn_size)
    per_d, per_f = cv.NONMATMUL_BYTES_PER_TOKEN_PER_LAYER[group]
    if t.activation_checkpointing:
        per_d, per_f = per_d * cv.CHECKPOINT_NONMATMUL_FACTOR[0], per_f * cv.CHECKPOINT_NONMATMUL_FACTOR[1]
    per_layer_token = per_d * d + per_f * f
    if t.lora_r:
        per_layer_token += cv.LORA_NONMATMUL_BYTES_PER_TOKEN_PER_MODULE * d * t.lora_target_modules
    layers = float(m.num_layers or 0) / par.pipeline_parallel
    total = per_layer_token * tokens * layers
    if t.attention_kernel == "eager":
        heads = float(m.num_heads or 1) / par.tensor_parallel
        total += cv.EAGER_ATTENTION_BYTES_PER_SCORE * heads * float(t.seq_len) * tokens * layers
    if m.arch in ("decoder", "encoder-decoder") and m.vocab_size and not t.fused_cross_entropy:
        total += (
            cv.LOGITS_BYTES_PER_TOKEN_PER_VOCAB[group] * float(m.vocab_size) * tokens / par.pipeline_parallel
        )
    if group == "amp":
        total += cv.AMP_CAST_BYTES_PER_WEIGHT * p.matmul_active / par.model_split
    return total * fused


def optimizer_bytes_per_step(w: Workload, p: ParamCounts) -> float:
    """One optimizer step's traffic on one GPU (states sharded under ZeRO/FSDP)."""
    t, par = w.training, w.parallel
    states = cv.OPTIMIZER_STATES.get(t.optimizer, 2)
    kind = {2: "adam", 1: "one_state"}.get(states, "sgd")
    half = t.is_half and not t.lora_r  # LoRA adapters train in fp32
    per_param = cv.OPTIMIZER_BYTES_PER_TRAINABLE[f"{kind}_half" if half else kind]
    if t.optimizer == "none":
        return 0.0
    total = p.trainable * per_param / par.model_split
    if par.strategy in ("zero1", "zero2", "zero3", "fsdp"):
        total /= par.shard_group
    return total


def step_traffic(w: Workload, params: ParamCounts | None = None) -> StepTraffic:
    """Every byte one GPU moves in one optimizer step, by kind of kernel."""
    p = params or count_params(w.model, w.training)
    accum = w.training.grad_accum_steps
    return StepTraffic(
        matmul_weight_bytes=matmul_weight_bytes_per_micro_batch(w, p) * accum,
        nonmatmul_bytes=nonmatmul_bytes_per_micro_batch(w, p) * accum,
        dequant_bytes=dequant_bytes_per_micro_batch(w, p) * accum,
        optimizer_bytes=optimizer_bytes_per_step(w, p),
    )


def bytes_per_step_per_gpu(w: Workload, params: ParamCounts | None = None) -> float:
    """All HBM bytes of one optimizer step on one GPU."""
    return step_traffic(w, params).total_bytes
