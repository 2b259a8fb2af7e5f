"""The cluster's nodes and the targets they form: listing and fingerprinting the live nodes,
grouping them per accelerator type or per distinct node, and what a hardware id already has in
the driver's folder (the resume rule)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collectors.fleet.cluster import (
    FleetError,
    cancel_quietly,
    live_node_entries,
    one_line,
    pinned,
)
from collectors.fleet.tasks import TaskHooks, fingerprint_task
from collectors.harness import validate_budget_s
from collectors.profiles import PROFILES
from perfmodel.errors import ConfigError
from perfmodel.measure.fingerprint import Fingerprint
from perfmodel.measure.storage import measured_microbench_keys, measured_row_ids

PER = ("gpu-type", "node")
"""What one task stands for: an accelerator type, or a distinct node (hardware id)."""
FINGERPRINT_TIMEOUT_S = 120.0
"""How long a node may take to answer its fingerprint task (or to start its measuring task), in s."""


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


def device_key(fp: Fingerprint) -> str:
    """The catalog key of a fingerprint's accelerator, or 'cpu' on a CPU host."""
    return fp.gpu if fp.kind == "cuda" else "cpu"


def check_per(per: str) -> None:
    if per not in PER:
        raise ConfigError(f"--per must be one of {', '.join(PER)}; got {per!r}")


def validate(profile: str, per: str, budget_s: float | None) -> float | None:
    """Check a fleet run's profile, --per and budget; the budget in s (None: the profile's)."""
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    check_per(per)
    return None if budget_s is None else validate_budget_s(budget_s)


def group_targets(
    nodes: list[FleetNode], per: str, measured_rows: Mapping[str, int] | None = None
) -> list[FleetTarget]:
    """One target per accelerator type (`per='gpu-type'`) or per hardware id (`per='node'`) of
    the fingerprinted `nodes`, in the order first seen. Within a target, nodes whose hardware id
    has more rows in `measured_rows` (hardware id -> rows already stored) come first."""
    check_per(per)
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


def discover_nodes(
    ray: Any, hooks: TaskHooks, *, timeout_s: float = FINGERPRINT_TIMEOUT_S
) -> list[FleetNode]:
    """The cluster's live nodes, each fingerprinted by a task pinned to it. A node that does not
    answer within `timeout_s` (busy, gone) or whose task fails keeps fingerprint None and says why."""
    nodes = [FleetNode.from_ray(e) for e in live_node_entries(ray)]
    if not nodes:
        raise FleetError("the Ray cluster has no live node")
    remote = ray.remote(fingerprint_task)
    refs = {remote.options(**pinned(n)).remote(hooks): n for n in nodes}
    ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    out = {}
    for ref in ready:
        try:
            out[refs[ref].node_id] = dataclasses.replace(refs[ref], fingerprint=ray.get(ref))
        except Exception as exc:  # noqa: BLE001 - a node's failure is reported, not raised
            out[refs[ref].node_id] = dataclasses.replace(refs[ref], error=one_line(exc))
    for ref in late:
        cancel_quietly(ray, ref)
        out[refs[ref].node_id] = dataclasses.replace(
            refs[ref], error=f"no answer within {timeout_s:.0f} s (busy or gone)"
        )
    return [out[n.node_id] for n in nodes]


def measured(out: Path, hardware_id: str) -> tuple[set[str], set[tuple[str, str, str]]]:
    """Row ids and micro-benchmark keys `hardware_id` already has in the folder `out`."""
    return measured_row_ids(out, hardware_id), measured_microbench_keys(out, hardware_id)


def select_targets(
    ray: Any, profile: str, per: str, out: Path, hooks: TaskHooks
) -> tuple[list[FleetTarget], list[str]]:
    """The targets of the cluster, and one line per node left out (no fingerprint; no GPU for
    the gpu profile)."""
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
