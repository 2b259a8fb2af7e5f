"""The ETA arithmetic (perfmodel.monitor.eta) and the monitor core under a fake clock: warm-up
exclusion, stable-phase detection, interval narrowing, prior vs observation, and coverage of the
remaining-time interval on the collectors' real step-time traces (datasets/raw)."""

from __future__ import annotations

import io
import math
import random
from pathlib import Path

import numpy as np
import pytest

from perfmodel.monitor import eta
from perfmodel.monitor.core import RunMonitor
from perfmodel.monitor.eta import StepTimePrior, estimate_remaining, stable_start, warmup_intervals
from perfmodel.monitor.report import ConsoleReporter

ROOT = Path(__file__).resolve().parents[1]


def steps(times: list[float]) -> list[tuple[int, float]]:
    return [(1, t) for t in times]


def noisy(n: int, level: float = 0.5, cv: float = 0.03, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [level * rng.lognormvariate(0.0, cv) for _ in range(n)]


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


# --- Student t ------------------------------------------------------------------------------


@pytest.mark.parametrize("dof", [1, 2, 3, 5, 10, 30])
@pytest.mark.parametrize("p", [0.9, 0.95, 0.975])
def test_t_quantile_matches_scipy(dof, p):
    from scipy import stats

    assert eta.t_quantile(p, dof) == pytest.approx(stats.t.ppf(p, dof), rel=2e-3)


# --- warm-up --------------------------------------------------------------------------------


def test_slow_leading_steps_are_warm_up():
    times = [5.0, 2.5, 1.0] + noisy(30)  # settled level 0.5 s
    assert warmup_intervals(steps(times)) == 3


def test_the_first_step_is_always_warm_up():
    assert warmup_intervals(steps(noisy(30))) == 1


def test_warm_up_is_undecided_until_a_window_follows():
    times = [5.0, 0.5, 0.5]
    assert warmup_intervals(steps(times)) == 3  # nothing settled yet: all warm-up, prior only
    assert estimate_remaining([], 10, None) is None


def test_a_slow_ramp_is_capped_at_half_of_the_steps():
    ramp = [10.0 / (1 + 0.05 * i) ** 3 for i in range(40)]  # keeps getting faster, never settles by the rule
    assert warmup_intervals(steps(ramp)) <= 20


# --- stable phase ---------------------------------------------------------------------------


def test_a_level_shift_restarts_the_stable_phase_where_it_happened():
    times = [3.0] + noisy(39, 1.0, seed=1) + noisy(40, 1.5, seed=2)
    assert stable_start(steps(times)) == 40


def test_periodic_slow_steps_stay_in_the_stable_phase_and_count_in_the_mean():
    base = noisy(80, 1.0, cv=0.01, seed=3)
    times = [4.0] + [
        t * (3.0 if i % 10 == 9 else 1.0) for i, t in enumerate(base)
    ]  # every 10th step: evaluation
    assert stable_start(steps(times)) == 1
    stable = steps(times[1:])
    est = estimate_remaining(stable, 100, None)
    true_mean = sum(times[1:]) / 80
    assert est.remaining_s[0] == pytest.approx(100 * true_mean, rel=0.02)  # the mean, not the median (1.0)
    assert est.remaining_s[0] > 100 * 1.1


# --- blending and narrowing -----------------------------------------------------------------


def test_with_few_noisy_steps_the_prior_dominates_and_with_many_the_observation():
    prior = StepTimePrior(estimate_s=1.0, low_s=0.5, high_s=2.0)
    few = estimate_remaining(steps([0.6, 1.1]), 100, prior)  # two steps that disagree by 2x
    steady = estimate_remaining(steps([0.50, 0.51]), 100, prior)  # two steps that agree
    many = estimate_remaining(steps(noisy(200, 0.8, cv=0.3, seed=4)), 100, prior)
    assert few.prior_weight > 0.5
    assert steady.prior_weight < 0.1
    assert many.prior_weight < 0.05
    assert many.step_time_s[0] == pytest.approx(0.8 * math.exp(0.3**2 / 2), rel=0.08)  # lognormal mean


def test_interval_narrows_as_steps_accrue():
    """One run of 1,000 steps: as steps accrue the interval narrows towards the level drift the
    run's length allows (horizon_drift(1,000): the rest of a long run on a shared host may move)."""
    prior = StepTimePrior(estimate_s=0.7, low_s=0.35, high_s=1.4)
    trace = noisy(400, 0.5, cv=0.1, seed=5)
    widths = []
    for n in (3, 10, 40, 160):
        est = estimate_remaining(steps(trace[:n]), 1000 - n, prior)
        widths.append(math.log(est.remaining_s[2] / est.remaining_s[1]))
    assert widths == sorted(widths, reverse=True)
    drift_only = 2 * 1.6449 * math.sqrt(eta.horizon_drift(1000) ** 2 - eta.LEVEL_DRIFT**2)
    assert drift_only < widths[-1] < 1.15 * drift_only
    prior_only = estimate_remaining([], 1000, prior)
    assert prior_only.remaining_s == pytest.approx((700.0, 350.0, 1400.0))
    assert prior_only.prior_weight == 1.0


def test_a_wrong_prior_is_overruled_by_steady_steps():
    prior = StepTimePrior(estimate_s=3.0, low_s=2.0, high_s=4.5)  # says 3 s, interval excludes the truth
    trace = noisy(60, 1.0, cv=0.02, seed=6)
    est = estimate_remaining(steps(trace), 100, prior)
    assert est.remaining_s[1] <= sum(noisy(160, 1.0, cv=0.02, seed=6)[60:]) <= est.remaining_s[2]


# --- coverage on real traces ----------------------------------------------------------------


def _real_traces(ludwig: bool = False) -> list[list[float]]:
    """Own collectors' traces (warm-up excluded by the harness); ludwig=True: the real Ludwig runs'
    every batch after the first (their warm-up ramps are Ludwig's, left in)."""
    import pandas as pd

    frames = [
        pd.read_parquet(p)
        for p in sorted((ROOT / "datasets" / "raw").glob("*.parquet"))
        if not p.name.startswith("microbench")
    ]
    table = pd.concat(frames, ignore_index=True)
    table = table[(table["status"] == "ok") & (table["source_kind"] == "own")]
    table = table[(table["framework"] == "ludwig") == ludwig]
    return [[float(t) for t in x] for x in table["step_times_s"] if x is not None and len(x) >= 10]


@pytest.mark.parametrize("prior_factor", [None, 1.0, 1.6])
def test_remaining_time_interval_covers_real_traces_at_its_rate(prior_factor):
    """Replay every committed trace (warm-up already excluded by the collectors): after k steps,
    predict the time of the remaining ones and check the truth is inside the 90% interval. The
    prior, when used, is off by `prior_factor` with an interval that still covers the truth."""
    traces = _real_traces()
    assert len(traces) >= 50
    coverage = eta.replay_coverage(traces, rules=False, prior_factor=prior_factor).coverage
    # LEVEL_DRIFT was chosen on the quick-profile traces only; pooled with the full-profile ones
    # the coverage was 94% (module docstring). A broken blend or spread lands far outside this.
    assert 0.87 <= coverage <= 0.99, coverage


@pytest.mark.slow
def test_live_eta_covers_both_trace_sets():
    """The live ETA (the monitor's change-point warm-up and stable-phase rules pick the steps) on
    the collectors' traces and on the real Ludwig runs (every batch after the first, Ludwig's own
    warm-up ramps and the shared host's level changes left in): issue 24 asks >= 90% on each; issue
    16 measured 82% on the Ludwig runs before the horizon drift (docs/run.md)."""
    collectors = eta.replay_coverage(_real_traces(), rules=True)
    ludwig = eta.replay_coverage(_real_traces(ludwig=True), rules=True)
    assert ludwig.traces >= 10 and collectors.traces >= 50
    assert 0.90 <= collectors.coverage <= 0.99, collectors
    assert 0.90 <= ludwig.coverage <= 0.99, ludwig


def test_the_horizon_drift_leaves_ten_step_slices_alone_and_grows_as_a_random_walk():
    assert eta.horizon_drift(2) == eta.horizon_drift(10) == eta.LEVEL_DRIFT
    assert eta.horizon_drift(40) == pytest.approx(2 * eta.LEVEL_DRIFT)
    trace = noisy(200, 1.0, cv=0.02, seed=11)
    short = estimate_remaining(steps(trace[:8]), 2, None).remaining_s
    long = estimate_remaining(steps(trace[:100]), 300, None).remaining_s
    assert math.log(long[2] / long[1]) > 2 * 1.645 * eta.horizon_drift(400) * 0.95  # the drift dominates
    assert short == estimate_remaining(steps(trace[:8]), 2, None, drift=eta.LEVEL_DRIFT).remaining_s


# --- change points ----------------------------------------------------------------------------


def test_change_points_find_a_shift_and_nothing_in_noise():
    rng = random.Random(12)
    flat = [rng.gauss(0.0, 0.05) for _ in range(60)]
    sigma = eta.noise_sigma(np.array(flat))
    penalty = eta.CHANGE_POINT_PENALTY * sigma**2 * math.log(60)
    assert eta.change_points(flat, penalty) == []
    shifted = [x + (0.5 if i < 23 else 0.0) for i, x in enumerate(flat)]
    assert eta.change_points(shifted, penalty) == [23]


def test_a_long_warm_up_ramp_is_found_whatever_its_length():
    """A ramp of 18 steps from 3x down to the settled level, then noise: warm-up ends where it settles
    (a fixed window of steps would stop early or late)."""
    ramp = [3.0 - 2.0 * i / 17 for i in range(18)]
    times = [6.0] + ramp + noisy(60, 1.0, seed=13)
    k = warmup_intervals(steps(times))
    assert 12 <= k <= 20
    short = [6.0, 2.0] + noisy(60, 1.0, seed=14)
    assert warmup_intervals(steps(short)) == 2


# --- the core under a fake clock --------------------------------------------------------------


def test_monitor_reports_warm_up_stable_phase_and_a_narrowing_eta():
    clock = FakeClock()
    out = io.StringIO()
    prior = StepTimePrior(estimate_s=0.8, low_s=0.4, high_s=1.6)
    m = RunMonitor(
        total_steps=200, prior=prior, clock=clock, reporter=ConsoleReporter(out), report_every_s=5.0
    )
    m.start()
    times = [6.0, 2.0] + noisy(198, 0.5, seed=7)
    widths = []
    for i, t in enumerate(times, start=1):
        clock.t += t
        m.update(i)
        if i in (20, 100, 190):
            snap = m.snapshot()
            widths.append(snap.step_time_s.high / snap.step_time_s.low)  # the mean step time narrows
            truth = sum(times[i:])
            assert snap.remaining_s.low <= truth <= snap.remaining_s.high
    assert widths == sorted(widths, reverse=True)
    final = m.finish()
    assert final.warmup_steps == 2 and final.warmup_s == pytest.approx(8.0)
    assert final.stable_from_step == 2
    assert final.observed.median_s == pytest.approx(0.5, rel=0.03)
    assert final.remaining_s.estimate == 0 and final.finished
    assert final.elapsed_s == pytest.approx(sum(times))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[perfmodel] step 1/200") and "ETA" in lines[0]
    assert "finished" in lines[-1] and "warm-up 2 steps" in lines[-1]
    assert 10 < len(lines) < 40  # one line per 5 s of fake time, not one per step


def test_monitor_times_logged_step_counts_as_intervals():
    clock = FakeClock()
    m = RunMonitor(total_steps=1000, clock=clock, report_every_s=1e9)
    m.start()
    for step in range(10, 510, 10):  # a log every 10 steps of 0.2 s each
        clock.t += 10 * 0.2 * (3.0 if step == 10 else 1.0)
        m.update(step)
    snap = m.snapshot()
    assert snap.warmup_steps == 10
    assert snap.observed.mean_s == pytest.approx(0.2)
    assert snap.remaining_s.estimate == pytest.approx(500 * 0.2, rel=1e-6)


def test_no_progress_is_not_a_step():
    clock = FakeClock()
    m = RunMonitor(total_steps=10, clock=clock)
    m.start()
    clock.t += 1
    m.update(1)
    clock.t += 1
    assert m.update(1) is None
    assert m.intervals == [(1, 1.0)]


def test_a_noisy_phase_is_not_cut_into_pieces_by_its_own_noise():
    cut = 0
    for seed in range(20):
        times = [3.0] + noisy(300, 0.3, cv=0.8, seed=100 + seed)  # a busy host: steps vary 2-3x
        cut += stable_start(steps(times)) > 10  # (noise may lengthen warm-up by a step or two)
    assert cut <= 2
    quiet_shift = [3.0] + noisy(100, 0.3, cv=0.03, seed=10) + noisy(100, 0.4, cv=0.03, seed=11)
    assert stable_start(steps(quiet_shift)) == 101


def test_a_contradicted_prediction_stays_out_of_the_eta():
    clock = FakeClock()
    prior = StepTimePrior(estimate_s=0.0015, low_s=0.001, high_s=0.0024)  # 100x too fast
    m = RunMonitor(total_steps=400, prior=prior, clock=clock, report_every_s=1e9)
    m.start()
    times = [2.0] + noisy(150, 0.2, cv=0.8, seed=9)
    for i, t in enumerate(times, start=1):
        clock.t += t
        m.update(i)
        if i >= 20:
            snap = m.snapshot()
            assert snap.prior_weight == 0.0, i
            assert snap.remaining_s.estimate > 0.05 * (400 - i), i  # never the prediction's 1.5 ms per step
    assert any(
        h.startswith("the measured steps contradict perfmodel's prediction") for h in m.snapshot().hints
    )


# --- linear replay: the vectorised rules give the answers of the one-at-a-time rules ----------


def _reference_stable_start(times: list[float], start: int) -> int:
    """The level-shift scan as first written (one window end at a time, statistics.median): the
    specification the vectorised eta.scan_level_shifts must reproduce."""
    import statistics

    w = eta.SHIFT_WINDOW

    def shifted(before: list[float], recent: list[float]) -> bool:
        old, new = statistics.median(before), statistics.median(recent)
        distance = abs(math.log(new / old))
        logs = [math.log(t) for t in before]
        center = statistics.median(logs)
        robust_sd = 1.4826 * statistics.median(abs(x - center) for x in logs)
        se = 1.2533 * robust_sd * math.sqrt(1 / len(recent) + 1 / len(before))
        return distance > math.log(1 + eta.SHIFT_TOLERANCE) and distance > eta.SHIFT_NOISE_Z * se

    end = start + 2 * w
    while end <= len(times):
        recent, before = times[end - w : end], times[max(start, end - 5 * w) : end - w]
        if len(before) >= 2 * w and shifted(before, recent):
            old, new = statistics.median(before), statistics.median(recent)
            lead = 0
            while lead < w and abs(math.log(recent[lead] / old)) < abs(math.log(recent[lead] / new)):
                lead += 1
            start = end - w + lead
            end = start + 2 * w
        else:
            end += 1
    return start


def _shifty(seed: int, n: int) -> list[float]:
    """Steps with level shifts (x0.6 / x1.7 now and then) and a noise level that changes too."""
    rng = random.Random(seed)
    level, cv, out = 0.5, 0.02, [3.0, 1.5]
    for _ in range(n):
        if rng.random() < 0.004:
            level *= rng.choice([0.6, 1.7])
        if rng.random() < 0.002:
            cv = rng.choice([0.01, 0.05, 0.3, 0.8])
        out.append(level * rng.lognormvariate(0.0, cv))
    return out


@pytest.mark.slow
def test_the_vectorised_level_shift_scan_finds_what_the_one_at_a_time_scan_finds():
    found_shift = 0
    for seed in range(40):
        times = _shifty(seed, random.Random(seed).choice([60, 400, 3000]))
        want = _reference_stable_start(times, 1)
        assert eta.scan_level_shifts(times, 1, 1 + 2 * eta.SHIFT_WINDOW)[0] == want, seed
        found_shift += want > 1
    assert found_shift >= 10  # the traces do shift: the comparison is not of two trivial answers


def _monitor(times: list[float], prior: StepTimePrior | None, *, bulk: bool, every_s: float) -> RunMonitor:
    m = RunMonitor(total_steps=len(times) + 500, prior=prior, report_every_s=every_s, clock=lambda: 0.0)
    m.start(step=0, now=0.0)
    if bulk:
        m.extend(steps(times))
    else:
        now = 0.0
        for i, t in enumerate(times, start=1):
            now += t
            m.update(i, now=now)
    return m


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12))
def test_extend_replays_like_updates_one_by_one(seed):
    """`perfmodel monitor` replays a file with RunMonitor.extend (one pass); the snapshot, and the
    prior's fate at every report that would have been due, are those of update() per interval."""
    rng = random.Random(seed)
    times = _shifty(seed, rng.choice([40, 300, 2500]))
    factor = rng.choice([0.3, 0.6, 1.0, 1.6, 3.0])
    prior = StepTimePrior(estimate_s=0.5 * factor, low_s=0.5 * factor / 1.5, high_s=0.5 * factor * 1.5)
    every_s = rng.choice([1.0, 10.0, 100.0])
    one, bulk = (_monitor(times, prior, bulk=b, every_s=every_s) for b in (False, True))
    a, b = one.snapshot(now=one.last_update_at), bulk.snapshot(now=bulk.last_update_at)
    assert (a.prior_weight == 0.0) == (b.prior_weight == 0.0)
    assert a.stable_from_step == b.stable_from_step and a.warmup_steps == b.warmup_steps
    assert b.remaining_s.estimate == pytest.approx(a.remaining_s.estimate, rel=1e-9)
    assert b.observed.median_s == pytest.approx(a.observed.median_s, rel=1e-12)
    assert b.elapsed_s == pytest.approx(a.elapsed_s, rel=1e-12)


def test_a_prior_contradicted_at_a_report_long_ago_stays_out_after_a_replay():
    """The prior (0.5 s) is contradicted while the run is at 1.5 s a step (intervals 300-700, past
    the snapshot-path reports), then the run comes back to 0.5 s: every report after the
    contradiction left it out, and so does the replay, although the final phase agrees with it."""
    prior = StepTimePrior(estimate_s=0.5, low_s=0.4, high_s=0.62)
    times = [3.0] + noisy(300, 0.5, seed=21) + noisy(400, 1.5, seed=22) + noisy(600, 0.5, seed=23)
    for bulk in (False, True):
        m = _monitor(times, prior, bulk=bulk, every_s=10.0)
        snap = m.snapshot(now=m.last_update_at)
        assert snap.stable_from_step > 700 and snap.prior_weight == 0.0, bulk
    agrees = [3.0] + noisy(300, 0.5, seed=21)  # the same prior is kept where nothing contradicts it
    assert _monitor(agrees, prior, bulk=True, every_s=10.0).snapshot().prior_weight > 0


def test_intervals_behave_as_a_list_of_pairs():
    from perfmodel.monitor.intervals import Intervals

    iv = Intervals.of([(1, 0.5), (2, 1.0), (1, 0.25)])
    assert iv == [(1, 0.5), (2, 1.0), (1, 0.25)] and iv != [(1, 0.5)]
    assert list(iv) == [(1, 0.5), (2, 1.0), (1, 0.25)] and iv[-1] == (1, 0.25)
    assert iv[1:] == [(2, 1.0), (1, 0.25)] and iv.total_steps() == 4
    view = iv[:2]
    view.append(5, 9.0)  # appending to a view copies: the original is untouched
    assert len(iv) == 3 and iv[2] == (1, 0.25) and view[-1] == (5, 9.0)
    iv.append(2**40, 1.0)  # a count beyond 32 bits widens the array
    assert iv[-1] == (2**40, 1.0)
    with pytest.raises(IndexError):
        iv[10]
