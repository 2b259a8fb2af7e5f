"""The driver's view of a fleet run: one Rich progress bar per target on stderr, and its
warnings."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any


class FleetProgress:
    """One Rich progress bar per target on stderr (or silence)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None

    @contextlib.contextmanager
    def running(self) -> Iterator[FleetProgress]:
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
            TextColumn("{task.description}"),
            console=Console(stderr=True),
        ) as progress:
            self._progress = progress
            yield self
        self._progress = None

    def add(self, label: str) -> Any:
        if self._progress is None:
            return None
        return self._progress.add_task("waiting for its node", total=None, label=label)

    def attempt(self, bar: Any, node: str, attempt: int) -> None:
        again = f" (attempt {attempt})" if attempt > 1 else ""
        self.describe(bar, f"starting on {node}{again}")

    def start(self, bar: Any, todo: int) -> None:
        if self._progress is not None and bar is not None:
            done = next((t.completed for t in self._progress.tasks if t.id == bar), 0)
            self._progress.update(bar, total=done + todo, description="measuring")

    def advance(self, bar: Any, text: str) -> None:
        if self._progress is not None and bar is not None:
            self._progress.update(bar, advance=1, description=text)

    def describe(self, bar: Any, text: str) -> None:
        if self._progress is not None and bar is not None:
            self._progress.update(bar, description=text)

    def finish(self, bar: Any, stopped: str) -> None:
        self.describe(bar, stopped)
        if self._progress is not None and bar is not None:
            self._progress.stop_task(bar)

    def log(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            sys.stderr.write(text + "\n")  # warnings are said with --json too
