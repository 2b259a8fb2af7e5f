"""`perfmodel kernels build | fit | evaluate | show`: the kernel table, the fitted efficiency and its
held-out accuracy (perfmodel/kernels)."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from perfmodel.cli import _common

kernels_app = typer.Typer(
    help="Kernel table, fitted kernel efficiency and its held-out accuracy.", no_args_is_help=True
)

_Path = Optional[Path]  # noqa: UP045 - typer needs Optional at runtime on Python 3.10
_JSON = typer.Option("--json", help="Machine-readable output.")
_TABLE = typer.Option("--table", help="Kernel-table folder (default: <datasets>/kernels).")


def register(app: typer.Typer) -> None:
    app.add_typer(kernels_app, name="kernels")


@kernels_app.command("build")
def build_command(
    public_dir: Annotated[
        _Path,
        typer.Option(
            "--public-dir",
            help="Public CSVs (default: $PERFMODEL_PUBLIC_DATA or <root>/../shared/data/public).",
        ),
    ] = None,
    neusight_repo: Annotated[
        _Path,
        typer.Option(
            "--neusight-repo",
            help="A clone of sitar-lab/NeuSight for its operator datasets (without it, the committed rows of that source stay).",
        ),
    ] = None,
    attention_repo: Annotated[
        _Path,
        typer.Option(
            "--attention-repo",
            help="A clone of fxmarty/efficient-attention-benchmark for its eager attention tables (without it, the committed rows stay).",
        ),
    ] = None,
    out: Annotated[_Path, typer.Option("--out", help="Output folder (default: <datasets>/kernels).")] = None,
    json_out: Annotated[bool, _JSON] = False,
) -> None:
    """Import the kernel sources into datasets/kernels/*.parquet and REPORT.md."""
    # loaded when the command runs (CLI start-up)
    from collectors.public.kernel_table import build_kernel_table
    from perfmodel import paths

    summary = build_kernel_table(
        public_dir or paths.shared_public_data_dir(),
        out_dir=out or paths.kernels_dir(),
        raw_dir=paths.raw_dir(),
        neusight_repo=neusight_repo,
        attention_repo=attention_repo,
    )
    if json_out:
        _common.print_json(summary)
        return
    console = _common.stdout_console()
    console.print(
        f"{summary['rows']} kernel rows on {summary['accelerators']} accelerators -> {out or paths.kernels_dir()}"
    )
    for source, n in summary["by_source"].items():
        console.print(f"  {source}: {n}")


@kernels_app.command("fit")
def fit_command(
    table_dir: Annotated[_Path, _TABLE] = None,
    out: Annotated[
        _Path,
        typer.Option(
            "--out",
            help="Where to write the parameters (default: the shipped perfmodel/kernels/efficiency.json).",
        ),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option("--exclude", help="Leave out every row of this accelerator (repeatable)."),
    ] = None,
    json_out: Annotated[bool, _JSON] = False,
) -> None:
    """Fit the kernel efficiency on the kernel table and write its parameters."""
    # loaded when the command runs (CLI start-up)
    from perfmodel.kernels.efficiency import EfficiencyParams, save_efficiency
    from perfmodel.kernels.fitting import fit_efficiency_table
    from perfmodel.kernels.table import load_kernel_table

    report = fit_efficiency_table(load_kernel_table(table_dir), exclude_gpus=tuple(exclude or ()))
    notes = (
        f"perfmodel kernels fit{''.join(f' --exclude {g}' for g in exclude or ())} on {report.rows_used} rows of "
        f"datasets/kernels ({dt.date.today().isoformat()}); in-sample median error {report.median_ape:.1%}"
    )
    params = EfficiencyParams(
        values=report.params.values, fitted_on=report.params.fitted_on, rows=report.rows_used, notes=notes
    )
    path = save_efficiency(params, out)
    result = {"path": str(path), "rows": report.rows_used, "rows_below_floor": report.rows_below_floor,
              "seconds": report.seconds, "in_sample_median_ape": report.median_ape, "rows_per_kind": report.by_group}  # fmt: skip
    if json_out:
        _common.print_json(result)
        return
    _common.stdout_console().print(
        f"fitted on {report.rows_used} rows ({report.rows_below_floor} faster than their floor left out) in "
        f"{report.seconds:.2f} s; in-sample median error {report.median_ape:.1%} -> {path}"
    )


@kernels_app.command("evaluate")
def evaluate_command(
    table_dir: Annotated[_Path, _TABLE] = None,
    gpus: Annotated[
        list[str] | None,
        typer.Option("--gpu", help="Hold out only these accelerators (repeatable; default: every one)."),
    ] = None,
    markdown: Annotated[
        _Path, typer.Option("--markdown", help="Also write the tables as Markdown (e.g. docs/kernels.md).")
    ] = None,
    json_out: Annotated[bool, _JSON] = False,
) -> None:
    """Hold out each accelerator in turn: fit on the others, predict its kernel rows; error per kind."""
    # loaded when the command runs (CLI start-up)
    from perfmodel.kernels.evaluate import kernel_eval_tables, render_markdown
    from perfmodel.kernels.fitting import fit_efficiency_table
    from perfmodel.kernels.table import load_kernel_table

    table = load_kernel_table(table_dir)
    console = _common.stderr_console()
    tables = kernel_eval_tables(
        table, gpus=gpus, progress=lambda g: console.print(f"holding out {g} ...", highlight=False)
    )
    if markdown is not None:
        started = time.perf_counter()
        fit_efficiency_table(table)
        command = (
            "perfmodel kernels evaluate"
            + "".join(f" --gpu {g}" for g in gpus or ())
            + f" --markdown {markdown}"
        )
        markdown.write_text(
            render_markdown(tables, command=command, fit_seconds=time.perf_counter() - started)
        )
    if json_out:
        _common.print_json({k: tables[k].to_dict("records") for k in ("by_kind", "by_gpu")})
        return
    # rich: only output needs it (the CLI's cold start)
    from rich.table import Table

    out = Table(title="Kernel time, accelerator held out: error per kind (pooled over held-out accelerators)")
    for col in ("kind", "impl", "rows", "accelerators", "median", "p90"):
        out.add_column(col, justify="left" if col in ("kind", "impl") else "right")
    for r in tables["by_kind"].to_dict("records"):
        out.add_row(
            r["kernel_kind"],
            r["impl"],
            str(r["rows"]),
            str(r["accelerators"]),
            f"{r['median_ape']:.1%}",
            f"{r['p90_ape']:.1%}",
        )
    _common.stdout_console().print(out)


@kernels_app.command("show")
def show_command(
    path: Annotated[
        _Path, typer.Option("--params", help="A parameter file (default: the shipped one).")
    ] = None,
    json_out: Annotated[bool, _JSON] = False,
) -> None:
    """Print the fitted efficiency parameters, grouped as in perfmodel/kernels/efficiency.py."""
    # loaded when the command runs (CLI start-up)
    from perfmodel.kernels.efficiency import describe_params, load_efficiency

    params = load_efficiency(path)
    groups = describe_params(params)
    if json_out:
        _common.print_json(
            {
                "fitted_on": list(params.fitted_on),
                "rows": params.rows,
                "notes": params.notes,
                "groups": groups,
            }
        )
        return
    # rich: only output needs it (the CLI's cold start)
    from rich.table import Table

    console = _common.stdout_console()
    console.print(params.notes or "(no notes)")
    for title, rows in groups.items():
        table = Table(title=title)
        table.add_column("parameter")
        table.add_column("value", justify="right")
        table.add_column("meaning")
        for r in rows:
            table.add_row(r["name"], r["value"], r["meaning"])
        console.print(table)
