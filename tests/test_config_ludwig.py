"""Ludwig configs through load_workload: LLM, ECD and GBM mapping, Ludwig defaults stated as
assumptions, refusals, and every real Ludwig config in the shared folder."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from perfmodel.catalog import resolve_model_key
from perfmodel.config import detect_format, load_workload
from perfmodel.config.overrides import read_config_file
from perfmodel.errors import CatalogError, ConfigError, UnsupportedError

FIX = Path(__file__).parent / "fixtures" / "configs"
REAL = Path(__file__).resolve().parents[2] / "shared" / "ludwig-configs"


def lines(w, needle: str) -> list[str]:
    return [a for a in w.assumptions if needle in a]


def test_formats_are_detected_by_their_keys():
    assert detect_format(read_config_file(FIX / "ludwig_llm_qlora.yaml")) == "ludwig"
    assert (
        detect_format(read_config_file(FIX / "ludwig_ecd_legacy.yaml")) == "ludwig"
    )  # training: + input_features
    assert detect_format(read_config_file(FIX / "native_full.yaml")) == "native"


def test_llm_qlora_with_ludwig_defaults_stated():
    w = load_workload(FIX / "ludwig_llm_qlora.yaml", rows=10_000)
    t = w.training
    assert w.model.name == "llama2-7b" and w.model.arch == "decoder"
    assert (t.quantization_bits, t.lora_r, t.precision) == (4, 8, "fp16")
    assert (t.micro_batch_size, t.grad_accum_steps, t.epochs, t.samples) == (2, 8, 2, 7000)
    assert t.seq_len == 512 and t.trainable_fraction is None
    assert w.gpu.name == "A100-80GB" and w.parallel.num_gpus == 1 and w.framework == "ludwig"
    assert lines(w, "adapter.r not given: Ludwig's LoRA default r=8")
    assert lines(w, "training.precision assumed fp16")
    assert lines(w, "hardware.gpu not given") and lines(w, "assumed 512 tokens")
    assert lines(w, "ceil(10,000 rows x 0.7)")
    # evaluation generates: 0.67-0.73 x a training row's time, measured on real Ludwig (tiny Llama, LoRA)
    assert t.eval_fraction == pytest.approx(0.3 / 0.7 * 0.7, abs=1e-3)


def test_gradient_clipping_is_ludwigs_default_and_a_null_norm_turns_it_off(tmp_path):
    """Ludwig's GradientClippingConfig: clipglobalnorm 0.5 by default (ludwig/schema/optimizers.py), so
    the ludwig recipe clips; a config that sets clipglobalnorm (and clipnorm) to null does not."""
    from perfmodel.analytic.step import plan_step

    default = load_workload(FIX / "ludwig_llm_qlora.yaml", rows=10_000)
    assert default.training.gradient_clipping is None
    assert [k for k in plan_step(default).kernels if "gradient clipping" in k.label]
    text = (FIX / "ludwig_llm_qlora.yaml").read_text()
    for clip, expected in (("{clipglobalnorm: null}", False), ("{clipglobalnorm: 1.0}", True)):
        p = tmp_path / "clip.yaml"
        p.write_text(text.replace("  learning_rate: 0.0002\n", f"  learning_rate: 0.0002\n  gradient_clipping: {clip}\n"))
        w = load_workload(p, rows=10_000)
        assert w.training.gradient_clipping is expected
        assert bool([k for k in plan_step(w).kernels if "gradient clipping" in k.label]) is expected


def test_llm_lora_on_ray_with_deepspeed_zero2_offload():
    w = load_workload(FIX / "ludwig_llm_lora_deepspeed_ray.yaml", rows=40_000, gpu="A100-80GB")
    t, p = w.training, w.parallel
    assert (t.lora_r, t.lora_target_modules, t.quantization_bits) == (32, 4, None)
    assert (t.precision, t.activation_checkpointing, t.seq_len) == ("amp_fp16", True, 1024)
    assert (p.num_gpus, p.strategy, p.cpu_offload) == (4, "zero2", True)
    assert w.framework == "deepspeed"
    assert not lines(w, "hardware.gpu not given")  # the flag named it
    assert lines(w, "sequence length 1024 from the config's maximum")


def test_llm_tokens_flag_is_the_total_and_drops_epochs():
    w = load_workload(FIX / "ludwig_llm_qlora.yaml", tokens=5e7)
    assert (w.training.tokens, w.training.epochs, w.training.samples) == (5e7, None, None)


def test_llm_sequence_length_and_rows_from_a_dataset(tmp_path):
    rows = 500
    pd.DataFrame({"question": ["q" * 400] * rows, "answer": ["a" * 392] * rows}).to_csv(
        tmp_path / "qa.csv", index=False
    )
    w = load_workload(FIX / "ludwig_llm_qlora.yaml", dataset=tmp_path / "qa.csv")
    # (400 + 392) / 4 = 198 tokens of text + 2 (BOS, EOS) per row
    assert w.training.seq_len == 200 and w.training.samples == round(rows * 0.7)
    assert lines(w, "characters/4 over columns [question, answer]")


def test_ecd_bert_trainable_true_is_full_fine_tuning():
    w = load_workload(FIX / "ludwig_ecd_bert_trainable.yaml", rows=20_000)
    t = w.training
    assert w.model.arch == "encoder" and w.model.hidden_size == 768 and w.model.num_layers == 12
    assert (t.trainable_fraction, t.lora_r, t.seq_len, t.precision) == (None, None, 128, "amp_fp16")
    assert (t.micro_batch_size, t.epochs, t.samples) == (32, 3, 14_000)
    assert t.eval_fraction == pytest.approx(0.3 / 0.7 / 3, abs=1e-3)


def test_ecd_bert_default_is_a_frozen_encoder_and_says_so():
    w = load_workload(FIX / "ludwig_ecd_bert_frozen.yaml", rows=20_000)
    assert w.training.trainable_fraction == 0.0 and w.training.precision == "fp32"
    assert lines(w, "encoder trainable not given: Ludwig's default for pretrained bert encoders is false")
    assert lines(w, "use_mixed_precision not set: Ludwig trains ECD models in fp32")
    unfrozen = load_workload(
        FIX / "ludwig_ecd_bert_frozen.yaml", rows=20_000, overrides=["training.trainable_fraction=1"]
    )
    assert unfrozen.training.trainable_fraction == 1.0 and not lines(unfrozen, "encoder trainable")


def test_ecd_legacy_training_section_and_bare_string_encoder():
    w = load_workload(FIX / "ludwig_ecd_legacy.yaml", rows=1000)
    t = w.training
    assert w.model.hidden_size == 768 and t.trainable_fraction is None  # flat `trainable: true`
    assert (t.seq_len, t.micro_batch_size, t.epochs, t.samples) == (64, 16, 4, 700)  # preprocessing.text cap


def test_ecd_text_sequence_length_from_the_longest_text(tmp_path):
    pd.DataFrame({"review": ["x" * 40, "y" * 160, "z" * 80]}).to_parquet(tmp_path / "r.parquet")
    w = load_workload(FIX / "ludwig_ecd_bert_frozen.yaml", dataset=tmp_path / "r.parquet")
    assert w.training.seq_len == 160 // 4 + 2 and w.training.samples == 3  # Ludwig: ceil(3 * 0.7)


@pytest.mark.skipif(resolve_model_key("bert-base-uncased") is None, reason="bert-base not in the catalog yet")
def test_ecd_bare_bert_encoder_resolves_through_the_catalog(tmp_path):
    cfg = tmp_path / "bert.yaml"
    cfg.write_text(
        "input_features:\n  - {name: t, type: text, encoder: bert}\noutput_features:\n  - {name: y, type: binary}\n"
    )
    w = load_workload(cfg, rows=100)
    assert w.model.hidden_size == 768 and w.training.seq_len == 256 and w.training.epochs == 100
    assert lines(w, "trainer.epochs not given: Ludwig's default 100")
    # Ludwig's default batch_size auto: its tuner stops at 0.2 x 70 training rows -> 8 at the most
    assert w.training.micro_batch_size == 8 and lines(
        w, "trainer.batch_size not given (Ludwig's default auto)"
    )


def test_ecd_tabular_model_is_estimated_from_its_layers():
    w = load_workload(FIX / "ludwig_ecd_tabular.yaml", rows=1000)
    m = w.model
    # 3 passthrough inputs -> fc 64 (3*64 + 64) -> binary regressor decoder, one output (64 + 1)
    assert m.arch == "mlp" and m.params_total == 3 * 64 + 64 + 64 * 1 + 1
    assert m.forward_gflops_per_sample == pytest.approx((2 * 3 * 64 + 2 * 64 * 1) / 1e9)
    assert lines(w, "model estimated from the Ludwig config")
    with pytest.raises(ConfigError, match="--tokens applies to token models"):
        load_workload(FIX / "ludwig_ecd_tabular.yaml", tokens=1e6)


def test_ecd_resnet_is_the_catalog_model_scaled_to_the_image_size():
    w = load_workload(FIX / "ludwig_ecd_resnet.yaml", rows=1000)
    assert w.model.name == "resnet50" and w.model.arch == "cnn"
    assert w.model.forward_gflops_per_sample == pytest.approx(8.2 / 4)
    assert w.training.precision == "amp_fp16" and w.training.trainable_fraction is None


def test_image_size_is_read_from_the_first_image_of_the_dataset(tmp_path):
    image = pytest.importorskip("PIL.Image")
    for i in range(3):
        image.new("L", (28, 28)).save(tmp_path / f"{i}.png")
    pd.DataFrame({"image_path": [f"{i}.png" for i in range(3)], "label": [0, 1, 0]}).to_csv(
        tmp_path / "digits.csv", index=False
    )
    cfg = tmp_path / "cnn.yaml"
    cfg.write_text(
        "input_features:\n  - {name: image_path, type: image, encoder: stacked_cnn}\n"
        "output_features:\n  - {name: label, type: category}\ntrainer: {epochs: 2}\n"
    )
    w = load_workload(cfg, dataset=tmp_path / "digits.csv")
    # Ludwig's default stack on 28x28x1: conv 3x3x32 -> 26, pool -> 13; conv 3x3x64 -> 11, pool -> 5;
    # fc 5*5*64 -> 128; category decoder 128 -> 2
    params = (9 * 32 + 32) + (9 * 32 * 64 + 64) + (1600 * 128 + 128) + (128 * 2 + 2)
    assert w.model.arch == "cnn" and w.model.params_total == params
    assert (
        lines(w, "image size 28x28x1 read from the first image") and w.training.samples == 3
    )  # ceil(3 * 0.7)


def test_gbm_rows_features_rounds_on_the_cpu(tmp_path):
    w = load_workload(FIX / "ludwig_gbm.yaml", rows=10_000)
    t = w.training
    assert w.model.arch == "gbm" and (t.gbm_rows, t.gbm_features, t.gbm_rounds) == (7000, 3, 300)
    assert w.gpu.name == "cpu" and lines(w, "LightGBM on the CPU")
    assert lines(w, "model_type gbm (LightGBM) was removed from Ludwig after 0.10")  # Ludwig 0.17 rejects it
    plain = tmp_path / "gbm.yaml"
    plain.write_text((FIX / "ludwig_gbm.yaml").read_text().replace("  num_boost_round: 300\n", ""))
    default = load_workload(plain, rows=10_000)
    assert default.training.gbm_rounds == 1000 and lines(
        default, "trainer.num_boost_round not given: Ludwig's default 1000"
    )
    with pytest.raises(ConfigError, match="--tokens does not apply to a gbm model"):
        load_workload(FIX / "ludwig_gbm.yaml", tokens=1e6)


def test_zero_shot_llm_is_refused_with_a_clear_reason():
    with pytest.raises(ConfigError, match="trainer.type none means zero-shot inference: nothing to train"):
        load_workload(FIX / "ludwig_llm_zero_shot.yaml", rows=100)


def test_unsupported_encoder_names_it_and_what_is_supported():
    with pytest.raises(UnsupportedError) as err:
        load_workload(FIX / "ludwig_ecd_unsupported_encoder.yaml", rows=100)
    assert "'squeezenet'" in str(err.value) and "stacked_cnn, resnet, vit, unet" in str(err.value)
    assert "efficientnet" in str(err.value)  # the torchvision encoders with a timm twin are supported


def test_dataset_size_is_required_unless_train_steps(tmp_path):
    with pytest.raises(ConfigError, match="pass --rows N"):
        load_workload(FIX / "ludwig_llm_qlora.yaml")
    cfg = tmp_path / "steps.yaml"
    cfg.write_text(
        (FIX / "ludwig_llm_qlora.yaml")
        .read_text()
        .replace("  epochs: 2\n", "  epochs: 2\n  train_steps: 300\n")
    )
    w = load_workload(cfg)
    assert (w.training.steps, w.training.samples, w.training.epochs) == (300, None, None)


def test_overrides_apply_on_top_of_the_translated_config():
    w = load_workload(
        FIX / "ludwig_llm_qlora.yaml",
        rows=1000,
        overrides=[
            "training.seq_len=1024",
            "training.lora_r=null",
            "training.quantization_bits=null",
            "training.precision=bf16",
            "hardware.gpu=A100-80GB",
        ],
    )
    t = w.training
    assert (t.seq_len, t.lora_r, t.quantization_bits, t.precision) == (1024, None, None, "bf16")
    assert not lines(w, "adapter.r") and not lines(w, "assumed 512 tokens") and not lines(w, "hardware.gpu")


@pytest.mark.parametrize(
    "text,error,expected",
    [
        (
            "model_type: llm\ninput_features: [{name: a, type: text}]\noutput_features: [{name: b, type: text}]\n",
            ConfigError,
            "base_model is required",
        ),
        (
            "model_type: llm\nbase_model: llama2-7b\ninput_features: [{name: a, type: text}]\n"
            "output_features: [{name: b, type: text}]\ntrainer: {type: dpo}\n",
            UnsupportedError,
            "trainer.type dpo",
        ),
        (
            "model_type: llm\nbase_model: llama2-7b\nis_multimodal: true\ninput_features: [{name: a, type: text}]\n"
            "output_features: [{name: b, type: text}]\n",
            UnsupportedError,
            "is_multimodal",
        ),
        (
            "model_type: llm\nbase_model: llama2-7b\ninput_features: [{name: a, type: text}]\n"
            "output_features: [{name: b, type: text}]\n",
            ConfigError,
            "trainer.type not given: Ludwig's default for model_type llm is none",
        ),
        (
            "model_type: rl\ninput_features: [{name: a, type: number}]\n",
            ConfigError,
            "Ludwig 0.17.10 rejects this config: Invalid model type: 'rl', expected one of: ['ecd', 'llm']",
        ),
        (
            "model_type: llm\nbase_model: llama2-7b\nadapter: {type: lora}\ninput_features: [{name: a, type: text}]\n"
            "output_features: [{name: b, type: text}]\ntrainer: {type: dpo}\n",
            ConfigError,
            "LLM finetuning requires trainer type to be finetune.",
        ),
        (
            "input_features: [{name: a, type: number}, {name: a, type: category}]\noutput_features: [{name: b, type: binary}]\n",
            ConfigError,
            "Feature names must be unique.",
        ),
        (
            "input_features: [{name: a, type: text, encoder: bert}]\noutput_features: [{name: b, type: text}]\n",
            ConfigError,
            "Please use the `model_type: llm` for text-to-text models.",
        ),
        (
            "input_features: [{name: a, type: number}]\noutput_features: [{name: b, type: binary}]\n"
            "trainer: {checkpoints_per_epoch: 2, steps_per_checkpoint: 10}\n",
            ConfigError,
            "It is invalid to specify both trainer.checkpoints_per_epoch AND trainer.steps_per_checkpoint.",
        ),
        (
            "input_features: [{name: a, type: number}]\noutput_features: [{name: b, type: binary}]\nhardware: {gpu: A100-80GB}\n",
            ConfigError,
            "'hardware' is not a Ludwig key",
        ),
        (
            "input_features: [{name: a}]\noutput_features: [{name: b, type: binary}]\n",
            ConfigError,
            "input_features[0] must be a mapping",
        ),
        (
            "input_features: [{name: a, type: audio}]\noutput_features: [{name: b, type: binary}]\n",
            UnsupportedError,
            "'audio'",
        ),
        (
            "input_features: [{name: a, type: number}]\noutput_features: [{name: b, type: binary}]\nbackend: {type: spark}\n",
            ConfigError,
            "backend.type must be one of",
        ),
        (
            "input_features: [{name: a, type: number}]\noutput_features: [{name: b, type: binary}]\ncombiner: {type: comparator}\n",
            UnsupportedError,
            "combiner.type comparator",
        ),
    ],
)
def test_bad_ludwig_configs(tmp_path, text, error, expected):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    with pytest.raises(error) as err:
        load_workload(cfg, rows=100)
    assert expected in str(err.value) and "\n" not in str(err.value)


# Ludwig's own verdict on every real Ludwig config in ../shared/ludwig-configs, refreshed from Ludwig
# 0.17.10 itself (`ModelConfig.from_dict`, what `LudwigModel()` calls; issue 16 phase 1:
# datasets/heldout/ludwig-lab/lab/golden_schema.json by validate_configs.py; `perfmodel check-ludwig --ludwig require`
# asks it again). None: valid; else (the check that refused it, a phrase of Ludwig's reason).
GOLDEN_LUDWIG_VERSION = "0.17.10"
GOLDEN: dict[str, tuple[str, str] | None] = {
    "ecd_benchmark_amazon_reviews_bert.yaml": None,
    "ecd_benchmark_sst2_bert.yaml": None,
    "ecd_bloom3b_lora_encoder_imdb_deepspeed_zero3.yaml": (
        "schema",
        "'lora' is not valid under any of the given schemas",
    ),
    "ecd_bloom3b_lora_encoder_imdb_deepspeed_zero3_ray.yaml": (
        "schema",
        "'lora' is not valid under any of the given schemas",
    ),
    "ecd_camseq_unet_segmentation.yaml": None,
    "ecd_insurance_lite_vit_multimodal.yaml": None,
    "ecd_lbfgs_amazon_employee_access.yaml": None,
    "ecd_mnist_stacked_cnn.yaml": None,
    "ecd_regression_adult_census_tabnet.yaml": None,
    "ecd_rotten_tomatoes_getting_started.yaml": None,
    "ecd_tabnet_higgs_small.yaml": None,
    "ecd_titanic_model1.yaml": None,
    "ecd_wmt15_nmt_large_bert.yaml": (
        "check_llm_text_encoder_is_not_used_with_ecd",
        "Please use the `model_type: llm` for text-to-text models.",
    ),
    "gbm_lightgbm_adult_census.yaml": (
        "model_type",
        "Invalid model type: 'gbm', expected one of: ['ecd', 'llm']",
    ),
    "gbm_lightgbm_higgs.yaml": ("model_type", "Invalid model type: 'gbm', expected one of: ['ecd', 'llm']"),
    "llm_llama2_7b_qlora_alpaca.yaml": None,
    "llm_llama31_8b_dpo_lora.yaml": (
        "check_llm_finetuning_trainer_config",
        "LLM finetuning requires trainer type to be finetune.",
    ),
    "llm_llama32_1b_pissa_lora.yaml": None,
    "llm_readme_llama2_7b_qlora_alpaca_prompt.yaml": None,
    "vlm_qwen2vl_7b_qlora.yaml": ("schema", "'image' is not one of ['text']"),
}


def _real_configs() -> list[Path]:
    return sorted(REAL.glob("*.yaml")) if REAL.is_dir() else []


@pytest.mark.skipif(not REAL.is_dir(), reason=f"{REAL} not present")
def test_the_golden_list_covers_every_real_ludwig_config():
    assert sorted(p.name for p in _real_configs()) == sorted(GOLDEN)


@pytest.mark.skipif(not REAL.is_dir(), reason=f"{REAL} not present")
@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_perfmodels_rules_give_ludwigs_verdict(name):
    from perfmodel.config.ludwig_schema import own_verdict

    verdict = own_verdict(read_config_file(REAL / name))
    expected = GOLDEN[name]
    assert verdict.ludwig_version == GOLDEN_LUDWIG_VERSION
    if expected is None:
        assert verdict.valid is True and verdict.reason == ""
    else:
        assert verdict.valid is False and verdict.check == expected[0] and expected[1] in verdict.reason


@pytest.mark.skipif(not REAL.is_dir(), reason=f"{REAL} not present")
@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_every_real_ludwig_config_is_predicted_or_refused_as_ludwig_would(name):
    path = REAL / name
    expected = GOLDEN[name]
    if expected is None or expected[0] == "model_type":  # valid, or gbm: predicted as Ludwig <= 0.10 ran it
        w = load_workload(path, gpu="A100-80GB", rows=10_000)
        assert w.gpu.name == "A100-80GB" or w.model.arch == "gbm"
        assert w.training.steps or w.training.samples or w.training.tokens or w.training.gbm_rows
        if expected is not None:
            assert lines(w, "removed from Ludwig after 0.10")
        return
    with pytest.raises(ConfigError) as err:
        load_workload(path, gpu="A100-80GB", rows=10_000)
    text = str(err.value)
    assert (
        f"Ludwig {GOLDEN_LUDWIG_VERSION} rejects this config" in text
        and expected[1] in text
        and "\n" not in text
    )


def test_every_ludwig_key_in_the_reference_is_read_by_the_translation():
    from perfmodel.config.ludwig import KEYS_READ

    source = "".join(
        (Path(__file__).resolve().parents[1] / "perfmodel" / "config" / name).read_text()
        for name in ("ludwig.py", "ludwig_trainer.py", "ludwig_features.py", "ludwig_ecd.py")
    )
    body = source.split("KEYS_READ", 1)[0] + source.split('"""Every Ludwig key perfmodel reads', 1)[1]
    for entry in KEYS_READ:
        head = entry.split(" (")[0]
        for part in head.replace("/", " ").split():
            leaf = part.strip("().[]").split(".")[-1]
            if leaf and "<" not in leaf:
                assert f'"{leaf}"' in body, f"{leaf} ({entry}) is listed in KEYS_READ but no code reads it"


def test_ecd_timm_encoder_is_its_row_of_the_timm_table_scaled_to_the_image_size(tmp_path):
    """Ludwig's `timm` encoder (timm.create_model(model_name, num_classes=0)) on 112x112 images:
    EfficientNet-B0's numbers at 224 px (0.4 GMACs = 0.8 GFLOPs, timm's published figure; 44.18 MB
    saved; 16 depthwise convolutions moving 6,094,816 elements) times (112 x 112) / (224 x 224) = 1/4;
    the layer counts stay. A pretrained tag (.ra_in1k) is not part of the architecture."""
    cfg = tmp_path / "timm.yaml"
    cfg.write_text(
        "input_features:\n  - name: image_path\n    type: image\n"
        "    preprocessing: {height: 112, width: 112, num_channels: 3}\n"
        "    encoder: {type: timm, model_name: efficientnet_b0.ra_in1k}\n"
        "output_features:\n  - {name: label, type: category}\ntrainer: {epochs: 1, batch_size: 32}\n"
    )
    m = load_workload(cfg, rows=1000).model
    assert m.name == "timm/efficientnet_b0" and m.arch == "cnn" and m.family == "efficientnet"
    assert m.forward_gflops_per_sample == pytest.approx(0.8 / 4)
    assert m.activation_mb_per_sample == pytest.approx(44.18 / 4)
    assert m.depthwise_melements_per_sample == pytest.approx(6.09482 / 4)
    assert (m.gemm_layers, m.depthwise_layers, m.params_total) == (82, 16, 5_290_000)
    cfg.write_text(cfg.read_text().replace("efficientnet_b0.ra_in1k", "efficientnet_b99"))
    with pytest.raises(CatalogError, match="unknown timm model .efficientnet_b99.; did you mean"):
        load_workload(cfg, rows=1000)


def test_every_torchvision_encoder_variant_perfmodel_maps_is_in_its_timm_table():
    from perfmodel.catalog.models import timm_models
    from perfmodel.config.ludwig_ecd import TORCHVISION_DEFAULTS, TORCHVISION_TIMM

    assert not [name for name, _ in TORCHVISION_TIMM.values() if name not in timm_models()]
    assert all((kind, variant) in TORCHVISION_TIMM for kind, variant in TORCHVISION_DEFAULTS.items())


def test_ecd_torchvision_encoder_is_its_timm_twin_at_the_weights_crop(tmp_path):
    """Ludwig's `regnet` encoder, model_variant y_3_2gf: torchvision's RegNetY-3.2GF, whose weights'
    transform crops to 224 px, costed as timm regnety_032 (the same architecture), whose numbers are
    at 288 px (timm's training size): 224^2 / 288^2 = 0.605 of its 2 x 3.2 GMACs = 6.4 GFLOPs (timm's
    published 3.2 GMACs at 224 px; at 288 px 10.58 GFLOPs). A variant without a twin is refused."""
    cfg = tmp_path / "tv.yaml"
    cfg.write_text(
        "input_features:\n  - name: image_path\n    type: image\n"
        "    encoder: {type: regnet, model_variant: y_3_2gf}\n"
        "output_features:\n  - {name: label, type: category}\ntrainer: {epochs: 1, batch_size: 32}\n"
    )
    w = load_workload(cfg, rows=1000)
    assert w.model.name == "timm/regnety_032" and w.model.reference_input == "224x224 image"
    assert w.model.forward_gflops_per_sample == pytest.approx(10.58 * 224**2 / 288**2, rel=1e-3)
    assert w.model.forward_gflops_per_sample == pytest.approx(6.4, rel=0.02)
    assert lines(w, "torchvision regnet y_3_2gf costed as timm regnety_032")
    cfg.write_text(cfg.read_text().replace("y_3_2gf", "y_128gf"))
    with pytest.raises(UnsupportedError, match="has no timm twin"):
        load_workload(cfg, rows=1000)


def test_two_image_features_with_the_same_cnn_encoder_are_refused_not_costed_as_zero_layers(tmp_path):
    """Several features with one pretrained transformer encoder count as one model with that many
    times its layers; a CNN (resnet, a timm model) has no layer count to repeat, so it is refused."""
    cfg = tmp_path / "two.yaml"
    cfg.write_text(
        "input_features:\n"
        "  - {name: a, type: image, encoder: {type: resnet, model_variant: 50}, preprocessing: {height: 224, width: 224, num_channels: 3}}\n"
        "  - {name: b, type: image, encoder: {type: resnet, model_variant: 50}, preprocessing: {height: 224, width: 224, num_channels: 3}}\n"
        "output_features:\n  - {name: label, type: category}\ntrainer: {epochs: 1, batch_size: 32}\n"
    )
    with pytest.raises(UnsupportedError, match="2 input features with the same resnet50 encoder"):
        load_workload(cfg, rows=1000)
