"""Evaluation metrics (DESIGN.md, "Evaluation protocol"): errors and interval coverage of
out-of-fold predictions, tabulated per split and method, and flattened into metric names with units.

Metrics are on throughput (step time's reciprocal): with y = log(t / t_bound) and prediction y_hat,
predicted / measured throughput = exp(y - y_hat), so APE = |exp(y - y_hat) - 1|.

The out-of-fold predictions frame (`perfmodel.learn.evaluate`) has one row per (split, held-out
row) with columns split, fold, y, pred_<method> for each method, half<level> for each calibration
level, widened, gpu, source, model_family.
"""

from __future__ import annotations

from typing import Any

from perfmodel.learn.conformal import CALIBRATION_LEVELS

SPLITS: dict[str, str] = {
    "random": "random 5-fold",
    "loho": "leave-one-hardware-out",
    "lofo": "leave-one-model-family-out",
}
"""Split key -> what it holds out."""
HEADLINE_SPLIT = "loho"
HEADLINE_METRIC = "loho_median_ape_pct"
"""The number a model is judged by (lower is better)."""
HEADLINE_METRICS: tuple[str, ...] = (
    "loho_median_ape_pct",
    "random_median_ape_pct",
    "lofo_median_ape_pct",
    "coverage90_loho_pct",
    "width90_loho_pct",
)
"""The few metrics shown first (MLflow `headline/` metrics and `headline.` tags)."""
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


def pct(level: float) -> str:
    """0.9 -> '90' (the suffix of per-level columns and metric names)."""
    return f"{round(level * 100):d}"


def ape_pct(y: Any, pred: Any) -> Any:
    """Absolute percentage error of throughput, in percent."""
    import numpy as np

    return np.abs(np.exp(np.asarray(y) - np.asarray(pred)) - 1.0) * 100.0


def error_metrics(y: Any, pred: Any) -> dict[str, float]:
    """Median, p90 and mean APE of throughput (percent)."""
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
    """One row per (split, method): rows, folds, errors; coverage and width for the model."""
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
                    m = interval_metrics(part["y"], part["pred_model"], part[f"half{pct(c)}"])
                    rec[f"coverage{pct(c)}_pct"] = m["coverage_pct"]
                    rec[f"median_rel_width{pct(c)}_pct"] = m["median_rel_width_pct"]
                else:
                    rec[f"coverage{pct(c)}_pct"] = np.nan
                    rec[f"median_rel_width{pct(c)}_pct"] = np.nan
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


def flat_metrics(summary: Any) -> dict[str, float]:
    """Metric names with units from a `summarize` table, for MLflow (e.g. loho_median_ape_pct,
    loho_const_median_ape_pct, coverage90_loho_pct, width90_loho_pct)."""
    out: dict[str, float] = {}
    for rec in summary.to_dict("records"):
        split, method = rec["split"], rec["method"]
        prefix = split if method == "model" else f"{split}_{method}"
        for key in ("median_ape_pct", "p90_ape_pct", "mean_ape_pct"):
            out[f"{prefix}_{key}"] = float(rec[key])
        if method == "model":
            for c in CALIBRATION_LEVELS:
                out[f"coverage{pct(c)}_{split}_pct"] = float(rec[f"coverage{pct(c)}_pct"])
                out[f"width{pct(c)}_{split}_pct"] = float(rec[f"median_rel_width{pct(c)}_pct"])
            out[f"{split}_widened_rows_pct"] = float(rec["widened_rows_pct"])
            out[f"{split}_rows"] = float(rec["n_rows"])
            out[f"{split}_folds"] = float(rec["n_folds"])
    return out
