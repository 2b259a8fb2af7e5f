"""Real training slices on the CPU: every model kind builds, trains and yields a schema row."""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

import pandas as pd
import pytest
import torch

from perfmodel.measure import models
from perfmodel.measure.configs import (
    SliceConfig,
    estimate_static_memory_gb,
    lora_params,
    make_row_id,
    predicted_oom,
    transformer_params,
)
from perfmodel.measure.device import CpuDevice
from perfmodel.measure.fingerprint import collect_fingerprint
from perfmodel.measure.slices import model_flops_per_step, run_slice, slice_row
from perfmodel.schema import COLUMNS, conform

LLAMA = SliceConfig(
    kind="llama",
    hidden_size=64,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    ffn_hidden_size=176,
    vocab_size=256,
    seq_len=32,
    micro_batch_size=2,
    warmup_steps=2,
    measured_steps=10,
)
BERT = SliceConfig(
    kind="bert",
    hidden_size=32,
    num_layers=2,
    num_heads=2,
    ffn_hidden_size=64,
    vocab_size=128,
    seq_len=16,
    micro_batch_size=4,
    num_classes=2,
)
RESNET = SliceConfig(
    kind="resnet",
    cnn_width=8,
    cnn_blocks=(1, 1),
    cnn_bottleneck=True,
    image_size=32,
    num_classes=10,
    micro_batch_size=2,
)
MLP = SliceConfig(kind="mlp", in_features=16, hidden_size=32, num_layers=3, num_classes=2, micro_batch_size=8)
GBM = SliceConfig(
    kind="lightgbm", micro_batch_size=2000, in_features=8, cpu_threads=1
)  # 1 thread: OpenMP crawls on a loaded 2-core host


@pytest.fixture(scope="module")
def cpu_fp():
    return collect_fingerprint(lambda: [])


def measure_row(config, fp):
    device = CpuDevice()
    measurement, facts = run_slice(config, device=device)
    return slice_row(
        config,
        measurement,
        facts,
        fingerprint=fp,
        device_kind="cpu",
        peak_memory_method=device.peak_memory_method,
    )


@pytest.mark.slow
def test_real_llama_slice_gives_a_schema_row(cpu_fp):
    row = measure_row(LLAMA, cpu_fp)
    assert row["status"] == "ok", row["notes"]
    frame = conform(pd.DataFrame([row]), COLUMNS)  # raises on a missing required value
    assert len(row["step_times_s"]) == 10 and row["warmup_steps"] == 2 and row["measured_steps"] == 10
    assert row["step_time_s"] == pytest.approx(statistics.median(row["step_times_s"]))
    n_built = sum(p.numel() for p in models.build_model(LLAMA).parameters())
    assert row["params_total"] == n_built == transformer_params(LLAMA)
    tokens = 2 * 32
    assert row["tokens_per_s"] == pytest.approx(tokens / row["step_time_s"])
    non_embedding = n_built - 256 * 64
    flops = (6 * non_embedding + 12 * 2 * 64 * 32) * tokens  # PaLM appendix B, per step
    # perfmodel.analytic leaves the final norm (64 weights) out of N: < 0.1 % here.
    assert row["achieved_tflops_per_gpu"] == pytest.approx(flops / row["step_time_s"] / 1e12, rel=1e-3)
    assert row["reported_mfu"] is None  # a CPU has no datasheet peak
    assert row["model_name"] == "slice-llama-d64-l2" and row["arch"] == "decoder" and row["gated_mlp"]
    assert row["num_kv_heads"] == 2 and row["gpu"] == "cpu" and row["framework"] == "torch-eager"
    assert (
        row["source"] == "perfmodel-collector"
        and row["source_kind"] == "own"
        and row["includes_optimizer_step"]
    )
    assert row["peak_memory_gb"] is not None and row["peak_memory_gb"] >= 0
    assert frame.loc[0, "benchmark_kind"] == "training_slice"


@pytest.mark.parametrize(
    "config",
    [
        dataclasses.replace(LLAMA, precision="amp_bf16", lora_r=4, optimizer="sgd"),
        dataclasses.replace(LLAMA, activation_checkpointing=True, precision="bf16"),
        dataclasses.replace(BERT, lora_r=4),
        dataclasses.replace(RESNET, activation_checkpointing=True, optimizer="sgd"),
        dataclasses.replace(RESNET, precision="amp_bf16", channels_last=True),
        dataclasses.replace(MLP, precision="amp_bf16"),
        GBM,
    ],
    ids=["llama-lora-amp-sgd", "llama-ckpt-bf16", "bert-lora", "resnet-ckpt-sgd", "resnet-channels-last", "mlp-amp",
         "lightgbm"],  # fmt: skip
)
@pytest.mark.slow
def test_every_kind_and_option_trains(config, cpu_fp):
    row = measure_row(config, cpu_fp)
    assert row["status"] == "ok", row["notes"]
    conform(pd.DataFrame([row]), COLUMNS)
    assert row["step_time_s"] > 0 and len(row["step_times_s"]) == config.measured_steps
    if config.kind in ("resnet", "mlp"):
        assert row["forward_gflops_per_sample"] > 0 and row["activation_mb_per_sample"] > 0
        assert row["hidden_size"] is None and row["arch"] in ("cnn", "mlp")
    if config.kind == "lightgbm":
        assert row["gbm_rows"] == 2000 and row["gbm_features"] == 8 and row["gbm_rounds"] == 12
        assert (
            row["framework"] == "lightgbm"
            and row["samples_per_s"] > 0
            and "boosting round" in row["notes"]
            and "1 CPU threads" in row["notes"]
        )
    if config.lora_r:
        assert row["lora_r"] == 4 and row["trainable_fraction"] is None
    assert row["channels_last"] == (config.channels_last if config.kind == "resnet" else None)


@pytest.mark.slow
def test_unsupported_precision_is_an_error_row(cpu_fp):
    row = measure_row(dataclasses.replace(MLP, precision="fp16"), cpu_fp)
    assert row["status"] == "error" and "unsupported" in row["notes"] and row["step_time_s"] is None
    conform(pd.DataFrame([row]), COLUMNS)


def test_model_flops_follow_the_pinned_convention_by_hand():
    # LLAMA: d=64, L=2, 4 heads of 16, 2 kv heads (k, v: 64 x 32), gated MLP 176, vocab 256, s=32, b=2.
    # Matmul weights per layer: q 64*64 + k 64*32 + v 64*32 + o 64*64 = 12288; MLP 3*64*176 = 33792;
    # LM head 64*256 = 16384: N = 2*(12288+33792) + 16384 = 108544 (+ 2*2*64 norm weights = 108800).
    # Attention 12*L*d*s = 12*2*64*32 = 49152 per token; 64 tokens per step.
    flops, dtype = model_flops_per_step(LLAMA, {})
    assert dtype == "fp32"
    assert flops == pytest.approx((6 * 108800 + 49152) * 64)
    # LoRA: the frozen base has no weight-gradient matmuls: 4N + attention (adapters not counted).
    lora, _ = model_flops_per_step(dataclasses.replace(LLAMA, lora_r=4, precision="amp_bf16"), {})
    assert lora == pytest.approx((4 * 108800 + 49152) * 64)
    # Recomputation is hardware FLOPs, not model FLOPs: unchanged.
    ckpt, _ = model_flops_per_step(dataclasses.replace(LLAMA, activation_checkpointing=True), {})
    assert ckpt == flops
    # CNN/MLP: forward + backward = 3 x the measured forward FLOPs, 8 samples per step.
    mlp, _ = model_flops_per_step(MLP, {"params_total": 2690.0, "forward_gflops_per_sample": 2e-6})
    assert mlp == pytest.approx(3 * 2e-6 * 1e9 * 8)
    assert model_flops_per_step(GBM, {}) == (None, None)
    assert model_flops_per_step(MLP, {}) == (None, None)  # forward FLOPs unknown: no FLOP rate


def test_analytic_sizes_match_the_built_models():
    for config in (LLAMA, BERT, dataclasses.replace(BERT, seq_len=1024)):
        model = models.build_model(config)
        assert transformer_params(config) == sum(p.numel() for p in model.parameters())
        lora = dataclasses.replace(config, lora_r=8)
        wrapped = models.build_model(lora)
        models.apply_lora(wrapped, 8)
        assert sum(p.numel() for p in wrapped.parameters()) - transformer_params(config) == lora_params(lora)
        trainable = sum(p.numel() for p in wrapped.parameters() if p.requires_grad)
        assert trainable >= lora_params(lora) and trainable < transformer_params(config) / 4


def test_mlp_flops_match_the_analytic_count():
    model = models.build_model(MLP)
    expected = 2 * (16 * 32 + 32 * 32 + 32 * 32 + 32 * 2) / 1e9
    assert models.forward_gflops_per_sample(model, "cpu", torch.float32) == pytest.approx(expected)


def test_static_memory_and_oom_prediction():
    l7b = SliceConfig(
        kind="llama",
        hidden_size=4096,
        num_layers=32,
        num_heads=32,
        num_kv_heads=32,
        ffn_hidden_size=11008,
        vocab_size=32000,
        seq_len=1024,
        micro_batch_size=1,
        precision="amp_bf16",
    )
    assert 6.7e9 < transformer_params(l7b) < 6.8e9
    assert estimate_static_memory_gb(l7b) == pytest.approx(16 * transformer_params(l7b) / 1e9)
    bf16_lora = dataclasses.replace(l7b, precision="bf16", lora_r=16)
    assert 13 < estimate_static_memory_gb(bf16_lora) < 14
    assert predicted_oom(l7b, 80.0) is not None and predicted_oom(l7b, 141.0) is None
    assert predicted_oom(bf16_lora, 40.0) is None


def test_committed_rows_achieved_tflops_agree_with_the_analytic_convention():
    # The committed own rows were stored with the collectors' former hand-written formula (6N + 12Lds,
    # N = parameters outside the embedding tables). Recomputed through perfmodel.analytic.flops:
    # llama: the final norm's d weights are no longer in N (< 0.01 %); LoRA: the adapters' weight
    # gradients (2 x their params) are no longer counted (< 1 %); bert: the pooler and classifier (on
    # one token per sample, not every token) and the bias vectors are no longer in N (< 5 %); CNN/MLP:
    # 3 x measured forward FLOPs both ways.
    from perfmodel.analytic.flops import compute_step_flops
    from perfmodel.codec import workload_from_row
    from perfmodel.measure.storage import list_shards, read_rows
    from perfmodel.workload import GPUSpec

    raw = Path(__file__).resolve().parents[1] / "datasets" / "raw"
    if not list_shards(raw):
        pytest.skip("no committed collector shards")
    rows = read_rows(raw)
    rows = rows[(rows["status"] == "ok") & rows["achieved_tflops_per_gpu"].notna()]
    assert len(rows) > 50
    device = GPUSpec(name="device", peak_tflops=dict.fromkeys(("fp32", "tf32", "bf16", "fp16", "fp8"), 1.0))
    limits = {
        ("llama", False): 1e-4,
        ("llama", True): 1e-2,
        ("bert", False): 5e-2,
        ("bert", True): 5e-2,
        ("mlp", False): 1e-9,
        ("resnet", False): 1e-9,
    }
    for row in rows.to_dict("records"):
        w = workload_from_row({**row, "gpu": "device"}, gpu=device)  # empty cells: NaN / NA, read as missing
        recomputed = compute_step_flops(w).model_flops_per_step / row["step_time_s"] / 1e12
        key = (row["model_family"], bool(pd.notna(row["lora_r"])))
        assert recomputed == pytest.approx(row["achieved_tflops_per_gpu"], rel=limits[key]), (
            row["model_name"],
            key,
        )
        assert recomputed <= row["achieved_tflops_per_gpu"] * (1 + 1e-9)  # only ever fewer FLOPs counted


def test_channels_last_is_a_resnet_slice_setting_that_leaves_earlier_row_ids_alone():
    """A ResNet slice in channels_last is another configuration (another row id); off, the field is
    not part of the identity, so every configuration measured before it keeps its row id."""
    nhwc = dataclasses.replace(RESNET, channels_last=True)
    assert "channels_last" not in RESNET.key() and nhwc.key()["channels_last"] is True
    assert make_row_id("hw", nhwc) != make_row_id("hw", RESNET)
    assert "channels_last" in nhwc.describe()
    with pytest.raises(ValueError, match="resnet slices only"):
        dataclasses.replace(LLAMA, channels_last=True)


@pytest.mark.slow
def test_a_channels_last_resnet_slice_runs_its_model_and_images_in_nhwc(monkeypatch):
    """The slice converts the model and its images to torch.channels_last before timing (checked on
    the tensors every timed step sees; the FLOP and saved-activation counts before it run in fp32 NCHW)."""
    seen: list[bool] = []
    original = models.ResNet.forward

    def spy(self, x):
        seen.append(x.is_contiguous(memory_format=torch.channels_last)
                    and self.stem[0].weight.is_contiguous(memory_format=torch.channels_last))  # fmt: skip
        return original(self, x)

    monkeypatch.setattr(models.ResNet, "forward", spy)
    run_slice(dataclasses.replace(RESNET, channels_last=True), device=CpuDevice())
    assert len(seen) >= RESNET.measured_steps and all(seen[-RESNET.measured_steps :])
    seen.clear()
    run_slice(RESNET, device=CpuDevice())
    assert seen and not any(seen)
