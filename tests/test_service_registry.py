"""The server follows the MLflow registry: a moved `champion` alias is loaded in the background and
served without a failed request; a version it cannot use, or a registry it cannot reach, leaves
the current model serving. A local SQLite store in tmp_path holds two registered versions of the
shipped model folder, told apart by their recorded training rows."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from perfmodel.learn import model_files
from perfmodel.learn.metadata import read_model_folder, write_model_folder
from perfmodel.service.app import create_app
from perfmodel.service.settings import ServiceSettings
from perfmodel.tracking import MlflowTracker

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = (ROOT / "examples" / "llama2-7b-lora.yaml").read_text()
URI = "models:/perfmodel-throughput@champion"


def model_folder(tmp_path: Path, name: str, trained_rows: int) -> Path:
    """The shipped model's files, with `trained_rows` recorded (the mark a test can see)."""
    meta, text = read_model_folder(ROOT / "models")
    return write_model_folder(tmp_path / name, meta.replace(trained_rows=trained_rows), text)


@pytest.fixture
def registry(tmp_path):
    tracker = MlflowTracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    versions = []
    for i, rows in enumerate((111, 222)):
        with tracker.run(f"tiny-{i}"):
            versions.append(tracker.log_model(model_folder(tmp_path, f"m{i}", rows), register=True))
    tracker.set_champion(versions[0])
    return tracker, versions


def wait_until(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.mark.slow
def test_a_moved_champion_alias_is_served_without_a_failed_request(registry):
    tracker, (v1, v2) = registry
    settings = ServiceSettings(model_uri=URI, tracking_uri=tracker.uri, poll_interval_s=0.2, cache_bytes=0)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        wait_until(lambda: client.get("/readyz").status_code == 200)
        first = client.get("/v1/model").json()["model"]
        assert (first["version"], first["trained_rows"]) == (v1, 111)

        seen: list[list[tuple[int, str, int]]] = [[], []]
        stop = threading.Event()

        def ask(mine: list[tuple[int, str, int]]) -> None:
            i = 0
            while not stop.is_set():
                i += 1
                r = client.post("/v1/predict", json={"config": EXAMPLE, "tokens": 1e8 + i})
                model = r.json().get("model", {}) if r.status_code == 200 else {}
                mine.append((r.status_code, model.get("version"), model.get("trained_rows")))

        threads = [threading.Thread(target=ask, args=(mine,)) for mine in seen]
        for t in threads:
            t.start()
        wait_until(lambda: len(seen[0]) >= 3 and len(seen[1]) >= 3)
        tracker.set_champion(v2)
        try:
            wait_until(
                lambda: any(v == v2 for _, v, _ in seen[0][-3:]) and any(v == v2 for _, v, _ in seen[1][-3:])
            )
            n = [len(s) for s in seen]
            wait_until(lambda: all(len(s) >= k + 3 for s, k in zip(seen, n, strict=True)))
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=60)
        answers = seen[0] + seen[1]
        assert all(status == 200 for status, _, _ in answers), [a for a in answers if a[0] != 200][:3]
        assert {(v, rows) for _, v, rows in answers} == {(v1, 111), (v2, 222)}
        for mine in seen:  # each client sees the switch once, never back
            versions = [v for _, v, _ in mine]
            k = versions.count(v1)
            assert k >= 3 and versions == [v1] * k + [v2] * (len(versions) - k)
        served = client.get("/v1/model").json()
        expected_run = tracker.client.get_model_version(tracker.model_name, v2).run_id
        assert served["model"]["version"] == v2 and served["model"]["run_id"] == expected_run
        assert served["registry"]["follows"] == URI and served["registry"]["switches"] == 2


@pytest.mark.slow
def test_a_damaged_version_is_not_switched_to(registry, tmp_path):
    tracker, (v1, _) = registry
    bad = model_folder(tmp_path, "bad", 333)
    (bad / model_files.MODEL_FILE).write_text((bad / model_files.MODEL_FILE).read_text()[:1000])  # truncated
    with tracker.run("damaged"):
        v3 = tracker.log_model(bad, register=True)
    settings = ServiceSettings(model_uri=URI, tracking_uri=tracker.uri, poll_interval_s=0.2)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        wait_until(lambda: client.get("/readyz").status_code == 200)
        tracker.set_champion(v3)
        wait_until(lambda: "does not match" in client.get("/v1/model").json()["registry"]["last_error"])
        assert client.get("/v1/model").json()["model"]["version"] == v1
        response = client.post("/v1/predict", json={"config": EXAMPLE})
        assert response.status_code == 200 and response.json()["model"]["version"] == v1


@pytest.mark.slow
def test_no_registered_model_means_not_ready_and_503_not_a_crash(tmp_path):
    uri = f"sqlite:///{tmp_path / 'empty.db'}"
    settings = ServiceSettings(
        model_uri="models:/nothing-here@champion", tracking_uri=uri, poll_interval_s=0.2
    )
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        wait_until(lambda: client.get("/v1/model").json()["registry"]["last_error"] != "")
        ready = client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["ready"] is False
        response = client.post("/v1/predict", json={"config": EXAMPLE})
        assert response.status_code == 503 and "no model loaded yet" in json.loads(response.text)["error"]
        assert client.get("/healthz").status_code == 200


def test_a_model_folder_replaced_in_place_is_served_on_the_next_request(tmp_path):
    folder = model_folder(tmp_path, "models", 111)
    with TestClient(create_app(ServiceSettings(model_dir=folder)), base_url="http://127.0.0.1") as client:
        body = {"config": EXAMPLE}
        assert client.post("/v1/predict", json=body).json()["model"]["trained_rows"] == 111
        meta, text = read_model_folder(folder)
        write_model_folder(folder, meta.replace(trained_rows=222), text, atomically=True)  # what --export does
        response = client.post("/v1/predict", json=body)  # the same request: not answered from the cache
        assert response.status_code == 200 and response.json()["model"]["trained_rows"] == 222
        assert client.get("/v1/model").json()["model"]["trained_rows"] == 222


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens


def test_an_unreachable_registry_is_reported_by_readyz_within_ten_seconds(monkeypatch):
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_TIMEOUT", raising=False)
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    uri = f"http://127.0.0.1:{closed_port()}"
    settings = ServiceSettings(model_uri=URI, tracking_uri=uri, poll_interval_s=30)
    started = time.monotonic()
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        wait_until(lambda: client.get("/readyz").json().get("error", "loading the model") != "loading the model", 10)
        elapsed = time.monotonic() - started
        error = client.get("/readyz").json()["error"]
        assert "\n" not in error and uri in error and "did not answer" in error, error
        assert client.get("/healthz").status_code == 200
    assert elapsed < 10
    # MLflow's own HTTP calls are bounded in the serving process too (unless the user set them).
    import os

    bounds = [os.environ.pop(name, None) for name in ("MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES")]
    assert bounds == ["10", "2"]
