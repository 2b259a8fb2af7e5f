"""Where ETA snapshots go: the active MLflow run when there is one, else a compact line on stderr.

`AutoReporter` decides per report: an MLflow run is only ever active in a process that imported
mlflow, so the check never imports it. Metric keys carry their unit (STYLE.md):

    perfmodel_observed_step_time_s     mean step time of the latest progress interval
    perfmodel_predicted_step_time_s    the prior (perfmodel's prediction)
    perfmodel_step_time_estimate_s     blended step time for the rest of the run
    perfmodel_eta_s / _low_s / _high_s remaining time and its interval
    perfmodel_prior_weight             share of the prediction in the blend
    perfmodel_cpu_util_pct / perfmodel_gpu_util_pct   latest utilisation reading
"""

from __future__ import annotations

import re
import sys
import time
from typing import Any, TextIO

from perfmodel.monitor.core import EtaSnapshot
from perfmodel.tracking import import_mlflow


def fmt_seconds(seconds: float) -> str:
    """A duration for humans: 850 ms, 42.0 s, 3 min 24 s, 5 h 07 min, 2.3 days."""
    if seconds < 1:
        return f"{seconds * 1000:.3g} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    if seconds < 48 * 3600:
        return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"
    return f"{seconds / 86400:.1f} days"


def _step(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.3g} s"


def format_line(snap: EtaSnapshot) -> str:
    """One compact status line."""
    total = f"/{snap.total_steps}" if snap.total_steps is not None else ""
    parts = [f"step {snap.steps_done}{total}"]
    obs = snap.observed
    if obs is not None and obs.intervals >= 2:
        parts.append(
            f"{_step(obs.mean_s)}/step (median {_step(obs.median_s)}, p10-p90 {_step(obs.p10_s)}-{_step(obs.p90_s)}, "
            f"CV {obs.cv:.0%})"
        )
    elif snap.predicted_step_time_s is not None:
        parts.append(f"predicted {_step(snap.predicted_step_time_s.estimate)}/step")
    if snap.warmup_steps:
        unit = "step" if snap.warmup_steps == 1 else "steps"
        parts.append(f"warm-up {snap.warmup_steps} {unit} ({fmt_seconds(snap.warmup_s)}) excluded")
    rem = snap.remaining_s
    if snap.finished:
        parts.append(f"finished in {fmt_seconds(snap.elapsed_s)}")
    elif rem is not None:
        parts.append(
            f"ETA {fmt_seconds(rem.estimate)} ({fmt_seconds(rem.low)} - {fmt_seconds(rem.high)}, {snap.confidence:.0%})"
        )
        if snap.prior_weight is not None:
            parts.append(f"prediction weight {snap.prior_weight:.0%}")
    util = snap.utilization
    if util is not None:
        if util.gpu_mean_pct is not None:
            parts.append(f"GPU {util.gpu_mean_pct:.0f}%")
        if util.cpu_mean_pct is not None:
            parts.append(f"CPU {util.cpu_mean_pct:.0f}%")
    return "[perfmodel] " + " | ".join(parts)


class ConsoleReporter:
    """Prints a compact line per report (and each kind of hint once) to `stream` (default stderr)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self._hints: set[str] = set()

    def report(self, snapshot: EtaSnapshot, *, final: bool = False) -> None:
        out = self.stream or sys.stderr
        out.write(format_line(snapshot) + "\n")
        for hint in snapshot.hints:
            kind = re.split(r"[(:]", hint, maxsplit=1)[0]  # each kind of hint once (its numbers change)
            if kind not in self._hints:
                self._hints.add(kind)
                out.write(f"[perfmodel] hint: {hint}\n")
        out.flush()


def active_mlflow_run() -> Any:
    """The active MLflow run of this process, or None (never imports mlflow)."""
    mlflow = sys.modules.get("mlflow")
    if mlflow is None:
        return None
    try:
        return mlflow.active_run()
    except Exception:  # noqa: BLE001 - a broken tracking setup must not stop training
        return None


def snapshot_metrics(snap: EtaSnapshot) -> dict[str, float]:
    """The MLflow metrics of one snapshot (keys in the module docstring)."""
    m: dict[str, float] = {}
    if snap.last_step_time_s is not None:
        m["perfmodel_observed_step_time_s"] = snap.last_step_time_s
    if snap.predicted_step_time_s is not None:
        m["perfmodel_predicted_step_time_s"] = snap.predicted_step_time_s.estimate
    if snap.step_time_s is not None:
        m["perfmodel_step_time_estimate_s"] = snap.step_time_s.estimate
    if snap.remaining_s is not None:
        m["perfmodel_eta_s"] = snap.remaining_s.estimate
        m["perfmodel_eta_low_s"] = snap.remaining_s.low
        m["perfmodel_eta_high_s"] = snap.remaining_s.high
    if snap.prior_weight is not None:
        m["perfmodel_prior_weight"] = snap.prior_weight
    if snap.last_sample is not None:
        if snap.last_sample.cpu_pct is not None:
            m["perfmodel_cpu_util_pct"] = snap.last_sample.cpu_pct
        if snap.last_sample.gpu_pct is not None:
            m["perfmodel_gpu_util_pct"] = snap.last_sample.gpu_pct
    return m


class MlflowReporter:
    """Logs each snapshot's metrics to the active MLflow run (step = steps done), batched: the
    first report and then at most one `log_batch` call every `flush_every_s` (a tracking-store
    write per training step would slow the training it watches); the final snapshot flushes and
    also logs the stable-phase summary and the hints as a tag."""

    def __init__(self, flush_every_s: float = 10.0) -> None:
        self.flush_every_s = flush_every_s
        self._buffer: list[Any] = []
        self._last_flush: float | None = None

    def report(self, snapshot: EtaSnapshot, *, final: bool = False) -> None:
        mlflow = import_mlflow()  # telemetry off unless the user turned it on
        # mlflow: seconds to import, only tracking needs it
        from mlflow.entities import Metric

        metrics = snapshot_metrics(snapshot)
        if final:
            metrics["perfmodel_warmup_steps"] = float(snapshot.warmup_steps)
            metrics["perfmodel_elapsed_s"] = snapshot.elapsed_s
            if snapshot.observed is not None:
                metrics["perfmodel_stable_median_step_time_s"] = snapshot.observed.median_s
                metrics["perfmodel_stable_mean_step_time_s"] = snapshot.observed.mean_s
                metrics["perfmodel_stable_step_time_cv"] = snapshot.observed.cv
        stamp = int(time.time() * 1000)
        self._buffer += [
            Metric(key=k, value=float(v), timestamp=stamp, step=snapshot.steps_done)
            for k, v in metrics.items()
        ]
        now = time.monotonic()
        if final or self._last_flush is None or now - self._last_flush >= self.flush_every_s:
            run = mlflow.active_run()
            if run is not None:
                client = mlflow.MlflowClient()
                for i in range(0, len(self._buffer), 1000):  # MLflow's limit per batch
                    client.log_batch(run.info.run_id, metrics=self._buffer[i : i + 1000])
                if final and snapshot.hints:
                    client.set_tag(run.info.run_id, "perfmodel_hints", " | ".join(snapshot.hints)[:5000])
            self._buffer, self._last_flush = [], now


class AutoReporter:
    """MLflow when a run is active at report time, else the console line."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.console = ConsoleReporter(stream)
        self.mlflow = MlflowReporter()

    def report(self, snapshot: EtaSnapshot, *, final: bool = False) -> None:
        if active_mlflow_run() is not None:
            self.mlflow.report(snapshot, final=final)
        else:
            self.console.report(snapshot, final=final)
