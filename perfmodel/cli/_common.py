"""Shared CLI plumbing: error handling, JSON output, Rich consoles (stdout for results,
stderr for logs and progress)."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

from perfmodel.errors import PerfModelError

STATE: dict[str, Any] = {"debug": False}


def stdout_console() -> Any:
    from rich.console import Console

    return Console()


def stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def print_json(data: Any) -> None:
    """Machine output: one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


def fail(message: str, code: int = 1) -> None:
    """Print one line on stderr and exit."""
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(code)


def run_app(app: typer.Typer, argv: list[str]) -> None:
    debug = "--debug" in argv
    STATE["debug"] = debug
    try:
        rc = app(args=argv, prog_name="perfmodel", standalone_mode=False)
        if isinstance(rc, int) and rc:
            raise SystemExit(rc)
    except PerfModelError as exc:
        if debug:
            raise
        fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None
    except SystemExit:
        raise
    except Exception as exc:  # click usage errors and unexpected failures
        # Typer may vendor its own copy of click, so match click's exceptions by class name.
        names = {cls.__name__ for cls in type(exc).__mro__}
        if "Abort" in names:
            sys.stderr.write("aborted\n")
            raise SystemExit(130) from None
        if "UsageError" in names:
            message = exc.format_message()  # type: ignore[attr-defined]
            if message:
                sys.stderr.write(f"usage error: {message}\n")
            raise SystemExit(2) from None
        if "ClickException" in names:
            fail(exc.format_message())  # type: ignore[attr-defined]
        if debug:
            raise
        fail(f"{type(exc).__name__}: {exc} (run with --debug for the traceback)")
