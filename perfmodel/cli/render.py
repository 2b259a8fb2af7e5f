"""Human-readable rendering of predictions (Rich); numbers formatted with units."""

from __future__ import annotations

from typing import Any

from perfmodel.predict import Interval, PredictedRun


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
