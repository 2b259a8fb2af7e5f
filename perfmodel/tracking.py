"""Experiment tracking: a small tracker interface with MLflow behind it.

The embedded default store is SQLite in the project directory (`<repo>/mlflow.db`, artifacts in
`<repo>/mlartifacts`), so tracking works on a fresh clone; `MLFLOW_TRACKING_URI` points it at a
shared server instead. `make ui` opens the MLflow UI on the embedded store. mlflow is imported
only inside methods, never when this module is imported.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from perfmodel.errors import PerfModelError

REPO_ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = "perfmodel"
REGISTERED_MODEL = "perfmodel-throughput"
CHAMPION_ALIAS = "champion"


class TrackingError(PerfModelError, RuntimeError):
    """The tracking store cannot be reached or refused an operation."""


def default_tracking_uri() -> str:
    """`MLFLOW_TRACKING_URI` if set, else SQLite in the repository root."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{REPO_ROOT / 'mlflow.db'}"


def artifact_root_for(uri: str) -> str | None:
    """Where artifacts go for a local SQLite store: `mlartifacts/` beside the database file.
    None for servers (they decide)."""
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///") :])
        return (db.parent / "mlartifacts").resolve().as_uri()
    return None


_PARAM_KEY = re.compile(r"[^A-Za-z0-9_\-. /]")


def param_key(key: str) -> str:
    """MLflow allows alphanumerics, '_', '-', '.', ' ' and '/' in keys."""
    return _PARAM_KEY.sub("_", key)


def flatten(prefix: str, value: Any) -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'prefix.a.b': 1}."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(f"{prefix}.{k}" if prefix else str(k), v))
        return out
    return {prefix: value}


@dataclass(frozen=True)
class ChampionInfo:
    version: str
    run_id: str
    metric: float | None
    """The champion's headline metric, read from its run (None if it has none)."""


class Tracker(Protocol):
    """What training needs from a tracking backend."""

    uri: str

    def run(self, run_name: str) -> contextlib.AbstractContextManager[str]: ...
    def log_params(self, params: Mapping[str, Any]) -> None: ...
    def log_metrics(self, metrics: Mapping[str, float]) -> None: ...
    def log_artifact(self, path: Path, subdir: str | None = None) -> None: ...
    def log_model(self, model_dir: Path, register: bool) -> str | None: ...
    def champion(self, metric: str) -> ChampionInfo | None: ...
    def set_champion(self, version: str) -> None: ...
    def download_model(self, version: str, dest: Path) -> Path: ...


class MlflowTracker:
    """`Tracker` over MLflow: runs in experiment `perfmodel`, models registered as
    `perfmodel-throughput`, the production model marked by the alias `champion`."""

    def __init__(
        self, uri: str | None = None, experiment: str = EXPERIMENT, model_name: str = REGISTERED_MODEL
    ) -> None:
        self.uri = uri or default_tracking_uri()
        self.experiment = experiment
        self.model_name = model_name
        self._client: Any = None
        self._run_id: str | None = None
        self._experiment_id: str | None = None

    # --- setup ----------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        if self._client is None:
            import mlflow

            mlflow.set_tracking_uri(self.uri)
            mlflow.set_registry_uri(self.uri)
            self._client = mlflow.MlflowClient(tracking_uri=self.uri, registry_uri=self.uri)
        return self._client

    def experiment_id(self) -> str:
        if self._experiment_id is None:
            try:
                found = self.client.get_experiment_by_name(self.experiment)
                if found is None:
                    self._experiment_id = self.client.create_experiment(
                        self.experiment, artifact_location=artifact_root_for(self.uri)
                    )
                else:
                    self._experiment_id = found.experiment_id
            except Exception as exc:  # mlflow raises many types; keep one clear message
                raise TrackingError(
                    f"cannot open MLflow experiment {self.experiment!r} at {self.uri}: {exc}"
                ) from exc
        return str(self._experiment_id)

    @contextlib.contextmanager
    def run(self, run_name: str) -> Iterator[str]:
        """Start a run; yields its id; ends it (FAILED if the block raises)."""
        import mlflow

        experiment_id = self.experiment_id()
        # fluent MLflow APIs (start_run, log_model) read process-global URIs: point them here
        mlflow.set_tracking_uri(self.uri)
        mlflow.set_registry_uri(self.uri)
        with mlflow.start_run(experiment_id=experiment_id, run_name=run_name) as active:
            self._run_id = active.info.run_id
            try:
                yield active.info.run_id
            finally:
                self._run_id = None

    # --- logging --------------------------------------------------------------------------

    def _require_run(self) -> str:
        if self._run_id is None:
            raise TrackingError("no active run: call inside `with tracker.run(...)`")
        return self._run_id

    def log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        run_id = self._require_run()
        items = [Param(param_key(k), str(v)[:6000]) for k, v in params.items()]
        for start in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[start : start + 100])

    def log_metrics(self, metrics: Mapping[str, float]) -> None:
        import math
        import time

        from mlflow.entities import Metric

        run_id = self._require_run()
        now = int(time.time() * 1000)
        items = [
            Metric(param_key(k), float(v), now, 0)
            for k, v in metrics.items()
            if v is not None and math.isfinite(float(v))
        ]
        for start in range(0, len(items), 500):
            self.client.log_batch(run_id, metrics=items[start : start + 500])

    def log_artifact(self, path: Path, subdir: str | None = None) -> None:
        self.client.log_artifact(self._require_run(), str(path), artifact_path=subdir)

    def log_model(self, model_dir: Path, register: bool) -> str | None:
        """Log the exported model directory as a pyfunc model (booster + conformal metadata +
        feature preprocessing); register it when `register`. Returns the registered version."""
        import logging
        import warnings

        import mlflow

        self._require_run()
        pyfunc_logger = logging.getLogger("mlflow.pyfunc")
        level = pyfunc_logger.level
        pyfunc_logger.setLevel(logging.ERROR)  # the CloudPickle notice: we pickle our own class
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # MLflow's notes on type hints and signatures
            from perfmodel.learn.pyfunc import PerfmodelThroughputModel, pip_requirements

            info = mlflow.pyfunc.log_model(
                name="model",
                python_model=PerfmodelThroughputModel(),
                artifacts={"model_dir": str(model_dir)},
                pip_requirements=pip_requirements(),
                registered_model_name=self.model_name if register else None,
                await_registration_for=60,
            )
        pyfunc_logger.setLevel(level)
        version = getattr(info, "registered_model_version", None)
        return None if version is None else str(version)

    # --- registry -------------------------------------------------------------------------

    def champion(self, metric: str) -> ChampionInfo | None:
        """The current champion version and its headline metric, or None."""
        try:
            mv = self.client.get_model_version_by_alias(self.model_name, CHAMPION_ALIAS)
        except Exception:  # no registered model or no alias yet
            return None
        value = None
        if mv.run_id:
            try:
                value = self.client.get_run(mv.run_id).data.metrics.get(metric)
            except Exception:
                value = None
        return ChampionInfo(version=str(mv.version), run_id=str(mv.run_id or ""), metric=value)

    def set_champion(self, version: str) -> None:
        self.client.set_registered_model_alias(self.model_name, CHAMPION_ALIAS, str(version))

    def set_version_tags(self, version: str, tags: Mapping[str, Any]) -> None:
        for k, v in tags.items():
            self.client.set_model_version_tag(self.model_name, str(version), param_key(k), str(v))

    def download_model(self, version: str, dest: Path) -> Path:
        """Download the model directory (throughput.lgb.txt + metadata.json) of a registered
        version into `dest`; returns the directory holding the two files."""
        import mlflow

        dest.mkdir(parents=True, exist_ok=True)
        local = mlflow.artifacts.download_artifacts(
            artifact_uri=f"models:/{self.model_name}/{version}", dst_path=str(dest), tracking_uri=self.uri
        )
        found = sorted(Path(local).rglob("metadata.json"))
        if not found:
            raise TrackingError(
                f"registered model {self.model_name} version {version} holds no metadata.json"
            )
        return found[0].parent
