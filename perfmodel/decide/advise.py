"""Advice: which precision, micro-batch, activation checkpointing, strategy, GPU type and count (and,
for a native config of a 16-bit ResNet, the channels_last memory format) to run a config with,
ranked by time and by cost among the options that meet a deadline and a budget.

The search keeps the user's global batch (samples per optimizer step: a training hyperparameter,
not a speed knob) and, per GPU type x precision x GPU count x strategy x checkpointing, takes the
largest micro-batch that fits and divides the per-replica batch (gradient accumulation makes up
the rest). It prunes by memory first (the analytic memory model, microseconds per check), drops
checkpointing where it does not buy a larger micro-batch, and predicts only what is left. Every
option is the user's config with a few keys changed, resolved and predicted like `predict` would
(for a Ludwig config the change is written in Ludwig's keys and applied to the Ludwig YAML).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from perfmodel.analytic.fit_verdict import verdict_of
from perfmodel.catalog import get_gpu, resolve_gpu_key
from perfmodel.config.source import ConfigSource
from perfmodel.decide.compare import Ratio, paired_ratio, verdict
from perfmodel.decide.express import current_value, express, flag_text
from perfmodel.decide.outcome import Outcome
from perfmodel.decide.physics import Consistent, consistent, model_own
from perfmodel.decide.screen import screen
from perfmodel.decide.search import (
    DEFAULT_GPUS,
    DEFAULT_MAX_GPUS,
    candidates,
    describe,
    global_batch,
    native_diff,
)
from perfmodel.errors import ConfigError, PerfModelError
from perfmodel.prediction import predictor_options
from perfmodel.request import ConfigInput, RunRequest
from perfmodel.workload import Workload

CONSEQUENCES = ("framework", "hardware.cpu_offload")
"""Keys a Ludwig change may move along with the intended ones (a Ray strategy that is not DeepSpeed
ends DeepSpeed's framework and offload); they show in the option's diff of Ludwig keys."""
SHORTLIST_FACTOR = 3
"""Options predicted in full per ranking: this many times `top`, taken in the screen's order."""
FASTEST_COST_FACTOR = 2.0
"""Without a budget, "fastest" ranks the options that cost at most this many times the cheapest
one: otherwise the fastest option is always the most GPUs the search allows, at any price."""


@dataclass(frozen=True, kw_only=True)
class KeyChange:
    """One key of the user's config changed by an option."""

    key: str
    """The key in the config's dialect (native or Ludwig)."""
    old: Any
    """Its value now (as written, else as resolved; None: not set)."""
    new: Any
    """Its value in the option."""
    flag: str = ""
    """For keys a Ludwig config cannot hold (hardware): the perfmodel flag that gives it."""

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "from": self.old, "to": self.new, "flag": self.flag or None}


@dataclass(frozen=True, kw_only=True)
class Option:
    """One way to run the config."""

    label: str
    """GPUs, strategy, precision, batch, checkpointing in one line."""
    changes: tuple[KeyChange, ...]
    """The diff against the user's config, in its dialect."""
    native_changes: dict[str, Any]
    """The same change in native keys."""
    outcome: Outcome
    """Its prediction."""
    meets_constraints: bool
    """Within the deadline and the budget (and fits in memory)."""
    tight_memory: bool
    """Fits by the estimate, but the memory interval's high end does not."""
    vs_current: Ratio | None = None
    """This option's time / the current config's, paired (`perfmodel.decide.compare.paired_ratio`)."""
    adjusted: str = ""
    """Why the prediction was moved to obey the physics along micro-batch and GPU count
    (perfmodel/decide/physics.py); '' when it was not."""

    def verdict_vs_current(self, confidence: float) -> str:
        """Whether this option is faster than the config as it is, by the paired interval."""
        if self.vs_current is None:
            return ""
        return verdict("this option", "the config as it is", self.vs_current, confidence)

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "changes": [c.to_json() for c in self.changes],
            "native_changes": dict(self.native_changes),
            "meets_constraints": self.meets_constraints,
            "tight_memory": self.tight_memory,
            "time_ratio_to_current": self.vs_current.to_json() if self.vs_current else None,
            "adjusted": self.adjusted or None,
            **self.outcome.to_json(),
        }


@dataclass(frozen=True, kw_only=True)
class Advice:
    """The options that meet the constraints, fastest first and cheapest first."""

    config: str
    """The config's name."""
    dialect: str
    """'native' or 'ludwig'."""
    deadline_s: float | None
    """Deadline on total time, s."""
    budget_usd: float | None
    """Budget on cost, USD."""
    conservative: bool
    """Constraints applied to the intervals' high ends instead of the estimates."""
    global_batch: int
    """Samples per optimizer step, kept by every option."""
    gpus: tuple[str, ...]
    """Accelerators searched."""
    max_gpus: int
    """Largest GPU count searched."""
    current: Option | None
    """The config as it is (None when it cannot be predicted)."""
    by_time: tuple[Option, ...]
    """Fastest options that meet the constraints."""
    by_cost: tuple[Option, ...]
    """Cheapest options that meet the constraints."""
    searched: int
    """Combinations looked at (before pruning by memory)."""
    fitting: int
    """Combinations that fit by the memory model (after pruning)."""
    meeting: int
    """Of those, how many meet the constraints by the screen (decide/screen.py)."""
    predicted: int
    """Shortlisted options predicted in full (`predict`) that fit; the rankings come from these."""
    confidence_level: float
    """Level of every interval."""
    notes: tuple[str, ...] = ()
    """What was excluded and why."""
    fastest_cost_limit_usd: float | None = None
    """The cost the fastest ranking stays within: the budget, else `FASTEST_COST_FACTOR` x the
    cheapest option's cost (None: no price known)."""

    def first_vs_second(self) -> str:
        """Whether the fastest option is told apart from the second fastest (paired), in words."""
        if len(self.by_time) < 2:
            return ""
        a, b = self.by_time[0], self.by_time[1]
        keys = set(a.native_changes) | set(b.native_changes)
        keys = {k for k in keys if a.native_changes.get(k) != b.native_changes.get(k)}
        ratio = paired_ratio(b.outcome.total_time_s, a.outcome.total_time_s, keys, self.confidence_level)
        return verdict("option 1", "option 2", ratio, self.confidence_level)

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "dialect": self.dialect,
            "constraints": {
                "deadline_s": self.deadline_s,
                "budget_usd": self.budget_usd,
                "conservative": self.conservative,
                "global_batch": self.global_batch,
                "gpus": list(self.gpus),
                "max_gpus": self.max_gpus,
                "fastest_cost_limit_usd": self.fastest_cost_limit_usd,
            },
            "confidence_level": self.confidence_level,
            "current": self.current.to_json() if self.current else None,
            "by_time": [o.to_json() for o in self.by_time],
            "by_cost": [o.to_json() for o in self.by_cost],
            "searched": self.searched,
            "fitting": self.fitting,
            "meeting": self.meeting,
            "predicted": self.predicted,
            "fastest_vs_next": self.first_vs_second() or None,
            "notes": list(self.notes),
        }


def _within(
    time_s: float, cost_usd: float | None, deadline_s: float | None, budget_usd: float | None
) -> bool:
    if deadline_s is not None and time_s > deadline_s:
        return False
    return budget_usd is None or (cost_usd is not None and cost_usd <= budget_usd)


def _meets(o: Outcome, deadline_s: float | None, budget_usd: float | None, conservative: bool) -> bool:
    if not o.fits_in_memory:
        return False
    if conservative:
        cost = o.cost_usd.high if o.cost_usd is not None else None
        return _within(o.total_time_s.high, cost, deadline_s, budget_usd)
    cost = o.cost_usd.estimate if o.cost_usd is not None else None
    return _within(o.total_time_s.estimate, cost, deadline_s, budget_usd)


@dataclass(frozen=True, kw_only=True)
class _Candidate:
    """An option written in the config's dialect, before it is predicted."""

    workload: Workload
    changes: tuple[KeyChange, ...]
    realized: dict[str, Any]


def _candidate(source: ConfigSource, base: Workload, native: dict[str, Any]) -> _Candidate | None:
    """The option as the config's own keys give it; None when they cannot (the dialect's keys did
    not give the intended run)."""
    expressed = express(native, source, base.parallel.num_gpus, base.parallel.strategy)
    if expressed is None:
        return None
    config_changes, flags = expressed
    w = source.workload({**config_changes, **flags})
    realized = native_diff(base, w)
    extra = set(realized) - set(native) - set(CONSEQUENCES)
    if extra or any(realized.get(k) != v for k, v in native.items()):
        return None
    changes = [KeyChange(key=k, old=current_value(source, k), new=v) for k, v in config_changes.items()]
    changes += [
        KeyChange(key=k, old=current_value(source, k), new=v, flag=flag_text(k, v)) for k, v in flags.items()
    ]
    changes = [c for c in changes if c.old != c.new]  # e.g. backend.type: ray stays ray
    return _Candidate(workload=w, changes=tuple(changes), realized=realized)


def _option(
    candidate: _Candidate, predicted: Consistent, constraints: tuple[float | None, float | None, bool]
) -> Option:
    outcome = predicted.outcome
    return Option(
        label=describe(candidate.workload),
        changes=candidate.changes,
        native_changes=candidate.realized,
        outcome=outcome,
        meets_constraints=_meets(outcome, *constraints),
        tight_memory=outcome.tight,
        adjusted=predicted.why,
    )


def advise(
    config: ConfigInput | RunRequest,
    /,
    *,
    deadline_s: float | None = None,
    budget_usd: float | None = None,
    gpus: Sequence[str] | None = None,
    max_gpus: int = DEFAULT_MAX_GPUS,
    conservative: bool = False,
    top: int = 5,
    physics: bool = True,
    **options: Any,
) -> Advice:
    """Search how to run `config` and rank the options that fit and meet the deadline (total time,
    s) and budget (USD): fastest first and cheapest first, `top` of each. With `conservative`, the
    constraints apply to the intervals' high ends. With `physics` (the default) every number is
    `perfmodel.decide.physics.consistent`'s, the answer `sweep` and `compare` give for that run. `options` are a run request's
    (`perfmodel.request.RunRequest.of`: overrides, tokens, rows, price_per_gpu_hour, confidence, ...)."""
    for name, value in (("--deadline", deadline_s), ("--budget", budget_usd)):
        if value is not None and not value > 0:
            raise ConfigError(f"{name} must be > 0, got {value!r}")
    if isinstance(max_gpus, bool) or not isinstance(max_gpus, int) or max_gpus < 1:
        raise ConfigError(f"--max-gpus must be a whole number >= 1, got {max_gpus!r}")
    if top < 1:
        raise ConfigError(f"--top must be >= 1, got {top!r}")
    request = RunRequest.of(config, **options)
    source = ConfigSource.of(request)
    base = source.base()
    names = list(gpus) if gpus else [base.gpu.name, *DEFAULT_GPUS]
    keys: list[str] = []
    for name in names:
        key = resolve_gpu_key(name)
        if key is None:
            get_gpu(name)  # raises with close matches
        elif key not in keys:
            keys.append(str(key))
    predictor = predictor_options(request)
    constraints = (deadline_s, budget_usd, conservative)
    notes: list[str] = []
    if request.price_per_gpu_hour is not None and len(keys) > 1:
        notes.append(f"--price {request.price_per_gpu_hour:g} applies to every accelerator searched")
    found_by_memory: list[tuple[dict[str, Any], Workload]] = []
    searched = 0
    if base.model.arch == "gbm":
        notes.append(
            "a gradient-boosted-trees model trains with LightGBM on the CPU: no GPU settings to search"
        )
    else:
        found_by_memory, searched = candidates(source, base, keys, max_gpus, notes)
    screened = screen([w for _, w in found_by_memory], **predictor)
    passing = []
    for (native, _), s in zip(found_by_memory, screened, strict=True):
        time_s = s.total_time_high_s if conservative else s.total_time_s
        cost = s.cost_high_usd if conservative else s.cost_usd
        if _within(time_s, cost, deadline_s, budget_usd):
            passing.append((native, s))
    inf = float("inf")
    priced = [s.cost_usd for _, s in passing if s.cost_usd is not None]
    screen_limit = FASTEST_COST_FACTOR * min(priced) if budget_usd is None and priced else inf
    tried: dict[int, _Candidate | None] = {}
    refused: dict[str, int] = {}
    for by_time_rank, rank in (
        (True, lambda item: item[1].total_time_s),
        (False, lambda item: item[1].cost_usd if item[1].cost_usd is not None else inf),
    ):
        kept = 0  # walk down the ranking until enough options the config's own keys can express
        for native, screened_option in sorted(passing, key=rank):
            if by_time_rank and (screened_option.cost_usd if screened_option.cost_usd is not None else 0) > screen_limit:
                continue
            if kept >= SHORTLIST_FACTOR * top:
                break
            if id(native) not in tried:
                try:
                    candidate = _candidate(source, base, native)
                except PerfModelError as exc:  # e.g. Ludwig refuses the keys that would express it
                    candidate = None
                    reason = str(exc).splitlines()[0]
                    refused[reason] = refused.get(reason, 0) + 1
                fits = candidate is not None and verdict_of(candidate.workload).fits  # predict's verdict
                tried[id(native)] = candidate if fits else None
            kept += tried[id(native)] is not None
    shortlist: list[_Candidate] = [c for c in tried.values() if c is not None]
    for reason, count in refused.items():
        notes.append(f"{count} option(s) the screen passed were refused when written as the config: {reason}")
    # one batch for the shortlist and the config as it is, each on its canonical lines (physics.py)
    predicted = (consistent if physics else model_own)([base, *(c.workload for c in shortlist)], **predictor)
    found = [_option(c, p, constraints) for c, p in zip(shortlist, predicted[1:], strict=True)]
    found = [o for o in found if o.outcome.fits_in_memory]
    current_pred = predicted[0].outcome
    current = Option(
        label=describe(base),
        changes=(),
        native_changes={},
        outcome=current_pred,
        meets_constraints=_meets(current_pred, *constraints),
        tight_memory=current_pred.tight,
        adjusted=predicted[0].why,
    )
    found = [
        dataclasses.replace(
            o,
            vs_current=paired_ratio(
                current_pred.total_time_s, o.outcome.total_time_s, o.native_changes, request.confidence
            ),
        )
        for o in found
    ]
    meeting = [o for o in found if o.meets_constraints]
    if budget_usd is not None:
        unpriced = sorted({o.outcome.gpu for o in found if o.outcome.cost_usd is None})
        if unpriced:
            notes.append(f"no price for {', '.join(unpriced)}: excluded under a budget (give --price)")

    def cost_key(o: Option) -> float:
        return o.outcome.cost_usd.estimate if o.outcome.cost_usd is not None else inf

    cheapest = min((cost_key(o) for o in meeting), default=inf)
    limit = budget_usd if budget_usd is not None else (FASTEST_COST_FACTOR * cheapest if cheapest < inf else None)
    if budget_usd is None and limit is not None:
        notes.append(
            f"fastest: options costing at most {FASTEST_COST_FACTOR:g}x the cheapest (${limit:,.0f}); "
            "give --budget to set the limit, --max-gpus to cap the GPUs"
        )
    by_time = sorted(
        (o for o in meeting if limit is None or o.outcome.cost_usd is None or o.outcome.cost_usd.estimate <= limit),
        key=lambda o: (o.outcome.total_time_s.estimate, cost_key(o), len(o.changes)),
    )
    by_cost = sorted(
        (o for o in meeting if o.outcome.cost_usd is not None),
        key=lambda o: (cost_key(o), o.outcome.total_time_s.estimate, len(o.changes)),
    )
    return Advice(
        config=source.label,
        dialect=source.dialect,
        deadline_s=deadline_s,
        budget_usd=budget_usd,
        conservative=conservative,
        global_batch=global_batch(base),
        gpus=tuple(keys),
        max_gpus=max_gpus,
        current=current,
        by_time=tuple(by_time[:top]),
        by_cost=tuple(by_cost[:top]),
        searched=searched,
        fitting=len(found_by_memory),
        meeting=len(passing),
        predicted=len(found),
        confidence_level=request.confidence,
        notes=tuple(notes),
        fastest_cost_limit_usd=limit,
    )
