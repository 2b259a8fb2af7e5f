"""The live ETA inside a trainer's own progress bar: a postfix on the Hugging Face Trainer's tqdm
bar ("12.3 ms/step, perfmodel ETA 8.2 s (7.8 s-8.6 s)"), with tqdm's own remaining-time estimate
taken out of that bar so the user sees one ETA, not two. Hints (and the detail lines under
`verbose=True`) go through `tqdm.write`, above the bar. Without a bar (disable_tqdm, a notebook,
another process), the one-line report of `perfmodel.monitor.report` is written instead, unless
an MLflow run is active: that receives the metrics either way.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from perfmodel.monitor.core import EtaSnapshot
from perfmodel.monitor.report import (
    ConsoleReporter,
    MlflowReporter,
    active_mlflow_run,
    format_line,
    format_postfix,
    resolve_verbose,
    tqdm_writer,
)

BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"
"""tqdm's default format without its own remaining-time estimate and rate (the postfix has ours)."""


def find_bar(total: int | None) -> Any:
    """The live tqdm bar counting to `total` steps (the newest such), or None."""
    tqdm_module = sys.modules.get("tqdm")
    if tqdm_module is None or total is None:
        return None
    try:
        bars = [
            b for b in list(getattr(tqdm_module.tqdm, "_instances", ())) if getattr(b, "total", None) == total
        ]
    except (TypeError, RuntimeError):  # the weak set changed while read
        return None
    bars = [b for b in bars if not getattr(b, "disable", False)]
    return max(bars, key=lambda b: getattr(b, "start_t", 0.0)) if bars else None


class BarReporter:
    """Reports into the progress bar of `total` steps when there is one (see the module doc)."""

    def __init__(self, stream: TextIO | None = None, *, verbose: bool | None = None) -> None:
        self.verbose = resolve_verbose(verbose)
        self.console = ConsoleReporter(stream, verbose=verbose, write=tqdm_writer(stream))
        self.mlflow = MlflowReporter()
        self.bar: Any = None
        self._styled = False

    def attach(self, total: int | None) -> Any:
        """Find the bar (again) for a run of `total` steps."""
        bar = find_bar(total)
        if bar is not None and bar is not self.bar:
            self.bar, self._styled = bar, False
        return self.bar

    def report(self, snapshot: EtaSnapshot, *, final: bool = False) -> None:
        tracked = active_mlflow_run() is not None
        if tracked:
            self.mlflow.report(snapshot, final=final)
        bar = self.bar if self.bar is not None else self.attach(snapshot.total_steps)
        if bar is None or getattr(bar, "disable", False):
            if not tracked:  # as AutoReporter: the MLflow run, else the line
                self.console.report(snapshot, final=final)
            return
        try:
            if not self._styled:
                bar.bar_format = BAR_FORMAT
                self._styled = True
            bar.set_postfix_str(format_postfix(snapshot), refresh=final)
        except Exception:  # noqa: BLE001 - a closed or foreign bar: fall back to lines
            self.bar = None
            self.console.report(snapshot, final=final)
            return
        if self.verbose:
            self.console.write(format_line(snapshot))
        self.console.report_hints(snapshot)
