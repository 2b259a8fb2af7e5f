"""The driver's loop: submit one measuring task per target, write each hardware id's rows as
shards as they arrive, retry a failed task on the next live node of its target, cancel one that
overruns its budget, and report each target's outcome."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.fleet.cluster import cancel_quietly, live_node_entries, one_line, pinned
from collectors.fleet.nodes import FINGERPRINT_TIMEOUT_S, FleetNode, FleetTarget, device_key, measured
from collectors.fleet.progress import FleetProgress
from collectors.fleet.results import TargetOutcome
from collectors.fleet.tasks import NodeJob, TaskHooks, measure_on_node
from perfmodel.measure.storage import MICROBENCH_PREFIX, ShardWriter, write_fingerprint
from perfmodel.schema import MICROBENCH_COLUMNS

OVERRUN_GRACE_S = 300.0
"""A task still running this long after its budget (s) is cancelled: imports, CUDA start-up and
the configuration in progress when the budget ran out fit well inside it."""
POLL_S = 0.5
"""How often the driver looks at deadlines while waiting for rows, in s."""


@dataclass
class _Task:
    """The driver's state of one target (mutable: filled in as events arrive)."""

    target: FleetTarget
    node: FleetNode
    bar: Any = None
    gen: Any = None
    attempts: int = 0
    submitted: float = 0.0
    deadline: float = 0.0
    first_submitted: float = 0.0
    ended: float = 0.0
    started: bool = False
    flush_every: int = 4
    outcome: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    rows: int = 0
    microbench: int = 0
    errors: list[str] = field(default_factory=list)
    stopped: str = ""


class FleetDriver:
    """Submits the targets' tasks, writes their rows as they arrive, retries and reports."""

    def __init__(
        self,
        out: Path,
        profile: str,
        budget_s: float | None,
        max_retries: int,
        hooks: TaskHooks,
        progress: bool,
    ) -> None:
        self.out, self.profile, self.budget_s = out, profile, budget_s
        self.max_retries, self.hooks = max_retries, hooks
        self.view = FleetProgress(progress)
        self.tasks: list[_Task] = []
        self.writers: dict[tuple[str, str], Any] = {}
        self.left_out: list[str] = []
        self._remote: Any = None

    # --- writing ---------------------------------------------------------------------------

    def _writer(self, kind: str, hardware_id: str) -> Any:
        key = (kind, hardware_id)
        if key not in self.writers:
            if kind == "microbench":
                self.writers[key] = ShardWriter(
                    self.out, prefix=MICROBENCH_PREFIX, hardware_id=hardware_id, columns=MICROBENCH_COLUMNS
                )
            else:
                self.writers[key] = ShardWriter(self.out, prefix=self.profile, hardware_id=hardware_id)
        return self.writers[key]

    def flush(self, hardware_id: str) -> None:
        for (_, hw), writer in self.writers.items():
            if hw == hardware_id:
                writer.flush()

    def flush_all(self) -> None:
        for writer in self.writers.values():
            writer.flush()

    # --- tasks -----------------------------------------------------------------------------

    def _submit(self, ray: Any, task: _Task) -> None:
        hw = task.node.hardware_id
        self.flush(hw)  # what arrived is in the shards before the skip sets are read
        rows, microbench = measured(self.out, hw)
        job = NodeJob(
            profile=self.profile,
            budget_s=self.budget_s,
            hardware_id=hw,
            skip_row_ids=frozenset(rows),
            skip_microbench=frozenset(microbench),
            hooks=self.hooks,
        )
        self._remote = self._remote or ray.remote(measure_on_node)
        task.gen = self._remote.options(**pinned(task.node)).remote(job)
        task.attempts += 1
        task.submitted = time.monotonic()
        task.first_submitted = task.first_submitted or task.submitted
        task.deadline = task.submitted + FINGERPRINT_TIMEOUT_S  # until it starts
        task.started = False
        self.view.attempt(task.bar, task.node.describe(), task.attempts)

    def run(self, ray: Any, targets: list[FleetTarget]) -> None:
        with self.view.running():
            for target in targets:
                task = _Task(target=target, node=target.nodes[0])
                task.bar = self.view.add(target.key)
                self.tasks.append(task)
                self._submit(ray, task)
            active = {t.gen: t for t in self.tasks}
            while active:
                ready, _ = ray.wait(list(active), num_returns=1, timeout=POLL_S)
                for gen in ready:
                    task = active.pop(gen)
                    if self._step(ray, task):
                        active[task.gen] = task
                now = time.monotonic()
                for gen, task in list(active.items()):
                    if now > task.deadline:
                        del active[gen]
                        self._overran(ray, task)

    def _step(self, ray: Any, task: _Task) -> bool:
        """Take one event of `task`; True while it has more to come (possibly as a retry)."""
        try:
            event = ray.get(next(task.gen))
        except StopIteration:
            return self._failed(ray, task, "the task ended without its result")
        except Exception as exc:  # noqa: BLE001 - the worker or node died, or the task raised
            return self._failed(ray, task, one_line(exc))
        kind = event["event"]
        if kind == "start":
            fp = event["fingerprint"]

            write_fingerprint(self.out, fp)
            task.started, task.flush_every = True, int(event["flush_every"])
            task.deadline = time.monotonic() + float(event["budget_s"]) + OVERRUN_GRACE_S
            task.outcome.update(configs_total=event["configs_total"], gpu=device_key(fp))
            self.view.start(task.bar, event["todo"])
        elif kind == "row":
            row = event["row"]
            writer = self._writer(event["kind"], task.node.hardware_id)
            writer.add(row)
            if event["kind"] == "slice":
                task.rows += 1
                task.counts[row["status"]] = task.counts.get(row["status"], 0) + 1
                self.view.advance(task.bar, f"{row['model_name']} {row['precision']}: {row['status']}")
                if len(writer.pending) >= task.flush_every:
                    writer.flush()
            else:
                task.microbench += 1
                self.view.describe(task.bar, f"micro-benchmark {row['bench']} {row['dtype']}")
        else:  # done
            self.flush(task.node.hardware_id)
            task.outcome.update(event["result"])
            self._end(task, task.outcome["stopped"])
            return False
        return True

    def _end(self, task: _Task, stopped: str) -> None:
        task.stopped, task.ended = stopped, time.monotonic()
        self.view.finish(task.bar, stopped)

    def _failed(self, ray: Any, task: _Task, reason: str) -> bool:
        self.flush(task.node.hardware_id)  # keep every row that arrived
        task.errors.append(f"attempt {task.attempts} on {task.node.label}: {reason}")
        if task.attempts > self.max_retries:
            self._end(task, "failed")
            self.view.log(f"warning: {task.target.key} failed on {task.node.label} ({reason}); giving up")
            return False
        task.node = self._next_node(ray, task)
        self.view.log(f"warning: {task.target.key}: {reason}; retrying on {task.node.label}")
        self._submit(ray, task)
        return True

    def _next_node(self, ray: Any, task: _Task) -> FleetNode:
        """The next live node of the target after the one that failed (itself if none other)."""
        alive = {e["NodeID"] for e in live_node_entries(ray)}
        nodes = task.target.nodes
        start = nodes.index(task.node)
        for i in range(1, len(nodes) + 1):
            candidate = nodes[(start + i) % len(nodes)]
            if candidate.node_id in alive:
                return candidate
        return task.node  # none alive: the retry fails fast and the target is reported

    def _overran(self, ray: Any, task: _Task) -> None:
        cancel_quietly(ray, task.gen)
        self.flush(task.node.hardware_id)
        what = "ran past its budget" if task.started else "did not start (node busy or gone)"
        task.errors.append(f"attempt {task.attempts} on {task.node.label}: {what}; cancelled")
        self._end(task, "overran" if task.started else "failed")
        self.view.log(f"warning: {task.target.key} on {task.node.label} {what}; cancelled")

    def cancel_all(self, ray: Any) -> None:
        for task in self.tasks:
            if not task.stopped:
                cancel_quietly(ray, task.gen)
                self._end(task, "cancelled")

    def outcomes(self) -> list[TargetOutcome]:
        out = []
        for task in self.tasks:
            o = task.outcome
            out.append(
                TargetOutcome(
                    target=task.target.key,
                    node=task.node.label,
                    hardware_id=task.node.hardware_id,
                    gpu=o.get("gpu") or (task.node.fingerprint.gpu if task.node.fingerprint else "?"),
                    stopped=task.stopped or "cancelled",
                    attempts=task.attempts,
                    configs_total=int(o.get("configs_total", 0)),
                    skipped_existing=int(o.get("skipped_existing", 0)),
                    rows_written=task.rows,
                    microbench_rows=task.microbench,
                    status_counts=dict(task.counts),
                    skipped_too_slow=list(o.get("skipped_too_slow", [])),
                    elapsed_s=round((task.ended or time.monotonic()) - task.first_submitted, 3)
                    if task.first_submitted
                    else 0.0,
                    errors=list(task.errors),
                )
            )
        return out
