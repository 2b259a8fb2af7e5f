"""`collect_fleet`: run a profile on every target of a Ray cluster into this driver's folder
(the steps are in the package docstring, collectors.fleet)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from collectors.fleet.cluster import CONNECT_TIMEOUT_S, FleetError, connected
from collectors.fleet.nodes import select_targets, validate
from collectors.fleet.results import FleetResult
from collectors.fleet.runner import FleetDriver
from collectors.fleet.tasks import TaskHooks, hooks_or_default
from collectors.interrupts import signal_name, signals_as_interrupt
from collectors.lock import ensure_output_dir, hold_output_dir
from perfmodel import paths
from perfmodel.errors import ConfigError
from perfmodel.measure.storage import set_aside_damaged

DEFAULT_MAX_RETRIES = 1
"""Times a failed task is run again before it is reported."""


def collect_fleet(
    profile: str,
    *,
    address: str = "auto",
    per: str = "gpu-type",
    out_dir: str | Path | None = None,
    budget_s: float | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
    progress: bool = True,
    wait: bool = False,
    hooks: TaskHooks | None = None,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
) -> FleetResult:
    """Run `profile` on the Ray cluster at `address`, one task per target (see the
    collectors.fleet docstring), into `out_dir` (default perfmodel.paths.raw_dir()) held by this driver.
    `budget_s` applies to each task; connecting takes at most `connect_timeout_s`. Another
    collector on the folder: CollectorBusy (or wait)."""
    budget = validate(profile, per, budget_s)
    if max_retries < 0:
        raise ConfigError(f"--max-retries must be >= 0; got {max_retries}")
    out = ensure_output_dir(out_dir if out_dir is not None else paths.raw_dir())
    hooks = hooks_or_default(hooks)
    state: dict[str, Any] = {"stopped": "complete", "interrupted_by": None, "t0": None, "damaged": []}
    driver = FleetDriver(out, profile, budget, max_retries, hooks, progress)
    with signals_as_interrupt() as stop:
        try:
            with (
                hold_output_dir(
                    out, profile=f"{profile} (fleet)", wait=wait, on_wait=lambda t: sys.stderr.write(t + "\n")
                ),
                connected(address, timeout_s=connect_timeout_s) as ray,
            ):
                state["t0"] = time.monotonic()
                for damaged in set_aside_damaged(out):
                    state["damaged"].append(damaged.describe())
                    sys.stderr.write(f"warning: {damaged.describe()}\n")
                targets, left_out = select_targets(ray, profile, per, out, hooks)
                driver.left_out = left_out
                for line in left_out:
                    sys.stderr.write(f"warning: node left out: {line}\n")
                if not targets:
                    raise FleetError("no node of the cluster can run the profile: " + "; ".join(left_out))
                try:
                    driver.run(ray, targets)
                except KeyboardInterrupt as exc:
                    stop.finishing = True
                    state["stopped"], state["interrupted_by"] = "interrupted", signal_name(exc)
                    driver.cancel_all(ray)
                finally:
                    stop.finishing = True
                    driver.flush_all()
        except KeyboardInterrupt as exc:  # while waiting for the folder or connecting
            stop.finishing = True
            state["stopped"], state["interrupted_by"] = "interrupted", signal_name(exc)
    outcomes = driver.outcomes()
    stopped = state["stopped"]
    if stopped == "complete" and any(t.stopped in ("failed", "overran") for t in outcomes):
        stopped = "partial"
    return FleetResult(
        profile=profile,
        address=address,
        per=per,
        out_dir=str(out),
        stopped=stopped,
        interrupted_by=state["interrupted_by"],
        elapsed_s=round(time.monotonic() - state["t0"], 3) if state["t0"] is not None else 0.0,
        targets=outcomes,
        unreachable=driver.left_out,
        shards=[str(p) for w in driver.writers.values() for p in w.paths],
        damaged_shards=state["damaged"],
    )
