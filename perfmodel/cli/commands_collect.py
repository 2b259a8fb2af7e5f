"""`perfmodel collect`: measure micro-benchmarks and training slices on this machine into the
collectors' folder (perfmodel.paths.raw_dir(), datasets/raw/). The one collect command line:
`python -m collectors` and `make collect` run this command with the same flags."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from perfmodel.cli import _common

PROFILES = ("quick", "gpu", "full")
INTERRUPTED_EXIT = 130
"""Exit status after Ctrl-C, SIGTERM or SIGHUP (what the measured rows were kept under)."""


def register(app: typer.Typer) -> None:
    app.command("collect")(collect_command)


def _positive_budget(value: Optional[float]) -> Optional[float]:  # noqa: UP045 - typer callback
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"must be a positive, finite number of seconds; got {value}")
    return value


def collect_command(
    profile: Annotated[
        str,
        typer.Option(
            "--profile", help="quick (CPU, < 5 min) | gpu (one H100/H200-class GPU, < 8 min) | full."
        ),
    ] = "quick",
    out: Annotated[
        Optional[Path],  # noqa: UP045 - typer needs Optional on 3.10
        typer.Option(
            "--out",
            help="Folder for the parquet shards and the host fingerprint (default: datasets/raw of the project, $PERFMODEL_DATASETS/raw).",
        ),
    ] = None,
    budget_s: Annotated[
        Optional[float],  # noqa: UP045 - typer needs Optional on 3.10
        typer.Option(
            "--budget-s",
            callback=_positive_budget,
            help="Wall-time budget in seconds, > 0 (default: the profile's).",
        ),
    ] = None,
    device: Annotated[
        Optional[str],  # noqa: UP045 - typer needs Optional on 3.10
        typer.Option("--device", help="cpu, cuda or cuda:N (default: a GPU when there is one)."),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option("--wait", help="If another collector holds --out, wait for it instead of refusing."),
    ] = False,
    plan: Annotated[
        bool,
        typer.Option(
            "--plan",
            help="Measure nothing: project each configuration's fate, step time and the total against the budget.",
        ),
    ] = False,
    gpu: Annotated[
        str,
        typer.Option(
            "--gpu",
            help="With --plan: the accelerator to plan for (catalog name; default cpu, this machine).",
        ),
    ] = "cpu",
    summary: Annotated[
        bool,
        typer.Option("--summary", help="Measure nothing: print a Markdown summary of the shards in --out."),
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Measure this machine: micro-benchmarks, then real training slices; resumable (already
    measured configurations are skipped), one collector per --out folder, and safe to stop with
    Ctrl-C, SIGTERM or SIGHUP (what was measured is kept; exit status 130). With --plan, only
    project what a profile would do on a device, before renting it."""
    from perfmodel import paths

    if profile not in PROFILES:
        raise typer.BadParameter(
            f"must be one of {', '.join(PROFILES)}; got {profile!r}", param_hint="--profile"
        )
    out_dir = out if out is not None else paths.raw_dir()
    if summary:
        from collectors.summary import summarize

        sys.stdout.write(summarize(out_dir) + "\n")
        return
    if plan:
        _plan(profile, gpu, budget_s, out_dir, json_out)
        return
    from collectors.harness import collect
    from collectors.interrupts import signals_as_interrupt

    with signals_as_interrupt():  # a stop signal before the collection starts: nothing to keep
        result = collect(
            profile, out_dir=out_dir, budget_s=budget_s, device=device, progress=not json_out, wait=wait
        )
    _render(result, json_out)
    if result.stopped == "interrupted":
        raise SystemExit(INTERRUPTED_EXIT)


def _render(result: Any, json_out: bool) -> None:
    if json_out:
        _common.print_json(result.to_dict())
        return
    from rich.table import Table

    table = Table(
        title=f"perfmodel collect --profile {result.profile} on {result.hardware_id} ({result.device})"
    )
    table.add_column("", justify="left")
    table.add_column("value", justify="left")
    stopped = result.stopped + (f" by {result.interrupted_by}" if result.interrupted_by else "")
    for label, value in (
        ("stopped", stopped),
        ("elapsed s", f"{result.elapsed_s:.0f}"),
        ("slice rows written", f"{result.rows_written} {result.status_counts}"),
        ("micro-benchmark rows", str(result.microbench_rows)),
        ("already measured (skipped)", f"{result.skipped_existing} of {result.configs_total}"),
        ("too slow (skipped)", str(len(result.skipped_too_slow))),
        ("damaged shards set aside", str(len(result.damaged_shards))),
        ("shards", str(len(result.shards))),
        ("out", result.out_dir),
    ):
        table.add_row(label, value)
    _common.stdout_console().print(table)


def _plan(profile: str, gpu: str, budget_s: float | None, out: Path, json_out: bool) -> None:
    from collectors.plan import plan_profile, plan_table

    projected = plan_profile(profile, gpu, budget_s=budget_s, out_dir=out)
    if json_out:
        _common.print_json(projected.to_dict())
    else:
        _common.stdout_console().print(plan_table(projected))
