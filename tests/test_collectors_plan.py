"""collectors.plan: projecting a profile on a device before running it."""

from __future__ import annotations

import dataclasses
import json

import pytest

from collectors import plan as plan_mod
from collectors.configs import SliceConfig
from collectors.microbench import MicrobenchPlan
from collectors.profiles import Profile, bert, build_profile, gpu_microbench, llama, mlp, resnet
from perfmodel.catalog import get_gpu
from perfmodel.errors import ConfigError
from tests.test_collectors_cli import run


def _profile(
    configs: list[SliceConfig], *, budget_s: float = 600.0, max_config_s: float | None = None
) -> Profile:
    return Profile(
        name="quick", configs=tuple(configs), microbench=None, budget_s=budget_s, max_config_s=max_config_s
    )


def _plan_of(
    monkeypatch: pytest.MonkeyPatch, profile: Profile, device: str, **kw: object
) -> plan_mod.ProfilePlan:
    monkeypatch.setattr(plan_mod, "build_profile", lambda name, kind, supports=None: profile)
    return plan_mod.plan_profile("quick", device, **kw)  # type: ignore[arg-type]


def test_quick_profile_on_this_cpu_keeps_every_configuration_in_order():
    plan = plan_mod.plan_profile("quick", "cpu")
    configs = build_profile("quick", "cpu").configs
    assert [s.label for s in plan.slices] == [c.describe() for c in configs]
    assert plan.device_kind == "cpu" and plan.setup_s == plan_mod.SETUP_S["cpu"]
    starts = [s.start_s for s in plan.slices]
    assert starts == sorted(starts) and starts[0] == pytest.approx(plan.microbench_s)
    measured = [s for s in plan.slices if s.fate == "measure"]
    assert measured, plan.counts()
    for s in measured:
        assert 0 < s.step_time_s <= s.step_time_high_s
        config = configs[[c.describe() for c in configs].index(s.label)]
        steps = config.warmup_steps + config.measured_steps
        assert s.cost_s == pytest.approx(plan.setup_s + steps * s.step_time_s)
    assert plan.projected_s == pytest.approx(
        plan.startup_s + plan.microbench_s + sum(s.cost_s for s in plan.slices)
    )


def test_a_short_budget_cuts_the_tail_and_caps_the_projection():
    plan = plan_mod.plan_profile("quick", "cpu", budget_s=15)
    fates = [s.fate for s in plan.slices]
    assert "after-budget" in fates and fates[0] == "measure"
    first_cut = fates.index("after-budget")
    assert set(fates[first_cut:]) == {"after-budget"}
    assert plan.projected_s <= plan.startup_s + 15 + 1e-9
    assert plan.microbench_s <= plan_mod.MICROBENCH_BUDGET_FRACTION * 15 + 1e-9


def test_models_that_cannot_fit_are_not_run_and_cost_nothing():
    plan = plan_mod.plan_profile("gpu", "l4")  # 24 GB: 7B full fine-tuning cannot fit
    by_label = {s.label: s for s in plan.slices}
    full_7b = by_label["slice-llama-d4096-l32 s2048 mb2 bf16 adamw"]
    assert full_7b.fate in ("oom-predicted", "after-budget")
    oom = [s for s in plan.slices if s.fate == "oom-predicted"]
    assert oom and all(s.cost_s == 0 and "predicted out of memory" in s.note for s in oom)
    roomy = plan_mod.plan_profile("gpu", "h200", budget_s=10_000)
    assert roomy.slices[[s.label for s in roomy.slices].index(full_7b.label)].fate == "measure"


def test_a_configuration_over_the_cap_costs_only_its_warmup(monkeypatch):
    big = llama(512, 8, 8, 8, 1408, vocab=8000, seq_len=1024, micro_batch_size=8, warmup_steps=3)
    plan = _plan_of(monkeypatch, _profile([big], max_config_s=1e-6), "cpu")
    (s,) = plan.slices
    assert s.fate == "too-slow" and "cap" in s.note
    assert s.cost_s == pytest.approx(plan.setup_s + 3 * s.step_time_s)


def test_likely_oom_is_flagged_between_fitting_and_predicted_oom(monkeypatch):
    # Analytic peak above the device memory but under the collector's 1.25x skip margin.
    l7b = llama(4096, 32, 32, 32, 11008, seq_len=4096, micro_batch_size=4, precision="bf16", warmup_steps=3)
    peak = plan_mod.predicted_oom  # the collector's own rule decides 'oom-predicted'
    assert peak(l7b, 141.0) is None
    plan = _plan_of(monkeypatch, _profile([l7b, dataclasses.replace(l7b, micro_batch_size=1)]), "a100-80gb")
    fates = [s.fate for s in plan.slices]
    assert fates[0] in ("oom-likely", "oom-predicted") and fates[1] == "measure"


def test_cnn_and_mlp_facts_on_the_meta_device_match_the_built_model():
    torch = pytest.importorskip("torch")
    from collectors import models

    for config in (
        resnet(16, (1, 1, 1, 1), False, 64, classes=10, micro_batch_size=2),
        mlp(32, 128, 3, micro_batch_size=4),
    ):
        facts = plan_mod.slice_facts(config)
        model = models.build_model(config, "cpu")
        assert facts["params_total"] == sum(p.numel() for p in model.parameters())
        assert facts["forward_gflops_per_sample"] == pytest.approx(
            models.forward_gflops_per_sample(model, "cpu", torch.float32)
        )
    enc = bert(256, 2, 4, 1024, vocab=1000, seq_len=128, micro_batch_size=2, lora_r=4)
    assert (
        plan_mod.slice_facts(enc)["params_total"]
        > plan_mod.slice_facts(dataclasses.replace(enc, lora_r=None))["params_total"]
    )


def test_microbenchmark_time_follows_the_device_and_the_plan():
    fast, slow = get_gpu("h200"), get_gpu("t4")
    gpu_plan = gpu_microbench()
    assert 0 < plan_mod.estimate_microbench_s(gpu_plan, fast) < plan_mod.estimate_microbench_s(gpu_plan, slow)
    bigger = dataclasses.replace(gpu_plan, matmul_sizes=(*gpu_plan.matmul_sizes, 32768))
    assert plan_mod.estimate_microbench_s(bigger, fast) > plan_mod.estimate_microbench_s(gpu_plan, fast)
    tiny = MicrobenchPlan(
        matmul_sizes=(64,),
        matmul_dtypes=("fp32",),
        copy_mb=(),
        attention_shapes=(),
        iters=10,
        sample_target_s=0.01,
    )
    # A call at the launch floor: 50 warm-up calls, then 10 samples of 200 back-to-back calls.
    expected = plan_mod.MICROBENCH_ITEM_S + (50 + 10 * 200) * plan_mod.CALL_FLOOR_S
    assert plan_mod.estimate_microbench_s(tiny, fast) == pytest.approx(expected, rel=1e-6)
    # A call far longer than a sample (~0.16 s on an H200 in fp32): 3 warm-up calls + 10 samples of one call.
    slow_call = dataclasses.replace(tiny, matmul_sizes=(16384,))
    call = 2 * 16384**3 / (0.8 * fast.peak_for("fp32") * 1e12)
    assert call > 0.1
    assert plan_mod.estimate_microbench_s(slow_call, fast) == pytest.approx(
        plan_mod.MICROBENCH_ITEM_S + 13 * call, rel=1e-6
    )


def test_gpu_profile_needs_a_gpu_to_plan_for():
    with pytest.raises(ConfigError, match="--gpu NAME"):
        plan_mod.plan_profile("gpu", "cpu")


def test_cli_plan_json_and_errors():
    res = run("-m", "perfmodel", "collect", "--plan", "--profile", "gpu", "--gpu", "h100-sxm", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["device"] == get_gpu("h100-sxm").name and data["device_kind"] == "cuda"
    assert sum(data["counts"].values()) == len(data["slices"]) == len(build_profile("gpu", "cuda").configs)
    assert data["projected_s"] <= data["startup_s"] + data["budget_s"] + 1e-6
    res = run("-m", "perfmodel", "collect", "--plan", "--profile", "gpu")
    assert res.returncode == 1 and res.stderr.strip().startswith("error: profile 'gpu' runs on a GPU")
    res = run("-m", "collectors", "--plan", "--profile", "gpu", "--gpu", "no-such-gpu")
    assert res.returncode == 1 and "unknown GPU" in res.stderr
    res = run("-m", "collectors", "--plan", "--profile", "quick")
    assert res.returncode == 0 and "profile quick on cpu" in res.stdout


def test_precisions_the_device_lacks_are_dropped_from_the_plan():
    plan = plan_mod.plan_profile("gpu", "t4", budget_s=10_000)  # Turing: no bf16
    assert plan.slices and not any("bf16" in s.label for s in plan.slices if "lightgbm" not in s.label)


def test_a_resumed_cpu_collection_skips_what_this_host_measured(tmp_path):
    from collectors.fingerprint import collect_fingerprint
    from collectors.slices import Measurement, slice_row
    from collectors.storage import ShardWriter

    fingerprint = collect_fingerprint(lambda: [])
    first = build_profile("quick", "cpu").configs[0]
    writer = ShardWriter(tmp_path, prefix="quick", hardware_id=fingerprint.hardware_id)
    measurement = Measurement(status="ok", step_times_s=[0.1] * 10)
    writer.add(slice_row(first, measurement, {}, fingerprint=fingerprint, device_kind="cpu", peak_memory_method="test"))
    writer.flush()
    fresh = plan_mod.plan_profile("quick", "cpu")
    resumed = plan_mod.plan_profile("quick", "cpu", out_dir=tmp_path)
    assert resumed.slices[0].fate == "measured" and resumed.slices[0].cost_s == 0
    assert [s.fate for s in resumed.slices[1:]] == [s.fate for s in fresh.slices[1:]]
    assert resumed.projected_s < fresh.projected_s
