"""Re-run the command transcripts of the docs and write what they print now (after a new model or
kernel fit the numbers move; the prose around them is for a person to re-read).

A transcript is a fenced block whose first line is `$ <command>` (continued by lines after a
trailing backslash); the rest of the block is the command's output (stdout and stderr, as a
terminal `COLUMNS` wide shows them: 100 unless the command sets it). Only quick, side-effect-free
perfmodel commands are re-run (`REFRESHED`); the others, and blocks edited by hand (a second `$ `
line or a `...` elision in the output), are listed as skipped.

    python bench/refresh_transcripts.py README.md docs/decide.md [--check]

`--check`: write nothing (a command that writes a file, `--plot`, is skipped), exit 1 when a
transcript differs from what its command prints now."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFRESHED = re.compile(
    r"^(COLUMNS=\d+ )?perfmodel (predict|sweep|advise|gpus|models|frameworks|memory|explain|kernels show"
    r"|compare(?!.*--calibrate-pairs))\b"
)
"""Commands re-run: they read the shipped model and catalog and write nothing but their output
(and a sweep's `--plot` picture)."""
TIMEOUT_S = 300
COLUMNS = "100"


@dataclass(frozen=True)
class Transcript:
    command: str
    """The command as the block shows it, continuation lines included."""
    start: int
    """Index of the block's first line after the command (its output) in the file's lines."""
    end: int
    """Index of the closing fence."""


def transcripts(lines: list[str]) -> list[Transcript]:
    """The transcripts of a Markdown file's lines."""
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```") and i + 1 < len(lines) and lines[i + 1].startswith("$ "):
            j = i + 1
            command = [lines[j][2:]]
            while command[-1].rstrip().endswith("\\") and j + 1 < len(lines):
                j += 1
                command.append(lines[j])
            end = next(k for k in range(j + 1, len(lines)) if lines[k].startswith("```"))
            out.append(Transcript("\n".join(command), j + 1, end))
            i = end + 1
        else:
            i += 1
    return out


def run(command: str) -> str:
    """What `command` prints (stdout and stderr; trailing blanks, which Rich pads lines with, cut),
    run with bash in the repository root."""
    env = {**os.environ, "COLUMNS": COLUMNS,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # fmt: skip
    res = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=TIMEOUT_S)  # fmt: skip
    return "\n".join(line.rstrip() for line in (res.stdout + res.stderr).rstrip("\n").split("\n"))


def refresh(path: Path, *, check: bool) -> tuple[int, int, list[str]]:
    """(re-run, changed, skipped commands) for one file; writes it unless `check`."""
    lines = path.read_text().split("\n")
    found = transcripts(lines)
    changed, ran, skipped = 0, 0, []
    for t in reversed(found):  # from the end, so that earlier indices stay valid
        flat = re.sub(r"\\\n\s*", "", t.command).strip()
        edited = any(x.startswith("$ ") or x.strip() == "..." for x in lines[t.start : t.end])
        writes = check and "--plot" in flat  # a check writes nothing, not even a sweep's picture
        if edited or writes or not REFRESHED.match(flat):
            skipped.append(("edited: " if edited else "writes a file: " if writes else "") + flat[:80])
            continue
        ran += 1
        new = run(flat).split("\n")
        if new != lines[t.start : t.end]:
            changed += 1
            lines[t.start : t.end] = new
    if changed and not check:
        path.write_text("\n".join(lines))
    return ran, changed, skipped[::-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    differ = 0
    for path in args.files:
        ran, changed, skipped = refresh(path, check=args.check)
        differ += changed
        print(f"{path}: {ran} transcripts re-run, {changed} {'differ' if args.check else 'rewritten'}")
        for command in skipped:
            print(f"  skipped: {command}")
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
