"""Rich rendering of sweep, compare and advise results (the `perfmodel sweep / compare / advise`
tables); numbers as one unit per interval, e.g. '23.7 h (14.9–37.7)'."""

from __future__ import annotations

from typing import Any


def _iv(iv: Any, fmt: Any) -> str:
    if iv is None:
        return "-"
    return f"{fmt(iv.estimate)} [dim]({fmt(iv.low)}–{fmt(iv.high)})[/dim]"


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, dict):
        import json

        return json.dumps(v, separators=(", ", ": ")).replace('"', "")
    return "-" if v is None else str(v)


def _scaled(iv: Any, units: tuple[tuple[str, float, float], ...], sep: str = "") -> str:
    """An interval in the first unit (name, size, from) whose threshold its estimate reaches:
    '23.7 h (14.9–37.7)'."""
    name, size, _ = next((u for u in units if abs(iv.estimate) >= u[2]), units[-1])
    return f"{iv.estimate / size:.3g}{sep}{name} [dim]({iv.low / size:.3g}–{iv.high / size:.3g})[/dim]"


_TIME_UNITS = (("days", 86400.0, 3 * 86400.0), ("h", 3600.0, 7200.0), ("min", 60.0, 120.0), ("s", 1.0, 0.0))
_COUNT_UNITS = (("M", 1e6, 1e6), ("k", 1e3, 1e3), ("", 1.0, 0.0))


def _time(iv: Any) -> str:
    return _scaled(iv, _TIME_UNITS, sep=" ")


def _usd(iv: Any) -> str:
    if iv is None:
        return "-"
    digits = ".2f" if iv.estimate < 10 else ",.0f"
    return f"${iv.estimate:{digits}} [dim]({iv.low:{digits}}–{iv.high:{digits}})[/dim]"


def _throughput(o: Any, tokens: bool = True) -> str:
    if tokens and o.throughput_tokens_per_s is not None:
        return _scaled(o.throughput_tokens_per_s, _COUNT_UNITS)
    return _scaled(o.throughput_samples_per_s, _COUNT_UNITS)


def _rate_name(outcomes: list[Any]) -> tuple[str, bool]:
    """Column name and whether to show tokens/s (only when every run has it)."""
    tokens = all(o.throughput_tokens_per_s is not None for o in outcomes)
    return ("Tokens/s" if tokens else "Samples/s"), tokens


def _memory(o: Any) -> str:
    cap = f"/{o.memory_capacity_gb:.0f}" if o.memory_capacity_gb else ""
    return f"{o.peak_memory_gb.estimate:.1f}{cap} GB"


def _mfu(o: Any) -> str:
    return _iv(o.mfu, lambda v: f"{v:.0%}") if o.mfu is not None else "-"


def render_sweep(result: Any, console: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    level = f"{result.confidence_level:.0%}"
    table = Table(
        title=f"perfmodel sweep — {escape(result.config)}; {result.model_kind} model {result.model_version}; "
        f"intervals at {level}",
        title_justify="left",
    )
    for key in result.keys:
        table.add_column(escape(key), overflow="fold")
    rate, tokens = _rate_name([p.outcome for p in result.points if p.outcome is not None])
    for col in ("Total time", rate, "Cost", "Peak mem", "Fits", "MFU"):
        table.add_column(col, justify="right")
    marked = False
    for p in result.points:
        keys = [escape(_value(p.values[k])) for k in result.keys]
        o = p.outcome
        if o is None:
            table.add_row(*keys, f"[red]{escape(p.error or '')}[/red]", "", "", "", "", "")
            continue
        star = " †" if o.extrapolation else ""
        marked = marked or bool(star)
        fits = "[green]yes[/green]" if o.fits_in_memory else "[red]OOM[/red]"
        table.add_row(
            *keys,
            _time(o.total_time_s) + star,
            _throughput(o, tokens),
            _usd(o.cost_usd),
            _memory(o),
            fits,
            _mfu(o),
        )
    console.print(table)
    if marked:
        console.print("[dim]† extrapolates beyond the training data (see --json warnings)[/dim]")


def _ratio(r: Any) -> str:
    if r is None:
        return "-"
    if r.low == r.high == 1.0:
        return "1 (baseline)"
    return f"x{r.estimate:.2f} [dim]({r.low:.2f}–{r.high:.2f})[/dim]"


def render_compare(result: Any, console: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    runs = result.runs
    rate, tokens = _rate_name([r.outcome for r in runs])
    table = Table(
        title=f"perfmodel compare — intervals at {result.confidence_level:.0%}; ratios to {escape(runs[0].label)}",
        title_justify="left",
    )
    table.add_column("")
    for r in runs:
        table.add_column(escape(r.label), justify="right")
    rows = [
        ("Hardware", [f"{r.outcome.num_gpus} x {r.outcome.gpu}" for r in runs]),
        ("Total time", [_time(r.outcome.total_time_s) for r in runs]),
        ("Time ratio", [_ratio(r.time_ratio) for r in runs]),
        ("Cost", [_usd(r.outcome.cost_usd) for r in runs]),
        ("Cost ratio", [_ratio(r.cost_ratio) for r in runs]),
        (rate, [_throughput(r.outcome, tokens) for r in runs]),
        (
            "Peak memory",
            [_memory(r.outcome) + ("" if r.outcome.fits_in_memory else " [red]OOM[/red]") for r in runs],
        ),
        ("MFU", [_mfu(r.outcome) for r in runs]),
    ]
    for name, cells in rows:
        table.add_row(name, *cells)
    diffs = {k: v for k, v in result.differences.items() if not k.startswith("model.") or k == "model.name"}
    for key, values in list(diffs.items())[:20]:
        table.add_row(f"[dim]{escape(key)}[/dim]", *[f"[dim]{escape(_value(v))}[/dim]" for v in values])
    console.print(table)
    base = runs[0]
    for r in runs[1:]:
        ratio = r.time_ratio
        if ratio.estimate < 1:
            what = f"{1 / ratio.estimate:.2f}x faster than"
        else:
            what = f"{ratio.estimate:.2f}x slower than"
        verdict = (
            "larger than the uncertainty"
            if ratio.significant
            else "within the uncertainty: the predictions cannot tell them apart"
        )
        console.print(
            f"{escape(r.label)} is {what} {escape(base.label)} (time ratio {ratio.estimate:.2f}, "
            f"{ratio.low:.2f}–{ratio.high:.2f}): {verdict}"
        )
    console.print(f"[dim]ratio intervals: {escape(result.method)}[/dim]")


def render_advice(result: Any, console: Any) -> None:
    from rich.markup import escape

    from perfmodel.cli.render import fmt_duration, fmt_usd

    wants = []
    if result.deadline_s is not None:
        wants.append(f"finish within {fmt_duration(result.deadline_s)}")
    if result.budget_usd is not None:
        wants.append(f"cost at most {fmt_usd(result.budget_usd)}")
    basis = "the intervals' high ends" if result.conservative else "the estimates"
    console.print(
        f"[bold]perfmodel advise[/bold] — {escape(result.config)}: "
        + (" and ".join(wants) + f" (on {basis})" if wants else "no deadline or budget")
        + f"; global batch {result.global_batch} kept; {len(result.gpus)} GPU types, up to {result.max_gpus} GPUs; "
        f"intervals at {result.confidence_level:.0%}"
    )
    if result.current is not None:
        o = result.current.outcome
        ok = "[green]meets it[/green]" if result.current.meets_constraints else "[red]does not meet it[/red]"
        if not o.fits_in_memory:
            ok = "[red]does not fit in memory[/red]"
        console.print(
            f"now: {escape(result.current.label)}: {_time(o.total_time_s)}, "
            f"{_usd(o.cost_usd)}, {_memory(o)} — {ok}"
        )
    console.print(
        f"[dim]searched {result.searched} combinations; {result.fitting} fit in memory; {result.meeting} meet the "
        f"constraints by the screen; {result.predicted} predicted in full[/dim]"
    )
    marked = False
    for title, options in (("Fastest", result.by_time), ("Cheapest", result.by_cost)):
        console.print()
        if not options:
            console.print(f"[bold]{title}:[/bold] [yellow]no option meets the constraints[/yellow]")
            continue
        console.print(f"[bold]{title}[/bold]")
        for i, opt in enumerate(options, 1):
            o = opt.outcome
            star = " †" if o.extrapolation else ""
            marked = marked or bool(star)
            tight = (
                " [yellow](tight: the interval's high end does not fit)[/yellow]" if opt.tight_memory else ""
            )
            console.print(f" {i}. [bold]{escape(opt.label)}[/bold]{star}")
            console.print(
                f"    time {_time(o.total_time_s)}   cost {_usd(o.cost_usd)}   peak memory {_memory(o)}{tight}"
            )
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
