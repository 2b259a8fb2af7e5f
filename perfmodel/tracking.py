"""Experiment tracking: a small `Tracker` interface and MLflow behind it (`MlflowTracker`); the
tests use an in-memory implementation of the same protocol (tests/fake_tracker.py).

The embedded default store is SQLite in the project root (`perfmodel.paths.tracking_uri()`:
`mlflow.db`, artifacts in `mlartifacts/` beside it), so tracking works on a fresh clone;
`MLFLOW_TRACKING_URI` points it at a shared server instead. `make ui` opens the MLflow UI on it.

MLflow is imported only inside methods, never when this module is imported, and always through
`import_mlflow()`, which turns MLflow's usage telemetry off (`MLFLOW_DISABLE_TELEMETRY=true`,
the switch MLflow documents) unless the user has set that variable: `MLFLOW_DISABLE_TELEMETRY=false`
turns it back on. The experiment is created as a classic ML experiment (tag
`mlflow.experimentKind=custom_model_development`), so MLflow 3's UI opens it on runs, metrics
and models rather than on GenAI traces.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from perfmodel.errors import PerfModelError
from perfmodel.learn.lean_import import import_mlflow
from perfmodel.paths import tracking_uri

EXPERIMENT = "perfmodel"
REGISTERED_MODEL = "perfmodel-throughput"
CHAMPION_ALIAS = "champion"
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
"""MLflow 3 experiment kind of classic model training (the UI's "Model training" view)."""
DESCRIPTION_TAG = "mlflow.note.content"
"""The run (or experiment) description shown in the MLflow UI."""
REACHABILITY_TIMEOUT_S = 5.0
"""How long `check` waits for a tracking server to answer."""


class TrackingError(PerfModelError, RuntimeError):
    """The tracking store cannot be reached or refused an operation."""


def experiment_url(uri: str | None = None, host: str = "http://127.0.0.1:5000") -> str:
    """The MLflow UI page of this project's experiment runs table (`make ui` prints it): the
    experiment's id from the store at `uri`, creating the experiment when the store has none yet."""
    tracker = MlflowTracker(uri)
    return f"{host}/#/experiments/{tracker.experiment_id()}/runs"


def default_tracking_uri() -> str:
    """`MLFLOW_TRACKING_URI` if set, else SQLite in the project root."""
    return tracking_uri()


def artifact_root_for(uri: str) -> str | None:
    """Where artifacts go for a local SQLite store: `mlartifacts/` beside the database file.
    None for servers (they decide)."""
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///") :])
        return (db.parent / "mlartifacts").resolve().as_uri()
    return None


def check_reachable(uri: str, timeout_s: float = REACHABILITY_TIMEOUT_S) -> None:
    """Raise TrackingError, in about `timeout_s` at most, when the store at `uri` cannot answer:
    an HTTP(S) server that does not respond, or a SQLite file whose folder does not exist.
    Other schemes (databricks, ...) are not probed."""

    if uri.startswith("sqlite:///"):
        folder = Path(uri[len("sqlite:///") :]).parent
        if not folder.is_dir():
            raise TrackingError(f"MLflow store {uri}: folder {folder} does not exist")
        return
    if uri.startswith(("http://", "https://")):
        probe = uri.rstrip("/") + "/health"
        try:
            with urllib.request.urlopen(probe, timeout=timeout_s):
                return
        except urllib.error.HTTPError:
            return  # it answered (an auth proxy or an older server without /health)
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TrackingError(
                f"MLflow tracking server {uri} did not answer within {timeout_s:g} s ({reason}); "
                f"start it, fix MLFLOW_TRACKING_URI, or unset it to use the local store"
            ) from None


HTTP_REQUEST_TIMEOUT_S = 10
"""Seconds one MLflow HTTP request may take before it fails (`bound_http_requests`); MLflow's
default is 120 s, retried 7 times with backoff: an unreachable registry took 249 s to report."""
HTTP_REQUEST_MAX_RETRIES = 2
"""MLflow HTTP retries (`bound_http_requests`)."""


def bound_http_requests() -> None:
    """Bound MLflow's HTTP calls in this process (`MLFLOW_HTTP_REQUEST_TIMEOUT`,
    `MLFLOW_HTTP_REQUEST_MAX_RETRIES`, the variables MLflow documents), unless the user set them."""

    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(HTTP_REQUEST_TIMEOUT_S))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", str(HTTP_REQUEST_MAX_RETRIES))


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


@dataclass(frozen=True, kw_only=True)
class ChampionInfo:
    """The model currently marked as the champion, and what it was judged on."""

    version: str
    """Registered version."""
    run_id: str
    """Training run ('' when unknown)."""
    metric: float | None
    """Its headline metric (percent), or None if it has none."""
    dataset_sha256: str | None
    """Hash of the rows it was evaluated on, or None if unknown."""
    seed_spread_pct: float | None = None
    """Seed-to-seed range of its headline metric (percentage points), where one was measured."""


@dataclass(frozen=True, kw_only=True)
class DatasetInput:
    """A training table as an MLflow dataset input."""

    name: str
    """Dataset name shown in the runs table."""
    digest: str
    """Content hash (MLflow keeps 36 characters)."""
    source: str
    """Where it was read from (a path or URI)."""
    frame: Any
    """The table (pandas DataFrame); MLflow records its schema and row count."""
    tags: Mapping[str, str] = field(default_factory=dict)
    """Input tags (e.g. rows by source)."""


class Tracker(Protocol):
    """What training needs from a tracking backend."""

    uri: str
    model_name: str

    def check(self) -> None: ...
    def prepare(self) -> None: ...
    def run(
        self,
        run_name: str,
        *,
        description: str = "",
        tags: Mapping[str, str] | None = None,
        start_time_ms: int | None = None,
    ) -> contextlib.AbstractContextManager[str]: ...
    def log_params(self, params: Mapping[str, Any]) -> None: ...
    def log_metrics(self, metrics: Mapping[str, float]) -> None: ...
    def set_tags(self, tags: Mapping[str, Any]) -> None: ...
    def log_artifact(self, path: Path, subdir: str | None = None) -> None: ...
    def log_table(self, frame: Any, artifact_file: str) -> None: ...
    def log_dataset(self, dataset: DatasetInput) -> None: ...
    def log_model(self, model_dir: Path, *, register: bool, input_example: Any = None) -> str | None: ...
    def set_version_tags(self, version: str, tags: Mapping[str, Any]) -> None: ...
    def champion(self, metric: str) -> ChampionInfo | None: ...
    def set_champion(self, version: str) -> None: ...
    def download_model(self, version: str, dest: Path) -> Path: ...


def _float_or_none(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


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
            mlflow = import_mlflow()
            mlflow.set_tracking_uri(self.uri)
            mlflow.set_registry_uri(self.uri)
            self._client = mlflow.MlflowClient(tracking_uri=self.uri, registry_uri=self.uri)
        return self._client

    def check(self) -> None:
        """Fail fast (about 5 s) when the store cannot answer."""
        check_reachable(self.uri)

    def prepare(self) -> None:
        """Open the store and the experiment now (importing MLflow, creating or upgrading the
        database: seconds), e.g. while training's folds run instead of after them."""
        self.experiment_id()

    def experiment_id(self) -> str:
        """The experiment's id; created (as a classic ML experiment) when missing."""
        if self._experiment_id is None:
            try:
                found = self.client.get_experiment_by_name(self.experiment)
                if found is None:
                    self._experiment_id = self.client.create_experiment(
                        self.experiment,
                        artifact_location=artifact_root_for(self.uri),
                        tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND},
                    )
                else:
                    self._experiment_id = found.experiment_id
                    if EXPERIMENT_KIND_TAG not in (found.tags or {}):
                        self.client.set_experiment_tag(
                            found.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND
                        )
            except Exception as exc:  # mlflow raises many types; keep one clear message
                raise TrackingError(
                    f"cannot open MLflow experiment {self.experiment!r} at {self.uri}: {exc}"
                ) from exc
        return str(self._experiment_id)

    @contextlib.contextmanager
    def run(
        self,
        run_name: str,
        *,
        description: str = "",
        tags: Mapping[str, str] | None = None,
        start_time_ms: int | None = None,
    ) -> Iterator[str]:
        """Create a run (started at `start_time_ms`, default now) and make it the active one;
        yields its id; ends it (FAILED if the block raises)."""
        mlflow = import_mlflow()
        experiment_id = self.experiment_id()
        run_tags = {param_key(k): str(v) for k, v in (tags or {}).items()}
        if description:
            run_tags[DESCRIPTION_TAG] = description
        created = self.client.create_run(
            experiment_id, start_time=start_time_ms, tags=run_tags, run_name=run_name
        )
        # fluent MLflow APIs (log_model, log_input) read process-global URIs: point them here
        mlflow.set_tracking_uri(self.uri)
        mlflow.set_registry_uri(self.uri)
        with mlflow.start_run(run_id=created.info.run_id) as active:
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
        from mlflow.entities import Param  # mlflow: seconds to import, only when logging

        run_id = self._require_run()
        items = [Param(param_key(k), str(v)[:6000]) for k, v in params.items()]
        for start in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[start : start + 100])

    def log_metrics(self, metrics: Mapping[str, float]) -> None:
        from mlflow.entities import Metric  # mlflow: seconds to import, only when logging

        run_id = self._require_run()
        now = int(time.time() * 1000)
        items = [
            Metric(param_key(k), float(v), now, 0)
            for k, v in metrics.items()
            if v is not None and math.isfinite(float(v))
        ]
        for start in range(0, len(items), 500):
            self.client.log_batch(run_id, metrics=items[start : start + 500])

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        from mlflow.entities import RunTag  # mlflow: seconds to import, only when logging

        run_id = self._require_run()
        items = [RunTag(param_key(k), str(v)) for k, v in tags.items()]
        for start in range(0, len(items), 100):
            self.client.log_batch(run_id, tags=items[start : start + 100])

    def log_artifact(self, path: Path, subdir: str | None = None) -> None:
        self.client.log_artifact(self._require_run(), str(path), artifact_path=subdir)

    def log_table(self, frame: Any, artifact_file: str) -> None:
        """A DataFrame as an MLflow table artifact (`MlflowClient.log_table`: the run page and the
        compare page show it as a table, and `mlflow.load_table` reads it back across runs)."""
        self.client.log_table(self._require_run(), data=frame, artifact_file=artifact_file)

    def log_dataset(self, dataset: DatasetInput) -> None:
        """Log the table as the run's training dataset (the runs table's Dataset column)."""

        mlflow = import_mlflow()
        self._require_run()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # schema inference notes on list-valued columns
            ds = mlflow.data.from_pandas(
                dataset.frame, source=dataset.source, name=dataset.name, digest=dataset.digest[:36]
            )
            mlflow.log_input(
                ds, context="training", tags={param_key(k): str(v) for k, v in dataset.tags.items()}
            )

    def log_model(self, model_dir: Path, *, register: bool, input_example: Any = None) -> str | None:
        """Log the model folder as a pyfunc model (booster + conformal metadata + feature
        preprocessing) with its signature (`pyfunc.model_signature`) and `input_example`
        (feature-table rows); register it when `register`. Returns the registered version."""

        mlflow = import_mlflow()
        self._require_run()
        pyfunc_logger = logging.getLogger("mlflow.pyfunc")
        level = pyfunc_logger.level
        pyfunc_logger.setLevel(logging.ERROR)  # the CloudPickle notice: we pickle our own class
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # MLflow's notes on type hints and signatures
                from perfmodel.learn.pyfunc import PerfmodelThroughputModel, model_signature, pip_requirements

                info = mlflow.pyfunc.log_model(
                    name="model",
                    python_model=PerfmodelThroughputModel(),
                    artifacts={"model_dir": str(model_dir)},
                    pip_requirements=pip_requirements(),
                    signature=model_signature(),
                    input_example=input_example,
                    registered_model_name=self.model_name if register else None,
                    await_registration_for=60,
                )
        finally:
            pyfunc_logger.setLevel(level)
        version = getattr(info, "registered_model_version", None)
        return None if version is None else str(version)

    # --- registry -------------------------------------------------------------------------

    def champion(self, metric: str) -> ChampionInfo | None:
        """The current champion version, its headline metric, dataset hash and recorded spread."""
        try:
            mv = self.client.get_model_version_by_alias(self.model_name, CHAMPION_ALIAS)
        except Exception:  # no registered model or no alias yet
            return None
        tags = dict(mv.tags or {})
        value = _float_or_none(tags.get(metric))
        dataset = tags.get("dataset_sha256")
        spread = _float_or_none(tags.get("seed_spread_range_pct"))
        if mv.run_id and (value is None or dataset is None):
            try:
                run = self.client.get_run(mv.run_id)
                value = value if value is not None else run.data.metrics.get(metric)
                dataset = dataset or run.data.params.get("dataset_sha256")
            except Exception:
                pass
        return ChampionInfo(
            version=str(mv.version),
            run_id=str(mv.run_id or ""),
            metric=value,
            dataset_sha256=dataset,
            seed_spread_pct=spread,
        )

    def set_champion(self, version: str) -> None:
        self.client.set_registered_model_alias(self.model_name, CHAMPION_ALIAS, str(version))

    def set_version_tags(self, version: str, tags: Mapping[str, Any]) -> None:
        for k, v in tags.items():
            self.client.set_model_version_tag(self.model_name, str(version), param_key(k), str(v))

    def download_model(self, version: str, dest: Path) -> Path:
        """Download the model folder (throughput.lgb.txt + metadata.json) of a registered
        version into `dest`; returns the folder holding the two files."""
        mlflow = import_mlflow()
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
