"""`plan_fleet`: project a fleet collection before it runs (collectors.plan on each target's
accelerator, with its default price). Measures nothing: only the nodes' fingerprint tasks run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.fleet.cluster import CONNECT_TIMEOUT_S, connected, first_line
from collectors.fleet.nodes import device_key, measured, select_targets, validate
from collectors.fleet.tasks import TaskHooks, hooks_or_default
from collectors.plan import plan_profile
from perfmodel import paths
from perfmodel.catalog.prices import default_price
from perfmodel.errors import PerfModelError


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
    """Default list price of the accelerator (perfmodel.catalog.prices), None for a CPU or an
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
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
) -> FleetPlan:
    """Project `profile` on each target of the cluster at `address` (collectors.plan.plan_profile
    on the accelerator its node's fingerprint names, skipping what its hardware id already has in
    `out_dir`), with each accelerator's default price per GPU-hour. Measures nothing: only the
    nodes' fingerprint tasks run."""
    budget = validate(profile, per, budget_s)
    out = Path(out_dir) if out_dir is not None else paths.raw_dir()
    with connected(address, timeout_s=connect_timeout_s) as ray:
        targets, left_out = select_targets(ray, profile, per, out, hooks_or_default(hooks))
    planned = []
    for target in targets:
        node = target.nodes[0]
        fp = node.fingerprint
        assert fp is not None  # grouped nodes are fingerprinted
        device = device_key(fp)
        done = (fp.hardware_id, *measured(out, fp.hardware_id))
        note = "projected with this machine's CPU" if device == "cpu" else ""
        try:
            plan = plan_profile(profile, device, budget_s=budget, model_dir=model_dir, measured=done)
        except PerfModelError as exc:
            plan, note = None, f"not projected: {first_line(exc)[:200]}"
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
