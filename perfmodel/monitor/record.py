"""The run record: what a monitored (or probed) run leaves behind for `perfmodel monitor` and
`perfmodel ingest` - its progress intervals, the config it ran, the host's hardware fingerprint.

One JSON file (`perfmodel_run.json` in the run's output folder by default), written atomically:

    {"format": "perfmodel-run", "version": 1, "source": "hf-trainer", "created_at": ...,
     "finished": true, "start_step": 0, "total_steps": 500, "intervals": [[1, 0.52], ...],
     "framework": "hf-eager", "config": {native config} | null,
     "prediction": {"step_time_s": {...}, "confidence_level": 0.9} | null,
     "hardware": {collectors fingerprint} | null, "peak_memory_gb": 1.9 | null,
     "peak_memory_kind": "cuda-allocated" | "host-rss" | null, "notes": [...]}
"""

from __future__ import annotations

import datetime as dt
import json
import os
import resource
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel.errors import DataError

RECORD_FORMAT = "perfmodel-run"
RECORD_VERSION = 1
RECORD_FILE = "perfmodel_run.json"
SOURCES = ("hf-trainer", "ludwig", "step-timer", "probe", "monitor")


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """A monitored run as stored on disk."""

    source: str
    """Which adapter wrote it: one of SOURCES."""
    intervals: list[tuple[int, float]]
    """(steps, seconds) between progress reports, warm-up included."""
    total_steps: int | None = None
    """Steps the run was to take."""
    start_step: int = 0
    """Global step at which timing started (a resumed run starts later)."""
    finished: bool = False
    """The run reached its end (not interrupted)."""
    framework: str = "hf-eager"
    """Software stack family (perfmodel.features FRAMEWORK_FAMILIES)."""
    config: dict[str, Any] | None = None
    """The native perfmodel config of the workload that ran (None: not known)."""
    prediction: dict[str, Any] | None = None
    """perfmodel's step-time prediction used as the prior: {"step_time_s": {...}, "confidence_level"}."""
    hardware: dict[str, Any] | None = None
    """The collectors' hardware fingerprint of the host that ran it."""
    created_at: str = field(
        default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    )
    """When the record was written (ISO-8601, UTC)."""
    notes: list[str] = field(default_factory=list)
    """Free-text caveats."""
    peak_memory_gb: float | None = None
    """Peak memory of the run in GB (10^9 bytes), None when not measured."""
    peak_memory_kind: str | None = None
    """What `peak_memory_gb` measured: "cuda-allocated" (torch's peak allocated on the GPU) or
    "host-rss" (the process's peak resident set)."""

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"RunRecord.source must be one of {SOURCES}; got {self.source!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "format": RECORD_FORMAT,
            "version": RECORD_VERSION,
            "source": self.source,
            "created_at": self.created_at,
            "finished": self.finished,
            "start_step": self.start_step,
            "total_steps": self.total_steps,
            "intervals": [[int(k), float(s)] for k, s in self.intervals],
            "framework": self.framework,
            "config": self.config,
            "prediction": self.prediction,
            "hardware": self.hardware,
            "peak_memory_gb": self.peak_memory_gb,
            "peak_memory_kind": self.peak_memory_kind,
            "notes": list(self.notes),
        }


def is_record(data: Any) -> bool:
    return isinstance(data, dict) and data.get("format") == RECORD_FORMAT


def record_from_json(data: dict[str, Any], origin: str = "run record") -> RunRecord:
    """Parse a record; DataError naming what is wrong."""
    if not is_record(data):
        raise DataError(f'{origin} is not a perfmodel run record (no "format": "{RECORD_FORMAT}")')
    if int(data.get("version", 0)) > RECORD_VERSION:
        raise DataError(
            f"{origin} has record version {data.get('version')}; this perfmodel reads up to {RECORD_VERSION}"
        )
    try:
        intervals = [(int(k), float(s)) for k, s in data.get("intervals") or []]
    except (TypeError, ValueError) as exc:
        raise DataError(f'{origin}: "intervals" must be a list of [steps, seconds] pairs ({exc})') from None
    if any(k < 1 or s < 0 for k, s in intervals):
        raise DataError(f"{origin}: intervals need steps >= 1 and seconds >= 0")
    try:
        return RunRecord(
            source=str(data.get("source", "monitor")),
            intervals=intervals,
            total_steps=None if data.get("total_steps") is None else int(data["total_steps"]),
            start_step=int(data.get("start_step") or 0),
            finished=bool(data.get("finished", False)),
            framework=str(data.get("framework") or "hf-eager"),
            config=data.get("config"),
            prediction=data.get("prediction"),
            hardware=data.get("hardware"),
            created_at=str(data.get("created_at") or ""),
            notes=[str(n) for n in data.get("notes") or []],
            peak_memory_gb=_positive(data.get("peak_memory_gb")),
            peak_memory_kind=None if data.get("peak_memory_kind") is None else str(data["peak_memory_kind"]),
        )
    except ValueError as exc:
        raise DataError(f"{origin}: {exc}") from None


def _positive(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return x if x > 0 and x == x and x != float("inf") else None


def peak_memory() -> tuple[float | None, str | None]:
    """(GB, kind) of this process's peak memory: torch's peak allocated CUDA memory when torch is
    loaded and has a GPU, else the peak resident set of the process (getrusage; Linux: KiB)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            return torch.cuda.max_memory_allocated() / 1e9, "cuda-allocated"
    except Exception:  # noqa: BLE001 - a broken CUDA setup: fall back to the host
        pass
    try:
        rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (OSError, ValueError):
        return None, None
    scale = 1.0 if sys.platform == "darwin" else 1024.0  # macOS reports bytes, Linux KiB
    return rss_kib * scale / 1e9, "host-rss"


def write_record(path: str | Path, record: RunRecord) -> Path:
    """Write `record` to `path` (a folder gets RECORD_FILE inside), atomically."""
    out = Path(path)
    if out.is_dir() or not out.suffix:
        out = out / RECORD_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(record.to_json(), indent=1) + "\n")
    os.replace(tmp, out)
    return out


def this_host_fingerprint() -> dict[str, Any] | None:
    """The collectors' fingerprint of this machine as a dict, or None when it cannot be taken."""
    try:
        from perfmodel.measure.fingerprint import collect_fingerprint

        return collect_fingerprint().to_dict()
    except Exception:  # noqa: BLE001 - a record without hardware is still worth keeping
        return None
