"""Fit one complete learned model from training data: the LightGBM point predictor, its grouped
conformal calibration, and the training domain, packed as a `LearnedModel`. Training, every
evaluation fold and `evaluate --holdout` all go through `fit_learned_model`, so what is evaluated
is exactly what is shipped."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from perfmodel.catalog import get_gpu
from perfmodel.features import (
    CATEGORICAL_FEATURES,
    CATEGORY_LEVELS,
    FEATURE_NAMES,
    NUMERIC_FEATURES,
    frame_records,
)
from perfmodel.learn.conformal import (
    CALIBRATION_LEVELS,
    GroupedCalibration,
    calibrate_grouped,
    fit_transfer,
    mondrian_runs,
    mondrian_scores,
)
from perfmodel.learn.interval_policy import CATEGORY_CHECKED_FEATURES, OOD_WIDENING, IntervalPolicy, Query
from perfmodel.learn.metadata import Conformal, ModelMetadata, MondrianCells, Residuals, TrainingDomain
from perfmodel.learn.model_files import METADATA_FORMAT
from perfmodel.learn.regimes import (
    LEVELS,
    MIN_RUNS_PER_CELL,
    REGIME_COLUMNS,
    THIN_EVIDENCE_WIDENING,
    regime_of,
)
from perfmodel.learn.regressor import LGBMConfig, LGBMRatioRegressor, evidence_of
from perfmodel.learn.shipped import LearnedModel

GROUP_COLUMN = "gpu"
"""Feature-table column naming the accelerator (the training domain's hardware)."""
CALIBRATION_COLUMN = "source"
"""Feature-table column whose values define the calibration groups: a held-out source is an
unseen lab's setup (its software, data pipeline and measuring habits), the closest stand-in for a
user's own job; its rows are often on accelerators no other source measured, too."""
FAMILY_COLUMN = "model_family"
"""Column of the second calibration (held-out model family), used for unseen families."""


def run_weights(kept: Any) -> Any:
    """One vote per measured run: the feature table's sample_weight (1/k for the k rows of a run),
    1 where it is missing."""
    if "sample_weight" not in kept:
        return np.ones(len(kept))
    w = np.asarray(kept["sample_weight"].astype(float), dtype=float)
    return np.where(np.isfinite(w) & (w > 0), w, 1.0)


def run_groups(kept: Any) -> list[str]:
    """Each row's run (rows of one run share it): run_group, else the row's own id."""
    groups = kept["run_group"] if "run_group" in kept else kept["row_id"]
    return [
        str(g) if g is not None and str(g) not in ("", "<NA>", "nan") else str(r)
        for g, r in zip(groups, kept["row_id"], strict=True)
    ]


def hardware_of(gpus: Any) -> tuple[list[str], list[str]]:
    """(vendors, generations) of each catalog key in `gpus`."""
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


def training_domain(X: Any, kept: Any) -> TrainingDomain:
    """What the model has seen: numeric ranges, categorical levels, accelerators."""
    gpus = [str(g) for g in kept[GROUP_COLUMN]]
    vendors, generations = hardware_of(gpus)
    ranges = {}
    for name in NUMERIC_FEATURES:
        col = X[name].astype(float)
        col = col[col.notna()]
        if len(col):
            ranges[name] = [round(float(col.min()), 6), round(float(col.max()), 6)]
    cats = {name: sorted({str(v) for v in X[name].dropna()}) for name in CATEGORY_CHECKED_FEATURES}
    return TrainingDomain(
        gpus_seen=frozenset(gpus),
        families_seen=frozenset(str(f) for f in kept[FAMILY_COLUMN]),
        vendors_seen=frozenset(vendors),
        generations_seen=frozenset(g for g, v in zip(generations, vendors, strict=True) if v != "cpu"),
        numeric_ranges=ranges,
        categories_seen=cats,
    )


def _residuals(calibration: GroupedCalibration, groups: str) -> Residuals:
    quantiles = {f"{c:g}": calibration.quantile(c) for c in CALIBRATION_LEVELS}
    return Residuals(
        calibration_groups=groups,
        splitter=calibration.splitter,
        n_residuals=int(len(calibration.scores)),
        quantiles_log={k: (None if math.isinf(v) else round(v, 6)) for k, v in quantiles.items()},
        abs_residuals_sorted=tuple(round(float(s), 5) for s in calibration.scores),
    )


def _regimes(X: Any, kept: Any) -> list[tuple[str, ...]]:
    """The regime of every row (`regimes.regime_of`), computed once for every calibration's cells."""
    families = [str(f) for f in kept[FAMILY_COLUMN]]
    rows = frame_records(X, [c for c in REGIME_COLUMNS if c in X.columns])
    return [regime_of(row, fam) for row, fam in zip(rows, families, strict=True)]


def _mondrian(regimes: list[tuple[str, ...]], kept: Any, calibration: GroupedCalibration) -> MondrianCells:
    groups = run_groups(kept)
    scored = [r for r, s in zip(regimes, calibration.row_scores, strict=True) if s == s]  # NaN: not scored
    scored_groups = [g for g, s in zip(groups, calibration.row_scores, strict=True) if s == s]
    cells = mondrian_scores(calibration.row_scores, regimes, groups, [str(s) for s in kept["source"]])
    return MondrianCells(
        levels=tuple(LEVELS),
        min_runs_per_cell=MIN_RUNS_PER_CELL,
        thin_evidence_widening=THIN_EVIDENCE_WIDENING,
        cells={k: tuple(v) for k, v in cells.items()},
        runs=mondrian_runs(scored, scored_groups),
    )


def build_metadata(
    X: Any,
    y: Any,
    kept: Any,
    num_trees: int | None,
    calibration: GroupedCalibration,
    config: LGBMConfig,
    family_calibration: GroupedCalibration | None = None,
) -> ModelMetadata:
    """Everything `LearnedModel` and `model_files` need beside the trees (format stamped on save)."""
    regimes = _regimes(X, kept)
    return ModelMetadata(
        format=METADATA_FORMAT,
        version="unregistered",
        kind="learned",
        target="log(measured step time / kernel-model step time), shrunk toward the step overhead away from "
        "measured runs and by the share that carries over to an unseen source",
        trained_rows=int(len(y)),
        feature_names=tuple(FEATURE_NAMES),
        categorical_features=tuple(CATEGORICAL_FEATURES),
        categorical_levels={k: tuple(v) for k, v in CATEGORY_LEVELS.items()},
        num_trees=num_trees,
        hyperparameters=config.to_params(),
        conformal=Conformal(
            method="MAPIE CrossConformalRegressor(method='base', conformity_score='absolute'), "
            "Mondrian per regime",
            hardware=_residuals(calibration, CALIBRATION_COLUMN),
            mondrian=_mondrian(regimes, kept, calibration),
            family=None if family_calibration is None else _residuals(family_calibration, FAMILY_COLUMN),
            family_mondrian=None if family_calibration is None else _mondrian(regimes, kept, family_calibration),
        ),
        ood_widening=OOD_WIDENING,
        interval_policy=(
            "half-width = conformal quantile of out-of-fold |log residuals| from cross-validation "
            f"holding out whole sources ({CALIBRATION_COLUMN}), one vote per run, in the query's regime "
            "(scale x kind x stack x method x precision x parameters; Mondrian); a regime with too few runs uses the "
            "nearest coarser regime (an eager job: its scale's eager jobs of any kind before its kind "
            "alone), widened, with a warning; unseen GPU: same interval plus a warning; "
            "unseen model family: the larger of that and the quantile from cross-validation holding "
            f"out whole model families ({FAMILY_COLUMN}) in the query's regime (backed off likewise), "
            "plus a warning; outside the training domain: "
            f"half-width x{OOD_WIDENING:g} plus a warning"
        ),
        domain=training_domain(X, kept),
        evidence=_with_transfer(evidence_of(X, y, run_weights(kept), config.shrink_runs), calibration),
    )


def _with_transfer(evidence: Any, calibration: GroupedCalibration) -> Any:
    """`evidence` with the calibration's transfer shares."""
    return None if evidence is None else evidence.shared(calibration.transfer, calibration.transfer_approximate)


def _calibrations(
    X: Any, y: Any, kept: Any, *, config: LGBMConfig, max_splits: int, family_calibration: bool
) -> tuple[GroupedCalibration, GroupedCalibration | None]:
    """Both grouped calibrations, their scores those of the residual share that transfers to a
    held-out source (`conformal.transfer_share`, fitted on the source calibration)."""
    weights = run_weights(kept)
    groups = np.asarray([str(g) for g in kept[CALIBRATION_COLUMN]])
    calibration = calibrate_grouped(X, y, groups, config=config, max_splits=max_splits, sample_weight=weights)
    calibration = fit_transfer(calibration)
    families = np.asarray([str(f) for f in kept[FAMILY_COLUMN]])
    if not family_calibration or len(np.unique(families)) < 2:
        return calibration, None
    family = calibrate_grouped(X, y, families, config=config, max_splits=max_splits, sample_weight=weights)
    return calibration, family.with_transfer(calibration.transfer, calibration.transfer_approximate)


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
    holding out sources (per regime), and (when `family_calibration` and there are >= 2 families)
    holding out model families. Returns the model and the hardware calibration."""
    regressor = LGBMRatioRegressor(config).fit(X, y, sample_weight=run_weights(kept))
    booster = regressor.booster_
    calibration, family_cal = _calibrations(
        X, y, kept, config=config, max_splits=max_splits, family_calibration=family_calibration
    )
    regressor.evidence_ = _with_transfer(regressor.evidence_, calibration)
    metadata = build_metadata(X, y, kept, int(booster.num_trees()), calibration, config, family_cal)
    return LearnedModel(regressor, metadata), calibration


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
