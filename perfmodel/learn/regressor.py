"""The LightGBM regressor behind the learned correction, with the scikit-learn estimator API so
that scikit-learn splitters and MAPIE can clone and refit it.

Two device classes, two boosters: a CPU and an accelerator are different machines (a CPU runs
eager ops synchronously on the cores that also compute; its BLAS, caches and memory system have
nothing in common with a GPU's), so one correction learned from both lets a few hundred CPU rows
pull GPU predictions of similar-looking workloads (eager Hugging Face models, LoRA) far off. When
both classes have at least `MIN_ROWS_PER_DEVICE_CLASS` rows, CPU rows (feature `vendor` == 'cpu')
get their own booster; otherwise one booster fits all. Both are stored in one model text,
accelerators first, the CPU booster after the `CPU_MARKER` line.

Early stopping uses a seeded random validation split carved out of the rows it is fitted on,
so in cross-validation it only ever sees the training folds. After early stopping picks the
number of trees, the booster is refitted on all of its rows with that many trees.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any

import lightgbm as lgb
import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin

from perfmodel.features import FEATURE_NAMES, categorize
from perfmodel.learn.devices import MIN_ROWS_PER_DEVICE_CLASS, cpu_rows, join_model_texts, predict_by_device
from perfmodel.learn.evidence import Evidence, evidence_rows


def evidence_of(X: Any, y: Any, weights: Any, shrink_runs: float) -> Evidence | None:
    """The evidence cells and step overheads of a feature frame with residuals `y` (one vote per
    run), or None when shrinking is off."""
    if shrink_runs <= 0:
        return None
    w = np.ones(len(X)) if weights is None else np.asarray(weights, dtype=float)
    return Evidence.fitted(evidence_rows(X), list(np.asarray(y, dtype=float)), list(w), shrink_runs)


@dataclass(frozen=True, kw_only=True)
class LGBMConfig:
    """Hyperparameters, fixed before any evaluation (never tuned on the evaluation splits)."""

    n_estimators: int = 300
    """Maximum boosting rounds (early stopping usually ends sooner)."""
    learning_rate: float = 0.1
    """Shrinkage per round."""
    num_leaves: int = 15
    """Leaves per tree (small: the dataset has thousands of rows, not millions)."""
    min_child_samples: int = 10
    """Minimum rows per leaf."""
    subsample: float = 0.8
    """Row fraction per tree (bagging every round)."""
    colsample_bytree: float = 0.8
    """Feature fraction per tree."""
    reg_lambda: float = 1.0
    """L2 regularisation on leaf values."""
    early_stopping_rounds: int = 30
    """Rounds without validation improvement before stopping."""
    validation_fraction: float = 0.15
    """Share of the fitted rows held out for early stopping."""
    min_rows_for_early_stopping: int = 60
    """Below this many rows, no validation split: all `n_estimators` rounds are used."""
    seed: int = 0
    """Seed of the validation split and of LightGBM's bagging."""
    shrink_runs: float = 10.0
    """Measured runs near a query at which its residual is trusted half (perfmodel.learn.evidence);
    0: never shrunk."""
    num_threads: int = 1
    """LightGBM threads per fit. One: on a few thousand rows a second OpenMP thread costs more
    than it gains (0.23 s vs 1.1-3.2 s per fit measured on a loaded 2-core machine); cores are
    used by fitting folds in parallel instead (`EvalConfig.n_jobs`)."""

    def to_params(self) -> dict[str, Any]:
        return asdict(self)

    def lgb_params(self) -> dict[str, Any]:
        """Parameters in LightGBM's native `lgb.train` spelling."""
        return {
            "objective": "regression",
            "learning_rate": self.learning_rate,
            "num_leaves": self.num_leaves,
            "min_data_in_leaf": self.min_child_samples,
            "bagging_fraction": self.subsample,
            "bagging_freq": 1 if self.subsample < 1 else 0,
            "feature_fraction": self.colsample_bytree,
            "lambda_l2": self.reg_lambda,
            "min_data_per_group": 5,
            "cat_smooth": 5.0,
            "seed": self.seed,
            "num_threads": self.num_threads,
            "deterministic": True,
            "force_row_wise": True,
            "verbosity": -1,
        }


def _as_frame(X: Any) -> Any:
    """MAPIE and scikit-learn pass DataFrames through; accept arrays as a fallback."""
    if isinstance(X, pd.DataFrame):
        return X
    frame = pd.DataFrame(X, columns=list(FEATURE_NAMES))
    return categorize(frame)


def fit_booster(X: Any, y: Any, config: LGBMConfig, sample_weight: Any = None) -> Any:
    """Fit a LightGBM booster on (X, y) with internal early stopping; returns `lgb.Booster`.
    `sample_weight` (one vote per measured run) weighs the rows of the fit."""
    X = _as_frame(X)
    y = np.asarray(y, dtype=float)
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=float)
    params = config.lgb_params()
    rounds = config.n_estimators
    n = len(y)
    if n >= config.min_rows_for_early_stopping:
        rng = np.random.default_rng(config.seed)
        order = rng.permutation(n)
        n_val = max(int(round(n * config.validation_fraction)), 1)
        val, tr = order[:n_val], order[n_val:]
        train_set = lgb.Dataset(X.iloc[tr], y[tr], weight=None if w is None else w[tr], free_raw_data=False)
        val_set = lgb.Dataset(
            X.iloc[val],
            y[val],
            weight=None if w is None else w[val],
            reference=train_set,
            free_raw_data=False,
        )
        probe = lgb.train(
            params,
            train_set,
            num_boost_round=config.n_estimators,
            valid_sets=[val_set],
            callbacks=[lgb.early_stopping(config.early_stopping_rounds, verbose=False)],
            keep_training_booster=True,  # only its best round is read: no copy through the model text
        )
        rounds = max(int(probe.best_iteration or config.n_estimators), 1)
    full = lgb.Dataset(X, y, weight=w, free_raw_data=False)
    return lgb.train(params, full, num_boost_round=rounds)


RECENT_FITS_KEPT = 16
"""Fits remembered per process (`LGBMRatioRegressor.fit`). A training fold calibrates twice on the
same rows (holding out sources, then model families), and MAPIE fits each calibration's final
estimator on all of them; the final model adds its own fit of the same rows: the same booster,
fitted two or three times. Fits are deterministic (`lgb_params`), so the second and third are the
first one's boosters. Enough are kept that the first outlives a calibration's fold fits in between
(up to `EvalConfig.final_max_splits`, 12)."""
_RECENT_FITS: OrderedDict[str, tuple[Any, Any, Any]] = OrderedDict()


def forget_recent_fits() -> None:
    """Fit anew from now on (a test comparing two ways of fitting the same rows)."""
    _RECENT_FITS.clear()


def _fit_key(X: Any, y: Any, w: Any, config: LGBMConfig) -> str:
    """A digest of everything a fit depends on: the frame's columns, types (a categorical's levels)
    and values, targets, weights, config."""
    types = [(c, str(t), list(getattr(t, "categories", []))) for c, t in X.dtypes.items()]
    h = hashlib.blake2b(digest_size=20)
    h.update(repr((config, types, X.shape)).encode())
    h.update(pd.util.hash_pandas_object(X, index=False).to_numpy().tobytes())
    h.update(np.ascontiguousarray(y, dtype=float).tobytes())
    h.update(b"unweighted" if w is None else np.ascontiguousarray(w, dtype=float).tobytes())
    return h.hexdigest()


class LGBMRatioRegressor(RegressorMixin, BaseEstimator):
    """Predicts y = log(t_measured / t_bound) from `perfmodel.features` feature frames."""

    def __init__(self, config: LGBMConfig | None = None) -> None:
        self.config = config

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> LGBMRatioRegressor:
        config = self.config or LGBMConfig()
        X = _as_frame(X)
        y = np.asarray(y, dtype=float)
        w = None if sample_weight is None else np.asarray(sample_weight, dtype=float)
        key = _fit_key(X, y, w, config)
        if key in _RECENT_FITS:
            _RECENT_FITS.move_to_end(key)
        else:
            _RECENT_FITS[key] = self._boost(X, y, w, config)
            while len(_RECENT_FITS) > RECENT_FITS_KEPT:
                _RECENT_FITS.popitem(last=False)
        self.booster_, self.cpu_booster_, self.evidence_ = _RECENT_FITS[key]
        self.n_features_in_ = self.booster_.num_feature()
        return self

    @staticmethod
    def _boost(X: Any, y: Any, w: Any, config: LGBMConfig) -> tuple[Any, Any, Any]:
        """(accelerator or only booster, CPU booster or None, evidence) fitted on (X, y, w)."""
        cpu = cpu_rows(X)
        evidence = evidence_of(X, y, w, config.shrink_runs)
        if cpu.sum() >= MIN_ROWS_PER_DEVICE_CLASS and (~cpu).sum() >= MIN_ROWS_PER_DEVICE_CLASS:
            booster = fit_booster(X[~cpu], y[~cpu], config, None if w is None else w[~cpu])
            return booster, fit_booster(X[cpu], y[cpu], config, None if w is None else w[cpu]), evidence
        return fit_booster(X, y, config, w), None, evidence

    def predict(self, X: Any, rows: Any = None) -> Any:
        """The boosters' log ratio, shrunk toward the step overhead where few measured runs are near
        (perfmodel.learn.evidence); `rows`: X's records when the caller has them already."""
        X = _as_frame(X)
        raw = predict_by_device(self.booster_, self.cpu_booster_, X)
        if self.evidence_ is None:
            return raw
        return np.asarray(self.evidence_.blend(list(raw), rows or evidence_rows(X)), dtype=float)

    def model_text(self) -> str:
        """Both boosters as one stored model text (`join_model_texts`)."""
        cpu = None if self.cpu_booster_ is None else str(self.cpu_booster_.model_to_string())
        return join_model_texts(str(self.booster_.model_to_string()), cpu)
