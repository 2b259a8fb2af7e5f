"""Collectors: measure micro-benchmarks and real training slices on this machine's device and
append them as feature-table rows under datasets/raw/.

    python -m collectors --profile quick          # or: perfmodel collect --profile quick
    python -m collectors --profile gpu --budget-s 420

Modules follow the flow of a collection: `fingerprint` (who measures) -> `profiles` (what to
measure, built from `configs`) -> `microbench` and `slices` (measuring, with `models` and
`device`) -> `storage` (parquet shards) -> `harness` (the loop) -> `summary` (what is stored).
Importing this package does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collectors.harness import CollectResult

__all__ = ["CollectResult", "collect"]


def collect(profile: str, out_dir: str = "datasets/raw", budget_s: float | None = None, device: str | None = None, **kw: Any) -> CollectResult:
    """Run a collection profile; see collectors.harness.collect."""
    from collectors.harness import collect as _collect

    return _collect(profile, out_dir=out_dir, budget_s=budget_s, device=device, **kw)


def __getattr__(name: str) -> Any:
    if name == "CollectResult":
        from collectors.harness import CollectResult

        return CollectResult
    raise AttributeError(name)
