"""What-if sweeps: one config predicted over a grid of values of any config keys.

    sweep("run.yaml", {"training.micro_batch_size": [1, 2, 4, 8], "hardware.gpu": ["A100-80GB", "H100-SXM"]})

Keys are native dotted keys (`training.micro_batch_size`, `hardware.gpu`, `hardware.num_gpus`, ...)
or, for a Ludwig config, Ludwig keys (`trainer.batch_size`, ...) applied to the Ludwig YAML before
it is resolved (config/source.py). The grid is the Cartesian product, the last key varying
fastest. A point that cannot be resolved (say bf16 on a GPU without it) is kept with its error
instead of stopping the sweep. The learned model is loaded once per process.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from perfmodel.config.native import workload_to_native
from perfmodel.config.overrides import parse_value
from perfmodel.config.source import ConfigSource
from perfmodel.decide.compare import Ratio, changed_keys, flatten, paired_ratio, verdict
from perfmodel.decide.outcome import Outcome
from perfmodel.decide.physics import Consistent, consistent_each
from perfmodel.errors import ConfigError, PerfModelError, quote
from perfmodel.prediction import predict_many, predictor_options
from perfmodel.request import ConfigInput, RunRequest

MAX_POINTS = 10000
"""Largest grid a sweep runs (about 100 s at ~10 ms a point)."""
CSV_INTERVALS = (
    "total_time_s",
    "step_time_s",
    "throughput_tokens_per_s",
    "throughput_samples_per_s",
    "gpu_hours",
    "cost_usd",
    "peak_memory_gb",
    "mfu",
)
"""Interval columns of the CSV (each as _estimate, _low, _high)."""


def parse_vary(text: str) -> tuple[str, list[Any]]:
    """'training.micro_batch_size=1,2,4' -> ('training.micro_batch_size', [1, 2, 4]); each value is
    read as a YAML scalar (so 4 is an int, true a bool, A100-80GB a string)."""
    if "=" not in text:
        raise ConfigError(
            f"--vary {text!r} must look like KEY=V1,V2,..., e.g. training.micro_batch_size=1,2,4,8"
        )
    key, raw = (part.strip() for part in text.split("=", 1))
    if not key or any(not p for p in key.split(".")):
        raise ConfigError(f"--vary {text!r}: the key must be a dotted path such as training.micro_batch_size")
    items = [v.strip() for v in raw.split(",")]
    if not raw.strip() or any(not v for v in items):
        raise ConfigError(f"--vary {text!r}: give values separated by commas, e.g. {key}=1,2,4")
    values = [parse_value(item, source=f"--vary {quote(text)}") for item in items]  # numbers in decimal
    if len(set(map(repr, values))) != len(values):
        raise ConfigError(f"--vary {text!r}: a value is repeated")
    return key, values


@dataclass(frozen=True, kw_only=True)
class SweepPoint:
    """One grid point: the values of the varied keys and its prediction (or why there is none)."""

    values: dict[str, Any]
    """Varied key -> value at this point."""
    outcome: Outcome | None
    """The prediction; None when the point could not be resolved."""
    error: str | None = None
    """Why the point has no prediction."""
    resolved: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The point's resolved native config, flattened to dotted keys (what a paired ratio compares)."""
    adjusted: str = ""
    """Why the prediction was moved to obey the physics along a key (perfmodel/decide/physics.py);
    '' when it was not."""

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values.items())

    def to_json(self) -> dict[str, Any]:
        body = self.outcome.to_json() if self.outcome is not None else dict.fromkeys(Outcome.json_keys())
        return {"values": dict(self.values), "error": self.error, "adjusted": self.adjusted or None, **body}


@dataclass(frozen=True, kw_only=True)
class Winner:
    """The fastest point that fits, and whether it is told apart from the next fastest."""

    best: SweepPoint
    runner_up: SweepPoint | None
    ratio: Ratio | None
    """runner-up time / best time, paired (`perfmodel.decide.compare.paired_ratio`)."""
    line: str
    """The verdict in words."""

    def to_json(self) -> dict[str, Any]:
        return {
            "values": dict(self.best.values),
            "runner_up": dict(self.runner_up.values) if self.runner_up else None,
            "ratio_to_runner_up": self.ratio.to_json() if self.ratio else None,
            "verdict": self.line,
        }


@dataclass(frozen=True, kw_only=True)
class SweepResult:
    """A sweep: the varied keys, their values, and one point per combination."""

    config: str
    """The config's name."""
    dialect: str
    """'native' or 'ludwig'."""
    varied: dict[str, list[Any]]
    """Varied key -> values, in the order given."""
    points: tuple[SweepPoint, ...]
    """Grid points, the last key varying fastest."""
    confidence_level: float
    """Level of every interval."""
    model_kind: str
    """'learned' or 'analytic'."""
    model_version: str
    """Version of the model used."""

    @property
    def keys(self) -> list[str]:
        return list(self.varied)

    def fastest(self) -> Winner | None:
        """The fastest point that fits in memory (by the estimate), and the paired verdict against
        the next fastest; None when no point fits."""
        fitting = sorted(
            (p for p in self.points if p.outcome is not None and p.outcome.fits_in_memory),
            key=lambda p: p.outcome.total_time_s.estimate,  # type: ignore[union-attr]
        )
        if not fitting:
            return None
        best = fitting[0]
        if len(fitting) == 1:
            return Winner(best=best, runner_up=None, ratio=None, line=f"fastest that fits: {best.label} (the only one)")
        second = fitting[1]
        assert best.outcome is not None and second.outcome is not None
        ratio = paired_ratio(
            best.outcome.total_time_s, second.outcome.total_time_s,
            changed_keys(best.resolved, second.resolved), self.confidence_level,
        )
        inverse = Ratio(estimate=1 / ratio.estimate, low=1 / ratio.high, high=1 / ratio.low,
                        significant=ratio.significant, kind=ratio.kind, rho=ratio.rho)
        line = "fastest that fits: " + verdict(best.label, second.label, inverse, self.confidence_level)
        return Winner(best=best, runner_up=second, ratio=ratio, line=line)

    def to_json(self) -> dict[str, Any]:
        winner = self.fastest()
        return {
            "config": self.config,
            "dialect": self.dialect,
            "varied": [{"key": k, "values": list(v)} for k, v in self.varied.items()],
            "confidence_level": self.confidence_level,
            "model": {"kind": self.model_kind, "version": self.model_version},
            "fastest": winner.to_json() if winner else None,
            "points": [p.to_json() for p in self.points],
        }

    def to_csv(self) -> str:
        """One row per point: the varied keys, then each interval as _estimate/_low/_high,
        fits_in_memory, num_gpus, gpu, error."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        header = [*self.keys]
        for name in CSV_INTERVALS:
            header += [f"{name}_estimate", f"{name}_low", f"{name}_high"]
        header += ["fits_in_memory", "gpu", "num_gpus", "usd_per_gpu_hour", "extrapolation", "error"]
        writer.writerow(header)
        for p in self.points:
            row: list[Any] = [p.values[k] for k in self.keys]
            data = p.outcome.to_json() if p.outcome is not None else {}
            for name in CSV_INTERVALS:
                iv = data.get(name)
                row += [iv["estimate"], iv["low"], iv["high"]] if iv else ["", "", ""]
            o = p.outcome
            row += [
                o.fits_in_memory if o else "",
                o.gpu if o else "",
                o.num_gpus if o else "",
                o.usd_per_gpu_hour if o and o.usd_per_gpu_hour is not None else "",
                "; ".join(o.extrapolation) if o else "",
                p.error or "",
            ]
            writer.writerow(row)
        return out.getvalue()


def sweep(
    config: ConfigInput | RunRequest,
    vary: Mapping[str, Sequence[Any]] | Sequence[str],
    /,
    *,
    physics: bool = True,
    **options: Any,
) -> SweepResult:
    """Predict `config` at every combination of `vary` (key -> values, or 'KEY=V1,V2' strings);
    `options` are a run request's (`perfmodel.request.RunRequest.of`: overrides, tokens, rows,
    dataset, price_per_gpu_hour, confidence, model_dir, use_learned, ...), applied to every point.
    With `physics`, every point is predicted through `perfmodel.decide.physics.consistent_each`:
    monotone along the micro-batch and the data-parallel GPU count, ddp within the communication
    model's scaling bound (each moved point says so in `adjusted`), the same answer `compare` and
    `advise` give for that run."""
    request = RunRequest.of(config, **options)
    varied = _varied(vary)
    source = ConfigSource.of(request)
    for key in varied:
        source.check_change_key(key)
    grid = list(itertools.product(*varied.values()))
    if len(grid) > MAX_POINTS:
        raise ConfigError(f"the sweep has {len(grid):,} points; at most {MAX_POINTS:,}: vary fewer values")
    resolved: list[tuple[dict[str, Any], Any, str | None]] = []
    for combo in grid:
        values = dict(zip(varied, combo, strict=True))
        try:
            resolved.append((values, source.workload(values), None))
        except PerfModelError as exc:
            resolved.append((values, None, str(exc).splitlines()[0]))
    predictor = predictor_options(request)
    workloads = [w for _, w, _ in resolved if w is not None]
    batch: list[Any]
    if physics:  # every point on its own canonical lines (perfmodel/decide/physics.py)
        batch = list(consistent_each(workloads, **predictor))
    else:
        batch = [Consistent(outcome=o, raw=o) if not isinstance(o, str) else o for o in _raw(workloads, predictor)]
    predictions = iter(batch)
    points = []
    kind, version = "analytic", ""
    for values, workload, error in resolved:
        pred = next(predictions) if workload is not None else error
        if isinstance(pred, str) or pred is None:
            points.append(SweepPoint(values=values, outcome=None, error=pred))
            continue
        kind, version = pred.outcome.model_kind, pred.outcome.model_version
        points.append(
            SweepPoint(values=values, outcome=pred.outcome, resolved=flatten(workload_to_native(workload)),
                       adjusted=pred.why)
        )
    if all(p.outcome is None for p in points):
        raise ConfigError(f"no point of the sweep could be predicted; the first error: {points[0].error}")
    return SweepResult(
        config=source.label,
        dialect=source.dialect,
        varied=varied,
        points=tuple(points),
        confidence_level=request.confidence,
        model_kind=kind,
        model_version=version,
    )


def _raw(workloads: Sequence[Any], predictor: dict[str, Any]) -> list[Outcome | str]:
    """The model's own predictions (no physics), one batch; a point that cannot be predicted keeps
    the first line of its error."""
    try:
        return [Outcome.of(p) for p in predict_many(workloads, **predictor)]
    except PerfModelError:  # predict them one by one to say which
        out: list[Outcome | str] = []
        for w in workloads:
            try:
                out.append(Outcome.of(predict_many([w], **predictor)[0]))
            except PerfModelError as exc:
                out.append(str(exc).splitlines()[0])
        return out


def _varied(vary: Mapping[str, Sequence[Any]] | Sequence[str]) -> dict[str, list[Any]]:
    if isinstance(vary, Mapping):
        pairs = [(str(k), list(v)) for k, v in vary.items()]
    else:
        pairs = [parse_vary(text) for text in vary]
    if not pairs:
        raise ConfigError("give at least one key to vary, e.g. --vary training.micro_batch_size=1,2,4,8")
    out: dict[str, list[Any]] = {}
    for key, values in pairs:
        if key in out:
            raise ConfigError(f"--vary {key} is given twice; give all its values in one --vary")
        if not values:
            raise ConfigError(f"--vary {key} has no values")
        out[key] = values
    return out
