"""`perfmodel collect` and `python -m collectors` through their entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )


def test_collect_is_registered_without_importing_torch():
    code = (
        "import sys, perfmodel.cli.commands_collect, collectors; "
        "print([m for m in ('torch', 'lightgbm', 'pandas') if m in sys.modules])"
    )
    assert run("-c", code).stdout.strip() == "[]"
    res = run("-m", "perfmodel", "collect", "--help")
    assert res.returncode == 0 and "--profile" in res.stdout and "--budget-s" in res.stdout


@pytest.mark.slow
def test_one_entry_point_one_set_of_flags():
    module, command = run("-m", "collectors", "--help"), run("-m", "perfmodel", "collect", "--help")
    assert module.returncode == command.returncode == 0
    assert module.stdout == command.stdout  # python -m collectors is perfmodel collect
    for flag in (
        "--profile",
        "--out",
        "--budget-s",
        "--device",
        "--wait",
        "--plan",
        "--gpu",
        "--summary",
        "--json",
    ):
        assert flag in command.stdout


def test_bad_profile_is_a_usage_error():
    res = run("-m", "perfmodel", "collect", "--profile", "huge")
    assert res.returncode == 2 and "quick, gpu, full" in res.stderr


@pytest.mark.slow
def test_gpu_profile_on_a_cpu_fails_in_one_line(tmp_path):
    res = run("-m", "perfmodel", "collect", "--profile", "gpu", "--device", "cpu", "--out", str(tmp_path))
    assert res.returncode == 1 and res.stderr.strip().splitlines()[-1].startswith(
        "error: profile 'gpu' needs a CUDA"
    )


def test_module_entry_point_reports_errors_with_exit_1(tmp_path, capsys):
    from collectors.__main__ import main

    assert main(["--profile", "gpu", "--device", "cpu", "--out", str(tmp_path)]) == 1
    assert "needs a CUDA device" in capsys.readouterr().err


@pytest.mark.slow
def test_quick_with_a_tiny_budget_stops_cleanly(tmp_path):
    res = run(
        "-m",
        "perfmodel",
        "collect",
        "--profile",
        "quick",
        "--out",
        str(tmp_path),
        "--budget-s",
        "1",
        "--json",
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["stopped"] == "budget" and data["profile"] == "quick"
    assert (tmp_path / f"fingerprint__{data['hardware_id']}.json").is_file()
