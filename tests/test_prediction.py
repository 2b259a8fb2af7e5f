"""The prediction layer: intervals, totals, memory verdict, analytic fallback."""

from __future__ import annotations

import pytest

import perfmodel
from perfmodel.analytic.totals import total_time_s
from perfmodel.catalog import get_gpu, get_model
from perfmodel.prediction import ANALYTIC_EFFICIENCY, predict
from perfmodel.workload import ParallelSpec, TrainingSpec, Workload


def workload(**kw) -> Workload:
    gpu = kw.pop("gpu", "A100-80GB")
    kw.setdefault("tokens", 1e8)
    return Workload(model=get_model("llama2-7b"), training=TrainingSpec(**kw), gpu=get_gpu(gpu), parallel=ParallelSpec())


def test_analytic_fallback_when_no_learned_model(tmp_path):
    pred = predict(workload(lora_r=16), model_dir=tmp_path)
    assert pred.model_kind == "analytic" and pred.trained_rows == 0
    lo, mid, hi = ANALYTIC_EFFICIENCY
    bound = pred.analytic.t_bound_s
    assert pred.step_time_s.estimate == pytest.approx(bound / mid)
    assert pred.step_time_s.low == pytest.approx(bound / hi)
    assert pred.step_time_s.high == pytest.approx(bound / lo)
    assert any("analytic model only" in w for w in pred.warnings)


def test_total_time_interval_scales_with_step_interval_not_sqrt_steps(tmp_path):
    pred = predict(workload(lora_r=16, tokens=1e9), model_dir=tmp_path)
    plan = pred.plan
    assert pred.total_time_s.low == pytest.approx(total_time_s(plan, pred.step_time_s.low))
    assert pred.total_time_s.high == pytest.approx(total_time_s(plan, pred.step_time_s.high))
    step_ratio = pred.step_time_s.high / pred.step_time_s.low
    train_part_high = pred.total_time_s.high - plan.startup_s - plan.checkpoint_s
    train_part_low = pred.total_time_s.low - plan.startup_s - plan.checkpoint_s
    assert train_part_high / train_part_low == pytest.approx(step_ratio)


def test_rates_are_inverse_of_step_time(tmp_path):
    pred = predict(workload(seq_len=1024, micro_batch_size=2, lora_r=8), model_dir=tmp_path)
    tokens_per_step = 1024 * 2
    assert pred.throughput_tokens_per_s.estimate == pytest.approx(tokens_per_step / pred.step_time_s.estimate)
    assert pred.throughput_tokens_per_s.low == pytest.approx(tokens_per_step / pred.step_time_s.high)
    assert pred.gpu_hours.estimate == pytest.approx(pred.total_time_s.estimate / 3600)


def test_memory_verdict_and_margin(tmp_path):
    fits = predict(workload(lora_r=16, micro_batch_size=1), model_dir=tmp_path)
    assert fits.fits_in_memory and fits.memory_margin_gb > 0
    full = predict(workload(precision="amp_bf16", micro_batch_size=8), model_dir=tmp_path)
    assert not full.fits_in_memory and full.memory_margin_gb < 0
    assert any("does not fit" in w for w in full.warnings)


def test_confidence_level_is_checked(tmp_path):
    from perfmodel.errors import ConfigError

    with pytest.raises(ConfigError, match="confidence"):
        predict(workload(), confidence=1.5, model_dir=tmp_path)


def test_json_contract_keys(tmp_path):
    data = predict(workload(lora_r=16), model_dir=tmp_path).to_json()
    for key in ("throughput_tokens_per_s", "throughput_samples_per_s", "step_time_s", "total_time_s", "gpu_hours", "peak_memory_gb"):
        assert set(data[key]) == {"estimate", "low", "high"}
    for key in ("confidence_level", "total_steps", "fits_in_memory", "model", "workload", "hardware", "warnings"):
        assert key in data
    assert data["model"] == {"kind": "analytic", "version": perfmodel.__version__, "trained_rows": 0}
    # where the kernel model's time goes: every kind's device seconds, summing to its compute and
    # memory-bound terms (matmul and attention; the rest)
    kinds, a = data["analytic"]["kernel_seconds_by_kind"], data["analytic"]
    assert {"matmul", "attention", "norm", "loss"} <= set(kinds) and all(v >= 0 for v in kinds.values())
    assert kinds["matmul"] + kinds["attention"] == pytest.approx(a["t_compute_s"])
    assert sum(kinds.values()) == pytest.approx(a["t_compute_s"] + a["t_memory_s"])
    assert a["l2_saved_s"] >= 0


def test_the_l2_saving_is_what_streaming_the_small_kernels_from_dram_would_add():
    # a 7B LoRA step on an L40S (96 MB L2, 864 GB/s GDDR6): its eager norm and elementwise launches at
    # micro-batch 8 fit in the L2; on an H100 (50 MB, 3.35 TB/s) or an A100 the L2 is no faster than the HBM
    from perfmodel.analytic.step import plan_step, price_step
    from perfmodel.kernels.efficiency import EfficiencyParams, load_efficiency

    shipped = load_efficiency()
    dram_only = EfficiencyParams(values={k: v for k, v in shipped.values.items() if not k.startswith("l2.")})
    for gpu, saves in (("L40S", True), ("H100-SXM", False), ("A100-80GB", False)):
        w = workload(lora_r=16, gpu=gpu, micro_batch_size=8, seq_len=512)
        plan = plan_step(w)
        with_l2, without = price_step(w, plan, shipped), price_step(w, plan, dram_only)
        added = sum(without.by_kind_s.values()) - sum(with_l2.by_kind_s.values())
        assert with_l2.l2_saved_s == pytest.approx(added, rel=1e-6, abs=1e-9)
        assert (with_l2.l2_saved_s > 0.1 * sum(with_l2.by_kind_s.values())) is saves
        if not saves:  # not the rounding of two equal prices (--json printed 1.4e-17 s on an A100)
            assert with_l2.l2_saved_s == 0.0


def test_gbm_round_processes_every_row_and_runs_on_the_host(tmp_path):
    from perfmodel.workload import ModelSpec

    gbm = Workload(
        model=ModelSpec(name="lightgbm", family="lightgbm", arch="gbm"),
        training=TrainingSpec(gbm_rows=100_000, gbm_features=20, gbm_rounds=300),
        gpu=get_gpu("A100-80GB"),
        parallel=ParallelSpec(),
    )
    pred = predict(gbm, model_dir=tmp_path)
    assert pred.total_steps == 300
    assert pred.throughput_tokens_per_s is None
    assert pred.throughput_samples_per_s.estimate == pytest.approx(100_000 / pred.step_time_s.estimate)
    assert any("host CPU" in w for w in pred.warnings)


@pytest.mark.parametrize("seed", range(3))
def test_throughput_never_beats_the_roofline_floor(seed):
    """Property: for random valid workloads, the throughput interval's upper end is at most the
    roofline's (samples per step / floor step time), and MFU never exceeds 100%."""
    import random

    from perfmodel.catalog import get_gpu, get_model
    from perfmodel.workload import ParallelSpec, TrainingSpec, Workload

    rng = random.Random(seed)
    for _ in range(25):
        gpu = get_gpu(rng.choice(["A100-80GB", "H100-SXM", "RTX-4090", "L40S", "MI300X"]))
        model = get_model(rng.choice(["llama2-7b", "gpt2", "bert-base", "llama3-8b", "resnet50"]))
        precision = rng.choice(["bf16", "amp_bf16", "fp32"])
        n = rng.choice([1, 8])
        w = Workload(
            model=model,
            training=TrainingSpec(
                seq_len=rng.choice([128, 512, 2048]),
                micro_batch_size=rng.choice([1, 4, 32]),
                precision=precision,
                lora_r=rng.choice([None, 16]) if model.is_transformer else None,
                activation_checkpointing=rng.random() < 0.3,
                tokens=1e9,
            ),
            gpu=gpu,
            parallel=ParallelSpec(num_gpus=n, num_nodes=1, strategy=rng.choice(["ddp", "fsdp"])),
        )
        for use_learned in (True, False):
            pred = predict(w, use_learned=use_learned)
            floor_rate = pred.plan.samples_per_step / pred.analytic.t_roofline_s
            assert pred.throughput_samples_per_s.high <= floor_rate * (1 + 1e-9)
            assert pred.step_time_s.low >= pred.analytic.t_roofline_s * (1 - 1e-9)
            if pred.mfu is not None:
                assert pred.mfu.high <= 1.0 + 1e-9
