"""`perfmodel check-ludwig CONFIG`: would Ludwig accept this config? Ludwig's own answer when
Ludwig is installed (this Python, else the venv of `make ludwig-env` or $PERFMODEL_LUDWIG_PYTHON),
perfmodel's rules for Ludwig 0.17 otherwise (perfmodel.config.ludwig_schema).

Exit status: 0 valid, 1 rejected (the verdict is the result: printed on stdout), 1 with one line on
stderr for an unreadable file or a Ludwig venv that does not run, 2 for a usage error."""

from __future__ import annotations

from pathlib import Path

import typer

from perfmodel.cli import _common


def register(app: typer.Typer) -> None:
    app.command("check-ludwig")(check_ludwig_command)


def check_ludwig_command(
    config: Path = typer.Argument(..., help="A Ludwig config (YAML)."),
    ludwig: str = typer.Option(
        "auto",
        "--ludwig",
        help="auto: Ludwig when found, else perfmodel's rules; require: Ludwig or an error; never.",
    ),
    python: str = typer.Option(
        None,
        "--python",
        help="The python of a Ludwig venv (default: $PERFMODEL_LUDWIG_PYTHON, make ludwig-env's).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Validate a Ludwig config as Ludwig 0.17 does (its ModelConfig when installed, perfmodel's rules otherwise)."""
    # loaded when the command runs (CLI start-up)
    from perfmodel.config.ludwig_schema import check_ludwig
    from perfmodel.config.overrides import read_config_file

    if ludwig not in ("auto", "require", "never"):
        raise typer.BadParameter(f"must be auto, require or never; got {ludwig!r}", param_hint="--ludwig")
    cfg = read_config_file(config)
    verdict = check_ludwig(cfg, use_ludwig=ludwig, python=python)
    if json_out:
        _common.print_json({"config": str(config), **verdict.to_json()})
    else:
        state = {True: "valid", False: "rejected", None: "undecided"}[verdict.valid]
        line = f"{config}: {state} by {verdict.judge}"
        if verdict.reason:
            line += f": {verdict.reason}"
            if verdict.check:
                line += f" [{verdict.check}]"
        if verdict.is_gbm:
            line += " (perfmodel still predicts it, as Ludwig <= 0.10 trained it)"
        _common.stdout_console().print(line, highlight=False, markup=False, soft_wrap=True)
    if verdict.valid is not True:
        raise typer.Exit(1)
