"""Ludwig's verdict on a config: perfmodel's rules (no Ludwig), `perfmodel check-ludwig`, and -- where
real Ludwig is installed (marker `ludwig`) -- Ludwig's own ModelConfig.

The expected reasons are Ludwig 0.17.10's own messages (ludwig/config_validation/checks.py and the
JSON-schema errors it raised on the shared configs, datasets/heldout/ludwig-lab/lab/golden_schema.json), not
perfmodel's: the oracle is what Ludwig says.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from perfmodel.config.ludwig_schema import check_ludwig, own_verdict
from perfmodel.config.ludwig_venv import ENV_PYTHON, ludwig_python

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "ludwig-configs"
TAB = {
    "input_features": [{"name": "a", "type": "number"}],
    "output_features": [{"name": "y", "type": "binary"}],
}
LLM = {
    "model_type": "llm",
    "base_model": "llama2-7b",
    "input_features": [{"name": "q", "type": "text"}],
    "output_features": [{"name": "a", "type": "text"}],
    "trainer": {"type": "finetune"},
}


def with_(base: dict, **changes: object) -> dict:
    return {**json.loads(json.dumps(base)), **changes}


@pytest.mark.parametrize(
    "cfg,check,reason",
    [
        (
            with_(TAB, model_type="gbm"),
            "model_type",
            "Invalid model type: 'gbm', expected one of: ['ecd', 'llm']",
        ),
        (
            with_(LLM, input_features=[{"name": "img", "type": "image"}]),
            "schema",
            "'image' is not one of ['text']",
        ),
        (
            with_(
                TAB,
                input_features=[
                    {"name": "t", "type": "text", "encoder": {"type": "auto_transformer", "adapter": "lora"}}
                ],
            ),
            "schema",
            "'lora' is not valid under any of the given schemas",
        ),
        (with_(TAB, input_features=None), "schema", "input_features must be a non-empty list"),
        (with_(TAB, output_features=[]), "schema", "output_features must be a non-empty list"),
        (
            with_(TAB, input_features=[{"name": "x", "type": "wibble"}]),
            "schema",
            "'wibble' is not one of ['audio', 'bag', 'binary'",
        ),
        (
            with_(TAB, output_features=[{"name": "a", "type": "binary"}]),
            "check_feature_names_unique",
            "Feature names must be unique.",
        ),
        (
            with_(TAB, input_features=[{"name": "a", "type": "number", "tied": "b"}]),
            "check_tied_features_valid",
            "Feature a is tied to feature b, but the 'b' feature does not exist.",
        ),
        (
            with_(TAB, trainer={"checkpoints_per_epoch": 2, "steps_per_checkpoint": 5}),
            "check_training_runway",
            "It is invalid to specify both trainer.checkpoints_per_epoch AND trainer.steps_per_checkpoint.",
        ),
        (
            with_(LLM, output_features=[{"name": "a", "type": "category"}]),
            "check_llm_finetuning_output_feature_config",
            "LLM finetuning requires the output feature to be a text feature.",
        ),
        (
            with_(LLM, adapter={"type": "lora"}, trainer={"type": "dpo"}),
            "check_llm_finetuning_trainer_config",
            "LLM finetuning requires trainer type to be finetune.",
        ),
        (
            with_(LLM, quantization={"bits": 4}),
            "check_qlora_requirements",
            "Fine-tuning and LLM with quantization requires using the 'lora' adapter",
        ),
        (
            with_(LLM, adapter={"type": "lora"}, quantization={"bits": 4}, backend={"type": "ray"}),
            "check_llm_quantization_backend_incompatibility",
            "LLM with quantization requires the 'local' backend, found: 'ray'",
        ),
        (
            with_(
                TAB,
                input_features=[{"name": "t", "type": "text", "encoder": {"type": "bert"}}],
                output_features=[{"name": "o", "type": "text"}],
            ),
            "check_llm_text_encoder_is_not_used_with_ecd",
            "Please use the `model_type: llm` for text-to-text models.",
        ),
        (
            with_(TAB, preprocessing={"sample_ratio": 0.5, "sample_size": 100}),
            "check_sample_ratio_and_size_compatible",
            "sample_size cannot be used when sample_ratio < 1.0",
        ),
    ],
)
def test_each_rule_refuses_with_ludwigs_own_reason(cfg, check, reason):
    verdict = own_verdict(cfg)
    assert verdict.valid is False and verdict.check == check and reason in verdict.reason


@pytest.mark.parametrize(
    "cfg",
    [
        TAB,
        # Ludwig's own resolved configs carry `adapter: null` in every ECD encoder (a real run's callback gets one)
        with_(
            TAB,
            input_features=[
                {"name": "t", "type": "text", "encoder": {"type": "parallel_cnn", "adapter": None}}
            ],
        ),
        # zero-shot with pretrained adapter weights is allowed (check_llm_finetuning_trainer_config)
        with_(LLM, adapter={"type": "lora", "pretrained_adapter_weights": "x/y"}, trainer={"type": "none"}),
        # text-to-text with Ludwig's own (not pretrained) text encoder is fine for ECD
        with_(
            TAB,
            input_features=[{"name": "t", "type": "text"}],
            output_features=[{"name": "o", "type": "text"}],
        ),
        with_(LLM, adapter={"type": "lora"}, quantization={"bits": 4}),
    ],
)
def test_configs_ludwig_accepts_pass(cfg):
    assert own_verdict(cfg).valid is True


def test_without_ludwig_the_rules_answer_and_say_so(monkeypatch):
    monkeypatch.setenv(ENV_PYTHON, "/nonexistent/python")
    monkeypatch.setenv("LUDWIG_VENV", "/nonexistent/venv")
    monkeypatch.setattr("perfmodel.config.ludwig_schema.ludwig_in_process", lambda: False)
    verdict = check_ludwig(with_(TAB, model_type="gbm"))
    assert verdict.valid is False and verdict.is_gbm and "perfmodel's rules" in verdict.judge
    from perfmodel.errors import ConfigError

    with pytest.raises(ConfigError, match="make ludwig-env"):
        check_ludwig(TAB, use_ludwig="require")


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "perfmodel", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        check=False,
        timeout=120,
    )


@pytest.mark.slow
def test_check_ludwig_command_exit_status_and_json(tmp_path):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(yaml.safe_dump(TAB))
    bad.write_text(yaml.safe_dump(with_(LLM, adapter={"type": "lora"}, trainer={"type": "dpo"})))
    ok = _cli("check-ludwig", str(good), "--ludwig", "never")
    assert ok.returncode == 0 and "valid by perfmodel's rules for Ludwig 0.17.10" in ok.stdout
    refused = _cli("check-ludwig", str(bad), "--ludwig", "never", "--json")
    data = json.loads(refused.stdout)
    assert refused.returncode == 1 and data["valid"] is False
    assert (
        data["reason"] == "LLM finetuning requires trainer type to be finetune."
        and data["ludwig_version"] == "0.17.10"
    )
    usage = _cli("check-ludwig", str(good), "--ludwig", "sometimes")
    assert usage.returncode == 2


# --- real Ludwig ------------------------------------------------------------------------------------

GOLDEN_SAMPLE = {  # Ludwig 0.17.10's verdicts (tests/test_config_ludwig.py GOLDEN), three kinds of refusal
    "ecd_titanic_model1.yaml": None,
    "gbm_lightgbm_higgs.yaml": "Invalid model type: 'gbm'",
    "ecd_wmt15_nmt_large_bert.yaml": "Please use the `model_type: llm` for text-to-text models.",
}


@pytest.mark.ludwig
@pytest.mark.slow
@pytest.mark.skipif(
    ludwig_python() is None, reason="no Ludwig venv (make ludwig-env or $PERFMODEL_LUDWIG_PYTHON)"
)
@pytest.mark.skipif(not REAL.is_dir(), reason=f"{REAL} not present")
@pytest.mark.parametrize("name", sorted(GOLDEN_SAMPLE))
def test_real_ludwig_gives_the_golden_verdict_and_the_rules_agree(name):
    from perfmodel.config.overrides import read_config_file

    cfg = read_config_file(REAL / name)
    verdict = check_ludwig(cfg, use_ludwig="require")
    assert verdict.judge.startswith("ludwig 0.17")
    expected = GOLDEN_SAMPLE[name]
    assert verdict.valid is (expected is None)
    if expected is not None:
        assert expected in verdict.reason
    else:
        assert (
            verdict.resolved is not None and verdict.resolved["combiner"]["type"] == "ft_transformer"
        )  # 3+ inputs
    assert own_verdict(cfg).valid == verdict.valid


def test_a_gbm_config_is_predicted_with_a_warning_naming_the_last_ludwig_that_ran_it():
    from perfmodel.api import predict_document

    cfg = {
        "model_type": "gbm",
        "input_features": [{"name": f"x{i}", "type": "number"} for i in range(8)],
        "output_features": [{"name": "y", "type": "binary"}],
    }
    doc = predict_document(cfg, rows=10_000)
    assert doc["total_time_s"]["estimate"] > 0
    named = [w for w in doc["warnings"] if "removed from Ludwig after 0.10" in w]
    assert len(named) == 1 and "0.17.10 rejects" in named[0]


def test_when_ludwig_cannot_decide_auto_falls_back_to_the_rules_and_require_does_not(monkeypatch):
    from perfmodel.config.ludwig_schema import LudwigVerdict

    offline = LudwigVerdict(valid=None, reason="base model not reachable offline", judge="ludwig 0.17.10 (here)")
    monkeypatch.setattr("perfmodel.config.ludwig_schema.ludwig_in_process", lambda: True)
    monkeypatch.setattr("perfmodel.config.ludwig_schema.ludwig_verdict_in_process", lambda cfg: offline)
    auto = check_ludwig(TAB)
    assert auto.valid is True
    assert "perfmodel's rules" in auto.judge and "could not decide: base model not reachable offline" in auto.judge
    assert check_ludwig(with_(TAB, model_type="gbm")).valid is False  # the rules still refuse what they refuse
    assert check_ludwig(TAB, use_ludwig="require") == offline


@pytest.mark.parametrize(
    "cfg",
    [
        with_(TAB, input_features=None),
        with_(TAB, output_features=[]),
        with_(TAB, input_features=[{"name": "x", "type": "wibble"}]),
        with_(TAB, input_features=[{"name": "x"}]),
        with_(TAB, output_features=[{"name": "a", "type": "binary"}]),  # a name used twice
    ],
    ids=["inputs-null", "outputs-empty", "unknown-type", "no-type", "duplicate-name"],
)
def test_check_ludwig_and_predict_share_one_verdict(tmp_path, cfg):
    """What check-ludwig (perfmodel's rules) refuses, predict refuses too (issue 27, item 5)."""
    from perfmodel.config import load_workload
    from perfmodel.errors import ConfigError

    assert own_verdict(cfg).valid is False
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError):
        load_workload(path, rows=100)
