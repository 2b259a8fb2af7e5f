"""Conformal intervals: MAPIE's grouped calibration, the shipped quantile, and coverage on held-out
groups of synthetic data whose noise is known."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from perfmodel.learn.conformal import (
    CALIBRATION_LEVELS,
    calibrate_grouped,
    conformal_quantile,
    grouped_splitter,
    transfer_share,
)
from perfmodel.learn.regressor import LGBMConfig, LGBMRatioRegressor, forget_recent_fits

FAST = LGBMConfig(n_estimators=80, learning_rate=0.1, min_child_samples=5)


def grouped_data(
    seed: int, n_groups: int = 16, rows_per_group: int = 30, group_sd: float = 0.08, noise_sd: float = 0.1
):
    """y = f(x) + group offset + noise. The offset is invisible in the features: only grouped
    calibration can account for it."""
    rng = np.random.default_rng(seed)
    groups = np.repeat([f"g{i}" for i in range(n_groups)], rows_per_group)
    offsets = dict(zip(np.unique(groups), rng.normal(0.0, group_sd, n_groups), strict=True))
    x = rng.uniform(-2, 2, size=(len(groups), 3))
    y = (
        np.sin(x[:, 0])
        + 0.5 * x[:, 1]
        + np.array([offsets[g] for g in groups])
        + rng.normal(0.0, noise_sd, len(groups))
    )
    return pd.DataFrame(x, columns=["x0", "x1", "x2"]), y, groups


def test_conformal_quantile_is_the_split_conformal_order_statistic():
    scores = np.arange(1, 20, dtype=float)  # n = 19
    assert conformal_quantile(scores, 0.9) == 18.0  # ceil(0.9 * 20) = 18th smallest
    assert conformal_quantile(scores, 0.5) == 10.0
    assert math.isinf(conformal_quantile(scores, 0.97))  # ceil(0.97 * 20) = 20 > n
    with pytest.raises(ValueError):
        conformal_quantile(scores, 1.0)


def test_shipped_quantile_and_point_predictor_reproduce_mapie_intervals():
    """MAPIE is the oracle: its intervals are our point predictor (fitted on all rows by us, not
    read out of MAPIE) +/- our conformal quantile of its conformity scores."""
    X, y, groups = grouped_data(0, n_groups=6)
    cal = calibrate_grouped(X, y, groups, config=FAST)
    assert cal.splitter.startswith("leave-one-group-out")
    point, intervals = cal.mapie.predict_interval(X.iloc[:7], aggregate_point_predictions=None)
    forget_recent_fits()  # our own fit, not MAPIE's remembered one
    ours = LGBMRatioRegressor(FAST).fit(X, y).predict(X.iloc[:7])
    np.testing.assert_allclose(point, ours, atol=1e-12)
    for j, c in enumerate(CALIBRATION_LEVELS):
        q = cal.quantile(c)
        np.testing.assert_allclose(intervals[:, 0, j], point - q, atol=1e-9)
        np.testing.assert_allclose(intervals[:, 1, j], point + q, atol=1e-9)


def test_a_second_fit_of_the_same_rows_reuses_the_first_and_anything_else_fits_anew():
    """Training fits one fold's rows two or three times (two calibrations and the final model):
    the repeats reuse the first fit, which is deterministic, so reusing it changes no tree."""
    forget_recent_fits()
    X, y, _ = grouped_data(1, n_groups=4)
    first = LGBMRatioRegressor(FAST).fit(X, y)
    again = LGBMRatioRegressor(FAST).fit(X.copy(), y.copy())
    assert again.booster_ is first.booster_
    others = [
        LGBMRatioRegressor(FAST).fit(X, y + 0.1),  # other targets
        LGBMRatioRegressor(FAST).fit(X, y, sample_weight=np.linspace(1.0, 2.0, len(y))),  # weights
        LGBMRatioRegressor(dataclasses.replace(FAST, seed=1)).fit(X, y),  # another config
        LGBMRatioRegressor(FAST).fit(X.assign(x2=X["x2"] * 2.0), y),  # another feature value
        LGBMRatioRegressor(FAST).fit(X.assign(c=pd.Categorical(["a"] * len(y), categories=["a", "b"])), y),
        LGBMRatioRegressor(FAST).fit(X.assign(c=pd.Categorical(["a"] * len(y), categories=["b", "a"])), y),
    ]
    assert all(o.booster_ is not first.booster_ for o in others)
    assert others[-1].booster_ is not others[-2].booster_  # the same values, other category codes
    forget_recent_fits()
    fresh = LGBMRatioRegressor(FAST).fit(X, y)
    assert fresh.booster_ is not first.booster_ and fresh.model_text() == first.model_text()


def test_grouped_splitter_holds_out_whole_groups():
    groups = np.repeat(["a", "b", "c", "d"], 5)
    splitter, text = grouped_splitter(groups, max_splits=3)
    assert "GroupKFold(3)" in text
    for train, test in splitter.split(np.zeros(len(groups)), groups=groups):
        assert not set(groups[train]) & set(groups[test])
    _, text = grouped_splitter(np.repeat(["a"], 10), max_splits=3)
    assert "not grouped" in text


@pytest.mark.slow
def test_90pct_intervals_cover_unseen_groups_on_synthetic_data():
    coverages = []
    for seed in range(8):
        X, y, groups = grouped_data(100 + seed)
        test_groups = np.unique(groups)[:4]
        test = np.isin(groups, test_groups)
        cal = calibrate_grouped(X[~test], y[~test], groups[~test], config=FAST)
        pred = LGBMRatioRegressor(FAST).fit(X[~test], y[~test]).predict(X[test])
        coverages.append(np.mean(np.abs(y[test] - pred) <= cal.quantile(0.9)))
    mean = float(np.mean(coverages))
    assert 0.85 <= mean <= 0.95, (mean, coverages)


def test_per_regime_calibration_covers_each_regime_and_widens_where_evidence_is_thin():
    """Known truth: |residual| ~ |N(0, 0.1)| in a well-measured full-fine-tuning regime (400
    runs), |N(0, 0.3)| in a LoRA regime (200 runs), and a QLoRA regime with 5 runs. Mondrian
    calibration covers each measured regime at its level, gives the noisier regime the wider
    interval, and the thin regime (backed off to the whole 1-device pool, widened) a wider
    interval than the well-measured one."""
    from perfmodel.learn.conformal import mondrian_scores
    from perfmodel.learn.interval_policy import IntervalPolicy, TrainingDomain
    from perfmodel.learn.regimes import regime_of

    def feats(lora, bits):
        return {
            "num_gpus": 1,
            "num_nodes": 1,
            "lora_r": lora,
            "quantization_bits": bits,
            "precision": "bf16",
            "log_params_total": 9.5,
        }

    regimes = {
        "full": (feats(0, 0), 0.1, 400),
        "lora": (feats(16, 0), 0.3, 200),
        "qlora": (feats(16, 4), 0.3, 5),
    }
    domain = TrainingDomain(
        gpus_seen=frozenset(),
        families_seen=frozenset(),
        vendors_seen=frozenset(),
        generations_seen=frozenset(),
        numeric_ranges={},
        categories_seen={},
    )
    coverage = {name: [] for name in regimes}
    halves = {name: [] for name in regimes}
    for seed in range(20):
        rng = np.random.default_rng(seed)
        scores, cells, groups = [], [], []
        for name, (f, sigma, n) in regimes.items():
            scores += list(np.abs(rng.normal(0, sigma, n)))
            cells += [regime_of(f)] * n
            groups += [f"{name}{i}" for i in range(n)]
        policy = IntervalPolicy(
            hardware_scores=sorted(scores),
            family_scores=[],
            domain=domain,
            regime_scores=mondrian_scores(scores, cells, groups),
        )
        for name, (f, sigma, _) in regimes.items():
            half, _ = policy.regime_half_width(f, 0.9)
            fresh = np.abs(rng.normal(0, sigma, 2000))
            coverage[name].append(np.mean(fresh <= half))
            halves[name].append(half)
    assert 0.86 <= np.mean(coverage["full"]) <= 0.95
    assert 0.86 <= np.mean(coverage["lora"]) <= 0.95
    assert np.mean(halves["lora"]) > 2 * np.mean(halves["full"])
    assert np.mean(halves["qlora"]) > np.mean(halves["full"])  # thin evidence: wider, not narrower


def test_mondrian_scores_count_each_run_once():
    from perfmodel.learn.conformal import mondrian_scores

    regime = ("1 device", "full", "16-bit", "<100M")
    cells = mondrian_scores([0.1, 0.3, 0.2, 0.9], [regime] * 4, ["a", "a", "a", "b"])
    # run a: median of 0.1, 0.3, 0.2 = 0.2; run b: 0.9; every coarser cell holds the same two
    assert cells["1 device|full|16-bit|<100M"] == [0.2, 0.9] == cells["*"] == cells["1 device"]


def _regime_policy(scores, regimes, groups, sources):
    """An interval policy whose only calibration is per-regime (Mondrian) cells of these run scores,
    with an empty training domain (no out-of-domain widening applies)."""
    from perfmodel.learn.conformal import mondrian_runs, mondrian_scores
    from perfmodel.learn.interval_policy import IntervalPolicy, TrainingDomain

    domain = TrainingDomain(gpus_seen=frozenset(), families_seen=frozenset(), vendors_seen=frozenset(),
                            generations_seen=frozenset(), numeric_ranges={}, categories_seen={})  # fmt: skip
    return IntervalPolicy(hardware_scores=sorted(scores), family_scores=[], domain=domain,
                          regime_scores=mondrian_scores(scores, regimes, groups, sources),
                          regime_runs=mondrian_runs(regimes, groups))  # fmt: skip


def test_a_family_whose_plan_is_approximate_does_not_widen_the_decoders_beside_it():
    """Known truth: fused one-GPU decoders (LLMs the plan costs op by op) err by |N(0, 0.15)|,
    Transformer-XL rows of the same scale and stack by |N(1.5, 0.3)| (the plan leaves out its
    relative attention and adaptive softmax: `regimes.APPROXIMATE_PLANS`). A fused LoRA query with
    no runs of its own backs off to its kind's pool; with Transformer-XL counted as a decoder that
    pool's 90% quantile came from Transformer-XL's errors. As its own kind, the decoder query's
    interval covers decoders at about its level and is a fraction as wide, and a Transformer-XL
    query still gets an interval that covers Transformer-XL; nor do its errors enter the pools above
    its kind ('1 device'), where a kind with no runs of its own backs off to."""
    from perfmodel.learn.regimes import regime_of

    def feats(lora):
        return {"num_gpus": 1, "num_nodes": 1, "lora_r": lora, "precision": "bf16", "arch": "decoder",
                "recipe_fused_kinds": 3, "log_params_total": 9.5}  # fmt: skip

    rng = np.random.default_rng(0)
    llm = np.abs(rng.normal(0, 0.15, 60))
    txl = np.abs(rng.normal(1.5, 0.3, 40))
    scores = list(llm) + list(txl)
    groups = [f"r{i}" for i in range(len(scores))]
    sources = ["a"] * 30 + ["b"] * 30 + ["lambda"] * 40

    def policy(families):
        return _regime_policy(scores, [regime_of(feats(0), fam) for fam in families], groups, sources)

    pooled = policy(["llama"] * 100)  # as before: Transformer-XL counted as a decoder
    apart = policy(["llama"] * 60 + ["transformer-xl"] * 40)
    lora_pooled, _ = pooled.regime_half_width(feats(16), 0.9, "llama")
    lora_apart, _ = apart.regime_half_width(feats(16), 0.9, "llama")
    fresh = np.abs(rng.normal(0, 0.15, 4000))
    assert lora_pooled > 1.2  # the pool's tail is Transformer-XL's
    assert lora_apart < lora_pooled / 2
    assert 0.88 <= np.mean(fresh <= lora_apart) <= 1.0  # widened x1.25: thin evidence, covers
    # a kind with no runs at all (an encoder) backs off to '1 device': the plan's errors stay out of it
    encoder = {**feats(0), "arch": "encoder"}
    assert apart.regime_half_width(encoder, 0.9, "bert")[0] < pooled.regime_half_width(encoder, 0.9, "bert")[0] / 2
    txl_half, _ = apart.regime_half_width(feats(0), 0.9, "transformer-xl")
    assert np.mean(np.abs(rng.normal(1.5, 0.3, 4000)) <= txl_half) >= 0.85
    assert regime_of(feats(0), "transformer-xl")[1] == "approximate plan" != regime_of(feats(0), "llama")[1]


def test_an_eager_job_with_no_runs_of_its_kind_backs_off_to_its_stack_before_its_kind():
    """Known truth: eager one-GPU decoders and encoders (the kernel plan as PyTorch dispatches it)
    err by |N(0, 0.15)|; fused one-GPU CNN pipelines (DLE-style recipes: what they fuse, data
    loading) by |N(0.6, 0.4)|. An eager CNN with no runs of its own kind (timm held out) now backs
    off to '1 device, any kind, eager' before '1 device, cnn': eager CNNs that truly err like the
    other eager jobs are covered at about 90% by an interval a fraction as wide as the one the
    fused CNNs' pool gave. A fused CNN keeps its kind's pool; an approximate plan's runs never enter
    the stack cell."""
    from perfmodel.learn.regimes import cell_keys, describe, pooled_keys, regime_of

    def feats(arch, fused):
        return {"num_gpus": 1, "num_nodes": 1, "lora_r": 0, "precision": "bf16", "arch": arch,
                "recipe_fused_kinds": 3 if fused else 0, "log_params_total": 8.5}  # fmt: skip

    rng = np.random.default_rng(1)
    eager = np.abs(rng.normal(0, 0.15, 80))
    fused_cnn = np.abs(rng.normal(0.6, 0.4, 60))
    scores = list(eager) + list(fused_cnn)
    cells = [regime_of(feats("decoder" if i % 2 else "encoder", False)) for i in range(80)]
    cells += [regime_of(feats("cnn", True)) for _ in range(60)]
    groups = [f"r{i}" for i in range(len(scores))]
    sources = [f"s{i % 4}" for i in range(80)] + [f"dle{i % 2}" for i in range(60)]
    policy = _regime_policy(scores, cells, groups, sources)

    eager_cnn, warns = policy.regime_half_width(feats("cnn", False), 0.9)
    fused_half, _ = policy.regime_half_width(feats("cnn", True), 0.9)
    assert "1 device, any kind, eager" in warns[0]
    assert eager_cnn < fused_half / 2
    fresh = np.abs(rng.normal(0, 0.15, 4000))
    assert 0.88 <= np.mean(fresh <= eager_cnn) <= 1.0  # its pool's 90% quantile, widened x1.25
    # the order of the back-off, and an approximate plan's runs kept out of the stack cell
    keys = cell_keys(regime_of(feats("cnn", False)))
    assert keys.index("1 device|*|eager") == keys.index("1 device|cnn|eager") + 1 == keys.index("1 device|cnn") - 1
    plan = regime_of(feats("decoder", True), "transformer-xl")
    assert not any("*" in k.split("|") for k in pooled_keys(plan)) and pooled_keys(plan)[-1] == "1 device|approximate plan"
    assert describe("1 device|*|eager") == "1 device, any kind, eager"


def _memorizing_data(seed: int, transferable: bool):
    """12 groups of 40 rows; `transferable`: y = sin(x0) (holds in every group); else y = each group's
    own offset (sd 0.5), which the booster can learn only through the group's id (x_id), so for a
    group it has not seen its prediction is another group's offset."""
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(12), 40)
    x0 = rng.uniform(-2, 2, len(ids))
    offsets = rng.normal(0.0, 0.5, 12)
    y = (np.sin(x0) if transferable else offsets[ids]) + rng.normal(0.0, 0.03, len(ids))
    X = pd.DataFrame({"x0": x0, "x_id": ids.astype(float)})
    return X, y, np.asarray([f"g{i}" for i in ids])


def test_out_of_fold_predictions_are_the_ones_mapie_scored():
    X, y, groups = grouped_data(3, n_groups=8)
    cal = calibrate_grouped(X, y, groups, config=FAST)
    np.testing.assert_allclose(np.abs(cal.y - cal.oof), cal.mapie.conformity_scores, atol=1e-12)
    half = cal.with_transfer(0.5)
    b = cal.oof_offset
    np.testing.assert_allclose(half.row_scores, np.abs(y - (b + 0.5 * (cal.oof - b))), atol=1e-12)
    ours = LGBMRatioRegressor(FAST).fit(X, y)
    ours.evidence_ = dataclasses.replace(ours.evidence_, transfer=0.5)
    np.testing.assert_allclose(half.mapie.predict(X.iloc[:9]), ours.predict(X.iloc[:9]), atol=1e-12)


@pytest.mark.parametrize("transferable", [True, False])
def test_the_transfer_share_keeps_what_holds_across_groups_and_drops_what_identifies_them(transferable):
    """The truth is known: a residual that is the same function in every group is kept whole (share
    1.0); one that is each group's own offset, learnable only by recognising the group, says nothing
    about a group the model has not seen, and is dropped (share <= 0.2)."""
    X, y, groups = _memorizing_data(7, transferable)
    share = transfer_share(calibrate_grouped(X, y, groups, config=FAST))
    assert share == 1.0 if transferable else share <= 0.2
