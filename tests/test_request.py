"""One request, one way in (perfmodel/request.py, perfmodel/config/source.py): `perfmodel
predict`, `perfmodel sweep`, the HTTP API and `perfmodel.predict` give the same answer for the
same request, relative paths resolve by one rule wherever they are given, and the options are
defined once (the CLI's flags and the service's fields come from `OPTIONS`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import typer.main
from fastapi.testclient import TestClient

import perfmodel
from perfmodel import api
from perfmodel.cli import app
from perfmodel.cli import main as cli_main
from perfmodel.config.source import named_paths
from perfmodel.decide.outcome import Outcome
from perfmodel.errors import ConfigError
from perfmodel.request import OPTIONS, RunRequest
from perfmodel.service import requests as rq
from perfmodel.service.app import create_app

ROOT = Path(__file__).resolve().parents[1]
CONFIG = """\
model: {name: gpt2}
training: {seq_len: 128, micro_batch_size: 4, precision: bf16}
hardware: {gpu: A100-80GB}
"""


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """A config in conf/ and two data files both named rows.csv: 300 rows beside the config, 50
    in the current directory. An option's relative path must mean the current directory's."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "run.yaml").write_text(CONFIG)
    (conf / "rows.csv").write_text("text\n" + "".join(f"a longer sample number {i}\n" for i in range(300)))
    (tmp_path / "rows.csv").write_text("text\n" + "".join(f"sample {i}\n" for i in range(50)))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def as_json(doc: dict) -> dict:
    """A document as it is printed (tuples become lists)."""
    return json.loads(json.dumps(doc))


def cli(capsys, *args: str) -> dict:
    capsys.readouterr()
    try:
        cli_main(list(args))
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


SET_DATASET = ("--set", "training.dataset=rows.csv", "--set", "training.micro_batch_size=2")


def test_predict_sweep_and_the_python_api_agree_on_a_relative_set_path(folders, capsys):
    doc = cli(capsys, "predict", "--config", "conf/run.yaml", *SET_DATASET, "--gpu", "H100-SXM", "--json")
    assert doc["workload"]["training"]["samples"] == 50  # the current directory's rows.csv
    listed = ["training.dataset=rows.csv", "training.micro_batch_size=2"]
    assert doc == as_json(api.predict_document("conf/run.yaml", gpu="H100-SXM", set=listed))
    keywords = {"training__dataset": "rows.csv", "training.micro_batch_size": 2}
    assert doc == as_json(api.predict_document("conf/run.yaml", gpu="H100-SXM", **keywords))
    swept = cli(
        capsys,
        "sweep",
        "--config",
        "conf/run.yaml",
        *SET_DATASET,
        "--vary",
        "hardware.gpu=H100-SXM",
        "--json",
    )
    (point,) = swept["points"]
    run = perfmodel.predict("conf/run.yaml", gpu="H100-SXM", set={"training.dataset": "rows.csv",
                            "training.micro_batch_size": 2})  # fmt: skip
    assert {k: v for k, v in point.items() if k not in ("values", "error", "adjusted")} == Outcome.of(run).to_json()
    assert point["total_time_s"] == doc["total_time_s"] and point["total_steps"] == doc["total_steps"]


def test_a_relative_path_in_a_vary_value_is_the_current_directorys_too(folders, capsys):
    swept = cli(capsys, "sweep", "--config", "conf/run.yaml", "--vary", "training.dataset=rows.csv", "--json")
    (point,) = swept["points"]
    doc = cli(capsys, "predict", "--config", "conf/run.yaml", "--set", "training.dataset=rows.csv", "--json")
    assert point["total_steps"] == doc["total_steps"] == -(-50 // 4)


def test_a_path_written_in_the_config_file_is_the_config_folders(folders, capsys):
    (folders / "conf" / "own.yaml").write_text(
        CONFIG.replace("precision: bf16", "precision: bf16, dataset: rows.csv")
    )
    doc = cli(capsys, "predict", "--config", "conf/own.yaml", "--json")
    assert doc["workload"]["training"]["samples"] == 300  # beside the config, not the current directory's
    assert doc == as_json(api.predict_document(folders / "conf" / "own.yaml"))


def test_the_service_answers_a_request_as_predict_and_the_api_do(capsys):
    example = ROOT / "examples" / "llama2-7b-lora.yaml"
    args = ("--num-gpus", "2", "--set", "hardware.strategy=fsdp", "--tokens", "1e9", "--price", "3.5")
    doc = cli(capsys, "predict", "--config", str(example), *args, "--confidence", "0.8", "--json")
    body = {"config": example.read_text(), "num_gpus": 2, "set": {"hardware.strategy": "fsdp"},
            "tokens": 1e9, "price_per_gpu_hour": 3.5, "confidence": 0.8}  # fmt: skip
    with TestClient(create_app(), raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        response = client.post("/v1/predict", json=body)
    assert response.status_code == 200, response.text
    assert {k: v for k, v in response.json().items() if k != "display"} == doc  # + the page's strings
    options = {k: v for k, v in body.items() if k != "config"}
    assert as_json(api.predict_document(example.read_text(), **options)) == doc  # YAML text, as served
    assert as_json(api.predict_document(RunRequest.of(example, **options))) == doc


def test_every_request_option_is_a_flag_of_predict_and_a_field_of_the_service_with_its_help():
    command = typer.main.get_command(app).commands["predict"]  # type: ignore[attr-defined]
    flags = {name: p for p in command.params for name in p.opts}
    for option in OPTIONS:
        assert all(flag in flags for flag in option.flags), option.name
        assert flags[option.flags[0]].help == option.help
    fields = rq.RunRequest.model_fields
    served = [o for o in OPTIONS if o.name not in rq.SERVER_OPTIONS and o.shared]
    assert "memory" not in fields  # --memory exact runs the oracle (seconds of CPU): predict's, not served
    assert sorted(fields) == sorted(["config", *(o.name for o in served)])
    for option in served:
        assert (fields[option.name].alias or option.name) == option.key
        assert fields[option.name].default == (None if option.kind is list else option.default)
        if option.kind is not list:
            assert fields[option.name].description == option.help
    assert set(rq.CompareRequest.model_fields) == {"configs", *(o.name for o in served)}


def test_a_request_from_keywords_collects_changes_in_order_and_refuses_a_key_twice():
    request = RunRequest.of(
        "run.yaml", gpu="L4", set={"training.seq_len": 1024}, training__micro_batch_size=2
    )
    assert request.overrides == ("training.seq_len=1024", "training.micro_batch_size=2")
    assert RunRequest.of(request, use_learned=False, tokens=5e8).analytic
    assert RunRequest.of(request, tokens=5e8).overrides == request.overrides
    with pytest.raises(ConfigError, match="given twice"):
        RunRequest.of(None, set={"training.seq_len": 1}, training__seq_len=2)
    with pytest.raises(ConfigError, match="not both"):
        RunRequest.of(None, model_dir="m", model_uri="models:/x@champion")


def test_named_paths_are_every_file_a_request_names_made_absolute(tmp_path):
    request = RunRequest.of("conf/run.yaml", dataset="d.csv", set=["model.path=../m", "training.seq_len=8"])
    assert named_paths(request, cwd=tmp_path) == [
        ("config", tmp_path / "conf" / "run.yaml"),
        ("dataset", tmp_path / "d.csv"),
        ("model.path", tmp_path / ".." / "m"),
    ]
    assert named_paths(RunRequest.of(CONFIG)) == []  # YAML text names no file
    assert named_paths(RunRequest.of(None, set={"training.dataset": os.sep + "abs.csv"})) == [
        ("training.dataset", Path(os.sep + "abs.csv"))
    ]
