"""Where ETA snapshots go: the active MLflow run when there is one, else one line of at most 100
characters (`format_short`; the detail `format_line` with verbose=True) written through
`tqdm.write`, so it lands above a trainer's progress bar instead of inside it.

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

import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from perfmodel.errors import ConfigError
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


SHORT_WIDTH = 100
"""Characters of the default one-line report (the detail is `format_line`, under verbose=True)."""
VERBOSE_ENV = "PERFMODEL_VERBOSE"
"""Environment variable that turns on the detail lines of every live reporter (callbacks, StepTimer,
`perfmodel monitor --follow`) where the code does not say: 1/true/yes/on, or 0/false/no/off."""
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def resolve_verbose(verbose: bool | None = None) -> bool:
    """`verbose` when given, else the `PERFMODEL_VERBOSE` environment variable (default off)."""
    if verbose is not None:
        return bool(verbose)
    raw = os.environ.get(VERBOSE_ENV, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ConfigError(
        f"{VERBOSE_ENV}={os.environ[VERBOSE_ENV]!r}: give 1 (detail lines) or 0 (one line of at most "
        f"{SHORT_WIDTH} characters), or unset it"
    )


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def format_eta(snap: EtaSnapshot) -> str:
    """The ETA part alone: 'ETA 8.2 s (7.8 s-8.6 s)', 'finished in 9.3 s', or '' when unknown."""
    if snap.finished:
        return f"finished in {fmt_seconds(snap.elapsed_s)}"
    rem = snap.remaining_s
    if rem is None:
        return ""
    return f"ETA {fmt_seconds(rem.estimate)} ({fmt_seconds(rem.low)}-{fmt_seconds(rem.high)})"


def format_short(snap: EtaSnapshot, width: int = SHORT_WIDTH) -> str:
    """One line of at most `width` characters: step, mean step time, ETA with its interval, and the
    busiest resource (`format_line` is the detail)."""
    total = f"/{snap.total_steps}" if snap.total_steps is not None else ""
    parts = [f"step {snap.steps_done}{total}"]
    obs = snap.observed
    if obs is not None and obs.intervals >= 2:
        parts.append(f"{_step(obs.mean_s)}/step ±{obs.cv:.0%}")
    elif snap.predicted_step_time_s is not None:
        parts.append(f"~{_step(snap.predicted_step_time_s.estimate)}/step predicted")
    eta = format_eta(snap)
    if eta:
        parts.append(eta)
    util = snap.utilization
    if util is not None and util.gpu_mean_pct is not None:
        parts.append(f"GPU {util.gpu_mean_pct:.0f}%")
    elif util is not None and util.cpu_mean_pct is not None:
        parts.append(f"CPU {util.cpu_mean_pct:.0f}%")
    if snap.finished and snap.warmup_steps:
        parts.append(f"warm-up {snap.warmup_steps} step{'s' if snap.warmup_steps != 1 else ''}")
    return _fit("[perfmodel] " + " | ".join(parts), width)


def format_postfix(snap: EtaSnapshot, width: int = 60) -> str:
    """What goes after a progress bar that already shows the step count: step time and ETA."""
    obs = snap.observed
    parts = [f"{_step(obs.mean_s)}/step"] if obs is not None and obs.intervals >= 2 else []
    eta = format_eta(snap)
    if eta:
        parts.append(f"perfmodel {eta}")
    return _fit(", ".join(parts), width)


def hint_kind(hint: str) -> str:
    """A hint's kind (its text before the numbers): each kind is shown once."""
    return re.split(r"[(:]", hint, maxsplit=1)[0]


Write = Callable[[str], None]


def stream_writer(stream: TextIO | None = None) -> Write:
    """Writes a line to `stream` (default: stderr, looked up at each write)."""

    def write(line: str) -> None:
        out = stream or sys.stderr
        out.write(line + "\n")
        out.flush()

    return write


def tqdm_writer(stream: TextIO | None = None) -> Write:
    """Writes a line above any live tqdm bar (`tqdm.write`: the bar is cleared, the line printed, the
    bar redrawn), so a report never splices into a trainer's bar; a plain write without tqdm."""
    try:
        # tqdm: the trainers' progress bars (transformers and Ludwig depend on it)
        from tqdm import tqdm
    except ImportError:
        return stream_writer(stream)

    def write(line: str) -> None:
        tqdm.write(line, file=stream or sys.stderr)

    return write


class ConsoleReporter:
    """A line per report (and each kind of hint once) through `write` (default: `tqdm_writer`,
    to `stream`, default stderr): the one-line `format_short`, or the detail `format_line` when
    `verbose`."""

    def __init__(
        self, stream: TextIO | None = None, *, verbose: bool | None = None, write: Write | None = None
    ) -> None:
        self.stream = stream
        self.verbose = resolve_verbose(verbose)
        self.write = write or tqdm_writer(stream)
        self._hints: set[str] = set()

    def report(self, snapshot: EtaSnapshot, *, final: bool = False) -> None:
        self.write(format_line(snapshot) if self.verbose else format_short(snapshot))
        self.report_hints(snapshot)

    def report_hints(self, snapshot: EtaSnapshot) -> None:
        for hint in snapshot.hints:
            kind = hint_kind(hint)  # each kind of hint once (its numbers change)
            if kind not in self._hints:
                self._hints.add(kind)
                self.write(_fit(f"[perfmodel] hint: {hint}", 10_000 if self.verbose else 4 * SHORT_WIDTH))


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

    def __init__(self, stream: TextIO | None = None, *, verbose: bool | None = None) -> None:
        self.console = ConsoleReporter(stream, verbose=verbose)
        self.mlflow = MlflowReporter()

    def report(self, snapshot: EtaSnapshot, *, final: bool = False) -> None:
        if active_mlflow_run() is not None:
            self.mlflow.report(snapshot, final=final)
        else:
            self.console.report(snapshot, final=final)
