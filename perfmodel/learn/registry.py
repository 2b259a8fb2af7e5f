"""Registered models on this machine: a `models:/NAME@ALIAS` or `models:/NAME/VERSION` URI (the
`--model-uri` option) to a verified model folder, downloaded once from the registry at
$MLFLOW_TRACKING_URI into `registry_cache_dir()`. The service follows an alias over time
(`perfmodel.service.model_source.RegistryFollower`); this module answers one request.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from perfmodel.errors import ConfigError
from perfmodel.learn import model_files
from perfmodel.learn.metadata import read_model_folder, write_model_folder
from perfmodel.tracking import MlflowTracker, TrackingError


def parse_model_uri(uri: str) -> tuple[str, str | None, str | None]:
    """'models:/NAME@ALIAS' -> (NAME, ALIAS, None); 'models:/NAME/VERSION' -> (NAME, None, VERSION)."""
    body = uri[len("models:/") :] if uri.startswith("models:/") else ""
    if "@" in body:
        name, alias = body.rsplit("@", 1)
        if name and alias and "/" not in alias:
            return name, alias, None
    elif "/" in body:
        name, version = body.rsplit("/", 1)
        if name and version.isdigit():
            return name, None, version
    raise ConfigError(f"--model-uri must look like models:/NAME@ALIAS or models:/NAME/VERSION, got {uri!r}")


def registry_cache_dir() -> Path:
    """Where registered models are kept once downloaded: $XDG_CACHE_HOME/perfmodel/registry
    (default ~/.cache/perfmodel/registry)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "perfmodel" / "registry"


def registered_model_dir(model_uri: str) -> Path:
    """The model folder of a registered version (`models:/NAME@ALIAS`: the alias is looked up on
    every call; `models:/NAME/VERSION`), from the registry at $MLFLOW_TRACKING_URI. A version is
    downloaded once (mlflow.artifacts.download_artifacts), verified, stamped with its registry
    version and kept under `registry_cache_dir()/<tracking URI hash>/NAME/vVERSION`."""
    name, alias, version = parse_model_uri(model_uri)
    tracker = MlflowTracker(model_name=name)
    tracker.check()
    try:
        client = tracker.client
        found = (
            client.get_model_version_by_alias(name, alias)
            if alias
            else client.get_model_version(name, version)
        )
    except Exception as exc:  # mlflow raises RestException, MlflowException ...: one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise TrackingError(f"{model_uri} is not in the registry at {tracker.uri}: {first}") from None
    version = str(found.version)
    key = hashlib.sha256(tracker.uri.encode()).hexdigest()[:12]
    folder = registry_cache_dir() / key / name / f"v{version}"
    if model_files.has_model(folder):
        try:
            model_files.read_model_dir(folder)
            return folder
        except model_files.ModelFileError:
            pass  # damaged: download it again
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".download-", dir=folder.parent))
    try:
        meta, text = read_model_folder(tracker.download_model(version, scratch))
        # The artifacts hold what was logged before registration: record the registry's version.
        write_model_folder(folder, meta.registered_as(version, name, found.run_id), text, atomically=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return folder
