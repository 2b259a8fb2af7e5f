"""The evaluation protocol (docs/DESIGN.md, "Evaluation protocol").

Splits: random 5-fold (seen everything), leave-one-hardware-out (group = `gpu`, the headline) and
leave-one-model-family-out (group = `model_family`). In every outer fold the complete learned
model - point predictor, grouped conformal calibration, training domain - is fitted on the
training folds only (`fit_learned_model`), then scored on the held-out fold, so intervals are
evaluated as served, out-of-domain widening included.

Metrics are on throughput (step time's reciprocal): with y = log(t / t_bound) and prediction y_hat,
predicted / measured throughput = exp(y - y_hat), so APE = |exp(y - y_hat) - 1|. Baselines on
the same folds: the analytic bound itself (efficiency 1, y_hat = 0) and a constant efficiency
fitted on the training folds (y_hat = median of training y: "6ND / (peak * MFU)").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from perfmodel.errors import ConfigError, DataError
from perfmodel.learn.conformal import CALIBRATION_LEVELS
from perfmodel.learn.fit import FAMILY_COLUMN, GROUP_COLUMN, fit_learned_model, hardware_of
from perfmodel.learn.regressor import LGBMConfig

SPLITS: dict[str, str] = {
    "random": "random 5-fold",
    "loho": "leave-one-hardware-out",
    "lofo": "leave-one-model-family-out",
}
HEADLINE_SPLIT = "loho"
HEADLINE_METRIC = "loho_median_ape_pct"
METHODS: dict[str, str] = {
    "model": "learned (LightGBM x roofline)",
    "const": "constant efficiency (median of training folds)",
    "bound": "analytic bound (efficiency 1)",
}
TARGETS: dict[str, str] = {
    "loho_median_ape_pct": "<= 10",
    "random_median_ape_pct": "<= 5",
    "coverage90_loho_pct": "85..95",
}

Progress = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """How evaluation is run (fixed before looking at any result)."""

    lgbm: LGBMConfig = field(default_factory=LGBMConfig)
    """Hyperparameters of every fold's model."""
    random_folds: int = 5
    """Folds of the random split."""
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


@dataclass
class Evaluation:
    """Out-of-fold predictions of every split and the tables derived from them."""

    predictions: Any
    """One row per (split, held-out row): y, predictions of each method, interval half-widths."""
    summary: Any
    """One row per (split, method): error and coverage metrics."""
    breakdown: Any
    """Per split, per gpu and per source: errors of each method and coverage."""
    skipped: dict[str, str]
    """Splits that could not run, with the reason."""

    def metrics(self) -> dict[str, float]:
        """Flat metric names with units, for MLflow (e.g. loho_median_ape_pct)."""
        out: dict[str, float] = {}
        for rec in self.summary.to_dict("records"):
            split, method = rec["split"], rec["method"]
            prefix = split if method == "model" else f"{split}_{method}"
            for key in ("median_ape_pct", "p90_ape_pct", "mean_ape_pct"):
                out[f"{prefix}_{key}"] = float(rec[key])
            if method == "model":
                for c in CALIBRATION_LEVELS:
                    out[f"coverage{_pct(c)}_{split}_pct"] = float(rec[f"coverage{_pct(c)}_pct"])
                    out[f"width{_pct(c)}_{split}_pct"] = float(rec[f"median_rel_width{_pct(c)}_pct"])
                out[f"{split}_widened_rows_pct"] = float(rec["widened_rows_pct"])
                out[f"{split}_rows"] = float(rec["n_rows"])
                out[f"{split}_folds"] = float(rec["n_folds"])
        return out

    @property
    def headline(self) -> float | None:
        return self.metrics().get(HEADLINE_METRIC)

    def to_markdown(self) -> str:
        return summary_markdown(self.summary) + "\n" + breakdown_markdown(self.breakdown)


def _pct(c: float) -> str:
    return f"{round(c * 100):d}"


# --- folds ----------------------------------------------------------------------------------


def make_folds(split: str, kept: Any, config: EvalConfig) -> list[tuple[Any, Any, str]]:
    """(train_idx, test_idx, label) for each outer fold of `split`."""
    import numpy as np
    from sklearn.model_selection import KFold, LeaveOneGroupOut

    n = len(kept)
    if split == "random":
        k = min(config.random_folds, n)
        if k < 2:
            raise DataError(f"random split needs at least 2 rows, got {n}")
        kf = KFold(n_splits=k, shuffle=True, random_state=config.seed)
        return [(tr, te, f"fold{i}") for i, (tr, te) in enumerate(kf.split(np.zeros(n)))]
    column = {"loho": GROUP_COLUMN, "lofo": "model_family"}.get(split)
    if column is None:
        raise ConfigError(f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
    groups = np.asarray([str(g) for g in kept[column]])
    if len(np.unique(groups)) < 2:
        raise DataError(
            f"{SPLITS[split]} needs at least 2 distinct {column} values, got {len(np.unique(groups))}"
        )
    return [(tr, te, str(groups[te][0])) for tr, te in LeaveOneGroupOut().split(np.zeros(n), groups=groups)]


# --- one fold ---------------------------------------------------------------------------------


def predict_fold(X: Any, y: Any, kept: Any, train_idx: Any, test_idx: Any, config: EvalConfig) -> Any:
    """Fit everything on the training rows; predictions, half-widths and warnings on the test rows."""
    import numpy as np
    import pandas as pd

    X_tr, y_tr, kept_tr = X.iloc[train_idx], y[train_idx], kept.iloc[train_idx]
    X_te, y_te, kept_te = X.iloc[test_idx], y[test_idx], kept.iloc[test_idx]
    families = [str(f) for f in kept_te[FAMILY_COLUMN]]
    # the held-out-family calibration is only needed (and only paid for) when a test family is new
    new_family = not set(families) <= {str(f) for f in kept_tr[FAMILY_COLUMN]}
    model, _ = fit_learned_model(
        X_tr,
        y_tr,
        kept_tr,
        config=config.lgbm,
        max_splits=config.inner_max_splits,
        family_calibration=new_family,
    )
    pred = model.predict_log_ratio(X_te)
    gpus = [str(g) for g in kept_te[GROUP_COLUMN]]
    vendors, generations = hardware_of(gpus)
    checks = model.domain_warnings(X_te, gpus, vendors, generations, families)
    out = pd.DataFrame(
        {
            "row": np.asarray(test_idx),
            "y": y_te,
            "pred_model": pred,
            "pred_const": float(np.median(y_tr)),
            "pred_bound": 0.0,
            "widened": [widen for _, _, widen in checks],
            "new_family": [nf for _, nf, _ in checks],
            "n_warnings": [len(w) for w, _, _ in checks],
            "gpu": gpus,
            "source": [str(s) for s in kept_te["source"]],
            "model_family": [str(s) for s in kept_te["model_family"]],
        }
    )
    for c in CALIBRATION_LEVELS:
        half = model.half_widths(X_te, gpus, vendors, generations, families, c)
        out[f"half{_pct(c)}"] = [h for h, _ in half]
    return out


def run_splits(
    splits: tuple[str, ...], X: Any, y: Any, kept: Any, config: EvalConfig, progress: Progress | None = None
) -> tuple[list[Any], dict[str, str]]:
    """Out-of-fold predictions of every split (one frame per split) and the splits skipped.
    All folds of all splits are fitted on `config.n_jobs` worker *processes* (joblib's loky):
    concurrent LightGBM fits in threads of one process are not safe (they crashed the
    interpreter here; LightGBM's docs warn against simultaneous jobs in one process)."""
    from joblib import Parallel, delayed

    tasks, skipped = [], {}
    for split in splits:
        try:
            folds = make_folds(split, kept, config)
        except DataError as exc:
            skipped[split] = str(exc)
            continue
        tasks += [(split, i, len(folds), tr, te, label) for i, (tr, te, label) in enumerate(folds)]
    backend = "loky" if config.n_jobs > 1 else "sequential"
    results = Parallel(n_jobs=config.n_jobs, backend=backend, return_as="generator")(
        delayed(predict_fold)(X, y, kept, tr, te, config) for _, _, _, tr, te, _ in tasks
    )
    parts = []
    for done, (part, (split, i, n, _, te, label)) in enumerate(zip(results, tasks, strict=True), start=1):
        part.insert(0, "fold", label)
        part.insert(0, "split", split)
        parts.append(part)
        if progress:
            progress(f"[{done}/{len(tasks)}] {SPLITS[split]}: fold {i + 1}/{n} ({label}, {len(te)} rows)")
    by_split = [[p for p, t in zip(parts, tasks, strict=True) if t[0] == split] for split in splits]
    import pandas as pd

    return [pd.concat(ps, ignore_index=True) for ps in by_split if ps], skipped


# --- metrics ----------------------------------------------------------------------------------


def ape_pct(y: Any, pred: Any) -> Any:
    """Absolute percentage error of throughput, in percent."""
    import numpy as np

    return np.abs(np.exp(np.asarray(y) - np.asarray(pred)) - 1.0) * 100.0


def error_metrics(y: Any, pred: Any) -> dict[str, float]:
    import numpy as np
    from sklearn.metrics import mean_absolute_percentage_error

    y = np.asarray(y, dtype=float)
    pred = np.broadcast_to(np.asarray(pred, dtype=float), y.shape)
    ape = ape_pct(y, pred)
    # throughput relative to the bound's throughput: measured exp(-y), predicted exp(-y_hat)
    mape = mean_absolute_percentage_error(np.exp(-y), np.exp(-pred)) * 100.0
    return {
        "median_ape_pct": float(np.median(ape)),
        "p90_ape_pct": float(np.percentile(ape, 90)),
        "mean_ape_pct": float(mape),
    }


def interval_metrics(y: Any, pred: Any, half: Any) -> dict[str, float]:
    """Coverage of [pred - half, pred + half] and the median relative width of the throughput
    interval, (exp(h) - exp(-h)) relative to the predicted throughput, both in percent."""
    import numpy as np

    y, pred, half = (np.asarray(a, dtype=float) for a in (y, pred, half))
    return {
        "coverage_pct": float(np.mean(np.abs(y - pred) <= half) * 100.0),
        "median_rel_width_pct": float(np.median(np.exp(half) - np.exp(-half)) * 100.0),
    }


def summarize(predictions: Any) -> Any:
    """One row per (split, method)."""
    import numpy as np
    import pandas as pd

    rows = []
    for split, part in predictions.groupby("split", sort=False):
        for method in METHODS:
            rec: dict[str, Any] = {
                "split": split,
                "method": method,
                "n_rows": int(len(part)),
                "n_folds": int(part["fold"].nunique()),
                **error_metrics(part["y"], part[f"pred_{method}"]),
            }
            for c in CALIBRATION_LEVELS:
                if method == "model":
                    m = interval_metrics(part["y"], part["pred_model"], part[f"half{_pct(c)}"])
                    rec[f"coverage{_pct(c)}_pct"] = m["coverage_pct"]
                    rec[f"median_rel_width{_pct(c)}_pct"] = m["median_rel_width_pct"]
                else:
                    rec[f"coverage{_pct(c)}_pct"] = np.nan
                    rec[f"median_rel_width{_pct(c)}_pct"] = np.nan
            rec["widened_rows_pct"] = float(part["widened"].mean() * 100.0) if method == "model" else np.nan
            rows.append(rec)
    return pd.DataFrame(rows)


def breakdown(predictions: Any, by: tuple[str, ...] = ("gpu", "source")) -> Any:
    """Per split and per value of each `by` column: rows, median APE of each method, coverage."""
    import pandas as pd

    rows = []
    for split, part in predictions.groupby("split", sort=False):
        for column in by:
            for key, sub in part.groupby(column, sort=True):
                rec: dict[str, Any] = {"split": split, "by": column, "key": str(key), "n_rows": int(len(sub))}
                for method in METHODS:
                    rec[f"{method}_median_ape_pct"] = error_metrics(sub["y"], sub[f"pred_{method}"])[
                        "median_ape_pct"
                    ]
                rec["coverage90_pct"] = interval_metrics(sub["y"], sub["pred_model"], sub["half90"])[
                    "coverage_pct"
                ]
                rows.append(rec)
    return pd.DataFrame(rows)


# --- entry points -----------------------------------------------------------------------------


def evaluate_all(
    X: Any, y: Any, kept: Any, config: EvalConfig | None = None, progress: Progress | None = None
) -> Evaluation:
    """Run every split of the protocol and tabulate the results."""
    import numpy as np
    import pandas as pd

    config = config or EvalConfig()
    y = np.asarray(y, dtype=float)
    parts, skipped = run_splits(config.splits, X, y, kept, config, progress)
    if not parts:
        raise DataError("no evaluation split could run: " + "; ".join(skipped.values()))
    predictions = pd.concat(parts, ignore_index=True)
    return Evaluation(
        predictions=predictions,
        summary=summarize(predictions),
        breakdown=breakdown(predictions),
        skipped=skipped,
    )


def evaluate_holdout(
    X: Any, y: Any, kept: Any, key: str, value: str, config: EvalConfig | None = None
) -> Evaluation:
    """Train without the rows where `kept[key] == value`; report errors on those rows only."""
    import numpy as np

    from perfmodel.schema import COLUMN_NAMES

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
    return Evaluation(predictions=part, summary=summarize(part), breakdown=breakdown(part), skipped={})


# --- rendering --------------------------------------------------------------------------------


def fmt_cell(v: Any) -> str:
    try:
        import math

        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "-"
    except TypeError:
        pass
    return f"{v:.1f}" if isinstance(v, float) else str(v)


SUMMARY_COLUMNS = (
    ("split", "split"),
    ("method", "method"),
    ("n_rows", "rows"),
    ("n_folds", "folds"),
    ("median_ape_pct", "median APE %"),
    ("p90_ape_pct", "p90 APE %"),
    ("mean_ape_pct", "mean APE %"),
    ("coverage80_pct", "cov80 %"),
    ("coverage90_pct", "cov90 %"),
    ("coverage95_pct", "cov95 %"),
    ("median_rel_width90_pct", "width90 %"),
)


def summary_markdown(summary: Any) -> str:
    head = "| " + " | ".join(label for _, label in SUMMARY_COLUMNS) + " |"
    sep = "|" + "|".join("---" for _ in SUMMARY_COLUMNS) + "|"
    lines = [head, sep]
    for rec in summary.to_dict("records"):
        split = SPLITS.get(rec["split"], rec["split"])
        cells = [split if k == "split" else fmt_cell(rec[k]) for k, _ in SUMMARY_COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def breakdown_markdown(table: Any) -> str:
    if table is None or not len(table):
        return ""
    lines = []
    for (split, by), part in table.groupby(["split", "by"], sort=False):
        lines.append(f"\n**{SPLITS.get(split, split)} by {by}**\n")
        lines.append(
            f"| {by} | rows | model median APE % | const median APE % | bound median APE % | cov90 % |"
        )
        lines.append("|---|---|---|---|---|---|")
        for rec in part.to_dict("records"):
            lines.append(
                f"| {rec['key']} | {rec['n_rows']} | {fmt_cell(rec['model_median_ape_pct'])} | "
                f"{fmt_cell(rec['const_median_ape_pct'])} | {fmt_cell(rec['bound_median_ape_pct'])} | "
                f"{fmt_cell(rec['coverage90_pct'])} |"
            )
    return "\n".join(lines) + "\n"


def evaluate_features(
    features_path: Any = None,
    *,
    holdout: tuple[str, str] | None = None,
    config: EvalConfig | None = None,
    progress: Progress | None = None,
) -> Evaluation:
    """Read the feature table and run the protocol (or one holdout: (column, value))."""
    from perfmodel.learn.data import load_training_data

    data = load_training_data(features_path)
    if progress:
        progress(f"{len(data.y)} trainable rows of {len(data.table)} ({data.kept['gpu'].nunique()} GPUs)")
    if holdout is not None:
        if progress:
            progress(f"training without {holdout[0]}={holdout[1]}")
        return evaluate_holdout(data.X, data.y, data.kept, holdout[0], holdout[1], config)
    return evaluate_all(data.X, data.y, data.kept, config, progress)


def seed_spread(
    X: Any,
    y: Any,
    kept: Any,
    *,
    seeds: int = 5,
    splits: tuple[str, ...] = ("random", "loho"),
    config: EvalConfig | None = None,
    progress: Progress | None = None,
) -> Any:
    """Run the protocol `seeds` times, seed k driving LightGBM's bagging and early-stopping split
    and the random split's folds, and return the model's metrics per (seed, split): the spread
    against which a difference between two models (or two datasets) should be judged."""
    import dataclasses

    import pandas as pd

    if seeds < 2:
        raise ConfigError(f"--seeds must be at least 2 to measure a spread; got {seeds}")
    unknown = [s for s in splits if s not in SPLITS]
    if unknown:
        raise ConfigError(f"unknown split(s) {unknown}; choose from {', '.join(SPLITS)}")
    base = config or EvalConfig()
    rows = []
    for seed in range(seeds):
        run = dataclasses.replace(base, lgbm=dataclasses.replace(base.lgbm, seed=seed), seed=seed, splits=splits)
        if progress:
            progress(f"seed {seed + 1}/{seeds}")
        summary = evaluate_all(X, y, kept, run).summary
        for rec in summary[summary["method"] == "model"].to_dict("records"):
            rows.append({"seed": seed, "split": rec["split"], "median_ape_pct": rec["median_ape_pct"],
                         "p90_ape_pct": rec["p90_ape_pct"], "coverage90_pct": rec["coverage90_pct"]})
    return pd.DataFrame(rows)


def spread_summary(runs: Any) -> Any:
    """Per split and metric: mean, standard deviation, min and max over the seeds."""
    long = runs.melt(id_vars=["seed", "split"], var_name="metric")
    out = long.groupby(["split", "metric"], sort=False)["value"].agg(["mean", "std", "min", "max"]).reset_index()
    return out
