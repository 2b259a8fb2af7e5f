"""One monitored run as the adapters use it: prior resolution, the monitor core, utilisation
sampling, reporting, and the run record written at the end. Adapters (Hugging Face, Ludwig,
StepTimer) only translate their framework's events into `begin` / `update` / `end`."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfmodel.decide.fit import largest_micro_batch
from perfmodel.errors import PerfModelError
from perfmodel.monitor.core import Clock, EtaSnapshot, Reporter, RunMonitor
from perfmodel.monitor.eta import StepTimePrior
from perfmodel.monitor.prior import PriorInfo, load_config_workload, resolve_prior
from perfmodel.monitor.record import RunRecord, peak_memory, this_host_fingerprint, write_record
from perfmodel.monitor.report import AutoReporter
from perfmodel.monitor.utilization import Sampler, SystemSampler


def batch_limit(config: Mapping[str, Any] | None) -> tuple[int | None, int | None]:
    """(micro-batch, largest micro-batch that fits) of a native config by perfmodel's memory model
    (`perfmodel.decide.fit.largest_micro_batch`, the one fit verdict); (None, None) when the config
    is unknown, cannot be resolved, or its accelerator's memory is not known (a CPU)."""
    if not config:
        return None, None
    try:
        w = load_config_workload(config)
        if not float(w.gpu.memory_gb or 0) or w.gpu.vendor == "cpu":
            return w.training.micro_batch_size, None
        return w.training.micro_batch_size, largest_micro_batch(w)
    except (PerfModelError, ValueError, TypeError, KeyError):
        return None, None


class MonitorSession:
    """Drives a `RunMonitor` for one run.

    `config` (a native/Ludwig config path or a native mapping), `prediction` (a PredictedRun) or
    `prior` give the starting prediction; `sampler=None` reads the host with psutil/NVML (pass
    False for none); `reporter=None` reports to the active MLflow run or stderr; `record_path`
    (a file or folder) receives the run record at `end`; `verbose` gives the default reporter's
    detail lines instead of one line of at most 100 characters (None: the PERFMODEL_VERBOSE
    environment variable). Once the prior's config is known,
    the largest micro-batch that fits by perfmodel's memory model is worked out for the batch hint."""

    def __init__(
        self,
        *,
        source: str,
        config: str | Path | Mapping[str, Any] | None = None,
        prediction: Any = None,
        prior: StepTimePrior | None = None,
        overrides: Sequence[str] = (),
        total_steps: int | None = None,
        confidence: float = 0.9,
        clock: Clock | None = None,
        sampler: Sampler | None | bool = None,
        sample_every_s: float = 1.0,
        reporter: Reporter | None = None,
        report_every_s: float = 10.0,
        record_path: str | Path | None = None,
        model_dir: str | Path | None = None,
        framework: str | None = None,
        verbose: bool | None = None,
    ) -> None:
        self.source = source
        self.confidence = confidence
        self.record_path = record_path
        self.total_steps = total_steps
        self.framework = framework
        self.info = PriorInfo(prior=None)
        self._resolved = False
        self._prior_args: dict[str, Any] = {
            "config": config,
            "prediction": prediction,
            "prior": prior,
            "overrides": overrides,
            "model_dir": model_dir,
        }
        if reporter is None:
            reporter = AutoReporter(verbose=verbose)
        self.monitor = RunMonitor(
            confidence=confidence,
            clock=clock or time.perf_counter,
            sampler=SystemSampler() if sampler is None or sampler is True else (sampler or None),
            sample_every_s=sample_every_s,
            reporter=reporter,
            report_every_s=report_every_s,
        )
        self.record: Path | None = None

    @property
    def has_prior_source(self) -> bool:
        return any(self._prior_args[k] is not None for k in ("config", "prediction", "prior"))

    def use_config(self, config: str | Path | Mapping[str, Any]) -> None:
        """Set the config to predict from (before `resolve`), e.g. one built from the framework's model."""
        self._prior_args["config"] = config
        self._resolved = False

    def resolve(self) -> PriorInfo:
        """Predict the prior now (once; `begin` does it when nobody did)."""
        if not self._resolved:
            self.info = resolve_prior(confidence=self.confidence, **self._prior_args)
            self._resolved = True
            self.monitor.micro_batch, self.monitor.largest_micro_batch = batch_limit(self.info.config)
        return self.info

    def begin(self, total_steps: int | None = None, start_step: int = 0) -> None:
        """Resolve the prior, then start timing at global step `start_step`."""
        self.resolve()
        self.monitor.prior = self.info.prior
        self.monitor.total_steps = total_steps or self.total_steps or self.info.total_steps
        self.monitor.start(step=start_step)

    def update(self, step: int | None = None) -> EtaSnapshot | None:
        if not self.monitor.started:
            self.begin()
        return self.monitor.update(step)

    def end(self, *, finished: bool = True) -> EtaSnapshot:
        """Final snapshot; writes the run record when a record path is set. A run that stopped
        before its known step count is recorded as not finished."""
        m = self.monitor
        if finished and m.total_steps is not None and m.step < m.total_steps:
            finished = False
            self.info.notes.append(f"stopped at step {m.step} of {m.total_steps}")
        snap = m.finish() if finished else m.snapshot()
        if self.record_path is not None:
            self.record = write_record(self.record_path, self.to_record(finished=finished))
        return snap

    def to_record(self, *, finished: bool) -> RunRecord:
        m = self.monitor
        memory_gb, memory_kind = peak_memory()
        return RunRecord(
            source=self.source,
            intervals=list(m.intervals),
            total_steps=m.total_steps,
            start_step=m.start_step,
            finished=finished,
            framework=self.framework or self.info.framework or "hf-eager",
            config=self.info.config,
            prediction=self.info.prediction_json(),
            hardware=this_host_fingerprint(),
            notes=list(self.info.notes),
            peak_memory_gb=memory_gb,
            peak_memory_kind=memory_kind,
        )
