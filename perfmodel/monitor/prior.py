"""The prior of a monitored run: perfmodel's prediction for the config that is running.

Adapters accept any of: a `StepTimePrior`, a `PredictedRun`, a config file path (native or
Ludwig), or a native config mapping. A config that cannot be predicted never stops training: the
monitor then runs on observations alone and says why in `notes`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel.config import resolve_workload, workload_to_native
from perfmodel.errors import PerfModelError
from perfmodel.monitor.eta import StepTimePrior
from perfmodel.prediction import predict
from perfmodel.request import RunRequest


@dataclass(frozen=True, kw_only=True)
class PriorInfo:
    """What a monitor starts from."""

    prior: StepTimePrior | None
    """Predicted step time with its interval (None: observations only)."""
    total_steps: int | None = None
    """Steps the prediction expects (adapters prefer the trainer's own count)."""
    config: dict[str, Any] | None = None
    """The resolved native config (recorded with the run, used by `perfmodel ingest`)."""
    framework: str | None = None
    """Software stack family of the workload."""
    notes: list[str] = field(default_factory=list)
    """Why there is no prior, what was assumed."""

    def prediction_json(self) -> dict[str, Any] | None:
        if self.prior is None:
            return None
        p = self.prior
        return {
            "step_time_s": {"estimate": p.estimate_s, "low": p.low_s, "high": p.high_s},
            "confidence_level": p.confidence,
        }


def native_config(workload: Any) -> dict[str, Any]:
    """The native config of a workload, loadable again (a CPU is written as 'cpu', this machine)."""
    cfg = workload_to_native(workload)
    if workload.gpu.vendor == "cpu":
        cfg["hardware"]["gpu"] = "cpu"
    cfg["training"].pop("dataset", None)
    for section in ("model", "training", "hardware"):  # empty descriptions ('source') do not load back
        cfg[section] = {k: v for k, v in cfg[section].items() if v != ""}
    return cfg


def load_config_workload(config: str | Path | Mapping[str, Any], overrides: Sequence[str] = ()) -> Any:
    """A Workload from a config file or a config mapping (+ `--set` style overrides), resolved as
    every front door resolves one (`perfmodel.config.resolve_workload`)."""
    source = Path(config) if isinstance(config, str) else config
    return resolve_workload(RunRequest.of(source, overrides=list(overrides)))


def resolve_prior(
    *,
    config: str | Path | Mapping[str, Any] | None = None,
    prediction: Any = None,
    prior: StepTimePrior | None = None,
    overrides: Sequence[str] = (),
    model_dir: str | Path | None = None,
    confidence: float = 0.9,
) -> PriorInfo:
    """The prior from whichever was given (first of prior, prediction, config)."""
    if prior is not None:
        return PriorInfo(prior=prior)
    notes: list[str] = []
    steps_known = True
    if prediction is None and config is not None:
        try:
            prediction = predict(
                load_config_workload(config, overrides), confidence=confidence, model_dir=model_dir
            )
        except PerfModelError as exc:
            try:  # the step time does not depend on the amount of data: a config without one still gives it
                w = load_config_workload(config, [*overrides, "training.steps=1"])
                prediction = predict(w, confidence=confidence, model_dir=model_dir)
            except PerfModelError:
                return PriorInfo(
                    prior=None,
                    notes=[f"no prediction to start from ({exc}); the ETA uses observed steps only"],
                )
            steps_known = False
            notes.append(
                "the config does not say how much data: step time predicted, the step count is the trainer's"
            )
    if prediction is None:
        return PriorInfo(prior=None, notes=["no config given: the ETA uses observed steps only"])
    st = prediction.step_time_s
    return PriorInfo(
        prior=StepTimePrior(
            estimate_s=st.estimate, low_s=st.low, high_s=st.high, confidence=prediction.confidence_level
        ),
        total_steps=int(prediction.total_steps) if steps_known else None,
        config=native_config(prediction.workload),
        framework=prediction.workload.framework,
        notes=notes,
    )
