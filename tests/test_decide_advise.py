"""Advice: over several configs and constraints, no option returned fails to fit or breaks a
constraint (checked again through `load_workload` + `predict`, a path advise does not use), the
global batch is kept, each option's numbers are the physics-consistent prediction of its run, rankings are ordered, and Ludwig options are written in Ludwig keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from perfmodel.config import load_workload
from perfmodel.config.source import set_dotted
from perfmodel.decide.advise import advise
from perfmodel.decide.physics import consistent
from perfmodel.errors import CatalogError, ConfigError
from perfmodel.prediction import predict

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
HOUR = 3600.0


def _global_batch(w) -> int:
    return w.training.micro_batch_size * w.training.grad_accum_steps * w.parallel.data_parallel


def _check(result, config: Path, *, data: dict, deadline_s=None, budget_usd=None, conservative=False):
    base = load_workload(config, **data)
    options = [*result.by_time, *result.by_cost]
    for opt in options:
        o = opt.outcome
        assert o.fits_in_memory and opt.meets_constraints
        t = o.total_time_s.high if conservative else o.total_time_s.estimate
        if deadline_s is not None:
            assert t <= deadline_s
        if budget_usd is not None:
            assert o.cost_usd is not None
            assert (o.cost_usd.high if conservative else o.cost_usd.estimate) <= budget_usd
        # the same change through the ordinary config path: still fits, same prediction
        sets = [f"{k}={json.dumps(v) if isinstance(v, bool) else v}" for k, v in opt.native_changes.items()]
        w = load_workload(config, overrides=sets, **data)
        again = predict(w)  # the model's own, then the physics on it (perfmodel/decide/physics.py)
        assert again.fits_in_memory
        moved = consistent([w])[0]
        assert moved.raw.total_time_s.estimate == pytest.approx(again.total_time_s.estimate, rel=1e-9)
        assert moved.outcome.total_time_s.estimate == pytest.approx(o.total_time_s.estimate, rel=1e-9)
        assert bool(opt.adjusted) == (abs(moved.outcome.total_time_s.estimate / again.total_time_s.estimate - 1) > 1e-6)
        assert _global_batch(w) == _global_batch(base) == result.global_batch
    times = [o.outcome.total_time_s.estimate for o in result.by_time]
    assert times == sorted(times)
    costs = [o.outcome.cost_usd.estimate for o in result.by_cost]
    assert costs == sorted(costs)
    return options


CASES = [
    ("llama2-7b-lora.yaml", {}, {"deadline_s": 12 * HOUR, "budget_usd": 150.0}),
    ("llama2-7b-lora.yaml", {}, {"deadline_s": 30 * HOUR, "conservative": True}),
    ("custom-dims-qlora.yaml", {}, {"budget_usd": 40.0}),
    ("llama3-8b-pretrain-fsdp.yaml", {"tokens": 2e8}, {"deadline_s": 2 * HOUR, "max_gpus": 32}),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,data,constraints", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_no_option_breaks_a_constraint_or_does_not_fit(name, data, constraints):
    config = EXAMPLES / name
    gpus = ["A100-80GB", "H100-SXM", "L40S", "RTX-4090"]
    result = advise(config, gpus=gpus, top=3, **constraints, **data)
    options = _check(
        result,
        config,
        data=data,
        deadline_s=constraints.get("deadline_s"),
        budget_usd=constraints.get("budget_usd"),
        conservative=constraints.get("conservative", False),
    )
    assert options, "these constraints are loose enough to be met"
    assert result.searched >= result.fitting >= result.meeting >= 0
    assert {o.outcome.gpu for o in options} <= set(gpus)
    assert all(o.outcome.num_gpus <= constraints.get("max_gpus", 64) for o in options)


def test_an_impossible_deadline_leaves_no_option():
    result = advise(EXAMPLES / "llama2-7b-lora.yaml", deadline_s=1.0, gpus=["A100-80GB"], max_gpus=8)
    assert result.by_time == () and result.by_cost == ()
    assert result.current is not None and not result.current.meets_constraints


@pytest.mark.slow
def test_ludwig_options_are_ludwig_keys_that_give_the_same_run(tmp_path):
    config = EXAMPLES / "ludwig-llama2-7b-qlora.yaml"
    result = advise(
        config, tokens=1e8, deadline_s=6 * HOUR, gpus=["A100-80GB", "H100-SXM", "L40S"], max_gpus=16, top=3
    )
    _check(result, config, data={"tokens": 1e8}, deadline_s=6 * HOUR)
    assert result.dialect == "ludwig"
    for i, opt in enumerate([*result.by_time, *result.by_cost]):
        raw = yaml.safe_load(config.read_text())
        sets = []
        for change in opt.changes:
            if change.flag:
                assert change.key.startswith("hardware.")
                sets.append(f"{change.key}={change.new}")
            else:
                assert change.key.split(".")[0] in ("trainer", "backend", "quantization"), change.key
                set_dotted(raw, change.key, change.new)
        edited = tmp_path / f"opt{i}.yaml"
        edited.write_text(yaml.safe_dump(raw))
        w = load_workload(edited, tokens=1e8, overrides=sets)
        again = consistent([w])[0].outcome  # the same run, through the physics as advise predicts it
        assert again.total_time_s.estimate == pytest.approx(opt.outcome.total_time_s.estimate, rel=1e-9)
        assert again.fits_in_memory


def test_bad_arguments_are_config_errors():
    example = EXAMPLES / "llama2-7b-lora.yaml"
    with pytest.raises(ConfigError):
        advise(example, deadline_s=-1)
    with pytest.raises(ConfigError):
        advise(example, max_gpus=0)
    with pytest.raises(CatalogError, match="did you mean"):
        advise(example, gpus=["A100-80"])


@pytest.mark.slow
def test_a_deepspeed_ludwig_config_keeps_its_deepspeed_settings_unless_the_strategy_changes(tmp_path):
    config = ROOT / "tests" / "fixtures" / "configs" / "ludwig_llm_lora_deepspeed_ray.yaml"
    raw = yaml.safe_load(config.read_text())
    result = advise(config, rows=100000, gpus=["A100-80GB", "H100-SXM"], max_gpus=16, top=4)
    options = [*result.by_time, *result.by_cost]
    assert options
    for i, opt in enumerate(options):
        edited = yaml.safe_load(config.read_text())
        sets = []
        for change in opt.changes:
            if change.flag:
                sets.append(f"{change.key}={change.new}")
            else:
                set_dotted(edited, change.key, change.new)
        if not any(c.key == "backend.trainer.strategy" for c in opt.changes):
            assert edited["backend"]["trainer"]["strategy"] == raw["backend"]["trainer"]["strategy"]
        path = tmp_path / f"ds{i}.yaml"
        path.write_text(yaml.safe_dump(edited))
        w = load_workload(path, rows=100000, overrides=sets)
        # the option is what sweep and compare say for the edited config: the model's own prediction,
        # moved only where the physics rules move it (and then it says why)
        (same,) = consistent([w])
        assert same.outcome.total_time_s.estimate == pytest.approx(opt.outcome.total_time_s.estimate, rel=1e-9)
        assert same.raw.total_time_s.estimate == pytest.approx(predict(w).total_time_s.estimate, rel=1e-9)
        assert (same.why == "") == (opt.adjusted == "")
        assert opt.native_changes.get("hardware.cpu_offload", True) == w.parallel.cpu_offload


def test_gradient_boosted_trees_have_nothing_to_search():
    config = ROOT / "tests" / "fixtures" / "configs" / "ludwig_gbm.yaml"
    result = advise(config, rows=100000)
    assert result.by_time == () and result.searched == 0
    assert any("LightGBM" in n for n in result.notes)
    assert result.current is not None and result.current.outcome.fits_in_memory


@pytest.mark.slow
def test_options_the_config_cannot_express_are_skipped_not_the_end_of_the_search():
    """Ludwig 0.17 refuses quantization on the ray backend, so every multi-GPU option of a QLoRA
    config is refused when written as the config. The screen ranks those first (they are fastest):
    advise must walk past them to the single-GPU options and say why the others went."""
    result = advise(EXAMPLES / "ludwig-llama2-7b-qlora.yaml", tokens=1e8, deadline_s=48 * 3600, top=2, use_learned=False)
    assert result.by_time and result.by_cost
    assert all(o.native_changes.get("hardware.num_gpus", 1) == 1 for o in (*result.by_time, *result.by_cost))
    assert any("requires the 'local' backend" in n for n in result.notes)


def test_each_option_carries_its_paired_ratio_to_the_config_as_it_is():
    from perfmodel.decide.compare import ratio_interval
    from perfmodel.decide.pairs import kind_of_keys

    result = advise(EXAMPLES / "llama2-7b-lora.yaml", gpus=["A100-80GB", "H100-SXM"], max_gpus=8, top=2)
    assert result.current is not None and result.by_time
    for opt in (*result.by_time, *result.by_cost):
        r = opt.vs_current
        assert r is not None and r.kind == kind_of_keys(opt.native_changes)
        assert r.estimate == pytest.approx(
            opt.outcome.total_time_s.estimate / result.current.outcome.total_time_s.estimate
        )
        indep = ratio_interval(result.current.outcome.total_time_s, opt.outcome.total_time_s)
        assert indep.low <= r.low <= r.estimate <= r.high <= indep.high
        assert opt.verdict_vs_current(result.confidence_level).startswith("this option")
        assert opt.to_json()["time_ratio_to_current"]["rho"] == r.rho
    assert result.first_vs_second().startswith("option 1")
    assert result.to_json()["fastest_vs_next"] == result.first_vs_second()


def test_a_16bit_resnet_is_offered_channels_last_and_it_is_faster(tmp_path):
    """A native ResNet-50 config in 16-bit on one A100 runs NCHW (PyTorch's default): advise offers
    `training.channels_last: true` (written as that key), such an option beats the same run in NCHW,
    and the fastest option is one of them."""
    config = tmp_path / "resnet.yaml"
    config.write_text(yaml.safe_dump({
        "model": {"name": "resnet50"},
        "training": {"precision": "amp_bf16", "micro_batch_size": 256, "samples": 1.28e6, "epochs": 1},
        "hardware": {"gpu": "A100-80GB"},
    }))  # fmt: skip
    result = advise(config, gpus=["A100-80GB"], max_gpus=1, top=20)
    options = {tuple(sorted(o.native_changes.items())): o for o in (*result.by_time, *result.by_cost)}
    nhwc = [o for o in options.values() if o.native_changes.get("training.channels_last") is True]
    assert nhwc and all(any(c.key == "training.channels_last" and c.new is True for c in o.changes) for o in nhwc)
    twins = 0
    for o in nhwc:
        twin = {k: v for k, v in o.native_changes.items() if k != "training.channels_last"}
        same = options.get(tuple(sorted(twin.items()))) or (result.current if not twin else None)
        if same is not None:
            twins += 1
            assert o.outcome.total_time_s.estimate < same.outcome.total_time_s.estimate
    assert twins
    assert result.by_time[0].native_changes.get("training.channels_last") is True
