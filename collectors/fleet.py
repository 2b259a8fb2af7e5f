"""Collect on a fleet: the profile runs as Ray tasks pinned to the nodes of a cluster, once per
distinct accelerator type (or per distinct node), and this driver writes their rows as ordinary
shards in its output folder.

    perfmodel collect --ray auto --profile gpu                 # one task per GPU type
    perfmodel collect --ray 10.0.0.5:6379 --profile quick --per node --plan

1. Connect (`ray.init(address=...)`) and list the live nodes (`ray.nodes()`: CPUs, GPUs, Ray's
   `accelerator_type:*` resource).
2. Fingerprint each node (collectors.fingerprint) with a tiny task holding the same resources as
   its measuring task will (the node's CPUs, plus one GPU on a GPU node), so both see the same
   devices and agree on the hardware id.
3. Group into targets: `--per gpu-type`, one per accelerator type (the catalog key; a CPU host's
   type is its hardware id); `--per node`, one per distinct hardware id (identical nodes share an
   id and their rows would share row ids, so one of them measures). The node whose hardware id
   already has the most rows here goes first, so a re-run resumes there; the others are spares.
4. Hold the output folder (collectors.lock) for the rest of the run and set damaged shards aside.
   Each target's task is given what its hardware id already has here (row ids, micro-benchmark
   keys) and skips it (collectors.harness.run_profile's skip hooks): one host's resume rule.
5. Each task (a Ray streaming generator; NodeAffinitySchedulingStrategy, soft=False)
   fingerprints itself, builds the profile for its device and runs the harness under its budget
   into a scratch folder, yielding each row as it is measured. The driver waits on all tasks at
   once (`ray.wait`) and writes each hardware id's rows as shards (every `flush_every` rows, and
   when its task ends or fails): a failing node never costs what the others measured, and costs
   itself at most the configuration in progress.
6. A failed task (its worker or node died, or it raised) runs again, up to `max_retries` times, on
   the next live node of its group (the same node when it has no spare), skipping what the shards
   now hold; then it is reported. A task running OVERRUN_GRACE_S past its budget is cancelled and
   reported. Ctrl-C, SIGTERM or SIGHUP cancels every task and keeps what arrived.

Ray sets OMP_NUM_THREADS to the CPUs a task holds: a measuring task holds all of its node's
logical CPUs, so nothing else Ray schedules shares the node. On an SMT host torch alone would use
one thread per physical core; set OMP_NUM_THREADS on that node's `ray start` to match rows
measured there without Ray.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.fingerprint import Fingerprint
from perfmodel.errors import ConfigError, PerfModelError

PER = ("gpu-type", "node")
"""What one task stands for: an accelerator type, or a distinct node (hardware id)."""
DEFAULT_MAX_RETRIES = 1
"""Times a failed task is run again before it is reported."""
FINGERPRINT_TIMEOUT_S = 120.0
"""How long a node may take to answer its fingerprint task (or to start its measuring task), in s."""
OVERRUN_GRACE_S = 300.0
"""A task still running this long after its budget (s) is cancelled: imports, CUDA start-up and
the configuration in progress when the budget ran out fit well inside it."""
POLL_S = 0.5
"""How often the driver looks at deadlines while waiting for rows, in s."""


class FleetError(PerfModelError, RuntimeError):
    """The Ray cluster cannot be reached or used, or a node's task failed."""


@dataclass(frozen=True, kw_only=True)
class TaskHooks:
    """What a node's tasks call instead of the real thing (tests: a fake profile and fake
    fingerprints; shipped to the nodes with the task). None: the real one."""

    fingerprint: Callable[[], Fingerprint] | None = None
    """Fingerprints the node (default collectors.fingerprint.collect_fingerprint)."""
    build_profile: Callable[..., Any] | None = None
    """(name, device kind, supports) -> Profile (default collectors.profiles.build_profile)."""
    prepare: Callable[..., Any] | None = None
    """(config, device) -> PreparedSlice (default collectors.slices.prepare_slice)."""


DEFAULT_HOOKS = TaskHooks()
"""The hooks `collect_fleet` and `plan_fleet` ship when given none."""


# --- nodes and targets -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class FleetNode:
    """One live node of the cluster."""

    node_id: str
    """Ray's node id (hex)."""
    address: str
    """The node's IP address (NodeManagerAddress)."""
    cpus: float
    """Logical CPUs Ray schedules on it."""
    gpus: float
    """GPUs Ray schedules on it."""
    accelerator_type: str | None = None
    """Ray's `accelerator_type:*` resource (e.g. 'H100'), None on a CPU host."""
    fingerprint: Fingerprint | None = None
    """What its fingerprint task found (None: not fingerprinted, see `error`)."""
    error: str = ""
    """Why it has no fingerprint (one line)."""

    @classmethod
    def from_ray(cls, entry: Mapping[str, Any]) -> FleetNode:
        resources = entry.get("Resources") or {}
        kinds = [k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:")]
        return cls(
            node_id=str(entry["NodeID"]),
            address=str(entry.get("NodeManagerAddress") or "?"),
            cpus=float(resources.get("CPU", 0.0)),
            gpus=float(resources.get("GPU", 0.0)),
            accelerator_type=kinds[0] if kinds else None,
        )

    @property
    def label(self) -> str:
        return f"{self.address} {self.node_id[:8]}"

    @property
    def hardware_id(self) -> str:
        return self.fingerprint.hardware_id if self.fingerprint else ""

    @property
    def type_key(self) -> str:
        """The accelerator type (catalog key) on a GPU host; a CPU host's hardware id."""
        fp = self.fingerprint
        if fp is None:
            return ""
        return fp.gpu if fp.kind == "cuda" else fp.hardware_id

    def task_resources(self) -> dict[str, float]:
        """What its tasks hold: every CPU of the node (a quiet host), and one GPU on a GPU node."""
        return {"num_cpus": max(self.cpus, 1.0), "num_gpus": 1.0 if self.gpus >= 1 else 0.0}

    def describe(self) -> str:
        fp = self.fingerprint
        what = f"{fp.gpu} ({fp.hardware_id})" if fp else (self.accelerator_type or "?")
        return f"{self.label} {what}"


@dataclass(frozen=True, kw_only=True)
class FleetTarget:
    """What one task measures: a group of interchangeable nodes, the first preferred."""

    key: str
    """The accelerator type (`--per gpu-type`) or hardware id (`--per node`)."""
    nodes: tuple[FleetNode, ...]
    """Nodes that can run it: the first runs it, the others are spares for a retry."""


def group_targets(
    nodes: list[FleetNode], per: str, measured_rows: Mapping[str, int] | None = None
) -> list[FleetTarget]:
    """One target per accelerator type (`per='gpu-type'`) or per hardware id (`per='node'`) of
    the fingerprinted `nodes`, in the order first seen. Within a target, nodes whose hardware id
    has more rows in `measured_rows` (hardware id -> rows already stored) come first."""
    if per not in PER:
        raise ConfigError(f"--per must be one of {', '.join(PER)}; got {per!r}")
    groups: dict[str, list[FleetNode]] = {}
    for node in nodes:
        if node.fingerprint is not None:
            key = node.type_key if per == "gpu-type" else node.hardware_id
            groups.setdefault(key, []).append(node)
    counts = measured_rows or {}
    return [
        FleetTarget(key=key, nodes=tuple(sorted(members, key=lambda n: -counts.get(n.hardware_id, 0))))
        for key, members in groups.items()
    ]


# --- Ray ---------------------------------------------------------------------------------------


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("--ray needs Ray, which is not installed: pip install 'perfmodel[fleet]'") from None
    return ray


@contextlib.contextmanager
def connected(address: str) -> Iterator[Any]:
    """The `ray` module, connected to the cluster at `address` ('auto': the one this machine
    belongs to) for the block; an existing connection is reused and left open."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    # Ray prints the cluster's error messages (a worker died, ...) on stdout: they are logs here.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False, namespace="perfmodel")
        except Exception as exc:  # noqa: BLE001 - ConnectionError, ValueError, RuntimeError ... one line
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise FleetError(
                f"cannot connect to the Ray cluster at {address!r}: {first}; start one (`ray start --head`) "
                "or pass its address: --ray HOST:PORT"
            ) from None
        try:
            yield ray
        finally:
            ray.shutdown()


def _pinned(ray: Any, node: FleetNode) -> dict[str, Any]:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {
        **node.task_resources(),
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node.node_id, soft=False),
        "max_retries": 0,  # the driver retries, with what has arrived since
        "retry_exceptions": False,
    }


def _one_line(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)  # RayTaskError wraps the task's exception
    exc = cause if isinstance(cause, BaseException) else exc
    text = (str(exc).strip().splitlines() or [""])[0]
    if text.startswith("ray::") or not text:  # the traceback header of a RayTaskError
        text = ""
    return f"{type(exc).__name__}: {text}"[:240] if text else type(exc).__name__


def _fingerprint_task(hooks: TaskHooks) -> Fingerprint:
    from collectors.fingerprint import collect_fingerprint

    return (hooks.fingerprint or collect_fingerprint)()


def discover_nodes(
    ray: Any, hooks: TaskHooks, *, timeout_s: float = FINGERPRINT_TIMEOUT_S
) -> list[FleetNode]:
    """The cluster's live nodes, each fingerprinted by a task pinned to it. A node that does not
    answer within `timeout_s` (busy, gone) or whose task fails keeps fingerprint None and says why."""
    nodes = [FleetNode.from_ray(e) for e in ray.nodes() if e.get("Alive")]
    if not nodes:
        raise FleetError("the Ray cluster has no live node")
    remote = ray.remote(_fingerprint_task)
    refs = {remote.options(**_pinned(ray, n)).remote(hooks): n for n in nodes}
    ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    out = {}
    for ref in ready:
        try:
            out[refs[ref].node_id] = dataclasses.replace(refs[ref], fingerprint=ray.get(ref))
        except Exception as exc:  # noqa: BLE001 - a node's failure is reported, not raised
            out[refs[ref].node_id] = dataclasses.replace(refs[ref], error=_one_line(exc))
    for ref in late:
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=True)
        out[refs[ref].node_id] = dataclasses.replace(
            refs[ref], error=f"no answer within {timeout_s:.0f} s (busy or gone)"
        )
    return [out[n.node_id] for n in nodes]


# --- on a node ---------------------------------------------------------------------------------


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
    from collectors.configs import make_row_id
    from collectors.device import make_device
    from collectors.fingerprint import collect_fingerprint
    from collectors.harness import run_profile
    from collectors.profiles import build_profile

    hooks = job.hooks
    fingerprint = (hooks.fingerprint or collect_fingerprint)()
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


# --- the driver --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TargetOutcome:
    """What one target's task did."""

    target: str
    """Accelerator type or hardware id."""
    node: str
    """The node that ran (or last tried) it: address and node id."""
    hardware_id: str
    """Its hardware id."""
    gpu: str
    """Catalog key of its accelerator ('cpu' on a CPU host)."""
    stopped: str
    """complete | budget | interrupted (by the harness), failed (after its retries), overran
    (cancelled OVERRUN_GRACE_S after its budget), cancelled (the driver was stopped)."""
    attempts: int = 0
    """Tasks started for it (1 + retries)."""
    configs_total: int = 0
    """Configurations in the profile on its device."""
    skipped_existing: int = 0
    """Configurations skipped as measured when its last attempt started (by earlier runs, or by
    its own failed attempts)."""
    rows_written: int = 0
    """Training-slice rows written for it by this run."""
    microbench_rows: int = 0
    """Micro-benchmark rows written for it by this run."""
    status_counts: dict[str, int] = field(default_factory=dict)
    """Training-slice rows by status."""
    skipped_too_slow: list[str] = field(default_factory=list)
    """Configurations skipped as too slow."""
    elapsed_s: float = 0.0
    """Wall time from its first task's submission to its end, in s."""
    errors: list[str] = field(default_factory=list)
    """One line per failed attempt."""


@dataclass(frozen=True, kw_only=True)
class FleetResult:
    """What a fleet collection did."""

    profile: str
    """Profile name."""
    address: str
    """The Ray cluster address given."""
    per: str
    """gpu-type | node."""
    out_dir: str
    """The driver's output folder."""
    stopped: str
    """complete (every target ended by itself), partial (some failed or overran) or interrupted."""
    interrupted_by: str | None = None
    """The stop signal when interrupted."""
    elapsed_s: float = 0.0
    """Wall time from holding the folder to the end, in s."""
    targets: list[TargetOutcome] = field(default_factory=list)
    """One per target."""
    unreachable: list[str] = field(default_factory=list)
    """Nodes that could not be fingerprinted or run the profile, one line each."""
    shards: list[str] = field(default_factory=list)
    """Shard files written by this run."""
    damaged_shards: list[str] = field(default_factory=list)
    """Unreadable shards set aside before measuring."""

    @property
    def failed(self) -> list[TargetOutcome]:
        return [t for t in self.targets if t.stopped in ("failed", "overran")]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


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


def _measured(out: Path, hardware_id: str) -> tuple[frozenset[str], frozenset[tuple[str, str, str]]]:
    from collectors.storage import measured_microbench_keys, measured_row_ids

    return frozenset(measured_row_ids(out, hardware_id)), frozenset(
        measured_microbench_keys(out, hardware_id)
    )


def _validate(profile: str, per: str, budget_s: float | None) -> float | None:
    from collectors.harness import validate_budget_s
    from collectors.profiles import PROFILES

    if profile not in PROFILES:
        raise ConfigError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    if per not in PER:
        raise ConfigError(f"--per must be one of {', '.join(PER)}; got {per!r}")
    return None if budget_s is None else validate_budget_s(budget_s)


def _targets(
    ray: Any, profile: str, per: str, out: Path, hooks: TaskHooks
) -> tuple[list[FleetTarget], list[str]]:
    """The targets of the cluster, and one line per node left out (no fingerprint; no GPU for
    the gpu profile)."""
    from collectors.storage import measured_row_ids

    nodes = discover_nodes(ray, hooks)
    left_out = [f"{n.label}: {n.error}" for n in nodes if n.fingerprint is None]
    if profile == "gpu":
        left_out += [
            f"{n.describe()}: no GPU for profile gpu"
            for n in nodes
            if n.fingerprint and n.fingerprint.kind != "cuda"
        ]
        nodes = [n for n in nodes if n.fingerprint and n.fingerprint.kind == "cuda"]
    rows = {hw: len(measured_row_ids(out, hw)) for hw in {n.hardware_id for n in nodes if n.fingerprint}}
    return group_targets(nodes, per, rows), left_out


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
) -> FleetResult:
    """Run `profile` on the Ray cluster at `address`, one task per target (see the module
    docstring), into `out_dir` (default perfmodel.paths.raw_dir()) held by this driver.
    `budget_s` applies to each task. Another collector on the folder: CollectorBusy (or wait)."""
    from collectors.interrupts import signal_name, signals_as_interrupt
    from collectors.lock import ensure_output_dir, hold_output_dir
    from collectors.storage import set_aside_damaged
    from perfmodel import paths

    budget = _validate(profile, per, budget_s)
    if max_retries < 0:
        raise ConfigError(f"--max-retries must be >= 0; got {max_retries}")
    out = ensure_output_dir(out_dir if out_dir is not None else paths.raw_dir())
    hooks = hooks or DEFAULT_HOOKS
    state: dict[str, Any] = {"stopped": "complete", "interrupted_by": None, "t0": None, "damaged": []}
    driver = _Driver(out, profile, budget, max_retries, hooks, progress)
    with signals_as_interrupt() as stop:
        try:
            with (
                hold_output_dir(
                    out, profile=f"{profile} (fleet)", wait=wait, on_wait=lambda t: sys.stderr.write(t + "\n")
                ),
                connected(address) as ray,
            ):
                state["t0"] = time.monotonic()
                for damaged in set_aside_damaged(out):
                    state["damaged"].append(damaged.describe())
                    sys.stderr.write(f"warning: {damaged.describe()}\n")
                targets, left_out = _targets(ray, profile, per, out, hooks)
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


class _Driver:
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
        from collectors.storage import MICROBENCH_PREFIX, ShardWriter
        from perfmodel.schema import MICROBENCH_COLUMNS

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
        rows, microbench = _measured(self.out, hw)
        job = NodeJob(
            profile=self.profile,
            budget_s=self.budget_s,
            hardware_id=hw,
            skip_row_ids=rows,
            skip_microbench=microbench,
            hooks=self.hooks,
        )
        self._remote = self._remote or ray.remote(measure_on_node)
        task.gen = self._remote.options(**_pinned(ray, task.node)).remote(job)
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
            return self._failed(ray, task, _one_line(exc))
        kind = event["event"]
        if kind == "start":
            fp = event["fingerprint"]
            from collectors.storage import write_fingerprint

            write_fingerprint(self.out, fp)
            task.started, task.flush_every = True, int(event["flush_every"])
            task.deadline = time.monotonic() + float(event["budget_s"]) + OVERRUN_GRACE_S
            task.outcome.update(
                configs_total=event["configs_total"], gpu=fp.gpu if fp.kind == "cuda" else "cpu"
            )
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
        alive = {e["NodeID"] for e in ray.nodes() if e.get("Alive")}
        nodes = task.target.nodes
        start = nodes.index(task.node)
        for i in range(1, len(nodes) + 1):
            candidate = nodes[(start + i) % len(nodes)]
            if candidate.node_id in alive:
                return candidate
        return task.node  # none alive: the retry fails fast and the target is reported

    def _overran(self, ray: Any, task: _Task) -> None:
        with contextlib.suppress(Exception):
            ray.cancel(task.gen, force=True)
        self.flush(task.node.hardware_id)
        what = "ran past its budget" if task.started else "did not start (node busy or gone)"
        task.errors.append(f"attempt {task.attempts} on {task.node.label}: {what}; cancelled")
        self._end(task, "overran" if task.started else "failed")
        self.view.log(f"warning: {task.target.key} on {task.node.label} {what}; cancelled")

    def cancel_all(self, ray: Any) -> None:
        for task in self.tasks:
            if not task.stopped:
                with contextlib.suppress(Exception):
                    ray.cancel(task.gen, force=True)
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


# --- planning ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TargetPlan:
    """One target's projection (collectors.plan) on the node that would run it."""

    target: str
    """Accelerator type or hardware id."""
    node: str
    """The node that would run it: address and node id."""
    spares: int
    """Other nodes of its group (a retry runs there)."""
    hardware_id: str
    """Its hardware id."""
    device: str
    """Catalog accelerator it is projected on, or 'cpu' (projected with this machine's CPU)."""
    plan: Any = None
    """collectors.plan.ProfilePlan (None when it cannot be projected: see `note`)."""
    usd_per_gpu_hour: float | None = None
    """Default list price of the accelerator (perfmodel.decide.cost), None for a CPU or an
    unpriced accelerator."""
    note: str = ""
    """Why there is no projection, or what it assumes."""

    @property
    def projected_s(self) -> float:
        return float(self.plan.projected_s) if self.plan is not None else 0.0

    @property
    def cost_usd(self) -> float | None:
        """Projected wall time x one GPU x its price, USD."""
        if self.plan is None or self.usd_per_gpu_hour is None:
            return None
        return self.projected_s / 3600.0 * self.usd_per_gpu_hour

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "node": self.node,
            "spares": self.spares,
            "hardware_id": self.hardware_id,
            "device": self.device,
            "projected_s": round(self.projected_s, 3),
            "usd_per_gpu_hour": self.usd_per_gpu_hour,
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 4),
            "note": self.note,
            "plan": None if self.plan is None else self.plan.to_dict(),
        }


@dataclass(frozen=True, kw_only=True)
class FleetPlan:
    """A fleet collection projected before it runs: its targets run in parallel."""

    profile: str
    """Profile name."""
    address: str
    """The Ray cluster address given."""
    per: str
    """gpu-type | node."""
    targets: list[TargetPlan] = field(default_factory=list)
    """One per target."""
    left_out: list[str] = field(default_factory=list)
    """Nodes that would not run it, one line each."""

    @property
    def projected_s(self) -> float:
        """Wall time of the whole run: its longest target, in s."""
        return max((t.projected_s for t in self.targets), default=0.0)

    @property
    def gpu_hours(self) -> float:
        """GPU-hours held: one GPU per GPU target for its projected time."""
        return sum(t.projected_s for t in self.targets if t.device != "cpu") / 3600.0

    @property
    def cost_usd(self) -> float | None:
        """Sum of the priced targets' cost, USD (None when none is priced)."""
        costs = [t.cost_usd for t in self.targets if t.cost_usd is not None]
        return sum(costs) if costs else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "address": self.address,
            "per": self.per,
            "projected_s": round(self.projected_s, 3),
            "gpu_hours": round(self.gpu_hours, 4),
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 4),
            "targets": [t.to_dict() for t in self.targets],
            "left_out": self.left_out,
        }


def plan_fleet(
    profile: str,
    *,
    address: str = "auto",
    per: str = "gpu-type",
    out_dir: str | Path | None = None,
    budget_s: float | None = None,
    model_dir: str | None = None,
    hooks: TaskHooks | None = None,
) -> FleetPlan:
    """Project `profile` on each target of the cluster at `address` (collectors.plan.plan_profile
    on the accelerator its node's fingerprint names, skipping what its hardware id already has in
    `out_dir`), with each accelerator's default price per GPU-hour. Measures nothing: only the
    nodes' fingerprint tasks run."""
    from collectors.plan import plan_profile
    from collectors.storage import measured_microbench_keys, measured_row_ids
    from perfmodel import paths
    from perfmodel.decide.cost import default_price

    budget = _validate(profile, per, budget_s)
    out = Path(out_dir) if out_dir is not None else paths.raw_dir()
    with connected(address) as ray:
        targets, left_out = _targets(ray, profile, per, out, hooks or DEFAULT_HOOKS)
    planned = []
    for target in targets:
        node = target.nodes[0]
        fp = node.fingerprint
        assert fp is not None  # grouped nodes are fingerprinted
        device = fp.gpu if fp.kind == "cuda" else "cpu"
        measured = (
            fp.hardware_id,
            measured_row_ids(out, fp.hardware_id),
            measured_microbench_keys(out, fp.hardware_id),
        )
        note = "projected with this machine's CPU" if device == "cpu" else ""
        try:
            plan = plan_profile(profile, device, budget_s=budget, model_dir=model_dir, measured=measured)
        except PerfModelError as exc:
            plan, note = None, f"not projected: {str(exc).splitlines()[0][:200]}"
        quote = default_price(device) if device != "cpu" else None
        planned.append(
            TargetPlan(
                target=target.key,
                node=node.label,
                spares=len(target.nodes) - 1,
                hardware_id=fp.hardware_id,
                device=device,
                plan=plan,
                usd_per_gpu_hour=quote.usd_per_gpu_hour if quote else None,
                note=note,
            )
        )
    return FleetPlan(profile=profile, address=address, per=per, targets=planned, left_out=left_out)
