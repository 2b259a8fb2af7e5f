"""The calibration file: one small versioned JSON document per measured hardware, kept in
`perfmodel.paths.calibration_dir()` (default ~/.cache/perfmodel/calibration, beside the other
caches; $PERFMODEL_CALIBRATION_DIR moves it, which is how a service loads a fleet's folder).

    <calibration_dir>/<hardware_id>.json      one per hardware configuration (fingerprint id)

A calibration carries: the host's fingerprint and its accelerator kind, when it was measured, the
measured ceilings (matmul TFLOP/s per dtype, copy bandwidth, launch latency), a factor per kernel
group (measured / modelled time of the micro-benchmarks' kernels), the measured end-to-end runs
(each with its workload row, so its residual is recomputed against whatever model predicts), and a
snapshot of the end-to-end log offset with its spread and evidence count.

Which calibration a prediction uses (`CalibrationStore.matching`): the accelerator kind must be
the query's (`accelerator_kind`: the catalog key of a GPU, `cpu/<model>/<cores>c` for a CPU), never
another; among those, this host's own (its CPU model, cores and memory are this machine's) is the
host level, every other one the accelerator-kind level (`perfmodel.calibration.apply`).

A file that cannot be read, has another schema version, or is stale (older than `MAX_AGE_DAYS`, or
measured by this host under another torch version) is one warning on stderr (logger
`perfmodel.calibration`, once per file and version of it) and is not used: the prediction is the
uncalibrated one, never a crash.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import json
import logging
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel import __version__, paths
from perfmodel.catalog import hardware
from perfmodel.errors import DataError
from perfmodel.workload import GPUSpec

SCHEMA_VERSION = 1
"""Version of the calibration file's layout; a file of another version is not used."""
FORMAT = "perfmodel-calibration"
MAX_AGE_DAYS = 180.0
"""A calibration older than this is stale (drivers, firmware and the software stack move)."""
MAX_FILE_BYTES = 4_000_000
"""A calibration file larger than this is refused (it is a few KB; evidence is capped)."""
MAX_EVIDENCE = 200
"""Measured runs kept per calibration (the oldest go first)."""
CEILING_KEYS = ("hbm_copy_gb_per_s", "launch_latency_s")
"""Ceilings besides the matmul ones ('matmul_<dtype>_tflops')."""
ROW_DROP = ("step_times_s", "notes", "citation", "source", "collector_version", "gpu_name_raw", "label")
"""Columns of a measured row a calibration does not keep (the workload and its median stay)."""
SOURCES = ("calibrate", "probe", "ingest", "collect")
"""Where a measured run came from."""

_log = logging.getLogger("perfmodel.calibration")


class CalibrationFileError(DataError):
    """A calibration file that cannot be used (unreadable, damaged, another version, stale)."""


# --- identities ----------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def cpu_kind(model: str, cores: int) -> str:
    """The accelerator kind of a CPU: its model and core count (the ceilings scale with both)."""
    return f"cpu/{_slug(model)}/{int(cores)}c"


def kind_of_spec(gpu: GPUSpec) -> str:
    """The accelerator kind a prediction asks about: a GPU's catalog key, or `cpu_kind`."""
    if gpu.vendor == "cpu":
        return cpu_kind(gpu.generation, gpu.sm_count)
    return gpu.name


def kind_of_fingerprint(fp: Mapping[str, Any]) -> str:
    """The accelerator kind a fingerprint measured on."""
    if fp.get("kind") == "cuda":
        return str(fp.get("gpu"))
    return cpu_kind(str(fp.get("cpu_model", "")), int(fp.get("cpu_cores") or 1))


def host_identity(fp: Mapping[str, Any]) -> tuple[str, int, int]:
    """(CPU model, cores, host GB rounded): what a host is, without its accelerators."""
    return str(fp.get("cpu_model", "")), int(fp.get("cpu_cores") or 0), int(round(float(fp.get("host_memory_gb") or 0)))


def this_host_identity() -> tuple[str, int, int]:
    """This machine's `host_identity` (cheap: /proc, no torch, no NVML)."""
    model, cores, mem = hardware.local_cpu_facts()
    return model, int(cores), int(round(mem))


# --- the record ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class KernelFactor:
    """Measured over modelled time of one kernel group's micro-benchmarks on this device."""

    factor: float
    """Geometric mean of measured / modelled seconds (1: the kernel model is right)."""
    log_sd: float
    """Spread of log(measured / modelled) over the benchmarks (0 with one)."""
    n: int
    """Benchmarks it comes from."""
    source: str
    """What was measured, e.g. 'matmul fp32 256/512/1024'."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class MeasuredRun:
    """One measured training run on the calibrated hardware (a calibration slice, a probe, an
    ingested run): its workload as a feature-table row and its measured step time."""

    source: str
    """'calibrate', 'probe', 'ingest' or 'collect'."""
    label: str
    """What ran, for display."""
    at: str
    """When it was measured (ISO 8601, UTC)."""
    row: dict[str, Any]
    """The workload (perfmodel.codec.workload_to_row columns)."""
    measured_s: float
    """Median measured step time (s)."""
    predicted_s: float | None = None
    """The uncalibrated prediction when it was recorded (s; for display, recomputed when used)."""
    load_avg_1m: float | None = None
    """Host load while it was measured."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """A calibration of one hardware configuration (the module docstring)."""

    hardware_id: str
    """The fingerprint id of the measured host (perfmodel.measure.fingerprint)."""
    accelerator_kind: str
    """`kind_of_fingerprint`: the kind of accelerator it may be applied to."""
    device: str
    """'cpu' or 'cuda'."""
    fingerprint: dict[str, Any]
    """The host's full fingerprint."""
    created_at: str
    """When it was measured (ISO 8601, UTC)."""
    updated_at: str = ""
    """When evidence was last added."""
    origin: str = "calibrate"
    """'calibrate' (this host), 'collect' (a fleet's collection) or 'import' (a shared file)."""
    perfmodel_version: str = __version__
    ceilings: dict[str, float] = field(default_factory=dict)
    """'matmul_<dtype>_tflops', 'hbm_copy_gb_per_s' (GB/s), 'launch_latency_s' (s)."""
    kernel_factors: dict[str, KernelFactor] = field(default_factory=dict)
    """Kernel group ('matmul', 'attention', 'memory', 'host') -> its factor."""
    microbench: list[dict[str, Any]] = field(default_factory=list)
    """The micro-benchmark rows it measured, each with its modelled time ('modelled_s')."""
    runs: tuple[MeasuredRun, ...] = ()
    """The measured end-to-end runs (evidence), oldest first."""
    offset: dict[str, float] = field(default_factory=dict)
    """Snapshot when written: log_offset, log_sd, n, k, weight (recomputed when used)."""
    measurement: dict[str, Any] = field(default_factory=dict)
    """How the calibration ran: budget_s, elapsed_s, load averages, what was cut."""
    schema_version: int = SCHEMA_VERSION

    @property
    def host(self) -> tuple[str, int, int]:
        return host_identity(self.fingerprint)

    def is_this_host(self) -> bool:
        """Measured on a machine like this one (same CPU model, cores and memory)."""
        return self.host == this_host_identity()

    def with_runs(self, runs: Iterable[MeasuredRun], *, now: str | None = None) -> Calibration:
        """A copy with `runs` added (the same run twice is kept once; at most MAX_EVIDENCE)."""
        seen = {_run_key(r) for r in self.runs}
        new = [r for r in runs if _run_key(r) not in seen]
        kept = (*self.runs, *new)[-MAX_EVIDENCE:]
        return dataclasses.replace(self, runs=kept, updated_at=now or utc_now())

    def age_days(self, now: dt.datetime | None = None) -> float:
        made = _parse_time(self.created_at)
        return ((now or dt.datetime.now(dt.timezone.utc)) - made).total_seconds() / 86400.0

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "schema_version": self.schema_version,
            "hardware_id": self.hardware_id,
            "accelerator_kind": self.accelerator_kind,
            "device": self.device,
            "origin": self.origin,
            "created_at": self.created_at,
            "updated_at": self.updated_at or self.created_at,
            "perfmodel_version": self.perfmodel_version,
            "fingerprint": dict(self.fingerprint),
            "ceilings": dict(self.ceilings),
            "kernel_factors": {k: f.to_json() for k, f in sorted(self.kernel_factors.items())},
            "offset": dict(self.offset),
            "measurement": dict(self.measurement),
            "microbench": list(self.microbench),
            "runs": [r.to_json() for r in self.runs],
        }

    @classmethod
    def from_json(cls, data: Any, origin: str = "") -> Calibration:
        """Read a document; CalibrationFileError naming what is wrong."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CalibrationFileError(f"not a perfmodel calibration (no \"format\": \"{FORMAT}\")")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise CalibrationFileError(
                f"schema version {version!r}, this perfmodel reads version {SCHEMA_VERSION}: run `perfmodel calibrate` again"
            )
        try:
            fp = dict(data["fingerprint"])
            ceilings = {str(k): _finite(v, f"ceilings.{k}") for k, v in dict(data.get("ceilings") or {}).items()}
            factors = {
                str(k): KernelFactor(
                    factor=_positive(f["factor"], f"kernel_factors.{k}.factor"),
                    log_sd=_finite(f.get("log_sd", 0.0), f"kernel_factors.{k}.log_sd"),
                    n=int(f.get("n", 1)),
                    source=str(f.get("source", "")),
                )
                for k, f in dict(data.get("kernel_factors") or {}).items()
            }
            runs = tuple(
                MeasuredRun(
                    source=str(r["source"]),
                    label=str(r.get("label", "")),
                    at=str(r.get("at", "")),
                    row=dict(r["row"]),
                    measured_s=_positive(r["measured_s"], f"runs[{i}].measured_s"),
                    predicted_s=None if r.get("predicted_s") is None else _positive(r["predicted_s"], f"runs[{i}].predicted_s"),
                    load_avg_1m=None if r.get("load_avg_1m") is None else float(r["load_avg_1m"]),
                )
                for i, r in enumerate(data.get("runs") or [])
            )
            cal = cls(
                hardware_id=str(data["hardware_id"]),
                accelerator_kind=str(data["accelerator_kind"]),
                device=str(data.get("device", fp.get("kind", "cpu"))),
                fingerprint=fp,
                created_at=str(data["created_at"]),
                updated_at=str(data.get("updated_at") or data["created_at"]),
                origin=origin or str(data.get("origin", "calibrate")),
                perfmodel_version=str(data.get("perfmodel_version", "")),
                ceilings=ceilings,
                kernel_factors=factors,
                microbench=list(data.get("microbench") or []),
                runs=runs,
                offset={str(k): float(v) for k, v in dict(data.get("offset") or {}).items()},
                measurement=dict(data.get("measurement") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, CalibrationFileError):
                raise
            raise CalibrationFileError(f"damaged: {type(exc).__name__}: {exc}") from None
        if cal.accelerator_kind != kind_of_fingerprint(fp):
            raise CalibrationFileError(
                f"damaged: accelerator_kind {cal.accelerator_kind!r} does not match its fingerprint "
                f"({kind_of_fingerprint(fp)!r})"
            )
        _parse_time(cal.created_at)
        return cal


def measured_run(row: Mapping[str, Any], source: str, label: str = "") -> MeasuredRun | None:
    """A measured row (a slice, a probe, an ingested run) as calibration evidence; None when it
    has no step time."""
    t = row.get("step_time_s")
    if row.get("status", "ok") != "ok" or not _positive_number(t):
        return None
    kept = {k: v for k, v in row.items() if k not in ROW_DROP and not is_missing(v)}
    return MeasuredRun(
        source=source,
        label=label or str(row.get("row_id") or row.get("model_name") or ""),
        at=str(row.get("collected_at") or utc_now()),
        row=kept,
        measured_s=float(t),  # type: ignore[arg-type]
        load_avg_1m=_load_of(row),
    )


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _load_of(row: Mapping[str, Any]) -> float | None:
    notes = str(row.get("notes") or "")
    marker = "host load average (1 min) "
    if marker in notes:
        try:
            return float(notes.split(marker, 1)[1].split()[0])
        except (ValueError, IndexError):
            return None
    return None


def _positive_number(value: Any) -> bool:
    try:
        return value is not None and math.isfinite(float(value)) and float(value) > 0
    except (TypeError, ValueError):
        return False


def _run_key(run: MeasuredRun) -> tuple[str, str, float]:
    return run.label, json.dumps(run.row, sort_keys=True, default=str), round(run.measured_s, 9)


def runs_digest(cal: Calibration) -> str:
    """A short hash of a calibration's measured runs: what they are, not how many (two records of
    one host written within the same second can hold the same number of different runs)."""
    text = json.dumps([_run_key(r) for r in cal.runs], default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _finite(value: Any, name: str) -> float:
    out = float(value)
    if not math.isfinite(out):
        raise CalibrationFileError(f"damaged: {name} is not a finite number ({value!r})")
    return out


def _positive(value: Any, name: str) -> float:
    out = _finite(value, name)
    if out <= 0:
        raise CalibrationFileError(f"damaged: {name} must be > 0, got {value!r}")
    return out


def _parse_time(text: str) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise CalibrationFileError(f"damaged: created_at {text!r} is not an ISO 8601 time") from None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def apply_ceilings(gpu: GPUSpec, ceilings: Mapping[str, float]) -> GPUSpec:
    """The accelerator with a calibration's measured ceilings in `measured` (the kernel model reads
    them: the matmul ceiling as its large-matmul efficiency, a CPU's copy bandwidth as its memory
    bandwidth); launch latency is not a spec and stays out."""
    measured = {k: float(v) for k, v in ceilings.items() if k.startswith("matmul_") or k == "hbm_copy_gb_per_s"}
    if not measured:
        return gpu
    changes: dict[str, Any] = {"measured": {**gpu.measured, **measured}}
    if gpu.vendor == "cpu" and "hbm_copy_gb_per_s" in measured:
        changes["hbm_bandwidth_gb_per_s"] = measured["hbm_copy_gb_per_s"]
    return dataclasses.replace(gpu, **changes)


# --- files ---------------------------------------------------------------------------------------


def read_calibration(path: str | Path, origin: str = "") -> Calibration:
    """One calibration file; CalibrationFileError when it cannot be used (why, in one line)."""
    p = Path(path)
    if not p.is_file():
        raise CalibrationFileError(f"{p} is not a file")
    try:
        if p.stat().st_size > MAX_FILE_BYTES:
            raise CalibrationFileError(f"{p} is larger than {MAX_FILE_BYTES} bytes: not a calibration")
        data = json.loads(p.read_text())
    except OSError as exc:
        raise CalibrationFileError(f"cannot read {p}: {exc.strerror or exc}") from None
    except CalibrationFileError:
        raise
    except (ValueError, UnicodeDecodeError) as exc:
        raise CalibrationFileError(f"{p} is damaged (not JSON: {exc})") from None
    try:
        return Calibration.from_json(data, origin=origin)
    except CalibrationFileError as exc:
        raise CalibrationFileError(f"{p}: {exc}") from None


def write_calibration(cal: Calibration, path: str | Path) -> Path:
    """Write atomically (a temporary file in the same folder, then renamed)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.parent / f".{p.name}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(cal.to_json(), indent=1, sort_keys=False, allow_nan=False) + "\n")
    os.replace(tmp, p)
    return p


def stale_reason(cal: Calibration, *, torch_version: str | None = None) -> str | None:
    """Why a readable calibration must not be used any more, or None."""
    age = cal.age_days()
    if age > MAX_AGE_DAYS:
        return f"measured {age:.0f} days ago (older than {MAX_AGE_DAYS:.0f}): run `perfmodel calibrate` again"
    if age < -1.0:
        return f"its time {cal.created_at} is in the future: the file is damaged or the clock is wrong"
    measured_torch = str(cal.fingerprint.get("torch_version") or "")
    if torch_version and measured_torch and cal.is_this_host() and torch_version != measured_torch:
        return f"measured under torch {measured_torch}, this host now has {torch_version}: run `perfmodel calibrate` again"
    return None


def calibration_path(hardware_id: str, folder: str | Path | None = None) -> Path:
    return Path(folder or paths.calibration_dir()) / f"{_slug(hardware_id)}.json"


@dataclass(frozen=True)
class CalibrationStore:
    """The usable calibrations of one folder (damaged and stale ones left out, each said once)."""

    folder: Path
    calibrations: tuple[Calibration, ...]
    problems: tuple[str, ...] = ()
    """One line per file that was not used."""

    def matching(self, gpu: GPUSpec) -> tuple[Calibration | None, tuple[Calibration, ...]]:
        """(this host's calibration of the query's accelerator kind or None, the other
        calibrations of that kind): never one of another kind."""
        kind = kind_of_spec(gpu)
        same = [c for c in self.calibrations if c.accelerator_kind == kind]
        here = this_host_identity()
        host = [c for c in same if c.host == here and c.origin != "import"]
        own = max(host, key=lambda c: (len(c.runs), c.updated_at), default=None)
        return own, tuple(c for c in same if c is not own)

    def for_hardware_id(self, hardware_id: str) -> Calibration | None:
        return next((c for c in self.calibrations if c.hardware_id == hardware_id), None)


def load_store(folder: str | Path | None = None) -> CalibrationStore:
    """The calibrations in `folder` (default `perfmodel.paths.calibration_dir()`), cached while its
    files are unchanged; a file that cannot be used is one warning (logger `perfmodel.calibration`)."""
    root = Path(folder) if folder is not None else paths.calibration_dir()
    try:
        files = sorted(root.glob("*.json")) if root.is_dir() else []
        stamps = tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files)
    except OSError:
        stamps = ()
    return _load_store(str(root), stamps)


def store_stamp(folder: str | Path | None = None) -> str:
    """A short text that changes whenever a calibration file of the folder does (a service adds it
    to its response cache key: a new probe or calibration is answered at once)."""
    root = Path(folder) if folder is not None else paths.calibration_dir()
    try:
        files = sorted(root.glob("*.json")) if root.is_dir() else []
        return f"{root}:" + ",".join(f"{f.name}:{f.stat().st_mtime_ns}:{f.stat().st_size}" for f in files)
    except OSError:
        return f"{root}:?"


@functools.lru_cache(maxsize=8)
def _load_store(root: str, stamps: tuple[tuple[str, int, int], ...]) -> CalibrationStore:
    found: list[Calibration] = []
    problems: list[str] = []
    torch_version = _installed_torch_version()
    for name, _, _ in stamps:
        try:
            cal = read_calibration(name)
        except CalibrationFileError as exc:
            problems.append(str(exc))
            continue
        why = stale_reason(cal, torch_version=torch_version)
        if why:
            problems.append(f"{name}: stale: {why}")
            continue
        found.append(cal)
    for line in problems:
        warn_once(f"calibration not used (the prediction is the uncalibrated one): {line}")
    return CalibrationStore(folder=Path(root), calibrations=tuple(found), problems=tuple(problems))


@functools.lru_cache(maxsize=256)
def warn_once(line: str) -> None:
    """One warning line on stderr (logger `perfmodel.calibration`), once per process."""
    _log.warning("warning: %s", line)


def _installed_torch_version() -> str | None:
    """torch's version from its package metadata (never importing torch: seconds)."""
    from importlib import metadata  # stdlib, only here

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def save_calibration(cal: Calibration, folder: str | Path | None = None) -> Path:
    """Keep `cal` in the calibration folder (replacing the same hardware's)."""
    return write_calibration(cal, calibration_path(cal.hardware_id, folder))


def import_calibration(path: str | Path, folder: str | Path | None = None) -> tuple[Calibration, Path]:
    """Copy a shared calibration into the folder: it serves its accelerator kind (the kind level);
    on a machine like the one that measured it, this host's own calibration still comes first."""
    cal = read_calibration(path)
    why = stale_reason(cal)
    if why:
        raise CalibrationFileError(f"{path}: stale: {why}")
    own = load_store(folder).for_hardware_id(cal.hardware_id)
    if own is not None and own.origin != "import":
        cal = own.with_runs(cal.runs)  # the same hardware: its runs join this host's evidence
    else:
        cal = dataclasses.replace(cal, origin="import")
    return cal, save_calibration(cal, folder)


def add_runs(
    fingerprint: Mapping[str, Any], runs: Sequence[MeasuredRun], folder: str | Path | None = None
) -> Path | None:
    """Add measured runs (a probe, an ingested run) to the calibration of the hardware that ran
    them; a hardware without a calibration gets one holding only runs (no ceilings, no kernel
    factors: the end-to-end offset alone). Returns the file written, None when nothing was new."""
    if not runs:
        return None
    hw = str(fingerprint["hardware_id"])
    path = calibration_path(hw, folder)
    try:
        cal = read_calibration(path)
    except CalibrationFileError:
        if path.exists():  # damaged or another version: replaced by a fresh one, said once
            warn_once(f"calibration {path} is unreadable: a new one holding only the new run replaces it")
        now = utc_now()
        cal = Calibration(
            hardware_id=hw,
            accelerator_kind=kind_of_fingerprint(fingerprint),
            device=str(fingerprint.get("kind", "cpu")),
            fingerprint=dict(fingerprint),
            created_at=now,
            updated_at=now,
            origin="calibrate",
        )
    before = len(cal.runs)
    cal = cal.with_runs(runs)
    if len(cal.runs) == before and before < MAX_EVIDENCE:
        return None
    return write_calibration(cal, path)


def add_evidence(fingerprint: Mapping[str, Any], row: Mapping[str, Any], source: str, label: str = "") -> Path | None:
    """Add one measured row (a probe's, an ingested run's) to its hardware's calibration; never
    fails the caller: a calibration that cannot be written is one warning. The file written, or None."""
    run = measured_run(row, source, label)
    if run is None:
        return None
    try:
        return add_runs(fingerprint, [run])
    except (OSError, KeyError, ValueError) as exc:
        warn_once(f"the measured run could not be added to the calibration of {fingerprint.get('hardware_id')}: {exc}")
        return None
