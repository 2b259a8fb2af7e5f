"""The Python API `perfmodel.predict(config, **overrides)`: a mapping, YAML text or a path gives
what the CLI gives for the same file and flags (the CLI's `--json` is the oracle)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import perfmodel
from perfmodel.api import predict_document
from perfmodel.cli import main as cli_main
from perfmodel.errors import CatalogError, ConfigError, PerfModelError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama2-7b-lora.yaml"
LUDWIG = ROOT / "examples" / "ludwig-llama2-7b-qlora.yaml"
TOO_BIG = {
    "model": {"name": "llama2-70b"},
    "training": {"seq_len": 4096, "micro_batch_size": 8, "tokens": 1e9},
    "hardware": {"gpu": "A100-80GB", "num_gpus": 1},
}


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    capsys.readouterr()
    cli_main(["predict", *args, "--json"])
    return json.loads(capsys.readouterr().out)


def test_import_perfmodel_loads_nothing_heavy():
    code = (
        "import sys, perfmodel, perfmodel.api; callable(perfmodel.predict); "
        "print([m for m in ('torch', 'mlflow', 'lightgbm', 'pandas', 'fastapi', 'sklearn') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("form", ["path", "str path", "mapping", "yaml text"])
def test_every_form_of_a_config_predicts_what_the_cli_prints(form, capsys):
    text = EXAMPLE.read_text()
    config = {"path": EXAMPLE, "str path": str(EXAMPLE), "mapping": yaml.safe_load(text), "yaml text": text}[
        form
    ]
    expected = cli_json(
        capsys,
        "--config",
        str(EXAMPLE),
        *"--gpu H100-SXM --num-gpus 2 --set training.micro_batch_size=4".split(),
    )
    got = predict_document(config, gpu="H100-SXM", num_gpus=2, set={"training.micro_batch_size": 4})
    assert json.loads(json.dumps(got)) == expected
    run = perfmodel.predict(config, gpu="H100-SXM", num_gpus=2, set={"training.micro_batch_size": 4})
    assert json.loads(json.dumps(run.to_json())) == {
        k: v for k, v in expected.items() if k != "fit_suggestions"
    }


def test_a_run_that_does_not_fit_carries_the_cli_fit_suggestions(capsys, tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(TOO_BIG))
    expected = cli_json(capsys, "--config", str(path))
    assert expected["fits_in_memory"] is False and expected["fit_suggestions"]
    assert json.loads(json.dumps(predict_document(TOO_BIG))) == expected


def test_ludwig_yaml_text_with_rows_matches_the_cli(capsys):
    expected = cli_json(capsys, "--config", str(LUDWIG), "--rows", "20000", "--gpu", "L4")
    got = predict_document(LUDWIG.read_text(), rows=20000, gpu="L4")
    assert json.loads(json.dumps(got)) == expected


@pytest.mark.parametrize(
    "kwargs",
    [
        {"set": {"training.micro_batch_size": 16, "hardware.strategy": "fsdp"}},
        {"set": ["training.micro_batch_size=16", "hardware.strategy=fsdp"]},
        {"training__micro_batch_size": 16, "hardware__strategy": "fsdp"},
        {"training.micro_batch_size": 16, "hardware.strategy": "fsdp"},
    ],
    ids=["set mapping", "set strings", "double underscore", "dotted keywords"],
)
def test_overrides_in_every_spelling_reach_the_workload(kwargs):
    run = perfmodel.predict(EXAMPLE, num_gpus=4, **kwargs)
    assert run.workload.training.micro_batch_size == 16
    assert run.workload.parallel.strategy == "fsdp"
    assert run.workload.parallel.num_gpus == 4


def test_string_values_stay_strings_and_the_mapping_is_not_changed():
    config = yaml.safe_load(EXAMPLE.read_text())
    before = json.dumps(config, sort_keys=True)
    run = perfmodel.predict(config, set={"training.precision": "fp16"}, gpu="H100-SXM")
    assert run.workload.training.precision == "fp16" and run.workload.gpu.name == "H100-SXM"
    assert json.dumps(config, sort_keys=True) == before


def test_the_public_function_and_the_internal_predictor_agree():
    import perfmodel.prediction as module
    from perfmodel.prediction import PredictedRun

    run = perfmodel.predict(EXAMPLE)
    assert isinstance(run, PredictedRun)
    assert module.predict(run.workload).step_time_s == run.step_time_s  # the internal function, same answer
    from perfmodel import predict

    assert predict(EXAMPLE).total_steps == run.total_steps


def test_errors_are_the_cli_one_liners(capsys):
    cases = [
        (dict(config=EXAMPLE, gpu="H900"), CatalogError, "H900"),
        (dict(config=EXAMPLE, set={"training.no_such_key": 1}), ConfigError, "no_such_key"),
        (
            dict(config=EXAMPLE, set={"training.micro_batch_size": 4}, training__micro_batch_size=8),
            ConfigError,
            "twice",
        ),
        (dict(config=EXAMPLE, tokens=1e9, rows=10), ConfigError, "only one of"),
        (dict(config=str(EXAMPLE) + ".missing.yaml"), ConfigError, "does not exist"),
        (dict(config="model: [1, 2"), ConfigError, "not valid YAML"),
        (dict(config="a: 1\na: 2\n"), ConfigError, "duplicate key"),
        (dict(config="- just\n- a list\n"), ConfigError, "mapping"),
        (dict(config=LUDWIG.read_text()), ConfigError, "--rows"),
        (dict(config=None), ConfigError, "give a config"),
        (dict(config=42), ConfigError, "mapping, YAML text or a path"),
        (dict(config=EXAMPLE, set={"training.seq_len": float("nan")}), ConfigError, "finite"),
    ]
    for kwargs, kind, words in cases:
        config = kwargs.pop("config")
        with pytest.raises(kind) as info:
            perfmodel.predict(config, **kwargs)
        assert isinstance(info.value, PerfModelError)
        assert words in str(info.value), (kwargs, str(info.value))
        assert len(str(info.value).splitlines()) == 1


def test_an_alias_bomb_in_yaml_text_is_refused_before_it_expands():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    with pytest.raises(ConfigError, match="alias"):
        perfmodel.predict("\n".join(lines) + "\n")


def test_config_text_over_the_limit_is_refused():
    from perfmodel.config.from_text import MAX_TEXT_CHARS, parse_config_text

    with pytest.raises(ConfigError, match="limit"):
        parse_config_text("# " + "x" * MAX_TEXT_CHARS + "\nmodel: {name: llama2-7b}\n")
