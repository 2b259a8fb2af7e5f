"""Calibrations in MLflow: the run that produced them keeps them as artifacts, and a service (or
any process) loads them from it.

    run_id = log_calibrations([path], run_name="calibrate cpu-2c-cba6f5")   # calibrate --log-mlflow
    folder = calibrations_folder("runs:/<run_id>")                          # serve --calibrations

`log_calibrations` opens one run in the project's tracking store (`perfmodel.tracking`:
$MLFLOW_TRACKING_URI, else sqlite:///mlflow.db in the project root) and logs each calibration
file under the artifact folder `calibration/`, with the hardware ids as parameters, the offsets
as metrics and the tag `perfmodel.kind=calibration` (the MLflow UI filters on it).

`calibrations_folder(source)` turns a source into a local folder that `perfmodel.calibration.
record.load_store` reads like any other: a folder is itself; `runs:/RUN_ID` (or
`runs:/RUN_ID/SUBPATH`, default `calibration`) is downloaded into
`perfmodel.paths.calibration_runs_dir()/RUN_ID` (a fresh download replaces it each time; a store
that cannot be reached falls back to a copy downloaded before, said once). A run that does not
exist, or holds no calibration file, is a ConfigError in one line; a file of the run that cannot
be used (damaged, another schema version, stale) is one warning naming the run and is left out,
so the prediction for its hardware is the uncalibrated one, exactly as for a file in a folder.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel import paths
from perfmodel.calibration.record import (
    CalibrationFileError,
    read_calibration,
    stale_reason,
    warn_once,
)
from perfmodel.errors import ConfigError, quote
from perfmodel.learn.lean_import import import_mlflow
from perfmodel.tracking import MlflowTracker, TrackingError, check_reachable, default_tracking_uri

ARTIFACT_DIR = "calibration"
"""The artifact folder of a run that holds its calibration files."""
KIND_TAG = "perfmodel.kind"
KIND = "calibration"
RUNS_SCHEME = "runs:/"
COMPLETE_MARKER = ".perfmodel-download-complete"
"""Written last into a downloaded folder: a folder without it is an interrupted download."""


@dataclass(frozen=True, kw_only=True)
class CalibrationSource:
    """Where calibrations come from: a local folder, or the artifacts of one MLflow run."""

    folder: Path | None = None
    run_id: str = ""
    artifact_path: str = ARTIFACT_DIR

    @property
    def is_run(self) -> bool:
        return bool(self.run_id)

    def uri(self) -> str:
        return f"{RUNS_SCHEME}{self.run_id}/{self.artifact_path}" if self.is_run else str(self.folder)


def parse_source(text: str | Path) -> CalibrationSource:
    """A folder path, or `runs:/RUN_ID[/SUBPATH]`; ConfigError naming what is allowed."""
    raw = str(text).strip()
    if not raw:
        raise ConfigError("--calibrations: give a folder or runs:/RUN_ID")
    if raw.startswith(RUNS_SCHEME) or raw.startswith("runs:"):
        rest = raw.removeprefix("runs:").lstrip("/")
        run_id, _, sub = rest.partition("/")
        if not run_id or not run_id.replace("-", "").isalnum():
            raise ConfigError(f"--calibrations {quote(raw)}: a run URI looks like runs:/RUN_ID (or runs:/RUN_ID/calibration)")
        return CalibrationSource(run_id=run_id, artifact_path=sub.strip("/") or ARTIFACT_DIR)
    if "://" in raw or raw.startswith(("models:", "mlflow-artifacts:")):
        raise ConfigError(f"--calibrations {quote(raw)}: give a folder or runs:/RUN_ID (other URIs are not read)")
    folder = Path(raw).expanduser()
    if not folder.is_dir():
        raise ConfigError(f"--calibrations {quote(raw)} is not a folder (give a folder of calibrations or runs:/RUN_ID)")
    return CalibrationSource(folder=folder)


def calibrations_folder(source: str | Path, *, tracking_uri: str | None = None, cache_dir: Path | None = None) -> Path:
    """The local folder of `source` (module docstring): a folder as it is, a run downloaded."""
    src = parse_source(source)
    if src.folder is not None:
        return src.folder
    return download_calibrations(src.run_id, artifact_path=src.artifact_path, tracking_uri=tracking_uri, cache_dir=cache_dir)


def download_calibrations(
    run_id: str, *, artifact_path: str = ARTIFACT_DIR, tracking_uri: str | None = None, cache_dir: Path | None = None
) -> Path:
    """Download the calibration files of MLflow run `run_id` into the cache and return that folder,
    holding only the files that can be used (the others are one warning each)."""
    uri = tracking_uri or default_tracking_uri()
    root = Path(cache_dir) if cache_dir is not None else paths.calibration_runs_dir()
    dest = root / run_id
    try:
        check_reachable(uri)
        client = MlflowTracker(uri).client
        _require_run(client, run_id, uri)
        with tempfile.TemporaryDirectory(prefix="download-", dir=_ensure(root)) as tmp:
            got = _download(run_id, artifact_path, uri, Path(tmp))
            staged = root / f".{run_id}.staged"
            shutil.rmtree(staged, ignore_errors=True)
            staged.mkdir()
            _keep_usable(got, staged, run_id, artifact_path, uri)
            (staged / COMPLETE_MARKER).write_text(json.dumps({"run_id": run_id, "tracking_uri": uri}) + "\n")
            shutil.rmtree(dest, ignore_errors=True)
            staged.rename(dest)
    except TrackingError as exc:
        if (dest / COMPLETE_MARKER).is_file():
            warn_once(f"calibrations of MLflow run {run_id}: {exc}; using the copy downloaded before ({dest})")
            return dest
        raise
    return dest


def _ensure(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _require_run(client: Any, run_id: str, uri: str) -> None:
    try:
        client.get_run(run_id)
    except Exception as exc:  # mlflow raises MlflowException for a missing run, others for a bad store
        code = str(getattr(exc, "error_code", ""))
        if "RESOURCE_DOES_NOT_EXIST" in code or "not found" in str(exc).lower() or "INVALID_PARAMETER" in code:
            raise ConfigError(
                f"--calibrations runs:/{run_id}: no MLflow run {run_id!r} in {uri} (check the id, or set "
                f"MLFLOW_TRACKING_URI / --tracking-uri to the store that has it)"
            ) from None
        raise TrackingError(f"MLflow store {uri}: cannot read run {run_id!r}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None


def _download(run_id: str, artifact_path: str, uri: str, into: Path) -> list[Path]:
    mlflow = import_mlflow()  # seconds to import: only a run's calibrations need it
    try:
        local = Path(
            mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=artifact_path, dst_path=str(into), tracking_uri=uri)
        )
    except Exception as exc:  # a run without that artifact folder: MlflowException or OSError by store
        raise ConfigError(
            f"--calibrations runs:/{run_id}: the run holds no {artifact_path}/ artifacts "
            f"(log calibrations with `perfmodel calibrate --log-mlflow`): {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    files = [local] if local.is_file() else sorted(local.rglob("*.json"))
    if not files:
        raise ConfigError(
            f"--calibrations runs:/{run_id}: no calibration file (*.json) under {artifact_path}/ "
            "(log calibrations with `perfmodel calibrate --log-mlflow`)"
        )
    return files


def _keep_usable(files: Sequence[Path], into: Path, run_id: str, artifact_path: str, uri: str) -> None:
    for f in files:
        try:
            cal = read_calibration(f)
        except CalibrationFileError as exc:
            warn_once(f"calibration not used (the prediction is the uncalibrated one): runs:/{run_id}/{artifact_path}/{f.name}: {_tail(exc, f)}")
            continue
        why = stale_reason(cal)
        if why:
            warn_once(f"calibration not used (the prediction is the uncalibrated one): runs:/{run_id}/{artifact_path}/{f.name}: stale: {why}")
            continue
        shutil.copyfile(f, into / f.name)


def _tail(exc: Exception, path: Path) -> str:
    """The error without the temporary path it names."""
    return str(exc).replace(f"{path}: ", "").replace(str(path), path.name)


def log_calibrations(
    files: Sequence[Path],
    *,
    run_name: str,
    tracking_uri: str | None = None,
    description: str = "",
    tags: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """Log calibration files as artifacts (under `calibration/`) of a new run of the project's
    experiment; returns (run id, tracking URI). Each file must be a usable calibration."""
    cals = [read_calibration(f) for f in files]
    if not cals:
        raise ConfigError("no calibration to log")
    tracker = MlflowTracker(tracking_uri)
    tracker.check()
    params: dict[str, Any] = {}
    metrics: dict[str, float] = {}
    for cal in cals:
        pre = "" if len(cals) == 1 else f"{cal.hardware_id}."
        params.update({f"{pre}hardware_id": cal.hardware_id, f"{pre}accelerator_kind": cal.accelerator_kind,
                       f"{pre}origin": cal.origin, f"{pre}created_at": cal.created_at})  # fmt: skip
        metrics[f"{pre}runs"] = float(len(cal.runs))
        for key in ("log_offset", "log_sd", "weight"):
            if key in cal.offset:
                metrics[f"{pre}{key}"] = float(cal.offset[key])
        for key, value in cal.ceilings.items():
            metrics[f"{pre}{key}"] = float(value)
    params["calibrations"] = len(cals)
    with tracker.run(run_name, description=description or f"perfmodel calibrations: {', '.join(c.hardware_id for c in cals)}",
                     tags={KIND_TAG: KIND, **(tags or {})}) as run_id:  # fmt: skip
        tracker.log_params(params)
        tracker.log_metrics(metrics)
        for f in files:
            tracker.log_artifact(Path(f), ARTIFACT_DIR)
    return run_id, tracker.uri
