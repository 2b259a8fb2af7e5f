"""Conformal intervals: MAPIE's grouped calibration, the shipped quantile, and coverage on held-out
groups of synthetic data whose noise is known."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from perfmodel.learn.conformal import (
    CALIBRATION_LEVELS,
    calibrate_grouped,
    conformal_quantile,
    grouped_splitter,
)
from perfmodel.learn.regressor import LGBMConfig, LGBMRatioRegressor

FAST = LGBMConfig(n_estimators=80, learning_rate=0.1, min_child_samples=5)


def grouped_data(
    seed: int, n_groups: int = 16, rows_per_group: int = 30, group_sd: float = 0.08, noise_sd: float = 0.1
):
    """y = f(x) + group offset + noise. The offset is invisible in the features: only grouped
    calibration can account for it."""
    rng = np.random.default_rng(seed)
    groups = np.repeat([f"g{i}" for i in range(n_groups)], rows_per_group)
    offsets = dict(zip(np.unique(groups), rng.normal(0.0, group_sd, n_groups), strict=True))
    x = rng.uniform(-2, 2, size=(len(groups), 3))
    y = (
        np.sin(x[:, 0])
        + 0.5 * x[:, 1]
        + np.array([offsets[g] for g in groups])
        + rng.normal(0.0, noise_sd, len(groups))
    )
    return pd.DataFrame(x, columns=["x0", "x1", "x2"]), y, groups


def test_conformal_quantile_is_the_split_conformal_order_statistic():
    scores = np.arange(1, 20, dtype=float)  # n = 19
    assert conformal_quantile(scores, 0.9) == 18.0  # ceil(0.9 * 20) = 18th smallest
    assert conformal_quantile(scores, 0.5) == 10.0
    assert math.isinf(conformal_quantile(scores, 0.97))  # ceil(0.97 * 20) = 20 > n
    with pytest.raises(ValueError):
        conformal_quantile(scores, 1.0)


def test_shipped_quantile_and_point_predictor_reproduce_mapie_intervals():
    """MAPIE is the oracle: its intervals are our point predictor (fitted on all rows by us, not
    read out of MAPIE) +/- our conformal quantile of its conformity scores."""
    X, y, groups = grouped_data(0, n_groups=6)
    cal = calibrate_grouped(X, y, groups, config=FAST)
    assert cal.splitter.startswith("leave-one-group-out")
    point, intervals = cal.mapie.predict_interval(X.iloc[:7], aggregate_point_predictions=None)
    ours = LGBMRatioRegressor(FAST).fit(X, y).predict(X.iloc[:7])
    np.testing.assert_allclose(point, ours, atol=1e-12)
    for j, c in enumerate(CALIBRATION_LEVELS):
        q = cal.quantile(c)
        np.testing.assert_allclose(intervals[:, 0, j], point - q, atol=1e-9)
        np.testing.assert_allclose(intervals[:, 1, j], point + q, atol=1e-9)


def test_grouped_splitter_holds_out_whole_groups():
    groups = np.repeat(["a", "b", "c", "d"], 5)
    splitter, text = grouped_splitter(groups, max_splits=3)
    assert "GroupKFold(3)" in text
    for train, test in splitter.split(np.zeros(len(groups)), groups=groups):
        assert not set(groups[train]) & set(groups[test])
    _, text = grouped_splitter(np.repeat(["a"], 10), max_splits=3)
    assert "not grouped" in text


@pytest.mark.slow
def test_90pct_intervals_cover_unseen_groups_on_synthetic_data():
    coverages = []
    for seed in range(8):
        X, y, groups = grouped_data(100 + seed)
        test_groups = np.unique(groups)[:4]
        test = np.isin(groups, test_groups)
        cal = calibrate_grouped(X[~test], y[~test], groups[~test], config=FAST)
        pred = LGBMRatioRegressor(FAST).fit(X[~test], y[~test]).predict(X[test])
        coverages.append(np.mean(np.abs(y[test] - pred) <= cal.quantile(0.9)))
    mean = float(np.mean(coverages))
    assert 0.85 <= mean <= 0.95, (mean, coverages)
