"""Device-memory bytes moved per step per GPU (the memory side of the roofline)."""

from __future__ import annotations

from perfmodel.analytic import conventions as cv
from perfmodel.analytic.memory import weight_bytes_per_param
from perfmodel.analytic.params import ParamCounts, count_params
from perfmodel.workload import Workload


def bytes_per_step_per_gpu(w: Workload, params: ParamCounts | None = None) -> float:
    """A lower bound on HBM traffic of one optimizer step on one GPU.

    Weights are read once in forward, once in backward and once more when recomputing;
    every kept activation is written once and read once; each micro-batch repeats this.
    The optimizer reads and writes weights, gradients and states once per step.
    """
    p = params or count_params(w.model, w.training)
    t, par = w.training, w.parallel
    split = par.model_split
    passes = 2 + (1 if t.activation_checkpointing else 0)
    if t.trainable_fraction == 0 and not t.lora_r:
        passes = 1
    weight_traffic = p.total * weight_bytes_per_param(w) * passes / split
    b = float(t.micro_batch_size)
    act_scale = cv.ACTIVATION_BYTES[t.precision] / 2.0
    if w.model.is_transformer:
        per_layer = (
            cv.ACTIVATION_BYTES_PER_LAYER_COEFF * float(t.seq_len) * b * float(w.model.hidden_size or 0)
        )
        acts = (
            per_layer
            * act_scale
            * float(w.model.num_layers or 0)
            / (par.activation_split * par.pipeline_parallel)
        )
    else:
        acts = float(w.model.activation_mb_per_sample or 0.0) * 1e6 * b * act_scale
    act_traffic = 2 * acts * (cv.CHECKPOINT_ACTIVATION_TRAFFIC_FACTOR if t.activation_checkpointing else 1.0)
    micro = (weight_traffic + act_traffic) * t.grad_accum_steps
    states = cv.OPTIMIZER_STATES.get(t.optimizer, 2)
    per_trainable = 4 + float(cv.GRAD_BYTES[t.precision]) + states * cv.optimizer_state_bytes(t.precision)
    optimizer = 2 * p.trainable * per_trainable / split
    if par.strategy in ("zero1", "zero2", "zero3", "fsdp"):
        optimizer /= par.shard_group
    return micro + optimizer
