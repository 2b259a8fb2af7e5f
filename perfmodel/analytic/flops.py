"""FLOPs per step by the pinned convention (see conventions.py)."""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.analytic.conventions import ATTENTION_FLOPS_COEFF, PARAM_FLOPS_FORWARD
from perfmodel.analytic.params import ParamCounts, count_params
from perfmodel.workload import Workload


@dataclass(frozen=True, kw_only=True)
class StepFlops:
    """FLOPs of one optimizer step (all GPUs together unless named per_gpu)."""

    model_flops_per_token: float
    """The MFU numerator per token: 6N + 12Lds for full training (PaLM), fewer for frozen
    weights (no weight gradients), never counting recomputation."""
    hardware_flops_per_token: float
    """FLOPs actually executed per token: recomputation and frozen weights taken into account."""
    tokens_per_step: float
    """Tokens (or samples for non-token models) per optimizer step over all GPUs."""
    model_flops_per_step: float
    hardware_flops_per_step: float
    hardware_flops_per_gpu: float
    """Hardware FLOPs one GPU executes per step."""
    forward_share: float
    """Forward FLOPs / hardware FLOPs (how much of the step can overlap gradient communication)."""


def samples_per_step(w: Workload) -> float:
    """Samples per optimizer step over all data-parallel replicas."""
    return float(w.training.micro_batch_size * w.training.grad_accum_steps * w.parallel.data_parallel)


def tokens_per_sample(w: Workload) -> float:
    return float(w.training.seq_len) if w.model.is_transformer else 1.0


def compute_step_flops(w: Workload, params: ParamCounts | None = None) -> StepFlops:
    p = params or count_params(w.model, w.training)
    t = w.training
    tokens = samples_per_step(w) * tokens_per_sample(w)
    if w.model.is_transformer:
        n = p.matmul_active
        attn_fwd = (
            (ATTENTION_FLOPS_COEFF / 3) * float(w.model.num_layers or 0) * w.model.attention_width * t.seq_len
        )
    else:
        n = float(w.model.forward_gflops_per_sample or 0.0) * 1e9 / PARAM_FLOPS_FORWARD
        attn_fwd = 0.0
    forward = PARAM_FLOPS_FORWARD * n + attn_fwd
    frozen_share = 1.0 - (p.trainable / p.total if p.total else 1.0)
    if t.lora_r:
        frozen_share = 1.0
    fully_frozen = (t.trainable_fraction == 0) and not t.lora_r
    if fully_frozen:
        backward = 0.0  # nothing needs gradients: forward only (under no_grad)
    else:
        # input-gradient matmuls always; weight-gradient matmuls only for trainable weights
        weight_grad = PARAM_FLOPS_FORWARD * n * (1.0 - frozen_share)
        backward = PARAM_FLOPS_FORWARD * n + weight_grad + 2 * attn_fwd
    recompute = forward if (t.activation_checkpointing and not fully_frozen) else 0.0
    hardware_per_token = forward + backward + recompute
    # MFU numerator: the FLOPs the training algorithm needs, i.e. without recomputation; frozen
    # weights need no weight-gradient matmuls (4N for LoRA), so their MFU is not inflated by a
    # 6N the hardware never executes.
    model_per_token = forward + backward
    hardware_step = hardware_per_token * tokens
    return StepFlops(
        model_flops_per_token=model_per_token,
        hardware_flops_per_token=hardware_per_token,
        tokens_per_step=tokens,
        model_flops_per_step=model_per_token * tokens,
        hardware_flops_per_step=hardware_step,
        hardware_flops_per_gpu=hardware_step / w.parallel.num_gpus,
        forward_share=(forward + recompute) / hardware_per_token if hardware_per_token else 1.0,
    )
