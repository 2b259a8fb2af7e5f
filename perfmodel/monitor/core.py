"""The one monitor core every adapter (Hugging Face, Ludwig, StepTimer, `perfmodel monitor`) drives.

    monitor = RunMonitor(total_steps=1000, prior=StepTimePrior(...))   # or RunMonitor.from_prediction(pred)
    monitor.start()
    ...                      # after each optimizer step (or each logged step count):
    monitor.update(step)     # -> an EtaSnapshot when a report is due
    monitor.finish()

Time comes from an injectable clock, utilisation from an injectable sampler, and reports go to an
injectable reporter (default: the active MLflow run when there is one, else a line on stderr), so
the whole core runs under a fake clock in tests. The arithmetic is `perfmodel.monitor.eta`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from perfmodel.monitor import eta
from perfmodel.monitor.eta import StepTimePrior
from perfmodel.monitor.utilization import Sampler, UtilSample, UtilStats, bottleneck_hints, summarize
from perfmodel.prediction import Interval

Clock = Callable[[], float]


@dataclass(frozen=True, kw_only=True)
class StepStats:
    """Observed step times of the stable phase (per interval: mean step time of the interval)."""

    intervals: int
    """Intervals in the stable phase."""
    median_s: float
    """Median step time in s."""
    mean_s: float
    """Mean step time in s (total time / steps)."""
    p10_s: float
    """10th percentile in s."""
    p90_s: float
    """90th percentile in s."""
    cv: float
    """Coefficient of variation (standard deviation / mean; 0 with one interval)."""

    @classmethod
    def of(cls, intervals: list[eta.Interval]) -> StepStats | None:
        if not intervals:
            return None
        times = sorted(eta.per_step(intervals))
        mean = sum(s for _, s in intervals) / sum(k for k, _ in intervals)
        cv = statistics.stdev(times) / statistics.fmean(times) if len(times) > 1 else 0.0

        def q(p: float) -> float:  # linear interpolation between order statistics
            x = p * (len(times) - 1)
            lo = int(x)
            hi = min(lo + 1, len(times) - 1)
            return times[lo] + (times[hi] - times[lo]) * (x - lo)

        return cls(intervals=len(times), median_s=q(0.5), mean_s=mean, p10_s=q(0.1), p90_s=q(0.9), cv=cv)


def _iv(values: tuple[float, float, float] | None) -> Interval | None:
    return None if values is None else Interval(estimate=values[0], low=values[1], high=values[2])


@dataclass(frozen=True, kw_only=True)
class EtaSnapshot:
    """Where a run stands: progress, warm-up, stable phase, ETA with its interval, utilisation, hints."""

    steps_done: int
    """Optimizer steps completed."""
    total_steps: int | None
    """Steps the run will take (None when unknown: no ETA then)."""
    elapsed_s: float
    """Time since the monitor started in s."""
    warmup_steps: int
    """Leading steps excluded as warm-up."""
    warmup_s: float
    """Time they took in s."""
    stable_from_step: int
    """First step of the current stable phase (after warm-up and the last level shift)."""
    observed: StepStats | None
    """Step times of the stable phase."""
    predicted_step_time_s: Interval | None
    """The prior (perfmodel's prediction), None without one."""
    step_time_s: Interval | None
    """Blended mean step time for the rest of the run, with its interval."""
    remaining_s: Interval | None
    """Time the remaining steps take in s, with its interval."""
    total_s: Interval | None
    """Elapsed + remaining in s."""
    prior_weight: float | None
    """Share of the prior in the blend (1 = prediction only, 0 = measurement only)."""
    confidence: float
    """Confidence level of the intervals."""
    utilization: UtilStats | None
    """Utilisation over the stable phase."""
    hints: tuple[str, ...] = ()
    """Bottleneck hints with the numbers behind them."""
    finished: bool = False
    """The run has ended."""
    last_step_time_s: float | None = None
    """Mean step time of the latest interval in s."""
    last_sample: UtilSample | None = None
    """The latest utilisation reading."""

    def to_dict(self) -> dict[str, Any]:
        def iv(x: Interval | None) -> dict[str, float] | None:
            return x.as_dict() if x is not None else None

        return {
            "steps_done": self.steps_done,
            "total_steps": self.total_steps,
            "elapsed_s": self.elapsed_s,
            "warmup_steps": self.warmup_steps,
            "warmup_s": self.warmup_s,
            "stable_from_step": self.stable_from_step,
            "observed_step_time_s": None
            if self.observed is None
            else {
                "intervals": self.observed.intervals,
                "median": self.observed.median_s,
                "mean": self.observed.mean_s,
                "p10": self.observed.p10_s,
                "p90": self.observed.p90_s,
                "cv": self.observed.cv,
            },
            "predicted_step_time_s": iv(self.predicted_step_time_s),
            "step_time_s": iv(self.step_time_s),
            "remaining_s": iv(self.remaining_s),
            "total_time_s": iv(self.total_s),
            "prior_weight": self.prior_weight,
            "confidence_level": self.confidence,
            "utilization": None
            if self.utilization is None
            else {
                "samples": self.utilization.samples,
                "cpu_mean_pct": self.utilization.cpu_mean_pct,
                "gpu_mean_pct": self.utilization.gpu_mean_pct,
            },
            "hints": list(self.hints),
            "finished": self.finished,
            "last_step_time_s": self.last_step_time_s,
        }


class Reporter(Protocol):
    def report(self, snapshot: EtaSnapshot, *, final: bool = False) -> None: ...


class RunMonitor:
    """Collects progress reports, keeps warm-up and stable phase, and reports ETA snapshots."""

    def __init__(
        self,
        *,
        total_steps: int | None = None,
        prior: StepTimePrior | None = None,
        confidence: float = 0.9,
        clock: Clock = time.perf_counter,
        sampler: Sampler | None = None,
        sample_every_s: float = 1.0,
        reporter: Reporter | None = None,
        report_every_s: float = 10.0,
    ) -> None:
        if not 0.5 <= confidence < 1:
            raise ValueError(f"confidence must be in [0.5, 1); got {confidence}")
        self.total_steps = total_steps
        self.prior = prior
        self.confidence = confidence
        self.clock = clock
        self.sampler = sampler
        self.sample_every_s = sample_every_s
        self.reporter = reporter
        self.report_every_s = report_every_s
        self.intervals: list[eta.Interval] = []
        self.boundaries: list[float] = []
        """Clock time at the start and at the end of each interval."""
        self.samples: list[UtilSample] = []
        self.start_step = 0
        self.step = 0
        self._phases = _Phases()
        self._last_sample: float | None = None
        self._last_report: float | None = None
        self._finished = False
        self._prior_dropped = False

    @classmethod
    def from_prediction(cls, prediction: Any, **kwargs: Any) -> RunMonitor:
        """A monitor whose prior and step count are a `perfmodel.prediction.PredictedRun`'s."""
        st = prediction.step_time_s
        prior = StepTimePrior(
            estimate_s=st.estimate, low_s=st.low, high_s=st.high, confidence=prediction.confidence_level
        )
        kwargs.setdefault("total_steps", prediction.total_steps)
        kwargs.setdefault("confidence", prediction.confidence_level)
        return cls(prior=prior, **kwargs)

    @property
    def started(self) -> bool:
        return bool(self.boundaries)

    def start(self, step: int = 0, now: float | None = None) -> None:
        """Begin timing at global step `step` (a resumed run starts later than 0)."""
        now = self.clock() if now is None else now
        self.boundaries = [now]
        self.start_step = self.step = step
        self._sample(now, force=True)

    def update(self, step: int | None = None, now: float | None = None) -> EtaSnapshot | None:
        """The run has reached global step `step` (default: one more than before) at `now`.
        Returns a snapshot when a report was due (and sent to the reporter)."""
        now = self.clock() if now is None else now
        if not self.started:
            self.start(step=0 if step is None else max(step - 1, 0), now=now)
        step = self.step + 1 if step is None else int(step)
        if step <= self.step:
            return None  # no progress (a repeated report): nothing to time
        self.intervals.append((step - self.step, now - self.boundaries[-1]))
        self.boundaries.append(now)
        self.step = step
        self._sample(now)
        if self._last_report is None or now - self._last_report >= self.report_every_s:
            self._last_report = now
            snap = self.snapshot(now)
            if self.reporter is not None:
                self.reporter.report(snap)
            return snap
        return None

    def finish(self, now: float | None = None) -> EtaSnapshot:
        """The run has ended: the final snapshot, reported once."""
        now = self.clock() if now is None else now
        self._finished = True
        snap = self.snapshot(now)
        if self.reporter is not None:
            self.reporter.report(snap, final=True)
        return snap

    def _sample(self, now: float, force: bool = False) -> None:
        if self.sampler is None:
            return
        if force or self._last_sample is None or now - self._last_sample >= self.sample_every_s:
            self._last_sample = now
            cpu, gpu = self.sampler.read()
            self.samples.append(UtilSample(t_s=now, cpu_pct=cpu, gpu_pct=gpu))

    def snapshot(self, now: float | None = None) -> EtaSnapshot:
        """Where the run stands now."""
        now = self.clock() if now is None else now
        warm, start = self._phases.warmup(self.intervals), self._phases.start(self.intervals)
        stable = self.intervals[start:]
        observed = StepStats.of(stable)
        done = self.step - self.start_step
        remaining = None if self.total_steps is None else max(self.total_steps - self.step, 0)
        if self._finished:
            remaining = 0
        prior = None if self._prior_dropped else self.prior
        est = eta.estimate_remaining(stable, remaining, prior, self.confidence)
        if est is not None and est.prior_conflict:
            self._prior_dropped = (
                True  # once contradicted, the prediction stays out (also after a level shift)
            )
        elapsed = now - self.boundaries[0] if self.boundaries else 0.0
        rem = (
            _iv(est.remaining_s)
            if est is not None
            else (Interval(estimate=0.0, low=0.0, high=0.0) if remaining == 0 else None)
        )
        total = (
            Interval(estimate=elapsed + rem.estimate, low=elapsed + rem.low, high=elapsed + rem.high)
            if rem
            else None
        )
        util = summarize(self.samples, since_s=self.boundaries[start] if self.boundaries else None)
        p = self.prior
        return EtaSnapshot(
            steps_done=done,
            total_steps=None if self.total_steps is None else self.total_steps - self.start_step,
            elapsed_s=elapsed,
            warmup_steps=sum(k for k, _ in self.intervals[:warm]),
            warmup_s=sum(s for _, s in self.intervals[:warm]),
            stable_from_step=self.start_step + sum(k for k, _ in self.intervals[:start]),
            observed=observed,
            predicted_step_time_s=Interval(estimate=p.estimate_s, low=p.low_s, high=p.high_s) if p else None,
            step_time_s=_iv(est.step_time_s) if est else None,
            remaining_s=rem,
            total_s=total,
            prior_weight=est.prior_weight if est else None,
            confidence=self.confidence,
            utilization=util,
            hints=tuple(self._hints(est, util, observed)),
            finished=self._finished,
            last_step_time_s=self.intervals[-1][1] / self.intervals[-1][0] if self.intervals else None,
            last_sample=self.samples[-1] if self.samples else None,
        )

    def _hints(
        self, est: eta.RemainingEstimate | None, util: UtilStats | None, observed: StepStats | None
    ) -> list[str]:
        hints = bottleneck_hints(util, observed.cv if observed and observed.intervals >= 5 else None)
        if self._prior_dropped and self.prior is not None and observed is not None:
            hints.append(
                f"the measured steps contradict perfmodel's prediction ({self.prior.estimate_s:.3g} s/step predicted, "
                f"{observed.mean_s:.3g} s/step measured): the prediction is left out of the ETA"
            )
        return hints


@dataclass
class _Phases:
    """Warm-up / stable-phase bookkeeping (the rules of `eta`) that remembers what is decided, so
    each interval is scanned for level shifts once."""

    decided_warmup: int | None = None
    stable: int | None = None
    scan_end: int = 0
    _times: list[float] = field(default_factory=list)

    def warmup(self, intervals: list[eta.Interval]) -> int:
        if self.decided_warmup is not None:
            return self.decided_warmup
        k, decided = eta.warmup_decision(intervals)
        if decided:  # later intervals cannot move it
            self.decided_warmup = k
        return k

    def start(self, intervals: list[eta.Interval]) -> int:
        warm = self.warmup(intervals)
        if self.decided_warmup is None:
            return warm
        self._times.extend(eta.per_step(intervals[len(self._times) :]))
        if self.stable is None:
            self.stable, self.scan_end = warm, warm + 2 * eta.SHIFT_WINDOW
        self.stable, self.scan_end = eta.scan_level_shifts(self._times, self.stable, self.scan_end)
        return self.stable
