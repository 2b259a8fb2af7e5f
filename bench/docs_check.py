"""Run the README's runnable examples on this checkout and fail if any exits non-zero.

Convention: a fenced ```bash block is runnable when the line `<!-- docs-check -->` is the last
non-blank line before its opening fence (an HTML comment: invisible on GitHub). Blocks without
the marker (long jobs, placeholders, setup) are never run. In a runnable block every line is a
command: a line ending in `\\` continues on the next; blank lines and lines that start with `#`
are skipped; a trailing `# comment` is left to bash; `. .venv/bin/activate` (or `source ...`)
is skipped, because every command runs with the virtual environment's bin/ first on PATH.

Each command runs on its own in `bash -c`, from the repository root, with COLUMNS=80 and
NO_COLOR=1 (the output a user sees on an 80-column terminal), stdout and stderr captured.

    python bench/docs_check.py               # every command of every marked block
    python bench/docs_check.py --cheap       # only the quick ones (perfmodel predict/gpus/models/...)
    python bench/docs_check.py --list        # print the commands, run nothing
    python bench/docs_check.py --readme FILE --timeout 600

Exit code 0 when every command exits 0 (or none is marked), 1 when one fails, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- docs-check -->"
"""The line that makes the next ```bash block runnable."""
CHEAP_COMMANDS = (
    "predict",
    "gpus",
    "models",
    "sweep",
    "compare",
    "advise",
    "memcheck",
    "--version",
    "--help",
)
"""`perfmodel` subcommands that answer in seconds (what `--cheap` and the test run)."""
_FENCE = re.compile(r"^\s*```+\s*(\w+)?")
_ACTIVATE = re.compile(r"^(\.|source)\s+\S*activate\b")


@dataclass(frozen=True, kw_only=True)
class DocCommand:
    """One runnable command of the README."""

    command: str
    """The command line (continuations joined), as bash runs it."""
    line: int
    """1-based line number of its first line in the Markdown file."""


def extract_commands(markdown: str) -> list[DocCommand]:
    """The commands of every ```bash block marked runnable (see the module docstring)."""
    lines = markdown.splitlines()
    out: list[DocCommand] = []
    last_text = ""
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            if lines[i].strip():
                last_text = lines[i].strip()
            i += 1
            continue
        runnable = last_text == MARKER and (fence.group(1) or "").lower() in (
            "bash",
            "sh",
            "shell",
            "console",
        )
        i += 1
        pending: list[str] = []
        start = 0
        while i < len(lines) and not _FENCE.match(lines[i]):
            text = lines[i].rstrip()
            if runnable:
                if not pending:
                    start = i + 1
                if not pending and (not text.strip() or text.lstrip().startswith("#")):
                    i += 1
                    continue
                if text.endswith("\\"):
                    pending.append(text[:-1].rstrip())
                else:
                    pending.append(text)
                    command = " ".join(part.strip() for part in pending)
                    pending = []
                    if not _ACTIVATE.match(command):
                        out.append(DocCommand(command=command, line=start))
            i += 1
        if runnable and pending:
            out.append(DocCommand(command=" ".join(p.strip() for p in pending), line=start))
        last_text = ""
        i += 1  # the closing fence
    return out


def is_cheap(command: str) -> bool:
    """Whether a command is `perfmodel <one of CHEAP_COMMANDS> ...`."""
    words = command.split()
    return len(words) >= 2 and words[0] == "perfmodel" and words[1] in CHEAP_COMMANDS


def run_command(command: str, timeout_s: float, root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run one command as the README's reader would: repository root, the venv's bin/ first."""
    env = dict(os.environ)
    venv_bin = root / ".venv" / "bin"
    path_parts = [str(Path(sys.executable).parent)]
    if venv_bin.is_dir():
        path_parts.insert(0, str(venv_bin))
    env["PATH"] = os.pathsep.join([*path_parts, env.get("PATH", "")])
    env.update({"COLUMNS": "80", "NO_COLOR": "1"})
    return subprocess.run(
        ["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True, timeout=timeout_s
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--readme", type=Path, default=ROOT / "README.md", help="Markdown file (default: README.md)"
    )
    parser.add_argument(
        "--cheap", action="store_true", help="only `perfmodel predict/gpus/models/sweep/...` commands"
    )
    parser.add_argument("--list", action="store_true", help="print the commands and run nothing")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per command (default 600)")
    args = parser.parse_args(argv)
    if not args.readme.is_file():
        parser.error(f"{args.readme} not found")
    commands = extract_commands(args.readme.read_text(encoding="utf-8"))
    if args.cheap:
        commands = [c for c in commands if is_cheap(c.command)]
    name = args.readme.name
    if args.list:
        for c in commands:
            print(f"{name}:{c.line}: {c.command}")
        return 0
    if not commands:
        print(f"docs-check: no runnable commands in {name} (mark a ```bash block with {MARKER})")
        return 0
    failed = 0
    for c in commands:
        start = time.perf_counter()
        try:
            res = run_command(c.command, args.timeout)
            ok, detail = res.returncode == 0, f"exit {res.returncode}"
            tail = (res.stderr.strip() or res.stdout.strip()).splitlines()[-5:]
        except subprocess.TimeoutExpired:
            ok, detail, tail = False, f"timed out after {args.timeout:g} s", []
        elapsed = time.perf_counter() - start
        print(f"{'ok  ' if ok else 'FAIL'} {elapsed:6.1f} s  {name}:{c.line}: {c.command}", flush=True)
        if not ok:
            failed += 1
            print(f"     {detail}", flush=True)
            for line in tail:
                print(f"     | {line}", flush=True)
    print(f"docs-check: {len(commands) - failed} of {len(commands)} commands passed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
