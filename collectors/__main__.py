"""`python -m collectors [FLAGS]` (what `make collect` runs) is `perfmodel collect [FLAGS]`: one
command line, one set of flags (`perfmodel collect --help`), one error path (one line on stderr:
exit 1 on an error, 2 on a usage error, 130 when stopped by Ctrl-C, SIGTERM or SIGHUP with what
was measured kept)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run `perfmodel collect` with `argv` (default: this process's arguments); returns the exit
    status."""
    # the CLI: loaded when `python -m collectors` runs
    from perfmodel.cli import app
    from perfmodel.cli._common import run_app

    args = list(sys.argv[1:] if argv is None else argv)
    root = ["--debug"] if "--debug" in args else []
    try:
        run_app(app, [*root, "collect", *[a for a in args if a != "--debug"]])
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        return code if isinstance(code, int) else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
