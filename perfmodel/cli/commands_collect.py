"""`perfmodel collect`: measure micro-benchmarks and training slices on this machine into
datasets/raw/ (the same as `python -m collectors`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from perfmodel.cli import _common

PROFILES = ("quick", "gpu", "full")


def register(app: typer.Typer) -> None:
    app.command("collect")(collect_command)


def collect_command(
    profile: Annotated[str, typer.Option("--profile", help="quick (CPU, < 5 min) | gpu (one H100/H200-class GPU, < 8 min) | full.")] = "quick",
    out: Annotated[Path, typer.Option("--out", help="Folder for the parquet shards and the host fingerprint.")] = Path("datasets/raw"),
    budget_s: Annotated[Optional[float], typer.Option("--budget-s", min=1.0, help="Wall-time budget in seconds (default: the profile's).")] = None,  # noqa: UP045 - typer needs Optional on 3.10
    device: Annotated[Optional[str], typer.Option("--device", help="cpu, cuda or cuda:N (default: a GPU when there is one).")] = None,  # noqa: UP045
    plan: Annotated[bool, typer.Option("--plan", help="Measure nothing: project each configuration's fate, step time and the total against the budget.")] = False,
    gpu: Annotated[str, typer.Option("--gpu", help="With --plan: the accelerator to plan for (catalog name; default cpu, this machine).")] = "cpu",
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Measure this machine: micro-benchmarks, then real training slices; resumable (already
    measured configurations are skipped) and safe to stop with Ctrl-C. With --plan, only
    project what a profile would do on a device, before renting it."""
    if profile not in PROFILES:
        raise typer.BadParameter(f"must be one of {', '.join(PROFILES)}; got {profile!r}", param_hint="--profile")
    if plan:
        _plan(profile, gpu, budget_s, out, json_out)
        return
    from collectors.harness import collect

    result = collect(profile, out_dir=out, budget_s=budget_s, device=device, progress=not json_out)
    if json_out:
        _common.print_json(result.to_dict())
    else:
        from rich.table import Table

        table = Table(title=f"perfmodel collect --profile {result.profile} on {result.hardware_id} ({result.device})")
        table.add_column("", justify="left")
        table.add_column("value", justify="left")
        for label, value in (
            ("stopped", result.stopped),
            ("elapsed s", f"{result.elapsed_s:.0f}"),
            ("slice rows written", f"{result.rows_written} {result.status_counts}"),
            ("micro-benchmark rows", str(result.microbench_rows)),
            ("already measured (skipped)", f"{result.skipped_existing} of {result.configs_total}"),
            ("too slow (skipped)", str(len(result.skipped_too_slow))),
            ("shards", str(len(result.shards))),
            ("out", result.out_dir),
        ):
            table.add_row(label, value)
        _common.stdout_console().print(table)
    if result.stopped == "interrupted":
        raise SystemExit(130)


def _plan(profile: str, gpu: str, budget_s: float | None, out: Path, json_out: bool) -> None:
    from collectors.plan import plan_profile, plan_table

    projected = plan_profile(profile, gpu, budget_s=budget_s, out_dir=out)
    if json_out:
        _common.print_json(projected.to_dict())
    else:
        _common.stdout_console().print(plan_table(projected))
