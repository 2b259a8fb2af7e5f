"""`fit_and_log` end to end against a throwaway MLflow store: registration, the champion alias,
the export into a models/ folder, and the equivalence of the exported and registered models."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perfmodel.learn.evaluate import EvalConfig
from perfmodel.learn.regressor import LGBMConfig
from perfmodel.learn.shipped import load_shipped_model
from perfmodel.learn.synthetic import make_synthetic_table, synthetic_catalog
from perfmodel.learn.train import fit_and_log

pytestmark = pytest.mark.slow

SMALL = EvalConfig(
    n_jobs=1,  # in-process: the synthetic catalog is patched into this process only
    lgbm=LGBMConfig(n_estimators=60, learning_rate=0.15),
    splits=("random", "loho"),
    random_folds=3,
    inner_max_splits=2,
    final_max_splits=4,
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three trainings into one store: noisy (first champion), clean (better: promoted), noisy
    again (worse: not promoted)."""
    root = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    models = root / "models"
    mp = pytest.MonkeyPatch()
    mp.setenv("MLFLOW_TRACKING_URI", uri)
    with synthetic_catalog():
        paths = {}
        for name, sigma in (("noisy", 0.25), ("clean", 0.02)):
            table = make_synthetic_table(240, seed=7, noise_sigma=sigma)
            paths[name] = root / f"{name}.parquet"
            table.to_parquet(paths[name])
        results = [
            fit_and_log(paths[name], tracking_uri=uri, export_dir=models, config=SMALL, run_name=name)
            for name in ("noisy", "clean", "noisy")
        ]
        yield {"uri": uri, "models": models, "results": results, "table": make_synthetic_table(30, seed=99)}
    mp.undo()


def test_champion_alias_moves_only_on_improvement(runs):
    first, second, third = runs["results"]
    assert [r.registered_version for r in runs["results"]] == ["1", "2", "3"]
    assert first.became_champion and first.champion_version == "1"
    assert second.headline < first.headline
    assert second.became_champion and second.champion_version == "2"
    assert not third.became_champion and third.champion_version == "2"
    assert third.previous_champion_metric == pytest.approx(second.headline)
    from mlflow import MlflowClient

    alias = MlflowClient(tracking_uri=runs["uri"]).get_model_version_by_alias(
        "perfmodel-throughput", "champion"
    )
    assert str(alias.version) == "2"
    meta = json.loads((runs["models"] / "metadata.json").read_text())
    assert meta["version"] == "2" and meta["run_id"] == second.run_id  # the worse run did not overwrite it


def test_exported_model_predicts_like_the_registered_champion(runs):
    import mlflow
    import mlflow.pyfunc

    from perfmodel.analytic import estimate
    from perfmodel.features import workload_from_row

    with synthetic_catalog():
        table = runs["table"]
        mlflow.set_tracking_uri(runs["uri"])
        mlflow.set_registry_uri(runs["uri"])
        registered = mlflow.pyfunc.load_model("models:/perfmodel-throughput@champion")
        got = registered.predict(table.drop(columns=["step_time_s"]), params={"confidence": 0.9})
        shipped = load_shipped_model(runs["models"])
        items = []
        for row in table.to_dict("records"):
            w = workload_from_row(row)
            items.append((w, estimate(w)))
        corrections = shipped.correct(items, 0.9)
    np.testing.assert_allclose(got["log_ratio"], [c.log_ratio for c in corrections], rtol=1e-10)
    np.testing.assert_allclose(got["log_low"], [c.log_low for c in corrections], rtol=1e-10)
    np.testing.assert_allclose(got["log_high"], [c.log_high for c in corrections], rtol=1e-10)
    bound = np.array([est.t_bound_s for _, est in items])
    np.testing.assert_allclose(
        got["step_time_s"], bound * np.exp([c.log_ratio for c in corrections]), rtol=1e-10
    )


def test_run_logs_config_hash_schema_metrics_and_artifacts(runs):
    from mlflow import MlflowClient

    result = runs["results"][1]
    client = MlflowClient(tracking_uri=runs["uri"])
    run = client.get_run(result.run_id)
    params, metrics = run.data.params, run.data.metrics
    assert params["dataset_sha256"] == result.dataset_sha256 and len(result.dataset_sha256) == 64
    assert params["schema_version"] == "1"
    assert params["config.lgbm.n_estimators"] == "60"
    assert sum(int(v) for k, v in params.items() if k.startswith("rows_by_source.")) == result.rows_total
    for key in (
        "loho_median_ape_pct",
        "random_p90_ape_pct",
        "coverage90_loho_pct",
        "loho_const_median_ape_pct",
        "loho_bound_median_ape_pct",
        "train_seconds",
    ):
        assert key in metrics, key
    assert metrics["loho_median_ape_pct"] == pytest.approx(result.headline)
    names = {a.path for a in client.list_artifacts(result.run_id, "evaluation")}
    for name in (
        "predicted_vs_measured.png",
        "residuals_by_hardware.png",
        "coverage.png",
        "feature_importance.png",
        "evaluation.md",
        "evaluation.csv",
    ):
        assert f"evaluation/{name}" in names, name
    assert result.evaluation is not None and set(result.evaluation.summary["split"]) == {"random", "loho"}


def test_no_register_logs_the_run_but_leaves_registry_and_models_alone(runs, tmp_path):
    with synthetic_catalog():
        path = tmp_path / "t.parquet"
        make_synthetic_table(120, seed=5).to_parquet(path)
        result = fit_and_log(
            path,
            tracking_uri=runs["uri"],
            register=False,
            export_dir=tmp_path / "models",
            config=EvalConfig(lgbm=SMALL.lgbm, splits=("loho",), inner_max_splits=2, final_max_splits=3, n_jobs=1),
        )
    assert result.registered_version is None and not result.became_champion
    assert result.exported_to is None and load_shipped_model(tmp_path / "models") is None
    assert result.run_id


def test_promote_moves_the_champion_without_an_improvement(runs, tmp_path):
    with synthetic_catalog():
        path = tmp_path / "noisy.parquet"
        make_synthetic_table(240, seed=7, noise_sigma=0.25).to_parquet(path)
        result = fit_and_log(
            path, tracking_uri=runs["uri"], export_dir=tmp_path / "models", config=SMALL, promote=True
        )
    assert result.became_champion and not result.headline_improved
    assert result.champion_version == result.registered_version
    assert (
        json.loads((tmp_path / "models" / "metadata.json").read_text())["version"]
        == result.registered_version
    )
