"""Conformal intervals on the log step-time ratio, calibrated on grouped cross-validation.

MAPIE expresses grouped calibration directly: `CrossConformalRegressor.fit_conformalize` takes
`groups` and any scikit-learn splitter (`LeaveOneGroupOut`, `GroupKFold`), so the conformity
scores are out-of-fold absolute residuals of models that never saw the held-out hardware. We use
method="base": the point prediction comes from the model fitted on all rows, and the interval is
that prediction +/- the conformal quantile of the grouped out-of-fold residuals. Because the
interval is then a single number per confidence level, the shipped model stores the sorted
residuals and recomputes MAPIE's quantile (`shipped.conformal_quantile`) without importing MAPIE
(a test checks the two agree).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfmodel.learn.regressor import LGBMConfig, LGBMRatioRegressor
from perfmodel.learn.shipped import conformal_quantile

CALIBRATION_LEVELS: tuple[float, ...] = (0.8, 0.9, 0.95)
"""Confidence levels reported and stored explicitly (any level in (0, 1) can be computed)."""


def grouped_splitter(groups: Any, max_splits: int) -> tuple[Any, str]:
    """A scikit-learn splitter holding out whole groups: one group per fold when there are at
    most `max_splits` groups, else GroupKFold(max_splits). Falls back to KFold(5) when there is
    a single group (then the intervals cannot speak for unseen hardware; the description says so)."""
    import numpy as np
    from sklearn.model_selection import GroupKFold, KFold, LeaveOneGroupOut

    n_groups = len(np.unique(np.asarray(groups)))
    if n_groups >= 2 and n_groups <= max_splits:
        return LeaveOneGroupOut(), f"leave-one-group-out ({n_groups} groups)"
    if n_groups > max_splits:
        return GroupKFold(n_splits=max_splits), f"GroupKFold({max_splits}) over {n_groups} groups"
    return KFold(n_splits=5, shuffle=True, random_state=0), "KFold(5): only one group, not grouped"


@dataclass(frozen=True)
class GroupedCalibration:
    """A model fitted on all rows plus the grouped out-of-fold conformity scores."""

    estimator: LGBMRatioRegressor
    """Regressor fitted on every row (the point predictor)."""
    scores: Any
    """Sorted absolute out-of-fold residuals |y - y_oof| (numpy array)."""
    splitter: str
    """How the calibration folds were formed."""
    mapie: Any
    """The fitted MAPIE CrossConformalRegressor (for cross-checking the shipped quantiles)."""

    def quantile(self, confidence: float) -> float:
        return conformal_quantile(self.scores, confidence)


def calibrate_grouped(
    X: Any, y: Any, groups: Any, *, config: LGBMConfig, max_splits: int = 12
) -> GroupedCalibration:
    """Fit on all rows and compute grouped out-of-fold conformity scores with MAPIE."""
    import warnings

    import numpy as np
    from mapie.regression import CrossConformalRegressor

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
        mapie.fit_conformalize(X, np.asarray(y, dtype=float), groups=np.asarray(groups))
    scores = np.sort(np.asarray(mapie.conformity_scores, dtype=float))
    scores = scores[np.isfinite(scores)]
    estimator = mapie._mapie_regressor.estimator_.single_estimator_
    return GroupedCalibration(estimator=estimator, scores=scores, splitter=description, mapie=mapie)
