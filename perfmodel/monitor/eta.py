"""The ETA arithmetic of a running job: warm-up exclusion, the stable phase, and a remaining-time
interval that starts at perfmodel's prediction and narrows as timed steps accrue.

Observations are *intervals*: (steps, seconds) between two progress reports. A callback reports
every optimizer step (steps = 1); a log file may report every N steps (steps = N, the interval's
mean step time is what is known). All rules below count in intervals.

Rules (stated so a user can check them):
- **Warm-up** (`warmup_decision`): a change-point segmentation of the log step times of the first
  MAX_WARMUP_INTERVALS + 2 x WARMUP_WINDOW intervals (binary segmentation of mean shifts,
  `change_points`, penalty CHANGE_POINT_PENALTY x sigma^2 x ln n with sigma the robust noise of
  consecutive differences). The first interval is always
  warm-up (allocation, kernel selection, data-loader start-up). The leading run of segments that
  each run faster than the one before ends at the settled segment; warm-up extends over the leading
  segments more than WARMUP_TOLERANCE slower than it (a ramp of any length and shape, not a fixed
  number of steps). With fewer
  than WARMUP_WINDOW + 1 intervals nothing is decided (all warm-up: the prior alone speaks); the
  answer is decided once 2 x WARMUP_WINDOW intervals follow it with the whole window read, or at
  the cap. Capped: warm-up never exceeds MAX_WARMUP_INTERVALS, nor half of the intervals (a slow
  ramp must not hide the whole run).
- **Stable phase** (`stable_start`): the intervals after warm-up; a level shift restarts it. A
  shift is the median of the last SHIFT_WINDOW intervals differing from the median of the 2 to
  4 x SHIFT_WINDOW stable intervals before them by more than SHIFT_TOLERANCE (another job on the
  host, a throttled GPU, a changed sequence length) and by more than SHIFT_NOISE_Z standard
  errors of that difference; the new phase starts at the first step of
  that window closer to the new median than to the old. Single slow steps (evaluation,
  checkpoints) do not move a median and stay in the phase, where they count towards the mean.
- **Estimate** (`estimate_remaining`): in log space, a precision-weighted blend of the prior (the
  prediction's step-time interval, read as a normal at its confidence level) and the stable
  phase's log mean step time, whose uncertainty is the Student-t interval of a mean of n_eff
  intervals (n_eff corrects for lag-1 autocorrelation; t with n_eff - 1 degrees of freedom, so
  two or three steps say little); a prior the observation contradicts (PRIOR_CONFLICT_Z) is
  dropped. The remaining time adds the step-to-step noise of the R
  steps still to run (variance s^2 x k / R) and LEVEL_DRIFT (the future mean may move). With
  0-1 stable intervals the prior alone speaks.
  The point uses the arithmetic *mean* step time, not the median: a total is a sum, and a median
  would drop periodic slow steps (evaluation, logging, checkpoints) that the run will pay again.
- **Level drift over the horizon**: LEVEL_DRIFT was measured over spans of LEVEL_DRIFT_SPAN_STEPS
  steps; over a longer span (stable steps seen + steps still to run) the level is treated as a
  random walk, whose variance grows with the span: drift variance LEVEL_DRIFT^2 x max(1, span /
  LEVEL_DRIFT_SPAN_STEPS), added to the blended estimate's variance (it moves the level whichever
  source estimated it: the prior's weight and the prior-conflict test keep the plain LEVEL_DRIFT).
  Nothing is fitted for it (a shared host's load moves the level of a long run more than that of a
  10-step slice).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfmodel.monitor.intervals import Intervals

WARMUP_TOLERANCE = 0.25
"""A leading segment is warm-up when it is more than 25% slower than the segment it settles in."""
WARMUP_WINDOW = 5
"""Intervals the change-point rule needs before it says anything (WARMUP_WINDOW + 1), and half of
those that must follow a warm-up before it is decided (2 x WARMUP_WINDOW)."""
CHANGE_POINT_PENALTY = 3.0
"""Penalty of one change point in units of sigma^2 x ln n: a little above Schwarz's criterion for a
mean shift of Gaussian noise (2 sigma^2 ln n), because sigma is itself estimated from the same
steps. Not tuned: 2, 3 and 4 gave the same ETA coverage within 0.5 points on the committed traces."""
MAX_WARMUP_INTERVALS = 50
"""Warm-up is capped at this many intervals (and at half of those seen)."""
SHIFT_WINDOW = 10
"""Intervals whose median is compared with the stable phase before them."""
SHIFT_TOLERANCE = 0.20
"""A level shift: the recent median differs from the earlier stable median by more than 20%..."""
SHIFT_NOISE_Z = 4.0
"""... and by more than 4 standard errors of the difference of the two medians (robust sd = 1.4826 x
MAD of the earlier log step times; 4, not 2, because every step is a new test): on a host whose
steps vary 2x, only a larger move is a shift."""
LOG_SPREAD_FLOOR = 0.005
"""Floor of the per-interval log spread (0.5%, about a timer's resolution on a 10 ms step): identical
times (a fake clock) must not give a zero-width interval."""
LEVEL_DRIFT_SPAN_STEPS = 10
"""Span (steps) of the traces LEVEL_DRIFT was measured on (the collectors' 10 timed steps)."""
LEVEL_DRIFT = 0.02
"""Relative amount (log scale, one standard deviation) by which the rest of a run's mean step time
may differ from its stable phase's mean: host load and clocks move. Chosen as the smallest value on
a 0.005 grid whose 90% intervals covered >= 90% of the remaining time on the 30 quick-profile
traces of datasets/raw (92.1%); on the 76 full-profile traces, not used to choose it, 95.2%
(without it: 83.3% and 85.9%). It also keeps a long run's interval from shrinking below +-3%."""
PRIOR_CONFLICT_Z = 3.29
"""The prior is dropped when the observed log mean lies more than 3.29 combined standard deviations
(two-sided 0.1%) from it: a prediction the measured steps contradict is not averaged in (it would
drag a noisy run's ETA towards a wrong number for many steps)."""
MAX_AUTOCORRELATION = 0.9
"""Lag-1 autocorrelation is clipped to [0, 0.9] before it shrinks the effective sample size."""

Interval = tuple[int, float]
"""(steps, seconds) between two progress reports."""


@dataclass(frozen=True, kw_only=True)
class StepTimePrior:
    """A predicted step time with its interval (perfmodel's prediction, or any other guess)."""

    estimate_s: float
    """Predicted time of one optimizer step in s."""
    low_s: float
    """Low end of the interval in s."""
    high_s: float
    """High end of the interval in s."""
    confidence: float = 0.9
    """Confidence level of [low_s, high_s]."""

    def __post_init__(self) -> None:
        if not 0 < self.low_s <= self.estimate_s <= self.high_s:
            raise ValueError(
                f"StepTimePrior needs 0 < low_s <= estimate_s <= high_s; got {self.low_s}, {self.estimate_s}, {self.high_s}"
            )
        if not 0.5 <= self.confidence < 1:
            raise ValueError(f"StepTimePrior.confidence must be in [0.5, 1); got {self.confidence}")


@dataclass(frozen=True, kw_only=True)
class RemainingEstimate:
    """The blended step time and the remaining time, each with an interval."""

    step_time_s: tuple[float, float, float]
    """(estimate, low, high) of the mean step time in s for the rest of the run."""
    remaining_s: tuple[float, float, float] | None
    """(estimate, low, high) of the time the remaining steps take in s; None without a step count."""
    prior_weight: float
    """Share of the prior in the blended log step time (1 = prior only, 0 = observation only)."""
    prior_conflict: bool
    """The observed steps contradict the prior (it was dropped)."""
    stable_intervals: int
    """Intervals of the stable phase used."""
    effective_intervals: float
    """Stable intervals after the autocorrelation correction."""
    log_spread: float | None
    """Standard deviation of log interval step times in the stable phase (None below 2 intervals)."""


def normal_quantile(p: float) -> float:
    return statistics.NormalDist().inv_cdf(p)


def t_quantile(p: float, dof: int) -> float:
    """Quantile of Student's t with `dof` degrees of freedom: exact for 1 and 2, otherwise the
    Cornish-Fisher expansion in 1/dof (Abramowitz & Stegun 26.7.5): against scipy's exact values
    within 0.1% for p <= 0.95, 0.8% at dof = 3 and p = 0.995, closer at more dof."""
    if dof < 1:
        raise ValueError(f"t_quantile needs dof >= 1, got {dof}")
    if dof == 1:
        return math.tan(math.pi * (p - 0.5))
    if dof == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = normal_quantile(p)
    v = float(dof)
    z3, z5, z7, z9 = z**3, z**5, z**7, z**9
    return (
        z
        + (z3 + z) / (4 * v)
        + (5 * z5 + 16 * z3 + 3 * z) / (96 * v**2)
        + (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v**3)
        + (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / (92160 * v**4)
    )


def per_step(intervals: Sequence[Interval]) -> np.ndarray:
    """Mean step time of each interval in s."""
    return Intervals.of(intervals).per_step()


def change_points(y: Sequence[float] | np.ndarray, penalty: float, min_size: int = 1) -> list[int]:
    """Indices where the mean of `y` shifts, by binary segmentation with a squared-error cost: the
    best split of a segment is kept when it lowers the cost by more than `penalty`, and both halves
    are split again (segments of at least `min_size`). Sorted; [] for a segment without a shift."""
    v = np.asarray(y, dtype=np.float64)
    n = len(v)
    s1 = np.concatenate(([0.0], np.cumsum(v)))
    s2 = np.concatenate(([0.0], np.cumsum(v * v)))
    found: list[int] = []
    todo = [(0, n)]
    while todo:
        a, b = todo.pop()
        if b - a < 2 * min_size:
            continue
        t = np.arange(a + min_size, b - min_size + 1)
        left = (s2[t] - s2[a]) - (s1[t] - s1[a]) ** 2 / (t - a)
        right = (s2[b] - s2[t]) - (s1[b] - s1[t]) ** 2 / (b - t)
        whole = (s2[b] - s2[a]) - (s1[b] - s1[a]) ** 2 / (b - a)
        gain = whole - left - right
        best = int(np.argmax(gain))
        if gain[best] > penalty:
            cut = int(t[best])
            found.append(cut)
            todo += [(a, cut), (cut, b)]
    return sorted(found)


def noise_sigma(y: np.ndarray) -> float:
    """Robust standard deviation of `y`'s noise from consecutive differences (1.4826 x MAD / sqrt 2:
    a level shift moves one difference, not the MAD), floored at LOG_SPREAD_FLOOR."""
    d = np.diff(y)
    if len(d) < 2:
        return LOG_SPREAD_FLOOR
    return max(1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2), LOG_SPREAD_FLOOR)


def warmup_decision(intervals: Sequence[Interval]) -> tuple[int, bool]:
    """(leading warm-up intervals, decided), by the module's change-point rule: decided once
    2 x WARMUP_WINDOW intervals follow the warm-up with the whole window read, or at the
    MAX_WARMUP_INTERVALS cap; undecided answers may still grow with more intervals. Reads only the
    first MAX_WARMUP_INTERVALS + 2 x WARMUP_WINDOW intervals."""
    n = len(intervals)
    if n <= WARMUP_WINDOW:
        return n, False
    window = MAX_WARMUP_INTERVALS + 2 * WARMUP_WINDOW
    y = np.log(np.maximum(per_step(intervals[:window]), 1e-12))[1:]  # the first is always warm-up
    cuts = change_points(y, CHANGE_POINT_PENALTY * noise_sigma(y) ** 2 * math.log(len(y)))
    bounds = [0, *cuts, len(y)]
    means = [float(y[a:b].mean()) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    settled = 0  # the last segment of the leading run of ever faster segments
    while settled < len(cuts) and means[settled + 1] < means[settled]:
        settled += 1
    first = next(j for j in range(settled + 1) if means[j] <= means[settled] + math.log(1 + WARMUP_TOLERANCE))
    k = 1 + bounds[first]
    cap = max(1, min(MAX_WARMUP_INTERVALS, n // 2))
    if k > cap:  # a ramp longer than the cap allows yet: decided only at the fixed cap
        return cap, cap == MAX_WARMUP_INTERVALS
    return k, n >= window and n - k >= 2 * WARMUP_WINDOW


def warmup_intervals(intervals: Sequence[Interval]) -> int:
    """How many leading intervals are warm-up (the module's rule)."""
    return warmup_decision(intervals)[0]


def _shifted(before: np.ndarray, recent: np.ndarray) -> np.ndarray:
    """Per row of `before` (m x b) and `recent` (m x SHIFT_WINDOW): the recent median differs by
    more than SHIFT_TOLERANCE and by more than SHIFT_NOISE_Z robust standard errors of the
    difference of the two medians (so a noisy phase is not cut into pieces by its own noise)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        distance = np.abs(np.log(np.median(recent, axis=1) / np.median(before, axis=1)))
        out = distance > math.log(1 + SHIFT_TOLERANCE)
        rows = np.flatnonzero(out)
        if rows.size:  # the spread only where the medians differ enough
            logs = np.log(before[rows])
            center = np.median(logs, axis=1, keepdims=True)
            robust_sd = 1.4826 * np.median(np.abs(logs - center), axis=1)
            # a median of n has ~1.2533 x sd / sqrt(n) standard error (normal data); two windows differ
            se = 1.2533 * robust_sd * math.sqrt(1 / recent.shape[1] + 1 / before.shape[1])
            out[rows] = distance[rows] > SHIFT_NOISE_Z * se
    return out


_SCAN_CHUNKS = (64, 1 << 16)
"""Window ends tested at once by the level-shift scan: from 64 after a shift, doubling to 65,536."""


def scan_level_shifts(
    times: Sequence[float] | np.ndarray, start: int, end: int, events: list[tuple[int, int]] | None = None
) -> tuple[int, int]:
    """Continue the level-shift scan of `stable_start` from (stable start, next window end) over
    per-step `times`; returns the updated pair (callers keep it to scan each interval once). Each
    shift found is appended to `events` as (window end at which it was found, new start). The
    windows ending at many positions are tested at once (numpy), so a scan is linear in the
    intervals and fast."""
    t = np.asarray(times, dtype=np.float64)
    n, w = len(t), SHIFT_WINDOW
    chunk = _SCAN_CHUNKS[0]
    while end <= n:
        if end - start < 5 * w:  # `before` still grows from the phase's start: one end at a time
            before = t[start : end - w]
            if len(before) >= 2 * w and _shifted(before[None, :], t[None, end - w : end])[0]:
                start, end = _shift(t, start, end, events)
                chunk = _SCAN_CHUNKS[0]
            else:
                end += 1
            continue
        last = min(n, end + chunk - 1)  # the window ends end..last
        ends = np.flatnonzero(_may_shift(t, end, last)) + end
        hit = ends[:0]
        if ends.size:  # the exact test where the bounds cannot rule a shift out
            rows = np.lib.stride_tricks.sliding_window_view(t, w)
            recent = rows[ends - w]
            before = np.lib.stride_tricks.sliding_window_view(t, 4 * w)[ends - 5 * w]
            hit = ends[_shifted(before, recent)] - end
        if hit.size:
            start, end = _shift(t, start, end + int(hit[0]), events)
            chunk = _SCAN_CHUNKS[0]
        else:
            end = last + 1
            chunk = min(2 * chunk, _SCAN_CHUNKS[1])
    return start, end


def _may_shift(t: np.ndarray, end: int, last: int) -> np.ndarray:
    """For the window ends end..last of a phase at least 5 x SHIFT_WINDOW long: False where the
    medians cannot differ by SHIFT_TOLERANCE. The median of `before` (4 windows of
    SHIFT_WINDOW) lies between the smallest lower-middle and the largest upper-middle value of
    those windows, and the recent window is the next one: one partition per window instead of
    a median of 4 x SHIFT_WINDOW per end."""
    w = SHIFT_WINDOW
    base = end - 5 * w
    windows = np.partition(
        np.lib.stride_tricks.sliding_window_view(t[base:last], w), (w // 2 - 1, w // 2), axis=1
    )
    low, high = windows[:, w // 2 - 1], windows[:, w // 2]
    count = last - end + 1
    new = (low[4 * w : 4 * w + count] + high[4 * w : 4 * w + count]) / 2  # the recent window of each end
    lowest = np.minimum.reduce([low[k * w : k * w + count] for k in range(4)])
    highest = np.maximum.reduce([high[k * w : k * w + count] for k in range(4)])
    factor = (1 + SHIFT_TOLERANCE) * (1 - 1e-9)  # a margin for rounding: never rules out a shift
    with np.errstate(divide="ignore", invalid="ignore"):
        return ~((new <= factor * lowest) & (new * factor >= highest))


def _shift(t: np.ndarray, start: int, end: int, events: list[tuple[int, int]] | None) -> tuple[int, int]:
    """The new phase after a shift found at window end `end`: it starts at the first step of the
    window closer to the new median than to the old."""
    w = SHIFT_WINDOW
    recent = t[end - w : end]
    old, new = float(np.median(t[max(start, end - 5 * w) : end - w])), float(np.median(recent))
    lead = 0  # leading steps of the window still at the old level
    while lead < w and abs(math.log(recent[lead] / old)) < abs(math.log(recent[lead] / new)):
        lead += 1
    start = end - w + lead
    if events is not None:
        events.append((end, start))
    return start, start + 2 * w


def stable_start(intervals: Sequence[Interval], warmup: int | None = None) -> int:
    """Index of the first interval of the current stable phase (after warm-up and the last level
    shift). Scans forward once, so the answer for a prefix never depends on later intervals."""
    start = warmup_intervals(intervals) if warmup is None else warmup
    return scan_level_shifts(per_step(intervals), start, start + 2 * SHIFT_WINDOW)[0]


@dataclass(frozen=True)
class LogMoments:
    """What the estimate needs of a stable phase's log step times (arrays: one entry per phase, so
    many phases, e.g. a replay's report times, are judged at once)."""

    n: np.ndarray
    """Intervals."""
    steps: np.ndarray
    """Steps in them."""
    seconds: np.ndarray
    """Seconds they took."""
    centered_ss: np.ndarray
    """Sum of squared deviations of the log interval step times from their mean."""
    lag1_cross: np.ndarray
    """Sum of products of consecutive deviations (for the lag-1 autocorrelation)."""

    @classmethod
    def of(cls, intervals: Intervals) -> LogMoments:
        """The moments of one phase, computed directly (two passes)."""
        logs = intervals.per_step()
        with np.errstate(divide="ignore"):
            np.log(logs, out=logs)
        logs -= logs.mean()
        one = np.ones(1)
        return cls(
            n=one * len(intervals),
            steps=one * intervals.total_steps(),
            seconds=one * intervals.total_seconds(),
            centered_ss=one * float(np.dot(logs, logs)),
            lag1_cross=one * float(np.dot(logs[:-1], logs[1:])),
        )


@dataclass(frozen=True)
class ObservedTerm:
    """The stable phase's part of the blend, per phase (arrays)."""

    mean_log: np.ndarray
    """Log of the mean step time (total seconds / total steps)."""
    variance: np.ndarray
    """Variance of mean_log (Student-t inflated, n_eff, plus LEVEL_DRIFT squared)."""
    noise_var: np.ndarray
    """Step-to-step noise variance per remaining step (times the mean steps per interval)."""
    spread: np.ndarray
    """Standard deviation of log interval step times (floored at LOG_SPREAD_FLOOR)."""
    n_eff: np.ndarray
    """Intervals after the autocorrelation correction."""


def observed_term(m: LogMoments, confidence: float, drift: float | None = None) -> ObservedTerm:
    """The module's rule for the observation's log mean and its variance, for phases of >= 2 intervals."""
    n = m.n
    z = normal_quantile((1 + confidence) / 2)
    spread = np.maximum(np.sqrt(np.maximum(m.centered_ss, 0.0) / (n - 1)), LOG_SPREAD_FLOOR)
    positive = (n >= 6) & (m.centered_ss > 0)
    r1 = np.where(positive, m.lag1_cross / np.where(positive, m.centered_ss, 1.0), 0.0)
    r1 = np.clip(r1, 0.0, MAX_AUTOCORRELATION)
    n_eff = np.maximum(n * (1 - r1) / (1 + r1), 2.0)
    dof = np.maximum(n_eff.astype(np.int64) - 1, 1)
    values, where = np.unique(dof, return_inverse=True)
    t = np.array([t_quantile((1 + confidence) / 2, int(d)) for d in values])[where]
    inflate = t / z
    level = LEVEL_DRIFT if drift is None else drift
    return ObservedTerm(
        mean_log=np.log(m.seconds / m.steps),
        variance=(inflate * spread) ** 2 / n_eff + level**2,
        noise_var=(inflate * spread) ** 2 * (m.steps / n),
        spread=spread,
        n_eff=n_eff,
    )


LEVEL_DRIFT_MAX = 0.1
"""Largest level drift (log sd) however long the run: host load and clocks wander, but they return
(mean reversion), so the random walk stops growing at 0.1, reached over 250 steps (longer than
every Ludwig trace of the ETA replay, so their coverage is unchanged). Without a cap a 5,000-step
run's ETA was +-74% and a 1e11-step one overflowed."""


def horizon_drift(span_steps: int) -> float:
    """LEVEL_DRIFT over a span of `span_steps` steps (stable steps seen + steps to run): a random walk
    of the level, LEVEL_DRIFT over LEVEL_DRIFT_SPAN_STEPS steps (the module's rule), at most
    LEVEL_DRIFT_MAX."""
    return min(LEVEL_DRIFT_MAX, LEVEL_DRIFT * math.sqrt(max(1.0, span_steps / LEVEL_DRIFT_SPAN_STEPS)))


def prior_term(prior: StepTimePrior) -> tuple[float, float]:
    """(log estimate, variance) of a prior: its interval read as a normal at its confidence level."""
    z_prior = normal_quantile((1 + prior.confidence) / 2)
    sigma0 = max(math.log(prior.high_s / prior.low_s) / (2 * z_prior), LOG_SPREAD_FLOOR)
    return math.log(prior.estimate_s), sigma0**2


def contradicts(prior: StepTimePrior, observed: ObservedTerm) -> np.ndarray:
    """Per phase: the observed log mean lies more than PRIOR_CONFLICT_Z combined standard
    deviations from the prior."""
    m0, v0 = prior_term(prior)
    return (observed.mean_log - m0) ** 2 / (v0 + observed.variance) > PRIOR_CONFLICT_Z**2


def estimate_remaining(
    stable: Sequence[Interval],
    remaining_steps: int | None,
    prior: StepTimePrior | None,
    confidence: float = 0.9,
    drift: float | None = None,
) -> RemainingEstimate | None:
    """Blend `prior` with the `stable` intervals (the module's rule). None when there is neither
    a prior nor two stable intervals."""
    if not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must be in [0.5, 1); got {confidence}")
    z = normal_quantile((1 + confidence) / 2)
    intervals = Intervals.of(stable)
    n = len(intervals)
    terms: list[tuple[float, float]] = []  # (log mean step time, variance) of each source
    if prior is not None:
        terms.append(prior_term(prior))
    spread: float | None = None
    n_eff = 0.0
    noise_var = 0.0
    widened: float | None = None
    if n >= 2:
        moments = LogMoments.of(intervals)
        obs = observed_term(moments, confidence, drift)
        spread, n_eff, noise_var = float(obs.spread[0]), float(obs.n_eff[0]), float(obs.noise_var[0])
        terms.append((float(obs.mean_log[0]), float(obs.variance[0])))
        if drift is None and remaining_steps is not None:
            level = horizon_drift(intervals.total_steps() + max(int(remaining_steps), 0))
            widened = level**2 - LEVEL_DRIFT**2  # the wander beyond a 10-step slice's
    if not terms:
        return None
    conflict = False
    if prior is not None and len(terms) == 2:
        (m0, v0), (m1, v1) = terms
        conflict = (m1 - m0) ** 2 / (v0 + v1) > PRIOR_CONFLICT_Z**2
        if conflict:  # the measured steps contradict the prediction: it is dropped, not averaged in
            terms = terms[1:]
    precision = sum(1 / v for _, v in terms)
    mu = sum(m / v for m, v in terms) / precision
    var_mean = 1 / precision
    if widened:  # over a long horizon the level wanders further, whichever source estimated it
        var_mean += widened
    prior_weight = (1 / terms[0][1]) / precision if prior is not None and not conflict else 0.0
    half = z * math.sqrt(var_mean)
    step = (math.exp(mu), math.exp(mu - half), math.exp(mu + half))
    remaining = None
    if remaining_steps is not None:
        r = max(int(remaining_steps), 0)
        if r == 0:
            remaining = (0.0, 0.0, 0.0)
        else:
            half_r = z * math.sqrt(var_mean + noise_var / r)
            remaining = (r * math.exp(mu), r * math.exp(mu - half_r), r * math.exp(mu + half_r))
    return RemainingEstimate(
        step_time_s=step,
        remaining_s=remaining,
        prior_weight=prior_weight,
        prior_conflict=conflict,
        stable_intervals=n,
        effective_intervals=n_eff,
        log_spread=spread,
    )


@dataclass(frozen=True, kw_only=True)
class ReplayCoverage:
    """How often the remaining-time interval held the truth when real step-time traces are replayed."""

    traces: int
    cases: int
    """Reports judged: after k = 2 .. n - 1 steps of every trace, where the rules give an interval."""
    inside: int
    """Reports whose interval held the time the remaining steps really took."""
    unanswered: int
    """Reports without an interval (warm-up undecided and no prior)."""
    median_log_width: float
    """Median of ln(high / low) of the intervals (0.2 = about +-10%)."""

    @property
    def coverage(self) -> float:
        return self.inside / self.cases if self.cases else float("nan")


def replay_coverage(
    traces: Sequence[Sequence[float]],
    *,
    rules: bool = True,
    prior_factor: float | None = None,
    confidence: float = 0.9,
) -> ReplayCoverage:
    """Replay each trace (per-step seconds) as a live run would report it: after k = 2 .. n - 1
    steps, the remaining-time interval for the n - k steps still to run, against their real sum.
    `rules`: the monitor's warm-up and stable-phase rules pick the steps the estimate uses (as the
    live ETA does); False: every step so far (traces whose warm-up was already cut). `prior_factor`:
    a prior off by that factor from the trace's mean step time, its interval / 2.5 .. x 2.5."""
    inside = cases = unanswered = 0
    widths: list[float] = []
    for trace in traces:
        times = [float(t) for t in trace]
        tail = np.cumsum(times[::-1])[::-1]  # tail[k]: seconds of steps k..n-1
        prior = None
        if prior_factor is not None:
            est = sum(times) / len(times) * prior_factor
            prior = StepTimePrior(estimate_s=est, low_s=est / 2.5, high_s=est * 2.5)
        for k in range(2, len(times)):
            seen = Intervals(np.ones(k, dtype=np.int64), np.asarray(times[:k]))
            start = stable_start(seen) if rules else 0
            r = estimate_remaining(seen[start:], len(times) - k, prior, confidence)
            if r is None or r.remaining_s is None:
                unanswered += 1
                continue
            low, high = r.remaining_s[1], r.remaining_s[2]
            cases += 1
            inside += low <= float(tail[k]) <= high
            widths.append(math.log(high / low) if low > 0 else float("inf"))
    return ReplayCoverage(
        traces=len(traces),
        cases=cases,
        inside=inside,
        unanswered=unanswered,
        median_log_width=float(np.median(widths)) if widths else float("nan"),
    )
