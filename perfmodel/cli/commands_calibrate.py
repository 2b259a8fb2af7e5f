"""`perfmodel calibrate`: measure this machine once (micro-benchmarks + 3-5 training slices within
--budget-s) and keep a calibration that every prediction for its hardware uses at once
(perfmodel.calibration); `--show`, `--export`, `--import` manage what is kept."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from perfmodel.cli import _common
from perfmodel.errors import DataError
from perfmodel.request import flag_path

_Path = Optional[Path]  # noqa: UP045 - typer needs Optional at runtime on Python 3.10


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate_command)


def calibrate_command(
    budget_s: Annotated[
        Optional[float],  # noqa: UP045 - typer
        typer.Option("--budget-s", help="Seconds to measure for (default: 120 on a GPU, 180 on a CPU)."),
    ] = None,
    device: Annotated[
        Optional[str],  # noqa: UP045 - typer
        typer.Option("--device", help="cpu, cuda or cuda:N (default: the GPU when there is one)."),
    ] = None,
    show: Annotated[
        bool, typer.Option("--show", help="Show the kept calibration (what, when, on what, its effect); measure nothing.")
    ] = False,
    export: Annotated[_Path, typer.Option("--export", help="Write the calibration to FILE (to share it).")] = None,
    import_file: Annotated[
        _Path,
        typer.Option(
            "--import",
            help="Keep a shared calibration FILE (or every calibration of the MLflow run runs:/RUN_ID): it serves its accelerator kind.",
        ),
    ] = None,
    hardware_id: Annotated[
        Optional[str],  # noqa: UP045 - typer
        typer.Option("--hardware-id", help="With --show/--export: that hardware's calibration (default: this host's)."),
    ] = None,
    plot: Annotated[_Path, typer.Option("--plot", help="Also plot predicted vs measured of its runs to FILE (.png).")] = None,
    log_mlflow: Annotated[
        bool,
        typer.Option(
            "--log-mlflow",
            help="Also log the calibration file as an artifact of a new MLflow run (a service loads it with --calibrations runs:/RUN_ID).",
        ),
    ] = False,
    tracking_uri: Annotated[
        Optional[str],  # noqa: UP045 - typer
        typer.Option("--tracking-uri", help="MLflow store for --log-mlflow and --import runs:/ (default: $MLFLOW_TRACKING_URI, else mlflow.db)."),
    ] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Progress bar on stderr.")] = True,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Measure this machine and keep a calibration of its hardware: every prediction for it
    (predict, sweep, compare, advise, serve, the Python API) uses it at once; --no-calibration
    turns it off."""
    # loaded when the command runs (CLI start-up); perfmodel.calibration.run imports the collectors
    from perfmodel.calibration import record
    from perfmodel.calibration.run import calibrate, plot_report, report

    if sum(x is not None and x is not False for x in (show or None, export, import_file)) > 1:
        raise typer.BadParameter("give one of --show, --export, --import", param_hint="--show")
    if import_file is not None:
        if log_mlflow:
            raise typer.BadParameter("--log-mlflow logs a calibration this command measures or shows; not with --import", param_hint="--log-mlflow")
        _import(record, str(import_file), tracking_uri, json_out)
        return
    if show or export is not None:
        cal = _kept(record, hardware_id)
        if export is not None:
            out = record.write_calibration(cal, flag_path(export))
            logged = _log_mlflow(out, cal, tracking_uri) if log_mlflow else None
            if json_out:
                _common.print_json({"exported": str(out), "hardware_id": cal.hardware_id, **(logged or {})})
            else:
                _common.stdout_console().print(f"wrote {cal.hardware_id} ({cal.accelerator_kind}) to {out}")
                _print_logged(logged)
            return
        rep = report(cal)
        logged = _log_mlflow(record.calibration_path(cal.hardware_id), cal, tracking_uri) if log_mlflow else None
        _finish(rep, plot, json_out, plot_report, logged)
        return
    result = calibrate(device=device, budget_s=budget_s, progress=progress and not json_out)
    rep = report(result.calibration)
    logged = _log_mlflow(result.path, result.calibration, tracking_uri) if log_mlflow and result.path else None
    if json_out:
        doc = {**result.to_json(), "report": rep.to_json(), **(logged or {})}
        if plot is not None:
            doc["plot"] = str(plot_report(rep, flag_path(plot)))
        _common.print_json(doc)
        return
    console = _common.stdout_console()
    console.print(
        f"calibrated {result.calibration.hardware_id} in {result.elapsed_s:.0f} s ({result.stopped}); kept as {result.path}"
    )
    _print_logged(logged)
    for line in result.skipped:
        console.print(f"  not measured: {line}", markup=False)
    _finish(rep, plot, False, plot_report)


def _import(record: Any, source: str, tracking_uri: str | None, json_out: bool) -> None:
    """--import FILE, or --import runs:/RUN_ID: every usable calibration the run logged."""
    if source.startswith("runs:"):
        # loaded only for a run (it imports MLflow when it downloads)
        from perfmodel.calibration.tracked import download_calibrations, parse_source

        src = parse_source(source)
        folder = download_calibrations(src.run_id, artifact_path=src.artifact_path, tracking_uri=tracking_uri)
        files = sorted(folder.glob("*.json"))
    else:
        files = [flag_path(Path(source))]
    done = [record.import_calibration(f) for f in files]
    if json_out:
        docs = [{"imported": str(p), "hardware_id": c.hardware_id, "accelerator_kind": c.accelerator_kind} for c, p in done]
        _common.print_json(docs[0] if len(docs) == 1 and not source.startswith("runs:") else {"source": source, "imported": docs})
        return
    if not done:
        _common.stdout_console().print(f"{source}: no usable calibration (see the warnings); nothing kept")
    for cal, path in done:
        _common.stdout_console().print(f"kept {cal.hardware_id} ({cal.accelerator_kind}, {len(cal.runs)} measured runs) as {path}")


def _log_mlflow(path: Path, cal: Any, tracking_uri: str | None) -> dict[str, str]:
    # loaded only with --log-mlflow (it imports MLflow)
    from perfmodel.calibration.tracked import log_calibrations

    run_id, uri = log_calibrations([path], run_name=f"calibrate {cal.hardware_id}", tracking_uri=tracking_uri)
    return {"mlflow_run_id": run_id, "tracking_uri": uri, "calibrations_uri": f"runs:/{run_id}"}


def _print_logged(logged: dict[str, str] | None) -> None:
    if logged:
        _common.stdout_console().print(
            f"logged to MLflow run {logged['mlflow_run_id']} at {logged['tracking_uri']}: "
            f"perfmodel serve --calibrations {logged['calibrations_uri']}",
            markup=False,
        )


def _kept(record: Any, hardware_id: str | None) -> Any:
    store = record.load_store()
    if hardware_id is not None:
        found = store.for_hardware_id(hardware_id)
        if found is None:
            known = ", ".join(c.hardware_id for c in store.calibrations) or "none"
            raise typer.BadParameter(f"no calibration of {hardware_id!r} (kept: {known})", param_hint="--hardware-id")
        return found
    here = [c for c in store.calibrations if c.is_this_host() and c.origin != "import"]
    if not here:
        raise DataError(
            f"no calibration of this host in {store.folder}: run `perfmodel calibrate` (or name one with --hardware-id)"
        )
    return max(here, key=lambda c: c.updated_at)


def _finish(rep: Any, plot: Path | None, json_out: bool, plot_report: Any, logged: dict[str, str] | None = None) -> None:
    where = str(plot_report(rep, flag_path(plot))) if plot is not None else None
    if json_out:
        _common.print_json({**rep.to_json(), "plot": where, **(logged or {})})
        return
    _render(rep, _common.stdout_console())
    if where:
        _common.stdout_console().print(f"plot: {where}")
    _print_logged(logged)


def _render(rep: Any, console: Any) -> None:
    # rich: only output needs it (the CLI's cold start)
    from rich.table import Table

    c = rep.calibration
    m = c.measurement
    console.print(
        f"[bold]calibration {c.hardware_id}[/] ({c.accelerator_kind}, {c.device}, origin {c.origin}); "
        f"measured {c.created_at}, updated {c.updated_at}"
    )
    if m:
        console.print(
            f"  took {m.get('elapsed_s', 0):.0f} s of a {m.get('budget_s', 0):.0f} s budget ({m.get('stopped')}); "
            f"load average {m.get('load_avg_1m_start')} -> {m.get('load_avg_1m_end')} on {m.get('cpu_count')} cores; "
            f"{m.get('slices_measured')} of {m.get('slices_planned')} slices"
        )
    ceilings = Table(title="measured ceilings (replace the catalog's in the kernel model)", title_justify="left")
    for col in ("ceiling", "measured", "model before", "change"):
        ceilings.add_column(col)
    for row in rep.ceilings:
        before = row["model_before"]
        change = f"x{row['measured'] / before:.3g}" if before else "-"
        ceilings.add_row(row["name"], f"{row['measured']:.4g}", f"{before:.4g}" if before else "-", change)
    console.print(ceilings)
    factors = Table(title="kernel factors (measured / modelled micro-benchmark time)", title_justify="left")
    for col in ("group", "factor", "log sd", "n", "from"):
        factors.add_column(col)
    for f in rep.factors:
        factors.add_row(f["group"], f"x{f['factor']:.3g}", f"{f['log_sd']:.2f}", str(f["n"]), f["source"])
    console.print(factors)
    o = rep.offset
    used = "used" if o.get("kernel_factors_used") else "recorded, not applied (they raised the held-out error: docs/run.md)"
    console.print(
        f"end-to-end offset: x{math.exp(o.get('log_offset', 0.0)):.3g} (log {o.get('log_offset', 0.0):+.3f} "
        f"± {o.get('log_sd', 0.0):.3f}) from n = {o.get('n', 0):.0f} runs; trusted w = n/(n+{o.get('k', 0):g}) = "
        f"{o.get('weight', 0.0):.0%} where they were measured; host time x{o.get('host_factor', 1.0):.3g} "
        f"(fitted on the runs); kernel factors {used}"
    )
    runs = Table(title="its runs: predicted vs measured step time (s)", title_justify="left")
    for col in ("run", "measured", "uncalibrated", "error", "calibrated (leave one out)", "error"):
        runs.add_column(col)
    for r in rep.runs:
        meas = r["measured_s"]
        runs.add_row(
            r["label"],
            f"{meas:.4g}",
            f"{r['uncalibrated_s']:.4g}",
            f"{r['uncalibrated_s'] / meas - 1:+.0%}",
            f"{r['calibrated_leave_one_out_s']:.4g}",
            f"{r['calibrated_leave_one_out_s'] / meas - 1:+.0%}",
        )
    console.print(runs)
