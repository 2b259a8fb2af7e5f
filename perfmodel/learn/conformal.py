"""Conformal intervals on the log step-time ratio, calibrated on grouped cross-validation.

MAPIE expresses grouped calibration directly: `CrossConformalRegressor.fit_conformalize` takes
`groups` and any scikit-learn splitter (`LeaveOneGroupOut`, `GroupKFold`), so the conformity
scores are out-of-fold absolute residuals of models that never saw the held-out group. We use
method="base": the point prediction comes from a model fitted on all rows (fitted by
`perfmodel.learn.fit`, not read out of MAPIE), and the interval is that prediction +/- the
conformal quantile of the grouped out-of-fold residuals. Because the interval is then a single
number per confidence level, the shipped model stores the sorted residuals and recomputes
MAPIE's quantile with `conformal_quantile` without importing MAPIE (a test checks the two agree).

Importing this module is cheap (the shipped model uses `conformal_quantile`); MAPIE,
scikit-learn and LightGBM are imported inside `calibrate_grouped` only.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfmodel.learn.evidence import weighted_median
from perfmodel.learn.regimes import pooled_keys

if TYPE_CHECKING:
    from perfmodel.learn.regressor import LGBMConfig

CALIBRATION_LEVELS: tuple[float, ...] = (0.8, 0.9, 0.95)
"""Confidence levels reported and stored explicitly (any level in (0, 1) can be computed)."""


def conformal_quantile(sorted_scores: Sequence[float], confidence: float) -> float:
    """The split-conformal quantile: the ceil(confidence * (n + 1))-th smallest score, as MAPIE
    computes it (numpy 'lower' quantile at ceil(c(n+1))/n). `sorted_scores` must be ascending.
    Returns +inf when n is too small to reach the level."""
    n = len(sorted_scores)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    if n == 0:
        return math.inf
    k = math.ceil(confidence * (n + 1))
    if k > n:
        return math.inf
    return float(sorted_scores[max(k, 1) - 1])


def grouped_splitter(groups: Any, max_splits: int) -> tuple[Any, str]:
    """A scikit-learn splitter holding out whole groups: one group per fold when there are at
    most `max_splits` groups, else GroupKFold(max_splits). Falls back to KFold(5) when there is
    a single group (then the intervals cannot speak for unseen hardware; the description says so)."""
    import numpy as np  # training only: the shipped model imports this module for conformal_quantile alone
    from sklearn.model_selection import GroupKFold, KFold, LeaveOneGroupOut

    n_groups = len(np.unique(np.asarray(groups)))
    if n_groups >= 2 and n_groups <= max_splits:
        return LeaveOneGroupOut(), f"leave-one-group-out ({n_groups} groups)"
    if n_groups > max_splits:
        return GroupKFold(n_splits=max_splits), f"GroupKFold({max_splits}) over {n_groups} groups"
    return KFold(n_splits=5, shuffle=True, random_state=0), "KFold(5): only one group, not grouped"


@dataclass(frozen=True, kw_only=True)
class GroupedCalibration:
    """Grouped out-of-fold conformity scores of one calibration."""

    scores: Any
    """Sorted absolute out-of-fold residuals |y - y_oof| of log(step time / bound) (numpy array)."""
    row_scores: Any
    """The same residuals in row order (NaN where a row could not be scored)."""
    splitter: str
    """How the calibration folds were formed."""
    mapie: Any
    """The fitted MAPIE CrossConformalRegressor (for cross-checking the shipped quantiles)."""
    y: Any = None
    """The calibrated rows' log(step time / bound) (numpy array; None: not kept)."""
    oof: Any = None
    """Each row's out-of-fold prediction by the fold model that did not see its group (signed)."""
    oof_offset: Any = None
    """That fold model's step overhead b(x) for each row (`Evidence.offset`)."""
    weights: Any = None
    """One vote per run (the rows' sample weights)."""
    approximate: Any = None
    """Rows of models whose kernel plan is a stated approximation (feature `plan_approximate`)."""
    transfer: float = 1.0
    """The share of the learned residual the scores were computed with (`with_transfer`)."""
    transfer_approximate: float | None = None
    """That share for the approximate plans' rows (None: `transfer`)."""

    def quantile(self, confidence: float) -> float:
        """Conformal half-width (log) at `confidence`; +inf when there are too few scores."""
        return conformal_quantile(self.scores, confidence)

    def predictions(self, transfer: Any) -> Any:
        """The out-of-fold predictions had `transfer` (a share, or one per row) of each fold model's
        residual been kept."""
        return self.oof_offset + transfer * (self.oof - self.oof_offset)

    def with_transfer(self, transfer: float, approximate: float | None = None) -> GroupedCalibration:
        """This calibration with `transfer` of the residual kept (`approximate` of it on the
        approximate plans' rows; None: `transfer`): its fold and final estimators, inside the shared
        MAPIE object, are set to blend so (`Evidence.shared`), and its scores are their out-of-fold
        residuals."""
        import dataclasses

        import numpy as np  # training only

        for estimator in _estimators(self.mapie):
            if getattr(estimator, "evidence_", None) is not None:
                estimator.evidence_ = estimator.evidence_.shared(transfer, approximate)
        shares = np.where(self.approximate, transfer if approximate is None else approximate, transfer)
        row_scores = np.abs(self.y - self.predictions(shares))
        return dataclasses.replace(
            self,
            row_scores=row_scores,
            scores=np.sort(row_scores[np.isfinite(row_scores)]),
            transfer=float(transfer),
            transfer_approximate=None if approximate is None else float(approximate),
        )


TRANSFER_GRID: tuple[float, ...] = tuple(round(0.1 * k, 1) for k in range(11))
"""The residual shares `transfer_share` chooses among."""


MIN_RUNS_FOR_A_SHARE = 30.0
"""Measured runs (one vote per run) the approximate plans need for a transfer share of their own."""


def transfer_share(calibration: GroupedCalibration, rows: Any = None) -> float:
    """How much of the learned residual carries over to a group (a lab's setup) the model did not
    see: the share in `TRANSFER_GRID` whose out-of-fold predictions have the smallest run-weighted
    median |log error| over the calibration's held-out groups (ties: the larger share), on `rows`
    (a boolean mask; None: all). Fitted on the training rows' own grouped cross-validation, never on
    an evaluation split."""
    import numpy as np  # training only

    keep = np.isfinite(calibration.oof) & np.isfinite(calibration.y)
    if rows is not None:
        keep &= np.asarray(rows, dtype=bool)
    if not keep.any():
        return 1.0
    y, w = calibration.y[keep], list(calibration.weights[keep])

    def median_error(share: float) -> float:
        return weighted_median(list(np.abs(y - calibration.predictions(share)[keep])), w)

    errors = {share: round(median_error(share), 6) for share in TRANSFER_GRID}
    best = min(errors.values())
    return max(share for share, e in errors.items() if e == best)


def fit_transfer(calibration: GroupedCalibration) -> GroupedCalibration:
    """The calibration with its fitted transfer shares (`with_transfer`): one for every row, fitted
    on the rows of plans that cost a model's own kernels, and one of their own for the approximate
    plans when they have `MIN_RUNS_FOR_A_SHARE` runs."""
    import numpy as np  # training only

    approximate = calibration.approximate
    own = float(np.sum(calibration.weights[approximate])) >= MIN_RUNS_FOR_A_SHARE
    return calibration.with_transfer(
        transfer_share(calibration, ~approximate), transfer_share(calibration, approximate) if own else None
    )


def _estimators(mapie: Any) -> list[Any]:
    """The fold estimators and the final one inside a fitted MAPIE CrossConformalRegressor."""
    ensemble = mapie._mapie_regressor.estimator_
    return [*ensemble.estimators_, ensemble.single_estimator_]


def calibrate_grouped(
    X: Any, y: Any, groups: Any, *, config: LGBMConfig, max_splits: int = 12, sample_weight: Any = None
) -> GroupedCalibration:
    """Grouped out-of-fold conformity scores of the LightGBM regressor, computed by MAPIE
    (`sample_weight` is split by fold with the rows, so each fold's fit weighs runs equally)."""
    import numpy as np  # training only: the shipped model imports this module for conformal_quantile alone
    from mapie.regression import CrossConformalRegressor

    from perfmodel.learn.evidence import evidence_rows
    from perfmodel.learn.regressor import LGBMRatioRegressor  # LightGBM, pandas, scikit-learn

    splitter, description = grouped_splitter(groups, max_splits)
    mapie = CrossConformalRegressor(
        estimator=LGBMRatioRegressor(config),
        confidence_level=list(CALIBRATION_LEVELS),
        conformity_score="absolute",
        method="base",
        cv=splitter,
        n_jobs=None,
        random_state=config.seed,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        fit_params = (
            None if sample_weight is None else {"sample_weight": np.asarray(sample_weight, dtype=float)}
        )
        mapie.fit_conformalize(
            X, np.asarray(y, dtype=float), groups=np.asarray(groups), fit_params=fit_params
        )
    row_scores = np.asarray(mapie.conformity_scores, dtype=float)
    scores = np.sort(row_scores[np.isfinite(row_scores)])
    y = np.asarray(y, dtype=float)
    oof, oof_offset = np.full(len(y), np.nan), np.full(len(y), np.nan)
    fold_estimators = mapie._mapie_regressor.estimator_.estimators_
    records = evidence_rows(X)
    for (_, held), estimator in zip(splitter.split(X, y, np.asarray(groups)), fold_estimators, strict=True):
        rows = [records[i] for i in held]
        oof[held] = estimator.predict(X.iloc[held], rows=rows)
        evidence = getattr(estimator, "evidence_", None)
        oof_offset[held] = [evidence.offset(r) if evidence is not None else 0.0 for r in rows]
    weights = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    approximate = (
        np.asarray(X["plan_approximate"], dtype=float) > 0
        if "plan_approximate" in X
        else np.zeros(len(y), dtype=bool)
    )
    return GroupedCalibration(
        approximate=approximate,
        scores=scores,
        row_scores=row_scores,
        splitter=description,
        mapie=mapie,
        y=y,
        oof=oof,
        oof_offset=oof_offset,
        weights=weights,
    )


MAX_RUNS_PER_SOURCE = 20
"""Most scores one source contributes to a regime cell: a source with more runs there is
represented by that many evenly spaced quantiles of its scores, so that one lab's campaign of
thousands of runs does not decide the interval of every query in the cell (the unit an interval
must generalise over is a lab's setup, not a run)."""


def _balanced(scores: list[float], cap: int) -> list[float]:
    if len(scores) <= cap:
        return scores
    ordered = sorted(scores)
    n = len(ordered)
    return [ordered[min(n - 1, int(round((i + 0.5) * n / cap - 0.5)))] for i in range(cap)]


def mondrian_scores(
    row_scores: Any, regimes: Any, run_groups: Any, sources: Any = None, max_per_source: int = MAX_RUNS_PER_SOURCE
) -> dict[str, list[float]]:
    """Per-regime conformity scores (Mondrian conformal), one vote per measured run, at most
    `max_per_source` per source and cell (`MAX_RUNS_PER_SOURCE`; `sources` None: no cap).

    The rows of one run (logged windows, repeats) are one exchangeable unit, so each run counts
    once with the median of its rows' scores. Every run's score joins its own regime cell and
    every coarser cell (`regimes.pooled_keys`: an approximate plan's runs stop at their kind); the
    result maps cell key -> ascending scores, from
    which `conformal_quantile` gives each regime its half-width."""
    import numpy as np  # training only: the shipped model imports this module for conformal_quantile alone
    import pandas as pd

    frame = pd.DataFrame(
        {"score": np.asarray(row_scores, dtype=float), "group": [str(g) for g in run_groups]}
    )
    frame["regime"] = [tuple(r) for r in regimes]
    frame["source"] = ["" if sources is None else str(s) for s in (sources if sources is not None else frame.index)]
    frame = frame[np.isfinite(frame["score"])]
    per_run = frame.groupby("group", sort=True).agg(
        score=("score", "median"), regime=("regime", "first"), source=("source", "first")
    )
    cells: dict[str, dict[str, list[float]]] = {}
    for score, regime, source in zip(per_run["score"], per_run["regime"], per_run["source"], strict=True):
        for key in pooled_keys(regime):
            cells.setdefault(key, {}).setdefault(source, []).append(float(score))
    cap = max_per_source if sources is not None else 10**12
    return {
        key: sorted(round(v, 5) for scores in by_source.values() for v in _balanced(scores, cap))
        for key, by_source in sorted(cells.items())
    }


def mondrian_runs(regimes: Any, run_groups: Any) -> dict[str, int]:
    """Measured runs per regime cell (every coarser cell included): the evidence a cell needs before
    its own scores set its interval, counted before any per-source cap."""
    first: dict[str, tuple[str, ...]] = {}
    for regime, group in zip(regimes, run_groups, strict=True):
        first.setdefault(str(group), tuple(regime))
    runs: dict[str, int] = {}
    for regime in first.values():
        for key in pooled_keys(regime):
            runs[key] = runs.get(key, 0) + 1
    return dict(sorted(runs.items()))
