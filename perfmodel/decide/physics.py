"""Physics every decision's predictions obey along two keys, and the projection that restores it
where the learned residual breaks it. `sweep`, `compare` and `advise` all predict through
`consistent`, so one run gets one answer whichever command asks.

Rules (at the same tokens, every other key held, gradient accumulation included):
  * micro-batch: a larger micro-batch never takes longer (kernels are at least as efficient on a
    larger batch, and fewer optimizer steps run), while the run fits with margin. A point whose
    memory verdict is 'tight' or 'does not fit' is exempt (allocator pressure, and it may not run).
    Activation checkpointing is held, so recomputation never enters a line.
  * GPU count in data parallel (ddp, fsdp, zero; no tensor, pipeline or context split): more GPUs
    never take longer, unless the communication model says the collectives they add cost more than
    the compute they save (a stated effect, named in the point's `why`). With ddp every replica does
    all the work of its micro-batches, so the scaling efficiency from m to n GPUs is at most the
    communication model's bound

        efficiency(m -> n) <= S(m) / (S(m) + max(0, E(n) - E(m)))

    S the predicted step time at m, E the data-parallel communication the backward cannot hide
    (`perfmodel.analytic.comm` for the collective time, the overlap window of
    `perfmodel.analytic.roofline`: the last micro-batch's backward, scaled by the learned model's
    step / the analytic step, so a slower-than-modelled backward hides more). It is 1 (perfect
    overlap, no better than linear) where the exposed communication does not grow, and tighter
    where it does: crossing from NVLink to the network, or a PCIe card such as the L40S.
    Sharded strategies (fsdp, zero) are exempt from the cap, a stated effect: each GPU's share of
    the optimizer step and of the parameter traffic shrinks with the count. A point that does not
    fit is exempt.

How, so that the answer for a point depends on that point alone (not on which other points a
command happens to ask about): each point is placed on its own canonical lines, the powers of two
up to it (micro-batch 1, 2, 4, ... and GPU count 1, 2, 4, ...), with the next power of two for a
value between two of them, and the rules are applied causally along them: micro-batch first (at
every GPU count of the GPU line), then the GPU count. Along a line, a point predicted slower than
the last one before it is brought down to it (the running minimum), and a ddp point predicted to
scale better than the bound is raised to it; a value that is not a power of two is held between
the powers of two around it. Two values inside one octave (micro-batch 5 and 6) are each held
against the powers of two around them (4 and 8), not against each other. Every moved point keeps
its interval's relative width and says by how much it moved and why. The learned residual is smooth
but not monotone, so without this it breaks the rules between measured points (the issue:
35.7, 30.5, 34.7, 32.8, 27.9 h for micro-batch 1-16; 2.7x from 16 to 32 L40S)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from perfmodel.decide.outcome import Outcome
from perfmodel.errors import PerfModelError
from perfmodel.prediction import predict_many
from perfmodel.workload import Workload

MICRO_BATCH = "training.micro_batch_size"
GPU_COUNT = "hardware.num_gpus"
DATA_PARALLEL = ("ddp", "fsdp", "zero1", "zero2", "zero3")
RULES = {
    MICRO_BATCH: "a larger micro-batch never takes longer at the same tokens while it fits with margin",
    GPU_COUNT: (
        "more GPUs in data parallel never take longer, and with ddp never scale better than the "
        "communication model allows"
    ),
}
"""Resolved native key -> the rule along it, in words."""
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class Consistent:
    """One point's prediction after the rules, and what moved it."""

    outcome: Outcome
    """The prediction (the model's own where no rule moved it)."""
    raw: Outcome
    """The model's own prediction."""
    why: str = ""
    """Why and by how much the time moved ('' when it did not)."""
    effect: str = ""
    """A stated effect that lets this point break a rule ('communication': more GPUs take longer
    because the collectives cost more than the compute saved); '' when none."""


def _grid(value: int) -> list[int]:
    """Powers of two up to `value`, then `value` itself, then the next power of two when `value`
    lies between two (the canonical line of a point)."""
    out = [2**k for k in range(0, 31) if 2**k <= value]
    if out[-1] != value:
        out += [value, out[-1] * 2]
    return out


def _key(w: Workload) -> str:
    return repr(dataclasses.replace(w, assumptions=()))


def _with_micro_batch(w: Workload, b: int) -> Workload:
    if w.training.micro_batch_size == b:
        return w
    return dataclasses.replace(w, training=dataclasses.replace(w.training, micro_batch_size=b))


def _with_gpus(w: Workload, n: int) -> Workload:
    if w.parallel.num_gpus == n:
        return w
    par = dataclasses.replace(w.parallel, num_gpus=n, num_nodes=w.gpu.servers_for(n))
    return dataclasses.replace(w, parallel=par)


def micro_batch_applies(w: Workload) -> bool:
    return w.model.arch != "gbm"


def gpu_count_applies(w: Workload) -> bool:
    par = w.parallel
    return (
        w.model.arch != "gbm"
        and w.gpu.vendor != "cpu"
        and par.strategy in DATA_PARALLEL
        and par.tensor_parallel == 1
        and par.pipeline_parallel == 1
        and par.context_parallel == 1
    )


def exposed_comm_s(o: Outcome) -> float:
    """Data-parallel communication the backward cannot hide, at the learned model's speed: the
    analytic collective time less the overlap window, the window scaled by the model's own step
    over the analytic step (a slower backward hides more; the model's own, so the bound of a point
    does not move with the projection). 0 when the analytic model hides it all."""
    if o.comm_exposed_s <= 0 or o.bound_step_s <= 0:
        return 0.0
    window = max(o.comm_s - o.comm_exposed_s, 0.0)
    speed = (o.model_step_s or o.step_time_s.estimate) / o.bound_step_s
    return max(0.0, o.comm_s - window * speed)


class _Lines:
    """The canonical lines of a set of points, predicted in one batch and projected causally."""

    def __init__(self, predictor: dict[str, Any]) -> None:
        self.predictor = predictor
        self.raw: dict[str, Outcome] = {}
        self.errors: dict[str, PerfModelError] = {}
        self.margin: dict[str, bool] = {}
        self._micro: dict[str, tuple[float, str]] = {}
        self._gpu: dict[str, tuple[float, str, str]] = {}

    @staticmethod
    def needed(w: Workload) -> list[Workload]:
        """The points of `w`'s canonical lines (module docstring); those the config's own rules
        refuse (a count its servers cannot hold) are left off."""
        counts = _grid(w.parallel.num_gpus) if gpu_count_applies(w) else [w.parallel.num_gpus]
        batches = _grid(w.training.micro_batch_size) if micro_batch_applies(w) else [w.training.micro_batch_size]
        out = []
        for n in counts:
            for b in batches:
                try:
                    out.append(_with_micro_batch(_with_gpus(w, n), b))
                except (PerfModelError, ValueError):
                    continue
        return out

    def predict(self, workloads: Sequence[Workload]) -> None:
        todo: dict[str, Workload] = {}
        for w in workloads:
            k = _key(w)
            if k not in self.raw and k not in self.errors and k not in todo:
                todo[k] = w
        if not todo:
            return
        keys = list(todo)
        try:
            preds: list[Any] = list(predict_many([todo[k] for k in keys], **self.predictor))
        except PerfModelError:  # one cannot be predicted: one by one, to keep the others
            preds = []
            for k in keys:
                try:
                    preds.append(predict_many([todo[k]], **self.predictor)[0])
                except PerfModelError as exc:
                    preds.append(exc)
        for k, p in zip(keys, preds, strict=True):
            if isinstance(p, PerfModelError):
                self.errors[k] = p
                continue
            self.raw[k] = Outcome.of(p)
            self.margin[k] = self.raw[k].memory_verdict in ("", "fits") and self.raw[k].fits_in_memory

    def micro(self, w: Workload) -> tuple[float, str] | None:
        """Log total time of `w` after the micro-batch rule (at its own GPU count), and why it moved;
        None when `w` is not predicted."""
        k = _key(w)
        if k not in self.raw:
            return None
        if k in self._micro:
            return self._micro[k]
        own = math.log(self.raw[k].total_time_s.estimate)
        b = w.training.micro_batch_size
        value, why = own, ""
        if micro_batch_applies(w) and self.margin[k]:
            level: float | None = None  # running minimum along the powers of two below b
            last = 0
            for g in (x for x in _grid(b) if x & (x - 1) == 0 and x < b):
                kg = _key(_with_micro_batch(w, g))
                if kg not in self.raw or not self.margin[kg]:
                    continue
                t = math.log(self.raw[kg].total_time_s.estimate)
                if level is None or t < level:
                    level, last = t, g
            if level is not None and own > level + TOLERANCE:
                value, why = level, f"micro-batch {b} predicted slower than micro-batch {last}"
            if b & (b - 1):  # between two powers of two: not faster than the next one
                up = _with_micro_batch(w, 1 << b.bit_length())
                above = self.micro(up) if self.margin.get(_key(up), False) else None
                if above is not None and value < above[0] - TOLERANCE:
                    value, why = above[0], f"micro-batch {b} predicted faster than micro-batch {1 << b.bit_length()}"
        self._micro[k] = (value, why)
        return value, why

    def _at(self, w: Workload) -> tuple[float, Outcome] | None:
        """`w` after the micro-batch rule: its log time and its outcome scaled to it (None: not
        predicted, or it does not fit, so it is off the GPU line)."""
        k = _key(w)
        if k not in self.raw or not self.raw[k].fits_in_memory:
            return None
        mb = self.micro(w)
        assert mb is not None
        raw = self.raw[k]
        return mb[0], scaled(raw, math.exp(mb[0] - math.log(raw.total_time_s.estimate)))

    def gpu(self, w: Workload) -> tuple[float, str, str] | None:
        """Log total time of `w` after both rules, why the GPU rule moved it, and the stated effect
        that lets it take longer than fewer GPUs ('communication'; '')."""
        k = _key(w)
        at = self._at(w)
        if at is None:
            return None
        if k in self._gpu:
            return self._gpu[k]
        n = w.parallel.num_gpus
        value, here = at
        why, effect = "", ""
        if gpu_count_applies(w) and n > 1:
            done: list[tuple[int, float, Outcome]] = []
            for c in (x for x in _grid(n) if x & (x - 1) == 0 and x < n):
                wc = _with_gpus(w, c)
                r = self.gpu(wc)
                if r is not None:
                    raw_c = self.raw[_key(wc)]
                    done.append((c, r[0], scaled(raw_c, math.exp(r[0] - math.log(raw_c.total_time_s.estimate)))))
            if done and value > done[-1][1] + TOLERANCE:
                value, why = done[-1][1], f"{n} GPUs predicted slower than {done[-1][0]}"
            if w.parallel.strategy == "ddp":
                for m, tm, om in done:
                    extra = max(0.0, exposed_comm_s(here) - exposed_comm_s(om))
                    bound = tm + math.log(m / n) + math.log1p(extra / om.step_time_s.estimate)
                    if value >= bound - TOLERANCE:
                        continue
                    value = bound
                    limit = om.step_time_s.estimate / (om.step_time_s.estimate + extra)
                    if bound > done[-1][1] + TOLERANCE:
                        effect = "communication"
                        why = (
                            f"{n} GPUs take longer than {done[-1][0]}: the collectives the communication "
                            f"model cannot hide (+{extra:.3g} s a step) cost more than the compute saved"
                        )
                    elif extra > 0:
                        why = (
                            f"ddp {m} -> {n} GPUs capped at the communication model's scaling efficiency "
                            f"{limit:.2f} (+{extra:.3g} s a step of collectives the backward cannot hide)"
                        )
                    else:
                        why = f"ddp {m} -> {n} GPUs capped at linear scaling (efficiency 1, perfect overlap)"
            if n & (n - 1):  # between two powers of two: not faster than the next one
                above = self.gpu(_with_gpus(w, 1 << n.bit_length()))
                if above is not None and value < above[0] - TOLERANCE:
                    value, why = above[0], f"{n} GPUs predicted faster than {1 << n.bit_length()}"
        self._gpu[k] = (value, why, effect)
        return self._gpu[k]

    def consistent(self, w: Workload) -> Consistent:
        k = _key(w)
        raw = self.raw[k]
        mb = self.micro(w)
        assert mb is not None
        value, why = mb
        whys = [why] if why else []
        effect = ""
        g = self.gpu(w)
        if g is not None:
            value, gwhy, effect = g
            whys += [gwhy] if gwhy else []
        delta = value - math.log(raw.total_time_s.estimate)
        if abs(delta) <= 1e-6:
            return Consistent(outcome=raw, raw=raw, effect=effect)
        factor = math.exp(delta)
        text = f"time x{factor:.3g} to obey the physics ({'; '.join(whys)}; perfmodel/decide/physics.py)"
        return Consistent(outcome=scaled(raw, factor), raw=raw, why=text, effect=effect)


def consistent_each(workloads: Sequence[Workload], **predictor: Any) -> list[Consistent | str]:
    """Each workload's prediction after the rules of this module, or why it has none (the first
    line of the error); `predictor`: the options of `perfmodel.prediction.predict_many`. The answer
    for a workload depends on that workload alone, so `sweep`, `compare` and `advise` agree on one
    run. The points of all lines are predicted in one batch."""
    lines = _Lines(predictor)
    own = list(workloads)
    lines.predict(own)
    lines.predict([x for w in own if _key(w) in lines.raw for x in lines.needed(w)])
    return [
        lines.consistent(w) if _key(w) in lines.raw else str(lines.errors[_key(w)]).splitlines()[0] for w in own
    ]


def consistent(workloads: Sequence[Workload], **predictor: Any) -> list[Consistent]:
    """`consistent_each`, raising the first point's own error (what `predict` would raise)."""
    lines = _Lines(predictor)
    own = list(workloads)
    lines.predict(own)
    for w in own:
        if _key(w) in lines.errors:
            raise lines.errors[_key(w)]
    lines.predict([x for w in own for x in lines.needed(w)])
    return [lines.consistent(w) for w in own]


def model_own(workloads: Sequence[Workload], **predictor: Any) -> list[Consistent]:
    """The model's own predictions, unmoved, in the shape `consistent` returns (`--raw`)."""
    return [Consistent(outcome=o, raw=o) for o in (Outcome.of(p) for p in predict_many(list(workloads), **predictor))]
