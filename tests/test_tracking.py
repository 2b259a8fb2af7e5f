"""The tracker: default store, fail-fast reachability (library and `perfmodel train`), telemetry
off by default, key hygiene, lazy mlflow import, and what a fresh MLflow store looks like."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfmodel import tracking

ROOT = Path(__file__).resolve().parents[1]
CI_MARKERS = ("PYTEST_CURRENT_TEST", "CI", "GITHUB_ACTIONS", "MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK")


def test_default_uri_is_sqlite_in_the_project_root_and_env_overrides(monkeypatch, tmp_path):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("PERFMODEL_ROOT", str(tmp_path))
    assert tracking.default_tracking_uri() == f"sqlite:///{tmp_path / 'mlflow.db'}"
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


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_stores_fail_fast_and_reachable_ones_pass(tmp_path):
    start = time.monotonic()
    with pytest.raises(tracking.TrackingError, match="did not answer"):
        tracking.check_reachable(f"http://127.0.0.1:{_closed_port()}")
    with pytest.raises(tracking.TrackingError, match="does not exist"):
        tracking.check_reachable(f"sqlite:///{tmp_path / 'no' / 'such' / 'mlflow.db'}")
    tracking.check_reachable(f"sqlite:///{tmp_path / 'mlflow.db'}")  # created on first use
    assert time.monotonic() - start < 5


@pytest.mark.slow
def test_a_server_that_accepts_but_never_answers_times_out():
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes connections; nobody ever reads or replies
        port = silent.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(tracking.TrackingError, match="did not answer within 1 s"):
            tracking.check_reachable(f"http://127.0.0.1:{port}", timeout_s=1.0)
        assert time.monotonic() - start < 5


@pytest.mark.slow
def test_train_with_an_unreachable_server_is_one_line_and_exit_1_before_fitting(tmp_path):
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"http://127.0.0.1:{_closed_port()}",
        "PERFMODEL_ROOT": str(tmp_path),
        "PERFMODEL_RUNS_DIR": str(tmp_path / "runs"),
    }
    start = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "perfmodel", "train", "--features", str(tmp_path / "absent.parquet")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    assert time.monotonic() - start < 30
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and "did not answer" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "runs").exists()  # it stopped before reading the data or fitting


@pytest.mark.parametrize("user_setting", [None, "false"])
@pytest.mark.slow
def test_mlflow_telemetry_is_off_unless_the_user_turns_it_on(tmp_path, user_setting):
    """With the default, MLflow writes no telemetry installation file; the control shows the test
    sees the file when the user opts in (MLFLOW_DISABLE_TELEMETRY=false)."""
    env = {k: v for k, v in os.environ.items() if k not in CI_MARKERS}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    if user_setting is not None:
        env["MLFLOW_DISABLE_TELEMETRY"] = user_setting
    code = (
        "import os\n"
        "from perfmodel.tracking import import_mlflow\n"
        "import_mlflow()  # MLflow starts its telemetry client (and writes the file) on import\n"
        "print(os.environ['MLFLOW_DISABLE_TELEMETRY'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    written = (tmp_path / "config" / "mlflow" / "telemetry.json").exists()
    if user_setting is None:
        assert out.stdout.strip() == "true" and not written
    else:
        assert out.stdout.strip() == "false" and written


@pytest.mark.slow
def test_prepare_opens_a_fresh_store_and_its_experiment_before_any_run(tmp_path):
    """Training prepares the store while its folds run; what it opens is what the run then uses."""
    tracker = tracking.MlflowTracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    tracker.prepare()
    assert (tmp_path / "mlflow.db").is_file()
    found = tracker.client.get_experiment_by_name("perfmodel")
    assert found is not None and tracker.experiment_id() == found.experiment_id
    assert tracker.client.search_runs([found.experiment_id]) == []


@pytest.mark.slow
def test_a_fresh_store_gets_a_classic_experiment_and_runs_with_description_and_start(tmp_path):
    tracker = tracking.MlflowTracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    tracker.check()
    assert tracker.champion("loho_median_ape_pct") is None
    started = int(time.time() * 1000) - 60_000  # a run that began a minute ago
    with tracker.run(
        "unit", description="what it is", tags={"headline.x": "1.0"}, start_time_ms=started
    ) as run_id:
        tracker.log_params({"a.b": 1, "odd:key": "x"})
        tracker.log_metrics({"loho_median_ape_pct": 7.5, "skipped_nan": float("nan")})
        tracker.set_tags({"decision": "kept"})
        note = tmp_path / "note.md"
        note.write_text("hello")
        tracker.log_artifact(note)
    run = tracker.client.get_run(run_id)
    assert run.data.params == {"a.b": "1", "odd_key": "x"}
    assert run.data.metrics == {"loho_median_ape_pct": 7.5}
    assert run.data.tags["mlflow.note.content"] == "what it is" and run.data.tags["decision"] == "kept"
    assert run.info.start_time == started and run.info.end_time - started >= 60_000
    assert [a.path for a in tracker.client.list_artifacts(run_id)] == ["note.md"]
    experiment = tracker.client.get_experiment_by_name("perfmodel")
    assert experiment.tags[tracking.EXPERIMENT_KIND_TAG] == "custom_model_development"
    assert (tmp_path / "mlartifacts").is_dir()
    with pytest.raises(tracking.TrackingError):
        tracker.log_metrics({"x": 1.0})
