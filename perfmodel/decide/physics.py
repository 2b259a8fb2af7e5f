"""Physics the answers of a sweep must obey along one key, and the projection that restores it where
the learned residual breaks it.

Rules (at the same tokens, every other key held):
  * micro-batch: a larger micro-batch never takes longer (kernels are at least as efficient on a
    larger batch, and fewer optimizer steps run), while the run fits with margin. A point whose
    memory verdict is 'tight' or 'does not fit' is exempt (allocator pressure, and it may not run),
    and so is a change of activation checkpointing (recomputation is a stated cost).
  * GPU count in data parallel (ddp, fsdp, zero; no tensor or pipeline split): more GPUs never take
    longer. With ddp (every replica does all the work of a step) they also never speed up more than
    the GPU-count ratio: the scaling efficiency is at most 1, the bound of the communication model
    (`perfmodel.analytic.comm` adds collective time to the compute of each replica; with perfect
    overlap it adds none). Sharded strategies (fsdp, zero) are exempt from the cap, a stated
    effect: each GPU's share of the optimizer step and of the parameter traffic shrinks with the
    count, so they may scale slightly better than linearly. A point that does not fit is exempt.
The learned residual is smooth but not monotone, so between measured points it can break a rule
(the issue: 35.7, 30.5, 34.7, 32.8, 27.9 h for micro-batch 1-16; 2.7x from 16 to 32 GPUs).
`project` restores it the least it can: the isotonic (pool-adjacent-violators) fit of log total
time along the key, then the scaling cap; each moved point keeps its interval's relative width and
says by how much it moved and why.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from perfmodel.decide.outcome import Outcome

MICRO_BATCH = "training.micro_batch_size"
GPU_COUNT = "hardware.num_gpus"
DATA_PARALLEL = ("ddp", "fsdp", "zero1", "zero2", "zero3")
RULES = {
    MICRO_BATCH: "a larger micro-batch never takes longer at the same tokens while it fits with margin",
    GPU_COUNT: "more GPUs in data parallel never take longer, and with ddp never scale better than linearly",
}
"""Resolved native key -> the rule along it, in words."""
COMPANIONS = {MICRO_BATCH: {"training.grad_accum_steps"}, GPU_COUNT: {"hardware.num_nodes", "training.grad_accum_steps"}}
"""Keys that may change with the ruled key on one line (accumulation keeping a batch, nodes)."""
TOLERANCE = 1e-9


def decreasing_fit(values: Sequence[float]) -> list[float]:
    """The non-increasing sequence closest to `values` in least squares (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, count]
    for v in values:
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] < blocks[-1][0] - TOLERANCE:
            m2, n2 = blocks.pop()
            m1, n1 = blocks.pop()
            blocks.append([(m1 * n1 + m2 * n2) / (n1 + n2), n1 + n2])
    out: list[float] = []
    for mean, count in blocks:
        out += [mean] * int(count)
    return out


def scaled(o: Outcome, factor: float) -> Outcome:
    """`o` with its time `factor` times as long: times, GPU-hours and cost scale with it, rates
    and MFU inversely; intervals keep their relative width."""
    def inv(iv: Any) -> Any:
        return None if iv is None else dataclasses.replace(
            iv, estimate=iv.estimate / factor, low=iv.low / factor, high=iv.high / factor
        )

    return dataclasses.replace(
        o,
        total_time_s=o.total_time_s.scaled(factor),
        step_time_s=o.step_time_s.scaled(factor),
        gpu_hours=o.gpu_hours.scaled(factor),
        cost_usd=o.cost_usd.scaled(factor) if o.cost_usd is not None else None,
        throughput_tokens_per_s=inv(o.throughput_tokens_per_s),
        throughput_samples_per_s=inv(o.throughput_samples_per_s),
        mfu=inv(o.mfu),
    )


def _line_ok(key: str, resolved: Sequence[Mapping[str, Any]]) -> bool:
    """Whether consecutive points of a line differ only in `key` and its companions (and, for GPU
    count, run data parallel without a model split)."""
    allowed = {key, *COMPANIONS[key]}
    for a, b in zip(resolved, resolved[1:], strict=False):
        changed = {k for k in set(a) | set(b) if repr(a.get(k)) != repr(b.get(k))}
        if not changed <= allowed or key not in changed:
            return False
    if key == GPU_COUNT:
        return all(
            r.get("hardware.strategy") in DATA_PARALLEL
            and int(r.get("hardware.tensor_parallel", 1) or 1) == 1
            and int(r.get("hardware.pipeline_parallel", 1) or 1) == 1
            for r in resolved
        )
    return True


def _exempt(key: str, o: Outcome) -> bool:
    if key == MICRO_BATCH:
        return o.memory_verdict in ("tight", "does not fit") or not o.fits_in_memory
    return not o.fits_in_memory


def project_line(
    key: str, values: Sequence[float], outcomes: Sequence[Outcome], linear_cap: bool = False
) -> list[tuple[Outcome, str]]:
    """Along one line of `key` (values increasing), each outcome after the rule, and what moved it
    ('' when nothing did). `linear_cap`: also no better than linear scaling in `values`."""
    idx = [i for i, o in enumerate(outcomes) if not _exempt(key, o)]
    logs = [math.log(outcomes[i].total_time_s.estimate) for i in idx]
    target = decreasing_fit(logs)
    if linear_cap:  # efficiency <= 1 against every smaller count on the line
        for j in range(len(idx)):
            for i in range(j):
                floor = target[i] + math.log(values[idx[i]] / values[idx[j]])
                target[j] = max(target[j], floor)
        target = decreasing_fit(target)
    out = [(o, "") for o in outcomes]
    for k, i in enumerate(idx):
        delta = target[k] - logs[k]
        if abs(delta) > 1e-6:
            factor = math.exp(delta)
            why = (
                f"time x{factor:.3g} to obey the physics along {key} ({RULES[key]}; perfmodel/decide/physics.py)"
            )
            out[i] = (scaled(outcomes[i], factor), why)
    return out


def project(
    varied: Mapping[str, Sequence[Any]],
    points: Sequence[Any],
    resolved: Callable[[Any], Mapping[str, Any]],
) -> dict[int, tuple[Outcome, str]]:
    """For every varied key with a rule (native `MICRO_BATCH` or `GPU_COUNT`, found through the
    resolved configs so Ludwig keys count too), each line of points along it (the other varied
    keys held) projected by `project_line`. Returns index -> (outcome, why) for the points moved."""
    keys = list(varied)
    moved: dict[int, tuple[Outcome, str]] = {}
    current = {i: p.outcome for i, p in enumerate(points)}
    for key in keys:
        lines: dict[tuple[str, ...], list[int]] = {}
        for i, p in enumerate(points):
            if p.outcome is None:
                continue
            rest = tuple(repr(p.values[k]) for k in keys if k != key)
            lines.setdefault(rest, []).append(i)
        for members in lines.values():
            if len(members) < 2:
                continue
            rules = [k for k in RULES if _line_ok(k, [resolved(points[i]) for i in _sorted(members, points, k, resolved)])]
            for rule in rules:
                order = _sorted(members, points, rule, resolved)
                values = [float(resolved(points[i])[rule]) for i in order]
                if len(set(values)) < len(values):
                    continue
                ddp = all(resolved(points[i]).get("hardware.strategy") == "ddp" for i in order)
                done = project_line(rule, values, [current[i] for i in order], linear_cap=rule == GPU_COUNT and ddp)
                for i, (o, why) in zip(order, done, strict=True):
                    if why:
                        current[i] = o
                        previous = moved.get(i, (o, ""))[1]
                        moved[i] = (o, "; ".join(w for w in (previous, why) if w))
    return moved


def _sorted(members: Sequence[int], points: Sequence[Any], key: str, resolved: Callable[[Any], Mapping[str, Any]]) -> list[int]:
    def value(i: int) -> float:
        v = resolved(points[i]).get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan

    return sorted(members, key=value)
