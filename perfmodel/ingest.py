"""`perfmodel ingest RUN`: a user's finished run becomes a measured feature-table row, so the next
`make train-model` learns from it.

    result = ingest_run("out/perfmodel_run.json")                    # a monitored or probed run
    result = ingest_run("out/trainer_state.json", config="run.yaml")  # any `perfmodel monitor` format + its config

The run is read like `perfmodel monitor` reads it (perfmodel.monitor.readers); warm-up and level
shifts are excluded by the monitor's rules (perfmodel.monitor.eta), and at least
MIN_STABLE_INTERVALS timed intervals must remain. The row goes through the row codec
(perfmodel.codec.workload_to_row) with source_kind 'user', the host's hardware fingerprint (the
record's, else this machine's, said in the notes) and every stable step time; step_time_s is
their median, as in the collectors' rows. It is appended as a new shard `user__<hardware_id>__...`
in the collectors' folder with the fingerprint beside it, and added as evidence to that hardware's
calibration (perfmodel.calibration: predictions use it at once, without retraining). The same run (config, hardware, step
times) is refused the second time, whichever command kept it first.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel import __version__, paths
from perfmodel.calibration.record import add_evidence
from perfmodel.codec import workload_to_row
from perfmodel.errors import DataError
from perfmodel.monitor import eta
from perfmodel.monitor.prior import load_config_workload, native_config
from perfmodel.monitor.readers import read_trace
from perfmodel.monitor.record import this_host_fingerprint
from perfmodel.run.keep import DuplicateRunError, existing_row_id, keep_rows, run_key

MIN_STABLE_INTERVALS = 10
SHARD_PREFIX = "user"
BENCHMARK_KIND = "user_training"


@dataclass(frozen=True, kw_only=True)
class IngestResult:
    """What was kept."""

    row_id: str
    """The new row's id (user-<key>)."""
    shard: str
    """The shard written."""
    hardware_id: str
    """Host of the run."""
    source_format: str
    """Format the run was read from."""
    warmup_steps: int
    """Steps excluded as warm-up (and before a level shift)."""
    measured_steps: int
    """Steps in the kept stable phase."""
    step_time_s: float
    """Median stable step time in s (the row's step_time_s)."""
    model_name: str
    """The workload's model."""
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _stable(
    intervals: Sequence[tuple[int, float]], notes: list[str]
) -> tuple[int, Sequence[tuple[int, float]]]:
    """(warm-up steps, stable intervals) by the monitor's rules; when they would leave fewer than
    MIN_STABLE_INTERVALS of a run that has more, only the first interval is warm-up (as the probe
    keeps its 10 measured steps)."""
    start = eta.stable_start(intervals)
    if len(intervals) - start < MIN_STABLE_INTERVALS <= len(intervals) - 1:
        notes.append(
            f"the warm-up rule would leave fewer than {MIN_STABLE_INTERVALS} steps: only the first is excluded"
        )
        start = 1
    return sum(k for k, _ in intervals[:start]), intervals[start:]


def _check_hardware(workload: Any, fp: Mapping[str, Any]) -> None:
    kind = fp.get("kind")
    if kind == "cpu" and workload.gpu.vendor != "cpu":
        raise DataError(
            f"the config says {workload.gpu.name}, but the run's host has no GPU ({fp.get('hardware_id')}): fix --config"
        )
    if kind == "cuda" and workload.gpu.name != fp.get("gpu"):
        raise DataError(
            f"the config says {workload.gpu.name}, but the run's host has {fp.get('gpu')} ({fp.get('hardware_id')}): fix --config"
        )


def build_row(
    workload: Any,
    stable: Sequence[tuple[int, float]],
    warmup_steps: int,
    fp: Mapping[str, Any],
    *,
    row_id: str,
    citation: str,
    collected_at: str,
    notes: list[str],
) -> dict[str, Any]:
    """The feature-table row of a run (perfmodel.codec + the measurement)."""
    times = [s / k for k, s in stable]
    median = statistics.median(times)
    t = workload.training
    samples = t.micro_batch_size * t.grad_accum_steps * workload.parallel.data_parallel
    tokens = samples * t.seq_len if workload.model.is_transformer else None
    on_cpu = fp.get("kind") != "cuda"
    row = workload_to_row(
        workload,
        row_id=row_id,
        source="perfmodel-ingest",
        citation=citation,
        source_kind="user",
        collected_at=collected_at,
        collector_version=__version__,
        hardware_id=str(fp["hardware_id"]),
        status="ok",
        benchmark_kind=BENCHMARK_KIND,
        notes="; ".join(notes) or None,
        gpu_name_raw=str(fp.get("cpu_model") if on_cpu else fp.get("gpu_name")) or None,
        torch_version=fp.get("torch_version") or None,
        step_time_s=median,
        step_time_std_s=statistics.stdev(times) if len(times) > 1 else None,
        step_times_s=times,
        warmup_steps=warmup_steps,
        measured_steps=sum(k for k, _ in stable),
        tokens_per_s=tokens / median if tokens else None,
        samples_per_s=samples / median,
        includes_optimizer_step=True,
        repeat_index=0,
    )
    if on_cpu:
        row["gpu"] = "cpu"  # rebuilt with the measuring host's fingerprint (perfmodel.codec)
    return row


def ingest_run(
    path: str | Path,
    *,
    config: str | Path | Mapping[str, Any] | None = None,
    overrides: Sequence[str] = (),
    out_dir: str | Path | None = None,
    allow_unfinished: bool = False,
) -> IngestResult:
    """Keep the run at `path` as a feature-table row (the module's rules). DataError when it
    cannot be (no config, too few timed steps, hardware mismatch); DuplicateRunError when it is
    already kept."""
    trace = read_trace(path)
    notes: list[str] = []
    if not trace.finished and not allow_unfinished:
        raise DataError(
            f"{path} is not a finished run (pass --allow-unfinished to keep the steps timed so far)"
        )
    source_config = config if config is not None else trace.config
    if source_config is None:
        raise DataError(
            f"{path} does not say what ran: give --config (the perfmodel or Ludwig config of the run)"
        )
    workload = load_config_workload(source_config, overrides)
    fp = trace.hardware
    if fp is None:
        fp = this_host_fingerprint()
        if fp is None:
            raise DataError("the run holds no hardware fingerprint and this machine's cannot be taken")
        notes.append("the run's file holds no hardware fingerprint: assumed it ran on this machine")
    _check_hardware(workload, fp)
    out = Path(out_dir) if out_dir is not None else paths.raw_dir()
    native = trace.config if config is None and trace.config is not None else native_config(workload)
    key = run_key(native, str(fp["hardware_id"]), [s for _, s in trace.intervals])
    found = existing_row_id(out, str(fp["hardware_id"]), key)
    if found is not None:  # said first: a duplicate is refused whatever else is wrong with it
        raise DuplicateRunError(
            f"this run is already in {out} as row {found} (same config, hardware {fp['hardware_id']} and step times): "
            "not added again"
        )
    warmup_steps, stable = _stable(trace.intervals, notes)
    if len(stable) < MIN_STABLE_INTERVALS:
        raise DataError(
            f"{path} has {len(stable)} timed interval(s) after warm-up; a row needs at least {MIN_STABLE_INTERVALS} "
            "(per-step timing: PerfmodelCallback, StepTimer, or a CSV of step times)"
        )
    row_id = f"user-{key}"
    when = dt.datetime.fromtimestamp(trace.updated_at or 0, dt.timezone.utc).isoformat(timespec="seconds")
    notes.append(f"ingested from {Path(path).name} ({trace.format}): {warmup_steps} warm-up step(s) excluded")
    row = build_row(
        workload,
        stable,
        warmup_steps,
        fp,
        row_id=row_id,
        collected_at=when,
        notes=notes,
        citation=f"perfmodel ingest of a {trace.format} run on {fp['hardware_id']}",
    )
    shard = keep_rows([row], out_dir=out, prefix=SHARD_PREFIX, fingerprint=dict(fp), key=key)
    if add_evidence(dict(fp), row, "ingest", f"ingested {workload.model.name} ({trace.format})") is not None:
        notes.append(f"added as evidence to the calibration of {fp['hardware_id']} (perfmodel calibrate --show)")
    return IngestResult(
        row_id=row_id,
        shard=str(shard),
        hardware_id=str(fp["hardware_id"]),
        source_format=trace.format,
        warmup_steps=warmup_steps,
        measured_steps=int(row["measured_steps"]),
        step_time_s=float(row["step_time_s"]),
        model_name=workload.model.name,
        notes=notes,
    )
