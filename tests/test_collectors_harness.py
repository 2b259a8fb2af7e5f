"""The collection loop with a fake GPU and a fake clock: warm-up exclusion, OOM rows, resume,
budget stop, Ctrl-C, shard flushing, and the gpu profile exercised end to end on the CPU."""

from __future__ import annotations

import dataclasses
import os
import statistics

import pandas as pd
import pytest
import torch

from collectors.harness import run_profile
from collectors.profiles import Profile, build_profile
from collectors.summary import summarize
from perfmodel.errors import ConfigError
from perfmodel.measure import storage
from perfmodel.measure.configs import SliceConfig, make_row_id, transformer_params
from perfmodel.measure.fingerprint import GpuInfo, collect_fingerprint, gpu_catalog_key
from perfmodel.measure.slices import PreparedSlice, prepare_slice
from perfmodel.schema import COLUMNS, conform
from tests.fake_devices import FakeGpu


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


H200 = GpuInfo(
    name="NVIDIA H200",
    memory_total_mib=143771,
    sm_count=132,
    compute_capability="9.0",
    max_sm_clock_mhz=1980,
    max_mem_clock_mhz=3201,
    power_limit_w=700.0,
    driver_version="550.54",
    cuda_driver_version="12.4",
)


@pytest.fixture
def fp():
    return collect_fingerprint(lambda: [H200])


def tiny(i: int = 0, **kw) -> SliceConfig:
    return SliceConfig(
        kind="llama",
        hidden_size=32 + 8 * i,
        num_layers=1,
        num_heads=2,
        num_kv_heads=2,
        ffn_hidden_size=64,
        vocab_size=64,
        seq_len=8,
        micro_batch_size=2,
        **kw,
    )


def fake_prepare(clock: FakeClock, durations=lambda call: 1.0, fail=None, calls=None):
    """prepare() whose step advances the fake clock by durations(call_index) and optionally
    raises fail(config, call_index) (an exception instance or None)."""

    def prepare(config: SliceConfig, device) -> PreparedSlice:
        if calls is not None:
            calls.append(config)
        state = {"n": 0}
        if fail is not None and (exc := fail(config, -1)) is not None:
            raise exc

        def step() -> None:
            i = state["n"]
            state["n"] += 1
            if fail is not None and (exc := fail(config, i)) is not None:
                raise exc
            clock.t += durations(i)

        tokens = config.micro_batch_size * (config.seq_len or 1)
        return PreparedSlice(
            step=step,
            device=device,
            facts={
                "params_total": 1e6,
                "samples_per_step": config.micro_batch_size,
                "tokens_per_step": tokens,
            },
        )

    return prepare


def profile_of(configs, **kw) -> Profile:
    return Profile(
        name="quick", configs=tuple(configs), microbench=None, budget_s=kw.pop("budget_s", 1e9), **kw
    )


def run(configs, fp, tmp_path, clock, prepare, device=None, **kw):
    prof = profile_of(
        configs, **{k: kw.pop(k) for k in ("budget_s", "flush_every", "max_config_s") if k in kw}
    )
    return run_profile(
        prof, fingerprint=fp, device=device or FakeGpu(), out_dir=tmp_path, clock=clock, prepare=prepare, **kw
    )


def test_warmup_steps_are_excluded_and_every_step_is_kept(fp, tmp_path):
    clock = FakeClock()
    measured = [0.10 + 0.01 * k for k in range(10)]
    durations = lambda i: 5.0 if i < 2 else measured[i - 2]  # noqa: E731 - two slow warm-up steps
    device = FakeGpu()
    res = run([tiny()], fp, tmp_path, clock, fake_prepare(clock, durations), device=device)
    rows = storage.read_rows(tmp_path)
    assert res.stopped == "complete" and len(rows) == 1
    row = rows.iloc[0]
    assert list(row["step_times_s"]) == pytest.approx(measured)
    assert row["step_time_s"] == pytest.approx(statistics.median(measured))
    assert row["step_time_std_s"] == pytest.approx(statistics.stdev(measured))
    assert row["warmup_steps"] == 2 and row["measured_steps"] == 10
    assert device.syncs >= 12  # every timed step ends with a device synchronisation
    assert device.begins == 1 and device.resets == 1
    assert row["tokens_per_s"] == pytest.approx(16 / statistics.median(measured))
    # PaLM appendix B by hand for tiny(): d=32, L=1, s=8, ffn 64, vocab 64, 2 heads of 16 (kv 2).
    # N = non-embedding parameters: q,k,v,o 4*32*32 + gated MLP 3*32*64 + 2 norms 2*32 + final
    # norm 32 + LM head 32*64 = 12384; per token 6N + 12*L*d*s = 74304 + 3072 = 77376; 16 tokens.
    # perfmodel.analytic leaves the final norm's 32 weights out of N (0.25 % fewer FLOPs here).
    palm_tflops = 77376 * 16 / statistics.median(measured) / 1e12
    assert row["achieved_tflops_per_gpu"] == pytest.approx(palm_tflops, rel=3e-3)
    # MFU against the H200's dense fp32 datasheet peak, 67 TFLOP/s (NVIDIA H200 datasheet).
    assert row["reported_mfu"] == pytest.approx(row["achieved_tflops_per_gpu"] / 67.0)
    assert row["gpu"] == gpu_catalog_key("NVIDIA H200") and row["gpu_name_raw"] == "NVIDIA H200"
    assert row["peak_memory_gb"] == 1.5 and row["status"] == "ok"
    assert row["row_id"] == make_row_id(fp.hardware_id, tiny(), "cuda")
    assert row["citation"] == f"perfmodel collectors v0.1.0 on {fp.hardware_id}"
    assert "noisy" not in (row["notes"] or "")


def test_unsteady_step_times_are_flagged_noisy(fp, tmp_path):
    clock = FakeClock()
    durations = lambda i: 0.1 if i % 2 else 1.0  # noqa: E731
    run([tiny()], fp, tmp_path, clock, fake_prepare(clock, durations))
    assert "noisy: step-time coefficient of variation" in storage.read_rows(tmp_path).iloc[0]["notes"]


def test_oom_is_a_row_not_a_crash(fp, tmp_path):
    clock = FakeClock()

    def fail(config, i):
        if config.hidden_size == 40 and i == 2:
            return torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        if config.hidden_size == 48 and i == -1:
            return RuntimeError("CUDA error: out of memory")
        if config.hidden_size == 56 and i == 0:
            return ValueError("shape mismatch")
        return None

    res = run(
        [tiny(0), tiny(1), tiny(2), tiny(3), tiny(4)], fp, tmp_path, clock, fake_prepare(clock, fail=fail)
    )
    rows = storage.read_rows(tmp_path).set_index("hidden_size")
    assert res.stopped == "complete" and res.status_counts == {"ok": 2, "oom": 2, "error": 1}
    assert rows.loc[40, "status"] == "oom" and "out of memory in the training steps" in rows.loc[40, "notes"]
    assert rows.loc[40, "peak_memory_gb"] == 1.5
    assert rows.loc[48, "status"] == "oom" and "while building" in rows.loc[48, "notes"]
    assert pd.isna(rows.loc[48, "peak_memory_gb"])
    assert rows.loc[56, "status"] == "error" and "ValueError" in rows.loc[56, "notes"]
    assert pd.isna(rows.loc[40, "step_time_s"]) and rows.loc[40, "step_times_s"] is None
    assert rows.loc[64, "status"] == "ok"  # the loop went on after the failures


def test_obviously_too_big_is_an_oom_row_without_running(fp, tmp_path):
    clock = FakeClock()
    calls: list[SliceConfig] = []
    big = SliceConfig(
        kind="llama",
        hidden_size=4096,
        num_layers=32,
        num_heads=32,
        num_kv_heads=32,
        ffn_hidden_size=11008,
        vocab_size=32000,
        seq_len=2048,
        micro_batch_size=2,
        precision="amp_bf16",
    )
    run([big], fp, tmp_path, clock, fake_prepare(clock, calls=calls), device=FakeGpu(memory_gb=40.0))
    row = storage.read_rows(tmp_path).iloc[0]
    assert (
        calls == [] and row["status"] == "oom" and row["notes"].startswith("not run: predicted out of memory")
    )


def test_second_run_skips_measured_row_ids(fp, tmp_path):
    clock = FakeClock()
    calls: list[SliceConfig] = []
    configs = [tiny(i) for i in range(4)]
    first = run(configs, fp, tmp_path, clock, fake_prepare(clock, calls=calls))
    assert first.rows_written == 4 and len(calls) == 4
    calls.clear()
    second = run(configs, fp, tmp_path, clock, fake_prepare(clock, calls=calls))
    assert second.rows_written == 0 and second.skipped_existing == 4 and calls == []
    third = run([*configs, tiny(9)], fp, tmp_path, clock, fake_prepare(clock, calls=calls))
    assert third.rows_written == 1 and calls == [tiny(9)]
    rows = storage.read_rows(tmp_path)
    assert len(rows) == 5 and rows["row_id"].is_unique


def test_budget_stops_cleanly_and_keeps_what_was_measured(fp, tmp_path):
    clock = FakeClock()  # every step 1 s: a configuration takes 12 s (2 warm-up + 10 measured)
    calls: list[SliceConfig] = []
    res = run([tiny(i) for i in range(5)], fp, tmp_path, clock, fake_prepare(clock, calls=calls), budget_s=25)
    # third config: starts at 24 s < 25 s, but after warm-up (26 s) its 10 s of steps would pass 25 s
    assert res.stopped == "budget" and res.rows_written == 2 and len(calls) == 3
    assert len(storage.read_rows(tmp_path)) == 2


def test_ctrl_c_keeps_finished_configurations(fp, tmp_path):
    clock = FakeClock()
    fail = lambda config, i: KeyboardInterrupt() if config.hidden_size == 48 and i == 5 else None  # noqa: E731
    res = run(
        [tiny(i) for i in range(5)], fp, tmp_path, clock, fake_prepare(clock, fail=fail), flush_every=100
    )
    assert res.stopped == "interrupted" and res.rows_written == 2
    rows = storage.read_rows(tmp_path)
    assert sorted(rows["hidden_size"]) == [32, 40]
    conform(rows, COLUMNS)


def test_shards_are_written_every_few_configurations(fp, tmp_path):
    clock = FakeClock()
    res = run([tiny(i) for i in range(5)], fp, tmp_path, clock, fake_prepare(clock), flush_every=2)
    shards = storage.list_shards(tmp_path)
    assert len(shards) == 3 and res.shards == [str(p) for p in shards]
    for i, path in enumerate(shards, 1):
        info = storage.parse_shard_name(path)
        assert info["prefix"] == "quick" and info["hw"] == fp.hardware_id and info["part"] == f"{i:03d}"
        assert len(info["date"]) == 8 and info["writer"] == str(os.getpid())
    assert (tmp_path / f"fingerprint__{fp.hardware_id}.json").is_file()
    text = summarize(tmp_path)
    assert "Training-slice rows: 5" in text and fp.hardware_id in text and "NVIDIA H200" in text


def test_too_slow_configuration_is_skipped_not_recorded(fp, tmp_path):
    clock = FakeClock()
    durations = lambda i: 10.0  # noqa: E731 - projected 100 s of measured steps
    res = run([tiny()], fp, tmp_path, clock, fake_prepare(clock, durations), max_config_s=30)
    assert res.rows_written == 0 and len(res.skipped_too_slow) == 1


# --- profiles ------------------------------------------------------------------------------------


def test_gpu_profile_covers_the_fine_tuning_grid():
    prof = build_profile("gpu", "cuda")
    configs = prof.configs
    llamas = [c for c in configs if c.kind == "llama"]
    params = {c: transformer_params(c) for c in llamas}
    assert 5e7 < min(params.values()) < 7e7 and 6.5e9 < max(params.values()) < 7e9
    seven_b = [c for c in llamas if params[c] > 6.5e9]
    assert any(c.lora_r and c.precision == "bf16" for c in seven_b)
    assert any(not c.lora_r and c.precision == "bf16" for c in seven_b)
    assert {c.seq_len for c in llamas} >= {256, 8192} and min(c.seq_len for c in llamas) == 256
    assert max(c.seq_len for c in llamas) == 8192
    mbs = {c.micro_batch_size for c in configs if c.kind != "lightgbm"}
    assert min(mbs) == 1 and 64 in mbs
    assert {c.precision for c in configs} == {"fp32", "tf32", "amp_bf16", "amp_fp16", "bf16", "fp16"}
    assert any(c.activation_checkpointing for c in configs) and {c.optimizer for c in configs} == {
        "adamw",
        "sgd",
    }
    # most informative first: the first dozen already cover every kind and 60M..7B
    head = configs[:13]
    assert {c.kind for c in head} == {"llama", "bert", "resnet", "mlp", "lightgbm"}
    assert {c.repeat_index for c in configs} == {0, 1, 2}
    assert len({make_row_id("h", c, "cuda") for c in configs}) == len(configs)
    assert prof.budget_s <= 480 and prof.max_config_s
    # the NCHW <-> NHWC transposition term measured directly: ResNet-50 at 64 in both formats
    r50 = [c for c in configs if c.kind == "resnet" and c.cnn_blocks == (3, 4, 6, 3) and c.micro_batch_size == 64
           and c.precision == "amp_bf16" and not c.activation_checkpointing and c.optimizer == "adamw"]  # fmt: skip
    assert {c.channels_last for c in r50} == {False, True}


def test_gpu_profile_refuses_a_cpu():
    with pytest.raises(ConfigError, match="needs a CUDA device"):
        build_profile("gpu", "cpu")
    with pytest.raises(ConfigError, match="unknown profile"):
        build_profile("huge", "cpu")


def test_quick_profile_covers_kinds_precisions_and_options():
    from perfmodel.measure.device import CpuDevice

    configs = build_profile("quick", "cpu", CpuDevice().supports).configs
    assert {c.kind for c in configs} == {"llama", "bert", "resnet", "mlp", "lightgbm"}
    assert {"fp32", "amp_bf16"} <= {c.precision for c in configs}
    assert not any(c.precision in ("fp16", "amp_fp16", "tf32") for c in configs)
    assert any(c.activation_checkpointing for c in configs) and any(c.lora_r for c in configs)
    assert {c.optimizer for c in configs} == {"adamw", "sgd"}
    assert sorted(c.repeat_index for c in configs if c.repeat_index) == [1, 2]


def shrink(c: SliceConfig) -> SliceConfig:
    """The same configuration at toy size, for running the gpu grid on a CPU."""
    if c.kind == "llama":
        return dataclasses.replace(
            c,
            hidden_size=32,
            num_layers=1,
            num_heads=4,
            num_kv_heads=2 if c.num_kv_heads != c.num_heads else 4,
            ffn_hidden_size=64,
            vocab_size=128,
            seq_len=16,
            micro_batch_size=2,
        )
    if c.kind == "bert":
        return dataclasses.replace(
            c,
            hidden_size=32,
            num_layers=1,
            num_heads=2,
            ffn_hidden_size=64,
            vocab_size=128,
            seq_len=16,
            micro_batch_size=2,
        )
    if c.kind == "resnet":
        return dataclasses.replace(
            c, cnn_width=4, cnn_blocks=(1, 1), image_size=32, num_classes=10, micro_batch_size=2
        )
    if c.kind == "mlp":
        return dataclasses.replace(c, in_features=8, hidden_size=16, num_layers=2, micro_batch_size=8)
    return dataclasses.replace(c, micro_batch_size=500, in_features=4)


@pytest.mark.slow
def test_gpu_profile_runs_on_a_fake_gpu(fp, tmp_path):
    prof = build_profile("gpu", "cuda", FakeGpu().supports)
    picked = [prof.configs[0], prof.configs[2]]  # 160M amp_bf16 and 7B LoRA bf16, at toy size
    assert picked[1].lora_r and picked[1].precision == "bf16"
    small = dataclasses.replace(prof, configs=tuple(shrink(c) for c in picked), microbench=None)
    res = run_profile(small, fingerprint=fp, device=FakeGpu(), out_dir=tmp_path, prepare=prepare_slice)
    assert res.stopped == "complete" and res.status_counts == {"ok": 2}, res
    rows = storage.read_rows(tmp_path)
    assert set(rows["gpu"]) == {gpu_catalog_key("NVIDIA H200")} and set(rows["hardware_id"]) == {
        fp.hardware_id
    }
    assert set(rows["precision"]) == {"amp_bf16", "bf16"} and rows["lora_r"].notna().sum() == 1
    assert (rows["achieved_tflops_per_gpu"] > 0).all() and rows["measured_steps"].eq(10).all()
    assert storage.list_shards(tmp_path)[0].name.startswith(f"gpu__{fp.hardware_id}__")
    conform(pd.DataFrame(rows), COLUMNS)


@pytest.mark.slow
def test_microbench_rows_are_measured_once(tmp_path):
    from collectors.microbench import MicrobenchPlan
    from perfmodel.measure.device import CpuDevice

    cpu_fp = collect_fingerprint(lambda: [])
    plan = MicrobenchPlan(
        matmul_sizes=(32,),
        matmul_dtypes=("fp32", "fp16"),
        copy_mb=(1,),
        attention_shapes=(),
        iters=2,
        sample_target_s=0.0005,
    )
    prof = Profile(name="quick", configs=(), microbench=plan, budget_s=60)
    first = run_profile(prof, fingerprint=cpu_fp, device=CpuDevice(), out_dir=tmp_path)
    second = run_profile(prof, fingerprint=cpu_fp, device=CpuDevice(), out_dir=tmp_path)
    assert first.microbench_rows == 3 and second.microbench_rows == 0
    rows = storage.read_rows(tmp_path, microbench=True)
    assert sorted(rows["status"]) == ["ok", "ok", "unsupported"]
    assert storage.list_shards(tmp_path, microbench=True)[0].name.startswith(
        f"microbench__{cpu_fp.hardware_id}__"
    )
