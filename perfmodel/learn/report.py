"""What an evaluation says, for people: the column specs and cell format of its tables, and the
whole evaluation as Markdown (the MLflow run's description, the README's tables). The terminal
renders the same rows as Rich tables (`perfmodel.cli.render_eval`).

Inputs are the frames of `perfmodel.learn.metrics` (`summarize`, `breakdown`); nothing here
computes a metric.
"""

from __future__ import annotations

import math
from typing import Any

from perfmodel.learn.metrics import SPLITS

SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (
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
"""(summary column, label) of the evaluation table."""
BREAKDOWN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("key", "value"),
    ("n_rows", "rows"),
    ("model_median_ape_pct", "model median APE %"),
    ("const_median_ape_pct", "const median APE %"),
    ("bound_median_ape_pct", "bound median APE %"),
    ("coverage90_pct", "cov90 %"),
)
"""(breakdown column, label) of the per-GPU / per-source tables."""
REGIME_COLUMNS: tuple[tuple[str, str], ...] = (
    ("scale", "scale"),
    ("method", "method"),
    ("precision", "precision"),
    ("params", "params"),
    ("n_rows", "rows"),
    ("n_runs", "runs"),
    ("model_median_ape_pct", "median APE %"),
    ("const_median_ape_pct", "const APE %"),
    ("coverage90_pct", "cov90 %"),
    ("width90_pct", "width90 %"),
)
"""(regime table column, label) of the per-regime tables."""
LEFT = {"split", "method", "by", "key", "metric", "scale", "precision", "params"}


def fmt_cell(value: Any) -> str:
    """One decimal for floats, '-' for missing, str() for the rest."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def _summary_rows(summary: Any) -> list[tuple[list[str], bool]]:
    rows = []
    for rec in summary.to_dict("records"):
        cells = [SPLITS.get(rec[k], rec[k]) if k == "split" else fmt_cell(rec[k]) for k, _ in SUMMARY_COLUMNS]
        rows.append((cells, rec["method"] == "model"))
    return rows


def _breakdown_groups(table: Any) -> list[tuple[str, list[list[str]]]]:
    """(title, rows) per (split, by) of a breakdown table."""
    if table is None or not len(table):
        return []
    groups = []
    for (split, by), part in table.groupby(["split", "by"], sort=False):
        rows = [[fmt_cell(rec[k]) for k, _ in BREAKDOWN_COLUMNS] for rec in part.to_dict("records")]
        groups.append((f"{SPLITS.get(split, split)} by {by}", rows))
    return groups


# --- Markdown ---------------------------------------------------------------------------------


def _md_table(labels: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(labels) + " |",
        "|" + "|".join("---" for _ in labels) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def summary_markdown(summary: Any) -> str:
    labels = [label for _, label in SUMMARY_COLUMNS]
    return "\n".join(_md_table(labels, [cells for cells, _ in _summary_rows(summary)])) + "\n"


def breakdown_markdown(table: Any) -> str:
    lines: list[str] = []
    for title, rows in _breakdown_groups(table):
        by = title.rsplit(" by ", 1)[1]
        lines += [f"\n**{title}**\n", *_md_table([by, *(label for _, label in BREAKDOWN_COLUMNS[1:])], rows)]
    return "\n".join(lines) + "\n" if lines else ""


def regime_rows(table: Any, split: str) -> list[list[str]]:
    part = table[table["split"] == split]
    return [
        [str(rec[k]) if k in LEFT else fmt_cell(rec[k]) for k, _ in REGIME_COLUMNS]
        for rec in part.to_dict("records")
    ]


def regime_markdown(table: Any) -> str:
    """One Markdown table per headline split: error and coverage per regime."""
    if table is None or not len(table):
        return ""
    lines: list[str] = []
    for split in dict.fromkeys(table["split"]):
        lines += [
            f"\n**{SPLITS.get(split, split)} by regime**\n",
            *_md_table([lb for _, lb in REGIME_COLUMNS], regime_rows(table, split)),
        ]
    return "\n".join(lines) + "\n"


def evaluation_markdown(evaluation: Any, title: str = "Evaluation") -> str:
    """The whole evaluation (summary, regimes, then per-GPU and per-source tables) as Markdown."""
    skipped = "".join(f"\nskipped {split}: {reason}\n" for split, reason in evaluation.skipped.items())
    return (
        f"# {title}\n\n"
        + summary_markdown(evaluation.summary)
        + "\n"
        + regime_markdown(getattr(evaluation, "regimes", None))
        + breakdown_markdown(evaluation.breakdown)
        + skipped
    )
