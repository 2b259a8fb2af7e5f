"""`perfmodel monitor` as library functions: the ETA of a run from its files, once or following it.

    report = monitor_path("out/")                        # -> MonitorReport (trace + snapshot)
    for report in follow_path("out/", interval_s=10):    # re-read as the run goes
        ...

A file's progress intervals are replayed through the same `RunMonitor` the callbacks drive (a
fake clock at the recorded times), so warm-up, stable phase, ETA and hints follow the same rules.
Files that hold no times (Ludwig's training_progress.json) are timed by `follow_path` from the
moments their step count changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from perfmodel.monitor.core import EtaSnapshot, RunMonitor
from perfmodel.monitor.eta import StepTimePrior
from perfmodel.monitor.intervals import Intervals
from perfmodel.monitor.prior import PriorInfo, resolve_prior
from perfmodel.monitor.readers import RunTrace, read_trace


@dataclass(frozen=True, kw_only=True)
class MonitorReport:
    """What `perfmodel monitor` shows."""

    trace: RunTrace
    """The run as read."""
    snapshot: EtaSnapshot
    """Its ETA, stable phase, utilisation and hints."""
    notes: list[str] = field(default_factory=list)
    """Caveats of the reading and the prior."""
    seconds_since_update: float | None = None
    """Time since the progress file last changed (a stalled run shows here)."""
    extrapolated: bool = False
    """The run ended before the step count asked for (`total_steps`): the snapshot's remaining and
    total times extrapolate its measured steps to that count instead of calling it finished."""

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.trace.path,
            "format": self.trace.format,
            "global_step": self.trace.steps_done,
            **self.snapshot.to_dict(),
            "extrapolated": self.extrapolated,
            "seconds_since_update": self.seconds_since_update,
            "notes": list(self.notes),
        }


def _prior(
    trace: RunTrace,
    config: str | Path | Mapping[str, Any] | None,
    overrides: Sequence[str],
    model_dir: str | Path | None,
    confidence: float,
) -> PriorInfo:
    if config is not None:
        return resolve_prior(config=config, overrides=overrides, model_dir=model_dir, confidence=confidence)
    p = (trace.prediction or {}).get("step_time_s")
    if p:
        level = float((trace.prediction or {}).get("confidence_level", 0.9))
        prior = StepTimePrior(estimate_s=p["estimate"], low_s=p["low"], high_s=p["high"], confidence=level)
        return PriorInfo(prior=prior)
    if trace.config:
        return resolve_prior(
            config=trace.config, overrides=overrides, model_dir=model_dir, confidence=confidence
        )
    return PriorInfo(prior=None, notes=["no --config given: the ETA uses observed steps only"])


def extrapolates(trace: RunTrace, total_steps: int | None) -> bool:
    """Whether a run's files describe a run that ended (a partial run: a validation on a fraction,
    a `max_steps` cap) before `total_steps`, the step count asked for: its measured steps are then
    extrapolated to that count rather than reported as finished."""
    return trace.finished and total_steps is not None and total_steps > trace.steps_done


def replay(
    trace: RunTrace, info: PriorInfo, *, total_steps: int | None = None, confidence: float = 0.9
) -> EtaSnapshot:
    """The monitor core's snapshot after the trace's intervals (at the time of the last one). A
    finished trace given a larger `total_steps` (`extrapolates`) is not finished: the snapshot's
    remaining time is the rest of that count at the stable phase's pace, with its interval."""
    monitor = RunMonitor(
        total_steps=total_steps or trace.total_steps or info.total_steps,
        prior=info.prior,
        confidence=confidence,
        clock=lambda: monitor.last_update_at,
    )
    monitor.start(step=trace.start_step, now=0.0)
    monitor.extend(trace.intervals)  # as update() one by one, in one linear pass
    if len(trace.intervals):  # steps of rows without a usable time were done too
        monitor.step = max(monitor.step, trace.steps_done)
    monitor.samples = list(trace.samples)
    end = monitor.last_update_at
    finished = trace.finished and not extrapolates(trace, total_steps)
    return monitor.finish(now=end) if finished else monitor.snapshot(now=end)


def monitor_path(
    path: str | Path,
    *,
    config: str | Path | Mapping[str, Any] | None = None,
    overrides: Sequence[str] = (),
    total_steps: int | None = None,
    confidence: float = 0.9,
    model_dir: str | Path | None = None,
    trace: RunTrace | None = None,
    now: float | None = None,
) -> MonitorReport:
    """Read the run at `path` (or use `trace`) and compute its ETA."""
    trace = trace or read_trace(path)
    info = _prior(trace, config, overrides, model_dir, confidence)
    snap = replay(trace, info, total_steps=total_steps, confidence=confidence)
    extrapolated = extrapolates(trace, total_steps)
    since = (
        None
        if trace.updated_at is None or trace.finished
        else max((now or time.time()) - trace.updated_at, 0.0)
    )
    notes = [*trace.notes, *info.notes]
    if extrapolated:
        notes.append(
            f"the run ended at step {trace.steps_done}: the other {int(total_steps or 0) - trace.steps_done:,} "
            f"of {total_steps:,} steps are extrapolated from its stable phase"
        )
    return MonitorReport(
        trace=trace,
        snapshot=snap,
        notes=notes,
        seconds_since_update=since,
        extrapolated=extrapolated,
    )


def follow_path(
    path: str | Path,
    *,
    interval_s: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
    max_reads: int | None = None,
    **kwargs: Any,
) -> Iterator[MonitorReport]:
    """Yield a report whenever the run's progress changes, until it finishes (or `max_reads`).
    Formats without times are timed by the moments their step count was seen to change."""
    seen: list[tuple[int, float]] = []
    last: tuple[int, int] | None = None
    reads = 0
    while max_reads is None or reads < max_reads:
        reads += 1
        trace = read_trace(path)
        if not trace.intervals and trace.updated_at is not None:
            if not seen or trace.steps_done > seen[-1][0]:
                seen.append((trace.steps_done, trace.updated_at))
            points = list(seen)
            intervals = Intervals.of(
                (s1 - s0, t1 - t0) for (s0, t0), (s1, t1) in zip(points[:-1], points[1:], strict=True)
            )
            trace = replace(
                trace,
                intervals=intervals,
                start_step=points[0][0],
                notes=[*trace.notes, "timed by this command from when the step count changed"],
            )
        key = (trace.steps_done, len(trace.intervals))
        if key != last:
            last = key
            yield monitor_path(path, trace=trace, **kwargs)
        if trace.finished:
            return
        sleep(interval_s)
