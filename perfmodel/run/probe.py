"""`perfmodel probe`: run the user's workload for real on this machine for a few steps, then let
the model carry only what differs (perfmodel.run.combine).

    result = probe_workload(workload, steps=10, device="cpu", budget_s=120)   # -> ProbeResult

1. Predict the target (the prediction before the probe).
2. Plan the probe: the collectors' slice of the workload, scaled down to this machine
   (perfmodel.run.plan); the time allowed for stepping is half of the budget.
3. Measure with the collectors' harness (perfmodel.run.measure over perfmodel.measure.slices.run_slice:
   build, warm-up steps, then >= 10 timed steps between device synchronisations), every step's
   time recorded; planned again when too slow or out of memory. The budget and Ctrl-C stop it
   cleanly: with >= 10 measured steps those are used, otherwise the prediction stands.
4. Combine and keep: a measured row (source_kind 'probe', this host's fingerprint) appended to the
   collectors' shard folder, so `make train-model` learns from it, and added as evidence to this
   hardware's calibration (perfmodel.calibration), so the next prediction uses it at once.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median, stdev
from typing import Any

from perfmodel import __version__, paths
from perfmodel.analytic.totals import total_time_s
from perfmodel.calibration.record import add_evidence
from perfmodel.codec import workload_to_row
from perfmodel.errors import PerfModelError
from perfmodel.measure import slices
from perfmodel.measure.device import make_device
from perfmodel.measure.fingerprint import collect_fingerprint
from perfmodel.monitor.prior import native_config
from perfmodel.monitor.record import RunRecord, write_record
from perfmodel.prediction import Interval, PredictedRun, predict
from perfmodel.run.combine import Combined, combine
from perfmodel.run.keep import keep_rows, run_key
from perfmodel.run.measure import (
    MIN_MEASURED_STEPS,
    ProbeError,
    Recorder,
    analyse,
    host_spec,
    initial_limits,
    load_average,
    measure_probe,
)
from perfmodel.run.plan import ProbePlan
from perfmodel.workload import Workload

__all__ = ["ProbeError", "ProbeMeasurement", "ProbeResult", "probe_workload", "updated_prediction"]


@dataclass(frozen=True, kw_only=True)
class ProbeMeasurement:
    """What the probe timed."""

    warmup_times_s: list[float]
    """Excluded leading steps in s."""
    step_times_s: list[float]
    """Measured steps in s."""
    mean_s: tuple[float, float, float]
    """(estimate, low, high) of the mean step time (Student-t interval, perfmodel.monitor.eta)."""
    median_s: float
    """Median measured step time in s."""
    cv: float
    """Coefficient of variation of the measured steps."""
    peak_memory_gb: float | None
    """Peak memory of the probe in GB (None when the run was cut short)."""
    device: str
    """'cpu' or 'cuda'."""
    hardware_id: str
    """The host's fingerprint id."""


@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    """Before, measured, after."""

    before: PredictedRun
    after: PredictedRun
    plan: ProbePlan | None
    measurement: ProbeMeasurement | None
    combined: Combined | None
    stopped: str
    """'complete', 'budget' (stopped by --budget-s), 'interrupted' (Ctrl-C)."""
    elapsed_s: float
    row_id: str | None = None
    shard: str | None = None
    record: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """`predict --json` of the updated prediction, plus a `probe` key."""
        m, c = self.measurement, self.combined

        def iv(x: Interval) -> dict[str, float]:
            return x.as_dict()

        probe: dict[str, Any] = {
            "stopped": self.stopped,
            "elapsed_s": self.elapsed_s,
            "before": {
                "step_time_s": iv(self.before.step_time_s),
                "total_time_s": iv(self.before.total_time_s),
            },
            "plan": self.plan.to_json() if self.plan else None,
            "measured": None
            if m is None
            else {
                "device": m.device,
                "hardware_id": m.hardware_id,
                "warmup_steps": len(m.warmup_times_s),
                "warmup_times_s": m.warmup_times_s,
                "steps": len(m.step_times_s),
                "step_times_s": m.step_times_s,
                "mean_step_time_s": dict(zip(("estimate", "low", "high"), m.mean_s, strict=True)),
                "median_step_time_s": m.median_s,
                "cv": m.cv,
                "peak_memory_gb": m.peak_memory_gb,
            },
            "combined": None
            if c is None
            else {
                "ratio": c.ratio,
                "ratio_fraction": c.ratio_fraction,
                "log_bound_distance": c.log_bound_distance,
                "half_width_measured": c.half_measured,
                "half_width_model": c.half_model,
                "step_time_s": iv(c.step_time_s),
                "narrower": c.narrower,
                "reason": c.reason,
            },
            "after": {"step_time_s": iv(self.after.step_time_s), "total_time_s": iv(self.after.total_time_s)},
            "row_id": self.row_id,
            "shard": self.shard,
            "record": self.record,
            "notes": list(self.notes),
        }
        return {**self.after.to_json(), "probe": probe}


def updated_prediction(before: PredictedRun, step: Interval, note: str) -> PredictedRun:
    """`before` with its step time (and what follows from it) replaced by `step`."""
    plan = before.plan
    total = Interval(
        estimate=total_time_s(plan, step.estimate),
        low=total_time_s(plan, step.low),
        high=total_time_s(plan, step.high),
    )
    mfu = None
    if before.mfu is not None:
        k = before.mfu.estimate * before.step_time_s.estimate
        mfu = Interval(estimate=k / step.estimate, low=k / step.high, high=k / step.low)
    return dataclasses.replace(
        before,
        step_time_s=step,
        throughput_samples_per_s=step.inverted(plan.samples_per_step),
        throughput_tokens_per_s=step.inverted(plan.tokens_per_step) if plan.tokens_per_step else None,
        total_time_s=total,
        gpu_hours=total.scaled(before.workload.parallel.num_gpus / 3600.0),
        mfu=mfu,
        warnings=(*before.warnings, note),
    )


def probe_workload(
    target: Workload,
    *,
    steps: int = 10,
    warmup: int = 2,
    device: str | None = None,
    budget_s: float = 120.0,
    confidence: float = 0.9,
    model_dir: str | Path | None = None,
    keep: bool = True,
    out_dir: str | Path | None = None,
    record_path: str | Path | None = None,
    clock: Callable[[], float] = time.perf_counter,
    prepare: Callable[..., Any] | None = None,
    gpu_query: Any = None,
    use_calibration: bool = True,
) -> ProbeResult:
    """Probe `target` on this machine (the module's steps). `prepare` replaces the collectors'
    slice builder and `gpu_query` their GPU query (tests); `out_dir` defaults to
    `perfmodel.paths.raw_dir()`."""
    if steps < MIN_MEASURED_STEPS:
        raise PerfModelError(
            f"--steps must be >= {MIN_MEASURED_STEPS} (got {steps}): fewer steps cannot show a spread"
        )
    if warmup < 1:
        raise PerfModelError(f"warm-up must be >= 1 step (got {warmup})")
    t0 = clock()
    deadline = t0 + budget_s
    notes: list[str] = []
    load = load_average()
    if load is not None and load > (os.cpu_count() or 1):
        notes.append(
            f"the host is busy (load average {load:.1f} on {os.cpu_count()} cores): step times are slower "
            "and noisier than on an idle machine"
        )
    before = predict(target, confidence=confidence, model_dir=model_dir, use_calibration=use_calibration)
    fingerprint = collect_fingerprint(gpu_query)
    dev = make_device(device, fingerprint.kind)
    host = host_spec(fingerprint, dev.kind)
    out = Path(out_dir) if out_dir is not None else paths.raw_dir()
    plan_args = {
        "target": target,
        "host": host,
        "steps": steps,
        "warmup": warmup,
        "confidence": confidence,
        "model_dir": model_dir,
        "limits": initial_limits(dev, deadline - clock(), steps, warmup, notes),
    }
    plan, recorder, measurement, stopped = measure_probe(
        plan_args, dev, clock=clock, deadline=deadline, budget_s=budget_s, prepare=prepare, notes=notes
    )
    measured_count = len(recorder.times) - plan.config.warmup_steps
    if measured_count < MIN_MEASURED_STEPS:
        return ProbeResult(
            before=before,
            after=before,
            plan=plan,
            measurement=None,
            combined=None,
            stopped=stopped,
            elapsed_s=clock() - t0,
            notes=notes,
        )
    k, mean_s = analyse(recorder.times, plan.config.warmup_steps, confidence)
    times = recorder.times[k:]

    meas = ProbeMeasurement(
        warmup_times_s=recorder.times[:k],
        step_times_s=times,
        mean_s=mean_s,
        median_s=median(times),
        cv=stdev(times) / (sum(times) / len(times)),
        device=dev.kind,
        hardware_id=fingerprint.hardware_id,
        peak_memory_gb=measurement.peak_memory_gb if measurement is not None else None,
    )
    probe_pred = predict(plan.workload, confidence=confidence, model_dir=model_dir, use_calibration=use_calibration)
    per_micro = before.analytic.t_bound_s / target.training.grad_accum_steps
    distance = abs(math.log(per_micro / probe_pred.analytic.t_bound_s))
    combined = combine(
        measured_s=mean_s,
        target=before.step_time_s,
        probe=probe_pred.step_time_s,
        distance=distance,
        same_device=target.gpu.name == host.name,
        same_gpu_count=target.parallel.num_gpus == 1,
        identical=_same_workload(target, plan.workload),
    )
    c, b = combined.step_time_s, before.step_time_s
    contradicts = c.low > b.high or c.high < b.low
    source = (
        f"{len(times)} steps measured on {fingerprint.hardware_id}, x {combined.ratio:.3g} for what differs"
    )
    if combined.narrower or contradicts:
        why = (
            "step time from a probe"
            if combined.narrower
            else "the probe contradicts the prediction; its step time is used"
        )
        after = updated_prediction(before, c, f"{why}: {source} ({combined.reason})")
        if contradicts:
            notes.append(
                f"measured x ratio {c.estimate:.3g} s/step lies outside the prediction's interval "
                f"({b.low:.3g} - {b.high:.3g} s): the probe's step time replaces it"
            )
    else:
        after = dataclasses.replace(
            before,
            warnings=(
                *before.warnings,
                f"the probe did not narrow the interval ({combined.reason}): the prediction stands",
            ),
        )
    row_id = shard = record = None
    native = _native(plan.workload)
    key = run_key(native, fingerprint.hardware_id, recorder.times)
    if keep:
        row_id, shard = _keep(plan, meas, measurement, recorder, fingerprint, dev, out, key, target)
    if record_path is not None:
        record = str(
            _write_record(
                record_path,
                recorder.times,
                native,
                fingerprint,
                probe_pred,
                meas.peak_memory_gb,
                "cuda-allocated" if dev.kind == "cuda" else "host-rss",
            )
        )
    return ProbeResult(
        before=before,
        after=after,
        plan=plan,
        measurement=meas,
        combined=combined,
        stopped=stopped,
        elapsed_s=clock() - t0,
        row_id=row_id,
        shard=shard,
        record=record,
        notes=notes,
    )


def _same_workload(a: Workload, b: Workload) -> bool:
    ra, rb = workload_to_row(a), workload_to_row(b)
    for row in (ra, rb):
        row.pop("model_name", None)
        row.pop("model_family", None)
    return ra == rb


def _native(w: Workload) -> dict[str, Any]:
    return native_config(w)


def _keep(
    plan: ProbePlan,
    meas: ProbeMeasurement,
    measurement: Any,
    recorder: Recorder,
    fingerprint: Any,
    dev: Any,
    out: Path,
    key: str,
    target: Workload,
) -> tuple[str, str]:
    m = slices.Measurement(
        status="ok",
        step_times_s=meas.step_times_s,
        peak_memory_gb=meas.peak_memory_gb,
        load_avg_1m=getattr(measurement, "load_avg_1m", None),
    )
    row = slices.slice_row(
        plan.config,
        m,
        recorder.facts,
        fingerprint=fingerprint,
        device_kind=dev.kind,
        peak_memory_method=dev.peak_memory_method,
    )
    row_id = f"probe-{key}"
    scaled = "; ".join(plan.scaled) or "full size"
    row.update(
        row_id=row_id,
        run_group=row_id,
        source="perfmodel-probe",
        source_kind="probe",
        citation=f"perfmodel probe v{__version__} on {fingerprint.hardware_id}",
        warmup_steps=len(meas.warmup_times_s),
        notes="; ".join(filter(None, [row.get("notes"), f"probe of {target.model.name} ({scaled})"])),
    )
    shard = keep_rows([row], out_dir=out, prefix="probe", fingerprint=fingerprint.to_dict(), key=key)
    add_evidence(fingerprint.to_dict(), row, "probe", f"probe of {target.model.name} ({scaled})")
    return row_id, str(shard)


def _write_record(
    path: str | Path,
    times: list[float],
    native: dict[str, Any],
    fingerprint: Any,
    probe_pred: PredictedRun,
    peak_memory_gb: float | None = None,
    memory_kind: str | None = None,
) -> Path:
    st = probe_pred.step_time_s
    return write_record(
        path,
        RunRecord(
            source="probe",
            intervals=[(1, t) for t in times],
            total_steps=len(times),
            finished=True,
            framework=str(native.get("framework", "torch-eager")),
            config=native,
            prediction={"step_time_s": st.as_dict(), "confidence_level": probe_pred.confidence_level},
            hardware=fingerprint.to_dict(),
            peak_memory_gb=peak_memory_gb,
            peak_memory_kind=memory_kind if peak_memory_gb is not None else None,
        ),
    )
