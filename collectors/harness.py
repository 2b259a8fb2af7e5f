"""The collection loop: fingerprint, micro-benchmarks, then each configuration of a profile.

Resumable and idempotent: configurations whose row_id is already in a shard of this hardware id
are skipped. Rows are written as a new shard every `flush_every` configurations and on exit, so a
Ctrl-C (caught here) loses at most the configuration in progress. A budget stops the loop
cleanly: before each configuration, and after a configuration's warm-up when its measured steps
would pass the deadline (that configuration is then not recorded).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.configs import make_row_id
from collectors.fingerprint import Fingerprint, GpuQuery, collect_fingerprint
from collectors.profiles import Profile, build_profile
from collectors.storage import (
    MICROBENCH_PREFIX,
    ShardWriter,
    measured_microbench_keys,
    measured_row_ids,
    write_fingerprint,
)

Clock = Callable[[], float]
MICROBENCH_BUDGET_FRACTION = 0.2
"""Micro-benchmarks stop after this fraction of the budget; the rest is for training slices."""


@dataclass(frozen=True, kw_only=True)
class CollectResult:
    """What a collection did."""

    profile: str
    """Profile name."""
    hardware_id: str
    """Fingerprint of the host."""
    device: str
    """'cpu' or 'cuda'."""
    out_dir: str
    """Where the shards are."""
    stopped: str
    """'complete', 'budget' or 'interrupted'."""
    elapsed_s: float
    """Wall time of the collection in s."""
    configs_total: int
    """Configurations in the profile."""
    skipped_existing: int
    """Configurations already measured in earlier runs (not re-run)."""
    rows_written: int
    """Training-slice rows written by this run."""
    microbench_rows: int
    """Micro-benchmark rows written by this run."""
    status_counts: dict[str, int] = field(default_factory=dict)
    """Training-slice rows by status (ok / oom / error)."""
    skipped_too_slow: list[str] = field(default_factory=list)
    """Configurations skipped because their projected time exceeded the per-config cap."""
    shards: list[str] = field(default_factory=list)
    """Shard files written by this run."""
    fingerprint_path: str = ""
    """The host fingerprint JSON."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def collect(
    profile: str,
    out_dir: str | Path = "datasets/raw",
    budget_s: float | None = None,
    device: str | None = None,
    *,
    progress: bool = True,
    gpu_query: GpuQuery | None = None,
) -> CollectResult:
    """Run the profile `profile` ('quick', 'gpu' or 'full') on `device` ('cpu', 'cuda', 'cuda:N';
    None = a GPU when there is one) and append its rows under `out_dir`. `budget_s` overrides the
    profile's wall-time budget."""
    from collectors.device import make_device

    fingerprint = collect_fingerprint(gpu_query)
    dev = make_device(device, fingerprint.kind)
    prof = build_profile(profile, dev.kind, dev.supports)
    return run_profile(prof, fingerprint=fingerprint, device=dev, out_dir=out_dir, budget_s=budget_s, progress=progress)


class _Reporter:
    """Rich progress bar with ETA on stderr (or silence)."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        self.enabled = enabled
        self.total, self.label = total, label
        self._progress: Any = None
        self._task: Any = None

    @contextlib.contextmanager
    def running(self) -> Iterator[_Reporter]:
        if not self.enabled:
            yield self
            return
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


def _load_avg() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _summary(row: dict[str, Any]) -> str:
    if row["status"] != "ok":
        return f"{row['status']}: {row.get('notes') or ''}"[:160]
    parts = [f"{row['step_time_s'] * 1e3:.1f} ms/step"]
    if row.get("achieved_tflops_per_gpu"):
        parts.append(f"{row['achieved_tflops_per_gpu']:.2f} TFLOP/s")
    if row.get("peak_memory_gb") is not None:
        parts.append(f"{row['peak_memory_gb']:.2f} GB")
    return ", ".join(parts)


def run_profile(
    profile: Profile,
    *,
    fingerprint: Fingerprint,
    device: Any,
    out_dir: str | Path = "datasets/raw",
    budget_s: float | None = None,
    clock: Clock = time.perf_counter,
    prepare: Any = None,
    run_microbench: bool = True,
    progress: bool = False,
) -> CollectResult:
    """Measure `profile` on `device`. `clock` and `prepare` are injectable so tests can fake
    time and training steps (prepare(config, device) -> collectors.slices.PreparedSlice)."""
    from collectors import slices
    from perfmodel.schema import MICROBENCH_COLUMNS

    prepare = prepare or slices.prepare_slice
    budget = profile.budget_s if budget_s is None else float(budget_s)
    t_start = clock()
    deadline = t_start + budget
    hw = fingerprint.hardware_id
    out = Path(out_dir)
    fp_path = write_fingerprint(out, fingerprint)

    existing = measured_row_ids(out, hw)
    todo = [c for c in profile.configs if make_row_id(hw, c, device.kind) not in existing]
    writer = ShardWriter(out, prefix=profile.name, hardware_id=hw)
    mb_writer = ShardWriter(out, prefix=MICROBENCH_PREFIX, hardware_id=hw, columns=MICROBENCH_COLUMNS)
    counts: Counter[str] = Counter()
    too_slow: list[str] = []
    stopped = "complete"
    reporter = _Reporter(progress, len(todo), profile.name)
    load = _load_avg()
    if device.kind == "cpu" and load is not None and load > fingerprint.cpu_cores:
        reporter.log(f"warning: the host is busy (load average {load:.1f} on {fingerprint.cpu_cores} cores); "
                     "CPU timings will be slow and noisy (each row's notes record the load)")
    if len(todo) < len(profile.configs):
        reporter.log(f"resuming: {len(profile.configs) - len(todo)} configuration(s) already measured on {hw}")
    with reporter.running():
        try:
            if run_microbench and profile.microbench is not None:
                from collectors.microbench import run_microbench as run_mb

                reporter.describe("micro-benchmarks")
                skip = measured_microbench_keys(out, hw)
                mb_deadline = t_start + MICROBENCH_BUDGET_FRACTION * budget
                for mb_row in run_mb(profile.microbench, device=device, fingerprint=fingerprint, skip=skip, clock=clock, deadline=mb_deadline):
                    mb_writer.add(mb_row)
                    value = mb_row["achieved_tflops"] or mb_row["achieved_gb_per_s"]
                    unit = "TFLOP/s" if mb_row["achieved_tflops"] else "GB/s"
                    reporter.log(f"{mb_row['bench']} {mb_row['dtype']} {mb_row['shape']}: {mb_row['status']}"
                                 + (f" {value:.2f} {unit}" if value else ""))
                mb_writer.flush()
            t_slices, done = clock(), 0
            for config in todo:
                if clock() >= deadline:
                    stopped = "budget"
                    break
                reporter.describe(config.describe())
                try:
                    measurement, facts = slices.run_slice(
                        config, device=device, prepare=prepare, clock=clock, deadline=deadline, max_config_s=profile.max_config_s
                    )
                except slices.BudgetExhausted:
                    stopped = "budget"
                    break
                except slices.TooSlow as exc:
                    too_slow.append(f"{config.describe()}: {exc}")
                    reporter.log(f"skipped {config.describe()}: {exc}")
                    reporter.advance()
                    continue
                row = slices.slice_row(
                    config, measurement, facts, fingerprint=fingerprint, device_kind=device.kind,
                    peak_memory_method=device.peak_memory_method,
                )
                writer.add(row)
                counts[row["status"]] += 1
                reporter.log(f"{config.describe()}: {_summary(row)}")
                reporter.advance()
                done += 1
                per_config = (clock() - t_slices) / done
                reporter.eta(min(per_config * (len(todo) - done - len(too_slow)), max(deadline - clock(), 0.0)))
                if len(writer.pending) >= profile.flush_every:
                    writer.flush()
        except KeyboardInterrupt:
            stopped = "interrupted"
            reporter.log("interrupted: writing what was measured")
        finally:
            writer.flush()
            mb_writer.flush()
    if stopped == "budget":
        reporter.log(f"budget of {budget:.0f} s spent: stopped cleanly, kept what was measured")
    return CollectResult(
        profile=profile.name,
        hardware_id=hw,
        device=device.kind,
        out_dir=str(out),
        stopped=stopped,
        elapsed_s=round(clock() - t_start, 3),
        configs_total=len(profile.configs),
        skipped_existing=len(profile.configs) - len(todo),
        rows_written=writer.rows_written,
        microbench_rows=mb_writer.rows_written,
        status_counts=dict(counts),
        skipped_too_slow=too_slow,
        shards=[str(p) for p in [*mb_writer.paths, *writer.paths]],
        fingerprint_path=str(fp_path),
    )
