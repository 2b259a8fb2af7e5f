"""collectors.plan: projecting a profile on a device before running it."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

from collectors import plan as plan_mod
from collectors.microbench import MicrobenchPlan
from collectors.profiles import Profile, bert, build_profile, gpu_microbench, llama, mlp, resnet
from perfmodel.catalog import get_gpu
from perfmodel.errors import ConfigError
from perfmodel.measure.configs import SliceConfig
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


def _fixed_predictions(monkeypatch: pytest.MonkeyPatch, step_s: float = 0.5, high_s: float = 0.6) -> None:
    """Every configuration is predicted at `step_s` per step (interval up to `high_s`), fitting."""

    def predict(workload, model_dir=None):
        return SimpleNamespace(
            model_kind="analytic",
            step_time_s=SimpleNamespace(estimate=step_s, high=high_s),
            peak_memory_gb=SimpleNamespace(estimate=1.0),
            fits_in_memory=True,
        )

    monkeypatch.setattr(plan_mod, "predict", predict)


def _tiny(i: int, **kw: object) -> SliceConfig:
    kw.setdefault("seq_len", 8)
    return llama(32 + 8 * i, 1, 2, 2, 64, vocab=64, **kw)  # 2 warm-up + 10 measured steps


def test_a_plan_adds_up_setup_and_steps_by_hand(monkeypatch):
    _fixed_predictions(monkeypatch, step_s=0.5)
    # 3 configurations, each setup 1 s + (2 warm-up + 10 measured) x 0.5 s = 7 s, back to back
    plan = _plan_of(monkeypatch, _profile([_tiny(i) for i in range(3)], budget_s=100), "cpu", setup_s=1.0)
    assert [s.fate for s in plan.slices] == ["measure"] * 3
    assert [s.cost_s for s in plan.slices] == pytest.approx([7.0, 7.0, 7.0])
    assert [s.start_s for s in plan.slices] == pytest.approx([0.0, 7.0, 14.0])
    assert [s.step_time_high_s for s in plan.slices] == pytest.approx([0.6] * 3)
    assert plan.microbench_s == 0 and plan.projected_s == pytest.approx(plan.startup_s + 21.0)


def test_a_budget_cuts_the_plan_where_by_hand_it_runs_out(monkeypatch):
    _fixed_predictions(monkeypatch, step_s=0.5)
    # budget 16 s: 0-7 s and 7-14 s fit; the third (14-21 s) would pass 16 s
    plan = _plan_of(monkeypatch, _profile([_tiny(i) for i in range(4)], budget_s=16), "cpu", setup_s=1.0)
    assert [s.fate for s in plan.slices] == ["measure", "measure", "after-budget", "after-budget"]
    assert plan.projected_s == pytest.approx(plan.startup_s + 14.0)


def test_a_configuration_over_the_cap_costs_only_its_warmup(monkeypatch):
    _fixed_predictions(monkeypatch, step_s=0.5)
    # 10 measured steps x 0.5 s = 5 s > cap 4 s: skipped after setup 1 s + 2 warm-up steps = 2 s
    plan = _plan_of(monkeypatch, _profile([_tiny(0), _tiny(1)], max_config_s=4.0), "cpu", setup_s=1.0)
    assert [s.fate for s in plan.slices] == ["too-slow", "too-slow"] and "cap" in plan.slices[0].note
    assert [s.cost_s for s in plan.slices] == pytest.approx([2.0, 2.0])
    assert plan.slices[1].start_s == pytest.approx(2.0)


@pytest.mark.slow
def test_quick_profile_on_this_cpu_is_a_schedule_within_its_budget():
    plan = plan_mod.plan_profile("quick", "cpu")
    configs = build_profile("quick", "cpu").configs
    assert [s.label for s in plan.slices] == [c.describe() for c in configs]
    assert plan.device_kind == "cpu" and plan.budget_s == 240  # the quick profile: < 5 minutes on a CPU
    measured = [s for s in plan.slices if s.fate == "measure"]
    assert measured, plan.counts()
    assert all(s.cost_s >= 0 for s in plan.slices)
    for a, b in zip(
        plan.slices, plan.slices[1:], strict=False
    ):  # back to back: each starts where the last ended
        if a.fate != "after-budget":
            assert b.start_s == pytest.approx(a.start_s + a.cost_s)
    for s, c in zip(plan.slices, configs, strict=True):
        if s.fate == "measure":  # at least its 12 steps, each no slower than the interval's top
            assert 0 < s.step_time_s <= s.step_time_high_s
            assert s.cost_s > (c.warmup_steps + c.measured_steps) * s.step_time_s
    assert plan.startup_s < plan.projected_s <= plan.startup_s + plan.budget_s + 1e-9


@pytest.mark.slow
def test_a_short_budget_cuts_the_tail_and_caps_the_projection():
    plan = plan_mod.plan_profile("quick", "cpu", budget_s=15)
    fates = [s.fate for s in plan.slices]
    assert "after-budget" in fates and fates[0] == "measure"
    first_cut = fates.index("after-budget")
    assert set(fates[first_cut:]) == {"after-budget"}
    assert plan.projected_s <= plan.startup_s + 15 + 1e-9
    assert plan.microbench_s <= 0.2 * 15 + 1e-9  # micro-benchmarks get at most 20 % of the budget
    longer = plan_mod.plan_profile("quick", "cpu", budget_s=60)
    assert longer.counts().get("measure", 0) >= plan.counts().get("measure", 0)  # more budget, never fewer


@pytest.mark.slow
def test_models_that_cannot_fit_are_not_run_and_cost_nothing():
    plan = plan_mod.plan_profile("gpu", "l4")  # 24 GB: 7B full fine-tuning cannot fit
    by_label = {s.label: s for s in plan.slices}
    full_7b = by_label["slice-llama-d4096-l32 s2048 mb2 bf16 adamw"]
    assert full_7b.fate in ("oom-predicted", "after-budget")
    oom = [s for s in plan.slices if s.fate == "oom-predicted"]
    assert oom and all(s.cost_s == 0 and "predicted out of memory" in s.note for s in oom)
    roomy = plan_mod.plan_profile("gpu", "h200", budget_s=10_000)
    assert roomy.slices[[s.label for s in roomy.slices].index(full_7b.label)].fate == "measure"


def test_memory_fates_only_worsen_as_the_micro_batch_grows(monkeypatch):
    # 7B (6.74e9 parameters) full fine-tuning in bf16 on an 80 GB A100: weights 2 + gradients 2 +
    # Adam 4 bytes per parameter = 54 GB before activations. Activations (Korthikanti et al.,
    # 34 * s * b * d bytes per layer) at s=1024: 4.6 GB per sample over 32 layers, so b=1 fits
    # (~60 GB) and b=16 (~73 GB of activations, ~127 GB) is beyond 1.25 x 80 GB: not run.
    base = llama(4096, 32, 32, 32, 11008, seq_len=1024, micro_batch_size=1, precision="bf16", warmup_steps=3)
    batches = (1, 2, 4, 8, 16)
    plan = _plan_of(
        monkeypatch,
        _profile([dataclasses.replace(base, micro_batch_size=b) for b in batches], budget_s=1e6),
        "a100-80gb",
    )
    order = {"measure": 0, "oom-likely": 1, "oom-predicted": 2}
    fates = [s.fate for s in plan.slices]
    assert fates[0] == "measure" and fates[-1] == "oom-predicted"
    assert [order[f] for f in fates] == sorted(order[f] for f in fates)


def test_cnn_and_mlp_facts_on_the_meta_device_match_the_built_model():
    torch = pytest.importorskip("torch")
    from perfmodel.measure import models

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


def test_a_planned_resnet_50_slice_saves_what_resnet_50_saves_so_its_batch_norms_cost_time():
    """The GPU profile's ResNet-50 slice (width 64, blocks 3-4-6-3, bottleneck, 224 px) planned without
    a device: what it saves for backward is ResNet-50's (catalog resnet50.yaml: 42 MB per image;
    timm's resnet50 measured the same way, collectors/public/timm_saved_activations.csv: 42.66 MB),
    so its plan has batch-norm and ReLU work; without it the plan costed a ResNet-50 step on an H200
    at 4x the speed of its convolutions-and-norms plan. One build per model, whatever the batch."""
    pytest.importorskip("torch")
    from perfmodel.analytic.step import plan_step

    r50 = resnet(64, (3, 4, 6, 3), True, 224, micro_batch_size=64, precision="amp_bf16")
    facts = plan_mod.slice_facts(r50)
    assert facts["activation_mb_per_sample"] == pytest.approx(42.66, rel=0.02)
    assert plan_mod.slice_facts(dataclasses.replace(r50, micro_batch_size=16)) == facts
    workload = plan_mod.workload_from_row(plan_mod._row(r50, "H200"))
    norms = [k for k in plan_step(workload).kernels if k.work.kind == "norm"]
    assert norms and sum(k.work.bytes * k.calls for k in norms) > 0


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
    # By hand: a 64^3 matmul is far below the 10 us launch floor, so a call costs 10 us; warm-up is
    # 50 calls (0.5 ms), each of the 10 samples 200 back-to-back calls (2 ms); plus 50 ms of
    # allocation and bookkeeping: 0.05 + 0.0005 + 0.02 = 0.0705 s.
    assert plan_mod.estimate_microbench_s(tiny, fast) == pytest.approx(0.0705, rel=1e-6)
    # A 16384^3 fp32 matmul on an H200 (67 TFLOP/s dense fp32, at 80 %): 2 * 16384^3 / 53.6e12 =
    # 0.1641 s a call, longer than a sample: 3 warm-up calls + 10 samples of one call + 0.05 s.
    slow_call = dataclasses.replace(tiny, matmul_sizes=(16384,))
    assert plan_mod.estimate_microbench_s(slow_call, fast) == pytest.approx(0.05 + 13 * 0.164106, rel=1e-5)


def test_gpu_profile_needs_a_gpu_to_plan_for():
    with pytest.raises(ConfigError, match="--gpu NAME"):
        plan_mod.plan_profile("gpu", "cpu")


@pytest.mark.slow
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


@pytest.mark.slow
def test_precisions_the_device_lacks_are_dropped_from_the_plan():
    plan = plan_mod.plan_profile("gpu", "t4", budget_s=10_000)  # Turing: no bf16
    assert plan.slices and not any("bf16" in s.label for s in plan.slices if "lightgbm" not in s.label)


@pytest.mark.slow
def test_a_resumed_cpu_collection_skips_what_this_host_measured(tmp_path):
    from perfmodel.measure.fingerprint import collect_fingerprint
    from perfmodel.measure.slices import Measurement, slice_row
    from perfmodel.measure.storage import ShardWriter

    fingerprint = collect_fingerprint(lambda: [])
    first = build_profile("quick", "cpu").configs[0]
    writer = ShardWriter(tmp_path, prefix="quick", hardware_id=fingerprint.hardware_id)
    measurement = Measurement(status="ok", step_times_s=[0.1] * 10)
    writer.add(
        slice_row(
            first, measurement, {}, fingerprint=fingerprint, device_kind="cpu", peak_memory_method="test"
        )
    )
    writer.flush()
    fresh = plan_mod.plan_profile("quick", "cpu")
    resumed = plan_mod.plan_profile("quick", "cpu", out_dir=tmp_path)
    assert resumed.slices[0].fate == "measured" and resumed.slices[0].cost_s == 0
    assert [s.fate for s in resumed.slices[1:]] == [s.fate for s in fresh.slices[1:]]
    assert resumed.projected_s < fresh.projected_s
