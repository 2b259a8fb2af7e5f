"""`perfmodel collect`: measure micro-benchmarks and training slices on this machine into the
collectors' folder (perfmodel.paths.raw_dir(), datasets/raw/), or with `--ray` on the nodes of a
Ray cluster (collectors.fleet). The one collect command line: `python -m collectors` and
`make collect` run this command with the same flags."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from perfmodel import paths
from perfmodel.cli import _common

PROFILES = ("quick", "gpu", "full")
PER = ("gpu-type", "node")
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
    ray: Annotated[
        Optional[str],  # noqa: UP045 - typer needs Optional on 3.10
        typer.Option(
            "--ray",
            metavar="ADDRESS|auto",
            help="Collect on a Ray cluster: one task per GPU type (or node) pinned to its node; rows come "
            "back to --out here. ADDRESS is HOST:PORT of its head; 'auto': the cluster this machine belongs to.",
        ),
    ] = None,
    per: Annotated[
        str,
        typer.Option(
            "--per", help="With --ray: run the profile once per gpu-type, or per node (distinct hardware)."
        ),
    ] = "gpu-type",
    max_retries: Annotated[
        int,
        typer.Option(
            "--max-retries",
            min=0,
            help="With --ray: runs again of a failed node's task before it is reported.",
        ),
    ] = 1,
    ray_timeout_s: Annotated[
        float,
        typer.Option(
            "--ray-timeout-s",
            min=0.1,
            help="With --ray: seconds to wait for the cluster to answer before giving up.",
        ),
    ] = 30.0,
    log_mlflow: Annotated[
        bool,
        typer.Option(
            "--log-mlflow",
            help="With --ray: also log the per-node calibrations as artifacts of one MLflow run "
            "($MLFLOW_TRACKING_URI, else mlflow.db; a service loads them with --calibrations runs:/RUN_ID).",
        ),
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Measure this machine: micro-benchmarks, then real training slices; resumable (already
    measured configurations are skipped), one collector per --out folder, and safe to stop with
    Ctrl-C, SIGTERM or SIGHUP (what was measured is kept; exit status 130). With --plan, only
    project what a profile would do on a device, before renting it."""
    if profile not in PROFILES:
        raise typer.BadParameter(
            f"must be one of {', '.join(PROFILES)}; got {profile!r}", param_hint="--profile"
        )
    out_dir = out if out is not None else paths.raw_dir()
    if log_mlflow and (ray is None or plan):
        raise typer.BadParameter(
            "logs the calibrations of a --ray collection; give --ray (without --plan)",
            param_hint="--log-mlflow",
        )
    if ray is not None:
        _fleet(
            profile,
            ray,
            per,
            out_dir,
            budget_s,
            max_retries,
            ray_timeout_s,
            plan=plan,
            wait=wait,
            json_out=json_out,
            device=device,
            gpu=gpu,
            summary=summary,
            log_mlflow=log_mlflow,
        )
        return
    if summary:
        # collectors is the layer above: imported only when this command runs (the one upward shim)
        from collectors.summary import summarize

        sys.stdout.write(summarize(out_dir) + "\n")
        return
    if plan:
        _plan(profile, gpu, budget_s, out_dir, json_out)
        return
    # collectors is the layer above: imported only when this command runs (the one upward shim)
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
    # rich's tables: loaded only when one is printed
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
    # collectors is the layer above: imported only when this command runs (the one upward shim)
    from collectors.plan import plan_profile, plan_table

    projected = plan_profile(profile, gpu, budget_s=budget_s, out_dir=out)
    if json_out:
        _common.print_json(projected.to_dict())
    else:
        _common.stdout_console().print(plan_table(projected))


# --- on a Ray cluster (collectors.fleet) -------------------------------------------------------


def _fleet(
    profile: str,
    address: str,
    per: str,
    out: Path,
    budget_s: float | None,
    max_retries: int,
    ray_timeout_s: float,
    *,
    plan: bool,
    wait: bool,
    json_out: bool,
    device: str | None,
    gpu: str,
    summary: bool,
    log_mlflow: bool = False,
) -> None:
    # collectors is the layer above: imported only when this command runs (the one upward shim)
    from collectors import fleet

    if not address or address.startswith("-"):
        raise typer.BadParameter(
            f"give the cluster's HOST:PORT or 'auto'; got {address!r}", param_hint="--ray"
        )
    if per not in PER:
        raise typer.BadParameter(f"must be one of {', '.join(PER)}; got {per!r}", param_hint="--per")
    for flag, given in (("--device", device is not None), ("--gpu", gpu != "cpu"), ("--summary", summary)):
        if given:
            raise typer.BadParameter("each node uses its own device with --ray; drop it", param_hint=flag)
    if plan:
        projected = fleet.plan_fleet(
            profile, address=address, per=per, out_dir=out, budget_s=budget_s, connect_timeout_s=ray_timeout_s
        )
        if json_out:
            _common.print_json(projected.to_dict())
        else:
            _common.stdout_console().print(_fleet_plan_table(projected))
        return
    # collectors is the layer above: imported only when this command runs (the one upward shim)
    from collectors.interrupts import signals_as_interrupt

    with signals_as_interrupt():
        result = fleet.collect_fleet(
            profile,
            address=address,
            per=per,
            out_dir=out,
            budget_s=budget_s,
            max_retries=max_retries,
            connect_timeout_s=ray_timeout_s,
            progress=not json_out,
            wait=wait,
        )
    calibrations = _fleet_calibrations(out, result)
    logged = _log_fleet_calibrations(calibrations, profile) if log_mlflow and calibrations else {}
    if json_out:
        _common.print_json({**result.to_dict(), "calibrations": calibrations, **logged})
    else:
        _common.stdout_console().print(_fleet_table(result))
        for path in calibrations:
            _common.stdout_console().print(f"calibration: {path}")
        if logged:
            _common.stdout_console().print(
                f"calibrations logged to MLflow run {logged['mlflow_run_id']} at {logged['tracking_uri']}: "
                f"perfmodel serve --calibrations {logged['calibrations_uri']}",
                markup=False,
            )
    if result.stopped == "interrupted":
        raise SystemExit(INTERRUPTED_EXIT)
    if result.failed:
        names = ", ".join(f"{t.target} ({t.errors[-1] if t.errors else t.stopped})" for t in result.failed)
        _common.fail(f"{len(result.failed)} of {len(result.targets)} targets did not finish: {names}")


def _fleet_calibrations(out: Path, result: Any) -> list[str]:
    """One calibration per node or accelerator type that measured (perfmodel.calibration), kept in
    the calibration folder ($PERFMODEL_CALIBRATION_DIR: a service pointed at it uses them)."""
    # loaded when the command runs; it reads the collection's parquet shards
    from perfmodel.calibration.run import calibrations_from_collection

    measured = [
        t.hardware_id for t in result.targets if t.hardware_id and (t.rows_written or t.microbench_rows)
    ]
    return [str(p) for p in calibrations_from_collection(out, measured)] if measured else []


def _log_fleet_calibrations(calibrations: list[str], profile: str) -> dict[str, str]:
    """The per-node calibrations as artifacts of one MLflow run (perfmodel.calibration.tracked)."""
    # loaded only with --log-mlflow (it imports MLflow)
    from perfmodel.calibration.tracked import log_calibrations

    run_id, uri = log_calibrations(
        [Path(p) for p in calibrations], run_name=f"collect --ray {profile}: {len(calibrations)} calibrations"
    )
    return {"mlflow_run_id": run_id, "tracking_uri": uri, "calibrations_uri": f"runs:/{run_id}"}


def _fleet_table(result: Any) -> Any:
    # rich's tables: loaded only when one is printed
    from rich.table import Table

    stopped = result.stopped + (f" by {result.interrupted_by}" if result.interrupted_by else "")
    table = Table(
        title=f"perfmodel collect --ray {result.address} --profile {result.profile} --per {result.per}: "
        f"{stopped} in {result.elapsed_s:.0f} s",
        caption_justify="left",
        caption="\n".join(
            [f"{len(result.shards)} shards written to {result.out_dir}"]
            + [f"{t.target}: {error}" for t in result.targets for error in t.errors]
            + [f"left out {line}" for line in result.unreachable]
        ),
    )
    for name, justify in (
        ("target", "left"),
        ("node", "left"),
        ("hardware id", "left"),
        ("stopped", "left"),
        ("tries", "right"),
        ("slice rows", "right"),
        ("micro-bench rows", "right"),
        ("already measured", "right"),
        ("s", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for t in result.targets:
        counts = ", ".join(f"{n} {status}" for status, n in t.status_counts.items())
        table.add_row(
            t.target,
            t.node,
            t.hardware_id,
            t.stopped,
            str(t.attempts),
            f"{t.rows_written}" + (f" ({counts})" if counts else ""),
            str(t.microbench_rows),
            f"{t.skipped_existing} of {t.configs_total}",
            f"{t.elapsed_s:.0f}",
        )
    return table


def _fleet_plan_table(projected: Any) -> Any:
    # rich's tables: loaded only when one is printed
    from rich.table import Table

    cost = "" if projected.cost_usd is None else f", ${projected.cost_usd:,.2f} at list prices"
    notes = sorted({f"{t.device}: {t.note}" for t in projected.targets if t.note})
    table = Table(
        title=f"profile {projected.profile} on {len(projected.targets)} target(s) (--per {projected.per}): "
        f"projected {projected.projected_s / 60:.1f} min in parallel, {projected.gpu_hours:.2f} GPU-hours{cost}",
        caption="Each target as `perfmodel collect --plan` projects it on its device; $/GPU-h: the catalog's "
        "default list price (perfmodel/catalog/prices.yaml)"
        + "".join(f"; {line}" for line in notes)
        + "".join(f"; left out {line}" for line in projected.left_out),
    )
    for name, justify in (
        ("target", "left"),
        ("node (+ spares)", "left"),
        ("device", "left"),
        ("measure", "right"),
        ("measured before", "right"),
        ("other", "right"),
        ("projected min", "right"),
        ("$/GPU-h", "right"),
        ("cost $", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for t in projected.targets:
        counts = t.plan.counts() if t.plan is not None else {}
        other = ", ".join(f"{n} {fate}" for fate, n in counts.items() if fate not in ("measure", "measured"))
        table.add_row(
            t.target,
            t.node + (f" (+{t.spares})" if t.spares else ""),
            t.device,
            str(counts.get("measure", 0)),
            str(counts.get("measured", 0)),
            other or "0",
            f"{t.projected_s / 60:.1f}",
            "" if t.usd_per_gpu_hour is None else f"{t.usd_per_gpu_hour:.2f}",
            "" if t.cost_usd is None else f"{t.cost_usd:.2f}",
        )
    return table
