"""Human-readable rendering of predictions (Rich); numbers formatted with units."""

from __future__ import annotations

from typing import Any

from perfmodel.prediction import Interval, PredictedRun


def fmt_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes = seconds / 60
    if minutes < 120:
        return f"{minutes:.0f} min"
    hours = minutes / 60
    if hours < 48:
        return f"{int(hours)} h {int(minutes % 60):02d} min"
    return f"{hours / 24:.1f} days"


def fmt_number(value: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g}"


def fmt_interval(iv: Interval, fmt: Any, unit: str = "") -> str:
    suffix = f" {unit}" if unit else ""
    return f"{fmt(iv.estimate)}{suffix}  [dim]({fmt(iv.low)} – {fmt(iv.high)})[/dim]"


def render_prediction(pred: PredictedRun, console: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    w = pred.workload
    a = pred.analytic
    t = w.training
    par = w.parallel
    level = f"{pred.confidence_level:.0%}"
    title = (
        f"perfmodel prediction — {pred.model_kind} model {pred.model_version}"
        + (f", {pred.trained_rows:,} training rows" if pred.trained_rows else "")
        + f"; intervals at {level}"
    )
    table = Table(title=title, show_header=False, box=None, pad_edge=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    trainable = ""
    if a.params.trainable < a.params.total:
        trainable = f", {fmt_number(a.params.trainable)} trainable"
        if t.lora_r:
            trainable += f" (LoRA r={t.lora_r}" + (f", {t.quantization_bits}-bit base)" if t.quantization_bits else ")")
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
        table.add_row("Throughput", fmt_interval(pred.throughput_tokens_per_s, lambda v: f"{v:,.0f}", "tokens/s"))
    table.add_row("", fmt_interval(pred.throughput_samples_per_s, lambda v: f"{v:,.3g}", "samples/s"))
    table.add_row(f"{a.step_unit.capitalize()} time", fmt_interval(pred.step_time_s, fmt_duration))
    table.add_row("Steps", f"{pred.total_steps:,}")
    table.add_row("Total time", fmt_interval(pred.total_time_s, fmt_duration))
    table.add_row("GPU-hours", fmt_interval(pred.gpu_hours, lambda v: f"{v:,.3g}"))
    if pred.cost_usd is not None and pred.price is not None:
        table.add_row("Cost", fmt_interval(pred.cost_usd, fmt_usd) + f" [dim]at {fmt_usd(pred.price.usd_per_gpu_hour)}/GPU-hour ({escape(_price_origin(pred.price))})[/dim]")
    verdict = "[green]fits[/green]" if pred.fits_in_memory else "[red]does NOT fit[/red]"
    mem = pred.peak_memory_gb
    table.add_row(
        "Peak memory",
        f"{mem.estimate:.1f} GB [dim]({mem.low:.1f} – {mem.high:.1f})[/dim] of {pred.memory_capacity_gb:.0f} GB "
        f"per GPU: {verdict} (margin {pred.memory_margin_gb:+.1f} GB)",
    )
    bottleneck = pred.bottleneck
    if pred.mfu:
        bottleneck += f"; MFU {pred.mfu.estimate:.0%} ({pred.mfu.low:.0%} – {pred.mfu.high:.0%})"
    table.add_row("Bottleneck", bottleneck)
    console.print(table)
    from rich.markup import escape

    for line in w.assumptions:
        console.print(f"[dim]assumed:[/dim] {escape(line)}")
    for line in pred.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(line)}")


def fmt_usd(value: float) -> str:
    """US dollars, with cents below $10."""
    return f"${value:,.2f}" if abs(value) < 10 else f"${value:,.0f}"


def _price_origin(price: Any) -> str:
    if price.rule == "given":
        return "given"
    rng = price.listed_range_usd
    count = len(price.listed)
    where = "1 listed on-demand price" if count == 1 else f"median of {count} on-demand list prices"
    if rng and rng[0] != rng[1]:
        where += f", {fmt_usd(rng[0])}-{fmt_usd(rng[1])}"
    return where


def _yaml_value(value: Any) -> str:
    """A value as it is written in YAML (true/false, flow mappings)."""
    import json

    if isinstance(value, (bool, dict)):
        return json.dumps(value, separators=(", ", ": ")).replace('"', "")
    return str(value)


def render_fit_suggestions(report: Any, console: Any) -> None:
    """What would fit (perfmodel.decide.fit.FitReport), one line per suggestion."""
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
        flags = " ".join(f"--set {k}={_yaml_value(v)}" if k != "hardware.gpu" else f"--gpu {v}" for k, v in (s.flags or {}).items())
        console.print(
            f"[green]fits with[/green] {escape(s.summary)}: total {fmt_duration(o.total_time_s.estimate)} "
            f"[dim]({fmt_duration(o.total_time_s.low)} – {fmt_duration(o.total_time_s.high)})[/dim]{cost}, "
            f"peak {o.peak_memory_gb.estimate:.1f} of {o.memory_capacity_gb:.0f} GB"
        )
        console.print(f"  [dim]set {escape(settings)}" + (f"; perfmodel {escape(flags)}" if flags else "") + "[/dim]")
    for note in report.notes:
        console.print(f"[dim]{escape(note)}[/dim]")
