"""`StepTimer`: the live ETA for a hand-written training loop.

    from perfmodel.monitor import StepTimer

    with StepTimer(total_steps=len(loader) * epochs, config="run.yaml", record_path="out/") as timer:
        for epoch in range(epochs):
            for batch in loader:
                train_step(batch)
                timer.step()          # one optimizer step done

On CUDA, pass `synchronize=torch.cuda.synchronize` for per-step times that are not blurred by
asynchronous kernels (the total is right either way). Leaving the `with` block by an exception
ends the record as not finished.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfmodel.monitor.core import EtaSnapshot
from perfmodel.monitor.session import MonitorSession


class StepTimer:
    """Times a plain loop; every keyword of `MonitorSession` is accepted (config, prediction,
    prior, confidence, clock, sampler, reporter, report_every_s, record_path, ...)."""

    def __init__(
        self,
        total_steps: int | None = None,
        *,
        start_step: int = 0,
        synchronize: Callable[[], Any] | None = None,
        record_path: str | Path | None = None,
        **session: Any,
    ) -> None:
        self.session = MonitorSession(
            source="step-timer", total_steps=total_steps, record_path=record_path, **session
        )
        self.start_step = start_step
        self.synchronize = synchronize
        self.last: EtaSnapshot | None = None

    @property
    def monitor(self) -> Any:
        return self.session.monitor

    def start(self) -> StepTimer:
        """Start timing now (the `with` block does it on entry)."""
        if not self.session.monitor.started:
            self.session.begin(start_step=self.start_step)
        return self

    def step(self, step: int | None = None) -> EtaSnapshot | None:
        """One optimizer step is done (or global step `step` is reached). Returns a snapshot
        when a report was due. Without `start()` the first call only starts the clock (the time
        of the step before it is unknown)."""
        if self.synchronize is not None:
            self.synchronize()
        if not self.session.monitor.started:
            self.session.begin(start_step=self.start_step + 1 if step is None else step)
            return None
        snap = self.session.update(step)
        if snap is not None:
            self.last = snap
        return snap

    def snapshot(self) -> EtaSnapshot:
        self.start()
        return self.session.monitor.snapshot()

    def finish(self, *, finished: bool = True) -> EtaSnapshot:
        """The loop has ended: final report and the run record."""
        self.start()
        self.last = self.session.end(finished=finished)
        return self.last

    def __enter__(self) -> StepTimer:
        return self.start()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.finish(finished=exc_type is None)
