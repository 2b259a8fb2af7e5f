"""The interval policy over one query, on hand-made calibrations and domains whose answers are
worked out here by hand (no model is trained)."""

from __future__ import annotations

import math

import pytest

from perfmodel.errors import ConfigError
from perfmodel.learn.interval_policy import IntervalPolicy, Query, TrainingDomain
from perfmodel.learn.metadata import ModelMetadata

# 19 hardware residuals 0.01 .. 0.19: the 90% split-conformal quantile is the ceil(0.9 * 20) = 18th
# smallest, 0.18; 80% -> 16th, 0.16. Family residuals 0.1 .. 1.9 (19): 90% -> 1.8.
HW = [i / 100 for i in range(1, 20)]
FAMILY = [i / 10 for i in range(1, 20)]
DOMAIN = TrainingDomain(
    gpus_seen=frozenset({"A100-80GB", "H100-SXM"}),
    families_seen=frozenset({"llama", "gpt"}),
    vendors_seen=frozenset({"nvidia", "cpu"}),
    generations_seen=frozenset({"Ampere", "Hopper"}),
    # log10 params 9..10 (1e9..1e10), log2 GPUs 0..3 (1..8 GPUs)
    numeric_ranges={"log_params_total": [9.0, 10.0], "log_num_gpus": [0.0, 3.0]},
    categories_seen={"arch": ["decoder"], "strategy": ["ddp", "fsdp"]},
)
POLICY = IntervalPolicy(hardware_scores=HW, family_scores=FAMILY, domain=DOMAIN, ood_widening=1.5)


def query(**changes):
    base = {
        "features": {
            "log_params_total": 9.5,
            "log_num_gpus": 1.0,
            "arch": "decoder",
            "strategy": "ddp",
        },
        "gpu": "A100-80GB",
        "vendor": "nvidia",
        "generation": "Ampere",
        "model_family": "llama",
    }
    if "features" in changes:
        changes["features"] = {**base["features"], **changes["features"]}
    return Query(**{**base, **changes})


def test_in_domain_query_gets_the_hardware_quantile_and_no_warning():
    assert POLICY.interval(query(), 0.9) == (pytest.approx(0.18), ())
    assert POLICY.interval(query(), 0.8)[0] == pytest.approx(0.16)


def test_unseen_gpu_of_a_seen_generation_warns_without_widening():
    # source-held-out residuals already include unseen accelerators (most sources measured their own)
    half, warnings = POLICY.interval(query(gpu="A100-40GB"), 0.9)
    assert half == pytest.approx(0.18)
    assert len(warnings) == 1 and "A100-40GB was not in the training data" in warnings[0]


def test_unseen_vendor_or_generation_widens_by_the_stated_factor():
    half, warnings = POLICY.interval(query(gpu="MI300X", vendor="amd", generation="CDNA3"), 0.9)
    assert half == pytest.approx(0.18 * 1.5)
    assert any("vendor 'amd'" in w for w in warnings)
    half, warnings = POLICY.interval(query(gpu="B200", generation="Blackwell"), 0.9)
    assert half == pytest.approx(0.27) and any("generation 'Blackwell'" in w for w in warnings)


def test_unseen_family_takes_the_larger_family_quantile():
    half, warnings = POLICY.interval(query(model_family="mamba"), 0.9)
    assert half == pytest.approx(1.8)
    assert any("model family 'mamba'" in w for w in warnings)
    # a family calibration narrower than the hardware one never narrows the interval
    narrow = IntervalPolicy(hardware_scores=HW, family_scores=[0.001] * 19, domain=DOMAIN)
    assert narrow.interval(query(model_family="mamba"), 0.9)[0] == pytest.approx(0.18)
    # without a family calibration: the hardware quantile times the widening
    none = IntervalPolicy(hardware_scores=HW, family_scores=[], domain=DOMAIN)
    assert none.interval(query(model_family="mamba"), 0.9)[0] == pytest.approx(0.27)


def test_values_beyond_the_training_range_widen_with_a_tolerance():
    # 10.04 is inside the 0.05 tolerance; 10.1 (1.26e10 parameters) is outside
    assert POLICY.interval(query(features={"log_params_total": 10.04}), 0.9) == (pytest.approx(0.18), ())
    half, warnings = POLICY.interval(query(features={"log_params_total": 10.1}), 0.9)
    assert half == pytest.approx(0.27)
    assert warnings == (
        "parameter count 1.26e+10 is outside the training range 1e+09..1e+10; interval widened x1.5",
    )
    half, warnings = POLICY.interval(query(features={"log_num_gpus": 4.0}), 0.9)  # 16 GPUs, seen 1..8
    assert half == pytest.approx(0.27) and "GPU count 16 is outside the training range 1..8" in warnings[0]


def test_unseen_category_widens_and_missing_values_are_not_checked():
    half, warnings = POLICY.interval(query(features={"strategy": "zero3"}), 0.9)
    assert half == pytest.approx(0.27) and "parallel strategy 'zero3'" in warnings[0]
    assert POLICY.interval(query(features={"strategy": None, "arch": math.nan}), 0.9) == (
        pytest.approx(0.18),
        (),
    )


def test_reasons_accumulate_but_the_widening_applies_once():
    half, warnings = POLICY.interval(
        query(vendor="amd", generation="CDNA3", gpu="MI300X", features={"log_params_total": 11.0}), 0.9
    )
    assert half == pytest.approx(0.27) and len(warnings) == 2


def test_too_few_residuals_for_the_level_uses_the_largest_and_says_so():
    # n = 19 reaches at most ceil(c * 20) <= 19, i.e. c <= 0.95; 0.99 needs 20 residuals
    half, warnings = POLICY.interval(query(), 0.99)
    assert half == pytest.approx(0.19)
    assert warnings and "only 19 calibration residuals" in warnings[0]


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.1, True, "0.9"])
def test_confidence_outside_the_open_unit_interval_is_refused(bad):
    with pytest.raises(ConfigError, match="confidence"):
        POLICY.interval(query(), bad)


def test_policy_reads_the_metadata_layout():
    metadata = {
        "feature_names": [],
        "conformal": {"abs_residuals_sorted": HW, "family": None},
        "domain": {
            "gpus_seen": ["A100-80GB"],
            "vendors_seen": ["nvidia"],
            "generations_seen": ["Ampere"],
            "numeric_ranges": {},
            "categories_seen": {},
        },
        "ood_widening": 2.0,
    }
    policy = IntervalPolicy.from_metadata(ModelMetadata.from_json(metadata))
    half, warnings = policy.interval(query(gpu="H100-SXM", generation="Hopper"), 0.9)
    # no families recorded: every family is new, and without a family calibration that is the
    # hardware quantile x2.0 (the metadata's widening); the unseen generation widens x2.0 again
    assert half == pytest.approx(0.18 * 2.0 * 2.0)
    assert any("family 'llama'" in w for w in warnings) and any("generation 'Hopper'" in w for w in warnings)


# --- per-regime (Mondrian) calibration -------------------------------------------------------


def _regime_policy(cells: dict[str, list[float]]) -> IntervalPolicy:
    return IntervalPolicy(
        hardware_scores=[0.1] * 100,
        family_scores=[],
        domain=POLICY.domain,
        regime_scores=cells,
        min_runs_per_cell=30,
        thin_evidence_widening=1.25,
    )


def _features(**kw):
    base = {
        "num_gpus": 1,
        "num_nodes": 1,
        "lora_r": 0,
        "quantization_bits": 0,
        "precision": "bf16",
        "log_params_total": 9.5,
        "arch": "decoder",
        "recipe_fused_kinds": 0,
        "torch_compile": 0,
    }
    return {**base, **kw}


def test_a_well_measured_regime_uses_its_own_residuals():
    # 40 runs in '1 device|transformer|eager|full|16-bit|1B-10B': scores 0.01..0.40; the 90% conformal
    # quantile is the ceil(0.9 * 41) = 37th smallest = 0.37
    own = [round(0.01 * i, 2) for i in range(1, 41)]
    keys = ["1 device|decoder|eager|full|16-bit|1B-10B", "1 device|decoder|eager|full|16-bit",
            "1 device|decoder|eager|full", "1 device|decoder|eager", "1 device|decoder", "1 device", "*"]  # fmt: skip
    policy = _regime_policy({k: own for k in keys})
    half, warnings = policy.regime_half_width(_features(), 0.9)
    assert half == pytest.approx(0.37) and warnings == ()


def test_a_thin_regime_backs_off_to_its_parent_widened_and_says_so():
    # 5 QLoRA runs: too few; the parent '1 device|transformer' (60 runs of 0.2) stands in, x1.25
    cells = {
        "1 device|decoder|eager|QLoRA|16-bit|1B-10B": [0.1] * 5,
        "1 device|decoder|eager|QLoRA|16-bit": [0.1] * 5,
        "1 device|decoder|eager|QLoRA": [0.1] * 5,
        "1 device|decoder|eager": [0.1] * 5,
        "1 device|decoder": [0.2] * 60,
        "1 device": [0.2] * 60,
        "*": [0.2] * 60,
    }
    half, warnings = _regime_policy(cells).regime_half_width(_features(lora_r=16, quantization_bits=4), 0.9)
    assert half == pytest.approx(0.2 * 1.25)
    assert len(warnings) == 1 and "5 in regime 1 device, decoder, eager, QLoRA, 16-bit, 1B-10B" in warnings[0]
    assert "comes from 1 device, decoder (60 runs)" in warnings[0]


def test_an_unseen_family_takes_the_family_residuals_of_its_own_regime():
    """Held-out-family residuals split by regime: eager one-GPU decoders 0.01 .. 0.39 (39 runs: 90%
    quantile the 36th smallest, 0.36), everything pooled 0.01 .. 0.39 and 1.0 .. 3.9 (the fused
    regimes' large errors). An unseen family in the eager regime takes its cell's 0.36, not the
    pool's; a regime with no family cell of its own backs off widened (x1.25) and says so; a
    model without family cells (calibrated before them) keeps the pooled family quantile."""
    eager = [i / 100 for i in range(1, 40)]
    pooled = sorted(eager + [i / 10 for i in range(10, 40)])
    feats = {"num_gpus": 1, "num_nodes": 1, "precision": "bf16", "arch": "decoder", "log_params_total": 9.5}
    own = "1 device|decoder|eager|full|16-bit|1B-10B"
    cells = {own: eager, "1 device": pooled, "*": pooled}
    runs = {own: 39, "1 device": 69, "*": 69}
    policy = IntervalPolicy(
        hardware_scores=HW, family_scores=pooled, domain=DOMAIN, family_regime_scores=cells, family_regime_runs=runs
    )
    new = query(model_family="never-seen", features=feats)
    half, warns = policy.interval(new, 0.9)
    assert half == pytest.approx(0.36)
    assert any("never-seen" in w for w in warns)
    fused, fused_warns = policy.interval(query(model_family="never-seen", features={**feats, "recipe_fused_kinds": 3}), 0.9)
    assert fused == pytest.approx(1.25 * pooled[math.ceil(0.9 * 70) - 1])
    assert any("comes from 1 device" in w for w in fused_warns)
    old = IntervalPolicy(hardware_scores=HW, family_scores=pooled, domain=DOMAIN)
    assert old.interval(new, 0.9)[0] == pytest.approx(pooled[math.ceil(0.9 * 70) - 1])
