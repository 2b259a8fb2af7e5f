"""`perfmodel sweep`, `compare` and `advise` through the real entry point, --json parsed strictly;
usage errors exit 2, bad input exits 1 with one line; the Python API is lazy."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfmodel.cli.commands_decide import parse_duration, parse_usd
from perfmodel.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama2-7b-lora.yaml"
LUDWIG = ROOT / "examples" / "ludwig-llama2-7b-qlora.yaml"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "160", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "perfmodel", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=180,
    )


def strict_json(text: str) -> dict:
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c} in output"))


@pytest.mark.slow
def test_sweep_json_csv_and_plot(tmp_path):
    plot = tmp_path / "sweep.png"
    res = run(
        "sweep",
        "--config",
        str(EXAMPLE),
        "--vary",
        "training.micro_batch_size=2,8,64",
        "--vary",
        "hardware.gpu=A100-80GB,L40S",
        "--json",
        "--plot",
        str(plot),
    )
    assert res.returncode == 0, res.stderr
    data = strict_json(res.stdout)
    assert len(data["points"]) == 6 and data["varied"][0]["key"] == "training.micro_batch_size"
    assert plot.stat().st_size > 1000 and "wrote" in res.stderr
    assert any(not p["fits_in_memory"] for p in data["points"])
    res = run("sweep", "--config", str(EXAMPLE), "--vary", "training.micro_batch_size=2,8", "--csv")
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [r["training.micro_batch_size"] for r in rows] == ["2", "8"]
    res = run("sweep", "--config", str(EXAMPLE), "--vary", "training.micro_batch_size=2,64")
    assert res.returncode == 0, res.stderr
    assert "OOM" in res.stdout and "Total time" in res.stdout


@pytest.mark.slow
def test_sweep_of_ludwig_keys(tmp_path):
    res = run(
        "sweep", "--config", str(LUDWIG), "--tokens", "1e8", "--vary", "trainer.batch_size=1,4", "--json"
    )
    assert res.returncode == 0, res.stderr
    data = strict_json(res.stdout)
    assert data["dialect"] == "ludwig" and [p["values"]["trainer.batch_size"] for p in data["points"]] == [
        1,
        4,
    ]


@pytest.mark.parametrize(
    "args,code,needle",
    [
        (("sweep", "--config", str(EXAMPLE)), 2, "--vary"),
        (
            ("sweep", "--config", str(EXAMPLE), "--vary", "training.micro_batch_size=1", "--json", "--csv"),
            2,
            "--csv",
        ),
        (("sweep", "--config", str(EXAMPLE), "--vary", "training.nope=1,2"), 1, "allowed keys"),
        (("sweep", "--config", str(EXAMPLE), "--vary", "training.micro_batch_size"), 1, "KEY=V1,V2"),
        (
            ("sweep", "--config", str(EXAMPLE), "--vary", "training.micro_batch_size=1,2", "--plot", "x.jpg"),
            1,
            ".png",
        ),
        (("compare", str(EXAMPLE)), 2, "two configs"),
        (("advise", "--config", str(EXAMPLE), "--deadline", "soon"), 1, "duration"),
        (("advise", "--config", str(EXAMPLE), "--budget", "lots"), 1, "USD"),
        (("advise", "--config", str(EXAMPLE), "--gpus", "A100-80"), 1, "did you mean"),
    ],
)
@pytest.mark.slow
def test_bad_input_exits_with_one_line(args, code, needle):
    res = run(*args)
    assert res.returncode == code, (res.stdout, res.stderr)
    assert needle in res.stderr
    if code == 1:
        assert res.stderr.count("\n") == 1 and res.stderr.startswith("error:")


@pytest.mark.slow
def test_compare_json(tmp_path):
    other = tmp_path / "h100.yaml"
    other.write_text(EXAMPLE.read_text().replace("A100-80GB", "H100-SXM"))
    res = run("compare", str(EXAMPLE), str(other), "--json")
    assert res.returncode == 0, res.stderr
    data = strict_json(res.stdout)
    assert data["baseline"] == EXAMPLE.name
    a, b = data["runs"]
    assert a["time_ratio"] == {
        "estimate": 1.0, "low": 1.0, "high": 1.0, "significant": False, "kind": "same step", "rho": 1.0
    }
    assert b["time_ratio"]["kind"] == "gpu" and 0 < b["time_ratio"]["rho"] < 1
    assert b["time_ratio"]["estimate"] == pytest.approx(
        b["total_time_s"]["estimate"] / a["total_time_s"]["estimate"]
    )
    assert data["differences"] == {"hardware.gpu": ["A100-80GB", "H100-SXM"]}
    human = run("compare", str(EXAMPLE), str(other))
    assert human.returncode == 0, human.stderr
    ratio = b["time_ratio"]["estimate"]
    assert ratio < 1  # the H100 finishes sooner, and the verdict says by how much
    assert f"x{1 / ratio:.2f}" in data["verdicts"][0]
    assert data["verdicts"][0] in " ".join(human.stdout.split())


@pytest.mark.slow
def test_compare_calibrate_pairs_refuses_configs_and_stray_options():
    res = run("compare", str(EXAMPLE), "--calibrate-pairs")
    assert res.returncode == 2 and "takes no configs" in res.stderr
    res = run("compare", str(EXAMPLE), "--variant", "hardware.gpu=H100-SXM", "--pairs-file", "x.json")
    assert res.returncode == 2 and "--calibrate-pairs" in res.stderr


@pytest.mark.slow
def test_advise_json_and_human_output():
    res = run(
        "advise",
        "--config",
        str(EXAMPLE),
        "--deadline",
        "12h",
        "--budget",
        "$200",
        "--gpus",
        "A100-80GB,H100-SXM",
        "--max-gpus",
        "16",
        "--json",
    )
    assert res.returncode == 0, res.stderr
    data = strict_json(res.stdout)
    assert data["constraints"]["deadline_s"] == 12 * 3600 and data["constraints"]["budget_usd"] == 200
    assert data["by_time"] and data["by_cost"]
    for opt in data["by_time"] + data["by_cost"]:
        assert opt["fits_in_memory"] and opt["meets_constraints"]
        assert opt["total_time_s"]["estimate"] <= 12 * 3600 and opt["cost_usd"]["estimate"] <= 200
        assert all(set(c) == {"key", "from", "to", "flag"} for c in opt["changes"])
    human = run(
        "advise",
        "--config",
        str(EXAMPLE),
        "--deadline",
        "12h",
        "--gpus",
        "A100-80GB,H100-SXM",
        "--max-gpus",
        "16",
    )
    assert human.returncode == 0, human.stderr
    assert "Fastest" in human.stdout and "Cheapest" in human.stdout and "→" in human.stdout


def test_duration_and_amount_parsing():
    assert parse_duration("24h") == 86400
    assert parse_duration("90m") == 5400
    assert parse_duration("1d12h") == 129600
    assert parse_duration("2") == 7200  # a bare number is hours
    assert parse_usd("$1,200") == 1200 and parse_usd("500") == 500
    for bad in ("", "h", "12x", "1h2"):
        with pytest.raises(ConfigError):
            parse_duration(bad)


def test_python_api_is_lazy_and_typed():
    code = (
        "import sys, perfmodel; heavy = [m for m in ('pandas', 'lightgbm', 'matplotlib', 'perfmodel.decide.sweep') "
        "if m in sys.modules]; print(heavy); from perfmodel.decide.sweep import SweepResult; "
        "print(perfmodel.sweep.__module__, perfmodel.compare.__module__, perfmodel.advise.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "[]"
    assert lines[1] == "perfmodel.decide.sweep perfmodel.decide.compare perfmodel.decide.advise"
    cli = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, perfmodel.cli; print([m for m in ('matplotlib', 'pandas') if m in sys.modules])",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert cli.stdout.strip() == "[]"


@pytest.mark.slow
def test_advise_write_writes_the_chosen_option(tmp_path):
    out = tmp_path / "best.yaml"
    res = run("advise", "--config", str(EXAMPLE), "--gpus", "H100-SXM", "--max-gpus", "4", "--top", "1",
              "--write", str(out), "--choose", "cheapest", "--json")
    assert res.returncode == 0, res.stderr
    data = strict_json(res.stdout)
    assert "wrote the cheapest option" in res.stderr
    cheapest = data["by_cost"][0]
    assert out.read_text().startswith(f"# written by perfmodel advise from {EXAMPLE.name}: {cheapest['label']}")
    bad = run("advise", "--config", str(EXAMPLE), "--write", str(out), "--choose", "slowest")
    assert bad.returncode == 2 and "--choose" in bad.stderr
