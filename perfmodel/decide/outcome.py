"""The part of a prediction that a decision compares: time, throughput, cost, memory, MFU, each
with its interval, the fits verdict, and the warnings that say a prediction extrapolates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfmodel.prediction import Interval, PredictedRun

JSON_KEYS = (
    "total_time_s",
    "step_time_s",
    "throughput_tokens_per_s",
    "throughput_samples_per_s",
    "gpu_hours",
    "cost_usd",
    "price_per_gpu_hour",
    "peak_memory_gb",
    "memory_capacity_gb",
    "fits_in_memory",
    "device_memory_gb",
    "memory_verdict",
    "mfu",
    "gpu",
    "num_gpus",
    "total_steps",
    "extrapolation",
    "warnings",
)
"""Keys of `Outcome.to_json()`, in order."""
EXTRAPOLATION_MARKERS = (
    "training data",
    "training range",
    "widened",
    "analytic model only",
    "not calibrated",
)
"""Words of `predict` warnings that mark a prediction resting on extrapolation (outside what the
learned model was trained on, or no learned model at all)."""


def _verdict_name(v: Any) -> str:
    return str(v.verdict) if v is not None else ""


def _iv(iv: Interval | None) -> dict[str, float] | None:
    return iv.as_dict() if iv is not None else None


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """One predicted run, reduced to what decisions compare. Intervals at `confidence_level`."""

    total_time_s: Interval
    """Wall time of the whole run, s."""
    step_time_s: Interval
    """Time of one optimizer step, s."""
    throughput_tokens_per_s: Interval | None
    """Tokens per second over all GPUs (None where tokens do not apply)."""
    throughput_samples_per_s: Interval
    """Samples per second over all GPUs."""
    gpu_hours: Interval
    """total_time_s x GPUs / 3600, GPU-hours."""
    cost_usd: Interval | None
    """gpu_hours x price per GPU-hour, USD; None when no price is known."""
    usd_per_gpu_hour: float | None
    """The price used, USD per GPU-hour."""
    price_source: str
    """Where the price comes from ('' when none)."""
    peak_memory_gb: Interval
    """Allocated peak memory per GPU, GB."""
    memory_capacity_gb: float
    """Memory of one GPU, GB (0: no limit known)."""
    fits_in_memory: bool
    """The verdict is 'fits' or 'tight' (perfmodel.analytic.fit_verdict)."""
    mfu: Interval | None
    """Model FLOPs utilisation (fraction of the dense datasheet peak)."""
    num_gpus: int
    """GPUs of the run."""
    gpu: str
    """Accelerator catalog key."""
    total_steps: int
    """Optimizer steps."""
    confidence_level: float
    """Level of every interval."""
    warnings: tuple[str, ...] = ()
    """The prediction's warnings."""
    device_memory_gb: Interval | None = None
    """The device total per GPU (what the verdict compares), GB."""
    memory_verdict: str = ""
    """fits, tight or does not fit (perfmodel.analytic.fit_verdict)."""
    comm_s: float = 0.0
    """The analytic model's communication per step if nothing overlapped, s (not in `to_json`)."""
    comm_exposed_s: float = 0.0
    """The part of it the analytic model cannot hide behind compute, s (not in `to_json`)."""
    bound_step_s: float = 0.0
    """The analytic step time the learned correction multiplies, s (not in `to_json`)."""
    model_step_s: float = 0.0
    """The model's own step time, s, kept when the physics moves the prediction (not in `to_json`)."""
    model_kind: str = ""
    """'learned' or 'analytic' (not in `to_json`)."""
    model_version: str = ""
    """Version of the model that predicted it (not in `to_json`)."""

    @property
    def tight(self) -> bool:
        """The verdict is 'tight': the estimate fits, the interval's high end does not."""
        return self.memory_verdict == "tight"

    @classmethod
    def of(cls, pred: PredictedRun) -> Outcome:
        price = getattr(pred, "price", None)
        analytic = getattr(pred, "analytic", None)
        return cls(
            total_time_s=pred.total_time_s,
            step_time_s=pred.step_time_s,
            throughput_tokens_per_s=pred.throughput_tokens_per_s,
            throughput_samples_per_s=pred.throughput_samples_per_s,
            gpu_hours=pred.gpu_hours,
            cost_usd=getattr(pred, "cost_usd", None),
            usd_per_gpu_hour=price.usd_per_gpu_hour if price is not None else None,
            price_source=price.source if price is not None else "",
            peak_memory_gb=pred.peak_memory_gb,
            memory_capacity_gb=pred.memory_capacity_gb,
            fits_in_memory=pred.fits_in_memory,
            mfu=pred.mfu,
            num_gpus=pred.workload.parallel.num_gpus,
            gpu=pred.workload.gpu.name,
            total_steps=pred.total_steps,
            confidence_level=pred.confidence_level,
            warnings=pred.warnings,
            device_memory_gb=getattr(pred, "device_memory_gb", None),
            memory_verdict=_verdict_name(getattr(pred, "memory_verdict", None)),
            comm_s=float(getattr(analytic, "t_comm_s", 0.0) or 0.0),
            comm_exposed_s=float(getattr(analytic, "t_comm_exposed_s", 0.0) or 0.0),
            bound_step_s=float(getattr(analytic, "t_bound_s", 0.0) or 0.0),
            model_step_s=float(pred.step_time_s.estimate),
            model_kind=str(getattr(pred, "model_kind", "") or ""),
            model_version=str(getattr(pred, "model_version", "") or ""),
        )

    @property
    def extrapolation(self) -> tuple[str, ...]:
        """The warnings that say this prediction extrapolates."""
        return tuple(w for w in self.warnings if any(m in w for m in EXTRAPOLATION_MARKERS))

    @staticmethod
    def json_keys() -> tuple[str, ...]:
        """The keys of `to_json` (for rows without a prediction, filled with null)."""
        return JSON_KEYS

    def to_json(self) -> dict[str, Any]:
        return {
            "total_time_s": _iv(self.total_time_s),
            "step_time_s": _iv(self.step_time_s),
            "throughput_tokens_per_s": _iv(self.throughput_tokens_per_s),
            "throughput_samples_per_s": _iv(self.throughput_samples_per_s),
            "gpu_hours": _iv(self.gpu_hours),
            "cost_usd": _iv(self.cost_usd),
            "price_per_gpu_hour": (
                {"usd": self.usd_per_gpu_hour, "source": self.price_source}
                if self.usd_per_gpu_hour is not None
                else None
            ),
            "peak_memory_gb": _iv(self.peak_memory_gb),
            "memory_capacity_gb": self.memory_capacity_gb,
            "fits_in_memory": self.fits_in_memory,
            "device_memory_gb": _iv(self.device_memory_gb),
            "memory_verdict": self.memory_verdict or None,
            "mfu": _iv(self.mfu),
            "gpu": self.gpu,
            "num_gpus": self.num_gpus,
            "total_steps": self.total_steps,
            "extrapolation": list(self.extrapolation),
            "warnings": list(self.warnings),
        }
