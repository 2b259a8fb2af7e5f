"""Evaluation figures (matplotlib, Agg backend), each written to a PNG file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfmodel.learn.conformal import CALIBRATION_LEVELS
from perfmodel.learn.metrics import HEADLINE_SPLIT, SPLITS


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_predicted_vs_measured(
    predictions: Any, path: Path, split: str = HEADLINE_SPLIT, colour_by: str | None = None
) -> Path:
    """Predicted vs measured step time relative to the bound (log-log), one colour per held-out
    group: the source when sources are held out, else the GPU (`colour_by` overrides)."""
    import numpy as np

    plt = _plt()
    part = predictions[predictions["split"] == split]
    key = colour_by or ("source" if split == "loso" and "source" in part else "gpu")
    groups = sorted(part[key].astype(str).unique()) if len(part) else []
    colours = plt.get_cmap("tab20" if len(groups) > 10 else "tab10")
    fig, ax = plt.subplots(figsize=(7, 6.5))
    for i, group in enumerate(groups):
        sub = part[part[key].astype(str) == group]
        ax.scatter(
            np.exp(sub["y"]), np.exp(sub["pred_model"]), s=7, alpha=0.55, color=colours(i % 20), label=group
        )
    if len(part):
        lo = float(np.exp(min(part["y"].min(), part["pred_model"].min()))) * 0.9
        hi = float(np.exp(max(part["y"].max(), part["pred_model"].max()))) * 1.1
        ax.plot([lo, hi], [lo, hi], "k-", lw=1)
        for f in (0.9, 1.1):
            ax.plot([lo, hi], [lo * f, hi * f], "k:", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured step time / roofline bound")
    ax.set_ylabel("predicted step time / roofline bound")
    ax.set_title(f"{SPLITS.get(split, split)}\npredicted vs measured, by {key} (dotted: +/-10%)", fontsize=10)
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
