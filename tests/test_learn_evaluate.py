"""The evaluation protocol: metrics, folds, baselines, holdouts (library and CLI)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfmodel.errors import ConfigError
from perfmodel.learn.evaluate import EvalConfig, evaluate_all, evaluate_holdout, make_folds
from perfmodel.learn.metrics import ape_pct, error_metrics, interval_metrics
from perfmodel.learn.regressor import LGBMConfig, forget_recent_fits
from perfmodel.learn.report import evaluation_markdown
from perfmodel.learn.spread import headline_spread, seed_spread, spread_summary
from perfmodel.learn.synthetic import make_synthetic_table, synthetic_catalog

ROOT = Path(__file__).resolve().parents[1]
FAST = EvalConfig(
    # in this process: the synthetic accelerators exist only here (catalog.use_extra_gpus), and
    # under pytest -n 2 worker processes of our own would only oversubscribe the two cores
    n_jobs=1,
    lgbm=LGBMConfig(n_estimators=60, learning_rate=0.15),
    random_folds=3,
    inner_max_splits=2,
    final_max_splits=4,
)


@pytest.fixture(scope="module")
def data():
    from perfmodel.features import rows_to_training_data

    with synthetic_catalog():  # only while building: the tests enter it again where they need it
        X, y, kept, _ = rows_to_training_data(make_synthetic_table(300, seed=11, noise_sigma=0.03))
    return X, y, kept


def test_rows_that_repeat_a_workload_get_what_each_would_get_alone():
    """Building the training data plans and prices each distinct workload once (a run's logged
    windows repeat it); every row still gets its own workload's numbers."""
    from perfmodel.features import rows_to_training_data

    with synthetic_catalog():
        table = make_synthetic_table(40, seed=5)
        doubled = pd.concat([table.iloc[::-1], table.assign(row_id=table["row_id"] + "-again")], ignore_index=True)
        X1, y1, _, _ = rows_to_training_data(table)
        X2, y2, _, _ = rows_to_training_data(doubled)
    n = len(X1)
    pd.testing.assert_frame_equal(X2.iloc[n:].reset_index(drop=True), X1)
    pd.testing.assert_frame_equal(X2.iloc[:n][::-1].reset_index(drop=True), X1)
    np.testing.assert_array_equal(y2, np.concatenate([y1[::-1], y1]))


def test_ape_is_on_throughput_and_metrics_match_hand_computation():
    # measured step = bound * e^y; predicted = bound * e^yhat; throughput APE = |e^(y - yhat) - 1|
    y = np.log([2.0, 4.0, 1.0])
    pred = np.log([2.0, 2.0, 1.25])
    np.testing.assert_allclose(ape_pct(y, pred), [0.0, 100.0, 20.0])
    m = error_metrics(y, pred)
    assert m["median_ape_pct"] == pytest.approx(20.0)
    assert m["mean_ape_pct"] == pytest.approx(40.0)
    assert error_metrics(y, y)["p90_ape_pct"] == 0.0


def test_interval_metrics_count_coverage_and_width_by_hand():
    # |y - pred| = 0.1, 0.3, 0.5 against half-width 0.3: two of three covered (the edge counts)
    m = interval_metrics([0.1, 0.3, 0.5], [0.0, 0.0, 0.0], [0.3, 0.3, 0.3])
    assert m["coverage_pct"] == pytest.approx(200 / 3)
    # throughput interval exp(-h)..exp(h) relative to the estimate: e^0.3 - e^-0.3 = 0.6090...
    assert m["median_rel_width_pct"] == pytest.approx((math.exp(0.3) - math.exp(-0.3)) * 100)


def test_leave_one_hardware_out_holds_out_whole_accelerators_each_once(data):
    """One accelerator per fold up to EvalConfig.max_group_folds of them, else that many folds of
    whole accelerators: every accelerator is held out once, never split across train and test."""
    import dataclasses

    _, _, kept = data
    gpus = kept["gpu"].nunique()
    one_each = make_folds("loho", kept, dataclasses.replace(FAST, max_group_folds=gpus))
    assert len(one_each) == gpus
    for train, test, label in one_each:
        assert set(kept["gpu"].iloc[test]) == {label}
        assert label not in set(kept["gpu"].iloc[train])
    grouped = make_folds("loho", kept, dataclasses.replace(FAST, max_group_folds=4))
    assert len(grouped) == 4
    held = [set(kept["gpu"].iloc[test]) for _, test, _ in grouped]
    assert sorted(g for h in held for g in h) == sorted(kept["gpu"].unique())
    for (train, _, _), h in zip(grouped, held, strict=True):
        assert not h & set(kept["gpu"].iloc[train])


def test_accelerator_never_seen_scores_only_eager_single_gpu_rows_of_the_held_out_one(data):
    X, _, kept = data
    folds = make_folds("unseen_gpu", kept, FAST, X)
    assert folds
    for train, test, label in folds:
        assert set(kept["gpu"].iloc[test]) == {label}
        assert label not in set(kept["gpu"].iloc[train])
        assert (X["num_gpus"].iloc[test] <= 1).all() and (X["recipe_fused_kinds"].iloc[test] == 0).all()


def test_leave_one_source_out_holds_out_a_source_and_scores_its_single_node_rows(data):
    X, _, kept = data
    folds = make_folds("loso", kept, FAST, X)
    assert sorted(label for _, _, label in folds) == sorted(kept["source"].unique())
    for train, test, label in folds:
        assert set(kept["source"].iloc[test]) == {label}
        assert label not in set(kept["source"].iloc[train])
        assert (X["num_nodes"].iloc[test] <= 1).all()


def test_random_folds_never_split_the_rows_of_one_run(data):
    _, _, kept = data
    kept = kept.copy()
    kept["run_group"] = [f"run{i // 3}" for i in range(len(kept))]  # runs of three rows
    for train, test, _ in make_folds("random", kept, FAST):
        assert not set(kept["run_group"].iloc[train]) & set(kept["run_group"].iloc[test])


def test_metrics_give_each_run_one_vote():
    # APEs 0, 100, 20 %; the 100% row is one of four windows of a run (weight 1/4), as is the
    # 0% row: sorted 0 (0.25), 20 (1), 100 (0.25) -> half of the 1.5 total weight is reached at 20
    y = np.log([2.0, 4.0, 1.0])
    pred = np.log([2.0, 2.0, 1.25])
    assert error_metrics(y, pred, [0.25, 0.25, 1.0])["median_ape_pct"] == pytest.approx(20.0)
    # coverage: covered rows weigh 0.25 + 1 of 1.5
    m = interval_metrics([0.1, 0.3, 0.5], [0.0, 0.0, 0.0], [0.3, 0.2, 0.6], [0.25, 0.25, 1.0])
    assert m["coverage_pct"] == pytest.approx(125 / 1.5)


@pytest.mark.slow
def test_protocol_reports_model_and_both_baselines_on_every_split(data):
    X, y, kept = data
    with synthetic_catalog():
        ev = evaluate_all(X, y, kept, FAST)
    assert set(ev.summary["split"]) == {"random", "loho", "lofo", "loso", "unseen_gpu", "lofw"}
    assert set(ev.summary["method"]) == {"model", "const", "bound", "oracle"}
    metrics = ev.metrics()
    # the bound baseline predicts y_hat = 0 (efficiency 1): its error is known in closed form
    # (every synthetic row is its own run, so the one-vote-per-run median is the plain lower median)
    expected_bound = float(np.quantile(np.abs(np.exp(y) - 1.0) * 100, 0.5, method="inverted_cdf"))
    assert metrics["loho_bound_median_ape_pct"] == pytest.approx(expected_bound)
    # a learned correction of a smooth known efficiency beats a constant efficiency (fused stacks:
    # far from evidence they fall back to their step overhead, the training runs' median residual)
    p = ev.predictions
    fused = p[(p["split"] == "loho") & (p["stack"] != "eager")]
    assert len(fused) > 30
    assert np.median(ape_pct(fused["y"], fused["pred_model"])) < np.median(ape_pct(fused["y"], fused["pred_const"]))
    # an eager transformer on a held-out accelerator that no training run is near is the kernel model
    # alone (perfmodel.learn.evidence; the synthetic kernel model here is far from the truth, which
    # is what that shrink costs when it is); no fused row is: it keeps its step overhead
    eager = p[(p["split"] == "loho") & (p["stack"] == "eager") & p["kind"].isin(["decoder", "encoder"])]
    assert len(eager) > 30 and (eager["pred_model"] == 0.0).mean() > 0.25
    assert not (fused["pred_model"] == 0.0).any()
    assert 0 <= metrics["coverage90_loho_pct"] <= 100
    assert set(ev.breakdown["by"]) == {"gpu", "source"}
    assert "| leave-one-hardware-out | model |" in evaluation_markdown(ev)


def test_holdout_reports_only_on_the_held_out_group(data):
    X, y, kept = data
    with synthetic_catalog():
        ev = evaluate_holdout(X, y, kept, "gpu", "synth-h2", FAST)
    n = int((kept["gpu"] == "synth-h2").sum())
    assert set(ev.predictions["gpu"]) == {"synth-h2"}
    assert (ev.summary["n_rows"] == n).all()
    assert set(ev.breakdown.loc[ev.breakdown["by"] == "gpu", "key"]) == {"synth-h2"}
    # the const baseline is the median of the *training* rows, not of the held-out ones
    train_median = float(np.median(y[(kept["gpu"] != "synth-h2").to_numpy()]))
    assert ev.predictions["pred_const"].iloc[0] == pytest.approx(train_median)


def test_holdout_rejects_unknown_columns_and_values(data):
    X, y, kept = data
    with pytest.raises(ConfigError, match="not a feature-table column"):
        evaluate_holdout(X, y, kept, "colour", "red", FAST)
    with pytest.raises(ConfigError, match="values present"):
        evaluate_holdout(X, y, kept, "gpu", "H900", FAST)


@pytest.mark.slow
def test_cli_evaluate_holdout_through_the_entry_point(tmp_path):
    """Real catalog GPUs (a subprocess cannot see the synthetic ones)."""
    from perfmodel.catalog import get_gpu, gpu_names

    gpus = tuple(
        g for g in gpu_names() if g != "cpu" and get_gpu(g).supports("bf16") and get_gpu(g).memory_gb >= 40
    )[:5]
    assert len(gpus) >= 3
    path = tmp_path / "features.parquet"
    table = make_synthetic_table(200, seed=2, gpus=gpus)
    table.to_parquet(path)
    held = gpus[1]
    env = {**os.environ, "COLUMNS": "160", "NO_COLOR": "1"}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfmodel",
            "evaluate",
            "--holdout",
            f"gpu={held}",
            "--features",
            str(path),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["holdout"] == {"key": "gpu", "value": held}
    n = int((table["gpu"] == held).sum())
    assert {r["split"] for r in out["summary"]} == {f"holdout:gpu={held}"}
    assert all(r["n_rows"] == n for r in out["summary"])
    assert {r["key"] for r in out["breakdown"] if r["by"] == "gpu"} == {held}
    bad = subprocess.run(
        [sys.executable, "-m", "perfmodel", "evaluate", "--holdout", "gpu", "--features", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    assert bad.returncode == 2 and "KEY=VALUE" in bad.stderr


@pytest.mark.slow
def test_seed_spread_varies_only_the_seeds(data):
    X, y, kept = data
    with synthetic_catalog():
        runs = seed_spread(X, y, kept, seeds=2, splits=("random", "loho", "loso", "unseen_gpu"), config=FAST)
        loho = runs[runs["split"] == "loho"].sort_values("seed")["median_ape_pct"].tolist()
        loso = runs[runs["split"] == "loso"].sort_values("seed")["median_ape_pct"].tolist()
        unseen = runs[runs["split"] == "unseen_gpu"].sort_values("seed")["median_ape_pct"].tolist()
        headline = [(a + b) / 2 for a, b in zip(loso, unseen, strict=True)]  # the headline: their mean
        # the decision's spread: seed 0 taken from the run's own evaluation, seed 1 evaluated
        spread = headline_spread(X, y, kept, seeds=2, config=FAST, seed0_pct=headline[0])
    assert sorted(runs["seed"].unique()) == [0, 1] and set(runs["split"]) == {"random", "loho", "loso", "unseen_gpu"}
    random = runs[runs["split"] == "random"]["median_ape_pct"].tolist()
    assert random[0] != random[1]  # different folds and bagging: the spread is not zero by construction
    summary = spread_summary(runs)
    row = summary[(summary["split"] == "loho") & (summary["metric"] == "median_ape_pct")].iloc[0]
    assert row["mean"] == pytest.approx(sum(loho) / 2) and row["min"] == min(loho) and row["max"] == max(loho)
    assert row["std"] == pytest.approx(abs(loho[0] - loho[1]) / math.sqrt(2))  # sample std of two values
    assert spread.values_pct == pytest.approx(tuple(headline))
    assert spread.range_pct == pytest.approx(abs(headline[0] - headline[1]))
    with pytest.raises(ConfigError, match="at least 2"):
        seed_spread(X, y, kept, seeds=1, config=FAST)
    with pytest.raises(ConfigError, match="unknown split"):
        seed_spread(X, y, kept, seeds=2, splits=("nope",), config=FAST)


@pytest.mark.slow
def test_fold_models_are_the_shipped_model_without_its_second_fit(data):
    """Evaluation scores what is shipped: the fold model's points and intervals equal those of
    `fit_learned_model` on the same rows."""
    from perfmodel.learn.fit import fit_fold_model, fit_learned_model, queries_for_rows

    X, y, kept = data
    train, test = slice(0, 200), slice(200, 300)
    with synthetic_catalog():
        shipped, _ = fit_learned_model(
            X.iloc[train], y[train], kept.iloc[train], config=FAST.lgbm, max_splits=2
        )
        forget_recent_fits()  # fitted again, not the remembered fits of the same rows
        policy, point = fit_fold_model(
            X.iloc[train], y[train], kept.iloc[train], config=FAST.lgbm, max_splits=2, family_calibration=True
        )
        queries = queries_for_rows(X.iloc[test], kept["gpu"].iloc[test], kept["model_family"].iloc[test])
    np.testing.assert_allclose(
        point(X.iloc[test]), shipped.predict_log_ratio(X.iloc[test]), rtol=0, atol=1e-12
    )
    assert [policy.interval(q, 0.9) for q in queries] == [shipped.policy.interval(q, 0.9) for q in queries]
