"""Calibrations from the MLflow run that produced them (perfmodel.calibration.tracked): the source
syntax, the download into a cache folder with damaged and stale files left out (one warning naming
the run), a store that cannot be reached falling back to the copy downloaded before; and (slow: a
real SQLite MLflow store in tmp_path, ~10 s with MLflow's import and migrations) `calibrate
--log-mlflow`'s logging, `perfmodel serve --calibrations runs:/RUN_ID` using it, a bad run id as
a one-line error, and `calibrate --import runs:/RUN_ID`."""

from __future__ import annotations

import datetime as dt
import json
import logging
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from perfmodel.calibration import record, tracked
from perfmodel.cli import main as cli_main
from perfmodel.errors import ConfigError
from perfmodel.tracking import TrackingError
from tests.test_calibration import HOST_FP, synthetic

BODY = {
    "config": {
        "model": {"name": "llama2-7b", "hidden_size": 256, "num_layers": 4, "num_heads": 8, "num_kv_heads": 2,
                  "ffn_hidden_size": 688, "vocab_size": 8000},
        "training": {"seq_len": 128, "micro_batch_size": 3, "tokens": 1e6},
        "hardware": {"gpu": "cpu"},
    }
}  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_warnings():
    record.warn_once.cache_clear()


def test_a_source_is_a_folder_or_a_run_uri(tmp_path):
    assert tracked.parse_source(tmp_path).folder == tmp_path
    src = tracked.parse_source("runs:/0123abcd")
    assert (src.run_id, src.artifact_path, src.uri()) == ("0123abcd", "calibration", "runs:/0123abcd/calibration")
    assert tracked.parse_source("runs:/0123abcd/fleet/").artifact_path == "fleet"
    for bad in ("", "runs:/", "runs:/../x", "models:/perfmodel-throughput@champion", "s3://bucket/x", str(tmp_path / "nope")):
        with pytest.raises(ConfigError, match="--calibrations"):
            tracked.parse_source(bad)
    assert tracked.calibrations_folder(tmp_path) == tmp_path  # a folder: no MLflow at all


class FakeStore:
    """The two MLflow calls `download_calibrations` makes, over local folders: run id -> the
    folder its `calibration/` artifacts hold; `reachable` False makes the store unreachable."""

    def __init__(self, runs: dict[str, Path]) -> None:
        self.runs = runs
        self.reachable = True

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def check(uri: str) -> None:
            if not self.reachable:
                raise TrackingError(f"MLflow tracking server {uri} did not answer")

        def get_run(run_id: str) -> None:
            if run_id not in self.runs:
                raise type("MlflowException", (Exception,), {"error_code": "RESOURCE_DOES_NOT_EXIST"})(f"Run '{run_id}' not found")

        def download_artifacts(*, run_id: str, artifact_path: str, dst_path: str, tracking_uri: str) -> str:
            src = self.runs[run_id] / artifact_path
            if not src.exists():
                raise OSError(f"no artifact {artifact_path}")
            return shutil.copytree(src, Path(dst_path) / artifact_path)

        client = SimpleNamespace(get_run=get_run)
        monkeypatch.setattr(tracked, "check_reachable", check)
        monkeypatch.setattr(tracked, "MlflowTracker", lambda uri: SimpleNamespace(client=client))
        monkeypatch.setattr(tracked, "import_mlflow", lambda: SimpleNamespace(artifacts=SimpleNamespace(download_artifacts=download_artifacts)))


def _run_folder(tmp_path: Path, name: str, cals: dict[str, object]) -> Path:
    folder = tmp_path / "store" / name / "calibration"
    folder.mkdir(parents=True)
    for file, cal in cals.items():
        text = json.dumps(cal.to_json()) if hasattr(cal, "to_json") else str(cal)
        (folder / file).write_text(text)
    return folder.parent


def test_a_run_is_downloaded_with_its_damaged_and_stale_files_left_out(tmp_path, monkeypatch, caplog):
    old = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=400)).isoformat()
    other = {**HOST_FP, "hardware_id": "cpu-2c-other", "cpu_model": "Other CPU"}
    store = FakeStore({
        "good": _run_folder(tmp_path, "good", {"cpu-2c-test01.json": synthetic(2)}),
        "mixed": _run_folder(tmp_path, "mixed", {"a.json": synthetic(2), "b.json": "{ not json",
                                                 "c.json": synthetic(1, other, created_at=old)}),
        "empty": _run_folder(tmp_path, "empty", {}),
    })  # fmt: skip
    store.install(monkeypatch)
    cache = tmp_path / "cache"
    with caplog.at_level(logging.WARNING, logger="perfmodel.calibration"):
        folder = tracked.calibrations_folder("runs:/mixed", tracking_uri="sqlite:///x.db", cache_dir=cache)
    assert folder == cache / "mixed" and sorted(p.name for p in folder.glob("*.json")) == ["a.json"]
    lines = [r.getMessage() for r in caplog.records if r.name == "perfmodel.calibration"]
    assert len(lines) == 2, lines
    assert any("runs:/mixed/calibration/b.json" in x and "not JSON" in x for x in lines)
    assert any("runs:/mixed/calibration/c.json: stale" in x for x in lines)
    assert record.load_store(folder).calibrations[0].hardware_id == HOST_FP["hardware_id"]

    with pytest.raises(ConfigError, match="no MLflow run 'nope'"):
        tracked.calibrations_folder("runs:/nope", cache_dir=cache)
    with pytest.raises(ConfigError, match="no calibration file"):
        tracked.calibrations_folder("runs:/empty", cache_dir=cache)
    with pytest.raises(ConfigError, match="holds no other/ artifacts"):
        tracked.calibrations_folder("runs:/good/other", cache_dir=cache)

    # unreachable: the copy downloaded before serves (said once); never downloaded: the error
    tracked.calibrations_folder("runs:/good", cache_dir=cache)
    store.reachable = False
    with caplog.at_level(logging.WARNING, logger="perfmodel.calibration"):
        assert tracked.calibrations_folder("runs:/good", cache_dir=cache) == cache / "good"
    assert "using the copy downloaded before" in caplog.records[-1].getMessage()
    with pytest.raises(TrackingError):
        tracked.calibrations_folder("runs:/mixed-never", cache_dir=cache)


def test_the_service_serves_a_run_whose_only_calibration_is_damaged_uncalibrated(tmp_path, monkeypatch, caplog):
    """A damaged calibration in MLflow is a warning and the uncalibrated prediction, as a file is."""
    from fastapi.testclient import TestClient

    from perfmodel.service.app import create_app
    from perfmodel.service.settings import ServiceSettings

    monkeypatch.setenv("PERFMODEL_CALIBRATION_RUNS_DIR", str(tmp_path / "cache"))
    bad = json.dumps({**synthetic(3).to_json(), "schema_version": 99})
    FakeStore({"r1": _run_folder(tmp_path, "r1", {"cpu-2c-test01.json": bad})}).install(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="perfmodel.calibration"):
        app = create_app(ServiceSettings(calibrations="runs:/r1"))
    assert any("runs:/r1/calibration/cpu-2c-test01.json: schema version 99" in r.getMessage() for r in caplog.records)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        doc = c.post("/v1/predict", json=BODY).json()
        info = c.get("/v1/model").json()["calibrations"]
    assert "calibration" not in doc and not any("calibrated on" in a for a in doc["assumptions"])
    assert info["source"] == "runs:/r1" and info["folder"] == str(tmp_path / "cache" / "r1")


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        cli_main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
def test_a_calibration_logged_to_mlflow_is_served_from_its_run(tmp_path, monkeypatch, capsys):
    """A real SQLite MLflow store under tmp_path: `calibrate --show --log-mlflow` logs this host's
    calibration; a service made with `calibrations="runs:/RUN_ID"` applies it (its assumptions say
    so), `no_calibration` does not; a bad run id is one line at `perfmodel serve`'s start; and
    `calibrate --import runs:/RUN_ID` keeps it here."""
    from fastapi.testclient import TestClient

    from perfmodel.service.app import create_app
    from perfmodel.service.settings import ServiceSettings

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("PERFMODEL_CALIBRATION_RUNS_DIR", str(tmp_path / "cache"))
    record.save_calibration(synthetic(5))
    code, out, err = _cli(capsys, "calibrate", "--show", "--log-mlflow", "--json")
    assert code == 0, err
    run_id = json.loads(out)["mlflow_run_id"]
    assert json.loads(out)["calibrations_uri"] == f"runs:/{run_id}"

    # the service reads nothing from the folder the calibration was made in: only the run has it
    monkeypatch.setenv("PERFMODEL_CALIBRATION_DIR", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    with TestClient(create_app(ServiceSettings(calibrations=f"runs:/{run_id}")), base_url="http://127.0.0.1") as c:
        on = c.post("/v1/predict", json=BODY).json()
        off = c.post("/v1/predict", json={**BODY, "no_calibration": True}).json()
    with TestClient(create_app(), base_url="http://127.0.0.1") as c:
        plain = c.post("/v1/predict", json=BODY).json()
    assert on["calibration"]["host"] == HOST_FP["hardware_id"]
    assert any(a.startswith("calibrated on this host's calibration (cpu-2c-test01)") for a in on["assumptions"])
    assert on["step_time_s"]["estimate"] > 2 * off["step_time_s"]["estimate"]  # the synthetic host is 3x slower
    assert "calibration" not in off and not any("calibrated on" in a for a in off["assumptions"])
    assert off["step_time_s"] == plain["step_time_s"]

    code, out, err = _cli(capsys, "serve", "--calibrations", "runs:/0000aaaa0000", "--port", "1")
    assert code == 1 and "no MLflow run '0000aaaa0000'" in err and len(err.strip().splitlines()) == 1, err

    code, out, err = _cli(capsys, "calibrate", "--import", f"runs:/{run_id}", "--json")
    assert code == 0, err
    kept = json.loads(out)["imported"]
    assert [d["hardware_id"] for d in kept] == [HOST_FP["hardware_id"]]
    assert record.read_calibration(kept[0]["imported"]).origin == "import"


def test_log_mlflow_needs_something_to_log(capsys):
    code, _, err = _cli(capsys, "collect", "--log-mlflow")
    assert code == 2 and "--ray" in err
    code, _, err = _cli(capsys, "calibrate", "--import", "x.json", "--log-mlflow")
    assert code == 2 and "--import" in err
