"""`perfmodel probe`, `perfmodel monitor`, `perfmodel ingest`, `perfmodel runs`: before, during
and after a run.

Each command parses, calls one library function (perfmodel.run.probe.probe_workload,
perfmodel.monitor.watch.monitor_path / follow_path, perfmodel.ingest.ingest_run,
perfmodel.monitor.runs.summarize_runs) and renders
its result (Rich, or JSON with --json)."""

# ruff: noqa: UP045 - typer needs Optional[...] (not X | None) in annotations on Python 3.10
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from perfmodel.cli import _common
from perfmodel.request import RunRequest

Opt = typer.Option


def register(app: typer.Typer) -> None:
    app.command("probe")(probe_command)
    app.command("monitor")(monitor_command)
    app.command("ingest")(ingest_command)
    app.command("runs")(runs_command)
    app.command("validate")(validate_command)


def _dur(seconds: float) -> str:
    # loaded when the command runs (CLI start-up)
    from perfmodel.monitor.report import fmt_seconds

    return fmt_seconds(seconds)


def _iv(iv: Any) -> str:
    return f"{_dur(iv.estimate)} [dim]({_dur(iv.low)} – {_dur(iv.high)})[/dim]"


def _table(title: str) -> Any:
    # rich: only output needs it (the CLI's cold start)
    from rich.table import Table

    table = Table(title=title, show_header=False, box=None, pad_edge=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    return table


# --- probe ------------------------------------------------------------------------------------


@_common.run_options(exclude=("analytic",))
def probe_command(
    request: RunRequest,
    steps: Annotated[int, Opt("--steps", min=10, help="Measured steps after warm-up (>= 10).")] = 10,
    device: Annotated[
        Optional[str], Opt("--device", help="cpu, cuda or cuda:N (default: a GPU when there is one).")
    ] = None,
    budget_s: Annotated[
        float,
        Opt("--budget-s", min=1.0, help="Wall-time budget in s: the probe is sized to it and stops at it."),
    ] = 120.0,
    out: Annotated[
        Optional[Path],
        Opt("--out", help="Shard folder for the measured row (default: the collectors' folder)."),
    ] = None,
    keep: Annotated[
        bool, Opt("--keep/--no-keep", help="Append the measured row to the shard folder.")
    ] = True,
    record: Annotated[
        Optional[Path],
        Opt("--record", help="Also write a run record (for perfmodel ingest) to this file or folder."),
    ] = None,
    json_out: Annotated[
        bool, Opt("--json", help="predict --json of the updated prediction, plus a 'probe' key.")
    ] = False,
) -> None:
    """Run a few real steps of the config on this machine (scaled down when it does not fit), then
    update the prediction: measured step time x the model's ratio for what differs."""
    # loaded when the command runs (CLI start-up)
    from perfmodel.config import resolve_workload
    from perfmodel.prediction import predictor_options
    from perfmodel.run.probe import probe_workload

    predictor = predictor_options(request)
    result = probe_workload(
        resolve_workload(request),
        steps=steps,
        device=device,
        budget_s=budget_s,
        confidence=predictor["confidence"],
        model_dir=predictor["model_dir"],
        use_calibration=predictor["use_calibration"],
        keep=keep,
        out_dir=out,
        record_path=record,
    )
    if json_out:
        _common.print_json(result.to_json())
    else:
        _render_probe(result, _common.stdout_console())
    if result.stopped == "interrupted":
        raise SystemExit(130)


def _render_probe(result: Any, console: Any) -> None:
    # rich: only output needs it (the CLI's cold start)
    from rich.markup import escape

    b, a, m, c, plan = result.before, result.after, result.measurement, result.combined, result.plan
    host = f"{m.hardware_id} ({m.device})" if m else "this machine"
    table = _table(
        f"perfmodel probe — {escape(b.workload.model.name)} on {host}; intervals at {b.confidence_level:.0%}"
    )
    table.add_row("Before", f"step {_iv(b.step_time_s)}   total {_iv(b.total_time_s)}")
    if plan is not None:
        scaled = "; ".join(plan.scaled) or "full size"
        table.add_row("Probe", f"{escape(plan.config.describe())} [dim]({escape(scaled)})[/dim]")
        for line in plan.differences:
            table.add_row("", f"[dim]differs: {escape(line)}[/dim]")
    if m is not None:
        warm = ", ".join(_dur(t) for t in m.warmup_times_s)
        table.add_row("Warm-up", f"{len(m.warmup_times_s)} steps excluded: {warm}")
        mean = m.mean_s
        memory = f", peak memory {m.peak_memory_gb:.2f} GB" if m.peak_memory_gb is not None else ""
        table.add_row(
            "Measured",
            f"{len(m.step_times_s)} steps: mean {_dur(mean[0])} [dim]({_dur(mean[1])} – {_dur(mean[2])})[/dim], "
            f"median {_dur(m.median_s)}, CV {m.cv:.0%}{memory}",
        )
    if c is not None:
        table.add_row(
            "Model carries",
            f"x {c.ratio:.3g} ({escape(c.reason)}; f = {c.ratio_fraction:.2f} of its uncertainty)",
        )
        table.add_row("Combined", f"step {_iv(c.step_time_s)}")
    stands = c is not None and a.step_time_s == b.step_time_s
    verdict = " [yellow](the prediction stands: the probe did not narrow it)[/yellow]" if stands else ""
    table.add_row("After", f"step {_iv(a.step_time_s)}   total {_iv(a.total_time_s)}{verdict}")
    if result.row_id:
        table.add_row("Kept", f"row {result.row_id} in {escape(str(result.shard))}")
    table.add_row("Stopped", f"{result.stopped} after {_dur(result.elapsed_s)}")
    console.print(table)
    for line in result.notes:
        console.print(f"[dim]note:[/dim] {escape(line)}")


# --- monitor ----------------------------------------------------------------------------------


def monitor_command(
    path: Annotated[
        Path,
        typer.Argument(
            help="Run folder, perfmodel_run.json, trainer_state.json, training_progress.json, or a CSV/JSONL of step times."
        ),
    ],
    follow: Annotated[
        bool, Opt("--follow", "-f", help="Keep reading as the run goes (Ctrl-C to stop).")
    ] = False,
    interval_s: Annotated[
        float, Opt("--interval-s", min=0.1, help="Seconds between reads with --follow.")
    ] = 10.0,
    config: Annotated[
        Optional[Path], Opt("--config", "-c", help="The run's config, for the predicted prior.")
    ] = None,
    set_: Annotated[Optional[list[str]], Opt("--set", help="Override a config key (repeatable).")] = None,
    total_steps: Annotated[
        Optional[int],
        Opt(
            "--total-steps",
            min=1,
            help="Steps the run will take (when its files do not say); a finished shorter run is extrapolated to it.",
        ),
    ] = None,
    confidence: Annotated[float, Opt("--confidence", help="Interval confidence level.")] = 0.9,
    model_dir: Annotated[Optional[Path], Opt("--model-dir", help="Learned model folder.")] = None,
    json_out: Annotated[
        bool, Opt("--json", help="Machine-readable output (one JSON document per report).")
    ] = False,
    verbose: Annotated[
        bool,
        Opt(
            "--verbose",
            "-v",
            help="With --follow: the full report at every read, not one line of at most 100 characters "
            "(also PERFMODEL_VERBOSE=1).",
        ),
    ] = False,
) -> None:
    """ETA, warm-up, stable-phase statistics and bottleneck hints of a run from its files."""
    # loaded when the command runs (CLI start-up)
    from perfmodel.monitor.report import format_short, resolve_verbose
    from perfmodel.monitor.watch import follow_path, monitor_path

    detail = resolve_verbose(True if verbose else None)

    kwargs: dict[str, Any] = {
        "config": config,
        "overrides": set_ or [],
        "total_steps": total_steps,
        "confidence": confidence,
        "model_dir": model_dir,
    }
    reports = follow_path(path, interval_s=interval_s, **kwargs) if follow else [monitor_path(path, **kwargs)]
    shown: set[str] = set()
    for report in reports:
        if json_out:
            # loaded when the command runs (CLI start-up)
            from perfmodel.cli._common import _json_default

            print(json.dumps(report.to_json(), default=_json_default), flush=True)
        elif follow and not detail:  # a live view: one line a read, the hints once each
            print(format_short(report.snapshot), flush=True)
            for hint in report.snapshot.hints:
                if hint not in shown:
                    shown.add(hint)
                    print(f"[perfmodel] hint: {hint}", flush=True)
        else:
            _render_monitor(report, _common.stdout_console())


def _render_monitor(report: Any, console: Any) -> None:
    # rich: only output needs it (the CLI's cold start)
    from rich.markup import escape

    s, t = report.snapshot, report.trace
    table = _table(f"perfmodel monitor — {escape(t.path)} ({t.format})")
    total = f" of {s.total_steps}" if s.total_steps is not None else ""
    table.add_row(
        "Progress",
        f"global step {t.steps_done}; {s.steps_done} timed steps{total}, {_dur(s.elapsed_s)} timed",
    )
    if s.warmup_steps:
        unit = "step" if s.warmup_steps == 1 else "steps"
        table.add_row("Warm-up", f"{s.warmup_steps} {unit} ({_dur(s.warmup_s)}) excluded")
    obs = s.observed
    if obs is not None and obs.intervals >= 2:
        table.add_row(
            "Stable phase",
            f"from step {s.stable_from_step}: mean {_dur(obs.mean_s)}/step, median {_dur(obs.median_s)}, "
            f"p10–p90 {_dur(obs.p10_s)} – {_dur(obs.p90_s)}, CV {obs.cv:.0%} ({obs.intervals} intervals)",
        )
    elif s.steps_done:
        table.add_row("Mean step", f"{_dur(s.elapsed_s / s.steps_done)} (all steps, warm-up included)")
    if s.predicted_step_time_s is not None:
        table.add_row("Predicted", f"step {_iv(s.predicted_step_time_s)}")
    if s.finished:
        table.add_row("Finished", f"in {_dur(s.elapsed_s)} timed")
    elif report.extrapolated and s.remaining_s is not None and s.total_s is not None:
        rest = (s.total_steps or 0) - s.steps_done
        table.add_row(
            "Extrapolated",
            f"ran {s.steps_done} of {s.total_steps} steps; the other {rest}: {_iv(s.remaining_s)}",
        )
        table.add_row("Whole run", f"{_iv(s.total_s)} timed, at {s.confidence:.0%}")
    elif s.remaining_s is not None:
        weight = f"; prediction weight {s.prior_weight:.0%}" if s.prior_weight is not None else ""
        table.add_row("ETA", f"{_iv(s.remaining_s)} at {s.confidence:.0%}{weight}")
        if report.seconds_since_update is not None:
            table.add_row("", f"[dim]from the last progress, {_dur(report.seconds_since_update)} ago[/dim]")
    else:
        table.add_row("ETA", "unknown: give --total-steps (or --config) and/or wait for more steps")
    u = s.utilization
    if u is not None:
        parts = [
            f"GPU {u.gpu_mean_pct:.0f}%" if u.gpu_mean_pct is not None else "",
            f"CPU {u.cpu_mean_pct:.0f}%" if u.cpu_mean_pct is not None else "",
        ]
        table.add_row("Utilisation", ", ".join(p for p in parts if p) + f" ({u.samples} samples)")
    console.print(table)
    for hint in s.hints:
        console.print(f"[yellow]hint:[/yellow] {escape(hint)}")
    for note in report.notes:
        console.print(f"[dim]note:[/dim] {escape(note)}")


# --- ingest -----------------------------------------------------------------------------------


def ingest_command(
    run: Annotated[
        Path,
        typer.Argument(
            help="perfmodel_run.json (or its folder), or any file perfmodel monitor reads (then --config)."
        ),
    ],
    config: Annotated[
        Optional[Path], Opt("--config", "-c", help="The run's config (when the run file does not hold it).")
    ] = None,
    set_: Annotated[Optional[list[str]], Opt("--set", help="Override a config key (repeatable).")] = None,
    out: Annotated[
        Optional[Path], Opt("--out", help="Shard folder (default: the collectors' folder).")
    ] = None,
    allow_unfinished: Annotated[
        bool, Opt("--allow-unfinished", help="Keep the steps of a run that has not finished.")
    ] = False,
    json_out: Annotated[bool, Opt("--json", help="Machine-readable output.")] = False,
) -> None:
    """Keep a finished run as a measured feature-table row (source_kind 'user') for the next `make train-model`."""
    # loaded when the command runs (CLI start-up)
    from perfmodel.ingest import ingest_run

    result = ingest_run(
        run, config=config, overrides=set_ or [], out_dir=out, allow_unfinished=allow_unfinished
    )
    if json_out:
        _common.print_json(result.to_json())
        return
    console = _common.stdout_console()
    console.print(
        f"kept row {result.row_id} ({result.model_name} on {result.hardware_id}): {result.measured_steps} steps, "
        f"median {_dur(result.step_time_s)}/step, {result.warmup_steps} warm-up step(s) excluded -> {result.shard}",
        markup=False,
        highlight=False,
    )
    for note in result.notes:
        console.print(f"note: {note}", markup=False, highlight=False)


# --- runs -------------------------------------------------------------------------------------


def runs_command(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Two or more runs: run folders, perfmodel_run.json, trainer_state.json, Ludwig outputs, CSV/JSONL of step times."
        ),
    ],
    plot: Annotated[
        Optional[Path],
        Opt("--plot", help="Draw step time against step (warm-up shaded) into FILE.png/.svg/.pdf."),
    ] = None,
    confidence: Annotated[float, Opt("--confidence", help="Confidence level of the ratios.")] = 0.9,
    json_out: Annotated[bool, Opt("--json", help="Machine-readable output.")] = False,
) -> None:
    """Measured runs side by side: warm-up, stable-phase step time and spread, throughput, memory,
    total time, and each run's step-time ratio to the first (the measured twin of `compare`)."""
    # loaded when the command runs (CLI start-up)
    from perfmodel.monitor.runs import plot_runs, summarize_runs

    if not 0.5 <= confidence < 1:
        _common.fail(f"--confidence must be in [0.5, 1); got {confidence}", code=2)
    summaries = summarize_runs(paths, confidence=confidence)
    if plot is not None:
        plot_runs(summaries, plot)
        _common.stderr_console().print(f"wrote {plot}", markup=False, highlight=False)
    if json_out:
        _common.print_json({"confidence_level": confidence, "runs": [s.to_json() for s in summaries]})
        return
    _render_runs(summaries, confidence, _common.stdout_console())


def _rate(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"


def _render_runs(summaries: list[Any], confidence: float, console: Any) -> None:
    # rich: only output needs it (the CLI's cold start)
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"perfmodel runs — {len(summaries)} measured runs", title_justify="left")
    table.add_column("", style="bold")
    for i, s in enumerate(summaries):
        table.add_column(f"{chr(65 + i) if i < 26 else i + 1}: {escape(Path(s.label).name or s.label)}")

    def row(name: str, cells: list[str]) -> None:
        table.add_row(name, *cells)

    row("Format", [escape(s.trace.format) for s in summaries])
    row(
        "Steps",
        [
            f"{s.timed_steps:,} timed"
            + (f" of {s.trace.total_steps:,}" if s.trace.total_steps else "")
            + ("" if s.trace.finished else " [dim](not finished)[/dim]")
            for s in summaries
        ],
    )
    row(
        "Warm-up",
        [
            f"{s.warmup_steps} step{'s' if s.warmup_steps != 1 else ''} ({_dur(s.warmup_s)})"
            if s.warmup_steps
            else "none found"
            for s in summaries
        ],
    )
    row("Median step", [_dur(s.stable.median_s) if s.stable else "-" for s in summaries])
    row("Mean step", [_dur(s.stable.mean_s) if s.stable else "-" for s in summaries])
    row(
        "Spread p10–p90",
        [
            f"{_dur(s.stable.p10_s)} – {_dur(s.stable.p90_s)} (CV {s.stable.cv:.0%})" if s.stable else "-"
            for s in summaries
        ],
    )
    row("Level shifts", [str(s.level_shifts) for s in summaries])
    row(
        "Throughput",
        [
            " · ".join(
                p
                for p in (
                    _rate(s.steps_per_s, "steps/s"),
                    _rate(s.steps_per_s * s.samples_per_step, "samples/s")
                    if s.steps_per_s and s.samples_per_step
                    else "",
                    _rate(s.steps_per_s * s.tokens_per_step, "tokens/s")
                    if s.steps_per_s and s.tokens_per_step
                    else "",
                )
                if p
            )
            for s in summaries
        ],
    )
    row(
        "Peak memory",
        [
            f"{s.trace.peak_memory_gb:.2f} GB [dim]({escape(s.trace.peak_memory_kind or '?')})[/dim]"
            if s.trace.peak_memory_gb is not None
            else "not recorded"
            for s in summaries
        ],
    )
    row("Total (timed)", [_dur(s.total_s) for s in summaries])
    if len(summaries) > 1:
        cells = ["1 (the reference)"]
        for s in summaries[1:]:
            r = s.ratio
            cells.append(
                "-"
                if r is None
                else f"x {r.estimate:.3g} [dim]({r.low:.3g}–{r.high:.3g})[/dim] {r.verdict}"
                + (" [dim](per sample)[/dim]" if r.per == "sample" else "")
            )
        row(f"Time vs A ({confidence:.0%})", cells)
    console.print(table)
    for i, s in enumerate(summaries):
        for note in s.notes:
            console.print(f"[dim]note ({chr(65 + i) if i < 26 else i + 1}):[/dim] {escape(note)}")


# --- validate ---------------------------------------------------------------------------------


def validate_command(
    args: Annotated[
        Optional[list[str]],
        typer.Argument(
            help="A Ludwig config (YAML) to run for real on part of its data; with --trainer, the script's own "
            "arguments (after --).",
            show_default=False,
        ),
    ] = None,
    trainer: Annotated[
        Optional[Path],
        Opt(
            "--trainer",
            help="A Hugging Face Trainer script, run as `python SCRIPT ARGS` would: its first Trainer.train() trains "
            "--steps (default: --fraction of its steps), then stops.",
        ),
    ] = None,
    dataset: Annotated[
        Optional[Path], Opt("--dataset", "-d", help="Ludwig: the CSV the config trains on (the full data).")
    ] = None,
    fraction: Annotated[
        float,
        Opt("--fraction", min=0.0, max=1.0, help="Share of the training rows (Ludwig) or steps (--trainer) of the partial run."),
    ] = 0.1,
    steps: Annotated[
        Optional[int],
        Opt("--steps", "--max-steps", min=1, help="Instead of a fraction: the partial run trains N steps (max_steps)."),
    ] = None,
    check_full: Annotated[
        bool, Opt("--check-full", help="Then train the full run too and report the extrapolation's error.")
    ] = False,
    confidence: Annotated[float, Opt("--confidence", help="Interval confidence level.")] = 0.9,
    host_noise: Annotated[
        float,
        Opt(
            "--host-noise",
            min=0.0,
            help="Least log sd of this host's speed between two runs (more when the load moves; 0 on a dedicated machine).",
        ),
    ] = 0.1,
    ludwig_python: Annotated[
        Optional[str], Opt("--ludwig-python", help="Python of a Ludwig venv (default: make ludwig-env's).")
    ] = None,
    json_out: Annotated[bool, Opt("--json", help="Machine-readable output.")] = False,
) -> None:
    """Run the config on a fraction of its data (or N steps) with real Ludwig, or a Hugging Face Trainer
    script for N steps, then extrapolate to the full run: start-up, warm-up, stable steps, evaluation
    and checkpoints."""
    if not 0.5 <= confidence < 1:
        _common.fail(f"--confidence must be in [0.5, 1); got {confidence}", code=2)
    if steps is None and not 0 < fraction < 1:
        _common.fail(f"--fraction must be in (0, 1); got {fraction}", code=2)
    rest = list(args or [])
    if trainer is not None:
        if dataset is not None or ludwig_python is not None:
            _common.fail("--dataset and --ludwig-python are for a Ludwig config, not --trainer", code=2)
        # loaded when the command runs (CLI start-up; it imports transformers)
        from perfmodel.run.trainer_script import validate_trainer_script

        result = validate_trainer_script(
            trainer,
            rest,
            steps=steps,
            fraction=None if steps is not None else fraction,
            check_full=check_full,
            confidence=confidence,
            host_noise=host_noise,
        )
    else:
        if len(rest) != 1:
            _common.fail(
                "give one Ludwig config (perfmodel validate CONFIG --dataset DATA.csv), or a Trainer script "
                "(perfmodel validate --trainer train.py [-- ARGS])",
                code=2,
            )
        if dataset is None:
            _common.fail("a Ludwig config needs --dataset DATA.csv (the full data)", code=2)
        # loaded when the command runs (CLI start-up)
        from perfmodel.run.validate import validate_ludwig

        with _common.stderr_console().status(
            "training the partial run with Ludwig (then --check-full: the full run)"
        ):
            result = validate_ludwig(
                Path(rest[0]),
                dataset=dataset,
                fraction=None if steps is not None else fraction,
                steps=steps,
                confidence=confidence,
                host_noise=host_noise,
                check_full=check_full,
                python=ludwig_python,
            )
    if json_out:
        _common.print_json(result.to_json())
    else:
        render_validation(result, _common.stdout_console())


def render_validation(result: Any, console: Any) -> None:
    # rich: only output needs it (the CLI's cold start)
    from rich.markup import escape
    from rich.table import Table

    ex = result.extrapolation
    part = (
        f"{result.fraction:.0%} of the training rows"
        if result.fraction is not None
        else f"{result.partial_steps} steps"
    )
    table = Table(
        title=f"perfmodel validate — {escape(result.framework)}: {part} ({result.partial_steps} of "
        f"{result.full_steps:,} steps), intervals at {ex.confidence:.0%}",
        title_justify="left",
    )
    for name in ("Phase", "Measured", "Full run", "Scaled as"):
        table.add_column(name)
    for p in ex.phases:
        table.add_row(escape(p.name), _dur(p.measured_s), _iv(p.full_s), f"[dim]{escape(p.rule)}[/dim]")
    table.add_row("[bold]Total[/bold]", _dur(result.partial_wall_s), f"[bold]{_iv(ex.total_s)}[/bold]", "")
    console.print(table)
    load = result.load_avg
    if load is not None:
        console.print(
            f"[dim]host: load average {load[0]:.1f} → {load[1]:.1f} on {result.cpu_count} cores; "
            f"host noise {ex.host_noise:.0%}, level-shift risk {ex.level_shift_risk:.1%}[/dim]"
        )
    c = result.check
    if c is not None:
        verdict = "[green]inside[/green]" if c.inside else "[red]outside[/red]"
        console.print(
            f"Full run measured {_dur(c.measured_s)}: the extrapolation was {c.error:+.0%} off, {verdict} its interval"
        )
    for note in [*ex.notes, *result.notes]:
        console.print(f"[dim]note:[/dim] {escape(note)}")
