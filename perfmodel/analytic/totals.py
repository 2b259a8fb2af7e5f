"""From step time to steps, total time and GPU-hours.

Framework `ludwig` (a Ludwig config) differs in three measured ways (docs/ludwig.md): steps are
Ludwig's, batches counted per epoch (epochs x ceil(training rows / batch)); start-up is the sum of
Ludwig's measured terms with their spread (`startup_s`), not STARTUP_FIXED_S; and the run may end
sooner (early stopping) or take many more batches (`batch_size: auto`, when Ludwig's tuner stops at
a small batch), which the total-time interval covers (`total_time_interval_s`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

from perfmodel.analytic import conventions as cv
from perfmodel.analytic import estimate
from perfmodel.analytic.conventions import STARTUP_FIXED_S, STORAGE_BANDWIDTH_GB_PER_S
from perfmodel.analytic.roofline import AnalyticEstimate
from perfmodel.errors import ConfigError
from perfmodel.workload import Workload

BATCH_TUNED_AT_RUN_TIME = "tuned at run time by Ludwig's batch-size tuner"
"""Phrase of the assumption a Ludwig translation states for `batch_size: auto` (perfmodel.config.
ludwig_trainer): while it stands (no batch size given), the interval covers the tuner stopping at 1."""
EARLY_STOP_PHRASE = "the earliest early stop is after"
"""Phrase of the assumption a Ludwig translation states when early stopping is on, followed by
'<epochs> epochs': the interval's low end stops there."""
_EARLY_STOP_RE = re.compile(re.escape(EARLY_STOP_PHRASE) + r" ([0-9.]+) epochs")


@dataclass(frozen=True, kw_only=True)
class Startup:
    """Time before the first step and after the last one (s), with its interval."""

    estimate_s: float
    low_s: float
    high_s: float
    terms: tuple[tuple[str, float], ...] = ()
    """(term, seconds) of the estimate."""
    source: str = ""
    """Where the terms come from."""


def _ludwig_assumption(w: Workload, phrase: str) -> str | None:
    return next((a for a in w.assumptions if phrase in a), None)


def startup_s(w: Workload, params_total: float | None = None) -> Startup:
    """Start-up (imports, model construction and weight loading, preprocessing, tuning) and
    wind-down of one run. Framework `ludwig`: Ludwig 0.17's measured terms (conventions.
    LUDWIG_STARTUP_S, LUDWIG_PREPROCESS_S; measured on a 2-core CPU host, assumed alike elsewhere,
    plus an assumed GPU initialisation term on GPU hosts);
    every other framework: STARTUP_FIXED_S (an assumption) + loading the weights (`params_total`,
    default the model's own count, 16-bit, at STORAGE_BANDWIDTH_GB_PER_S)."""
    load = params_total if params_total is not None else (w.model.params_total or 0)
    weights_s = float(load) * 2 / (STORAGE_BANDWIDTH_GB_PER_S * 1e9)
    if w.framework != "ludwig":
        return Startup(
            estimate_s=STARTUP_FIXED_S + weights_s,
            low_s=STARTUP_FIXED_S + weights_s,
            high_s=STARTUP_FIXED_S + weights_s,
            source="assumed (conventions.STARTUP_FIXED_S)",
        )
    llm = w.model.arch == "decoder"
    terms = cv.LUDWIG_STARTUP_S
    names = ["import", "ctor_llm" if llm else "ctor_ecd", "build_llm" if llm else "build_ecd"]
    if not llm:
        names.append("eval_batch_tuning_ecd")
    if _ludwig_assumption(w, BATCH_TUNED_AT_RUN_TIME):
        names.append("train_batch_tuning")
    if w.gpu.vendor != "cpu":
        names.append("gpu_init")  # assumed, not measured
    names += ["to_first_step_other", "after_last_step"]
    parts = [(n, *terms[n]) for n in names]
    rows = (w.training.samples or 0) / 0.7 / 1000.0  # dataset rows (thousands) before Ludwig's 0.7 split
    pre = cv.LUDWIG_PREPROCESS_S
    if llm:
        fixed, per_k = pre["llm"]
        parts.append(("preprocess", fixed + per_k * rows, fixed + per_k * rows, fixed + per_k * rows))
    else:  # the feature kinds are not in the workload: tabular and lazy images to text
        low = min(f + k * rows for f, k in (pre["tabular"], pre["image"]))
        high = pre["text"][0] + pre["text"][1] * rows
        parts.append(("preprocess", (low + high) / 2, low, high))
    parts.append(("load weights", weights_s, weights_s, weights_s))
    return Startup(
        estimate_s=sum(p[1] for p in parts),
        low_s=sum(p[2] for p in parts),
        high_s=sum(p[3] for p in parts),
        terms=tuple((p[0], p[1]) for p in parts),
        source="Ludwig 0.17.10 measured on a 2-core CPU (conventions.LUDWIG_STARTUP_S)",
    )


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
    startup_low_s: float | None = None
    """Low end of the start-up's interval (None: startup_s)."""
    startup_high_s: float | None = None
    """High end of the start-up's interval (None: startup_s)."""
    total_steps_low: int | None = None
    """The fewest steps the run may take (early stopping); None: total_steps."""
    total_high_alt_s: float = 0.0
    """A slower outcome the total's interval covers (s): Ludwig's tuner choosing batch size 1."""
    batches_per_optimizer_step: int = 1
    """Steps here are batches when > 1 (Ludwig counts batches): an optimizer step is this many
    steps, and a step's time is the optimizer step's over this (grad_accum_steps)."""


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
        batches = t.grad_accum_steps if w.framework == "ludwig" else 1  # Ludwig counts batches
        steps = math.ceil(t.tokens * batches / tps)
    elif (
        t.samples is not None and w.framework == "ludwig"
    ):  # batches, rounded up per epoch (Ludwig's batcher)
        epochs = t.epochs if t.epochs is not None else 1.0
        steps = max(1, round(epochs * math.ceil(t.samples * t.grad_accum_steps / sps)))
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
    low, high, steps_low, alt, per = startup, startup, steps, 0.0, 1
    if w.framework == "ludwig" and est.fixed_steps is None:
        start = startup_s(w, params.total)
        startup, low, high = start.estimate_s, start.low_s, start.high_s
        per = t.grad_accum_steps  # Ludwig's steps (and train_steps) are batches, so are these
        sps, tps = sps / per, (tps / per if tps else tps)
        steps_low, alt = _ludwig_range(w, steps, sps, high)
        line = (
            f"steps are Ludwig's: batches of {t.micro_batch_size:,} samples (forward + backward), {steps:,} in all; "
            f"step_time_s is one batch"
        )
        if per > 1:
            line += (
                f"; the optimizer steps every {per} batches (about {math.ceil(steps / per):,} optimizer steps: Ludwig "
                f"restarts the count each epoch and also steps at each checkpoint)"
            )
        notes.append(line)
    return RunPlan(
        total_steps=steps,
        tokens_per_step=tps,
        samples_per_step=sps,
        startup_s=startup,
        checkpoint_s=checkpoint_once * num_checkpoints,
        num_checkpoints=num_checkpoints,
        eval_fraction=t.eval_fraction,
        notes=tuple(notes),
        startup_low_s=low,
        startup_high_s=high,
        total_steps_low=steps_low,
        total_high_alt_s=alt,
        batches_per_optimizer_step=per,
    )


def _ludwig_range(w: Workload, steps: int, sps: float, startup_high: float) -> tuple[int, float]:
    """(fewest steps: early stopping, slowest other outcome in s: the tuner stopping at batch 1)."""
    t = w.training
    steps_low, alt = steps, 0.0
    early = _ludwig_assumption(w, EARLY_STOP_PHRASE)
    match = _EARLY_STOP_RE.search(early) if early else None
    if match and t.samples is not None and t.steps is None:  # sps: samples per batch
        steps_low = min(steps, max(1, math.ceil(float(match.group(1)) * math.ceil(t.samples / sps))))
    if (
        _ludwig_assumption(w, BATCH_TUNED_AT_RUN_TIME)
        and t.samples is not None
        and t.steps is None
        and t.micro_batch_size > 1
    ):
        one = dataclasses.replace(w, training=dataclasses.replace(t, micro_batch_size=1, grad_accum_steps=1))
        epochs = t.epochs if t.epochs is not None else 1.0
        steps_one = max(1, round(epochs * math.ceil(t.samples)))
        alt = steps_one * estimate(one).t_bound_s * (1.0 + t.eval_fraction) + startup_high
    return steps_low, alt


def total_time_s(plan: RunPlan, step_time_s: float) -> float:
    """steps * step_time * (1 + eval) + checkpointing + start-up. Per-step errors are systematic,
    so callers pass the interval's low and high step time through this same function."""
    return plan.total_steps * step_time_s * (1.0 + plan.eval_fraction) + plan.checkpoint_s + plan.startup_s


def total_time_interval_s(
    plan: RunPlan, step_low_s: float, step_s: float, step_high_s: float
) -> tuple[float, float, float]:
    """(low, estimate, high) of the total time: the step-time interval through `total_time_s`, with
    the start-up's own interval, the fewest steps (early stopping) at the low end and any slower
    outcome (plan.total_high_alt_s) at the high end. Without those, exactly total_time_s of each."""
    low_start = plan.startup_s if plan.startup_low_s is None else plan.startup_low_s
    high_start = plan.startup_s if plan.startup_high_s is None else plan.startup_high_s
    steps_low = plan.total_steps if plan.total_steps_low is None else plan.total_steps_low
    low = steps_low * step_low_s * (1.0 + plan.eval_fraction) + plan.checkpoint_s + low_start
    high = plan.total_steps * step_high_s * (1.0 + plan.eval_fraction) + plan.checkpoint_s + high_start
    return low, total_time_s(plan, step_s), max(high, plan.total_high_alt_s)
