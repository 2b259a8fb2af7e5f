"""Human-readable rendering of predictions (Rich); numbers formatted with units.

The formatter: every duration, count, price and interval the CLI prints goes through the `fmt_*`
functions here (`fmt_duration`, `fmt_duration_interval`, `common_duration_unit` for one unit per
table column or row, `fmt_count`, `fmt_count_interval`, `fmt_usd`, `fmt_usd_interval`). They have no
Rich markup unless asked, so the service and the web page format numbers the same way (import
them from `perfmodel.cli.render`).

Everything here reads at 80 columns: titles are one short line (details on the next), an interval
is in the unit of its estimate ("30.8 h (20.1 – 48.0 h)"), and tables that cannot fit a narrow
terminal fall back to a narrower layout (`FitWidth`) instead of cutting names short.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from perfmodel.prediction import WARNING_PREFIX

if TYPE_CHECKING:
    from perfmodel.prediction import Interval, PredictedRun

DURATION_UNITS: tuple[tuple[str, float, float], ...] = (
    ("days", 86400.0, 48 * 3600.0),
    ("h", 3600.0, 120 * 60.0),
    ("min", 60.0, 120.0),
    ("s", 1.0, 1.0),
    ("ms", 1e-3, 0.0),
)
"""(unit, its length in seconds, the smallest duration shown in it), largest unit first: under
1 s in ms, under 2 min in s, under 2 h in min, under 48 h in h, then days."""


def duration_unit(seconds: float) -> str:
    """The unit a duration is shown in (`DURATION_UNITS`): 'ms', 's', 'min', 'h' or 'days'."""
    return next(name for name, _, start in DURATION_UNITS if abs(seconds) >= start)


def duration_value(seconds: float, unit: str) -> str:
    """The number of `unit`s in `seconds`, without the unit: 1 decimal from 1 to 100, none from
    100, 2 significant digits below 1 ('30.8', '1,234', '0.42')."""
    size = next(s for name, s, _ in DURATION_UNITS if name == unit)
    value = seconds / size
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1 or value == 0:
        return f"{value:.1f}"
    return f"{value:.2g}"


def fmt_duration(seconds: float, unit: str | None = None) -> str:
    """A duration with its unit: '850 ms', '3.9 s', '45.0 min', '30.8 h', '1.3 days'; `unit`
    forces one of `DURATION_UNITS` (default: `duration_unit(seconds)`)."""
    unit = unit or duration_unit(seconds)
    return f"{duration_value(seconds, unit)} {unit}"


def fmt_duration_range(low_s: float, high_s: float, unit: str) -> str:
    """Both ends of an interval in one unit: '20.1 – 48.0 h'."""
    return f"{duration_value(low_s, unit)} – {duration_value(high_s, unit)} {unit}"


def fmt_duration_interval(iv: Interval, markup: bool = True, gap: str = "  ") -> str:
    """An interval of durations in the unit of its estimate: '30.8 h  (20.1 – 48.0 h)', the ends
    dimmed (Rich markup) unless `markup` is False, after `gap`."""
    unit = duration_unit(iv.estimate)
    ends = f"({fmt_duration_range(iv.low, iv.high, unit)})"
    return f"{fmt_duration(iv.estimate, unit)}{gap}" + (f"[dim]{ends}[/dim]" if markup else ends)


def common_duration_unit(seconds: Iterable[float]) -> str:
    """One unit for durations shown side by side (a table column or row): the unit of their median
    (`duration_unit`), so a column never mixes '119 min' and '2.2 h'."""
    values = sorted(abs(v) for v in seconds)
    if not values:
        return "s"
    return duration_unit(values[(len(values) - 1) // 2])


def fmt_duration_ends(iv: Interval, unit: str) -> str:
    """An interval's ends in `unit`, without it: '(12.1–132)'."""
    return f"({duration_value(iv.low, unit)}–{duration_value(iv.high, unit)})"


COUNT_UNITS: tuple[tuple[str, float], ...] = (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3))
"""Suffixes of large counts, largest first."""


def fmt_number(value: float) -> str:
    """A count with a spaced suffix, 3 significant digits: '6.75 B', '8.39 M', '512'."""
    for unit, scale in COUNT_UNITS:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g}"


def fmt_amount(value: float) -> str:
    """A rate or an amount in plain digits: thousands separated, whole from 100 up, 3 significant
    digits below ('2,213', '118', '11.8', '0.177'); never an exponent (2.21e+03)."""
    if abs(value) >= 99.95:
        return f"{value:,.0f}"
    if 0 < abs(value) < 1e-3:
        return f"{value:.6f}".rstrip("0")
    return f"{value:.3g}"


def _sig3(value: float) -> str:
    """3 significant digits, trailing zeros kept: '1.00', '2.57', '201', '0.698'."""
    return "0" if value == 0 else f"{value:#.3g}".rstrip(".")


def fmt_count(value: float) -> str:
    """A count (tokens/s, samples/s) in 3 significant digits, its own suffix on every number:
    '1.01k', '201', '2.57M', '0.698'; a value that rounds up to the next suffix takes it
    (999.7 is '1.00k')."""
    for unit, scale in COUNT_UNITS:
        if abs(value) >= scale * 0.9995:
            v = value / scale
            return f"{_sig3(v)}{unit}" if abs(v) < 999.5 else f"{v:,.0f}{unit}"
    return _sig3(value)


def fmt_count_interval(iv: Interval, gap: str = " ") -> str:
    """A count with its interval, each end with its own suffix: '1.01k (201–2.57k)'."""
    return f"{fmt_count(iv.estimate)}{gap}({fmt_count(iv.low)}–{fmt_count(iv.high)})"


def fmt_interval(iv: Interval, fmt: Any, unit: str = "") -> str:
    suffix = f" {unit}" if unit else ""
    return f"{fmt(iv.estimate)}{suffix}  [dim]({fmt(iv.low)} – {fmt(iv.high)})[/dim]"


class FitWidth:
    """A Rich renderable that shows the first of several layouts (most detailed first) whose
    natural width fits the width it is given, so no cell has to wrap or be cut short; the last
    (narrowest) layout otherwise. Measured at render time, so a table fits whatever console
    prints it (80 columns, a pipe, a wide terminal)."""

    def __init__(self, *layouts: Any) -> None:
        if not layouts:
            raise ValueError("FitWidth needs at least one layout")
        self.layouts = layouts

    def choose(self, console: Any, options: Any) -> Any:
        """The layout shown at `options.max_width`."""
        # rich: only output needs it (the CLI's cold start)
        from rich.measure import Measurement

        for layout in self.layouts[:-1]:
            natural = Measurement.get(console, options.update_width(100_000), layout).maximum
            if natural <= options.max_width:
                return layout
        return self.layouts[-1]

    def __rich_console__(self, console: Any, options: Any) -> Iterable[Any]:
        yield self.choose(console, options)

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        # rich: only output needs it (the CLI's cold start)
        from rich.measure import Measurement

        return Measurement.get(console, options, self.choose(console, options))


def compact_table(**kwargs: Any) -> Any:
    """A Rich table that spends few columns on borders: a rule under the header, two spaces
    between columns, none at the edges (the most columns 80 characters can hold)."""
    # rich: only output needs it (the CLI's cold start)
    from rich import box
    from rich.table import Table

    options: dict[str, Any] = {
        "box": box.SIMPLE_HEAD,
        "pad_edge": False,
        "show_edge": False,
        "padding": (0, 1, 0, 0),
    }
    options.update(kwargs)
    return Table(**options)


def narrowing_table(
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Sequence[str]],
    drops: Sequence[Collection[str]] = (),
    *,
    left: Collection[str] = (),
    whole: Collection[str] = (),
    title: str | None = None,
    styles: Sequence[str | None] | None = None,
) -> FitWidth:
    """A `compact_table` of `rows` (plain text, escaped here) under `columns` ((key, header)
    pairs), in one layout per step of `drops` (column keys left out, adding up step by step), for
    `FitWidth` to pick the widest that fits. Columns in `left` are left-justified, the others
    right; those in `whole` never wrap; `styles` gives each row's style."""
    # rich: only output needs it (the CLI's cold start)
    from rich.markup import escape

    layouts = []
    dropped: set[str] = set()
    for step in ((), *drops):
        dropped |= set(step)
        keep = [i for i, (key, _) in enumerate(columns) if key not in dropped]
        table = compact_table(title=title, title_justify="left")
        for i in keep:
            key, header = columns[i]
            table.add_column(header, justify="left" if key in left else "right", no_wrap=key in whole)
        for n, cells in enumerate(rows):
            table.add_row(*(escape(cells[i]) for i in keep), style=styles[n] if styles else None)
        layouts.append(table)
    return FitWidth(*layouts)


def render_title(console: Any, title: str, details: str = "") -> None:
    """A title on one line (bold, never wrapped: cut with '…' only on a terminal narrower than
    the title) and its details, dimmed, on the next."""
    # rich: only output needs it (the CLI's cold start)
    from rich.text import Text

    console.print(Text(title, style="bold"), no_wrap=True, overflow="ellipsis")
    if details:
        console.print(Text(details, style="dim"))


def render_prediction(pred: PredictedRun, console: Any, explain: bool = False) -> None:
    """The prediction card, then its warnings and assumptions: one summary line, or with
    `explain` every one on its own line."""
    # rich: only output needs it (the CLI's cold start)
    from rich.markup import escape
    from rich.table import Table

    w = pred.workload
    a = pred.analytic
    t = w.training
    par = w.parallel
    details = f"{pred.model_kind} model {pred.model_version}" + (
        f", {pred.trained_rows:,} training rows" if pred.trained_rows else ""
    )
    render_title(console, f"perfmodel prediction — intervals at {pred.confidence_level:.0%}", details)
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    trainable = ""
    if a.params.trainable < a.params.total:
        trainable = f", {fmt_number(a.params.trainable)} trainable"
        if t.lora_r:
            trainable += f" (LoRA r={t.lora_r}" + (
                f", {t.quantization_bits}-bit base)" if t.quantization_bits else ")"
            )
    table.add_row("Model", f"{escape(w.model.name)} ({fmt_number(a.params.total)} params{trainable})")
    parallel = f"{par.num_gpus} x {w.gpu.name}"
    if par.num_nodes > 1:
        parallel += f" on {par.num_nodes} nodes"
    if par.num_gpus > 1:
        parallel += f", {par.strategy}"
        if par.tensor_parallel > 1 or par.pipeline_parallel > 1 or par.context_parallel > 1:
            parallel += f" tp={par.tensor_parallel} pp={par.pipeline_parallel}"
            if par.context_parallel > 1:
                parallel += f" cp={par.context_parallel}"
    table.add_row("Hardware", f"{parallel}; precision {t.precision}")
    table.add_row("Batch", a.shape)
    if pred.throughput_tokens_per_s:
        table.add_row(
            "Throughput", fmt_interval(pred.throughput_tokens_per_s, lambda v: f"{v:,.0f}", "tokens/s")
        )
    table.add_row("", fmt_interval(pred.throughput_samples_per_s, fmt_amount, "samples/s"))
    table.add_row(f"{a.step_unit.capitalize()} time", fmt_duration_interval(pred.step_time_s))
    table.add_row("Steps", f"{pred.total_steps:,}")
    table.add_row("Total time", fmt_duration_interval(pred.total_time_s))
    table.add_row("GPU-hours", fmt_interval(pred.gpu_hours, fmt_amount))
    if pred.cost_usd is not None and pred.price is not None:
        table.add_row(
            "Cost",
            fmt_interval(pred.cost_usd, fmt_usd) + f" at {fmt_usd(pred.price.usd_per_gpu_hour)}/GPU-hour",
        )
        table.add_row("", f"[dim]price: {escape(_price_origin(pred.price))}[/dim]")
    mem, dev, v = pred.peak_memory_gb, pred.device_memory_gb, pred.memory_verdict
    colour = {"fits": "green", "tight": "yellow"}.get(v.verdict if v else "fits", "red")
    table.add_row(
        "Peak memory",
        f"{mem.estimate:.1f} GB allocated [dim]({mem.low:.1f} – {mem.high:.1f})[/dim]"
        + (" [dim](exact: FakeTensor oracle)[/dim]" if pred.memory_method == "exact" else "")
        + (f", device {dev.estimate:.1f} GB [dim]({dev.low:.1f} – {dev.high:.1f})[/dim]" if dev else ""),
    )
    if v is not None:
        table.add_row("", f"of {v.capacity_gb:.0f} GB per GPU: [{colour}]{escape(v.line())}[/{colour}]")
    bottleneck = pred.bottleneck
    if pred.mfu:
        bottleneck += f"; MFU {pred.mfu.estimate:.0%} ({pred.mfu.low:.0%} – {pred.mfu.high:.0%})"
    table.add_row("Bottleneck", bottleneck)
    console.print(table)

    assumed = [line for line in w.assumptions if not line.startswith(WARNING_PREFIX)]  # those are warnings too
    if explain:
        kinds = kernel_time_line(a.kernel_seconds, a.step_unit, l2_saved_s=a.t_l2_saved_s, l2_mb=w.gpu.l2_cache_mb)
        if kinds:
            console.print(f"[dim]kernel model:[/dim] {escape(kinds)}")
        for line in assumed:
            console.print(f"[dim]assumed:[/dim] {escape(line)}")
        for line in pred.warnings:
            console.print(f"[yellow]warning:[/yellow] {escape(line)}")
        return
    summary = notes_summary(pred.warnings, assumed, console.width)
    if summary:
        console.print(summary, highlight=False)


L2_SAVED_SHOWN = 0.01
"""The L2's saving is named when it is at least this share of the device time."""


def kernel_time_line(
    kernel_seconds: Any, step_unit: str = "step", *, l2_saved_s: float = 0.0, l2_mb: float = 0.0
) -> str:
    """Where the kernel model's device time goes, largest first: 'matmul 68 ms (32%), norm 44 ms
    (21%), ... of 212 ms device time a step' ('' when the cost model has no kernel plan), and what the
    L2 saves where that is at least 1% of it: '; 40 ms more without the 96 MB L2 (the kernels small
    enough to stay in it)'."""
    kinds = sorted(((str(k), float(v)) for k, v in kernel_seconds if v > 0), key=lambda kv: -kv[1])
    total = sum(v for _, v in kinds)
    if not total:
        return ""
    parts = ", ".join(f"{k} {fmt_duration(v)} ({v / total:.0%})" for k, v in kinds)
    line = f"{parts} of {fmt_duration(total)} device time a {step_unit}"
    if l2_saved_s >= L2_SAVED_SHOWN * total:
        line += f"; {fmt_duration(l2_saved_s)} more without the {l2_mb:g} MB L2 (the kernels small enough to stay in it)"
    return line


def _head(line: str, limit: int = 44) -> str:
    """The first clause of a note, at most `limit` characters: 'few measured runs like this one'."""
    first = line.split(";")[0].split(": ")[0].split(" (")[0].strip()
    if len(first) <= limit:
        return first
    return first[: limit + 1].rsplit(" ", 1)[0].rstrip(",")  # whole words


def _urgency(line: str) -> int:
    if line.startswith(("does not fit", "memory is tight")):
        return 0
    if any(m in line for m in ("training data", "widened", "few measured runs", "not calibrated")):
        return 1
    return 2


def notes_summary(warnings: Sequence[str], assumptions: Sequence[str], width: int = 100) -> str:
    """Warnings and assumptions as one line (Rich markup) of at most `width` cells: how many of
    each, the first clause of each warning, and where the full list is: '2 warnings: few measured
    runs like this one; memory is tight · 3 assumptions · --explain lists them'."""
    # rich: only output needs it (the CLI's cold start)
    from rich.markup import escape
    from rich.text import Text

    if not warnings and not assumptions:
        return ""
    tail = "[dim] · --explain lists them[/dim]"
    counted = f" · [dim]{len(assumptions)} assumption{'s' * (len(assumptions) != 1)}[/dim]" if assumptions else ""
    warnings = sorted(warnings, key=_urgency)  # memory first, then how sure the numbers are
    n = len(warnings)
    label = f"[yellow]{n} warning{'s' * (n != 1)}[/yellow]"
    for limit in (44, 28):
        for k in range(n, 0, -1):
            heads = "; ".join(_head(x, limit) for x in warnings[:k]) + (f"; +{n - k} more" if k < n else "")
            line = f"{label}: {escape(heads)}{counted}{tail}"
            if Text.from_markup(line).cell_len <= width:
                return line
    line = (label + counted if warnings else counted.removeprefix(" · ")) + tail
    return line


def fmt_usd(value: float) -> str:
    """US dollars, with cents below $10."""
    return f"${value:,.2f}" if abs(value) < 10 else f"${value:,.0f}"


def fmt_usd_interval(iv: Interval, gap: str = " ") -> str:
    """Dollars with the interval's ends in the estimate's precision: '$116 (50–543)', '$4.10 (2.05–8.20)'."""
    digits = ".2f" if abs(iv.estimate) < 10 else ",.0f"
    return f"${iv.estimate:{digits}}{gap}({iv.low:{digits}}–{iv.high:{digits}})"


def _price_origin(price: Any) -> str:
    if price.rule == "given":
        return "given"
    rng = price.listed_range_usd
    count = len(price.listed)
    where = "1 listed on-demand price" if count == 1 else f"median of {count} on-demand list prices"
    if rng and rng[0] != rng[1]:
        where += f", {fmt_usd(rng[0])}–{fmt_usd(rng[1])}"
    return where


def _yaml_value(value: Any) -> str:
    """A value as it is written in YAML (true/false, flow mappings)."""
    if isinstance(value, (bool, dict)):
        return json.dumps(value, separators=(", ", ": ")).replace('"', "")
    return str(value)


def render_fit_suggestions(report: Any, console: Any) -> None:
    """What would fit (perfmodel.decide.fit.FitReport), one line per suggestion."""
    # rich: only output needs it (the CLI's cold start)
    from rich.markup import escape

    if report is None or report.fits:
        return
    if report.max_micro_batch_size is not None:
        console.print(f"[bold]largest micro-batch that fits:[/bold] {report.max_micro_batch_size}")
    for s in report.suggestions:
        o = s.outcome
        cost = f", {fmt_usd(o.cost_usd.estimate)}" if o.cost_usd is not None else ""
        keys = s.config_changes if s.config_changes is not None else s.changes
        settings = ", ".join(f"{k}={_yaml_value(v)}" for k, v in keys.items())
        flags = " ".join(
            f"--set {k}={_yaml_value(v)}" if k != "hardware.gpu" else f"--gpu {v}"
            for k, v in (s.flags or {}).items()
        )
        console.print(f"[green]fits with[/green] {escape(s.summary)}")
        console.print(
            f"  total {fmt_duration_interval(o.total_time_s, gap=' ')}{cost}, "
            f"peak {o.peak_memory_gb.estimate:.1f} of {o.memory_capacity_gb:.0f} GB"
        )
        console.print(
            f"  [dim]set {escape(settings)}" + (f"; perfmodel {escape(flags)}" if flags else "") + "[/dim]"
        )
    for note in report.notes:
        console.print(f"[dim]{escape(note)}[/dim]")
