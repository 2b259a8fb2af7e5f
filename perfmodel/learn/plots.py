"""Evaluation figures (matplotlib, Agg backend), each written to a PNG file."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from perfmodel.learn.conformal import CALIBRATION_LEVELS
from perfmodel.learn.metrics import HEADLINE_SPLIT, SPLITS


def _plt() -> Any:
    # matplotlib: only plots need it; the Agg backend is chosen when one is drawn, not on import
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # after the backend is chosen

    return plt


PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
    "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354",
    "#756bb1", "#636363", "#a55194", "#6b6ecf", "#b5cf6b", "#e7ba52",
)  # fmt: skip
"""Colours a group (source, GPU) is drawn in."""


def colour_of(name: str) -> str:
    """The one colour `name` gets in every plot of every run (a hash of the name, not its rank among
    the groups present), so plots of two runs side by side in MLflow compare group by group."""
    return PALETTE[int(hashlib.sha256(str(name).encode()).hexdigest()[:8], 16) % len(PALETTE)]


def plot_predicted_vs_measured(
    predictions: Any, path: Path, split: str = HEADLINE_SPLIT, colour_by: str | None = None
) -> Path:
    """Predicted vs measured step time in seconds (log-log), one colour per held-out group (the
    source when sources are held out, else the GPU; `colour_by` overrides), each group in the same
    colour in every run (`colour_of`)."""
    plt = _plt()
    part = predictions[predictions["split"] == split]
    key = colour_by or ("source" if split == "loso" and "source" in part else "gpu")
    groups = sorted(part[key].astype(str).unique()) if len(part) else []
    bound = part["bound_s"].to_numpy(dtype=float) if "bound_s" in part else np.ones(len(part))
    measured = bound * np.exp(part["y"].to_numpy(dtype=float))
    predicted = bound * np.exp(part["pred_model"].to_numpy(dtype=float))
    fig, ax = plt.subplots(figsize=(7, 6.5))
    labels = part[key].astype(str).to_numpy()
    for group in groups:
        sel = labels == group
        ax.scatter(measured[sel], predicted[sel], s=7, alpha=0.55, color=colour_of(group), label=group)
    if len(part):
        lo = float(min(measured.min(), predicted.min())) * 0.8
        hi = float(max(measured.max(), predicted.max())) * 1.25
        ax.plot([lo, hi], [lo, hi], "k-", lw=1)
        for f in (0.8, 1.25):
            ax.plot([lo, hi], [lo * f, hi * f], "k:", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured step time (s)")
    ax.set_ylabel("predicted step time (s)")
    ax.set_title(f"{SPLITS.get(split, split)}\npredicted vs measured step time, by {key} (dotted: x0.8, x1.25)",
                 fontsize=10)  # fmt: skip
    if groups:
        ax.legend(fontsize=6, ncol=1 if key == "source" else 2, loc="upper left", markerscale=1.5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_residuals_by_hardware(predictions: Any, path: Path, split: str = HEADLINE_SPLIT) -> Path:
    """Box plot of log residuals per held-out GPU."""
    plt = _plt()
    part = predictions[predictions["split"] == split]
    groups = sorted(part["gpu"].unique())
    data = [
        (part.loc[part["gpu"] == g, "y"] - part.loc[part["gpu"] == g, "pred_model"]).to_numpy()
        for g in groups
    ]
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(groups) + 2), 4.5))
    if data:
        ax.boxplot(data, showfliers=True)
        ax.set_xticks(range(1, len(groups) + 1), groups, rotation=45, ha="right", fontsize=7)
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set_ylabel("log(measured / predicted step time)")
    ax.set_title(f"{SPLITS.get(split, split)}: residuals by hardware")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_coverage(summary: Any, path: Path) -> Path:
    """Empirical vs nominal interval coverage for each split."""
    plt = _plt()
    model = summary[summary["method"] == "model"]
    nominal = [c * 100 for c in CALIBRATION_LEVELS]
    fig, ax = plt.subplots(figsize=(5.5, 5))
    for rec in model.to_dict("records"):
        got = [rec[f"coverage{round(c * 100)}_pct"] for c in CALIBRATION_LEVELS]
        ax.plot(nominal, got, "o-", label=SPLITS.get(rec["split"], rec["split"]))
    ax.plot([75, 100], [75, 100], "k--", lw=0.8, label="ideal")
    ax.set_xlabel("nominal coverage %")
    ax.set_ylabel("empirical coverage %")
    ax.set_title("conformal interval coverage")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_feature_importance(booster: Any, path: Path, top: int = 20) -> Path:
    """Total gain per feature of the shipped booster."""
    plt = _plt()
    gains = booster.feature_importance(importance_type="gain")
    names = booster.feature_name()
    ranked = sorted(zip(gains, names, strict=True), reverse=True)[:top]
    fig, ax = plt.subplots(figsize=(6.5, 0.3 * len(ranked) + 1.5))
    ax.barh([n for _, n in reversed(ranked)], [g for g, _ in reversed(ranked)])
    ax.set_xlabel("total gain")
    ax.set_title("feature importance (shipped model)")
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
