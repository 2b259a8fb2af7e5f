"""Physics-consistent answers, as property tests over seeded grids (configs x accelerators x
values, off-grid values included) through the library functions of sweep, compare and advise:
along the micro-batch (same tokens) the predicted time never rises while the run fits with margin;
along the data-parallel GPU count it never rises unless the communication model says the added
collectives cost more than the compute saved (and the point says so), and with ddp the scaling
efficiency stays within the communication model's bound; compare, sweep and advise give one answer
for one run; and one fit verdict shared by predict, sweep, compare and advise."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

import perfmodel
from perfmodel.config import load_workload
from perfmodel.decide.physics import consistent, decreasing_fit, exposed_comm_s, scaled
from perfmodel.prediction import predict

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CONFIGS = ["llama2-7b-lora.yaml", "custom-dims-qlora.yaml", "llama3-8b-pretrain-fsdp.yaml"]
GPUS = ["A100-80GB", "H100-SXM", "L40S"]
MICRO_BATCHES = [1, 2, 3, 4, 6, 8, 16, 24, 32]
"""Powers of two, and values between them (one per octave: each is held against the powers of two
around it, not against another value of its octave; perfmodel/decide/physics.py)."""
COUNTS = [1, 2, 3, 4, 8, 16, 24, 32, 64]
FULL = {
    "training.lora_r": None,
    "training.quantization_bits": None,
    "training.micro_batch_size": 1,
    "training.activation_checkpointing": True,
}
"""llama2-7b-lora.yaml as a full fine-tune: enough gradient traffic for the communication bound."""
SLOWER_BY_COMMUNICATION = "cost more than the compute saved"


def _pow2(v: int) -> bool:
    return v & (v - 1) == 0


@pytest.mark.parametrize(
    "values",
    [[3.0, 2.0, 2.5, 1.0], [1.0, 2.0, 3.0], [5.0, 4.0, 3.0], [2.0], [], [1.0, 1.0, 1.2, 0.5, 0.7]],
)
def test_decreasing_fit_is_non_increasing_and_keeps_the_mean_of_each_pool(values):
    fit = decreasing_fit(values)
    assert len(fit) == len(values)
    assert all(a >= b - 1e-12 for a, b in zip(fit, fit[1:], strict=False))
    assert sum(fit) == pytest.approx(sum(values))  # pooling keeps sums
    if all(a >= b for a, b in zip(values, values[1:], strict=False)):
        assert fit == values  # nothing to fix, nothing moved


def _points(config: str, gpu: str, key: str, values: list[int], physics: bool = True, **options):
    result = perfmodel.sweep(
        EXAMPLES / config, {key: values, "hardware.gpu": [gpu]}, physics=physics, **options
    )
    return [(p.values[key], p) for p in result.points if p.outcome is not None]


def _assert_micro_batch_rule(pts):
    fits = [(v, p) for v, p in pts if p.outcome.memory_verdict == "fits"]
    for (v1, a), (v2, b) in zip(fits, fits[1:], strict=False):
        assert b.outcome.total_time_s.estimate <= a.outcome.total_time_s.estimate * (1 + 1e-9), (v1, v2)


def _assert_gpu_rule(pts):
    fits = [(v, p) for v, p in pts if p.outcome.fits_in_memory]
    for (n1, a), (n2, b) in zip(fits, fits[1:], strict=False):
        ta, tb = a.outcome.total_time_s.estimate, b.outcome.total_time_s.estimate
        if tb > ta * (1 + 1e-9):  # only the stated effect may make more GPUs slower, and it says so
            assert SLOWER_BY_COMMUNICATION in b.adjusted, (n1, n2, b.adjusted)
    for i, (n1, a) in enumerate(fits):
        for n2, b in fits[i + 1 :]:
            if a.resolved["hardware.strategy"] != "ddp" or not _pow2(n1) or (not _pow2(n2) and n2 < 2 * n1):
                continue  # the cap holds against the powers of two below a count
            extra = max(0.0, exposed_comm_s(b.outcome) - exposed_comm_s(a.outcome))
            step = a.outcome.step_time_s.estimate
            bound = n2 / n1 * step / (step + extra)  # efficiency <= step / (step + extra)
            speedup = a.outcome.total_time_s.estimate / b.outcome.total_time_s.estimate
            assert speedup <= bound * (1 + 1e-9), (n1, n2, speedup, bound)


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("config", CONFIGS)
def test_sweep_time_never_rises_with_the_micro_batch_while_it_fits_with_margin(config, gpu):
    _assert_micro_batch_rule(_points(config, gpu, "training.micro_batch_size", MICRO_BATCHES))


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("config", CONFIGS)
def test_sweep_more_gpus_never_take_longer_and_ddp_stays_within_the_comm_bound(config, gpu):
    _assert_gpu_rule(_points(config, gpu, "hardware.num_gpus", COUNTS))


@pytest.mark.parametrize("gpu", ["L40S", "A100-80GB"])
def test_the_communication_bound_is_tighter_than_linear_where_collectives_are_exposed(gpu):
    pts = _points("llama2-7b-lora.yaml", gpu, "hardware.num_gpus", COUNTS, set=FULL)
    _assert_gpu_rule(pts)
    outcomes = dict(pts)
    capped = [p for _, p in pts if "communication model's scaling efficiency" in p.adjusted]
    exposed = [n for n, p in pts if exposed_comm_s(p.outcome) > 0]
    assert exposed, "a full fine-tune of 7B over ddp exposes some gradient all-reduce"
    for p in capped:  # a point the comm bound moved is slower than linear scaling would allow
        n = p.outcome.num_gpus
        m = max(c for c in outcomes if c < n and _pow2(c) and outcomes[c].outcome.fits_in_memory)
        assert outcomes[m].outcome.total_time_s.estimate / p.outcome.total_time_s.estimate < n / m


def test_the_issues_examples_obey_the_rules():
    # issue 26: 7B LoRA on A100, micro-batch 1..16 was 35.7, 30.5, 34.7, 32.8, 27.9 h
    mb = _points("llama2-7b-lora.yaml", "A100-80GB", "training.micro_batch_size", [1, 2, 4, 8, 16])
    _assert_micro_batch_rule(mb)
    # L40S from 16 to 32 GPUs gave 2.7x the throughput
    gpus = dict(_points("llama2-7b-lora.yaml", "L40S", "hardware.num_gpus", [16, 32]))
    assert gpus[16].outcome.total_time_s.estimate / gpus[32].outcome.total_time_s.estimate <= 2 * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_compare_holds_the_rules_and_agrees_with_sweep_on_every_point(seed):
    rng = random.Random(seed)
    config, gpu = rng.choice(CONFIGS), rng.choice(GPUS)
    key, grid = rng.choice([("training.micro_batch_size", MICRO_BATCHES), ("hardware.num_gpus", COUNTS)])
    values = sorted(rng.sample(grid, 5))
    sweep_pts = dict(_points(config, gpu, key, values))
    cmp = perfmodel.compare([EXAMPLES / config], variants=[f"{key}={v}" for v in values], gpu=gpu)
    runs = cmp.runs[1:]
    for v, run in zip(values, runs, strict=True):
        point = sweep_pts[v]
        assert run.outcome.total_time_s.estimate == pytest.approx(
            point.outcome.total_time_s.estimate, rel=1e-12
        ), v
        assert run.adjusted == point.adjusted
    pts = [(v, _AsPoint(r)) for v, r in zip(values, runs, strict=True)]
    (_assert_micro_batch_rule if key == "training.micro_batch_size" else _assert_gpu_rule)(pts)
    # the baseline is the config as it is: the same answer as a one-point sweep of it
    own = perfmodel.sweep(EXAMPLES / config, {"hardware.gpu": [gpu]}).points[0]
    assert cmp.runs[0].outcome.total_time_s.estimate == pytest.approx(
        own.outcome.total_time_s.estimate, rel=1e-12
    )


class _AsPoint:
    """A compared run read as a sweep point (outcome, resolved, adjusted)."""

    def __init__(self, run):
        self.outcome, self.resolved, self.adjusted = run.outcome, run.resolved, run.adjusted


@pytest.mark.slow
@pytest.mark.parametrize("config", ["llama2-7b-lora.yaml", "custom-dims-qlora.yaml"])
def test_advise_options_are_the_physics_answers_of_their_runs_and_hold_the_rules(config):
    advice = perfmodel.advise(EXAMPLES / config, gpus=["A100-80GB", "L40S"], max_gpus=16, top=3)
    assert advice.by_time
    for opt in (*advice.by_time[:2], *advice.by_cost[:1]):
        sets = {
            k: v
            for k, v in opt.native_changes.items()
            if k not in ("hardware.num_gpus", "hardware.num_nodes")
        }
        n = opt.outcome.num_gpus
        counts = sorted({1, 2, 4, 8, 16} | {n})
        pts = _points(config, opt.outcome.gpu, "hardware.num_gpus", counts, set=sets)
        _assert_gpu_rule(pts)
        here = dict(pts)[n]
        assert here.outcome.total_time_s.estimate == pytest.approx(
            opt.outcome.total_time_s.estimate, rel=1e-12
        )
        assert here.adjusted == opt.adjusted
    current = consistent([load_workload(EXAMPLES / config)])[0]
    assert advice.current is not None
    assert advice.current.outcome.total_time_s.estimate == pytest.approx(
        current.outcome.total_time_s.estimate
    )


def test_a_moved_point_keeps_its_relative_interval_and_says_why(monkeypatch):
    # a model whose 2-GPU prediction is x1.6 slower than the shipped model's, so that 4 GPUs come out
    # more than twice as fast as 2 and are held to linear scaling; the shipped model breaks no rule on
    # this line since model 20, so the test makes one that does
    from perfmodel.decide import physics

    own = physics.Outcome.of

    def slow_at_two(pred):
        out = own(pred)
        return physics.scaled(out, 1.6) if pred.workload.parallel.num_gpus == 2 else out

    monkeypatch.setattr(physics.Outcome, "of", staticmethod(slow_at_two))
    raw = dict(_points("llama2-7b-lora.yaml", "L40S", "hardware.num_gpus", [1, 2, 4], physics=False))
    fixed = dict(_points("llama2-7b-lora.yaml", "L40S", "hardware.num_gpus", [1, 2, 4]))
    moved = [n for n in fixed if fixed[n].adjusted]
    assert moved == [4]
    for n in moved:
        a, b = raw[n].outcome, fixed[n].outcome
        f = b.total_time_s.estimate / a.total_time_s.estimate
        assert "hardware.num_gpus" not in b.warnings and "physics" in fixed[n].adjusted
        assert b.total_time_s.high / b.total_time_s.estimate == pytest.approx(
            a.total_time_s.high / a.total_time_s.estimate
        )
        assert b.throughput_samples_per_s.estimate == pytest.approx(a.throughput_samples_per_s.estimate / f)
        assert b.to_json()["total_time_s"]["estimate"] == pytest.approx(b.total_time_s.estimate)
    for n in set(fixed) - set(moved):
        assert fixed[n].outcome.total_time_s.estimate == pytest.approx(raw[n].outcome.total_time_s.estimate)


def test_scaled_moves_times_and_rates_inversely():
    base = consistent([load_workload(EXAMPLES / "llama2-7b-lora.yaml")])[0].raw
    twice = scaled(base, 2.0)
    assert twice.total_time_s.estimate == pytest.approx(2 * base.total_time_s.estimate)
    assert twice.throughput_samples_per_s.estimate == pytest.approx(
        base.throughput_samples_per_s.estimate / 2
    )
    assert twice.model_step_s == base.model_step_s  # the model's own step stays: the comm bound reads it
    assert math.isclose(twice.gpu_hours.high / twice.gpu_hours.low, base.gpu_hours.high / base.gpu_hours.low)


@pytest.mark.parametrize("gpu", ["A100-40GB", "L40S", "L4"])
def test_one_fit_verdict_in_predict_sweep_compare_and_advise(gpu):
    config = EXAMPLES / "llama2-7b-lora.yaml"
    sizes = [2, 8, 16]
    result = perfmodel.sweep(config, {"training.micro_batch_size": sizes}, gpu=gpu)
    variants = [f"training.micro_batch_size={m}" for m in sizes]
    cmp = perfmodel.compare([config], variants=variants, gpu=gpu)
    for m, point, run in zip(sizes, result.points, cmp.runs[1:], strict=True):
        w = load_workload(config, overrides=[f"training.micro_batch_size={m}", f"hardware.gpu={gpu}"])
        verdict = predict(w).memory_verdict
        assert point.outcome.memory_verdict == verdict.verdict == run.outcome.memory_verdict, m
        assert point.outcome.fits_in_memory == verdict.fits == run.outcome.fits_in_memory
        assert point.outcome.tight == (verdict.verdict == "tight")
    advice = perfmodel.advise(config, gpus=[gpu], max_gpus=2, top=3, gpu=gpu)
    assert advice.current is not None
    current = predict(load_workload(config, overrides=[f"hardware.gpu={gpu}"])).memory_verdict
    assert advice.current.outcome.memory_verdict == current.verdict
    for opt in (*advice.by_time, *advice.by_cost):
        assert opt.tight_memory == (opt.outcome.memory_verdict == "tight")
        assert opt.outcome.memory_verdict in ("fits", "tight")


def test_the_sweep_table_and_advise_say_the_same_verdict_in_words():
    import io
    import re

    from rich.console import Console

    from perfmodel.cli.render_decide import render_sweep

    result = perfmodel.sweep(
        EXAMPLES / "llama2-7b-lora.yaml", {"training.micro_batch_size": [4, 16, 64]}, gpu="L40S"
    )
    out = io.StringIO()
    render_sweep(result, Console(file=out, width=200, no_color=True))
    words = {"fits": "yes", "tight": "tight", "does not fit": "OOM"}
    for p in result.points:
        row = next(
            line
            for line in out.getvalue().splitlines()
            if re.match(rf"^\W*{p.values['training.micro_batch_size']}\s", line)
        )
        assert words[p.outcome.memory_verdict] in row.split(), row
