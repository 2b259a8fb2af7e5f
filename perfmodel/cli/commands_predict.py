"""`perfmodel predict`: a config file in, a time / memory / cost estimate out."""

from __future__ import annotations

import typer

from perfmodel.cli import _common
from perfmodel.request import RunRequest


def register(app: typer.Typer) -> None:
    app.command("predict")(predict_command)


@_common.run_options(include=("memory",))
def predict_command(
    request: RunRequest,
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output (the stable JSON contract)."),
    explain: bool = typer.Option(False, "--explain", help="List every assumption and warning (default: a one-line summary)."),
) -> None:
    """Predict throughput, step time, total time, GPU-hours and peak memory for a training run."""
    # loaded when the command runs (CLI start-up)
    from perfmodel.learn.lean_import import use_lean_import

    use_lean_import()  # one-shot process: keep the cold start fast
    from perfmodel import api  # the library: loaded when the command runs (perfmodel --help stays fast)

    prediction, fits = api.predict_with_fits(request, progress=_common.progress_line)
    if json_out:
        _common.print_json(api.document(prediction, fits))
        return
    from perfmodel.cli.render import render_fit_suggestions, render_prediction  # rich: output only

    render_prediction(prediction, _common.stdout_console(), explain=explain)
    render_fit_suggestions(fits, _common.stdout_console())
