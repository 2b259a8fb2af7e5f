"""Collectors: measure micro-benchmarks and real training slices on this machine's device and
append them as feature-table rows to the collectors' folder (perfmodel.paths.raw_dir(),
datasets/raw/ by default).

    perfmodel collect --profile quick             # or: python -m collectors --profile quick
    perfmodel collect --profile gpu --budget-s 420 --wait

Modules follow the flow of a collection: the host's fingerprint (`perfmodel.measure.fingerprint`)
-> `profiles` (what to measure, built from `perfmodel.measure.configs`) -> `microbench` and the
training slices (`perfmodel.measure.slices`, with its `models` and `device`) -> the parquet
shards (`perfmodel.measure.storage`) -> `harness` (the loop: it holds the folder's `lock`,
reports through `progress`, and stops cleanly on the signals in `interrupts`) -> `summary` (what
is stored). The measuring kernel lives in `perfmodel.measure` because the probe measures with it
too; collectors import it, never the other way round.
Importing this package does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collectors.harness import CollectResult

__all__ = ["CollectResult", "collect"]


def collect(
    profile: str,
    out_dir: str | None = None,
    budget_s: float | None = None,
    device: str | None = None,
    **kw: Any,
) -> CollectResult:
    """Run a collection profile; see collectors.harness.collect (out_dir None: perfmodel.paths.raw_dir())."""
    # loaded on first use (PEP 562): importing the package stays light
    from collectors.harness import collect as _collect

    return _collect(profile, out_dir=out_dir, budget_s=budget_s, device=device, **kw)


def __getattr__(name: str) -> Any:
    if name == "CollectResult":
        # loaded on first use (PEP 562): importing the package stays light
        from collectors.harness import CollectResult

        return CollectResult
    raise AttributeError(name)
