"""What a collection tells the person running it: a Rich progress bar with an ETA on stderr,
one line per measured configuration, and the host's load (CPU timings on a busy host are noisy)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


class Reporter:
    """Rich progress bar with ETA on stderr (or silence)."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        self.enabled = enabled
        self.total, self.label = total, label
        self._progress: Any = None
        self._task: Any = None

    @contextlib.contextmanager
    def running(self) -> Iterator[Reporter]:
        if not self.enabled:
            yield self
            return
        # rich: only output needs it (the CLI's cold start)
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("[bold]{task.fields[label]}[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA {task.fields[eta]}"),
            TextColumn("{task.description}"),
            console=Console(stderr=True),
            transient=False,
        ) as progress:
            self._progress = progress
            self._task = progress.add_task("", total=self.total, label=self.label, eta="-")
            yield self

    def eta(self, seconds: float | None) -> None:
        """Estimated time left (mean time per finished configuration x remaining, capped by the
        budget left), shown beside the bar."""
        if self._progress is not None:
            text = "-" if seconds is None else f"{int(seconds) // 60}:{int(seconds) % 60:02d}"
            self._progress.update(self._task, eta=text)

    def describe(self, text: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=text)

    def advance(self) -> None:
        if self._progress is not None:
            self._progress.advance(self._task)

    def log(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        elif self.enabled:
            sys.stderr.write(text + "\n")


def load_avg() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def row_summary(row: dict[str, Any]) -> str:
    if row["status"] != "ok":
        return f"{row['status']}: {row.get('notes') or ''}"[:160]
    parts = [f"{row['step_time_s'] * 1e3:.1f} ms/step"]
    if row.get("achieved_tflops_per_gpu"):
        parts.append(f"{row['achieved_tflops_per_gpu']:.2f} TFLOP/s")
    if row.get("peak_memory_gb") is not None:
        parts.append(f"{row['peak_memory_gb']:.2f} GB")
    return ", ".join(parts)
