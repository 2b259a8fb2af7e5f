"""Comparison: the ratio interval bound (hand-worked), its properties, and `compare` on configs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from perfmodel.config import load_workload
from perfmodel.decide.compare import compare, ratio_interval
from perfmodel.errors import ConfigError
from perfmodel.prediction import Interval, predict

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama2-7b-lora.yaml"


def test_ratio_interval_hand_worked():
    # A: 10 h (5-20), B: 20 h (10-40): each a factor 2 either way, so each log half-width is ln 2;
    # independent errors: sqrt(ln2^2 + ln2^2) = sqrt(2) ln 2 gives B/A = 2 within 2 / 2^sqrt(2) .. 2 * 2^sqrt(2).
    a = Interval(estimate=10.0, low=5.0, high=20.0)
    b = Interval(estimate=20.0, low=10.0, high=40.0)
    r = ratio_interval(a, b)
    assert r.estimate == pytest.approx(2.0)
    assert r.low == pytest.approx(2 / 2 ** math.sqrt(2))  # 0.7504
    assert r.high == pytest.approx(2 * 2 ** math.sqrt(2))  # 5.330
    assert not r.significant  # 0.75 < 1 < 5.33


def test_ratio_interval_is_narrower_than_the_ratio_of_intervals_and_flags_real_differences():
    cases = [
        (Interval(estimate=10, low=8, high=13), Interval(estimate=30, low=22, high=41)),
        (Interval(estimate=10, low=6, high=16), Interval(estimate=11, low=7, high=18)),
        (Interval(estimate=5, low=4.5, high=5.5), Interval(estimate=2, low=1.9, high=2.1)),
    ]
    for a, b in cases:
        r = ratio_interval(a, b)
        assert r.low <= r.estimate <= r.high
        assert r.low >= b.low / a.high - 1e-12 and r.high <= b.high / a.low + 1e-12
        assert r.significant == (r.high < 1 or r.low > 1)
    assert ratio_interval(*cases[0]).significant and not ratio_interval(*cases[1]).significant
    with pytest.raises(ConfigError):
        ratio_interval(Interval(estimate=1, low=0, high=2), cases[0][0])


def _write(tmp_path: Path, name: str, gpu: str, mb: int = 8, ga: int = 4) -> Path:
    path = tmp_path / name
    path.write_text(
        "model: {name: llama2-7b}\n"
        f"training: {{seq_len: 512, micro_batch_size: {mb}, grad_accum_steps: {ga}, lora_r: 16, tokens: 2.0e8}}\n"
        f"hardware: {{gpu: {gpu}, num_gpus: 1}}\n"
    )
    return path


def test_compare_ratios_are_the_predictions_ratios(tmp_path):
    a = _write(tmp_path, "a.yaml", "A100-80GB")
    b = _write(tmp_path, "b.yaml", "H100-SXM")
    c = _write(tmp_path, "c.yaml", "A100-80GB", mb=16, ga=2)
    result = compare([a, b, c])
    assert [r.label for r in result.runs] == ["a.yaml", "b.yaml", "c.yaml"]
    times = [predict(load_workload(p)).total_time_s.estimate for p in (a, b, c)]
    base = result.runs[0]
    assert (base.time_ratio.estimate, base.time_ratio.low, base.time_ratio.high) == (1.0, 1.0, 1.0)
    for run, t in zip(result.runs[1:], times[1:], strict=True):
        assert run.time_ratio.estimate == pytest.approx(t / times[0])
        assert run.cost_ratio is not None
    assert result.differences["hardware.gpu"] == ["A100-80GB", "H100-SXM", "A100-80GB"]
    assert result.differences["training.micro_batch_size"] == [8, 8, 16]
    assert "training.lora_r" not in result.differences
    data = result.to_json()
    assert set(data) == {"baseline", "confidence_level", "ratio_method", "verdicts", "differences", "runs"}
    assert len(data["verdicts"]) == 2 and data["runs"][1]["time_ratio"]["kind"] == "gpu"
    assert data["runs"][2]["time_ratio"]["kind"] == "micro_batch"
    assert data["runs"][1]["time_ratio"]["significant"] in (True, False)


def test_compare_needs_two_configs():
    with pytest.raises(ConfigError):
        compare([EXAMPLE])


def test_variants_equal_edited_copies_of_the_first_config(tmp_path):
    copy = _write(tmp_path, "h100.yaml", "H100-SXM")
    base = _write(tmp_path, "a100.yaml", "A100-80GB")
    by_variant = compare([base], variants=["hardware.gpu=H100-SXM", {"training.micro_batch_size": 16}])
    by_file = compare([base, copy])
    assert [r.label for r in by_variant.runs] == [
        "a100.yaml",
        "hardware.gpu=H100-SXM",
        "training.micro_batch_size=16",
    ]
    assert by_variant.runs[1].time_ratio == by_file.runs[1].time_ratio
    assert by_variant.differences["training.micro_batch_size"] == [8, 8, 16]
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        compare([base], variants=["hardware.gpu"])
    with pytest.raises(ConfigError, match="allowed keys"):
        compare([base], variants=["hardware.gpuz=H100-SXM"])


def test_ratio_interval_hand_worked_with_correlation():
    # rho = 0.75: sqrt(2 ln2^2 - 2 x 0.75 ln2^2) = sqrt(0.5) ln 2; B/A = 2 within 2 / 2^0.707 .. 2 x 2^0.707
    a = Interval(estimate=10.0, low=5.0, high=20.0)
    b = Interval(estimate=20.0, low=10.0, high=40.0)
    r = ratio_interval(a, b, rho=0.75)
    assert r.low == pytest.approx(2 / 2 ** math.sqrt(0.5))  # 1.225
    assert r.high == pytest.approx(2 * 2 ** math.sqrt(0.5))
    assert r.significant


def test_compare_uses_the_measured_rho_of_the_kind_of_change(tmp_path):
    from perfmodel.decide.pairs import SAME_STEP, load_correlations

    base = _write(tmp_path, "a100.yaml", "A100-80GB")
    result = compare(
        [base],
        variants=["training.micro_batch_size=16,training.grad_accum_steps=2", "training.tokens=1.0e8",
                  "hardware.gpu=H100-SXM,training.precision=amp_bf16"],
    )
    corr = load_correlations()
    mb, tokens, several = (r.time_ratio for r in result.runs[1:])
    assert (mb.kind, mb.rho) == ("micro_batch", corr.rho_for("micro_batch", 0.9))
    assert (several.kind, several.rho) == ("several", corr.rho_for("several", 0.9))
    # fewer tokens, the same step: rho = 1, the ratio about the ratio of step counts, nearly exact
    assert tokens.kind == SAME_STEP and tokens.rho == 1.0
    assert tokens.low == pytest.approx(tokens.estimate, rel=0.01) and tokens.estimate == pytest.approx(0.5, rel=0.01)
    assert "the same step" in result.verdicts()[1]
    for r in (mb, several):  # paired: narrower than independent errors would give
        iv = ratio_interval(result.runs[0].outcome.total_time_s, result.runs[1 + (r is several) * 2].outcome.total_time_s)
        assert iv.low <= r.low <= r.estimate <= r.high <= iv.high


def test_verdict_says_faster_only_when_the_paired_interval_excludes_one():
    from perfmodel.decide.compare import Ratio, verdict

    faster = Ratio(estimate=0.5, low=0.4, high=0.625, significant=True, kind="gpu", rho=0.8)
    assert verdict("B", "A", faster, 0.9) == "B is faster than A (x2.00, 90% paired interval 1.60–2.50)"
    unclear = Ratio(estimate=1.2, low=0.8, high=1.8, significant=False, kind="precision", rho=0.8)
    assert verdict("B", "A", unclear, 0.9) == (
        "B vs A: cannot be told apart (x1.20 slower, 90% paired interval 0.80–1.80 includes 1)"
    )


@pytest.mark.slow
def test_compare_plot_draws_each_time_and_paired_ratio(tmp_path):
    from perfmodel.decide.plot import plot_compare

    base = _write(tmp_path, "a100.yaml", "A100-80GB")
    result = compare([base], variants=["hardware.gpu=H100-SXM", "hardware.num_gpus=8"])
    fig = plot_compare(result, tmp_path / "cmp.png")
    assert (tmp_path / "cmp.png").stat().st_size > 1000
    artists = {a.get_gid(): a for ax in fig.axes for a in ax.get_lines() if a.get_gid()}
    for r in result.runs:
        assert artists[f"ratio:{r.label}"].get_xdata()[0] == pytest.approx(r.time_ratio.estimate)
        assert artists[f"time:{r.label}"].get_xdata()[0] == pytest.approx(r.outcome.total_time_s.estimate / 3600)
    with pytest.raises(ConfigError, match="must end in"):
        plot_compare(result, tmp_path / "cmp.jpg")
