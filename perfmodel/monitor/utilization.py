"""GPU and CPU utilisation of a running job, and the bottleneck hints drawn from them.

`SystemSampler` reads the whole host's CPU utilisation with psutil (percent of all cores since the
previous sample) and each visible GPU's utilisation with NVML (`pynvml`, the percent of the last
sample period in which a kernel ran). Both modules are injectable, so tests fake a GPU.

Hints (the rules of thumb users are taught, with the numbers behind them), judged over the stable
phase only and from at least MIN_SAMPLES samples:
- GPU utilisation below GPU_BUSY_PCT: the batch is too small or the input pipeline too slow;
- ... and CPU utilisation above CPU_BUSY_PCT at the same time: the data loading is the bottleneck;
- a stable phase whose step-time coefficient of variation exceeds NOISY_CV: judge it with care.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

GPU_BUSY_PCT = 70.0
"""Below this mean GPU utilisation (percent) the GPU waits for work."""
CPU_BUSY_PCT = 70.0
"""Above this mean host CPU utilisation (percent) with an idle GPU, the CPU side (data loading) limits."""
NOISY_CV = 0.25
"""Stable-phase step times with a coefficient of variation above this are flagged (as the collectors do)."""
MIN_SAMPLES = 3
"""Utilisation samples needed before a hint is given."""


@dataclass(frozen=True, kw_only=True)
class UtilSample:
    """One reading of the host."""

    t_s: float
    """Monitor clock at the reading in s."""
    cpu_pct: float | None
    """Host CPU utilisation over all cores in percent, since the previous reading."""
    gpu_pct: float | None
    """Mean utilisation of the visible GPUs in percent (None without a GPU)."""


class Sampler(Protocol):
    def read(self) -> tuple[float | None, float | None]:
        """(host CPU percent, mean GPU percent or None)."""
        ...


class SystemSampler:
    """psutil for the CPU, NVML for GPUs. `psutil_module` / `nvml_module` replace the real modules
    (tests); a module that is missing or fails reads as None."""

    def __init__(self, *, psutil_module: Any = None, nvml_module: Any = None, use_gpu: bool = True) -> None:
        self._psutil = psutil_module
        self._nvml = nvml_module
        self._handles: list[Any] | None = None if use_gpu else []
        self._primed = False

    def _cpu(self) -> float | None:
        try:
            if self._psutil is None:
                import psutil

                self._psutil = psutil
            value = float(self._psutil.cpu_percent(interval=None))
        except Exception:  # noqa: BLE001 - utilisation is best effort
            return None
        if not self._primed:  # psutil's first call has no previous reading: it returns 0
            self._primed = True
            return None
        return value

    def _gpu_handles(self) -> list[Any]:
        if self._handles is None:
            try:
                if self._nvml is None:
                    import pynvml

                    self._nvml = pynvml
                self._nvml.nvmlInit()
                self._handles = [
                    self._nvml.nvmlDeviceGetHandleByIndex(i) for i in range(self._nvml.nvmlDeviceGetCount())
                ]
            except Exception:  # noqa: BLE001 - no driver, no GPU, no pynvml
                self._handles = []
        return self._handles

    def _gpu(self) -> float | None:
        handles = self._gpu_handles()
        if not handles:
            return None
        try:
            return statistics.fmean(float(self._nvml.nvmlDeviceGetUtilizationRates(h).gpu) for h in handles)
        except Exception:  # noqa: BLE001
            return None

    def read(self) -> tuple[float | None, float | None]:
        return self._cpu(), self._gpu()


@dataclass(frozen=True, kw_only=True)
class UtilStats:
    """Utilisation over the stable phase."""

    samples: int
    """Readings used."""
    cpu_mean_pct: float | None
    """Mean host CPU utilisation in percent."""
    gpu_mean_pct: float | None
    """Mean GPU utilisation in percent (None without a GPU)."""


def summarize(samples: Sequence[UtilSample], since_s: float | None = None) -> UtilStats | None:
    """Mean utilisation of the samples taken at or after `since_s`; None without samples."""
    kept = [s for s in samples if since_s is None or s.t_s >= since_s]
    cpu = [s.cpu_pct for s in kept if s.cpu_pct is not None]
    gpu = [s.gpu_pct for s in kept if s.gpu_pct is not None]
    if not cpu and not gpu:
        return None
    return UtilStats(
        samples=max(len(cpu), len(gpu)),
        cpu_mean_pct=statistics.fmean(cpu) if cpu else None,
        gpu_mean_pct=statistics.fmean(gpu) if gpu else None,
    )


def batch_advice(micro_batch: int | None, largest: int | None) -> str:
    """What to do about a small batch, with the largest micro-batch the memory model lets fit."""
    if largest is None or micro_batch is None:
        return "try a larger micro-batch or a faster input pipeline"
    if largest > micro_batch:
        return (
            f"micro-batch up to {largest} fits (perfmodel's memory model; now {micro_batch}): raise it, "
            "or speed up the input pipeline"
        )
    return f"micro-batch {micro_batch} is already the largest that fits (memory model): speed up the input pipeline"


def bottleneck_hints(
    util: UtilStats | None,
    step_time_cv: float | None = None,
    *,
    micro_batch: int | None = None,
    largest_micro_batch: int | None = None,
) -> list[str]:
    """The module's rules applied to stable-phase utilisation and step-time spread; the batch hint
    names the largest micro-batch that fits when it is known (`largest_micro_batch`)."""
    hints: list[str] = []
    if util is not None and util.samples >= MIN_SAMPLES and util.gpu_mean_pct is not None:
        gpu, cpu = util.gpu_mean_pct, util.cpu_mean_pct
        if gpu < GPU_BUSY_PCT and cpu is not None and cpu > CPU_BUSY_PCT:
            hints.append(
                f"data loading is the bottleneck: GPU busy {gpu:.0f}% (< {GPU_BUSY_PCT:.0f}%) while the CPU is at "
                f"{cpu:.0f}% (> {CPU_BUSY_PCT:.0f}%); use more DataLoader workers, pin_memory, or pre-tokenize/pre-decode the data"
            )
        elif gpu < GPU_BUSY_PCT:
            cpu_text = f", CPU {cpu:.0f}%" if cpu is not None else ""
            hints.append(
                f"GPU busy only {gpu:.0f}% of the time (< {GPU_BUSY_PCT:.0f}%{cpu_text}): the batch is too small or the "
                f"input pipeline too slow; {batch_advice(micro_batch, largest_micro_batch)}"
            )
    if step_time_cv is not None and step_time_cv > NOISY_CV:
        hints.append(
            f"noisy stable phase: step-time coefficient of variation {step_time_cv:.2f} (> {NOISY_CV}); another process "
            "may compete for the device or the host, and the ETA interval is wide because of it"
        )
    return hints
