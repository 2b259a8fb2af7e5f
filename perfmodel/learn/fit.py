"""Fit one complete learned model from training data: the LightGBM point predictor, its grouped
conformal calibration, and the training domain, packed as a `LearnedModel`. Training, every
evaluation fold and `evaluate --holdout` all go through `fit_learned_model`, so what is evaluated
is exactly what is shipped."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from perfmodel.learn.conformal import CALIBRATION_LEVELS, GroupedCalibration, calibrate_grouped
from perfmodel.learn.interval_policy import CATEGORY_CHECKED_FEATURES, OOD_WIDENING, IntervalPolicy, Query
from perfmodel.learn.model_files import METADATA_FORMAT
from perfmodel.learn.regressor import LGBMConfig
from perfmodel.learn.shipped import LearnedModel

GROUP_COLUMN = "gpu"
"""Feature-table column whose values define the calibration groups (held-out hardware)."""
FAMILY_COLUMN = "model_family"
"""Column of the second calibration (held-out model family), used for unseen families."""


def hardware_of(gpus: Any) -> tuple[list[str], list[str]]:
    """(vendors, generations) of each catalog key in `gpus`."""
    from perfmodel.catalog import get_gpu

    cache: dict[str, tuple[str, str]] = {}
    vendors, generations = [], []
    for name in gpus:
        name = str(name)
        if name not in cache:
            spec = get_gpu(name)
            cache[name] = (spec.vendor, spec.generation)
        vendors.append(cache[name][0])
        generations.append(cache[name][1])
    return vendors, generations


def queries_for_rows(X: Any, gpus: Any, families: Any) -> list[Query]:
    """One interval-policy query per row of the feature frame `X`, which ran on `gpus` (catalog
    keys) for models of `families`."""
    gpus = [str(g) for g in gpus]
    vendors, generations = hardware_of(gpus)
    return [
        Query(features=row, gpu=gpu, vendor=vendor, generation=generation, model_family=str(family))
        for row, gpu, vendor, generation, family in zip(
            X.to_dict("records"), gpus, vendors, generations, families, strict=True
        )
    ]


def training_domain(X: Any, kept: Any) -> dict[str, Any]:
    """What the model has seen: numeric ranges, categorical levels, accelerators."""
    from perfmodel.features import NUMERIC_FEATURES

    gpus = [str(g) for g in kept[GROUP_COLUMN]]
    vendors, generations = hardware_of(gpus)
    ranges = {}
    for name in NUMERIC_FEATURES:
        col = X[name].astype(float)
        col = col[col.notna()]
        if len(col):
            ranges[name] = [round(float(col.min()), 6), round(float(col.max()), 6)]
    cats = {name: sorted({str(v) for v in X[name].dropna()}) for name in CATEGORY_CHECKED_FEATURES}
    return {
        "gpus_seen": sorted(set(gpus)),
        "families_seen": sorted({str(f) for f in kept[FAMILY_COLUMN]}),
        "vendors_seen": sorted(set(vendors)),
        "generations_seen": sorted({g for g, v in zip(generations, vendors, strict=True) if v != "cpu"}),
        "numeric_ranges": ranges,
        "categories_seen": cats,
    }


def _residuals(calibration: GroupedCalibration) -> dict[str, Any]:
    quantiles = {f"{c:g}": calibration.quantile(c) for c in CALIBRATION_LEVELS}
    return {
        "splitter": calibration.splitter,
        "n_residuals": int(len(calibration.scores)),
        "quantiles_log": {k: (None if math.isinf(v) else round(v, 6)) for k, v in quantiles.items()},
        "abs_residuals_sorted": [round(float(s), 5) for s in calibration.scores],
    }


def build_metadata(
    X: Any,
    y: Any,
    kept: Any,
    num_trees: int | None,
    calibration: GroupedCalibration,
    config: LGBMConfig,
    family_calibration: GroupedCalibration | None = None,
) -> dict[str, Any]:
    """Everything `LearnedModel` and `model_files` need beside the trees (format stamped on save)."""
    from perfmodel.features import CATEGORICAL_FEATURES, CATEGORY_LEVELS, FEATURE_NAMES

    return {
        "format": METADATA_FORMAT,
        "version": "unregistered",
        "kind": "learned",
        "target": "log(measured step time / roofline bound)",
        "trained_rows": int(len(y)),
        "feature_names": list(FEATURE_NAMES),
        "categorical_features": list(CATEGORICAL_FEATURES),
        "categorical_levels": {k: list(v) for k, v in CATEGORY_LEVELS.items()},
        "num_trees": num_trees,
        "hyperparameters": config.to_params(),
        "conformal": {
            "method": "MAPIE CrossConformalRegressor(method='base', conformity_score='absolute')",
            "calibration_groups": GROUP_COLUMN,
            **_residuals(calibration),
            "family": None
            if family_calibration is None
            else {"calibration_groups": FAMILY_COLUMN, **_residuals(family_calibration)},
        },
        "ood_widening": OOD_WIDENING,
        "interval_policy": (
            "half-width = conformal quantile of out-of-fold |log residuals| from cross-validation "
            f"holding out whole accelerators ({GROUP_COLUMN}); unseen GPU: same interval plus a "
            f"warning; unseen model family: the larger of that and the quantile from cross-validation "
            f"holding out whole model families ({FAMILY_COLUMN}), plus a warning; outside the "
            f"training domain: half-width x{OOD_WIDENING:g} plus a warning"
        ),
        "domain": training_domain(X, kept),
    }


def _calibrations(
    X: Any, y: Any, kept: Any, *, config: LGBMConfig, max_splits: int, family_calibration: bool
) -> tuple[GroupedCalibration, GroupedCalibration | None]:
    import numpy as np

    groups = np.asarray([str(g) for g in kept[GROUP_COLUMN]])
    calibration = calibrate_grouped(X, y, groups, config=config, max_splits=max_splits)
    families = np.asarray([str(f) for f in kept[FAMILY_COLUMN]])
    if not family_calibration or len(np.unique(families)) < 2:
        return calibration, None
    return calibration, calibrate_grouped(X, y, families, config=config, max_splits=max_splits)


def fit_learned_model(
    X: Any,
    y: Any,
    kept: Any,
    *,
    config: LGBMConfig,
    max_splits: int = 12,
    family_calibration: bool = True,
) -> tuple[LearnedModel, GroupedCalibration]:
    """Fit the point predictor on every row and calibrate it on grouped out-of-fold residuals:
    holding out accelerators, and (when `family_calibration` and there are >= 2 families)
    holding out model families. Returns the model and the hardware calibration."""
    from perfmodel.learn.regressor import LGBMRatioRegressor

    booster = LGBMRatioRegressor(config).fit(X, y).booster_
    calibration, family_cal = _calibrations(
        X, y, kept, config=config, max_splits=max_splits, family_calibration=family_calibration
    )
    metadata = build_metadata(X, y, kept, int(booster.num_trees()), calibration, config, family_cal)
    return LearnedModel(booster, metadata), calibration


def fit_fold_model(
    X: Any,
    y: Any,
    kept: Any,
    *,
    config: LGBMConfig,
    max_splits: int,
    family_calibration: bool,
) -> tuple[IntervalPolicy, Callable[[Any], Any]]:
    """What evaluating a model fitted on (X, y) needs, at one fit less than `fit_learned_model`:
    its interval policy, and point predictions from the regressor MAPIE fitted on all of (X, y)
    during calibration (the same fit as `fit_learned_model`'s, a test checks them equal)."""
    calibration, family_cal = _calibrations(
        X, y, kept, config=config, max_splits=max_splits, family_calibration=family_calibration
    )
    policy = IntervalPolicy.from_metadata(build_metadata(X, y, kept, None, calibration, config, family_cal))

    def predict(X_new: Any) -> Any:
        return calibration.mapie.predict(X_new, aggregate_point_predictions=None)

    return policy, predict
