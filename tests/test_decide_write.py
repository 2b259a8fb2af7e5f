"""advise: quantized bases searched for LoRA, "fastest" within a stated cost, and --write: the
chosen option written in the config's own dialect (native, Hugging Face keys, Ludwig), which read
back gives the option's run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import perfmodel
from perfmodel.config.source import ConfigSource
from perfmodel.decide.search import native_diff, quantizations
from perfmodel.decide.write import option_config, write_option
from perfmodel.errors import ConfigError
from perfmodel.prediction import predict

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _read_back(path: Path, flags: list[str]):
    gpu = next((f.split()[1] for f in flags if f.startswith("--gpu ")), None)
    sets = [f.split(" ", 1)[1] for f in flags if f.startswith("--set ")]
    return ConfigSource.load(str(path), gpu=gpu, overrides=sets).base()


def test_lora_configs_search_quantized_bases_full_fine_tunes_do_not(tmp_path):
    lora = ConfigSource.load(str(EXAMPLES / "llama2-7b-lora.yaml"))
    assert quantizations(lora, lora.base()) == [None, 4, 8]
    full = tmp_path / "full.yaml"
    full.write_text("model: {name: llama2-7b}\ntraining: {seq_len: 512, micro_batch_size: 1, tokens: 1.0e8}\n"
                    "hardware: {gpu: A100-80GB}\n")
    src = ConfigSource.load(str(full))
    assert quantizations(src, src.base()) == [None]


def test_a_quantized_option_is_labelled_and_changes_only_the_base(tmp_path):
    advice = perfmodel.advise(EXAMPLES / "llama2-7b-lora.yaml", gpus=["L4"], max_gpus=8, top=5)
    options = [o for o in (*advice.by_time, *advice.by_cost) if "training.quantization_bits" in o.native_changes]
    assert options, [o.label for o in advice.by_time]
    for o in options:
        bits = o.native_changes["training.quantization_bits"]
        assert bits in (4, 8) and f"{bits}-bit base" in o.label


@pytest.mark.slow
def test_fastest_stays_within_twice_the_cheapest_cost_without_a_budget():
    from perfmodel.decide.advise import FASTEST_COST_FACTOR

    advice = perfmodel.advise(EXAMPLES / "llama2-7b-lora.yaml", gpus=["A100-80GB", "L40S"], max_gpus=32, top=3)
    cheapest = advice.by_cost[0].outcome.cost_usd.estimate
    assert advice.fastest_cost_limit_usd == pytest.approx(FASTEST_COST_FACTOR * cheapest)
    assert all(o.outcome.cost_usd.estimate <= advice.fastest_cost_limit_usd for o in advice.by_time)
    assert any("at most 2x the cheapest" in n for n in advice.notes)
    budgeted = perfmodel.advise(EXAMPLES / "llama2-7b-lora.yaml", gpus=["A100-80GB", "L40S"], max_gpus=32,
                                top=3, budget_usd=500)
    assert budgeted.fastest_cost_limit_usd == 500


def test_write_native_reads_back_as_the_option(tmp_path):
    advice = perfmodel.advise(EXAMPLES / "llama2-7b-lora.yaml", gpus=["H100-SXM"], max_gpus=8, top=1)
    option = advice.by_time[0]
    source = ConfigSource.load(str(EXAMPLES / "llama2-7b-lora.yaml"))
    path = write_option(source, option, tmp_path / "best.yaml", advice.confidence_level)
    text = path.read_text()
    assert text.startswith("# written by perfmodel advise")
    w = ConfigSource.load(str(path)).base()
    assert native_diff(source.base(), w) == option.native_changes
    assert predict(w).total_time_s.estimate == pytest.approx(option.outcome.total_time_s.estimate)
    with pytest.raises(ConfigError, match=".yaml"):
        write_option(source, option, tmp_path / "best.json", 0.9)


def test_write_keeps_hugging_face_spellings(tmp_path):
    cfg = tmp_path / "hf.yaml"
    cfg.write_text(
        "model: {name: llama2-7b}\n"
        "training: {seq_len: 512, per_device_train_batch_size: 8, gradient_accumulation_steps: 4, lora_r: 16,"
        " bf16: true, tokens: 2.0e8}\n"
        "hardware: {gpu: A100-80GB}\n"
    )
    advice = perfmodel.advise(cfg, gpus=["H100-SXM"], max_gpus=4, top=1)
    option = advice.by_time[0]
    source = ConfigSource.load(str(cfg))
    raw, flags = option_config(source, option)
    training = raw["training"]
    assert "micro_batch_size" not in training and "grad_accum_steps" not in training  # one spelling each
    assert flags == []
    path = write_option(source, option, tmp_path / "out.yaml", 0.9)
    w = ConfigSource.load(str(path)).base()
    assert native_diff(source.base(), w) == option.native_changes


def test_write_ludwig_keeps_ludwig_keys_and_names_the_flags(tmp_path):
    config = EXAMPLES / "ludwig-llama2-7b-qlora.yaml"
    advice = perfmodel.advise(config, tokens=1e8, gpus=["H100-SXM"], max_gpus=1, top=1, use_learned=False)
    option = advice.by_time[0]
    source = ConfigSource.load(str(config), tokens=1e8)
    path = write_option(source, option, tmp_path / "ludwig.yaml", 0.9)
    raw = yaml.safe_load(path.read_text())
    assert raw["model_type"] == "llm" and "hardware" not in raw and "training" not in raw
    _, flags = option_config(source, option)
    assert "--gpu H100-SXM" in flags and "--gpu H100-SXM" in path.read_text()
    w = ConfigSource.load(str(path), gpu="H100-SXM", tokens=1e8).base()
    assert native_diff(source.base(), w) == option.native_changes
