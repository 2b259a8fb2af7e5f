"""What would fit when a run does not: the largest micro-batch that fits (gradient accumulation
keeping the global batch), the same with activation checkpointing, and the fewest GPUs (with a
sharding strategy) that fit, each with its predicted time.

"Fits" is exactly `predict`'s verdict (perfmodel.analytic.fit_verdict: "fits" or "tight", the
device total's estimate at most the accelerator's memory). Memory grows affinely with the
micro-batch within each phase of the step (activations and logits are linear in it), so the
largest fitting micro-batch is read off the memory model alone and checked on both sides of the
boundary (bisection where the check fails); predictions are made only for the suggestions, all
in one call of the learned model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel.analytic.fit_verdict import verdict_of
from perfmodel.config.source import ConfigSource
from perfmodel.decide.express import express
from perfmodel.decide.outcome import Outcome
from perfmodel.errors import ConfigError
from perfmodel.prediction import predict_many
from perfmodel.workload import Workload

MICRO_BATCH_LIMIT = 65536
"""Largest micro-batch searched."""
SHARDING_ORDER = ("zero1", "zero2", "fsdp")
"""Strategies tried when more GPUs are needed, from the least to the most sharding (fsdp shards
weights, gradients and optimizer state like zero3)."""
GPU_COUNTS = (2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
"""GPU counts tried for the fewest GPUs that fit (the sizes clouds rent: 1, 2, 4 or 8 GPUs per
server, then whole servers)."""


def peak_memory_gb(w: Workload, memory_scale: float = 1.0) -> float:
    """The device total per GPU the verdict compares, GB (its estimate; `memory_scale`: the
    analytic allocated peak anchored to the oracle's, module docstring)."""
    return verdict_of(w, memory_scale).device_gb


def fits(w: Workload, memory_scale: float = 1.0) -> bool:
    """`predict`'s verdict: 'fits' or 'tight' (no limit known: True)."""
    return verdict_of(w, memory_scale).fits


def with_training(w: Workload, **changes: Any) -> Workload:
    return dataclasses.replace(w, training=dataclasses.replace(w.training, **changes))


def with_parallel(w: Workload, **changes: Any) -> Workload:
    return dataclasses.replace(w, parallel=dataclasses.replace(w.parallel, **changes))


def largest_micro_batch(w: Workload, *, limit: int = MICRO_BATCH_LIMIT, memory_scale: float = 1.0) -> int | None:
    """The largest micro-batch in [1, limit] with which `w` fits; None when 1 does not fit.

    The memory model is affine in the micro-batch (activations and logits grow linearly, the rest
    is fixed), so the boundary is read off two evaluations and then checked on both sides; where
    the check fails (a model that is not affine), bisection finds it."""
    capacity = float(w.gpu.memory_gb)
    s = memory_scale
    at_1 = peak_memory_gb(with_training(w, micro_batch_size=1), s)
    if capacity and at_1 > capacity:
        return None
    if not capacity:
        return limit
    if limit == 1:
        return 1
    slope = peak_memory_gb(with_training(w, micro_batch_size=2), s) - at_1
    if slope <= 0:
        guess = limit
    else:
        guess = int(max(1.0, min(float(limit), 1.0 + (capacity - at_1) / slope)))
    if fits(with_training(w, micro_batch_size=guess), s) and (
        guess == limit or not fits(with_training(w, micro_batch_size=guess + 1), s)
    ):
        return guess
    return _bisect_micro_batch(w, limit, s)


def _bisect_micro_batch(w: Workload, limit: int, memory_scale: float = 1.0) -> int:
    """`largest_micro_batch` by doubling and bisection (1 fits)."""
    lo, hi = 1, 2
    while hi <= limit and fits(with_training(w, micro_batch_size=hi), memory_scale):
        lo, hi = hi, hi * 2
    hi = min(hi, limit + 1)
    while hi - lo > 1:  # lo fits, hi does not (or is past the limit)
        mid = (lo + hi) // 2
        if fits(with_training(w, micro_batch_size=mid), memory_scale):
            lo = mid
        else:
            hi = mid
    return lo


def largest_divisor_that_fits(
    w: Workload, per_replica_batch: int, *, top: int | None = None, memory_scale: float = 1.0
) -> int | None:
    """The largest divisor d of `per_replica_batch` (samples per replica per optimizer step) with
    which `w` fits at micro-batch d; None when none does. `top`: `largest_micro_batch(w)` when
    known already (memory grows with the micro-batch, so the search under the limit is min(top, limit))."""
    top = (
        largest_micro_batch(w, limit=per_replica_batch, memory_scale=memory_scale)
        if top is None
        else min(top, per_replica_batch)
    )
    if top is None:
        return None
    # with the accumulation each divisor brings: accumulating holds the gradients through the
    # micro-batches, so a divisor that fits without it may not with it
    for d in sorted((d for d in range(1, top + 1) if per_replica_batch % d == 0), reverse=True):
        if fits(with_training(w, micro_batch_size=d, grad_accum_steps=per_replica_batch // d), memory_scale):
            return d
    return None


@dataclass(frozen=True, kw_only=True)
class FitSuggestion:
    """One change that makes a run fit, with its prediction."""

    kind: str
    """'micro_batch', 'checkpointing' or 'gpus'."""
    summary: str
    """One line for people."""
    changes: dict[str, Any]
    """Native config keys -> new values."""
    outcome: Outcome
    """The prediction with the changes applied."""
    global_batch_kept: bool
    """True when samples per optimizer step are unchanged."""
    config_changes: dict[str, Any] | None = None
    """The change in the config's own dialect (Ludwig keys for a Ludwig config); None: as `changes`."""
    flags: dict[str, Any] | None = None
    """Native keys a Ludwig config cannot hold (hardware), given as perfmodel flags."""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "summary": self.summary,
            "changes": dict(self.changes),
            "config_changes": dict(self.config_changes if self.config_changes is not None else self.changes),
            "flags": dict(self.flags or {}),
            "global_batch_kept": self.global_batch_kept,
            **self.outcome.to_json(),
        }


@dataclass(frozen=True, kw_only=True)
class FitReport:
    """What would fit a run that does not."""

    fits: bool
    """Whether the run as given fits."""
    max_micro_batch_size: int | None
    """The largest micro-batch that fits as configured otherwise (None: not even 1)."""
    suggestions: tuple[FitSuggestion, ...]
    """Changes that fit, each with its prediction (empty when the run fits)."""
    notes: tuple[str, ...] = ()
    """What was searched and found nothing."""

    def to_json(self) -> list[dict[str, Any]]:
        return [s.to_json() for s in self.suggestions]


def _predict_all(workloads: list[Workload], options: dict[str, Any]) -> list[Outcome]:
    return [Outcome.of(run) for run in predict_many(workloads, **options)]


def _changed(t: Any, **values: Any) -> dict[str, Any]:
    """training.* keys whose new value differs from the TrainingSpec `t`."""
    return {f"training.{k}": v for k, v in values.items() if getattr(t, k) != v}


def _per_replica_batch(w: Workload) -> int:
    return w.training.micro_batch_size * w.training.grad_accum_steps


def suggest_fits(
    w: Workload,
    *,
    confidence: float = 0.9,
    model_dir: str | Path | None = None,
    use_learned: bool = True,
    use_calibration: bool = True,
    max_gpus: int = 1024,
    gpu_counts: Iterable[int] = GPU_COUNTS,
    source: ConfigSource | None = None,
    memory_scale: float = 1.0,
) -> FitReport:
    """What would make `w` fit, each with its predicted time: the largest micro-batch (gradient
    accumulation raised to keep the global batch), the same with activation checkpointing (when
    off), and the fewest GPUs up to `max_gpus` with the least sharding that fits. Given the config
    `w` came from (its `ConfigSource`), a Ludwig config's suggestions are also written in Ludwig's keys.
    `memory_scale` (not 1: `predict --memory exact`) multiplies the analytic allocated peak of
    every candidate, searched and predicted (the model anchored to the oracle's count of `w`)."""
    options = {"confidence": confidence, "model_dir": model_dir, "use_learned": use_learned,
               "use_calibration": use_calibration, "memory_scale": memory_scale}
    s = memory_scale
    if fits(w, s):
        return FitReport(fits=True, max_micro_batch_size=largest_micro_batch(w, memory_scale=s), suggestions=())
    t = w.training
    per_replica = _per_replica_batch(w)
    found: list[tuple[Workload, dict[str, Any]]] = []  # each suggestion's workload and its fields
    notes: list[str] = []
    if s != 1.0:
        notes.append(
            f"sized by the analytic memory model scaled by x{s:.4f}, the oracle's allocated peak of the "
            "configured run over the model's (the oracle ran that run only)"
        )
    top = largest_micro_batch(w, memory_scale=s)
    mb = largest_divisor_that_fits(w, per_replica, top=top, memory_scale=s) if top is not None else None
    if mb is not None:
        ga = per_replica // mb
        found.append(
            (
                with_training(w, micro_batch_size=mb, grad_accum_steps=ga),
                {
                    "kind": "micro_batch",
                    "summary": f"micro-batch {mb} x gradient accumulation {ga} (global batch kept)",
                    "changes": _changed(t, micro_batch_size=mb, grad_accum_steps=ga),
                    "global_batch_kept": True,
                },
            )
        )
    else:
        notes.append("no micro-batch fits as configured (not even 1)")
    if not t.activation_checkpointing:
        ckpt = with_training(w, activation_checkpointing=True)
        mb_c = largest_divisor_that_fits(ckpt, per_replica, memory_scale=s)
        if mb_c is not None and (mb is None or mb_c > mb):
            ga = per_replica // mb_c
            found.append(
                (
                    with_training(ckpt, micro_batch_size=mb_c, grad_accum_steps=ga),
                    {
                        "kind": "checkpointing",
                        "summary": f"activation checkpointing, micro-batch {mb_c} x gradient accumulation {ga} (global batch kept)",
                        "changes": _changed(
                            t, activation_checkpointing=True, micro_batch_size=mb_c, grad_accum_steps=ga
                        ),
                        "global_batch_kept": True,
                    },
                )
            )
    more = fewest_gpus(w, max_gpus=max_gpus, gpu_counts=gpu_counts, memory_scale=s)
    if more is None:
        notes.append(
            f"no GPU count up to {max_gpus} fits at micro-batch {t.micro_batch_size}, even fully sharded"
        )
        more = fewest_gpus(w, max_gpus=max_gpus, gpu_counts=gpu_counts, adapt_batch=True, memory_scale=s)
    if more is not None:
        moved, kept = more
        par, mt = moved.parallel, moved.training
        moves: dict[str, Any] = {"hardware.num_gpus": par.num_gpus}
        for key in ("num_nodes", "strategy"):
            if getattr(par, key) != getattr(w.parallel, key):
                moves[f"hardware.{key}"] = getattr(par, key)
        for key in ("micro_batch_size", "grad_accum_steps", "activation_checkpointing"):
            if getattr(mt, key) != getattr(t, key):
                moves[f"training.{key}"] = getattr(mt, key)
        nodes = f" on {par.num_nodes} nodes" if par.num_nodes > 1 else ""
        extra = ""
        if mt.micro_batch_size != t.micro_batch_size:
            extra += f", micro-batch {mt.micro_batch_size} x gradient accumulation {mt.grad_accum_steps}"
        if mt.activation_checkpointing and not t.activation_checkpointing:
            extra += ", activation checkpointing"
        batch = "global batch kept" if kept else "global batch grows with the GPUs"
        found.append(
            (
                moved,
                {
                    "kind": "gpus",
                    "summary": f"{par.num_gpus} x {w.gpu.name}{nodes} with {par.strategy}{extra} ({batch})",
                    "changes": moves,
                    "global_batch_kept": kept,
                },
            )
        )
    outcomes = _predict_all([moved for moved, _ in found], options)  # one call of the learned model
    suggestions = [
        FitSuggestion(outcome=outcome, **fields) for (_, fields), outcome in zip(found, outcomes, strict=True)
    ]
    if source is not None and source.dialect != "native":
        suggestions = [_in_dialect(s, w, source) for s in suggestions]
    return FitReport(fits=False, max_micro_batch_size=top, suggestions=tuple(suggestions), notes=tuple(notes))


def _in_dialect(s: FitSuggestion, w: Workload, source: ConfigSource) -> FitSuggestion:
    expressed = express(s.changes, source, w.parallel.num_gpus, w.parallel.strategy)
    if expressed is None:
        return s
    return dataclasses.replace(s, config_changes=expressed[0], flags=expressed[1])


def scale_gpus(w: Workload, num_gpus: int, strategy: str) -> tuple[Workload, bool] | None:
    """`w` on `num_gpus` GPUs (nodes from the catalog's GPUs per server) with `strategy`; gradient
    accumulation lowered to keep the global batch where it divides (else none: the batch grows).
    Returns (workload, global batch kept?), or None when the count does not split into the
    model-parallel groups."""
    par = w.parallel
    unit = par.model_split * par.context_parallel
    if num_gpus % unit:
        return None
    try:
        moved = with_parallel(w, num_gpus=num_gpus, num_nodes=w.gpu.servers_for(num_gpus), strategy=strategy)
    except ConfigError:
        return None
    global_batch = _per_replica_batch(w) * par.data_parallel
    per_step = w.training.micro_batch_size * moved.parallel.data_parallel
    if global_batch % per_step == 0:
        return with_training(moved, grad_accum_steps=global_batch // per_step), True
    # the batch grows with the GPUs anyway: no accumulation (which would hold every gradient
    # through the micro-batches and make more GPUs need more memory)
    return with_training(moved, grad_accum_steps=1), False


def fewest_gpus(
    w: Workload,
    *,
    max_gpus: int = 1024,
    gpu_counts: Iterable[int] = GPU_COUNTS,
    adapt_batch: bool = False,
    memory_scale: float = 1.0,
) -> tuple[Workload, bool] | None:
    """The fewest GPUs (more than now, at most `max_gpus`) on which `w` fits, with the least
    sharding strategy that fits there (the run's own first, then zero1, zero2, fsdp): (workload,
    global batch kept?) or None. With `adapt_batch`, a count also counts when it fits only with
    the largest micro-batch that divides the per-replica batch, or with that and activation
    checkpointing.

    Under one strategy, memory per GPU does not grow with the GPU count (more GPUs shard as much
    or more; activations stay), so each strategy's fewest count is found by bisection over the
    counts the model-parallel groups divide. `fewest_gpus_scan` is the definition (every count
    in order, every strategy at each); a test holds the two equal."""
    par = w.parallel
    unit = par.model_split * par.context_parallel
    counts = [n for n in sorted(set(gpu_counts)) if par.num_gpus < n <= max_gpus and n % unit == 0]
    best: tuple[int, tuple[Workload, bool]] | None = None  # (index into counts, answer)
    for strategy in dict.fromkeys((par.strategy, *SHARDING_ORDER)):
        end = best[0] if best is not None else len(counts)  # a later strategy must use fewer GPUs
        found = _fewest_for_strategy(w, counts[:end], strategy, adapt_batch, memory_scale) if end else None
        if found is not None:
            best = found
    return best[1] if best is not None else None


def _fewest_for_strategy(
    w: Workload, counts: list[int], strategy: str, adapt_batch: bool, memory_scale: float = 1.0
) -> tuple[int, tuple[Workload, bool]] | None:
    """(index, answer) of the fewest of `counts` on which `w` fits with `strategy`, or None."""
    if not _fits_on(w, counts[-1], strategy, adapt_batch, memory_scale):
        return None
    lo, hi = -1, len(counts) - 1  # counts[hi] fits; counts[lo] does not (lo = -1: none checked)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _fits_on(w, counts[mid], strategy, adapt_batch, memory_scale):
            hi = mid
        else:
            lo = mid
    found = _fit_on(w, counts[hi], strategy, adapt_batch, memory_scale)
    return (hi, found) if found is not None else None


def _fits_on(w: Workload, n: int, strategy: str, adapt_batch: bool, memory_scale: float = 1.0) -> bool:
    """`_fit_on(...) is not None`, without searching the micro-batch: a dividing micro-batch fits
    exactly when micro-batch 1 (with the accumulation that keeps the batch) does."""
    scaled = scale_gpus(w, n, strategy)
    if scaled is None:
        return False
    moved, s = scaled[0], memory_scale
    if fits(moved, s):
        return True
    if not adapt_batch:
        return False
    one = with_training(moved, micro_batch_size=1, grad_accum_steps=_per_replica_batch(moved))
    return fits(one, s) or fits(with_training(one, activation_checkpointing=True), s)


def _fit_on(
    w: Workload, n: int, strategy: str, adapt_batch: bool, memory_scale: float = 1.0
) -> tuple[Workload, bool] | None:
    """`w` moved to `n` GPUs with `strategy` when it fits there (with `adapt_batch`: or with the
    largest dividing micro-batch, then also with activation checkpointing): (workload, global
    batch kept?), or None."""
    scaled = scale_gpus(w, n, strategy)
    if scaled is None:
        return None
    moved, kept = scaled
    if fits(moved, memory_scale):
        return scaled
    if not adapt_batch:
        return None
    per_replica = _per_replica_batch(moved)
    for variant in (moved, with_training(moved, activation_checkpointing=True)):
        mb = largest_divisor_that_fits(variant, per_replica, memory_scale=memory_scale)
        if mb is not None:
            return with_training(variant, micro_batch_size=mb, grad_accum_steps=per_replica // mb), kept
    return None


def fewest_gpus_scan(
    w: Workload, *, max_gpus: int = 1024, gpu_counts: Iterable[int] = GPU_COUNTS, adapt_batch: bool = False
) -> tuple[Workload, bool] | None:
    """`fewest_gpus` by trying every count in order and every strategy at each (the reference)."""
    current = w.parallel.num_gpus
    for n in sorted(set(gpu_counts)):
        if n <= current or n > max_gpus:
            continue
        for strategy in dict.fromkeys((w.parallel.strategy, *SHARDING_ORDER)):
            at = _fit_on(w, n, strategy, adapt_batch)
            if at is not None:
                return at
    return None
