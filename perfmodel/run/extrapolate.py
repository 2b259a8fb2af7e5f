"""From a measured partial run to the full run: each phase measured, then scaled, with an interval.

Phases (`PhaseTimes`, what `perfmodel.run.validate` measures):
- **start-up**: everything once per run that no other phase holds (interpreter and imports where
  the run is a process of its own, construction, model creation, batch-size tuning, teardown):
  the same in the full run.
- **preprocessing** (Ludwig): measured at two sizes, `a + b x rows` through both points, then
  read at the full row count; its interval propagates each point's host noise through the line.
- **warm-up**: the leading steps the monitor excludes (`eta.warmup_intervals`): once per run.
- **stable steps**: the monitor's remaining-time estimate (`eta.estimate_remaining`, no prior)
  for the full run's steps after warm-up, from the current stable phase (after the last level
  shift, `eta.stable_start`): its mean, Student-t on n_eff steps, step noise, level drift; never
  narrower than the run's level-shift risk (`monitor.shift_risk`, over all steps after warm-up).
- **evaluation** and **checkpoint** passes: the mean measured pass (scaled by the rows it reads
  when the full run's passes read more) times the full run's count of passes; Student-t interval of
  the mean pass when two or more were measured.
The total is the sum; its interval combines the phases' independent uncertainties (variances of
their seconds add) with one host term common to all of them: in log space,
sqrt(host_noise^2 + level-shift risk^2), where `host_noise` (`host_noise_of`: HOST_NOISE, more on
an oversubscribed host whose load has been moving) is how much the same host may run faster or
slower between two runs - which one partial run cannot measure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfmodel.monitor import eta
from perfmodel.monitor.intervals import Intervals
from perfmodel.monitor.shift_risk import level_shift_risk, widen
from perfmodel.prediction import Interval

HOST_NOISE = 0.10
"""Log standard deviation of a host's speed between two runs (10%) at least: an assumption, not
measured by the partial run; docs/run.md reports how the intervals held on this project's shared
CPU host. Pass host_noise=0 on a dedicated machine."""


def host_noise_of(
    load_avg: Sequence[float] | None, cpu_count: int | None, floor: float = HOST_NOISE
) -> float:
    """The host term: `floor`, or more on an oversubscribed host (a load average above the core
    count, where a process's speed follows its CPU share, about cores / load): the standard
    deviation of the logs of the 1-, 5- and 15-minute load averages, i.e. how much the load - and
    with it the speed - moved over the last quarter hour."""
    if not load_avg or not cpu_count or len(load_avg) < 3 or min(load_avg[:3]) <= 0:
        return floor
    if max(load_avg[:3]) <= cpu_count:
        return floor
    return max(floor, float(np.std(np.log(np.asarray(load_avg[:3], dtype=float)), ddof=1)))


@dataclass(frozen=True, kw_only=True)
class PhaseTimes:
    """What a partial run measured."""

    wall_s: float
    """Wall time of the whole partial run in s (what the full run's total is compared with)."""
    intervals: Intervals
    """Training steps: (steps, seconds) each, evaluation and checkpoint time not included."""
    eval_passes_s: Sequence[float] = ()
    """Seconds of each evaluation pass."""
    checkpoint_passes_s: Sequence[float] = ()
    """Seconds of each checkpoint save."""
    preprocess_s: float = 0.0
    """Preprocessing inside the run in s."""
    preprocess_rows: int = 0
    """Rows it read."""
    small_preprocess: tuple[float, int] | None = None
    """(s, rows) of preprocessing alone on a smaller sample (the second point of the line)."""


@dataclass(frozen=True, kw_only=True)
class FullShape:
    """How many of each the full run has."""

    steps: int
    """Optimizer steps (batches, for Ludwig) of the full run."""
    eval_passes: int
    """Evaluation passes."""
    checkpoint_passes: int
    """Checkpoint saves."""
    preprocess_rows: int = 0
    """Rows preprocessing reads."""
    eval_row_ratio: float = 1.0
    """Rows one full evaluation pass reads / rows one measured pass read."""


@dataclass(frozen=True, kw_only=True)
class Phase:
    """One phase: measured, and scaled to the full run."""

    name: str
    measured_s: float
    """Seconds it took in the partial run."""
    measured_count: float
    """Steps, passes or rows measured (1 for start-up)."""
    full_count: float
    """The same count in the full run."""
    full_s: Interval
    """Its seconds in the full run, with the interval."""
    rule: str
    """How it was scaled, in words."""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "measured_s": self.measured_s,
            "measured_count": self.measured_count,
            "full_count": self.full_count,
            "full_s": self.full_s.as_dict(),
            "rule": self.rule,
        }


@dataclass(frozen=True, kw_only=True)
class Extrapolation:
    phases: list[Phase]
    total_s: Interval
    """The full run's wall time, with the interval."""
    confidence: float
    level_shift_risk: float
    """Log standard deviation of the partial run's level (monitor.shift_risk)."""
    host_noise: float
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "phases": [p.to_json() for p in self.phases],
            "total_time_s": self.total_s.as_dict(),
            "confidence_level": self.confidence,
            "level_shift_risk": self.level_shift_risk,
            "host_noise": self.host_noise,
            "notes": list(self.notes),
        }


def _iv(estimate: float, log_sd: float, z: float) -> Interval:
    half = z * log_sd
    return Interval(estimate=estimate, low=estimate * math.exp(-half), high=estimate * math.exp(half))


def _passes(
    name: str, measured: Sequence[float], full: int, row_ratio: float, z: float, conf: float
) -> Phase | None:
    if not measured and not full:
        return None
    if not measured:
        return Phase(
            name=name,
            measured_s=0.0,
            measured_count=0,
            full_count=full,
            full_s=Interval(estimate=0.0, low=0.0, high=0.0),
            rule=f"none measured: {full} in the full run left out",
        )
    x = np.asarray(measured, dtype=float)
    mean = float(x.mean()) * row_ratio
    sd_log = 0.0
    if len(x) >= 2 and (x > 0).all():
        logs = np.log(x)
        sd_log = float(logs.std(ddof=1)) / math.sqrt(len(x)) * eta.t_quantile((1 + conf) / 2, len(x) - 1) / z
    scaled = f" x {row_ratio:.3g} for the rows a full pass reads" if row_ratio != 1 else ""
    return Phase(
        name=name,
        measured_s=float(x.sum()),
        measured_count=len(x),
        full_count=full,
        full_s=_iv(full * mean, sd_log, z),
        rule=f"mean of {len(x)} pass{'es' if len(x) != 1 else ''}{scaled} x {full} passes",
    )


def _preprocessing(t: PhaseTimes, shape: FullShape, noise: float, z: float) -> Phase | None:
    if t.preprocess_s <= 0 or shape.preprocess_rows <= 0:
        return None
    big_s, big_rows = t.preprocess_s, max(t.preprocess_rows, 1)
    full_rows = shape.preprocess_rows
    if t.small_preprocess is None or t.small_preprocess[1] >= big_rows:
        est = big_s * full_rows / big_rows
        return Phase(
            name="preprocessing",
            measured_s=big_s,
            measured_count=big_rows,
            full_count=full_rows,
            full_s=_iv(est, noise, z),
            rule="proportional to rows (one size measured: an upper bound when it has a fixed cost)",
        )
    small_s, small_rows = t.small_preprocess
    slope = max((big_s - small_s) / (big_rows - small_rows), 0.0)
    fixed = max(big_s - slope * big_rows, 0.0)
    est = fixed + slope * full_rows
    # the line through both points, each off by `noise` (relative): the value at full_rows moves by
    w_big = (full_rows - small_rows) / (big_rows - small_rows)
    w_small = w_big - 1.0
    sd = math.hypot(w_big * big_s, w_small * small_s) * noise
    log_sd = sd / est if est > 0 else 0.0
    return Phase(
        name="preprocessing",
        measured_s=big_s,
        measured_count=big_rows,
        full_count=full_rows,
        full_s=_iv(est, log_sd, z),
        rule=f"{fixed:.3g} s fixed + {slope * 1e3:.3g} ms/row (two sizes: {small_rows:,} and {big_rows:,} rows)",
    )


def extrapolate(
    t: PhaseTimes, shape: FullShape, *, confidence: float = 0.9, host_noise: float = HOST_NOISE
) -> Extrapolation:
    """The full run's phases and total (module rules)."""
    if not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must be in [0.5, 1); got {confidence}")
    z = eta.normal_quantile((1 + confidence) / 2)
    iv = Intervals.of(t.intervals)
    warm = eta.warmup_intervals(iv)
    warm_steps, warm_s = iv[:warm].total_steps(), iv[:warm].total_seconds()
    risk = level_shift_risk(iv, warm)
    noise = math.hypot(host_noise, risk)
    notes: list[str] = []
    phases: list[Phase] = []
    pre = _preprocessing(t, shape, noise, z)
    passes = [
        _passes("evaluation", t.eval_passes_s, shape.eval_passes, shape.eval_row_ratio, z, confidence),
        _passes("checkpoints", t.checkpoint_passes_s, shape.checkpoint_passes, 1.0, z, confidence),
    ]
    other = sum(p.measured_s for p in passes if p is not None) + (pre.measured_s if pre else 0.0)
    startup = max(t.wall_s - iv.total_seconds() - other, 0.0)
    phases.append(
        Phase(
            name="start-up",
            measured_s=startup,
            measured_count=1,
            full_count=1,
            full_s=Interval(estimate=startup, low=startup, high=startup),
            rule="once per run: the wall time no other phase holds",
        )
    )
    if pre is not None:
        phases.append(pre)
    phases.append(
        Phase(
            name="warm-up",
            measured_s=warm_s,
            measured_count=warm_steps,
            full_count=warm_steps,
            full_s=Interval(estimate=warm_s, low=warm_s, high=warm_s),
            rule=f"once per run: the first {warm_steps} step{'s' if warm_steps != 1 else ''} (monitor's rule)",
        )
    )
    rest = max(shape.steps - warm_steps, 0)
    start = eta.stable_start(iv, warm)  # the current stable phase, as the monitor's ETA uses it
    stable = iv[start:]
    if start > warm:
        notes.append(
            f"the step time shifted level at step {iv[:start].total_steps()}: the full run's steps are "
            "scaled from the phase after it; the interval keeps the shift's risk"
        )
    est = eta.estimate_remaining(stable, rest, None, confidence) if len(stable) >= 2 else None
    if est is not None and est.remaining_s is not None:
        e, lo, hi = widen(*est.remaining_s, risk, confidence)
        rule = f"{rest:,} steps x stable mean ({len(stable)} measured; monitor's interval)"
    else:
        mean = iv.total_seconds() / max(iv.total_steps(), 1)
        e = lo = hi = rest * mean
        rule = f"{rest:,} steps x mean of all steps (fewer than 2 after warm-up: no interval)"
        notes.append("fewer than 2 timed steps after warm-up: the step phase has no interval")
    phases.append(
        Phase(
            name="stable steps",
            measured_s=iv[warm:].total_seconds(),
            measured_count=iv[warm:].total_steps(),
            full_count=rest,
            full_s=Interval(estimate=e, low=lo, high=hi),
            rule=rule,
        )
    )
    phases += [p for p in passes if p is not None]
    total = sum(p.full_s.estimate for p in phases)
    var = sum(((p.full_s.high - p.full_s.low) / (2 * z)) ** 2 for p in phases)  # seconds^2, independent
    log_sd = math.hypot(math.sqrt(var) / total if total > 0 else 0.0, noise)
    return Extrapolation(
        phases=phases,
        total_s=_iv(total, log_sd, z),
        confidence=confidence,
        level_shift_risk=risk,
        host_noise=host_noise,
        notes=notes,
    )
