"""The bodies of the Ray tasks that run on a node: its fingerprint, and the measuring task that
runs the profile there and streams each row back to the driver as it is measured."""

from __future__ import annotations

import queue
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collectors.fleet.cluster import FleetError
from collectors.harness import run_profile
from collectors.profiles import build_profile
from perfmodel.measure.configs import make_row_id
from perfmodel.measure.device import make_device
from perfmodel.measure.fingerprint import Fingerprint, collect_fingerprint


@dataclass(frozen=True, kw_only=True)
class TaskHooks:
    """What a node's tasks call instead of the real thing (tests: a fake profile and fake
    fingerprints; shipped to the nodes with the task). None: the real one."""

    fingerprint: Callable[[], Fingerprint] | None = None
    """Fingerprints the node (default perfmodel.measure.fingerprint.collect_fingerprint)."""
    build_profile: Callable[..., Any] | None = None
    """(name, device kind, supports) -> Profile (default collectors.profiles.build_profile)."""
    prepare: Callable[..., Any] | None = None
    """(config, device) -> PreparedSlice (default perfmodel.measure.slices.prepare_slice)."""


DEFAULT_HOOKS = TaskHooks()
"""The hooks `collect_fleet` and `plan_fleet` ship when given none (read here when they run, so a
test driver may replace `collectors.fleet.tasks.DEFAULT_HOOKS`)."""


def hooks_or_default(hooks: TaskHooks | None) -> TaskHooks:
    """`hooks`, or this module's DEFAULT_HOOKS as it is now."""
    return hooks or DEFAULT_HOOKS


def fingerprint_task(hooks: TaskHooks) -> Fingerprint:
    """The body of a node's fingerprint task."""
    return (hooks.fingerprint or collect_fingerprint)()


@dataclass(frozen=True, kw_only=True)
class NodeJob:
    """What the driver sends a node's task."""

    profile: str
    """Profile name."""
    budget_s: float | None
    """Wall-time budget of the task in s (None: the profile's)."""
    hardware_id: str
    """The hardware id the skip sets belong to (the node's fingerprint task found it)."""
    skip_row_ids: frozenset[str] = frozenset()
    """Training-slice rows this hardware id already has in the driver's folder."""
    skip_microbench: frozenset[tuple[str, str, str]] = frozenset()
    """(bench, dtype, shape) this hardware id already has there."""
    hooks: TaskHooks = DEFAULT_HOOKS
    """Stand-ins for the real fingerprint, profile and training steps (tests)."""


def measure_on_node(job: NodeJob) -> Iterator[dict[str, Any]]:
    """The body of a node's task: fingerprint, build the profile for the device found, run the
    harness (collectors.harness.run_profile) into a scratch folder, and yield events as it goes:
    {'event': 'start', ...}, one {'event': 'row', 'kind': 'slice' | 'microbench', 'row'} per
    measured row, and last {'event': 'done', 'result'} (a CollectResult as a dict)."""
    hooks = job.hooks
    fingerprint = fingerprint_task(hooks)
    if fingerprint.hardware_id != job.hardware_id:
        raise FleetError(
            f"this node's hardware id is now {fingerprint.hardware_id}, not {job.hardware_id} as "
            "fingerprinted before the run: run the collection again"
        )
    device = make_device(None, fingerprint.kind)
    profile = (hooks.build_profile or build_profile)(job.profile, device.kind, device.supports)
    todo = sum(
        make_row_id(fingerprint.hardware_id, c, device.kind) not in job.skip_row_ids for c in profile.configs
    )
    yield {
        "event": "start",
        "fingerprint": fingerprint,
        "configs_total": len(profile.configs),
        "todo": todo,
        "budget_s": job.budget_s if job.budget_s is not None else profile.budget_s,
        "flush_every": profile.flush_every,
    }
    events: queue.Queue[tuple[str, Any]] = queue.Queue()
    scratch = Path(tempfile.mkdtemp(prefix="perfmodel-fleet-"))

    def work() -> None:
        try:
            result = run_profile(
                profile,
                fingerprint=fingerprint,
                device=device,
                out_dir=scratch,
                budget_s=job.budget_s,
                prepare=hooks.prepare,
                skip_row_ids=job.skip_row_ids,
                skip_microbench=job.skip_microbench,
                on_row=lambda kind, row: events.put(("row", (kind, row))),
            )
            events.put(("done", result))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the task's thread below
            events.put(("error", exc))

    worker = threading.Thread(target=work, name="perfmodel-fleet-measure", daemon=True)
    worker.start()
    try:
        while True:
            what, payload = events.get()
            if what == "row":
                yield {"event": "row", "kind": payload[0], "row": payload[1]}
            elif what == "error":
                raise payload
            else:
                result = payload.to_dict()
                for local in ("out_dir", "shards", "fingerprint_path"):  # the scratch folder's
                    result.pop(local, None)
                yield {"event": "done", "result": result}
                return
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
