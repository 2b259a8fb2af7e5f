"""`perfmodel memcheck`: the analytic memory model against published peak-memory measurements."""

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
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Compare predicted peak memory per GPU with published measurements (torchtitan, ml-engineering)."""
    # loaded when the command runs (CLI start-up)
    from perfmodel.errors import DataError
    from perfmodel.memcheck import check_memory
    from perfmodel.paths import peak_memory_path

    target = path or peak_memory_path()
    if not Path(target).is_file():
        raise DataError(
            f"no peak-memory table at {target}; build it with collectors.public.memory.write_peak_memory"
        )
    result = check_memory(target)
    cols = (
        "source model_name gpu num_gpus tensor_parallel pipeline_parallel context_parallel "
        "micro_batch_size seq_len precision checkpointing_as_published peak_memory_gb predicted_gb error_pct"
    ).split()
    summary = {
        "rows": len(result.table),
        "median_abs_error_pct": result.median_abs_error_pct,
        "p90_abs_error_pct": result.p90_abs_error_pct,
        "within_interval_pct": result.within_interval_pct,
    }
    if json_out:
        _common.print_json({**summary, "measurements": result.table[cols + ["citation"]].to_dict("records")})
        return
    # rich: only output needs it (the CLI's cold start)
    from rich.table import Table

    table = Table(title="Peak memory per GPU: published measurement vs analytic estimate")
    for col in "model,gpu,gpus,tp/pp/cp,mbs,seq,precision,ckpt,measured GB,predicted GB,error".split(","):
        table.add_column(col, justify="right")
    for r in result.table.to_dict("records"):
        table.add_row(
            r["model_name"],
            r["gpu"],
            str(r["num_gpus"]),
            f"{r['tensor_parallel']}/{r['pipeline_parallel']}/{r['context_parallel']}",
            str(r["micro_batch_size"]),
            str(r["seq_len"]),
            r["precision"],
            r["checkpointing_as_published"],
            f"{r['peak_memory_gb']:.1f}",
            f"{r['predicted_gb']:.1f}",
            f"{r['error_pct']:+.0f}%",
        )
    console = _common.stdout_console()
    console.print(table)
    console.print(
        f"{summary['rows']} measurements: median |error| {summary['median_abs_error_pct']:.0f}%, "
        f"p90 {summary['p90_abs_error_pct']:.0f}%, inside the predicted interval {summary['within_interval_pct']:.0f}% (in-sample)"
    )
