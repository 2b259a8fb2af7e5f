"""The evaluation protocol (DESIGN.md, "Evaluation protocol"): folds, out-of-fold predictions
fitted in worker processes, and the tables of `perfmodel.learn.metrics`.

Splits (`metrics.SPLITS`): random 5-fold over runs (seen everything), leave-one-hardware-out (group
= `gpu`), leave-one-model-family-out (group = `model_family`) and leave-one-source-out over single-GPU
/ single-node rows (each source with such rows is held out whole; its single-node rows are scored:
an unseen lab's setup, the closest stand-in for a user's own job). The headlines are
leave-one-source-out and leave-one-hardware-out. Rows of one run (`run_group`) are never split
across folds, and every metric weighs rows so one run is one vote (`sample_weight`). In every outer fold the
complete learned model - point predictor, grouped conformal calibration, training domain - is
fitted on the training folds only (`fit.fit_fold_model`: the fit `fit_learned_model` makes for
the shipped model, point predictions read from the calibration's own fit), then scored on the
held-out fold, so intervals are evaluated as served, out-of-domain widening included. Baselines
on the same folds: the analytic bound itself (efficiency 1, y_hat = 0) and a constant efficiency
fitted on the training folds (y_hat = median of training y: "6ND / (peak * MFU)").

Rendering: Markdown in `perfmodel.learn.report`, Rich tables in `perfmodel.cli.render_eval`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.model_selection import GroupKFold, LeaveOneGroupOut

from perfmodel.catalog import get_gpu
from perfmodel.catalog.frameworks import find_recipe
from perfmodel.errors import ConfigError, DataError
from perfmodel.features import rows_to_training_data
from perfmodel.kernels.fitting import fit_efficiency_table
from perfmodel.learn.conformal import CALIBRATION_LEVELS
from perfmodel.learn.data import load_training_data
from perfmodel.learn.fit import (
    CALIBRATION_COLUMN,
    FAMILY_COLUMN,
    GROUP_COLUMN,
    fit_fold_model,
    queries_for_rows,
    run_groups,
    run_weights,
)
from perfmodel.learn.metrics import (
    HEADLINE_METRIC,
    SPLITS,
    breakdown,
    flat_metrics,
    pct,
    regime_table,
    summarize,
)
from perfmodel.learn.regimes import regime_frame
from perfmodel.learn.regressor import LGBMConfig
from perfmodel.schema import COLUMN_NAMES

Progress = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """How evaluation is run (fixed before looking at any result)."""

    lgbm: LGBMConfig = field(default_factory=LGBMConfig)
    """Hyperparameters of every fold's model."""
    random_folds: int = 5
    """Folds of the random split."""
    max_group_folds: int = 8
    """Folds of leave-one-hardware-out and leave-one-model-family-out when there are more groups
    than this: GroupKFold over whole accelerators (families), each held out with a few others, to
    keep `perfmodel train` within its time target (every group is still held out once)."""
    inner_max_splits: int = 3
    """Calibration folds inside each outer training fold (grouped). Three, not one per group as
    in the shipped model, to keep `perfmodel train` under 3 minutes on 2 cores; each calibration
    model then sees 2/3 of the training groups, so evaluated intervals are slightly conservative."""
    final_max_splits: int = 12
    """Calibration folds of the shipped model (one accelerator per fold up to this many)."""
    splits: tuple[str, ...] = tuple(SPLITS)
    """Which splits to run."""
    seed: int = 0
    """Seed of the random split."""
    n_jobs: int = 2
    """Folds fitted concurrently, in worker processes (1 = sequentially in this process)."""


@dataclass(frozen=True, kw_only=True)
class Evaluation:
    """Out-of-fold predictions of every split and the tables derived from them."""

    predictions: Any
    """One row per (split, held-out row): y, predictions of each method, interval half-widths."""
    summary: Any
    """One row per (split, method): error and coverage metrics (`metrics.summarize`)."""
    breakdown: Any
    """Per split, per gpu and per source: errors of each method and coverage."""
    regimes: Any = None
    """Per headline split and regime: errors and coverage (`metrics.regime_table`)."""
    skipped: dict[str, str]
    """Splits that could not run, with the reason."""
    kernel_refits: dict[str, Any] = field(default_factory=dict)
    """Accelerator -> the kernel efficiency fitted without it (`EfficiencyParams`) by the folds
    of `unseen_gpu`: the kernel-level evaluation holds the same accelerators out and reuses them."""

    def metrics(self) -> dict[str, float]:
        """Flat metric names with units, for MLflow (e.g. loho_median_ape_pct)."""
        return flat_metrics(self.summary)

    @property
    def headline(self) -> float | None:
        return self.metrics().get(HEADLINE_METRIC)


def _tabulate(predictions: Any, skipped: dict[str, str], kernel_refits: dict[str, Any] | None = None) -> Evaluation:
    return Evaluation(
        predictions=predictions,
        summary=summarize(predictions),
        breakdown=breakdown(predictions),
        regimes=regime_table(predictions),
        skipped=skipped,
        kernel_refits=dict(kernel_refits or {}),
    )


# --- folds ----------------------------------------------------------------------------------


def single_node_mask(X: Any) -> Any:
    """Rows of jobs on one GPU or one node (the users' regime)."""
    return np.asarray(X["num_nodes"].astype(float) <= 1, dtype=bool)


def eager_single_gpu_mask(X: Any) -> Any:
    """Rows of eager jobs on one GPU (no fused kernels, not compiled): where most users are."""
    return np.asarray(
        (X["num_gpus"].astype(float) <= 1)
        & (X["recipe_fused_kinds"].astype(float) == 0)
        & (X["torch_compile"].astype(float) == 0),
        dtype=bool,
    )


def framework_groups(kept: Any) -> Any:
    """Each row's training stack as its recipe key (aliases folded: composer-fsdp -> composer)."""
    names = []
    for value in kept["framework"]:
        recipe = find_recipe(str(value))
        names.append(recipe.name if recipe is not None else str(value))
    return np.asarray(names)


MIN_FRAMEWORK_RUNS = 5
"""Runs a framework needs to be held out as a fold of leave-one-framework-out."""


def make_folds(split: str, kept: Any, config: EvalConfig, X: Any = None) -> list[tuple[Any, Any, str]]:
    """(train_idx, test_idx, label) for each outer fold of `split`."""
    n = len(kept)
    if split == "random":
        runs = np.asarray(run_groups(kept))
        k = min(config.random_folds, len(np.unique(runs)))
        if k < 2:
            raise DataError(f"random split needs at least 2 runs, got {len(np.unique(runs))}")
        kf = GroupKFold(n_splits=k, shuffle=True, random_state=config.seed)
        return [(tr, te, f"fold{i}") for i, (tr, te) in enumerate(kf.split(np.zeros(n), groups=runs))]
    if split in ("loso", "unseen_gpu") and X is None:
        raise DataError(f"{SPLITS[split]} needs the feature frame")
    if split == "loso":
        sources = np.asarray([str(s) for s in kept[CALIBRATION_COLUMN]])
        single = single_node_mask(X)
        folds = []
        for source in sorted(set(sources[single])):
            held = sources == source
            folds.append((np.flatnonzero(~held), np.flatnonzero(held & single), source))
        if len(set(sources)) < 2 or not folds:
            raise DataError("leave-one-source-out needs at least 2 sources and single-node rows")
        return folds
    if split == "unseen_gpu":
        gpus = np.asarray([str(g) for g in kept[GROUP_COLUMN]])
        eager = eager_single_gpu_mask(X)
        folds = []
        for gpu in sorted(set(gpus[eager])):
            held = gpus == gpu
            folds.append((np.flatnonzero(~held), np.flatnonzero(held & eager), gpu))
        if len(set(gpus)) < 2 or not folds:
            raise DataError("accelerator never seen needs at least 2 accelerators and eager single-GPU rows")
        return folds
    if split == "lofw":
        names = framework_groups(kept)
        weights = run_weights(kept)
        folds = []
        for name in sorted(set(names)):
            held = names == name
            if weights[held].sum() >= MIN_FRAMEWORK_RUNS and (~held).any():
                folds.append((np.flatnonzero(~held), np.flatnonzero(held), name))
        if not folds:
            raise DataError("leave-one-framework-out needs at least 2 frameworks with runs")
        return folds
    column = {"loho": GROUP_COLUMN, "lofo": FAMILY_COLUMN}.get(split)
    if column is None:
        raise ConfigError(f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
    groups = np.asarray([str(g) for g in kept[column]])
    distinct = np.unique(groups)
    if len(distinct) < 2:
        raise DataError(f"{SPLITS[split]} needs at least 2 distinct {column} values, got {len(distinct)}")
    if len(distinct) <= config.max_group_folds:
        return [(tr, te, str(groups[te][0])) for tr, te in LeaveOneGroupOut().split(np.zeros(n), groups=groups)]
    kf = GroupKFold(n_splits=config.max_group_folds, shuffle=True, random_state=config.seed)
    return [
        (tr, te, "+".join(sorted(set(groups[te])))[:80])
        for tr, te in kf.split(np.zeros(n), groups=groups)
    ]


def without_accelerator(kept: Any, gpu: str, params: Any) -> tuple[Any, Any]:
    """(X, y) of every row of `kept` with the kernel efficiency `params` fitted without `gpu`'s
    kernel rows (`fit_efficiency(table, exclude_gpus=(gpu,))`) and with `gpu`'s measured matmul
    ceilings taken out of its spec (they are kernel data too): what the model knows of an
    accelerator it has never seen is its datasheet."""
    stripped = {gpu: dataclasses.replace(get_gpu(gpu), measured={})} if gpu != "cpu" else {}
    X, y, again, _ = rows_to_training_data(kept, efficiency=params, gpus=stripped)
    if len(again) != len(kept):
        raise DataError(f"refitting the kernel model without {gpu} lost {len(kept) - len(again)} rows")
    return X, y


def _needs_refit(gpu: str, kernel_table: Any) -> bool:
    """True when `gpu` has kernel rows or measured ceilings that an unseen accelerator must not have."""
    if kernel_table is None or gpu == "cpu":
        return False
    in_table = bool((kernel_table["gpu"].astype(str) == gpu).any())
    return in_table or bool(get_gpu(gpu).measured)


def refitted_accelerators(kept: Any, config: EvalConfig, X: Any = None, kernel_table: Any = None) -> tuple[str, ...]:
    """The accelerators whose `unseen_gpu` folds refit the kernel model without them (`run_splits`
    returns those fits in `Evaluation.kernel_refits`); none when the split does not run."""
    if "unseen_gpu" not in config.splits or kernel_table is None:
        return ()
    try:
        folds = make_folds("unseen_gpu", kept, config, X)
    except DataError:
        return ()
    return tuple(str(label) for _, _, label in folds if _needs_refit(label, kernel_table))


def predict_fold(X: Any, y: Any, kept: Any, train_idx: Any, test_idx: Any, config: EvalConfig) -> Any:
    """Fit everything on the training rows; predictions, half-widths and warnings on the test rows."""
    X_tr, y_tr, kept_tr = X.iloc[train_idx], y[train_idx], kept.iloc[train_idx]
    X_te, y_te, kept_te = X.iloc[test_idx], y[test_idx], kept.iloc[test_idx]
    families = [str(f) for f in kept_te[FAMILY_COLUMN]]
    # the held-out-family calibration is only needed (and only paid for) when a test family is new
    new_family = not set(families) <= {str(f) for f in kept_tr[FAMILY_COLUMN]}
    policy, point = fit_fold_model(
        X_tr,
        y_tr,
        kept_tr,
        config=config.lgbm,
        max_splits=config.inner_max_splits,
        family_calibration=new_family,
    )
    pred = np.asarray(point(X_te), dtype=float)
    queries = queries_for_rows(X_te, kept_te[GROUP_COLUMN], families)
    checks = [policy.check(q) for q in queries]
    weights = run_weights(kept_te)
    out = pd.DataFrame(
        {
            "row": np.asarray(test_idx),
            "y": y_te,
            "pred_model": pred,
            "pred_const": float(np.median(y_tr)),
            "pred_bound": 0.0,
            "pred_oracle": float(np.quantile(y_te, 0.5, weights=weights, method="inverted_cdf")),
            "widened": [c.widen for c in checks],
            "new_family": [c.new_family for c in checks],
            "n_warnings": [len(c.warnings) for c in checks],
            "gpu": [q.gpu for q in queries],
            "source": [str(s) for s in kept_te["source"]],
            "model_family": families,
            "weight": weights,
            "bound_s": np.power(10.0, X_te["log_bound_s"].astype(float).to_numpy()),
        }
    )

    regimes = regime_frame(X_te, families).reset_index(drop=True)
    for column in regimes.columns:
        out[column] = regimes[column].to_numpy()
    for c in CALIBRATION_LEVELS:
        out[f"half{pct(c)}"] = [policy.interval(q, c)[0] for q in queries]
    return out


def _fold_task(
    X: Any, y: Any, kept: Any, train_idx: Any, test_idx: Any, config: EvalConfig, refit_gpu: str | None,
    kernel_table: Any,
) -> tuple[Any, Any]:
    """One fold in a worker: (`predict_fold`'s frame, the kernel efficiency fitted without
    `refit_gpu` or None). `refit_gpu`: first refit the kernel model without that accelerator and
    reprice every row (`without_accelerator`)."""
    params = None
    if refit_gpu is not None:
        params = fit_efficiency_table(kernel_table, exclude_gpus=(refit_gpu,)).params
        X, y = without_accelerator(kept, refit_gpu, params)
    return predict_fold(X, y, kept, train_idx, test_idx, config), params


def run_splits(
    splits: tuple[str, ...], X: Any, y: Any, kept: Any, config: EvalConfig, progress: Progress | None = None,
    kernel_table: Any = None,
) -> tuple[list[Any], dict[str, str], dict[str, Any]]:
    """Out-of-fold predictions of every split (one frame per split), the splits skipped and the
    kernel efficiencies the `unseen_gpu` folds refitted (accelerator -> `EfficiencyParams`).
    All folds of all splits are fitted on `config.n_jobs` worker *processes* (joblib's loky):
    concurrent LightGBM fits in threads of one process are not safe (they crashed the
    interpreter here; LightGBM's docs warn against simultaneous jobs in one process).
    Folds of `unseen_gpu` refit the kernel model without their accelerator (`kernel_table`)."""
    tasks, skipped = [], {}
    for split in splits:
        try:
            folds = make_folds(split, kept, config, X)
        except DataError as exc:
            skipped[split] = str(exc)
            continue
        for i, (tr, te, label) in enumerate(folds):
            refit = label if split == "unseen_gpu" and _needs_refit(label, kernel_table) else None
            tasks.append((split, i, len(folds), tr, te, label, refit))
    if "unseen_gpu" in splits and kernel_table is None:
        skipped["unseen_gpu (kernel refit)"] = "no kernel table: accelerators keep their kernel data in these folds"
    backend = "loky" if config.n_jobs > 1 else "sequential"
    order = sorted(range(len(tasks)), key=lambda i: tasks[i][6] is None)  # refits (slowest) first
    results = Parallel(n_jobs=config.n_jobs, backend=backend, return_as="generator")(
        delayed(_fold_task)(X, y, kept, tasks[i][3], tasks[i][4], config, tasks[i][6],
                            kernel_table if tasks[i][6] else None)
        for i in order
    )
    parts: dict[int, Any] = {}
    refits: dict[str, Any] = {}
    for done, ((part, params), i) in enumerate(zip(results, order, strict=True), start=1):
        split, k, n, _, te, label, refit = tasks[i]
        if refit is not None:
            refits[str(refit)] = params
        part.insert(0, "fold", label)
        part.insert(0, "split", split)
        parts[i] = part
        if progress:
            extra = ", kernel model refitted without it" if refit else ""
            progress(f"[{done}/{len(tasks)}] {SPLITS[split]}: fold {k + 1}/{n} ({label}, {len(te)} rows{extra})")
    by_split = [[parts[i] for i in range(len(tasks)) if tasks[i][0] == split] for split in splits]
    return [pd.concat(ps, ignore_index=True) for ps in by_split if ps], skipped, refits


# --- entry points -----------------------------------------------------------------------------


def evaluate_all(
    X: Any, y: Any, kept: Any, config: EvalConfig | None = None, progress: Progress | None = None,
    kernel_table: Any = None,
) -> Evaluation:
    """Run every split of the protocol and tabulate the results."""
    config = config or EvalConfig()
    y = np.asarray(y, dtype=float)
    parts, skipped, refits = run_splits(config.splits, X, y, kept, config, progress, kernel_table)
    if not parts:
        raise DataError("no evaluation split could run: " + "; ".join(skipped.values()))
    return _tabulate(pd.concat(parts, ignore_index=True), skipped, refits)


def evaluate_holdout(
    X: Any, y: Any, kept: Any, key: str, value: str, config: EvalConfig | None = None
) -> Evaluation:
    """Train without the rows where `kept[key] == value`; report errors on those rows only."""
    config = config or EvalConfig()
    if key not in COLUMN_NAMES:
        raise ConfigError(
            f"--holdout key {key!r} is not a feature-table column; e.g. gpu, model_family, source, framework"
        )
    values = kept[key].astype("string")
    mask = (values == value).fillna(False).to_numpy(dtype=bool)
    if not mask.any():
        present = sorted({str(v) for v in values.dropna()})
        shown = ", ".join(present[:20]) + (" ..." if len(present) > 20 else "")
        raise ConfigError(f"no trainable rows with {key}={value!r}; values present: {shown}")
    if mask.all():
        raise ConfigError(f"every row has {key}={value!r}; nothing left to train on")
    y = np.asarray(y, dtype=float)
    part = predict_fold(X, y, kept, np.flatnonzero(~mask), np.flatnonzero(mask), config)
    part.insert(0, "fold", f"{key}={value}")
    part.insert(0, "split", f"holdout:{key}={value}")
    return _tabulate(part, {})


def evaluate_features(
    features_path: Any = None,
    *,
    holdout: tuple[str, str] | None = None,
    config: EvalConfig | None = None,
    progress: Progress | None = None,
) -> Evaluation:
    """Read the feature table and run the protocol (or one holdout: (column, value))."""
    data = load_training_data(features_path)
    if progress:
        progress(f"{len(data.y)} trainable rows of {len(data.table)} ({data.kept['gpu'].nunique()} GPUs)")
    if holdout is not None:
        if progress:
            progress(f"training without {holdout[0]}={holdout[1]}")
        return evaluate_holdout(data.X, data.y, data.kept, holdout[0], holdout[1], config)
    return evaluate_all(data.X, data.y, data.kept, config, progress, data.kernel_table)
