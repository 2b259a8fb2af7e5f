"""The pictures of a sweep and of a comparison (`plot_compare`). A sweep: total time (and cost, a second panel) against the first varied key,
with interval bands, one line per value of the second varied key, and the points that do not fit
in memory marked. matplotlib (Agg canvas, no pyplot state), imported only here.

Each drawn artist carries a gid naming what it shows ('time:<series>', 'time-oom:<series>',
'cost:<series>', 'cost-oom:<series>'), so the plotted data can be read back and checked against
the sweep's table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfmodel.decide.compare import Comparison
from perfmodel.decide.sweep import SweepPoint, SweepResult
from perfmodel.errors import ConfigError, PerfModelError

FORMATS = (".png", ".svg", ".pdf")
HOUR_S = 3600.0
OOM_COLOR = "0.25"
"""Colour of the legend entry for out-of-memory points (the points take their series colour)."""


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and v.is_integer():
        return f"{v:g}"
    return str(v)


def series_of(result: SweepResult) -> dict[str, list[SweepPoint]]:
    """Series label -> its predicted points in the order of the first key's values: one series
    per value of the second key (one series when only one key varies)."""
    keys = result.keys
    if len(keys) > 2:
        raise ConfigError(
            f"a plot shows one or two varied keys; this sweep varies {len(keys)}: {', '.join(keys)}"
        )
    order = {repr(v): i for i, v in enumerate(result.varied[keys[0]])}
    groups: dict[str, list[SweepPoint]] = {}
    second = result.varied[keys[1]] if len(keys) == 2 else [None]
    for value in second:
        label = f"{keys[1]}={_fmt(value)}" if len(keys) == 2 else keys[0]
        pts = [
            p
            for p in result.points
            if p.outcome is not None and (len(keys) == 1 or p.values[keys[1]] == value)
        ]
        groups[label] = sorted(pts, key=lambda p: order[repr(p.values[keys[0]])])
    return groups


def figure_classes(path: Path) -> tuple[Any, Any]:
    """(Figure, FigureCanvasAgg) after checking `path` can take a plot (every --plot of the CLI)."""
    if path.suffix.lower() not in FORMATS:
        raise ConfigError(f"--plot {path}: the file must end in {', '.join(FORMATS)}")
    if not path.parent.exists():
        raise ConfigError(f"--plot {path}: folder {path.parent} does not exist")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise PerfModelError(
            "--plot needs matplotlib: pip install 'perfmodel[train]' (or matplotlib)"
        ) from exc
    return Figure, FigureCanvasAgg


def plot_compare(result: Comparison, path: str | Path) -> Any:
    """Draw a comparison into `path` (.png, .svg or .pdf): left, each config's total time with its
    interval; right, each config's time ratio to the first with its paired interval (log scale,
    a line at 1; filled markers where the interval excludes 1). Artists carry gids 'time:<label>'
    and 'ratio:<label>'. Returns the matplotlib Figure."""
    path = Path(path)
    Figure, FigureCanvasAgg = figure_classes(path)
    runs = result.runs
    fig = Figure(figsize=(11, 0.9 + 0.55 * len(runs)), layout="constrained")
    FigureCanvasAgg(fig)
    ax_time, ax_ratio = fig.subplots(1, 2, sharey=True)
    level = f"{result.confidence_level:.0%}"
    ys = list(range(len(runs)))[::-1]
    for y, r in zip(ys, runs, strict=True):
        iv = r.outcome.total_time_s
        color = "C3" if not r.outcome.fits_in_memory else "C0"
        line = ax_time.errorbar(
            [iv.estimate / HOUR_S], [y],
            xerr=[[(iv.estimate - iv.low) / HOUR_S], [(iv.high - iv.estimate) / HOUR_S]],
            fmt="o", color=color, capsize=3,
        )
        line[0].set_gid(f"time:{r.label}")
        ratio = r.time_ratio
        filled = ratio.significant
        mark = ax_ratio.errorbar(
            [ratio.estimate], [y],
            xerr=[[ratio.estimate - ratio.low], [ratio.high - ratio.estimate]],
            fmt="o", color="C2" if filled else "0.45", mfc="C2" if filled else "white", capsize=3,
        )
        mark[0].set_gid(f"ratio:{r.label}")
    ax_ratio.axvline(1.0, color="0.3", linewidth=1, linestyle="--")
    ax_ratio.set_xscale("log")
    ax_time.set_yticks(ys, [r.label for r in runs])
    ax_time.set_xlabel(f"total time (h), {level} interval; red: does not fit in memory")
    ax_ratio.set_xlabel(f"time / {runs[0].label}, {level} paired interval (filled: excludes 1)")
    for ax in (ax_time, ax_ratio):
        ax.grid(True, alpha=0.3)
    ax_time.set_title("Predicted training time")
    ax_ratio.set_title("Ratio to the first (paired)")
    fig.savefig(path, dpi=110)
    return fig


def plot_sweep(result: SweepResult, path: str | Path) -> Any:
    """Draw `result` into `path` (.png, .svg or .pdf); returns the matplotlib Figure."""
    path = Path(path)
    Figure, FigureCanvasAgg = figure_classes(path)

    key = result.keys[0]
    xs = result.varied[key]
    numeric = all(_is_number(v) for v in xs)
    groups = series_of(result)
    fig = Figure(figsize=(11, 4.6), layout="constrained")
    FigureCanvasAgg(fig)
    ax_time, ax_cost = fig.subplots(1, 2)
    level = f"{result.confidence_level:.0%}"
    has_cost = any(p.outcome is not None and p.outcome.cost_usd is not None for p in result.points)
    colors = [f"C{i}" for i in range(10)]
    any_oom = False
    for i, (label, pts) in enumerate(groups.items()):
        color = colors[i % len(colors)]
        x_of = (lambda p: float(p.values[key])) if numeric else (lambda p: float(xs.index(p.values[key])))
        panels: list[tuple[Any, str, str]] = [(ax_time, "time", "total_time_s")]
        if has_cost:
            panels.append((ax_cost, "cost", "cost_usd"))
        for ax, name, attr in panels:
            scale = 1 / HOUR_S if name == "time" else 1.0
            ok = [p for p in pts if p.outcome.fits_in_memory and getattr(p.outcome, attr) is not None]  # type: ignore[union-attr]
            bad = [p for p in pts if not p.outcome.fits_in_memory and getattr(p.outcome, attr) is not None]  # type: ignore[union-attr]
            if ok:
                ivs = [getattr(p.outcome, attr) for p in ok]
                x = [x_of(p) for p in ok]
                ax.fill_between(
                    x,
                    [iv.low * scale for iv in ivs],
                    [iv.high * scale for iv in ivs],
                    color=color,
                    alpha=0.18,
                    linewidth=0,
                    gid=f"{name}-band:{label}",
                )
                (line,) = ax.plot(
                    x, [iv.estimate * scale for iv in ivs], "o-", color=color, label=label, markersize=4
                )
                line.set_gid(f"{name}:{label}")
            if bad:
                ivs = [getattr(p.outcome, attr) for p in bad]
                (mark,) = ax.plot(
                    [x_of(p) for p in bad],
                    [iv.estimate * scale for iv in ivs],
                    "x",
                    color=color,
                    markersize=9,
                    markeredgewidth=2,
                )
                mark.set_gid(f"{name}-oom:{label}")
                any_oom = True
    for ax in (ax_time, ax_cost):
        ax.set_xlabel(key)
        if numeric:
            positive = [float(v) for v in xs if float(v) > 0]
            if len(positive) == len(xs) and max(positive) / min(positive) >= 8:
                ax.set_xscale("log", base=2)
            ax.set_xticks([float(v) for v in xs], [_fmt(v) for v in xs])
        else:
            ax.set_xticks(range(len(xs)), [_fmt(v) for v in xs], rotation=30 if len(xs) > 4 else 0)
        ax.grid(True, alpha=0.3)
    ax_time.set_ylabel(f"total time (h), band: {level} interval")
    ax_time.set_title("Predicted training time")
    if any_oom:
        # matplotlib: only plots need it
        from matplotlib.lines import Line2D

        ax_time.add_line(
            Line2D(
                [],
                [],
                linestyle="none",
                marker="x",
                color=OOM_COLOR,
                markersize=9,
                markeredgewidth=2,
                label="x: does not fit in memory (predicted as if it did)",
            )
        )
    ax_time.legend(fontsize=8)
    if has_cost:
        ax_cost.set_ylabel(f"cost (USD), band: {level} interval")
        ax_cost.set_title("Predicted cost (on-demand list price)")
    else:
        ax_cost.set_axis_off()
        ax_cost.text(0.5, 0.5, "no price known\n(pass --price USD per GPU-hour)", ha="center", va="center")
    fig.suptitle(
        f"{result.config}: sweep over {', '.join(result.keys)} ({result.model_kind} model {result.model_version})"
    )
    fig.savefig(path, dpi=110)
    return fig
