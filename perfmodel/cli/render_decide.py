"""Rich rendering of sweep, compare and advise results (the `perfmodel sweep / compare / advise`
tables); every interval in the unit of its estimate, e.g. '23.7 h (14.9–37.7)', '$97 (61–155)',
device memory per GPU (what the fit verdict compares) '35.6/80 GB (24.9–53.3)' (GB, out of the GPU's 80).

Readable at 80 columns: the title is one short line with its details on the next, and a table
too wide for the terminal switches (`perfmodel.cli.render.FitWidth`) to a narrower layout:
short column names, each interval on the line below its estimate, then fewer columns.
"""

from __future__ import annotations

import json
import re
import textwrap
from typing import Any

from perfmodel.cli.render import (
    FitWidth,
    common_duration_unit,
    compact_table,
    duration_unit,
    duration_value,
    fmt_count,
    fmt_duration,
    fmt_duration_ends,
    fmt_usd,
    render_title,
)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, dict):
        return json.dumps(v, separators=(", ", ": ")).replace('"', "")
    return "-" if v is None else str(v)


def _cell(main: str, ends: str, two_lines: bool) -> str:
    """An estimate and its dimmed interval ends, on one line or two."""
    if not ends:
        return main
    return f"{main}{chr(10) if two_lines else ' '}[dim]{ends}[/dim]"


def _count(iv: Any) -> tuple[str, str]:
    """A count interval, each number with its own suffix (`perfmodel.cli.render.fmt_count`):
    ('1.01k', '(201–2.57k)')."""
    return fmt_count(iv.estimate), f"({fmt_count(iv.low)}–{fmt_count(iv.high)})"


def _time(iv: Any, unit: str | None = None) -> tuple[str, str]:
    """A duration interval in `unit` (default: its estimate's, `perfmodel.cli.render.duration_unit`;
    tables pass one unit per column or row, `common_duration_unit`): ('23.7 h', '(14.9–37.7)')."""
    unit = unit or duration_unit(iv.estimate)
    return f"{duration_value(iv.estimate, unit)} {unit}", fmt_duration_ends(iv, unit)


def _usd(iv: Any) -> tuple[str, str]:
    if iv is None:
        return "-", ""
    digits = ".2f" if iv.estimate < 10 else ",.0f"
    return f"${iv.estimate:{digits}}", f"({iv.low:{digits}}–{iv.high:{digits}})"


def _throughput(o: Any, tokens: bool = True) -> tuple[str, str]:
    if tokens and o.throughput_tokens_per_s is not None:
        return _count(o.throughput_tokens_per_s)
    return _count(o.throughput_samples_per_s)


def _rate_name(outcomes: list[Any]) -> tuple[str, bool]:
    """Column name and whether to show tokens/s (only when every run has it)."""
    tokens = all(o.throughput_tokens_per_s is not None for o in outcomes)
    return ("Tokens/s" if tokens else "Samples/s"), tokens


def _memory(o: Any) -> tuple[str, str]:
    """Device memory per GPU in GB (what the fit verdict compares) with its interval, out of the
    GPU's memory where known: ('38.4/80 GB', '(36.1–47.0)')."""
    iv = o.device_memory_gb or o.peak_memory_gb
    cap = f"/{o.memory_capacity_gb:.0f}" if o.memory_capacity_gb else ""
    return f"{iv.estimate:.1f}{cap} GB", f"({iv.low:.1f}–{iv.high:.1f})"


def _memory_fit(o: Any) -> tuple[str, str]:
    """`_memory`, marked OOM where the estimate does not fit and tight where its interval does not."""
    main, ends = _memory(o)
    if not o.fits_in_memory:
        return f"{main} [red]OOM[/red]", ends
    return (f"{main} [yellow]tight[/yellow]" if o.tight else main), ends


def _mfu(o: Any) -> tuple[str, str]:
    if o.mfu is None:
        return "-", ""
    return f"{o.mfu.estimate:.0%}", f"({o.mfu.low:.0%}–{o.mfu.high:.0%})"


def _join(pair: tuple[str, str]) -> str:
    return _cell(*pair, two_lines=False)


def _short_key(key: str, values: list[str]) -> str:
    """A column name for a dotted config key at narrow widths: its last part, one word a line
    where it is wider than the values below it ('training.micro_batch_size' -> 'micro/batch/size'
    on three lines)."""
    words = key.rsplit(".", 1)[-1].replace("_", " ")
    width = max([len(v) for v in values] + [5])
    return "\n".join(textwrap.wrap(words, width=width, break_long_words=False)) or words


def _short_label(label: str) -> str:
    """A compared run's label without the sections of its dotted keys:
    'hardware.gpu=H100-SXM, training.seq_len=1024' -> 'gpu=H100-SXM, seq_len=1024'."""
    return re.sub(r"(?:[A-Za-z_][\w-]*\.)+(?=[\w-]+=)", "", label)


def _sweep_table(result: Any, *, narrow: bool, two_lines: bool = False, drop: tuple[str, ...] = ()) -> Any:
    """The sweep as one table: `narrow` = compact borders and short key names, `two_lines` = each
    interval below its estimate, `drop` = columns left out."""
    # rich: only output needs it (the CLI's cold start)
    from rich.markup import escape


    table = compact_table() if narrow else _boxed_table()
    values = {k: [_value(p.values[k]) for p in result.points] for k in result.keys}
    for key in result.keys:
        table.add_column(escape(_short_key(key, values[key]) if narrow else key), overflow="fold")
    rate, tokens = _rate_name([p.outcome for p in result.points if p.outcome is not None])
    columns = [c for c in ("Total time", rate, "Cost", "Device mem", "Fits", "MFU") if c not in drop]
    for col in columns:
        table.add_column(col, justify="right", overflow="fold")
    unit = common_duration_unit(p.outcome.total_time_s.estimate for p in result.points if p.outcome is not None)
    for i, p in enumerate(result.points):
        keys = [escape(values[k][i]) for k in result.keys]
        o = p.outcome
        if o is None:  # the error itself is printed below the table
            table.add_row(*keys, "[red]error[/red]", *([""] * (len(columns) - 1)))
            continue
        star = (" †" if o.extrapolation else "") + (" ‡" if p.adjusted else "")
        main, ends = _time(o.total_time_s, unit)
        cells = {
            "Total time": _cell(main + star, ends, two_lines),
            rate: _cell(*_throughput(o, tokens), two_lines),
            "Cost": _cell(*_usd(o.cost_usd), two_lines),
            "Device mem": _cell(*_memory(o), two_lines),
            "Fits": "[red]OOM[/red]" if not o.fits_in_memory else "[yellow]tight[/yellow]" if o.tight else "[green]yes[/green]",
            "MFU": _cell(*_mfu(o), two_lines),
        }
        table.add_row(*keys, *(cells[c] for c in columns))
    return table


def _boxed_table() -> Any:
    # rich: only output needs it (the CLI's cold start)
    from rich.table import Table

    return Table()


LAYOUTS: tuple[dict[str, Any], ...] = (
    {"narrow": False},
    {"narrow": True},
    {"narrow": True, "two_lines": True},
    {"narrow": True, "two_lines": True, "drop": ("MFU",)},
    {"narrow": True, "two_lines": True, "drop": ("MFU", "Cost")},
)
"""The table layouts tried, widest first, until one fits the terminal (`FitWidth`): boxed with
full key names, compact with short names, each interval below its estimate, then without MFU,
then without cost (compare uses the first three)."""


def render_sweep(result: Any, console: Any) -> None:
    # rich: only output needs it (the CLI's cold start)
    from rich.markup import escape


    level = f"{result.confidence_level:.0%}"
    render_title(
        console,
        f"perfmodel sweep — {result.config}",
        f"{result.model_kind} model {result.model_version}; intervals at {level}",
    )
    console.print(FitWidth(*(_sweep_table(result, **layout) for layout in LAYOUTS)))
    for p in result.points:
        if p.outcome is None:
            where = ", ".join(_value(p.values[k]) for k in result.keys)
            console.print(f"[red]error[/red] at {escape(where)}: {escape(p.error or 'no prediction')}")
    winner = result.fastest()
    if winner is not None:
        console.print(escape(winner.line))
    if any(p.outcome is not None and p.outcome.extrapolation for p in result.points):
        console.print("[dim]† extrapolates beyond the training data (see --json warnings)[/dim]")
    if any(p.adjusted for p in result.points):
        console.print(
            "[dim]‡ moved to obey the physics along a key (a larger micro-batch or more data-parallel GPUs never "
            "take longer; ddp scales no better than the communication model allows): see --json adjusted, --raw for the "
            "model's own[/dim]"
        )


def _ratio(r: Any) -> tuple[str, str]:
    if r is None:
        return "-", ""
    if r.low == r.high == 1.0:
        return "1 (baseline)", ""
    return f"x{r.estimate:.2f}", f"({r.low:.2f}–{r.high:.2f})"


def _compare_table(result: Any, *, narrow: bool, two_lines: bool = False) -> Any:
    """The comparison as one table: `narrow` = compact borders and short run labels, `two_lines` =
    each interval below its estimate."""
    # rich: only output needs it (the CLI's cold start)
    from rich.markup import escape


    runs = result.runs
    rate, tokens = _rate_name([r.outcome for r in runs])
    unit = common_duration_unit(r.outcome.total_time_s.estimate for r in runs)
    table = compact_table() if narrow else _boxed_table()
    table.add_column("", overflow="fold")
    for r in runs:
        table.add_column(
            escape(_short_label(r.label) if narrow else r.label), justify="right", overflow="fold"
        )
    pairs = [
        ("Total time", [_time(r.outcome.total_time_s, unit) for r in runs]),
        ("Time ratio", [_ratio(r.time_ratio) for r in runs]),
        ("Cost", [_usd(r.outcome.cost_usd) for r in runs]),
        ("Cost ratio", [_ratio(r.cost_ratio) for r in runs]),
        (rate, [_throughput(r.outcome, tokens) for r in runs]),
    ]
    table.add_row("Hardware", *[f"{r.outcome.num_gpus} x {r.outcome.gpu}" for r in runs])
    for name, cells in pairs:
        table.add_row(name, *[_cell(*c, two_lines=two_lines) for c in cells])
    table.add_row("Device memory", *[_cell(*_memory_fit(r.outcome), two_lines=two_lines) for r in runs])
    table.add_row("MFU", *[_cell(*_mfu(r.outcome), two_lines=two_lines) for r in runs])
    diffs = {k: v for k, v in result.differences.items() if not k.startswith("model.") or k == "model.name"}
    for key, values in list(diffs.items())[:20]:
        table.add_row(f"[dim]{escape(key)}[/dim]", *[f"[dim]{escape(_value(v))}[/dim]" for v in values])
    return table


def render_compare(result: Any, console: Any) -> None:
    # rich: only output needs it (the CLI's cold start)
    from rich.markup import escape


    runs = result.runs
    render_title(
        console,
        "perfmodel compare",
        f"intervals at {result.confidence_level:.0%}; ratios to {runs[0].label}",
    )
    console.print(FitWidth(*(_compare_table(result, **layout) for layout in LAYOUTS[:3])))
    for line in result.verdicts():
        console.print(escape(line))
    for r in runs:
        if r.adjusted:
            console.print(f"[dim]‡ {escape(r.label)}: {escape(r.adjusted)} (--raw: the model's own)[/dim]")
    kinds = sorted({r.time_ratio.kind for r in runs[1:] if r.time_ratio.kind})
    rhos = ", ".join(
        f"{k} rho={next(r.time_ratio.rho for r in runs[1:] if r.time_ratio.kind == k):.2f}" for k in kinds
    )
    console.print(
        f"[dim]paired intervals: sqrt(h_a^2 + h_b^2 - 2 rho h_a h_b), rho measured per kind of change on "
        f"held-out measured pairs ({escape(rhos)}); docs/decide.md[/dim]"
    )


def _print_fields(console: Any, *fields: str) -> None:
    """Fields (Rich markup) on one indented line three spaces apart, a new line where the next
    field would not fit the console (rather than let Rich break a field in two)."""
    # rich: only output needs it (the CLI's cold start)
    from rich.text import Text

    line = ""
    for field in fields:
        joined = f"{line}   {field}" if line else f"    {field}"
        if line and Text.from_markup(joined).cell_len > console.width:
            console.print(line)
            joined = f"    {field}"
        line = joined
    console.print(line)


def render_advice(result: Any, console: Any) -> None:
    # rich: only output needs it (the CLI's cold start)
    from rich.markup import escape


    wants = []
    if result.deadline_s is not None:
        wants.append(f"finish within {fmt_duration(result.deadline_s)}")
    if result.budget_usd is not None:
        wants.append(f"cost at most {fmt_usd(result.budget_usd)}")
    basis = "the intervals' high ends" if result.conservative else "the estimates"
    render_title(
        console,
        f"perfmodel advise — {result.config}",
        f"global batch {result.global_batch} kept; {len(result.gpus)} GPU types, up to {result.max_gpus} GPUs; "
        f"intervals at {result.confidence_level:.0%}",
    )
    console.print("goal: " + (" and ".join(wants) + f" (on {basis})" if wants else "no deadline or budget"))
    if result.current is not None:
        o = result.current.outcome
        ok = "[green]meets it[/green]" if result.current.meets_constraints else "[red]does not meet it[/red]"
        if not o.fits_in_memory:
            ok = "[red]does not fit in memory[/red]"
        console.print(f"now: {escape(result.current.label)} — {ok}")
        console.print(f"     {_join(_time(o.total_time_s))}, {_join(_usd(o.cost_usd))}, {_join(_memory(o))}")
        if result.current.adjusted:
            console.print(f"     [dim]‡ {escape(result.current.adjusted)}[/dim]")
    console.print(
        f"[dim]searched {result.searched} combinations: {result.fitting} fit, {result.meeting} pass the screen, "
        f"{result.predicted} predicted in full[/dim]"
    )
    marked = False
    for title, options in (("Fastest", result.by_time), ("Cheapest", result.by_cost)):
        console.print()
        if not options:
            console.print(f"[bold]{title}:[/bold] [yellow]no option meets the constraints[/yellow]")
            continue
        console.print(f"[bold]{title}[/bold]")
        if title == "Fastest" and result.first_vs_second():
            console.print(f"[dim]{escape(result.first_vs_second())}[/dim]")
        for i, opt in enumerate(options, 1):
            o = opt.outcome
            star = " †" if o.extrapolation else ""
            marked = marked or bool(star)
            console.print(f" {i}. [bold]{escape(opt.label)}[/bold]{star}")
            _print_fields(
                console,
                f"time {_join(_time(o.total_time_s))}",
                f"cost {_join(_usd(o.cost_usd))}",
                f"peak {_join(_memory(o))}",
            )
            if opt.tight_memory:
                console.print("    [yellow]tight: the memory interval's high end does not fit[/yellow]")
            if opt.vs_current is not None:
                console.print(f"    [dim]{escape(opt.verdict_vs_current(result.confidence_level))}[/dim]")
            if opt.adjusted:
                console.print(f"    [dim]‡ {escape(opt.adjusted)}[/dim]")
            for c in opt.changes:
                old = escape(_value(c.old)) if c.old is not None else "unset"
                flag = f"  [dim](perfmodel {escape(c.flag)})[/dim]" if c.flag else ""
                console.print(f"    {escape(c.key)}: {old} → {escape(_value(c.new))}{flag}")
    if marked:
        console.print(
            "[dim]† the prediction extrapolates beyond the training data (see --json warnings)[/dim]"
        )
    for note in result.notes:
        console.print(f"[dim]{escape(note)}[/dim]")


def render_pair_calibration(artifact: Any, console: Any) -> None:
    """The pair correlations and their held-out check (`perfmodel compare --calibrate-pairs`)."""
    # rich: only output needs it (the CLI's cold start)
    from rich.markup import escape

    check = artifact["heldout"]["90"]
    render_title(
        console,
        "perfmodel paired-comparison calibration",
        f"{check['all']['pairs']:,} held-out measured pairs from {check['all']['sources']} sources; "
        "rho at 80/90/95%; check at 90%, each source with rho from the others",
    )
    table = compact_table()
    for name in ("kind", "pairs", "src", "rho 80/90/95", "coverage", "by source", "says so", "indep."):
        table.add_column(name, justify="left" if name == "kind" else "right")
    for kind, entry in artifact["kinds"].items():
        held = entry.get("heldout_90") or {}
        rho = "/".join(f"{v:.2f}" for v in entry["rho"].values())
        if entry.get("uses"):
            rho += f" ({entry['uses']})"

        def pct(v: Any) -> str:
            return "-" if v is None else f"{v:.0%}"

        table.add_row(
            escape(kind), f"{entry['pairs']:,}", str(entry["sources"]), escape(rho),
            pct(held.get("coverage")), pct(held.get("coverage_by_source")),
            pct(held.get("says_so_0.1")), pct(held.get("says_so_independent_0.1")),
        )
    console.print(table)
    a = check["all"]
    console.print(
        f"coverage {a['coverage']:.0%} of pairs ({a['coverage_by_source']:.0%} one vote per source); of "
        f"{a['differ_by_more_than_0.1']:,} pairs measured more than x1.105 apart, the paired interval says "
        f"which is faster in {a['says_so_0.1']:.0%} (wrong way {a['wrong_way_0.1']:.1%}; independent "
        f"errors: {a['says_so_independent_0.1']:.0%})"
    )
