"""Where the service's learned model comes from, as an immutable `LoadedModel` per request.

`FixedModel` serves one folder (the shipped models/, or --model-dir). `RegistryFollower` serves a
registered MLflow model (`models:/NAME@ALIAS` or `models:/NAME/VERSION`): it downloads the
version's artifacts (`mlflow.artifacts.download_artifacts`, through `MlflowTracker.download_model`)
into a temporary folder, checks them (`LearnedModel.load` verifies hashes before LightGBM sees a
byte), predicts once with them to warm the predictor's cache, and only then switches. For an
alias it keeps looking every `poll_interval_s`; when the alias moves, the new version is loaded
in a background thread while requests go on with the old one, and the switch is one reference
assignment. A request reads `current()` once and uses that folder to the end; a replaced folder
is deleted only after `grace_s` (longer than any request may run), so no request loses its
model midway. A registry that cannot be reached keeps the current model and says so in `status()`
within `REACHABILITY_TIMEOUT_S` (5 s): each look first probes the server (`check_reachable`), and
MLflow's own HTTP calls are bounded (`bound_http_requests`: 10 s, 2 retries, unless set).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfmodel import __version__
from perfmodel.api import predict
from perfmodel.errors import PerfModelError
from perfmodel.learn.metadata import read_model_folder, write_model_folder
from perfmodel.learn.model_files import METADATA_FILE, MODEL_FILE, has_model
from perfmodel.learn.registry import parse_model_uri
from perfmodel.learn.shipped import LearnedModel
from perfmodel.paths import model_dir as default_model_dir
from perfmodel.tracking import MlflowTracker, bound_http_requests, check_reachable

_log = logging.getLogger("perfmodel.service")

WARM_UP_CONFIG = {
    "model": {"name": "llama2-7b"},
    "training": {"seq_len": 512, "micro_batch_size": 1, "tokens": 1.0e6},
    "hardware": {"gpu": "A100-80GB"},
}
"""A small run predicted once with each model before it serves (parses the booster, fills caches)."""


@dataclass(frozen=True, kw_only=True)
class LoadedModel:
    """The model requests are answered with, and where it came from."""

    kind: str
    """'learned', or 'analytic' (no learned model: predictions say so in their warnings)."""
    model_dir: Path | None
    """Folder the predictor reads (None: analytic only)."""
    version: str
    """Model version (the registry's version for a registered model)."""
    run_id: str
    """MLflow run that trained it ('' if unknown)."""
    trained_rows: int
    """Rows it was trained on."""
    dataset_sha256: str
    """Hash of the feature table it was trained on ('' if unknown)."""
    trained_at: str
    """When it was trained (ISO-8601, '' if unknown)."""
    source: str
    """The folder, or the models:/ URI it was loaded from."""
    loaded_at: str
    """When this server loaded it (ISO-8601, UTC)."""

    @property
    def use_learned(self) -> bool:
        return self.kind == "learned"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "version": self.version,
            "run_id": self.run_id,
            "trained_rows": self.trained_rows,
            "dataset_sha256": self.dataset_sha256,
            "trained_at": self.trained_at,
            "source": self.source,
            "loaded_at": self.loaded_at,
        }


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def load_model_dir(path: Path, source: str, *, version: str | None = None) -> LoadedModel:
    """A verified model folder as a LoadedModel, warmed by one prediction. Raises PerfModelError
    (ModelFileError) when the folder is damaged or does not predict as a learned model."""
    model = LearnedModel.load(path)
    run = predict(WARM_UP_CONFIG, model_dir=path)
    if run.model_kind != "learned":
        raise PerfModelError(f"the model in {path} does not predict: {'; '.join(run.warnings)[:300]}")
    meta = model.metadata
    return LoadedModel(
        kind="learned",
        model_dir=path,
        version=version if version is not None else model.version,
        run_id=meta.run_id or "",
        trained_rows=model.trained_rows,
        dataset_sha256=meta.dataset_sha256 or "",
        trained_at=meta.trained_at or "",
        source=source,
        loaded_at=_now(),
    )


def analytic_model(source: str) -> LoadedModel:
    return LoadedModel(
        kind="analytic",
        model_dir=None,
        version=__version__,
        run_id="",
        trained_rows=0,
        dataset_sha256="",
        trained_at="",
        source=source,
        loaded_at=_now(),
    )


class FixedModel:
    """One model folder (no folder, or a damaged one: the analytic model). A folder replaced in
    place (`perfmodel train --export` swaps it atomically) is loaded again on the next request."""

    def __init__(self, model_dir: Path | None = None) -> None:
        self.path = Path(model_dir) if model_dir is not None else default_model_dir()
        self._current: LoadedModel | None = None
        self._stamp: tuple[int | None, ...] = ()
        self._error = ""
        self._lock = threading.Lock()

    def _files_stamp(self) -> tuple[int | None, ...]:
        stamps: list[int | None] = []
        for name in (MODEL_FILE, METADATA_FILE):
            try:
                stamps.append(os.stat(self.path / name).st_mtime_ns)
            except OSError:
                stamps.append(None)
        return tuple(stamps)

    def start(self) -> None:
        with self._lock:
            self._load()

    def _load(self) -> None:
        self._stamp = self._files_stamp()
        if not has_model(self.path):
            self._error = f"no learned model in {self.path}: analytic model only"
            self._current = analytic_model(str(self.path))
            return
        try:
            self._current = load_model_dir(self.path, str(self.path))
            self._error = ""
        except PerfModelError as exc:
            self._error = f"learned model in {self.path} not used: {exc}"
            _log.warning("%s", self._error)
            self._current = analytic_model(str(self.path))

    def stop(self) -> None:
        pass

    def current(self) -> LoadedModel | None:
        if self._current is not None and self._files_stamp() != self._stamp:
            with self._lock:
                if self._files_stamp() != self._stamp:  # not reloaded meanwhile by another request
                    self._load()
        return self._current

    def status(self) -> dict[str, Any]:
        return {"follows": None, "last_error": self._error}


class RegistryFollower:
    """A registered model, its alias followed (see the module docstring)."""

    def __init__(
        self,
        model_uri: str,
        *,
        tracking_uri: str | None = None,
        poll_interval_s: float = 30.0,
        grace_s: float = 60.0,
    ) -> None:
        self.uri = model_uri
        self.name, self.alias, self.fixed_version = parse_model_uri(model_uri)
        self.tracker = MlflowTracker(tracking_uri, model_name=self.name)
        self.poll_interval_s = poll_interval_s
        self.grace_s = grace_s
        self._current: LoadedModel | None = None
        self._root = Path(tempfile.mkdtemp(prefix="perfmodel-serve-"))
        self._retired: list[tuple[Path, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one poll at a time (the thread, or a test calling poll_once)
        self.last_error = ""
        self.last_poll_at = ""
        self.switches = 0

    # --- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start following in a background thread (the first load happens there too)."""
        bound_http_requests()
        self._thread = threading.Thread(target=self._loop, name="perfmodel-registry-follower", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        shutil.rmtree(self._root, ignore_errors=True)

    def current(self) -> LoadedModel | None:
        return self._current

    def status(self) -> dict[str, Any]:
        return {
            "follows": self.uri,
            "tracking_uri": self.tracker.uri,
            "poll_interval_s": self.poll_interval_s if self.fixed_version is None else None,
            "last_poll_at": self.last_poll_at,
            "switches": self.switches,
            "last_error": self.last_error,
        }

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.poll_once()
            if self.fixed_version is not None and self._current is not None:
                return  # a fixed version never moves
            self._stop.wait(self.poll_interval_s)

    # --- one look at the registry --------------------------------------------------------------

    def poll_once(self) -> bool:
        """Look at the registry; load and switch to a new version if the alias moved. True when it
        switched. Never raises: a failure is logged and kept in `last_error`."""
        with self._lock:
            self.last_poll_at = _now()
            self._delete_retired()
            try:
                version, run_id = self._target()
                if self._current is not None and self._current.version == version:
                    self.last_error = ""
                    return False
                loaded = self._download(version, run_id)
            except Exception as exc:  # the registry, the network, a damaged artifact: keep serving
                self.last_error = (
                    f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
                )
                _log.warning(
                    "registry %s: %s (keeping %s)",
                    self.uri,
                    self.last_error,
                    f"version {self._current.version}" if self._current else "no model yet",
                )
                return False
            old, self._current = self._current, loaded
            self.switches += 1
            self.last_error = ""
            _log.info("serving %s version %s", self.name, version)
            if old is not None and old.model_dir is not None:
                self._retired.append((old.model_dir.parent, time.monotonic()))
            return True

    def _target(self) -> tuple[str, str]:
        check_reachable(self.tracker.uri)  # an unreachable server: one line within about 5 s
        client = self.tracker.client
        if self.fixed_version is not None:
            mv = client.get_model_version(self.name, self.fixed_version)
        else:
            mv = client.get_model_version_by_alias(self.name, self.alias)
        return str(mv.version), str(mv.run_id or "")

    def _download(self, version: str, run_id: str) -> LoadedModel:
        folder = Path(tempfile.mkdtemp(prefix=f"v{version}-", dir=self._root))
        try:
            found = self.tracker.download_model(version, folder / "download")
            meta, text = read_model_folder(found)
            # The folder holds what was logged before registration: record the registry's version.
            model_dir = write_model_folder(folder / "model", meta.registered_as(version, self.name, run_id), text)
            shutil.rmtree(folder / "download", ignore_errors=True)
            return load_model_dir(model_dir, f"{self.uri} (version {version})", version=version)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise

    def _delete_retired(self) -> None:
        now = time.monotonic()
        keep = []
        for folder, since in self._retired:
            if now - since >= self.grace_s:
                shutil.rmtree(folder, ignore_errors=True)
            else:
                keep.append((folder, since))
        self._retired = keep
