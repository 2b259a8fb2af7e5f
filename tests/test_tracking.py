"""The tracker: embedded default store, environment override, key hygiene, lazy mlflow import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from perfmodel import tracking

ROOT = Path(__file__).resolve().parents[1]


def test_default_uri_is_sqlite_in_the_repo_and_env_overrides(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.default_tracking_uri() == f"sqlite:///{ROOT / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking.example:5000")
    assert tracking.default_tracking_uri() == "http://tracking.example:5000"
    assert tracking.MlflowTracker().uri == "http://tracking.example:5000"


def test_artifacts_go_beside_a_sqlite_store_and_servers_decide_their_own(tmp_path):
    assert (
        tracking.artifact_root_for(f"sqlite:///{tmp_path / 'mlflow.db'}")
        == (tmp_path / "mlartifacts").as_uri()
    )
    assert tracking.artifact_root_for("http://tracking.example:5000") is None


def test_param_keys_are_sanitised_and_configs_flattened():
    assert tracking.param_key("rows_by_source.a:b(c)") == "rows_by_source.a_b_c_"
    assert tracking.flatten("config", {"lgbm": {"seed": 0}, "splits": ("loho",)}) == {
        "config.lgbm.seed": 0,
        "config.splits": ("loho",),
    }


def test_import_does_not_load_mlflow():
    code = "import sys, perfmodel.tracking; print('mlflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_tracker_logs_a_run_and_has_no_champion_in_a_fresh_store(tmp_path):
    tracker = tracking.MlflowTracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert tracker.champion("loho_median_ape_pct") is None
    with tracker.run("unit") as run_id:
        tracker.log_params({"a.b": 1, "odd:key": "x"})
        tracker.log_metrics({"loho_median_ape_pct": 7.5, "skipped_nan": float("nan")})
        note = tmp_path / "note.md"
        note.write_text("hello")
        tracker.log_artifact(note, "evaluation")
    run = tracker.client.get_run(run_id)
    assert run.data.params == {"a.b": "1", "odd_key": "x"}
    assert run.data.metrics == {"loho_median_ape_pct": 7.5}
    assert (tmp_path / "mlartifacts").is_dir()
    with pytest.raises(tracking.TrackingError):
        tracker.log_metrics({"x": 1.0})
