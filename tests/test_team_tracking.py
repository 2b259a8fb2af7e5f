"""A team's tracking server, end to end: a real `mlflow server` process on 127.0.0.1 (SQLite
backend and proxied artifacts in a temporary folder, a free port) is MLFLOW_TRACKING_URI for
`perfmodel train` (two runs, each registered), the `champion` alias is moved like a person would
move it, `perfmodel predict --model-uri` reads whichever version it names from the registry, and
the service's registry follower (`perfmodel serve --model-uri`) follows it.

Training is the learn tests' small path (synthetic rows on real catalog accelerators, a small
evaluation config) so the file runs in well under a minute; everything else is the real thing.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from perfmodel.learn.evaluate import EvalConfig
from perfmodel.learn.regressor import LGBMConfig

pytestmark = pytest.mark.xdist_group("learn_train")  # MLflow's process-global URIs: one worker

ROOT = Path(__file__).resolve().parents[1]
SMALL = EvalConfig(
    n_jobs=1,
    lgbm=LGBMConfig(n_estimators=60, learning_rate=0.15),
    splits=("loho",),
    inner_max_splits=2,
    final_max_splits=4,
)
GPUS = ("A100-80GB", "H100-SXM", "L40S", "A10G", "V100-32GB", "MI250X")
CONFIG = {
    "model": {"name": "llama2-7b"},
    "training": {"seq_len": 512, "micro_batch_size": 4, "precision": "bf16", "tokens": 1.0e8},
    "hardware": {"gpu": "A100-80GB", "num_gpus": 1},
}
CHAMPION = "models:/perfmodel-throughput@champion"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`mlflow server` with a SQLite backend and served artifacts; yields its URI."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    cmd = [
        str(Path(sys.executable).parent / "mlflow"),
        "server",
        "--backend-store-uri",
        f"sqlite:///{root / 'mlflow.db'}",
        "--artifacts-destination",
        str(root / "artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    log = open(root / "server.log", "w")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(
        cmd,
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # no background job runner (GenAI scoring, trace archival): perfmodel needs none of it
        env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(uri + "/health", timeout=2) as answer:
                if answer.status == 200:
                    break
        except OSError:
            pass
        assert proc.poll() is None, (root / "server.log").read_text()[-2000:]
        assert time.monotonic() < deadline, "mlflow server did not start"
        time.sleep(0.5)
    yield uri
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)
    log.close()


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    from perfmodel.learn.synthetic import make_synthetic_table

    root = tmp_path_factory.mktemp("tables")
    paths = {}
    for name, seed in (("first", 7), ("second", 8)):
        paths[name] = root / f"{name}.parquet"
        make_synthetic_table(160, seed=seed, gpus=GPUS).to_parquet(paths[name])
    return paths


def train(capsys, features: Path, *flags: str) -> dict:
    """`perfmodel train --json` through the CLI's entry point, in this process."""
    from perfmodel.cli import app
    from perfmodel.cli._common import run_app

    capsys.readouterr()
    run_app(app, ["train", "--features", str(features), "--json", "--seeds", "0", *flags])
    return json.loads(capsys.readouterr().out)


def predict_from_registry(capsys, model_uri: str, config: Path) -> dict:
    """`perfmodel predict --model-uri MODEL_URI --json` through the CLI's entry point, in this process."""
    from perfmodel.cli import app
    from perfmodel.cli._common import run_app

    capsys.readouterr()
    run_app(app, ["predict", "--config", str(config), "--model-uri", model_uri, "--json"])
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_train_registers_on_the_team_server_and_predict_and_serve_follow_the_alias(
    server, tables, tmp_path, monkeypatch, capsys
):
    import yaml

    from perfmodel.api import predict
    from perfmodel.learn import lean_import
    from perfmodel.learn import train as train_module
    from perfmodel.service.model_source import RegistryFollower
    from perfmodel.tracking import import_mlflow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", server)
    monkeypatch.setenv("PERFMODEL_ROOT", str(tmp_path))  # runs/ of each training go here
    monkeypatch.setattr(train_module, "EvalConfig", lambda: SMALL)
    monkeypatch.setattr(lean_import, "LEAN_LIGHTGBM_IMPORT", False)  # `predict` sets it for its process
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(CONFIG))

    first = train(capsys, tables["first"])
    assert first["tracking_uri"] == server and first["registered_version"] == "1" and first["became_champion"]
    second = train(capsys, tables["second"], "--force-champion")  # other rows: only forced
    assert second["registered_version"] == "2" and second["became_champion"]

    client = import_mlflow().MlflowClient(tracking_uri=server)
    assert str(client.get_model_version_by_alias("perfmodel-throughput", "champion").version) == "2"
    assert client.get_run(second["run_id"]).info.status == "FINISHED"

    # What each version predicts, from the folder its training saved before logging anything.
    local = {
        v: predict(CONFIG, model_dir=Path(r["local_dir"]) / "model") for v, r in (("1", first), ("2", second))
    }
    step = {v: run.step_time_s.estimate for v, run in local.items()}
    assert step["1"] != pytest.approx(step["2"], rel=1e-6)  # the two models can be told apart

    got = predict_from_registry(capsys, CHAMPION, config)
    assert got["model"]["kind"] == "learned" and got["model"]["version"] == "2"
    assert got["step_time_s"]["estimate"] == pytest.approx(step["2"], rel=1e-9)

    client.set_registered_model_alias("perfmodel-throughput", "champion", "1")  # a rollback
    got = predict_from_registry(capsys, CHAMPION, config)
    assert got["model"]["version"] == "1"
    assert got["step_time_s"]["estimate"] == pytest.approx(step["1"], rel=1e-9)
    pinned = predict_from_registry(capsys, "models:/perfmodel-throughput/2", config)
    assert pinned["step_time_s"]["estimate"] == pytest.approx(step["2"], rel=1e-9)
    assert sorted(p.name for p in cache.rglob("v*") if p.is_dir()) == ["v1", "v2"]  # one download each

    follower = RegistryFollower(CHAMPION, tracking_uri=server, poll_interval_s=60)
    try:
        assert follower.poll_once() and follower.current().version == "1"
        client.set_registered_model_alias("perfmodel-throughput", "champion", "2")
        assert follower.poll_once() and follower.current().version == "2"
    finally:
        follower.stop()


@pytest.mark.slow
def test_an_unknown_registered_model_is_one_line_naming_the_server(server, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps(CONFIG))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfmodel",
            "predict",
            "--config",
            str(config),
            "--model-uri",
            "models:/nobody@champion",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MLFLOW_TRACKING_URI": server, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: models:/nobody@champion is not in the registry at " + server)
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_run_on_a_team_server_prints_nothing_on_stdout(server, monkeypatch, capsys):
    from perfmodel.tracking import MlflowTracker

    monkeypatch.delenv("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", raising=False)
    tracker = MlflowTracker(server, experiment="perfmodel-stdout-check")
    capsys.readouterr()
    with tracker.run("stdout-check"):
        tracker.log_metrics({"x": 1.0})
    assert capsys.readouterr().out == ""
