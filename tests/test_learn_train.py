"""Training records its work: the champion decision (pure), `fit_and_log` against an in-memory
tracker (local save before logging, no models/ write without export, alias moves only beyond the
seed spread on identical rows), and one integration run against a real MLflow store."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from fake_tracker import MemoryTracker
from session_cache import build_once

from perfmodel.learn.champion import Candidate, Incumbent, decide_champion, needs_spread
from perfmodel.learn.data import load_training_data
from perfmodel.learn.evaluate import EvalConfig
from perfmodel.learn.metadata import read_model_folder
from perfmodel.learn.metrics import KERNEL_ALONE_METRIC, kernel_alone_headline
from perfmodel.learn.regressor import LGBMConfig
from perfmodel.learn.shipped import load_shipped_model
from perfmodel.learn.synthetic import make_synthetic_table, synthetic_catalog
from perfmodel.learn.train import fit_and_log
from perfmodel.tracking import TrackingError

ROOT = Path(__file__).resolve().parents[1]
SMALL = EvalConfig(
    n_jobs=1,  # in this process: the synthetic accelerators exist only here (catalog.use_extra_gpus)
    lgbm=LGBMConfig(n_estimators=60, learning_rate=0.15),
    splits=("loso", "unseen_gpu"),  # the headline splits are all a decision needs
    inner_max_splits=2,
    final_max_splits=4,
)


# --- the decision, on numbers ------------------------------------------------------------------

NEW = Candidate(label="this run", headline_pct=12.0, dataset_sha256="a" * 64)


def test_no_champion_means_the_first_model_is_champion():
    decision = decide_champion(NEW, None, spread_pct=None)
    assert decision.promote and decision.same_rows is None


def test_a_gain_within_the_seed_spread_does_not_promote_and_one_beyond_it_does():
    old = Incumbent(label="champion version 3", headline_pct=12.33, dataset_sha256="a" * 64)
    assert needs_spread(NEW, old)
    noise = decide_champion(NEW, old, spread_pct=1.1)  # a 0.33-point gain against a 1.1-point spread
    assert not noise.promote and noise.gain_pct == pytest.approx(0.33) and noise.spread_pct == 1.1
    assert "within the seed-to-seed spread" in noise.reason
    real = decide_champion(
        NEW, Incumbent(label="v3", headline_pct=14.0, dataset_sha256="a" * 64), spread_pct=1.1
    )
    assert real.promote and real.gain_pct == pytest.approx(2.0)
    unmeasured = decide_champion(NEW, old, spread_pct=None)
    assert not unmeasured.promote and "no seed spread" in unmeasured.reason


def test_different_rows_are_never_compared_unless_forced():
    old = Incumbent(label="champion version 8", headline_pct=40.0, dataset_sha256="b" * 64)
    assert not needs_spread(NEW, old)  # no spread is worth measuring: the numbers are not comparable
    decision = decide_champion(NEW, old, spread_pct=0.1)
    assert not decision.promote and decision.same_rows is False
    assert "different rows" in decision.reason and "bbbbbbbb" in decision.reason
    forced = decide_champion(NEW, old, spread_pct=None, force=True)
    assert forced.promote and "--force-champion" in forced.reason


def test_a_model_that_does_not_beat_the_kernel_model_alone_is_never_champion_unless_forced():
    """Issue 21: the learned residual becomes the champion only where it beats the kernel model
    alone on the same held-out folds, with no champion yet and against a worse champion alike."""
    behind = dataclasses.replace(NEW, kernel_alone_pct=12.0)  # a tie is not a gain
    first = decide_champion(behind, None, spread_pct=None)
    assert not first.promote and "kernel model alone" in first.reason and "12.00% vs 12.00%" in first.reason
    worse_champion = Incumbent(label="v3", headline_pct=30.0, dataset_sha256="a" * 64)
    assert not decide_champion(behind, worse_champion, spread_pct=0.1).promote
    forced = decide_champion(behind, None, spread_pct=None, force=True)
    assert forced.promote and "--force-champion" in forced.reason
    ahead = dataclasses.replace(NEW, kernel_alone_pct=12.01)
    assert decide_champion(ahead, None, spread_pct=None).promote
    assert decide_champion(ahead, worse_champion, spread_pct=0.1).promote


def test_the_kernel_alone_headline_is_the_bound_method_on_the_headline_splits():
    metrics = {"loso_bound_median_ape_pct": 40.0, "unseen_gpu_bound_median_ape_pct": 30.0}
    assert kernel_alone_headline(metrics) == 35.0  # a run logged before the metric had its name
    assert kernel_alone_headline({**metrics, KERNEL_ALONE_METRIC: 20.0}) == 20.0
    assert kernel_alone_headline({"loso_bound_median_ape_pct": 40.0}) is None and kernel_alone_headline(None) is None


def test_a_worse_or_equal_model_is_not_promoted_and_needs_no_spread():
    for theirs in (12.0, 11.0):
        old = Incumbent(label="v1", headline_pct=theirs, dataset_sha256="a" * 64)
        assert not needs_spread(NEW, old)
        assert not decide_champion(NEW, old, spread_pct=5.0).promote


# --- fit_and_log with an in-memory tracker ------------------------------------------------------


@pytest.fixture(scope="session")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    with synthetic_catalog():
        for name, seed in (("main", 7), ("other", 8)):
            make_synthetic_table(160, seed=seed, noise_sigma=0.05).to_parquet(root / f"{name}.parquet")
        return {name: load_training_data(root / f"{name}.parquet") for name in ("main", "other")}


@pytest.fixture(scope="session")
def first(data, tmp_path_factory, worker_id):
    """One training into a fresh in-memory registry, exported into an empty folder: built once per
    session (every xdist worker reads the same pickle). Tests copy the tracker before changing it."""

    def build(root: Path) -> dict:
        tracker = MemoryTracker()
        with synthetic_catalog():
            result = fit_and_log(
                data["main"],
                tracker=tracker,
                config=SMALL,
                runs_dir=root / "runs",
                export_dir=root / "models",
            )
        return {"tracker": tracker, "result": result, "root": root}

    return build_once(tmp_path_factory, worker_id, "learn_train_first", build)


def test_each_accelerator_held_out_is_refitted_once_for_its_fold_and_the_kernel_table(data, monkeypatch):
    """The accelerator-never-seen folds refit the kernel model without their accelerator; the
    kernel-level table holds the same accelerators out and takes those fits instead of fitting them
    again, and fits only the accelerators no fold did (here one that has no training rows)."""
    import types

    import pandas as pd

    import perfmodel.learn.evaluate as E
    import perfmodel.learn.train as T
    from perfmodel.kernels.efficiency import load_efficiency
    from perfmodel.learn.synthetic import SYNTHETIC_GPUS

    gpus = sorted(SYNTHETIC_GPUS)[:2]
    trained = data["main"]
    assert set(gpus) <= set(trained.kept["gpu"])
    kernel_table = pd.DataFrame({"gpu": [*gpus, "T4", "cpu"]})  # T4: kernel rows, no training rows
    fold_fits: list[str] = []
    table_calls: list[tuple[list[str], list[str]]] = []

    def fake_fold_fit(_table, *, exclude_gpus=()):
        (gpu,) = exclude_gpus
        fold_fits.append(gpu)
        return types.SimpleNamespace(params=dataclasses.replace(load_efficiency(), fitted_on=(f"without {gpu}",)))

    def fake_table_rows(_table, *, gpus, fitted=None, progress=None):
        fitted = dict(fitted or {})
        table_calls.append((list(gpus), sorted(fitted)))
        for gpu in gpus:  # what the table prices each accelerator with: the fold's fit, or none
            assert gpu not in fitted or fitted[gpu].fitted_on == (f"without {gpu}",)
        return pd.DataFrame({"held_out": list(gpus), "kernel_kind": "matmul", "impl": "eager", "ape": 0.1})

    monkeypatch.setattr(E, "fit_efficiency_table", fake_fold_fit)
    monkeypatch.setattr(T, "held_out_predictions", fake_table_rows)
    config = dataclasses.replace(SMALL, splits=("unseen_gpu",))
    with synthetic_catalog():
        fitted = T._fit(dataclasses.replace(trained, kernel_table=kernel_table), config, say=lambda _: None)
    assert sorted(fold_fits) == gpus  # one fit per fold that held an accelerator with kernel rows out
    assert table_calls == [(["T4"], []), (gpus, gpus)]  # the side fits T4 alone; the folds' fits price theirs
    assert sorted(fitted.evaluation.kernel_refits) == gpus
    assert fitted.kernel_heldout.loc[fitted.kernel_heldout["impl"] == "all", "accelerators"].tolist() == [3]


def _tree_digest(folder: Path) -> dict[str, tuple[str, int]]:
    return {
        str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.slow
def test_first_run_is_champion_saved_locally_logged_and_exported(first, data):
    tracker, result, root = first["tracker"], first["result"], first["root"]
    assert result.registered_version == "1" and result.became_champion and tracker.alias == "1"
    assert result.run_name == f"lgbm-{data['main'].sha256[:8]}-{len(data['main'].y)}r"
    local = Path(result.local_dir)
    assert local.parent == root / "runs"
    assert load_shipped_model(local / "model") is not None
    assert json.loads((local / "result.json").read_text())["run_id"] == result.run_id
    run = tracker.runs[result.run_id]
    assert run.status == "FINISHED" and run.name == result.run_name
    # plots and tables at the artifact root (the MLflow compare page matches them by path)
    for name in ("predicted_vs_measured.png", "coverage.png", "evaluation.md", "evaluation.csv"):
        assert name in run.artifacts, name
    # the headline: mean of leave-one-source-out and accelerator-never-seen median APE
    assert run.metrics["headline/headline_median_ape_pct"] == pytest.approx(
        (run.metrics["loso_median_ape_pct"] + run.metrics["unseen_gpu_median_ape_pct"]) / 2
    )
    assert run.metrics["headline/headline_median_ape_pct"] == result.headline
    assert run.tags["headline.headline_median_ape_pct"] == f"{result.headline:.1f}"
    assert "Headline median APE" in run.tags["mlflow.note.content"]
    (dataset,) = run.datasets
    assert dataset.digest == data["main"].sha256 and len(dataset.frame) == len(data["main"].table)
    assert sum(int(v) for k, v in dataset.tags.items() if k.startswith("rows_by_source.")) == len(
        data["main"].table
    )
    # the run is dated from the start of training: its duration covers the fit
    assert (run.end_time_ms - run.start_time_ms) / 1000 >= result.train_seconds
    exported, _ = read_model_folder(root / "models")
    assert exported.version == "1" and exported.run_id == result.run_id


@pytest.mark.slow
def test_training_without_export_leaves_the_model_folder_untouched(data, tmp_path, monkeypatch):
    models = tmp_path / "models"
    shutil.copytree(ROOT / "models", models)
    monkeypatch.setenv("PERFMODEL_MODEL_DIR", str(models))
    monkeypatch.setenv("PERFMODEL_ROOT", str(tmp_path))  # runs/ goes here too
    (tmp_path / "datasets").symlink_to(ROOT / "datasets")  # the kernel table's own hosts are read from there
    monkeypatch.delenv("PERFMODEL_RUNS_DIR", raising=False)  # (tests/conftest.py sets it for the rest)
    before = _tree_digest(models)
    with synthetic_catalog():
        result = fit_and_log(data["main"], tracker=MemoryTracker(), config=SMALL)
    assert result.became_champion and result.exported_to is None
    assert _tree_digest(models) == before
    assert Path(result.local_dir).parent == tmp_path / "runs"


@pytest.mark.slow
def test_a_noise_level_gain_does_not_move_the_alias(data, first, tmp_path):
    """The champion is the first run's model on the same rows, recorded a hair (1e-6 points) worse
    than this run will score: the gain is smaller than the measured seed spread, so the alias stays,
    and the spread used is recorded. (The spread on these 160 rows is small, 5e-4 points with the
    kernel-model features: the residual has little left to learn.)"""
    tracker, previous = MemoryTracker(), first["result"]
    with tracker.run("earlier"):
        version = tracker.log_model(Path(previous.local_dir) / "model", register=True)
    tracker.set_version_tags(
        version, {"headline_median_ape_pct": previous.headline + 1e-6, "dataset_sha256": data["main"].sha256}
    )
    tracker.set_champion(version)
    with synthetic_catalog():
        result = fit_and_log(data["main"], tracker=tracker, config=SMALL, runs_dir=tmp_path, spread_seeds=2)
    assert result.headline == pytest.approx(previous.headline)  # same rows, same seeds: same model
    assert result.registered_version == "2" and not result.became_champion and tracker.alias == "1"
    spread = result.seed_spread
    assert (
        spread is not None
        and spread["seeds"] == 2
        and spread["values_pct"][0] == pytest.approx(result.headline)
    )
    assert spread["range_pct"] > 1e-6 and result.decision["spread_pct"] == pytest.approx(spread["range_pct"])
    assert "within the seed-to-seed spread" in result.decision["reason"]
    assert tracker.versions["2"].tags["seed_spread_range_pct"] == str(spread["range_pct"])
    assert Path(result.local_dir, "model", "metadata.json").read_text().count('"range_pct"') == 1


@pytest.mark.slow
def test_a_champion_on_other_rows_stays_unless_forced_and_export_follows_the_same_rule(data, first, tmp_path):
    tracker, models = copy.deepcopy(first["tracker"]), tmp_path / "models"
    shutil.copytree(first["root"] / "models", models)
    before = _tree_digest(models)
    with synthetic_catalog():
        other = fit_and_log(
            data["other"], tracker=tracker, config=SMALL, runs_dir=tmp_path, export_dir=models
        )
        assert not other.became_champion and other.decision["same_rows"] is False
        assert other.seed_spread is None  # not comparable: no spread was worth measuring
        assert other.exported_to is None and _tree_digest(models) == before
        forced = fit_and_log(
            data["other"],
            tracker=tracker,
            config=SMALL,
            runs_dir=tmp_path,
            export_dir=models,
            force_champion=True,
        )
    assert forced.became_champion and tracker.alias == forced.registered_version
    assert forced.exported_to == str(models)
    assert read_model_folder(models)[0].dataset_sha256 == data["other"].sha256


@pytest.mark.slow
def test_a_tracking_failure_after_the_fit_keeps_the_work(data, tmp_path):
    tracker = MemoryTracker(fail_on=("log_model",))
    with synthetic_catalog(), pytest.raises(TrackingError, match="nothing is lost") as err:
        fit_and_log(data["main"], tracker=tracker, config=SMALL, runs_dir=tmp_path)
    (local,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert str(local) in str(err.value)
    assert load_shipped_model(local / "model") is not None
    assert (local / "evaluation.md").is_file() and (local / "predicted_vs_measured.png").is_file()
    assert [r.status for r in tracker.runs.values()] == ["FAILED"]


@pytest.mark.slow
def test_no_register_logs_but_neither_registers_nor_exports(data, tmp_path):
    tracker = MemoryTracker()
    with synthetic_catalog():
        result = fit_and_log(
            data["main"],
            tracker=tracker,
            config=SMALL,
            runs_dir=tmp_path,
            register=False,
            export_dir=tmp_path / "m",
        )
    assert result.registered_version is None and result.decision is None and tracker.alias is None
    assert result.exported_to is None and not (tmp_path / "m").exists()
    assert result.run_id in tracker.runs


# --- one integration run against a real MLflow store -----------------------------------------


@pytest.mark.slow
def test_real_mlflow_run_is_comparable_and_its_model_predicts_like_the_export(data, tmp_path):
    from perfmodel.learn.pyfunc import predict_rows
    from perfmodel.tracking import MlflowTracker, import_mlflow

    mlflow = import_mlflow()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with synthetic_catalog():
        result = fit_and_log(
            data["main"],
            tracker=MlflowTracker(uri),
            config=SMALL,
            runs_dir=tmp_path / "runs",
            export_dir=tmp_path / "m",
        )
        client = mlflow.MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name("perfmodel")
        assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
        run = client.get_run(result.run_id)
        assert run.info.run_name == result.run_name
        assert (run.info.end_time - run.info.start_time) / 1000 >= result.train_seconds
        assert run.data.tags["mlflow.note.content"].startswith("LightGBM x roofline")
        assert run.data.tags["headline.headline_median_ape_pct"] == f"{result.headline:.1f}"
        assert run.data.metrics["headline/headline_median_ape_pct"] == pytest.approx(result.headline)
        assert run.data.params["dataset_sha256"] == data["main"].sha256
        (dataset,) = run.inputs.dataset_inputs
        assert dataset.dataset.digest == data["main"].sha256[:36] and dataset.dataset.name.startswith(
            "features-"
        )
        assert {a.path for a in client.list_artifacts(result.run_id)} >= {"evaluation.md", "coverage.png"}
        alias = client.get_model_version_by_alias("perfmodel-throughput", "champion")
        assert str(alias.version) == result.registered_version == "1"

        mlflow.set_tracking_uri(uri)
        mlflow.set_registry_uri(uri)
        registered = mlflow.pyfunc.load_model("models:/perfmodel-throughput@champion")
        assert registered.metadata.get_input_schema() is not None
        table = make_synthetic_table(20, seed=99)
        got = registered.predict(table.drop(columns=["step_time_s"]), params={"confidence": 0.8})
        expected = predict_rows(load_shipped_model(tmp_path / "m"), table, 0.8)
    assert os.listdir(tmp_path / "m") and len(got) == 20
    for column in ("log_ratio", "log_low", "log_high", "step_time_s"):
        np.testing.assert_allclose(got[column], expected[column], rtol=1e-12)
    assert list(got["warnings"]) == list(expected["warnings"])
