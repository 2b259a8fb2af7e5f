"""From step time to steps, total time and GPU-hours."""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfmodel.analytic.conventions import STARTUP_FIXED_S, STORAGE_BANDWIDTH_GB_PER_S
from perfmodel.analytic.roofline import AnalyticEstimate
from perfmodel.errors import ConfigError
from perfmodel.workload import Workload


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    """How many steps the job has and what it spends outside the training steps."""

    total_steps: int
    tokens_per_step: float | None
    samples_per_step: float
    startup_s: float
    checkpoint_s: float
    """All checkpoint writes together."""
    num_checkpoints: int
    eval_fraction: float
    notes: tuple[str, ...]


def plan_run(w: Workload, est: AnalyticEstimate) -> RunPlan:
    """Steps from the amount of data (or the workload's own fixed step count), checkpoints and
    start-up, from the workload and its analytic estimate."""
    t = w.training
    params = est.params
    notes: list[str] = []
    sps = est.samples_per_step
    tps = est.tokens_per_step
    if est.fixed_steps is not None:
        steps = est.fixed_steps
    elif t.steps is not None:
        steps = int(t.steps)
    elif t.tokens is not None and tps:
        steps = math.ceil(t.tokens / tps)
    elif t.samples is not None:
        epochs = t.epochs if t.epochs is not None else 1.0
        steps = math.ceil(t.samples * epochs / sps)
    elif t.tokens is not None:
        steps = math.ceil(t.tokens / sps)
        notes.append("tokens given for a non-token model: counted as samples")
    else:
        raise ConfigError("training.tokens (or training.samples, or training.steps) is required")
    state_bytes = params.total * 2 + params.trainable * 12  # 16-bit weights + fp32 master and Adam moments
    checkpoint_once = state_bytes / (STORAGE_BANDWIDTH_GB_PER_S * 1e9)
    num_checkpoints = max(1, int(math.ceil(t.epochs))) if t.epochs and est.fixed_steps is None else 1
    startup = STARTUP_FIXED_S + params.total * 2 / (STORAGE_BANDWIDTH_GB_PER_S * 1e9)
    return RunPlan(
        total_steps=steps,
        tokens_per_step=tps,
        samples_per_step=sps,
        startup_s=startup,
        checkpoint_s=checkpoint_once * num_checkpoints,
        num_checkpoints=num_checkpoints,
        eval_fraction=t.eval_fraction,
        notes=tuple(notes),
    )


def total_time_s(plan: RunPlan, step_time_s: float) -> float:
    """steps * step_time * (1 + eval) + checkpointing + start-up. Per-step errors are systematic,
    so callers pass the interval's low and high step time through this same function."""
    return plan.total_steps * step_time_s * (1.0 + plan.eval_fraction) + plan.checkpoint_s + plan.startup_s
