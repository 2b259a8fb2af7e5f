"""What a server is started with: where its model comes from and the limits every request obeys."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel.errors import ConfigError

ENV_VAR = "PERFMODEL_SERVE_SETTINGS"
"""Where `perfmodel serve --workers N` hands its settings to each worker process (JSON)."""
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
"""Host names a server answers by default."""
DEFAULT_MODEL_URI_ALIAS = "models:/perfmodel-throughput@champion"
"""The registered model and alias `perfmodel train` maintains (`perfmodel.tracking`)."""


@dataclass(frozen=True, kw_only=True)
class ServiceSettings:
    """Settings of one server (`perfmodel serve` flags)."""

    model_dir: Path | None = None
    """Learned model folder (None with no `model_uri`: the shipped models/)."""
    model_uri: str | None = None
    """`models:/NAME@ALIAS` (followed: a moved alias is loaded in the background) or `models:/NAME/VERSION`."""
    tracking_uri: str | None = None
    """MLflow tracking/registry URI for `model_uri` (None: $MLFLOW_TRACKING_URI, else the project's store)."""
    poll_interval_s: float = 30.0
    """Seconds between two looks at the registry alias."""
    request_timeout_s: float = 30.0
    """Longest a request in a worker thread may compute, s; a slower one is answered 503 (its work
    is abandoned)."""
    max_body_bytes: int = 1_000_000
    """Largest request body, bytes; a larger one is answered 413."""
    max_sweep_points: int = 256
    """Most grid points one /v1/sweep request may ask for."""
    max_compare_configs: int = 8
    """Most configs one /v1/compare request may hold."""
    concurrency: int = 4
    """Requests computed at once in worker threads (sweeps, advice, comparisons, large bodies);
    further ones wait their turn."""
    inline_max_body_bytes: int = 8_192
    """A /v1/predict body up to this size is computed on the event loop, not in a worker thread:
    one prediction is bounded work (~3 ms), and parsing YAML of this size takes at most ~60 ms
    (measured, a list of 3,000 numbers; the shared Ludwig configs are under 2 KB). 0 sends every
    request to the threads, under `request_timeout_s`."""
    cache_bytes: int = 32_000_000
    """Memory for answers already computed (same request, same model), bytes; 0 turns caching off."""
    data_dir: Path | None = None
    """The one folder whose files a request may name (`dataset`, `training.dataset`, `model.path`,
    a model folder), relative to it; None: no file on the server is read for a request."""
    max_dataset_bytes: int = 256_000_000
    """Largest dataset file in `data_dir` sized for a request, bytes."""
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    """Host header names answered (DNS rebinding: a page whose name resolves to this server is
    refused); '*.example.com' matches subdomains, '*' any. `perfmodel serve` adds its --host."""
    calibrations: str | None = None
    """Where the calibrations come from (`perfmodel.calibration.tracked`): a folder, or
    `runs:/RUN_ID` (the MLflow run that logged them, in `tracking_uri`'s store), downloaded when
    the app is made; None: $PERFMODEL_CALIBRATION_DIR, else the default calibration folder."""
    calibration_source: str | None = None
    """What `calibrations` was given as, when `perfmodel serve` resolved it to a folder before
    starting its workers (shown by GET /v1/model)."""
    body_timeout_s: float = 10.0
    """Longest a client may take to send a request body, s; a slower one is answered 408 (a body
    trickled byte by byte holds nothing longer)."""

    def __post_init__(self) -> None:
        if self.model_dir is not None and self.model_uri is not None:
            raise ConfigError("give --model-dir or --model-uri, not both")
        if self.model_uri is not None and not self.model_uri.startswith("models:/"):
            raise ConfigError(
                f"--model-uri must look like models:/NAME@ALIAS or models:/NAME/VERSION, got {self.model_uri!r}"
            )
        for name in ("poll_interval_s", "request_timeout_s", "body_timeout_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("max_body_bytes", "max_sweep_points", "max_compare_configs", "concurrency", "max_dataset_bytes"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        for name in ("cache_bytes", "inline_max_body_bytes"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if isinstance(self.allowed_hosts, str) or not self.allowed_hosts:
            raise ConfigError(f"allowed_hosts must be a list of host names, got {self.allowed_hosts!r}")
        for pattern in self.allowed_hosts:
            if "*" in pattern[1:] or (pattern.startswith("*") and pattern != "*" and not pattern.startswith("*.")):
                raise ConfigError(f"--allowed-host {pattern!r}: a wildcard must look like *.example.com (or * for any)")
        if self.data_dir is not None and not Path(self.data_dir).is_dir():
            raise ConfigError(f"--data-dir {self.data_dir} is not a folder")

    def to_json(self) -> str:
        """The settings as one JSON object (`from_json` reads it back)."""
        data: dict[str, Any] = dataclasses.asdict(self)
        for name in ("model_dir", "data_dir"):
            data[name] = str(getattr(self, name)) if getattr(self, name) is not None else None
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> ServiceSettings:
        data = json.loads(text)
        for name in ("model_dir", "data_dir"):
            if data.get(name) is not None:
                data[name] = Path(data[name])
        if "allowed_hosts" in data:
            data["allowed_hosts"] = tuple(data["allowed_hosts"])
        return cls(**data)
