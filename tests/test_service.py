"""The HTTP API through FastAPI's TestClient: every endpoint, the `--json` contract (the CLI's own
output is the oracle), the 4xx answers with the CLI's one-line messages, limits, and that nothing
unexpected leaks a traceback."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from perfmodel.cli import main as cli_main
from perfmodel.service import app as service_app
from perfmodel.service.app import create_app
from perfmodel.service.settings import ServiceSettings

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama2-7b-lora.yaml"
LUDWIG = ROOT / "examples" / "ludwig-llama2-7b-qlora.yaml"
CONTRACT_INTERVALS = (
    "throughput_tokens_per_s",
    "throughput_samples_per_s",
    "step_time_s",
    "total_time_s",
    "gpu_hours",
    "peak_memory_gb",
)
CONTRACT_KEYS = {
    *CONTRACT_INTERVALS,
    "confidence_level",
    "total_steps",
    "fits_in_memory",
    "model",
    "workload",
    "hardware",
    "warnings",
}


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(), raise_server_exceptions=False, base_url="http://127.0.0.1") as c:
        yield c


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    capsys.readouterr()
    cli_main(["predict", *args, "--json"])
    return json.loads(capsys.readouterr().out)


def cli_text(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    cli_main(["predict", *args])
    return capsys.readouterr().out


def error_of(response) -> str:
    body = response.json()
    assert set(body) == {"error", "status"} and body["status"] == response.status_code
    assert "Traceback" not in body["error"] and "\n" not in body["error"]
    return body["error"]


# --- the contract -------------------------------------------------------------------------------


def test_predict_answers_what_the_cli_prints(client, capsys):
    flags = "--gpu H100-SXM --num-gpus 2 --set training.micro_batch_size=4 --tokens 2e9"
    expected = cli_json(capsys, "--config", str(EXAMPLE), *flags.split())
    response = client.post(
        "/v1/predict",
        json={
            "config": EXAMPLE.read_text(),
            "gpu": "H100-SXM",
            "num_gpus": 2,
            "set": {"training.micro_batch_size": 4},
            "tokens": 2e9,
        },
    )
    assert response.status_code == 200, response.text
    data = response.json()
    shown = data.pop("display")  # the service's addition: the CLI's strings for the page
    assert data == expected
    assert shown["total_time"] in cli_text(capsys, "--config", str(EXAMPLE), *flags.split())
    assert CONTRACT_KEYS <= set(data)
    for key in CONTRACT_INTERVALS:
        assert 0 < data[key]["low"] <= data[key]["estimate"] <= data[key]["high"], key
    assert set(data["model"]) >= {"kind", "version", "trained_rows"}


def test_a_json_config_object_and_a_yaml_body_give_the_same_answer(client):
    config = yaml.safe_load(EXAMPLE.read_text())
    as_object = client.post(
        "/v1/predict", json={"config": config, "gpu": "L40S", "set": ["training.seq_len=1024"]}
    )
    as_yaml = client.post(
        "/v1/predict",
        content=EXAMPLE.read_text(),
        headers={"Content-Type": "application/yaml"},
        params=[("gpu", "L40S"), ("set", "training.seq_len=1024")],
    )
    assert as_object.status_code == as_yaml.status_code == 200, (as_object.text, as_yaml.text)
    assert as_object.json() == as_yaml.json()
    assert as_yaml.json()["hardware"]["name"] == "L40S"
    assert as_yaml.json()["workload"]["training"]["seq_len"] == 1024


def test_a_ludwig_config_with_rows_is_answered_like_the_cli(client, capsys):
    expected = cli_json(capsys, "--config", str(LUDWIG), "--rows", "50000")
    response = client.post("/v1/predict", json={"config": LUDWIG.read_text(), "rows": 50000})
    assert response.status_code == 200, response.text
    assert {k: v for k, v in response.json().items() if k != "display"} == expected


def test_a_repeated_request_is_served_from_the_cache_with_the_same_body(client):
    body = {"config": EXAMPLE.read_text(), "gpu": "A10G", "tokens": 3.3e8}
    first = client.post("/v1/predict", json=body)
    second = client.post("/v1/predict", json=body)
    assert first.headers["X-Perfmodel-Cache"] == "miss" and second.headers["X-Perfmodel-Cache"] == "hit"
    assert first.content == second.content


@pytest.mark.slow
def test_sweep_advise_and_compare_answer_their_cli_documents(client, capsys):
    vary = [1, 2, 4, 8]
    sweep = client.post(
        "/v1/sweep", json={"config": EXAMPLE.read_text(), "vary": {"training.micro_batch_size": vary}}
    )
    assert sweep.status_code == 200, sweep.text
    capsys.readouterr()
    cli_main(["sweep", "--config", str(EXAMPLE), "--vary", "training.micro_batch_size=1,2,4,8", "--json"])
    expected = json.loads(capsys.readouterr().out)
    got = sweep.json()
    assert [p["values"]["training.micro_batch_size"] for p in got["points"]] == vary
    assert [p["total_time_s"] for p in got["points"]] == [p["total_time_s"] for p in expected["points"]]

    advise = client.post("/v1/advise", json={"config": EXAMPLE.read_text(), "deadline_s": 36000, "top": 2})
    assert advise.status_code == 200, advise.text
    assert advise.json()["constraints"]["deadline_s"] == 36000

    other = (ROOT / "examples" / "llama3-8b-pretrain-fsdp.yaml").read_text()
    compare = client.post("/v1/compare", json={"configs": [EXAMPLE.read_text(), other]})
    assert compare.status_code == 200, compare.text
    assert len(compare.json()["runs"]) == 2


def test_catalogs_model_health_docs_and_page(client):
    gpus = client.get("/v1/gpus").json()
    names = {g["name"] for g in gpus}
    assert {"A100-80GB", "H100-SXM"} <= names
    a100 = next(g for g in gpus if g["name"] == "A100-80GB")
    assert a100["memory_gb"] == 80 and a100["price_per_gpu_hour"]["usd"] > 0
    models = {m["name"]: m for m in client.get("/v1/models").json()}
    assert 6.5e9 < models["llama2-7b"]["params_total"] < 7.0e9  # Llama-2-7B: 6.74 B published
    shipped = json.loads((ROOT / "models" / "metadata.json").read_text())
    served = client.get("/v1/model").json()["model"]
    assert served["kind"] == "learned"
    assert served["run_id"] == shipped["run_id"] and served["trained_rows"] == shipped["trained_rows"]
    assert served["dataset_sha256"] == shipped["dataset_sha256"] and served["version"] == str(
        shipped["version"]
    )
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/v1/predict",
        "/v1/sweep",
        "/v1/advise",
        "/v1/compare",
        "/v1/gpus",
        "/v1/models",
        "/v1/model",
    } <= set(paths)
    assert "application/yaml" in paths["/v1/predict"]["post"]["requestBody"]["content"]
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'id="go"' in page.text and "/static/app.js" in page.text
    script = client.get("/static/app.js")
    assert script.status_code == 200 and "/v1/predict" in script.text
    for remote in ('src="http', 'href="http', "@import"):  # nothing from a CDN: the page works offline
        assert remote not in page.text
    assert client.get("/static/style.css").status_code == 200
    assert 'fetch("http' not in script.text and "fetch('http" not in script.text


# --- 4xx -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"config": "model: [1, 2"}, 400, "not valid YAML"),
        ({"config": "a: 1\na: 2\n"}, 400, "duplicate key"),
        ({"config": EXAMPLE.read_text(), "gpu": "H900"}, 422, "H900"),
        ({"config": EXAMPLE.read_text(), "set": {"training.no_such_key": 1}}, 422, "no_such_key"),
        ({"config": EXAMPLE.read_text(), "num_gpus": "eight"}, 422, "num_gpus"),
        ({"config": EXAMPLE.read_text(), "tokens": -5}, 422, "--tokens must be > 0"),
        ({"config": EXAMPLE.read_text(), "surprise": 1}, 422, "surprise is not a field"),
        ({"config": LUDWIG.read_text()}, 422, "pass rows"),
        (
            {"config": {"model": {"name": "llama2-7b"}, "hardware": {"gpu": "A100-80GB"}}},
            422,
            "pass tokens or rows",
        ),
    ],
    ids=[
        "malformed yaml",
        "duplicate key",
        "unknown gpu",
        "unknown key",
        "wrong type",
        "negative tokens",
        "unknown field",
        "ludwig without data",
        "native without data",
    ],
)
def test_bad_input_is_a_4xx_with_one_line(client, body, status, words):
    response = client.post("/v1/predict", json=body)
    assert response.status_code == status, response.text
    assert words in error_of(response)


def test_the_ludwig_message_says_rows_or_tokens_in_the_api_words(client):
    message = error_of(client.post("/v1/predict", json={"config": LUDWIG.read_text()}))
    assert "rows" in message and "tokens" in message and "--" not in message


def test_unreadable_bodies(client):
    assert (
        client.post("/v1/predict", content=b"{", headers={"Content-Type": "application/json"}).status_code
        == 400
    )
    assert (
        client.post("/v1/predict", content=b"[1]", headers={"Content-Type": "application/json"}).status_code
        == 400
    )
    wrong = client.post("/v1/predict", content=b"\x89PNG", headers={"Content-Type": "image/png"})
    assert wrong.status_code == 415 and "application/json" in error_of(wrong)


def test_bodies_over_one_megabyte_are_refused(client):
    big = json.dumps({"config": "# " + "x" * 1_100_000}).encode()
    response = client.post("/v1/predict", content=big, headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and "1,000,000" in error_of(response)

    def chunks():  # no Content-Length: counted while read
        for _ in range(12):
            yield b" " * 100_000

    chunked = client.post("/v1/predict", content=chunks(), headers={"Content-Type": "application/json"})
    assert chunked.status_code == 413
    assert (
        client.post("/v1/predict", json={"config": EXAMPLE.read_text()}).status_code == 200
    )  # still serving


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"config": EXAMPLE.read_text(), "dataset": "/etc/passwd"}, "pass rows"),
        ({"config": {"model": {"path": "/etc"}, "training": {"tokens": 1e9}}}, "model.path"),
        (
            {"config": {"model": {"name": "llama2-7b"}, "training": {"tokens": 1e9, "dataset": "train.csv"}}},
            "training.dataset",
        ),
        ({"config": EXAMPLE.read_text(), "set": {"model.name": "/etc/hf/config.json"}}, "is a path"),
        ({"config": EXAMPLE.read_text(), "set": ["training.dataset=data.csv"]}, "training.dataset"),
        (
            {"config": LUDWIG.read_text().replace("meta-llama/Llama-2-7b-hf", "~/models/llama"), "rows": 10},
            "base_model",
        ),
        ({"config": {"model": {"name": "../../secret"}, "training": {"tokens": 1e9}}}, "is a path"),
    ],
    ids=[
        "dataset field",
        "model.path",
        "training.dataset",
        "absolute name",
        "dataset override",
        "ludwig home path",
        "dot-dot",
    ],
)
def test_server_side_paths_are_never_read(client, body, words):
    response = client.post("/v1/predict", json=body)
    assert response.status_code == 422, response.text
    assert words in error_of(response)


def test_a_model_name_that_is_a_folder_of_the_server_is_refused(client, tmp_path, monkeypatch):
    (tmp_path / "private-model").mkdir()
    (tmp_path / "private-model" / "config.json").write_text(
        json.dumps({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 100})
    )
    monkeypatch.chdir(tmp_path)
    body = {"config": {"model": {"name": "private-model"}, "training": {"tokens": 1e9}}}
    response = client.post("/v1/predict", json=body)
    assert response.status_code == 422 and "is a path" in error_of(response)


def test_a_sweep_larger_than_the_server_allows_is_refused(client):
    body = {
        "config": EXAMPLE.read_text(),
        "vary": {
            "training.micro_batch_size": list(range(1, 17)),
            "training.seq_len": list(range(128, 128 * 18, 128)),
        },
    }
    response = client.post("/v1/sweep", json=body)
    assert response.status_code == 422 and "at most 256" in error_of(response)


# --- failures that are not the user's --------------------------------------------------------


def test_an_unexpected_error_is_a_500_without_a_traceback(client, monkeypatch):
    def broken(req, model, *args):
        raise RuntimeError("secret detail from /srv/internal/path")

    monkeypatch.setattr(service_app, "predict_job", broken)
    response = client.post("/v1/predict", json={"config": EXAMPLE.read_text(), "gpu": "V100-SXM2-32GB"})
    assert response.status_code == 500
    message = error_of(response)
    assert "secret" not in message and "/srv" not in message and "reference" in message


def test_a_request_over_the_time_limit_is_a_503_and_the_server_keeps_serving(monkeypatch):
    real = service_app.predict_job

    def slow(req, model, *args):
        if req.gpu == "slow":
            time.sleep(2)
        return real(req, model, *args)

    monkeypatch.setattr(service_app, "predict_job", slow)
    # every request to the worker threads, where the time limit holds (small predictions are inline)
    with TestClient(create_app(ServiceSettings(request_timeout_s=0.3, inline_max_body_bytes=0)), base_url="http://127.0.0.1") as c:
        started = time.monotonic()
        response = c.post("/v1/predict", json={"config": EXAMPLE.read_text(), "gpu": "slow"})
        assert time.monotonic() - started < 1.5
        assert response.status_code == 503 and "0.3 s" in error_of(response)
        assert c.post("/v1/predict", json={"config": EXAMPLE.read_text()}).status_code == 200


def test_a_slow_sweep_is_cut_at_the_time_limit_with_the_default_settings(monkeypatch):
    def slow(req, model, max_points, *args):
        time.sleep(2)
        raise AssertionError("the sweep should have been abandoned")

    monkeypatch.setattr(service_app, "sweep_job", slow)
    with TestClient(create_app(ServiceSettings(request_timeout_s=0.3)), base_url="http://127.0.0.1") as c:
        started = time.monotonic()
        body = {"config": EXAMPLE.read_text(), "vary": {"training.micro_batch_size": [1, 2]}}
        response = c.post("/v1/sweep", json=body)
        assert time.monotonic() - started < 1.5
        assert response.status_code == 503 and "0.3 s" in error_of(response)


@pytest.mark.parametrize(("padding", "inline"), [(0, True), (9000, False)])
def test_a_small_prediction_is_computed_on_the_event_loop_and_a_large_one_in_a_thread(
    monkeypatch, padding, inline
):
    real, where = service_app.predict_job, []

    def spy(req, model, *args):
        where.append(threading.get_ident())
        return real(req, model, *args)

    monkeypatch.setattr(service_app, "predict_job", spy)
    app = create_app()

    @app.get("/loop-thread")
    async def loop_thread() -> dict[str, int]:
        return {"ident": threading.get_ident()}

    with TestClient(app, base_url="http://127.0.0.1") as c:
        config = EXAMPLE.read_text() + "#" * padding + "\n"  # a comment: the same run, a larger body
        response = c.post("/v1/predict", json={"config": config})
        assert response.status_code == 200, response.text
        assert (where[0] == c.get("/loop-thread").json()["ident"]) is inline


def test_serve_refuses_two_model_sources_as_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["serve", "--model-dir", "models", "--model-uri", "models:/perfmodel-throughput@champion"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["serve", "--model-uri", "runs:/abc/model"])
    assert exit_info.value.code == 2


def test_serve_hands_every_worker_process_its_settings(monkeypatch, tmp_path):
    import uvicorn

    from perfmodel.service.settings import ENV_VAR

    calls = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append((app, kw)))
    monkeypatch.delenv(ENV_VAR, raising=False)
    cli_main(
        [
            "serve",
            "--workers",
            "3",
            "--model-dir",
            str(tmp_path),
            "--request-timeout-s",
            "7",
            "--port",
            "8123",
        ]
    )
    ((app, kw),) = calls
    assert kw["workers"] == 3 and kw["factory"] is True and kw["port"] == 8123
    assert app == "perfmodel.service.app:app_from_env"
    sent = ServiceSettings.from_json(os.environ[ENV_VAR])  # what each worker builds its app from
    assert sent == ServiceSettings(model_dir=tmp_path, request_timeout_s=7.0)
    monkeypatch.setenv(ENV_VAR, ServiceSettings(max_sweep_points=3, cache_bytes=0).to_json())
    with TestClient(service_app.app_from_env(), base_url="http://127.0.0.1") as c:
        body = {"config": EXAMPLE.read_text(), "vary": {"training.micro_batch_size": [1, 2, 4, 8]}}
        refused = c.post("/v1/sweep", json=body)
        assert refused.status_code == 422 and "3" in error_of(refused)  # over this worker's 3 points
        asked = [c.post("/v1/predict", json={"config": EXAMPLE.read_text()}) for _ in range(2)]
        assert [a.headers["X-Perfmodel-Cache"] for a in asked] == ["miss", "miss"]  # its cache is off


def test_serve_hands_the_data_folder_and_the_host_names_to_its_workers(monkeypatch, tmp_path, capsys):
    import uvicorn

    from perfmodel.service.settings import ENV_VAR, LOOPBACK_HOSTS

    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: None)
    monkeypatch.delenv(ENV_VAR, raising=False)
    cli_main(["serve", "--host", "10.1.2.3", "--data-dir", str(tmp_path), "--allowed-host", "perf.corp.example"])
    sent = ServiceSettings.from_json(os.environ[ENV_VAR])
    assert sent.data_dir == tmp_path
    assert sent.allowed_hosts == (*LOOPBACK_HOSTS, "10.1.2.3", "perf.corp.example")
    capsys.readouterr()
    cli_main(["serve", "--host", "0.0.0.0"])  # a wildcard address is no name a client sends
    assert ServiceSettings.from_json(os.environ[ENV_VAR]).allowed_hosts == LOOPBACK_HOSTS
    assert "--allowed-host" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["serve", "--data-dir", str(tmp_path / "missing")])
    assert exit_info.value.code == 2


def test_serve_refuses_zero_workers():
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["serve", "--workers", "0"])
    assert exit_info.value.code == 2


@pytest.mark.slow
def test_perfmodel_serve_starts_a_server_that_answers(tmp_path):
    import os
    import socket
    import subprocess
    import sys

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        # two processes: each builds its app from the settings the command hands it
        [
            sys.executable,
            "-m",
            "perfmodel",
            "serve",
            "--port",
            str(port),
            "--workers",
            "2",
            "--no-access-log",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PERFMODEL_MODEL_DIR": str(ROOT / "models")},
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not become ready"
            time.sleep(0.2)
        answer = httpx.post(
            f"http://127.0.0.1:{port}/v1/predict",
            content=EXAMPLE.read_text(),
            headers={"Content-Type": "application/yaml"},
            params={"gpu": "H100-SXM"},
            timeout=60,
        )
        assert answer.status_code == 200 and answer.json()["hardware"]["name"] == "H100-SXM"
        assert answer.json()["model"]["kind"] == "learned"
    finally:
        server.terminate()
        server.wait(timeout=30)
