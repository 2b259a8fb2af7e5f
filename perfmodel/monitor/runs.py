"""Measured runs side by side (`perfmodel runs A B [C...]`): the measured twin of `compare`.

    summaries = summarize_runs(["out-a/", "out-b/trainer_state.json", "steps.csv"])
    plot_runs(summaries, "runs.png")

Each run is read by the monitor's readers (run records, trainer_state.json, Ludwig outputs,
CSV/JSONL of step times) and summarised by the monitor's rules (`perfmodel.monitor.eta`):
warm-up excluded, then the steps after it (every stable phase, level shifts counted): median,
mean, p10-p90, CV, throughput, peak memory where the files record it, and the total timed time.

Against the first run, each other run's mean step time (time per sample when the two runs' steps
hold different numbers of samples) is a ratio with an interval: in log space,
the difference of the two stable means with the variance of each from `eta.observed_term` (the
Student-t interval of a mean of n_eff autocorrelation-corrected intervals, plus the monitor's level
drift); "faster" or "slower" only when that interval excludes 1, else "within the noise".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perfmodel.decide.plot import figure_classes
from perfmodel.errors import ConfigError, DataError
from perfmodel.monitor import eta
from perfmodel.monitor.core import StepStats
from perfmodel.monitor.intervals import Intervals
from perfmodel.monitor.readers import RunTrace, read_trace

MAX_PLOT_POINTS = 5000
"""Points drawn per run (a longer run is drawn as the means of equal blocks of intervals)."""


@dataclass(frozen=True, kw_only=True)
class RunRatio:
    """A run's mean stable step time over the first run's, with its interval."""

    estimate: float
    low: float
    high: float
    verdict: str
    """faster | slower | within the noise (the interval contains 1)."""
    per: str = "step"
    """What is timed: "step", or "sample" when the two runs' steps hold different numbers of samples."""

    def to_json(self) -> dict[str, Any]:
        return {
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "verdict": self.verdict,
            "per": self.per,
        }


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """One measured run, summarised."""

    label: str
    """What the user gave (the path)."""
    trace: RunTrace
    """The run as read."""
    warmup_steps: int
    """Leading steps excluded as warm-up."""
    warmup_s: float
    """Seconds they took."""
    stable: StepStats | None
    """Step times after warm-up (all phases; None below 2 intervals)."""
    level_shifts: int
    """Level shifts found after warm-up (the monitor's rule)."""
    timed_steps: int
    """Steps with a time."""
    total_s: float
    """Seconds of the timed steps (warm-up included)."""
    samples_per_step: int | None = None
    """Samples per optimizer step (micro-batch x accumulation x GPUs), when the run's config says."""
    tokens_per_step: int | None = None
    """Tokens per optimizer step, when the config also gives a sequence length."""
    ratio: RunRatio | None = None
    """Mean stable step time over the first run's (None for the first run)."""
    notes: list[str] = field(default_factory=list)

    @property
    def steps_per_s(self) -> float | None:
        return None if self.stable is None or self.stable.mean_s <= 0 else 1.0 / self.stable.mean_s

    def to_json(self) -> dict[str, Any]:
        st = self.stable
        per_s = self.steps_per_s
        return {
            "label": self.label,
            "path": self.trace.path,
            "format": self.trace.format,
            "global_step": self.trace.steps_done,
            "finished": self.trace.finished,
            "timed_steps": self.timed_steps,
            "warmup_steps": self.warmup_steps,
            "warmup_s": self.warmup_s,
            "stable_step_time_s": None
            if st is None
            else {
                "intervals": st.intervals,
                "median": st.median_s,
                "mean": st.mean_s,
                "p10": st.p10_s,
                "p90": st.p90_s,
                "cv": st.cv,
            },
            "level_shifts": self.level_shifts,
            "steps_per_s": per_s,
            "samples_per_s": None
            if per_s is None or self.samples_per_step is None
            else per_s * self.samples_per_step,
            "tokens_per_s": None
            if per_s is None or self.tokens_per_step is None
            else per_s * self.tokens_per_step,
            "peak_memory_gb": self.trace.peak_memory_gb,
            "peak_memory_kind": self.trace.peak_memory_kind,
            "total_time_s": self.total_s,
            "ratio_to_first": None if self.ratio is None else self.ratio.to_json(),
            "notes": list(self.notes),
        }


def _batch(config: dict[str, Any] | None) -> tuple[int | None, int | None]:
    """(samples, tokens) per optimizer step from a native config, when it says."""
    if not isinstance(config, dict):
        return None, None
    training = config.get("training") or {}
    hardware = config.get("hardware") or {}
    try:
        samples = int(training["micro_batch_size"]) * int(training.get("grad_accum_steps") or 1)
        samples *= int(hardware.get("num_gpus") or 1)
    except (KeyError, TypeError, ValueError):
        return None, None
    seq = training.get("seq_len")
    try:
        return samples, None if seq is None else samples * int(seq)
    except (TypeError, ValueError):
        return samples, None


def _phases(intervals: Intervals) -> tuple[int, int]:
    """(warm-up intervals, level shifts after it), by the monitor's rules."""
    warm = eta.warmup_intervals(intervals)
    events: list[tuple[int, int]] = []
    eta.scan_level_shifts(intervals.per_step(), warm, warm + 2 * eta.SHIFT_WINDOW, events)
    return warm, len(events)


def summarize_trace(trace: RunTrace, label: str | None = None) -> RunSummary:
    """The summary of one run as read."""
    iv = trace.intervals
    warm, shifts = _phases(iv)
    stable = iv[warm:]
    notes = list(trace.notes)
    if len(iv) == 1:
        notes.append("one timed interval: no warm-up exclusion or spread")
    samples, tokens = _batch(trace.config)
    return RunSummary(
        label=label or trace.path,
        trace=trace,
        warmup_steps=iv[:warm].total_steps(),
        warmup_s=iv[:warm].total_seconds(),
        stable=StepStats.of(stable) if len(stable) >= 1 else None,
        level_shifts=shifts,
        timed_steps=iv.total_steps(),
        total_s=iv.total_seconds(),
        samples_per_step=samples,
        tokens_per_step=tokens,
        notes=notes,
    )


def ratio_of(run: RunSummary, first: RunSummary, confidence: float = 0.9) -> RunRatio | None:
    """`run`'s mean stable step time over `first`'s, with its interval (module doc)."""
    terms = []
    for s in (first, run):
        iv = s.trace.intervals[_phases(s.trace.intervals)[0] :]
        if len(iv) < 2:
            return None
        obs = eta.observed_term(eta.LogMoments.of(iv), confidence)
        terms.append((float(obs.mean_log[0]), float(obs.variance[0])))
    (m0, v0), (m1, v1) = terms
    per = "step"
    if first.samples_per_step and run.samples_per_step and first.samples_per_step != run.samples_per_step:
        per = "sample"  # steps of different sizes: compare the time per sample
        m0 -= math.log(first.samples_per_step)
        m1 -= math.log(run.samples_per_step)
    z = eta.normal_quantile((1 + confidence) / 2)
    half = z * math.sqrt(v0 + v1)
    est, low, high = math.exp(m1 - m0), math.exp(m1 - m0 - half), math.exp(m1 - m0 + half)
    verdict = "slower" if low > 1 else "faster" if high < 1 else "within the noise"
    return RunRatio(estimate=est, low=low, high=high, verdict=verdict, per=per)


def summarize_runs(paths: Sequence[str | Path], *, confidence: float = 0.9) -> list[RunSummary]:
    """Read and summarise each run; runs after the first carry their ratio to it."""
    if len(paths) < 1:
        raise ConfigError("perfmodel runs needs at least one run (two or more to compare)")
    out: list[RunSummary] = []
    for p in paths:
        trace = read_trace(p)
        if not len(trace.intervals):
            raise DataError(f"{p}: no timed steps ({'; '.join(trace.notes) or trace.format})")
        out.append(summarize_trace(trace, label=str(p)))
    first = out[0]
    return [out[0]] + [RunSummary(**{**s.__dict__, "ratio": ratio_of(s, first, confidence)}) for s in out[1:]]


def step_series(summary: RunSummary) -> tuple[np.ndarray, np.ndarray]:
    """(global step at the end of each interval, its mean step time in s), at most MAX_PLOT_POINTS
    points (block means beyond)."""
    iv = summary.trace.intervals
    steps = summary.trace.start_step + np.cumsum(iv.steps, dtype=np.int64)
    per = iv.per_step()
    if len(per) > MAX_PLOT_POINTS:
        k = math.ceil(len(per) / MAX_PLOT_POINTS)
        n = len(per) // k * k
        seconds = iv.seconds[:n].reshape(-1, k).sum(axis=1)
        counts = iv.steps[:n].reshape(-1, k).sum(axis=1)
        return steps[k - 1 : n : k], seconds / counts
    return steps, per


def plot_runs(summaries: Sequence[RunSummary], path: str | Path) -> Path:
    """Step time against step for each run, warm-up shaded, the stable median dashed; `path` ends
    in .png, .svg or .pdf."""
    path = Path(path)
    Figure, FigureCanvasAgg = figure_classes(path)
    fig = Figure(figsize=(10, 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for i, s in enumerate(summaries):
        color = f"C{i % 10}"
        x, y = step_series(s)
        label = Path(s.label).name or s.label
        (line,) = ax.plot(x, y * 1000, "-", color=color, linewidth=1.0, label=label)
        line.set_gid(f"steps:{i}")
        if s.warmup_steps:
            start = s.trace.start_step
            ax.axvspan(start, start + s.warmup_steps, color=color, alpha=0.12, linewidth=0, gid=f"warmup:{i}")
        if s.stable is not None:
            ax.axhline(
                s.stable.median_s * 1000, color=color, linestyle="--", linewidth=0.8, gid=f"median:{i}"
            )
    ax.set_xlabel("step")
    ax.set_ylabel("step time (ms)")
    ax.set_yscale("log")
    ax.set_title("Measured step times (shaded: warm-up, excluded; dashed: stable median)")
    ax.legend(loc="upper right", fontsize="small")
    fig.savefig(path)
    return path
