"""Communication per step: data-parallel gradient/parameter collectives, tensor-parallel
activation all-reduces and pipeline point-to-point sends, and the time they take."""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.analytic import conventions as cv
from perfmodel.analytic.params import ParamCounts, count_params
from perfmodel.workload import Workload


@dataclass(frozen=True, kw_only=True)
class CommCost:
    """Bytes each GPU sends per optimizer step, and the time at the link bandwidth."""

    dp_bytes: float
    """Data-parallel collectives (ring all-reduce / reduce-scatter / all-gather) per GPU."""
    tp_bytes: float
    """Tensor-parallel activation all-reduces per GPU."""
    pp_bytes: float
    """Pipeline activation sends per GPU."""
    dp_time_s: float
    tp_time_s: float
    pp_time_s: float
    dp_overlappable: bool
    """Data-parallel traffic can overlap the backward pass (DDP buckets, ZeRO prefetch)."""

    @property
    def total_bytes(self) -> float:
        return self.dp_bytes + self.tp_bytes + self.pp_bytes


def _ring(n: int) -> float:
    """Bytes sent per GPU per byte of buffer in a ring all-gather or reduce-scatter."""
    return (n - 1) / n if n > 1 else 0.0


def _bandwidth_gb_per_s(w: Workload, group_size: int, inner_stride: int) -> float:
    """Per-GPU bandwidth of a collective over `group_size` ranks whose members are
    `inner_stride` ranks apart: intra-node if the whole group fits in one node."""
    gpu = w.gpu
    span = group_size * inner_stride
    if w.parallel.num_nodes == 1 or span <= w.parallel.gpus_per_node:
        return gpu.intra_node_bandwidth_gb_per_s or 16.0
    return gpu.inter_node_bandwidth_gb_per_s or 12.5


def estimate_comm(w: Workload, params: ParamCounts | None = None) -> CommCost:
    p = params or count_params(w.model, w.training)
    t, par = w.training, w.parallel
    split = par.tensor_parallel * par.pipeline_parallel
    dp = par.data_parallel
    grad_bytes = float(cv.GRAD_BYTES[t.precision])
    if t.lora_r:
        grad_bytes = 4.0
    shard_params = p.trainable / split
    if par.strategy in ("fsdp", "zero3"):
        # all-gather weights in forward and backward for every micro-batch, reduce-scatter grads
        gather = 2 * (p.total / split) * 2.0 * _ring(dp) * t.grad_accum_steps
        dp_bytes = gather + shard_params * grad_bytes * _ring(dp) * t.grad_accum_steps
    elif par.strategy in ("zero1", "zero2"):
        dp_bytes = shard_params * grad_bytes * _ring(dp) + shard_params * 2.0 * _ring(dp)
    else:  # ddp all-reduce = reduce-scatter + all-gather
        dp_bytes = 2 * shard_params * grad_bytes * _ring(dp)
    tp_bytes = 0.0
    pp_bytes = 0.0
    if w.model.is_transformer:
        act = float(t.seq_len) * t.micro_batch_size * float(w.model.hidden_size or 0) * 2.0
        layers = float(w.model.num_layers or 0) / par.pipeline_parallel
        if par.tensor_parallel > 1:
            # Megatron: 2 all-reduces in forward + 2 in backward per layer (Narayanan et al. 2021)
            tp_bytes = 4 * layers * 2 * act * _ring(par.tensor_parallel) * t.grad_accum_steps
        if par.pipeline_parallel > 1:
            pp_bytes = 2 * act * t.grad_accum_steps
    dp_bw = _bandwidth_gb_per_s(w, dp, split)
    tp_bw = _bandwidth_gb_per_s(w, par.tensor_parallel, 1)
    pp_bw = _bandwidth_gb_per_s(w, par.pipeline_parallel, par.tensor_parallel * dp)
    return CommCost(
        dp_bytes=dp_bytes,
        tp_bytes=tp_bytes,
        pp_bytes=pp_bytes,
        dp_time_s=dp_bytes / (dp_bw * 1e9),
        tp_time_s=tp_bytes / (tp_bw * 1e9),
        pp_time_s=pp_bytes / (pp_bw * 1e9),
        dp_overlappable=True,
    )
