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

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from perfmodel.monitor import eta
from perfmodel.monitor.eta import StepTimePrior
from perfmodel.monitor.intervals import Intervals
from perfmodel.monitor.shift_risk import level_shift_risk, widen
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
    def of(cls, intervals: Sequence[eta.Interval]) -> StepStats | None:
        iv = Intervals.of(intervals)
        if not len(iv):
            return None
        times = iv.per_step()
        mean = iv.total_seconds() / iv.total_steps()
        cv = _std(times) / float(np.mean(times)) if len(times) > 1 else 0.0
        # linear interpolation between order statistics; partitions `times` in place
        p10, median, p90 = np.quantile(times, (0.1, 0.5, 0.9), overwrite_input=True).tolist()
        return cls(intervals=len(iv), median_s=median, mean_s=mean, p10_s=p10, p90_s=p90, cv=cv)


def _std(x: np.ndarray, block: int = 1 << 20) -> float:
    """Sample standard deviation, two-pass in blocks (no temporary the size of `x`)."""
    mean = float(np.mean(x))
    ss = 0.0
    for lo in range(0, len(x), block):
        d = x[lo : lo + block] - mean
        ss += float(np.dot(d, d))
    return (ss / (len(x) - 1)) ** 0.5


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
    level_shift_risk: float = 0.0
    """Log standard deviation of the run's level after warm-up (`perfmodel.monitor.shift_risk`):
    the remaining-time interval is never narrower than z times it on either side."""

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
            "level_shift_risk": self.level_shift_risk,
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
        self.intervals = Intervals()
        self._bounds: list[float] | None = None
        """Clock time at the start and at the end of each interval (None after `extend`: then the
        start time plus the intervals' seconds)."""
        self._t0 = self._t_last = 0.0
        self._started = False
        self.samples: list[UtilSample] = []
        self.start_step = 0
        self.step = 0
        self._phases = _Phases()
        self._last_sample: float | None = None
        self._last_report: float | None = None
        self._finished = False
        self._prior_dropped = False
        self.micro_batch: int | None = None
        """The run's micro-batch (for the batch hint), when known."""
        self.largest_micro_batch: int | None = None
        """The largest micro-batch that fits by perfmodel's memory model, when known."""

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
        return self._started

    @property
    def started_at(self) -> float:
        """Clock time at which timing started."""
        return self._t0

    @property
    def last_update_at(self) -> float:
        """Clock time of the latest progress (the start before any)."""
        return self._t_last

    def start(self, step: int = 0, now: float | None = None) -> None:
        """Begin timing at global step `step` (a resumed run starts later than 0)."""
        now = self.clock() if now is None else now
        self._bounds = [now]
        self._started = True
        self._t0 = self._t_last = now
        self.intervals = Intervals()
        self.start_step = self.step = step
        self._sample(now, force=True)

    def _boundary(self, i: int) -> float:
        """Clock time at the start of interval `i` (at the end of the last for i = len)."""
        if self._bounds is not None:
            return self._bounds[i]
        return float(np.add.accumulate(np.concatenate(([self._t0], self.intervals.seconds[:i])))[-1])

    def update(self, step: int | None = None, now: float | None = None) -> EtaSnapshot | None:
        """The run has reached global step `step` (default: one more than before) at `now`.
        Returns a snapshot when a report was due (and sent to the reporter)."""
        now = self.clock() if now is None else now
        if not self.started:
            self.start(step=0 if step is None else max(step - 1, 0), now=now)
        step = self.step + 1 if step is None else int(step)
        if step <= self.step:
            return None  # no progress (a repeated report): nothing to time
        self.intervals.append(step - self.step, now - self._t_last)
        if self._bounds is not None:
            self._bounds.append(now)
        self._t_last = now
        self.step = step
        self._sample(now)
        if self._last_report is None or now - self._last_report >= self.report_every_s:
            self._last_report = now
            snap = self.snapshot(now)
            if self.reporter is not None:
                self.reporter.report(snap)
            return snap
        return None

    def extend(self, intervals: Sequence[eta.Interval]) -> None:
        """Record `intervals` (steps >= 1 each) as `update` would one by one on a clock that
        advances by their seconds, in one pass: the reports that would have been due are not
        built (a monitor with a reporter or a sampler is updated one by one instead), but their
        checks of the prior are made, so the result is the same. Linear in the intervals: what
        `perfmodel monitor` replays a run's files with."""
        iv = Intervals.of(intervals)
        if not self.started:
            self.start()
        if self.reporter is not None or self.sampler is not None or len(self.intervals):
            now = self._t_last
            for k, seconds in iv:
                now += seconds
                self.update(self.step + k, now=now)
            return
        clock = np.empty(len(iv) + 1)  # the fake clock after each interval, summed as update() would
        clock[0], clock[1:] = self._t_last, iv.seconds
        np.add.accumulate(clock, out=clock)
        clock = clock[1:]
        due = _due(clock, self._last_report, self.report_every_s)
        if len(due):
            self._last_report = float(clock[due[-1]])
        self.intervals, self._bounds = iv[:], None  # a view: appending later copies, never writes into iv
        self.step += iv.total_steps()
        self._t_last = float(clock[-1]) if len(clock) else self._t_last
        del clock
        if self.prior is not None and not self._prior_dropped and len(due):
            self._prior_dropped = self._contradicted_at(due + 1)

    def _contradicted_at(self, counts: np.ndarray) -> bool:
        """Whether the snapshot after the first `count` intervals, for any of `counts` (ascending),
        would have found the prior contradicted (and dropped it)."""
        assert self.prior is not None
        phases = _Phases()
        small = counts[counts <= _EXACT_UP_TO]
        for count in small.tolist():  # warm-up may be undecided: as snapshot() judges them
            part = self.intervals[:count]
            start = phases.start(part)  # a longer prefix each time, as live snapshots see it
            est = eta.estimate_remaining(part[start:], None, self.prior, self.confidence)
            if est is not None and est.prior_conflict:
                return True
        big = counts[counts > _EXACT_UP_TO]
        if not len(big):
            return False
        self._phases.start(self.intervals)  # the whole run scanned once (the snapshot's scan too)
        warm, events = self._phases.warmup(self.intervals), self._phases.events
        ends = np.array([e for e, _ in events], dtype=np.int64)
        starts = np.array([warm] + [s for _, s in events], dtype=np.int64)
        first = starts[np.searchsorted(ends, big, side="right")]  # the phase each report saw
        ok = big - first >= 2
        if not ok.any():
            return False
        moments = _range_moments(self.intervals, first[ok], big[ok], center_at=warm)
        return bool(eta.contradicts(self.prior, eta.observed_term(moments, self.confidence)).any())

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
        elapsed = now - self._t0 if self.started else 0.0
        risk = level_shift_risk(self.intervals, warm) if remaining else 0.0
        rem = (
            _iv(widen(*est.remaining_s, risk, self.confidence) if est.remaining_s is not None else None)
            if est is not None
            else (Interval(estimate=0.0, low=0.0, high=0.0) if remaining == 0 else None)
        )
        total = (
            Interval(estimate=elapsed + rem.estimate, low=elapsed + rem.low, high=elapsed + rem.high)
            if rem
            else None
        )
        util = summarize(
            self.samples, since_s=self._boundary(start) if self.started and self.samples else None
        )
        p = self.prior
        return EtaSnapshot(
            steps_done=done,
            total_steps=None if self.total_steps is None else self.total_steps - self.start_step,
            elapsed_s=elapsed,
            warmup_steps=self.intervals[:warm].total_steps(),
            warmup_s=self.intervals[:warm].total_seconds(),
            stable_from_step=self.start_step + self.intervals[:start].total_steps(),
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
            last_step_time_s=self.intervals[-1][1] / self.intervals[-1][0] if len(self.intervals) else None,
            last_sample=self.samples[-1] if self.samples else None,
            level_shift_risk=risk,
        )

    def _hints(
        self, est: eta.RemainingEstimate | None, util: UtilStats | None, observed: StepStats | None
    ) -> list[str]:
        hints = bottleneck_hints(
            util,
            observed.cv if observed and observed.intervals >= 5 else None,
            micro_batch=self.micro_batch,
            largest_micro_batch=self.largest_micro_batch,
        )
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
    events: list[tuple[int, int]] = field(default_factory=list)
    """Level shifts found: (window end at which it was found, new start)."""

    def warmup(self, intervals: Sequence[eta.Interval]) -> int:
        if self.decided_warmup is not None:
            return self.decided_warmup
        k, decided = eta.warmup_decision(intervals)
        if decided:  # later intervals cannot move it
            self.decided_warmup = k
        return k

    def start(self, intervals: Intervals) -> int:
        warm = self.warmup(intervals)
        if self.decided_warmup is None:
            return warm
        if self.stable is None:
            self.stable, self.scan_end = warm, warm + 2 * eta.SHIFT_WINDOW
        if self.scan_end <= len(intervals):  # only the windows the scan still reads
            lo = max(self.stable, self.scan_end - 5 * eta.SHIFT_WINDOW)
            found: list[tuple[int, int]] = []
            start, end = eta.scan_level_shifts(
                intervals[lo:].per_step(), self.stable - lo, self.scan_end - lo, found
            )
            self.stable, self.scan_end = start + lo, end + lo
            self.events += [(e + lo, s + lo) for e, s in found]
        return self.stable


_EXACT_UP_TO = 2 * eta.MAX_WARMUP_INTERVALS + 2 * eta.WARMUP_WINDOW
"""Reports after at most this many intervals are judged by the snapshot's own path (warm-up may
still be undecided there); later ones, whose warm-up is decided, from range moments."""
_MOMENT_BLOCK = 1 << 20
"""Intervals per block when the prefix sums of `_range_moments` are streamed."""


def _due(clock: np.ndarray, last: float | None, every_s: float) -> np.ndarray:
    """Indices of the updates at which `update` reports: the first (when nothing was reported
    yet), then each first one at least `every_s` after the previous report (the same float test)."""
    due: list[int] = []
    i, n = 0, len(clock)
    while i < n:
        if last is None:
            j = i
        else:
            j = max(i, int(np.searchsorted(clock, last + every_s, side="left")))
            while j < n and clock[j] - last < every_s:
                j += 1
            while j - 1 >= i and clock[j - 1] - last >= every_s:
                j -= 1
        if j >= n:
            break
        due.append(j)
        last = float(clock[j])
        i = j + 1
    return np.array(due, dtype=np.int64)


def _range_moments(
    intervals: Intervals, lo: np.ndarray, hi: np.ndarray, *, center_at: int = 0
) -> eta.LogMoments:
    """`eta.LogMoments` of the phases intervals[lo[i]:hi[i]] from prefix sums, computed in blocks
    (memory: a block, not a copy of the run). Log step times are centred on interval
    `center_at`'s (the first stable one), so the sums lose no precision to a common level and
    a phase of identical times has exactly zero spread."""
    marks = np.unique(np.concatenate([lo, hi, hi - 1]))
    names = ("y", "yy", "cross", "seconds", "steps")
    at = {name: np.zeros(len(marks)) for name in names}
    carry = dict.fromkeys(names, 0.0)
    n = len(intervals)
    with np.errstate(divide="ignore"):
        center = float(np.log(intervals.seconds[center_at] / intervals.steps[center_at])) if n else 0.0
        for block in range(0, n, _MOMENT_BLOCK):
            end = min(n, block + _MOMENT_BLOCK)
            y = np.log(intervals.seconds[block : end + 1] / intervals.steps[block : end + 1]) - center
            terms = {
                "y": y[: end - block],
                "yy": y[: end - block] ** 2,
                "cross": y[: end - block] * y[1:] if end < n else np.append(y[:-1] * y[1:], 0.0),
                "seconds": intervals.seconds[block:end],
                "steps": intervals.steps[block:end].astype(np.float64),
            }
            inside = (marks >= block) & (marks < end)
            offset = marks[inside] - block
            for name, values in terms.items():
                prefix = np.concatenate(([0.0], np.add.accumulate(values)))
                at[name][inside] = carry[name] + prefix[offset]
                carry[name] += float(prefix[-1])
        final = marks >= n
        for name in names:
            at[name][final] = carry[name]
        y_at = (
            np.log(intervals.seconds[np.minimum(marks, n - 1)] / intervals.steps[np.minimum(marks, n - 1)])
            - center
        )

    def value(name: str, where: np.ndarray) -> np.ndarray:
        return at[name][np.searchsorted(marks, where)]

    count = (hi - lo).astype(np.float64)
    s1 = value("y", hi) - value("y", lo)
    mean = s1 / count
    first, last = y_at[np.searchsorted(marks, lo)], y_at[np.searchsorted(marks, hi - 1)]
    cross = value("cross", hi - 1) - value("cross", lo)
    return eta.LogMoments(
        n=count,
        steps=value("steps", hi) - value("steps", lo),
        seconds=value("seconds", hi) - value("seconds", lo),
        centered_ss=value("yy", hi) - value("yy", lo) - count * mean**2,
        lag1_cross=cross - mean * (2 * s1 - first - last) + (count - 1) * mean**2,
    )
