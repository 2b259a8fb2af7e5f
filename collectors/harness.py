"""The collection loop: lock the output folder, fingerprint, micro-benchmarks, then each
configuration of a profile.

One collector per output folder (collectors.lock): a second one refuses, naming the holder, or
waits its turn (`wait=True`). Before measuring, shards that cannot be read are set aside in
`damaged/` (perfmodel.measure.storage.set_aside_damaged), each reported in one line.
Resumable and idempotent: configurations whose row_id is already in a shard of this hardware id
are skipped. Rows are written as a new shard every `flush_every` configurations and on exit, so
Ctrl-C, SIGTERM or SIGHUP (collectors.interrupts) loses at most the configuration in progress. A
budget stops the loop cleanly: before each configuration, and after a configuration's warm-up
when its measured steps would pass the deadline (that configuration is then not recorded). The
budget counts from when the folder is held (time spent waiting for it is not measuring).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.interrupts import signal_name, signals_as_interrupt
from collectors.lock import ensure_output_dir, hold_output_dir
from collectors.microbench import run_microbench as run_mb
from collectors.profiles import Profile, build_profile
from collectors.progress import Reporter, load_avg, row_summary
from perfmodel import paths
from perfmodel.errors import ConfigError
from perfmodel.measure import slices
from perfmodel.measure.configs import make_row_id
from perfmodel.measure.device import make_device
from perfmodel.measure.fingerprint import Fingerprint, GpuQuery, collect_fingerprint
from perfmodel.measure.storage import (
    MICROBENCH_PREFIX,
    ShardWriter,
    measured_microbench_keys,
    measured_row_ids,
    set_aside_damaged,
    write_fingerprint,
)
from perfmodel.schema import MICROBENCH_COLUMNS

Clock = Callable[[], float]
RowHook = Callable[[str, dict[str, Any]], None]
"""Told ('slice' | 'microbench', row) as each row is measured (collectors.fleet streams them)."""
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
    interrupted_by: str | None = None
    """The stop signal when interrupted: 'SIGINT' (Ctrl-C), 'SIGTERM' or 'SIGHUP'."""
    elapsed_s: float = 0.0
    """Wall time of the collection in s, from when the output folder was held."""
    configs_total: int = 0
    """Configurations in the profile."""
    skipped_existing: int = 0
    """Configurations already measured in earlier runs (not re-run)."""
    rows_written: int = 0
    """Training-slice rows written by this run."""
    microbench_rows: int = 0
    """Micro-benchmark rows written by this run."""
    status_counts: dict[str, int] = field(default_factory=dict)
    """Training-slice rows by status (ok / oom / error)."""
    skipped_too_slow: list[str] = field(default_factory=list)
    """Configurations skipped because their projected time exceeded the per-config cap."""
    shards: list[str] = field(default_factory=list)
    """Shard files written by this run."""
    fingerprint_path: str = ""
    """The host fingerprint JSON."""
    damaged_shards: list[str] = field(default_factory=list)
    """Unreadable shards set aside before measuring, one line each (file, reason, new place)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def validate_budget_s(budget_s: float) -> float:
    """`budget_s` as a float when it is a positive, finite number of seconds; else ConfigError."""
    try:
        value = float(budget_s)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"--budget-s must be a positive, finite number of seconds; got {budget_s!r}")
    return value


def collect(
    profile: str,
    out_dir: str | Path | None = None,
    budget_s: float | None = None,
    device: str | None = None,
    *,
    progress: bool = True,
    wait: bool = False,
    gpu_query: GpuQuery | None = None,
) -> CollectResult:
    """Run the profile `profile` ('quick', 'gpu' or 'full') on `device` ('cpu', 'cuda', 'cuda:N';
    None = a GPU when there is one) and append its rows under `out_dir` (default
    perfmodel.paths.raw_dir()). `budget_s` overrides the profile's wall-time budget. Another
    collector on the same folder: CollectorBusy, or with `wait`, wait for it."""
    if budget_s is not None:
        budget_s = validate_budget_s(budget_s)
    out_dir = ensure_output_dir(
        out_dir if out_dir is not None else paths.raw_dir()
    )  # fail before the slow part
    fingerprint = collect_fingerprint(gpu_query)
    dev = make_device(device, fingerprint.kind)
    prof = build_profile(profile, dev.kind, dev.supports)
    return run_profile(
        prof,
        fingerprint=fingerprint,
        device=dev,
        out_dir=out_dir,
        budget_s=budget_s,
        progress=progress,
        wait=wait,
    )


@dataclass
class _Run:
    """What a run has done so far (filled in as it goes, read whatever way it ends)."""

    stopped: str = "complete"
    interrupted_by: str | None = None
    t_start: float | None = None
    skipped_existing: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    too_slow: list[str] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)
    fingerprint_path: str = ""


def run_profile(
    profile: Profile,
    *,
    fingerprint: Fingerprint,
    device: Any,
    out_dir: str | Path | None = None,
    budget_s: float | None = None,
    clock: Clock = time.perf_counter,
    prepare: Any = None,
    run_microbench: bool = True,
    progress: bool = False,
    wait: bool = False,
    skip_row_ids: Collection[str] = (),
    skip_microbench: Collection[tuple[str, str, str]] = (),
    on_row: RowHook | None = None,
) -> CollectResult:
    """Measure `profile` on `device` into `out_dir` (default perfmodel.paths.raw_dir()), holding
    the folder for the whole run (CollectorBusy when another collector holds it, unless `wait`).
    Ctrl-C, SIGTERM and SIGHUP stop it cleanly (`stopped='interrupted'`). `clock` and `prepare`
    are injectable so tests can fake time and training steps (prepare(config, device) ->
    perfmodel.measure.slices.PreparedSlice). `skip_row_ids` / `skip_microbench` are measured elsewhere
    (a fleet driver's folder, collectors.fleet) and skipped like those in `out_dir`; `on_row` is
    called with ('slice' | 'microbench', row) as each row is measured, before it is buffered."""
    budget = profile.budget_s if budget_s is None else validate_budget_s(budget_s)
    hw = fingerprint.hardware_id
    out = Path(out_dir) if out_dir is not None else paths.raw_dir()
    writer = ShardWriter(out, prefix=profile.name, hardware_id=hw)
    mb_writer = ShardWriter(out, prefix=MICROBENCH_PREFIX, hardware_id=hw, columns=MICROBENCH_COLUMNS)
    run = _Run()

    def note(text: str) -> None:
        if progress:
            sys.stderr.write(text + "\n")

    def waiting(text: str) -> None:  # always said: a silent wait looks like a hang
        sys.stderr.write(text + "\n")

    with signals_as_interrupt() as stop:
        try:
            with hold_output_dir(out, profile=profile.name, wait=wait, on_wait=waiting):
                try:
                    _measure(
                        profile,
                        run,
                        writer,
                        mb_writer,
                        fingerprint=fingerprint,
                        device=device,
                        out=out,
                        budget=budget,
                        clock=clock,
                        prepare=prepare,
                        run_microbench=run_microbench,
                        progress=progress,
                        skip_row_ids=skip_row_ids,
                        skip_microbench=skip_microbench,
                        on_row=on_row,
                    )
                except KeyboardInterrupt as exc:
                    stop.finishing = True
                    run.stopped, run.interrupted_by = "interrupted", signal_name(exc)
                    note(f"interrupted ({run.interrupted_by}): writing what was measured")
                finally:
                    stop.finishing = True
                    writer.flush()
                    mb_writer.flush()
        except KeyboardInterrupt as exc:  # while waiting for the folder: nothing was measured
            stop.finishing = True
            run.stopped, run.interrupted_by = "interrupted", signal_name(exc)
    if run.stopped == "budget":
        note(f"budget of {budget:.0f} s spent: stopped cleanly, kept what was measured")
    return CollectResult(
        profile=profile.name,
        hardware_id=hw,
        device=device.kind,
        out_dir=str(out),
        stopped=run.stopped,
        interrupted_by=run.interrupted_by,
        elapsed_s=round(clock() - run.t_start, 3) if run.t_start is not None else 0.0,
        configs_total=len(profile.configs),
        skipped_existing=run.skipped_existing,
        rows_written=writer.rows_written,
        microbench_rows=mb_writer.rows_written,
        status_counts=dict(run.counts),
        skipped_too_slow=run.too_slow,
        shards=[str(p) for p in [*mb_writer.paths, *writer.paths]],
        fingerprint_path=run.fingerprint_path,
        damaged_shards=run.damaged,
    )


def _measure(
    profile: Profile,
    run: _Run,
    writer: ShardWriter,
    mb_writer: ShardWriter,
    *,
    fingerprint: Fingerprint,
    device: Any,
    out: Path,
    budget: float,
    clock: Clock,
    prepare: Any,
    run_microbench: bool,
    progress: bool,
    skip_row_ids: Collection[str] = (),
    skip_microbench: Collection[tuple[str, str, str]] = (),
    on_row: RowHook | None = None,
) -> None:
    """The body of run_profile, with the output folder held; records into `run` as it goes."""
    prepare = prepare or slices.prepare_slice
    hw = fingerprint.hardware_id
    run.t_start = t_start = clock()
    deadline = t_start + budget
    for damaged in set_aside_damaged(out):
        run.damaged.append(damaged.describe())
        sys.stderr.write(f"warning: {damaged.describe()}\n")  # always said, --json or not
    run.fingerprint_path = str(write_fingerprint(out, fingerprint))
    existing = measured_row_ids(out, hw) | set(skip_row_ids)
    todo = [c for c in profile.configs if make_row_id(hw, c, device.kind) not in existing]
    run.skipped_existing = len(profile.configs) - len(todo)
    reporter = Reporter(progress, len(todo), profile.name)
    load = load_avg()
    if device.kind == "cpu" and load is not None and load > fingerprint.cpu_cores:
        reporter.log(
            f"warning: the host is busy (load average {load:.1f} on {fingerprint.cpu_cores} cores); "
            "CPU timings will be slow and noisy (each row's notes record the load)"
        )
    if run.skipped_existing:
        reporter.log(f"resuming: {run.skipped_existing} configuration(s) already measured on {hw}")
    with reporter.running():
        if run_microbench and profile.microbench is not None:
            reporter.describe("micro-benchmarks")
            skip = measured_microbench_keys(out, hw) | set(skip_microbench)
            mb_deadline = t_start + MICROBENCH_BUDGET_FRACTION * budget
            for mb_row in run_mb(
                profile.microbench,
                device=device,
                fingerprint=fingerprint,
                skip=skip,
                clock=clock,
                deadline=mb_deadline,
            ):
                mb_writer.add(mb_row)
                if on_row is not None:
                    on_row("microbench", mb_row)
                value = mb_row["achieved_tflops"] or mb_row["achieved_gb_per_s"]
                unit = "TFLOP/s" if mb_row["achieved_tflops"] else "GB/s"
                reporter.log(
                    f"{mb_row['bench']} {mb_row['dtype']} {mb_row['shape']}: {mb_row['status']}"
                    + (f" {value:.2f} {unit}" if value else "")
                )
            mb_writer.flush()
        t_slices, done = clock(), 0
        for config in todo:
            if clock() >= deadline:
                run.stopped = "budget"
                break
            reporter.describe(config.describe())
            try:
                measurement, facts = slices.run_slice(
                    config,
                    device=device,
                    prepare=prepare,
                    clock=clock,
                    deadline=deadline,
                    max_config_s=profile.max_config_s,
                )
            except slices.BudgetExhausted:
                run.stopped = "budget"
                break
            except slices.TooSlow as exc:
                run.too_slow.append(f"{config.describe()}: {exc}")
                reporter.log(f"skipped {config.describe()}: {exc}")
                reporter.advance()
                continue
            row = slices.slice_row(
                config,
                measurement,
                facts,
                fingerprint=fingerprint,
                device_kind=device.kind,
                peak_memory_method=device.peak_memory_method,
            )
            writer.add(row)
            if on_row is not None:
                on_row("slice", row)
            run.counts[row["status"]] += 1
            reporter.log(f"{config.describe()}: {row_summary(row)}")
            reporter.advance()
            done += 1
            per_config = (clock() - t_slices) / done
            reporter.eta(
                min(per_config * (len(todo) - done - len(run.too_slow)), max(deadline - clock(), 0.0))
            )
            if len(writer.pending) >= profile.flush_every:
                writer.flush()
