"""`perfmodel memcheck`: the memory model against measured peaks, its false-fit rate, and the
analytic model against the FakeTensor oracle."""

from __future__ import annotations

from pathlib import Path

import typer

from perfmodel.cli import _common


def register(app: typer.Typer) -> None:
    app.command("memcheck")(memcheck_command)


def memcheck_command(
    path: Path = typer.Option(
        None, "--data", help="Peak-memory table (default: <datasets>/public/memory/peak_memory.parquet)."
    ),
    oracle: Path = typer.Option(
        None, "--oracle", help="The oracle's grid table (default: <datasets>/memory/oracle_grid.csv)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Measured peak memory per GPU vs the prediction of the same kind (allocated, reserved, device
    total), the false-fit rate of the fit verdict, and the analytic model vs the FakeTensor oracle."""
    # loaded when the command runs (CLI start-up)
    from perfmodel.errors import DataError
    from perfmodel.memcheck import check_memory, check_oracle_grid
    from perfmodel.paths import memory_oracle_path, peak_memory_path

    target = path or peak_memory_path()
    if not Path(target).is_file():
        raise DataError(
            f"no peak-memory table at {target}; build it with collectors.public.memory.write_peak_memory"
        )
    grid_path = oracle or memory_oracle_path()
    if not Path(grid_path).is_file():
        raise DataError(f"no oracle grid at {grid_path}; write it with `python -m collectors.memory_grid`")
    result = check_memory(target)
    grid = check_oracle_grid(grid_path)
    cols = (
        "source model_name gpu num_gpus tensor_parallel pipeline_parallel context_parallel micro_batch_size seq_len "
        "precision checkpointing_as_published peak_memory_kind peak_memory_gb predicted_gb predicted_low_gb "
        "predicted_high_gb error_pct"
    ).split()
    summary = {
        "rows": len(result.table),
        "median_abs_error_pct": result.median_abs_error_pct,
        "p90_abs_error_pct": result.p90_abs_error_pct,
        "within_interval_pct": result.within_interval_pct,
        "by_regime": list(result.by_regime),
        "false_fits": result.false_fits.to_json(),
        "false_fits_upper_bound": result.false_fits_upper.to_json(),
        "oracle": {
            "rows": len(grid.table),
            "median_abs_error_pct": grid.median_abs_error_pct,
            "p90_abs_error_pct": grid.p90_abs_error_pct,
            "max_abs_error_pct": grid.max_abs_error_pct,
            "by_regime": list(grid.by_regime),
            "false_fits": grid.false_fits.to_json(),
            "shapes": grid.table[["case", "regime", "oracle_allocated_gb", "analytic_gb", "error_pct"]].to_dict("records"),
        },
    }
    if json_out:
        _common.print_json({**summary, "measurements": result.table[cols + ["citation"]].to_dict("records")})
        return
    # rich: only output needs it (the CLI's cold start)
    from rich.table import Table

    console = _common.stdout_console()
    table = Table(title="Peak memory per GPU: published measurement vs the prediction of the same kind")
    for col in "model,gpu,gpus,tp/pp/cp,mbs,seq,precision,ckpt,kind,measured GB,predicted GB,error".split(","):
        table.add_column(col, justify="right")
    for r in result.table.to_dict("records"):
        table.add_row(
            r["model_name"], r["gpu"], str(r["num_gpus"]),
            f"{r['tensor_parallel']}/{r['pipeline_parallel']}/{r['context_parallel']}", str(r["micro_batch_size"]),
            str(r["seq_len"]), r["precision"], r["checkpointing_as_published"], r["peak_memory_kind"],
            f"{r['peak_memory_gb']:.1f}", f"{r['predicted_gb']:.1f} ({r['predicted_low_gb']:.1f}-{r['predicted_high_gb']:.1f})",
            f"{r['error_pct']:+.0f}%",
        )  # fmt: skip
    console.print(table)
    console.print(
        f"{summary['rows']} measurements: median |error| {summary['median_abs_error_pct']:.1f}%, "
        f"p90 {summary['p90_abs_error_pct']:.1f}%, inside the predicted interval {summary['within_interval_pct']:.0f}%"
    )
    for r in result.by_regime:
        console.print(
            f"  {r['regime']}: {r['rows']} rows, median |error| {r['median_abs_error_pct']:.1f}% "
            f"(signed {r['median_error_pct']:+.1f}%), inside {r['within_interval_pct']:.0f}%"
        )
    scopes = (
        ("measured allocated peaks", result.false_fits),
        ("measured reserved / nvidia-smi peaks (upper bounds of what a smaller card needs)", result.false_fits_upper),
        ("the oracle's allocated peaks on the grid", grid.false_fits),
    )
    for scope, ff in scopes:
        console.print(
            f"false fits, {scope} posed on every card: {ff.false_fits} of {ff.over} (row, card) pairs whose measured "
            f"peak exceeds the card ({ff.rate_pct:.1f}%); near the boundary (within 25%): {ff.near_false_fits} of "
            f"{ff.near_over} ({ff.near_rate_pct:.1f}%); 'does not fit' where it fits: {ff.false_oom} of {ff.under}"
        )
    for case in (*result.false_fits.cases, *grid.false_fits.cases):
        console.print(
            f"  [red]false fit[/red]: {case['model']} ({case['source']}) on {case['card']}: measured "
            f"{case['measured_gb']:.1f} GB ({case['kind']}), predicted device {case['predicted_device_gb']:.1f} GB, {case['verdict']}"
        )
    console.print(
        f"analytic vs the FakeTensor oracle on {len(grid.table)} shapes: median |error| {grid.median_abs_error_pct:.2f}%, "
        f"p90 {grid.p90_abs_error_pct:.2f}%, worst {grid.max_abs_error_pct:.2f}%"
    )
    for r in grid.by_regime:
        console.print(
            f"  {r['regime']}: {r['rows']} shapes, median |error| {r['median_abs_error_pct']:.2f}%, "
            f"worst {r['max_abs_error_pct']:.2f}%"
        )
