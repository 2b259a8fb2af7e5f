"""What a fleet collection did: one outcome per target, and the run's result (the `--json`
output of `perfmodel collect --ray`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


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
