"""Where perfmodel's files live: one place, so every command means the same table and model
wherever it is run from.

Everything hangs off the project root: the checkout that holds this package (an editable
install), else the current directory. Each location can be moved with an environment variable;
they are read on every call (never at import), so tests and services can redirect them.

    PERFMODEL_ROOT         project root (default: the checkout, else the current directory)
    PERFMODEL_DATASETS     feature-table folder (default: <root>/datasets)
    PERFMODEL_MODEL_DIR    the shipped model (default: <root>/models)
    PERFMODEL_PUBLIC_DATA  third-party tables to import (default: <root>/../shared/data/public)
    PERFMODEL_RUNS_DIR     local copies of trained models (default: <root>/runs)
    MLFLOW_TRACKING_URI    tracking server (default: sqlite:///<root>/mlflow.db)
    PERFMODEL_CALIBRATION_DIR  calibrations (default: $XDG_CACHE_HOME/perfmodel/calibration)
    PERFMODEL_CALIBRATION_RUNS_DIR  calibrations downloaded from MLflow runs
                           (default: $XDG_CACHE_HOME/perfmodel/calibration-runs)
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE_PARENT = Path(__file__).resolve().parents[1]


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name, "").strip()
    return Path(value).expanduser() if value else None


def project_root() -> Path:
    """The project root: $PERFMODEL_ROOT, the checkout this package lives in, or the cwd."""
    env = _env_path("PERFMODEL_ROOT")
    if env is not None:
        return env
    if (_PACKAGE_PARENT / "pyproject.toml").is_file() and (_PACKAGE_PARENT / "perfmodel").is_dir():
        return _PACKAGE_PARENT
    return Path.cwd()


def datasets_dir() -> Path:
    """Folder of the feature table, collector shards and normalised public tables."""
    return _env_path("PERFMODEL_DATASETS") or project_root() / "datasets"


def raw_dir() -> Path:
    """Collector shards and host fingerprints (`perfmodel collect --out` default)."""
    return datasets_dir() / "raw"


def public_dir() -> Path:
    """Normalised public tables (parquet, one per source file family)."""
    return datasets_dir() / "public"


def features_path() -> Path:
    """The merged feature table `perfmodel dataset build` writes and `perfmodel train` reads."""
    return datasets_dir() / "features.parquet"


def kernels_dir() -> Path:
    """The kernel table: measured kernel calls, one parquet per source (`perfmodel kernels build`)."""
    return datasets_dir() / "kernels"


def peak_memory_path() -> Path:
    """Published peak-memory measurements (`perfmodel memcheck`)."""
    return public_dir() / "memory" / "peak_memory.parquet"


def memory_oracle_path() -> Path:
    """The FakeTensor oracle's peaks on the memory grid (`python -m collectors.memory_grid`)."""
    return datasets_dir() / "memory" / "oracle_grid.csv"


def model_dir() -> Path:
    """The shipped learned model `perfmodel predict` reads."""
    return _env_path("PERFMODEL_MODEL_DIR") or project_root() / "models"


def shared_public_data_dir() -> Path:
    """Third-party CSV tables the importers read (never committed here)."""
    return _env_path("PERFMODEL_PUBLIC_DATA") or project_root().parent / "shared" / "data" / "public"


def tracking_uri() -> str:
    """MLflow tracking URI: $MLFLOW_TRACKING_URI, else the embedded SQLite store in the root."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{project_root() / 'mlflow.db'}"


def runs_dir() -> Path:
    """Where `perfmodel train` saves each fitted model before logging it ($PERFMODEL_RUNS_DIR)."""
    return _env_path("PERFMODEL_RUNS_DIR") or project_root() / "runs"


def artifacts_dir() -> Path:
    """Artifact root of the embedded MLflow store."""
    return project_root() / "mlartifacts"


CALIBRATION_DIR_VAR = "PERFMODEL_CALIBRATION_DIR"
"""The variable that moves the calibration folder (a service sets it to its --calibrations)."""


def calibration_dir() -> Path:
    """Calibrations of measured hardware (`perfmodel calibrate`), one JSON file per hardware id:
    $PERFMODEL_CALIBRATION_DIR (a service points it at a fleet's folder), else
    $XDG_CACHE_HOME/perfmodel/calibration (default ~/.cache/perfmodel/calibration)."""
    env = _env_path(CALIBRATION_DIR_VAR)
    if env is not None:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "perfmodel" / "calibration"


def calibration_runs_dir() -> Path:
    """Calibrations downloaded from MLflow runs (`perfmodel serve --calibrations runs:/RUN_ID`),
    one folder per run id: $PERFMODEL_CALIBRATION_RUNS_DIR, else
    $XDG_CACHE_HOME/perfmodel/calibration-runs (default ~/.cache/perfmodel/calibration-runs)."""
    env = _env_path("PERFMODEL_CALIBRATION_RUNS_DIR")
    if env is not None:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "perfmodel" / "calibration-runs"
