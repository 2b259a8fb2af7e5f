"""Evaluation tables rendered for people: Rich tables for the terminal and Markdown for the MLflow
run (and the README). One column spec, one cell format, two renderers over the same records.

Inputs are the frames of `perfmodel.learn.metrics` (`summarize`, `breakdown`) and
`perfmodel.learn.spread.spread_summary`; nothing here computes a metric.

Markdown keeps the long split descriptions (`metrics.SPLITS`); the terminal tables use
`SHORT_SPLITS`, two-line headers and compact borders, and drop their least important columns
(`NARROW_DROP`) when the terminal is too narrow for all of them, so they read at 80 columns.
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
SHORT_SPLITS: dict[str, str] = {
    "loso": "source held out",
    "loho": "GPU held out",
    "random": "random 5-fold",
    "lofo": "family held out",
}
"""Split key -> its name in terminal tables (`metrics.SPLITS` has the long descriptions)."""
SHORT_LABELS: dict[str, str] = {
    "median_ape_pct": "median\nAPE %",
    "p90_ape_pct": "p90\nAPE %",
    "mean_ape_pct": "mean\nAPE %",
    "coverage80_pct": "cov80\n%",
    "coverage90_pct": "cov90\n%",
    "coverage95_pct": "cov95\n%",
    "median_rel_width90_pct": "width90\n%",
    "width90_pct": "width90\n%",
    "model_median_ape_pct": "model\nAPE %",
    "const_median_ape_pct": "const\nAPE %",
    "bound_median_ape_pct": "bound\nAPE %",
}
"""Column -> its two-line header in terminal tables (APE columns are median APEs unless named)."""
NARROW_DROP: dict[str, tuple[tuple[str, ...], ...]] = {
    "summary": (("coverage80_pct", "coverage95_pct"), ("mean_ape_pct", "n_folds")),
    "breakdown": (("bound_median_ape_pct",), ("const_median_ape_pct",)),
    "regime": (("n_rows",), ("const_median_ape_pct",)),
}
"""Table -> columns left out, step by step, while the table is wider than the terminal."""


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


def _regime_rows(table: Any, split: str) -> list[list[str]]:
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
            *_md_table([lb for _, lb in REGIME_COLUMNS], _regime_rows(table, split)),
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


# --- Rich -------------------------------------------------------------------------------------


def _short_split(split: Any) -> str:
    return SHORT_SPLITS.get(split, str(split))


def _rich_table(
    columns: tuple[tuple[str, str], ...],
    rows: list[tuple[list[str], str | None]],
    title: str,
    drops: tuple[tuple[str, ...], ...] = (),
) -> Any:
    """A compact Rich table of `rows` (cells in `columns` order, row style) with two-line
    headers, narrowing by `drops` on a narrow terminal (`perfmodel.cli.render.narrowing_table`)."""
    from perfmodel.cli.render import narrowing_table

    headers = [(key, SHORT_LABELS.get(key, label)) for key, label in columns]
    return narrowing_table(
        headers,
        [cells for cells, _ in rows],
        drops,
        left=LEFT,
        title=title,
        styles=[style for _, style in rows],
    )


def summary_table(summary: Any, title: str) -> Any:
    """The summary as a Rich table, the model's rows in bold."""
    rows = []
    for rec in summary.to_dict("records"):
        cells = [_short_split(rec[k]) if k == "split" else fmt_cell(rec[k]) for k, _ in SUMMARY_COLUMNS]
        rows.append((cells, "bold" if rec["method"] == "model" else None))
    return _rich_table(SUMMARY_COLUMNS, rows, title, NARROW_DROP["summary"])


def breakdown_table(table: Any, title: str = "by hardware and source") -> Any:
    """Every (split, by) group of a breakdown in one Rich table."""
    rows: list[tuple[list[str], str | None]] = []
    if table is not None and len(table):
        for _, part in table.groupby(["split", "by"], sort=False):
            for rec in part.to_dict("records"):
                rows.append(([str(rec["by"]), *(fmt_cell(rec[k]) for k, _ in BREAKDOWN_COLUMNS)], None))
    return _rich_table((("by", "by"), *BREAKDOWN_COLUMNS), rows, title, NARROW_DROP["breakdown"])


def regime_tables(table: Any) -> list[Any]:
    """One Rich table per headline split: error and coverage per regime."""
    out: list[Any] = []
    if table is None or not len(table):
        return out
    for split in dict.fromkeys(table["split"]):
        rows: list[tuple[list[str], str | None]] = [(cells, None) for cells in _regime_rows(table, split)]
        out.append(
            _rich_table(REGIME_COLUMNS, rows, f"{_short_split(split)} by regime", NARROW_DROP["regime"])
        )
    return out


def spread_table(summary: Any, seeds: int) -> Any:
    """`spread_summary` (mean, std, min, max per split and metric) as a Rich table."""
    columns = (
        ("split", "split"),
        ("metric", "metric"),
        ("mean", "mean"),
        ("std", "std"),
        ("min", "min"),
        ("max", "max"),
    )
    rows: list[tuple[list[str], str | None]] = [
        (
            [
                _short_split(rec["split"]),
                str(rec["metric"]),
                *(fmt_cell(rec[k]) for k in ("mean", "std", "min", "max")),
            ],
            None,
        )
        for rec in summary.to_dict("records")
    ]
    return _rich_table(columns, rows, f"model metrics over {seeds} seeds")
