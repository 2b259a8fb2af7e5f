"""Evaluation tables rendered for the terminal: Rich tables over the rows and cell format of
`perfmodel.learn.report` (which also writes them as Markdown for the MLflow run).

The terminal tables use `SHORT_SPLITS`, two-line headers and compact borders, and drop their least
important columns (`NARROW_DROP`) when the terminal is too narrow for all of them, so they read at
80 columns.
"""

from __future__ import annotations

from typing import Any

from perfmodel.cli.render import narrowing_table
from perfmodel.learn.report import (
    BREAKDOWN_COLUMNS,
    LEFT,
    REGIME_COLUMNS,
    SUMMARY_COLUMNS,
    fmt_cell,
    regime_rows,
)

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
        rows: list[tuple[list[str], str | None]] = [(cells, None) for cells in regime_rows(table, split)]
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
