"""The `perfmodel` command line: one Typer app; each command parses flags, calls a library
function that returns data, and renders it (a Rich table, or JSON with --json).

Results go to stdout; logs and progress to stderr. Heavy libraries (torch, mlflow, lightgbm)
are imported inside the library functions, never here.
"""

from __future__ import annotations

import inspect
import sys

import typer

from perfmodel.cli import _common

app = typer.Typer(
    name="perfmodel",
    help="Predict how long a training run takes, whether it fits in memory, and how sure we are.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        # loaded when the command runs (CLI start-up)
        from perfmodel import __version__

        sys.stdout.write(f"perfmodel {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors."),
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
    ),
) -> None:
    _common.SETTINGS.debug = debug


def _register_commands() -> None:
    # Each module adds its commands to `app`; modules are cheap to import (no torch/mlflow).
    from perfmodel.cli import (
        commands_calibrate,
        commands_catalog,
        commands_collect,
        commands_dataset,
        commands_decide,
        commands_kernels,
        commands_ludwig,
        commands_memory,
        commands_predict,
        commands_run,
        commands_serve,
        commands_train,
    )

    for module in (
        commands_catalog,
        commands_predict,
        commands_collect,
        commands_dataset,
        commands_train,
        commands_memory,
    ):
        module.register(app)
    commands_decide.register(app)
    commands_run.register(app)
    commands_calibrate.register(app)
    commands_serve.register(app)
    commands_ludwig.register(app)
    commands_kernels.register(app)
    for info in app.registered_commands:  # docstrings wrap at 110 columns; the terminal wraps help text
        doc = info.help or (info.callback.__doc__ if info.callback else None)
        if doc:
            info.help = _reflow(doc)


def _reflow(doc: str) -> str:
    """Paragraphs of a docstring as single lines (Rich keeps single newlines: help would break mid-
    sentence at the docstring's width instead of the terminal's)."""
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


_register_commands()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: errors become one line on stderr and exit code 1."""
    _common.run_app(app, argv if argv is not None else sys.argv[1:])
