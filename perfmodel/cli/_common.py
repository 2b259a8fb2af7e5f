"""Shared CLI plumbing: error handling, JSON output, Rich consoles (stdout for results,
stderr for logs and progress).

Errors: a `PerfModelError` is one line on stderr (`error: ...`) and exit code 1; a ConfigError
that lists several problems prints its first line ("N problems in CONFIG:") and one line per
problem. Usage errors exit 2. `--debug` (the root option, recorded in `SETTINGS`) shows tracebacks.
"""

from __future__ import annotations

import inspect
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn, Optional

import typer

from perfmodel.errors import ConfigError, NonFiniteError, PerfModelError, clip
from perfmodel.request import OPTIONS, Option, RunRequest


@dataclass
class Settings:
    """Options of the root command that every command's error handling reads."""

    debug: bool = False
    """Show tracebacks instead of one-line errors (`perfmodel --debug ...`)."""


SETTINGS = Settings()
"""This process's settings: set by the root callback, reset by each `run_app`."""


def stdout_console() -> Any:
    # rich: only output needs it (the CLI's cold start)
    from rich.console import Console

    return Console()


def stderr_console() -> Any:
    # rich: only output needs it (the CLI's cold start)
    from rich.console import Console

    return Console(stderr=True)


def print_json(data: Any) -> None:
    """Machine output: one strict JSON document on stdout (RFC 8259: no NaN or Infinity; a
    non-finite number is a NonFiniteError naming where it is, and nothing is printed)."""
    try:
        text = json.dumps(data, indent=2, default=_json_default, allow_nan=False)
    except ValueError as exc:
        where = _non_finite_path(data)
        if where is None:
            raise
        raise NonFiniteError(f"the result has a non-finite number at {where}: the inputs are outside what "
                             f"the cost model can compute (check the config's sizes)") from exc
    sys.stdout.write(text + "\n")


def _non_finite_path(data: Any, path: str = "") -> str | None:
    """Dotted path of the first NaN or infinity in a JSON-like value, or None."""
    value = _json_default(data) if hasattr(data, "item") or isinstance(data, (set, tuple)) else data
    if isinstance(value, float) and not math.isfinite(value):
        return path or "(top level)"
    if isinstance(value, dict):
        items: Any = ((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for sub, v in items:
        found = _non_finite_path(v, sub)
        if found is not None:
            return found
    return None


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


def progress_line(line: str) -> None:
    """One progress line on stderr (results stay alone on stdout)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def fail(message: str, code: int = 1) -> NoReturn:
    """Print the message on stderr (one line, or the lines of a problem list) and exit."""
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(code)


def _message(exc: PerfModelError) -> str:
    """What the user sees: the first line, or every line of a ConfigError listing several problems."""
    text = str(exc)
    if isinstance(exc, ConfigError) and len(exc.problems) > 1:
        return text
    return text.splitlines()[0] if text else type(exc).__name__


def run_app(app: typer.Typer, argv: list[str]) -> None:
    SETTINGS.debug = False  # the root callback sets it when --debug is given
    try:
        rc = app(args=argv, prog_name="perfmodel", standalone_mode=False)
        if isinstance(rc, int) and rc:
            raise SystemExit(rc)
    except PerfModelError as exc:
        if SETTINGS.debug:
            raise
        fail(_message(exc))
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
            message = " ".join(str(exc.format_message()).split())  # type: ignore[attr-defined]
            if message:
                sys.stderr.write(f"usage error: {clip(message, 300)}\n")
            raise SystemExit(2) from None
        if "ClickException" in names:
            fail(clip(" ".join(str(exc.format_message()).split()), 300))  # type: ignore[attr-defined]
        if SETTINGS.debug:
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        fail(f"{type(exc).__name__}: {first[:300]} (run with --debug for the traceback)")


# --- the run-request options ----------------------------------------------------------------------

_CLI_TYPES: dict[Any, Any] = {str: Optional[str], int: Optional[int], float: Optional[float], Path: Optional[Path]}  # noqa: UP045 - typer reads Optional


def _cli_parameter(option: Option) -> inspect.Parameter:
    """The Typer parameter of one request option (flags, help and default from `OPTIONS`)."""
    if option.kind is bool:
        kind: Any = bool
    elif option.kind is list:
        kind = list[str]
    else:
        kind = _CLI_TYPES[option.kind]
    if option.choices:
        kind = Literal[option.choices]  # Typer checks the value and lists the choices in --help
    default = list(option.default) if option.kind is list else option.default
    return inspect.Parameter(
        option.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[kind, typer.Option(*option.flags, help=option.help)],
    )


def run_options(
    *, exclude: tuple[str, ...] = (), include: tuple[str, ...] = (), needs_config: bool = True
) -> Callable[[Any], Any]:
    """Give a command the run-request options of `perfmodel.request.OPTIONS` (the shared ones,
    all but `exclude`, and the unshared ones it names in `include`): the command takes `request:
    RunRequest` and its own parameters, and Typer sees the options followed by its own
    parameters. With `needs_config`, a request with neither --config nor --set is a usage error."""
    options = [o for o in OPTIONS if (o.shared or o.name in include) and o.name not in exclude]

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "request"]

        def wrapper(**values: Any) -> Any:
            given = {o.name: values.pop(o.name) for o in options}
            given["overrides"] = tuple(given.get("overrides") or ())
            if given.get("model_dir") is not None and given.get("model_uri") is not None:
                raise typer.BadParameter("give --model-dir or --model-uri, not both", param_hint="--model-uri")
            request = RunRequest(**given)
            if needs_config and "config" in given and request.config is None and not request.overrides:
                raise typer.BadParameter(
                    "give --config FILE (or describe the run with --set keys)", param_hint="--config"
                )
            return command(request=request, **values)

        keyword = inspect.Parameter.KEYWORD_ONLY
        parameters = [*(_cli_parameter(o) for o in options), *(p.replace(kind=keyword) for p in own)]
        wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        wrapper.__name__, wrapper.__qualname__ = command.__name__, command.__qualname__
        wrapper.__doc__, wrapper.__module__ = command.__doc__, command.__module__
        return wrapper

    return decorate
