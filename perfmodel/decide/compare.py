"""Configs side by side, with the ratio of each one's time (and cost) to the first's.

The interval of a ratio is not the ratio of two intervals: the errors of two predictions by the
same model are correlated (same model, same biases), so they partly cancel in a ratio. A
pair-specific interval would come from the out-of-fold residuals of measured pairs that differ the
same way; the shipped model keeps only the sorted |residuals| of its calibration (no signs, no
row identities), so perfmodel approximates it instead, combining the two log half-widths in
quadrature:

    log(T_b / T_a) = log T_b - log T_a,    half-width ~= sqrt(h_a^2 + h_b^2)

with h the log half-width of each prediction's interval (upper side of one with lower side of the
other). This is the interval of a difference of independent, roughly normal (in log) errors, and
only an approximation otherwise: positively correlated errors (the likely case: one model's
biases) make the true interval narrower, negatively correlated ones wider, and errors far from
normal (the conformal ends are residual quantiles, not normal ones) move it either way. It is
not a guaranteed bound. A difference counts as larger than the uncertainty when the ratio's
interval excludes 1.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfmodel.config.native import workload_to_native
from perfmodel.config.source import ConfigSource
from perfmodel.decide.outcome import Outcome
from perfmodel.errors import ConfigError
from perfmodel.prediction import predict, predictor_options
from perfmodel.request import ConfigInput, RunRequest

RATIO_METHOD = (
    "log-ratio half-width sqrt(h_a^2 + h_b^2) from each prediction's interval: an approximation that "
    "assumes independent, roughly normal errors (correlated errors of one model would narrow it); "
    "pair residuals are not stored"
)


@dataclass(frozen=True, kw_only=True)
class Ratio:
    """value(config) / value(baseline) with its interval at the comparison's level."""

    estimate: float
    low: float
    high: float
    significant: bool
    """True when the interval excludes 1: the difference is larger than the uncertainty."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def ratio_interval(a: Any, b: Any) -> Ratio:
    """b / a for two intervals (objects with estimate, low, high > 0), its interval the log
    half-widths combined in quadrature (the approximation in the module docstring)."""
    for iv in (a, b):
        if not 0 < iv.low <= iv.estimate <= iv.high:
            raise ConfigError(f"a ratio needs positive intervals, got {iv}")
    up_a, down_a = math.log(a.high / a.estimate), math.log(a.estimate / a.low)
    up_b, down_b = math.log(b.high / b.estimate), math.log(b.estimate / b.low)
    r = b.estimate / a.estimate
    low = r * math.exp(-math.hypot(down_b, up_a))
    high = r * math.exp(math.hypot(up_b, down_a))
    return Ratio(estimate=r, low=low, high=high, significant=high < 1.0 or low > 1.0)


@dataclass(frozen=True, kw_only=True)
class ComparedRun:
    """One config of a comparison."""

    label: str
    """The config's name."""
    outcome: Outcome
    """Its prediction."""
    resolved: dict[str, Any]
    """Its resolved native config, flattened to dotted keys."""
    time_ratio: Ratio
    """total time / the first config's total time."""
    cost_ratio: Ratio | None
    """cost / the first config's cost (None without both prices)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "time_ratio": self.time_ratio.to_json(),
            "cost_ratio": self.cost_ratio.to_json() if self.cost_ratio else None,
            **self.outcome.to_json(),
        }


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Configs side by side; ratios are to the first."""

    runs: tuple[ComparedRun, ...]
    """The configs in the order given."""
    differences: dict[str, list[Any]]
    """Resolved keys whose values differ -> the value in each config (None: not set)."""
    confidence_level: float
    """Level of every interval."""
    method: str = RATIO_METHOD
    """How ratio intervals are approximated."""

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline": self.runs[0].label,
            "confidence_level": self.confidence_level,
            "ratio_method": self.method,
            "differences": {k: list(v) for k, v in self.differences.items()},
            "runs": [r.to_json() for r in self.runs],
        }


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def parse_variant(text: str) -> dict[str, Any]:
    """'hardware.gpu=H100-SXM,training.micro_batch_size=16' -> {key: value}; values are YAML scalars."""
    # PyYAML: only when YAML is read
    import yaml

    changes: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",")):
        key, sep, raw = part.partition("=")
        if not sep or not key.strip() or not raw.strip():
            raise ConfigError(
                f"--variant {text!r} must look like KEY=VALUE[,KEY=VALUE...], e.g. hardware.gpu=H100-SXM"
            )
        try:
            changes[key.strip()] = yaml.safe_load(raw.strip())
        except yaml.YAMLError as exc:
            raise ConfigError(f"--variant {text!r}: {raw!r} is not a YAML scalar") from exc
    return changes


def compare(
    configs: Sequence[ConfigInput],
    /,
    *,
    variants: Sequence[Mapping[str, Any] | str] = (),
    request: RunRequest | None = None,
    **options: Any,
) -> Comparison:
    """Predict each config (the same options applied to all: `request`'s, and a run request's
    keywords, `perfmodel.request.RunRequest.of`), then each variant of the first config (a few
    keys changed, native or Ludwig keys as in `sweep`), and compare them with the first."""
    request = RunRequest.of(request, **options)
    changes = [parse_variant(v) if isinstance(v, str) else dict(v) for v in variants]
    if not configs or len(configs) + len(changes) < 2:
        raise ConfigError("compare needs at least two configs (or a config and a --variant)")
    workloads = []
    first: ConfigSource | None = None
    for i, config in enumerate(configs):
        source = ConfigSource.of(request.replace(config=config))
        first = first or source
        label = source.label if not isinstance(config, Mapping) else f"config {i + 1}"
        workloads.append((label, source.base()))
    assert first is not None
    for change in changes:
        for key in change:
            first.check_change_key(key)
        label = ", ".join(f"{k}={v}" for k, v in change.items())
        workloads.append((label, first.workload(change)))
    predictor = predictor_options(request)
    entries = []
    for label, w in workloads:
        outcome = Outcome.of(predict(w, **predictor))
        entries.append((label, outcome, flatten(workload_to_native(w))))
    labels = [e[0] for e in entries]
    if len(set(labels)) < len(labels):
        labels = [f"{lab} (#{i + 1})" for i, lab in enumerate(labels)]
    base = entries[0][1]
    runs = []
    same = Ratio(estimate=1.0, low=1.0, high=1.0, significant=False)
    for i, (label, outcome, resolved) in enumerate(
        zip(labels, (e[1] for e in entries), (e[2] for e in entries), strict=True)
    ):
        cost = None
        if (
            base.cost_usd is not None
            and outcome.cost_usd is not None
            and base.cost_usd.low > 0
            and outcome.cost_usd.low > 0
        ):
            cost = same if i == 0 else ratio_interval(base.cost_usd, outcome.cost_usd)
        time_ratio = same if i == 0 else ratio_interval(base.total_time_s, outcome.total_time_s)
        runs.append(
            ComparedRun(
                label=label, outcome=outcome, resolved=resolved, time_ratio=time_ratio, cost_ratio=cost
            )
        )
    keys = sorted({k for r in runs for k in r.resolved})
    differences = {
        k: [r.resolved.get(k) for r in runs]
        for k in keys
        if len({repr(r.resolved.get(k)) for r in runs}) > 1 and k != "model.source"
    }
    return Comparison(runs=tuple(runs), differences=differences, confidence_level=request.confidence)
