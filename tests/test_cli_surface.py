"""The CLI's surface, frozen: every command (and subcommand) and each one's flags and arguments,
read from the Typer app's click command tree and compared with tests/fixtures/cli_surface.json.

A command or flag that disappears breaks users' scripts and the README; one that appears should
be documented. When a change is intended, regenerate the fixture and commit it with the change:

    PERFMODEL_UPDATE_CLI_SURFACE=1 .venv/bin/python -m pytest -q tests/test_cli_surface.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "cli_surface.json"
UPDATE_ENV = "PERFMODEL_UPDATE_CLI_SURFACE"
HOW_TO_UPDATE = (
    f"If this change to the CLI is intended, regenerate the fixture and commit it with the change "
    f"(and update README.md where it names the command or flag):\n"
    f"    {UPDATE_ENV}=1 .venv/bin/python -m pytest -q tests/test_cli_surface.py"
)


def _params(command: Any) -> dict[str, list[str]]:
    options, arguments = [], []
    for p in command.params:
        if type(p).__name__.endswith("Argument"):
            arguments.append(p.name)
        else:
            options.append(" / ".join([*p.opts, *p.secondary_opts]))
    return {"options": sorted(options), "arguments": arguments}


def cli_surface() -> dict[str, dict[str, list[str]]]:
    """'perfmodel', 'perfmodel predict', 'perfmodel dataset build', ... -> options and arguments."""
    import typer.main

    from perfmodel.cli import app

    out: dict[str, dict[str, list[str]]] = {}

    def walk(command: Any, path: str) -> None:
        out[path] = _params(command)
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(app), "perfmodel")
    return out


def _diff(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    lines = [f"command removed: {c}" for c in sorted(set(expected) - set(actual))]
    lines += [f"command added: {c}" for c in sorted(set(actual) - set(expected))]
    for c in sorted(set(expected) & set(actual)):
        for kind in ("options", "arguments"):
            old, new = expected[c][kind], actual[c][kind]
            lines += [f"{c}: {kind[:-1]} removed: {x}" for x in old if x not in new]
            lines += [f"{c}: {kind[:-1]} added: {x}" for x in new if x not in old]
            if not set(old) ^ set(new) and old != new:
                lines.append(f"{c}: {kind} reordered: {old} -> {new}")
    return lines


def test_cli_surface_matches_the_checked_in_fixture():
    actual = cli_surface()
    if os.environ.get(UPDATE_ENV):
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        FIXTURE.write_text(json.dumps(actual, indent=2, sort_keys=True) + "\n")
    expected = json.loads(FIXTURE.read_text())
    changes = _diff(expected, actual)
    assert not changes, "the CLI surface changed:\n  " + "\n  ".join(changes) + "\n" + HOW_TO_UPDATE


def test_the_surface_is_read_from_the_real_app():
    """The reader sees what a user sees: flags the docs rely on are there (so a broken reader
    cannot pass the comparison above with an empty fixture)."""
    surface = cli_surface()
    assert {"--version", "--install-completion", "--show-completion", "--debug"} <= set(
        surface["perfmodel"]["options"]
    )
    assert "--config / -c" in surface["perfmodel predict"]["options"]
    assert "--json" in surface["perfmodel gpus"]["options"]
    assert surface["perfmodel compare"]["arguments"] == ["configs"]
    assert "perfmodel dataset build" in surface
    assert _diff(
        {"perfmodel x": {"options": ["--a"], "arguments": []}},
        {"perfmodel x": {"options": [], "arguments": []}},
    ) == ["perfmodel x: option removed: --a"]


@pytest.mark.slow
def test_version_and_completion_through_the_entry_point():
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "perfmodel", *a], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    res = run("--version")
    assert res.returncode == 0, res.stderr
    from perfmodel import __version__

    assert res.stdout == f"perfmodel {__version__}\n"
    # the script `--show-completion` prints for bash (asked for by name: `--show-completion` itself
    # detects the parent shell from the process tree, which a detached test run may not have)
    res = subprocess.run(
        [sys.executable, "-m", "perfmodel"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "_PERFMODEL_COMPLETE": "source_bash"},
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert "_PERFMODEL_COMPLETE" in res.stdout and "complete_bash" in res.stdout
    assert "--show-completion" in run("--help").stdout
    env = {
        **os.environ,
        "_PERFMODEL_COMPLETE": "complete_bash",
        "COMP_WORDS": "perfmodel pred",
        "COMP_CWORD": "1",
    }
    res = subprocess.run(
        [sys.executable, "-m", "perfmodel"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )
    assert res.stdout.split() == ["predict"], (res.stdout, res.stderr)
