"""`perfmodel dataset import-public` and `perfmodel dataset build`: the feature table's inputs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from perfmodel.cli import _common

dataset_app = typer.Typer(
    help="Import public benchmark tables and build the feature table.", no_args_is_help=True
)


_Path = Optional[Path]  # noqa: UP045 - typer needs Optional at runtime on Python 3.10
"""A path option; None (not given) means the location `perfmodel.paths` gives, so the commands mean
the same files wherever they are run from (<datasets> = $PERFMODEL_DATASETS or <root>/datasets)."""
_SHARED = "(default: $PERFMODEL_PUBLIC_DATA or <root>/../shared/data/public)"


def register(app: typer.Typer) -> None:
    app.add_typer(dataset_app, name="dataset")


@dataset_app.command("import-public")
def import_public_command(
    public_dir: Annotated[
        _Path, typer.Option("--public-dir", help=f"Folder of public CSVs {_SHARED}.")
    ] = None,
    out: Annotated[_Path, typer.Option("--out", help="Output folder (default: <datasets>/public).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Normalise the public training-throughput tables into datasets/public/*.parquet."""
    # loaded when the command runs (CLI start-up)
    from collectors.public import write_public
    from perfmodel import paths

    folder = public_dir or paths.shared_public_data_dir()
    out = out or paths.public_dir()
    if not folder.is_dir():
        _common.fail(f"public data folder {folder} not found; pass --public-dir PATH")
    summary = write_public(folder, out)
    if json_out:
        _common.print_json({"out_dir": str(out), **summary})
        return
    # rich: only output needs it (the CLI's cold start)
    from rich.table import Table

    table = Table(
        title=f"{summary['total_rows']} public rows over {summary['gpu_kinds']} accelerator kinds -> {out}"
    )
    for col in ("source", "kept", "skipped", "top skip reason"):
        table.add_column(col, justify="right" if col in ("kept", "skipped") else "left")
    for stem, s in summary["sources"].items():
        top = next(iter(s["skip_reasons"].items()), ("", 0))
        table.add_row(stem, str(s["kept"]), str(s["skipped"]), f"{top[0][:60]} ({top[1]})" if top[1] else "")
    console = _common.stdout_console()
    console.print(table)
    console.print(_counts_table("rows per accelerator", summary["rows_per_gpu"]))


@dataset_app.command("build")
def build_command(
    raw: Annotated[
        _Path, typer.Option("--raw", help="Own collector shards (default: <datasets>/raw).")
    ] = None,
    public: Annotated[
        _Path, typer.Option("--public", help="Public parquet files (default: <datasets>/public).")
    ] = None,
    out: Annotated[
        _Path, typer.Option("--out", help="Table to write (default: <datasets>/features.parquet).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Merge own and public rows into the feature table and print its content hash."""
    # loaded when the command runs (CLI start-up)
    from perfmodel.dataset import build_features

    result = build_features(raw_dir=raw, public_dir=public, out=out)
    if json_out:
        _common.print_json(
            {
                "path": str(result.path),
                "rows": result.rows,
                "content_hash": result.content_hash,
                **result.counts,
            }
        )
        return
    console = _common.stdout_console()
    console.print(f"[bold]{result.rows}[/bold] rows -> {result.path}  sha256 {result.content_hash[:16]}…")
    console.print(_counts_table("rows per source", result.counts["by_source"]))
    console.print(_counts_table("rows per accelerator", result.counts["by_gpu"]))
    if result.counts["dropped"]:
        console.print(_counts_table("dropped rows", result.counts["dropped"]))
    if result.counts["skipped_shards"]:
        _common.stderr_console().print(
            f"skipped {len(result.counts['skipped_shards'])} shard(s): "
            + "; ".join(f"{Path(k).name}: {v}" for k, v in result.counts["skipped_shards"].items())
        )


def _counts_table(title: str, counts: dict[str, Any]) -> Any:
    # rich: only output needs it (the CLI's cold start)
    from rich.table import Table

    table = Table(title=title)
    table.add_column("name")
    table.add_column("rows", justify="right")
    for name, n in counts.items():
        table.add_row(str(name), str(n))
    return table
