"""An in-memory `perfmodel.tracking.Tracker` for tests: runs, registered versions and the
champion alias kept in dicts, with switches to make the store unreachable or fail mid-run."""

from __future__ import annotations

import contextlib
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel.tracking import (
    DESCRIPTION_TAG,
    REGISTERED_MODEL,
    ChampionInfo,
    DatasetInput,
    TrackingError,
    param_key,
)


def _float_or_none(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


@dataclass
class MemoryRun:
    """One run of a `MemoryTracker`."""

    run_id: str
    name: str
    start_time_ms: int
    tags: dict[str, str]
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    artifacts: dict[str, bytes] = field(default_factory=dict)
    """Artifact path (relative to the run's root) -> content."""
    datasets: list[DatasetInput] = field(default_factory=list)
    end_time_ms: int | None = None
    status: str = "RUNNING"


@dataclass
class MemoryVersion:
    """One registered model version of a `MemoryTracker`."""

    version: str
    run_id: str
    files: dict[str, bytes]
    """The logged model folder: file name -> content."""
    tags: dict[str, str] = field(default_factory=dict)


class MemoryTracker:
    """`Tracker` that keeps everything in memory: for tests and dry runs. `reachable=False`
    makes `check` fail; `fail_on` names methods that raise TrackingError (a store that dies)."""

    def __init__(self, *, reachable: bool = True, fail_on: tuple[str, ...] = ()) -> None:
        self.uri = "memory://"
        self.model_name = REGISTERED_MODEL
        self.reachable = reachable
        self.fail_on = set(fail_on)
        self.runs: dict[str, MemoryRun] = {}
        self.versions: dict[str, MemoryVersion] = {}
        self.alias: str | None = None
        self._active: str | None = None

    def prepare(self) -> None:
        self._maybe_fail("prepare")

    def _maybe_fail(self, method: str) -> None:
        if method in self.fail_on:
            raise TrackingError(f"{method}: the store went away ({self.uri})")

    def _run(self) -> MemoryRun:
        if self._active is None:
            raise TrackingError("no active run: call inside `with tracker.run(...)`")
        return self.runs[self._active]

    def check(self) -> None:
        if not self.reachable:
            raise TrackingError(f"tracking store {self.uri} did not answer")

    @contextlib.contextmanager
    def run(
        self,
        run_name: str,
        *,
        description: str = "",
        tags: Mapping[str, str] | None = None,
        start_time_ms: int | None = None,
    ) -> Iterator[str]:
        self._maybe_fail("run")
        run_id = uuid.uuid4().hex
        run_tags = {k: str(v) for k, v in (tags or {}).items()}
        if description:
            run_tags[DESCRIPTION_TAG] = description
        now = int(time.time() * 1000)
        self.runs[run_id] = MemoryRun(run_id, run_name, start_time_ms or now, run_tags)
        self._active = run_id
        try:
            yield run_id
            self.runs[run_id].status = "FINISHED"
        except BaseException:
            self.runs[run_id].status = "FAILED"
            raise
        finally:
            self.runs[run_id].end_time_ms = int(time.time() * 1000)
            self._active = None

    def log_params(self, params: Mapping[str, Any]) -> None:
        self._maybe_fail("log_params")
        self._run().params.update({param_key(k): str(v) for k, v in params.items()})

    def log_metrics(self, metrics: Mapping[str, float]) -> None:
        self._maybe_fail("log_metrics")
        self._run().metrics.update({param_key(k): float(v) for k, v in metrics.items() if v is not None})

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        self._maybe_fail("set_tags")
        self._run().tags.update({param_key(k): str(v) for k, v in tags.items()})

    def log_artifact(self, path: Path, subdir: str | None = None) -> None:
        self._maybe_fail("log_artifact")
        name = f"{subdir}/{path.name}" if subdir else path.name
        self._run().artifacts[name] = path.read_bytes()

    def log_table(self, frame: Any, artifact_file: str) -> None:
        self._maybe_fail("log_table")
        self._run().artifacts[artifact_file] = frame.to_json(orient="split").encode()

    def log_dataset(self, dataset: DatasetInput) -> None:
        self._maybe_fail("log_dataset")
        self._run().datasets.append(dataset)

    def log_model(self, model_dir: Path, *, register: bool, input_example: Any = None) -> str | None:
        self._maybe_fail("log_model")
        run = self._run()
        files = {p.name: p.read_bytes() for p in sorted(model_dir.iterdir()) if p.is_file()}
        for name, data in files.items():
            run.artifacts[f"model/{name}"] = data
        if not register:
            return None
        version = str(len(self.versions) + 1)
        self.versions[version] = MemoryVersion(version, run.run_id, files)
        return version

    def set_version_tags(self, version: str, tags: Mapping[str, Any]) -> None:
        self._maybe_fail("set_version_tags")
        self.versions[str(version)].tags.update({param_key(k): str(v) for k, v in tags.items()})

    def champion(self, metric: str) -> ChampionInfo | None:
        if self.alias is None:
            return None
        mv = self.versions[self.alias]
        run = self.runs.get(mv.run_id)
        value = _float_or_none(mv.tags.get(metric))
        if value is None and run is not None:
            value = run.metrics.get(metric)
        return ChampionInfo(
            version=mv.version,
            run_id=mv.run_id,
            metric=value,
            dataset_sha256=mv.tags.get("dataset_sha256")
            or (run.params.get("dataset_sha256") if run else None),
            seed_spread_pct=_float_or_none(mv.tags.get("seed_spread_range_pct")),
        )

    def set_champion(self, version: str) -> None:
        self._maybe_fail("set_champion")
        if str(version) not in self.versions:
            raise TrackingError(f"no registered version {version}")
        self.alias = str(version)

    def download_model(self, version: str, dest: Path) -> Path:
        self._maybe_fail("download_model")
        folder = dest / f"v{version}"
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for name, data in self.versions[str(version)].files.items():
            (folder / name).write_bytes(data)
        return folder
