"""From a workload to a prediction: throughput, step time, total time, GPU-hours and peak memory,
each with an interval, plus a fits-in-memory verdict and the main bottleneck.

The analytic model gives the roofline bound; the shipped learned model (models/) corrects it:
    step_time = t_bound * exp(y_hat),  interval = t_bound * exp([y_low, y_high]).
Without a learned model, an analytic efficiency range stands in and the output says so.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel import __version__
from perfmodel.analytic import AnalyticEstimate, estimate, peak_memory
from perfmodel.analytic.fit_verdict import FitVerdict, fit_verdict
from perfmodel.analytic.memory import MemoryBreakdown, scaled
from perfmodel.analytic.totals import RunPlan, plan_run, total_time_interval_s
from perfmodel.calibration.apply import Adjustment, FittedCalibration, adjust, point_of
from perfmodel.calibration.record import Calibration, apply_ceilings, load_store, runs_digest, warn_once
from perfmodel.catalog.prices import PriceQuote, no_price_warning, price_for
from perfmodel.codec import workload_from_row
from perfmodel.config.source import resolve_workload
from perfmodel.errors import ConfigError, quote
from perfmodel.interval import Interval, floored
from perfmodel.learn.model_files import METADATA_FILE, MODEL_FILE
from perfmodel.learn.registry import registered_model_dir
from perfmodel.learn.shipped import Correction, Corrector, learned_step_interval, load_shipped_model
from perfmodel.measure.memory_exact import ExactMemory, Progress, exact_memory
from perfmodel.paths import model_dir as default_model_dir
from perfmodel.request import MEMORY_METHODS, RunRequest
from perfmodel.workload import GPUSpec, Workload

WARNING_PREFIX = "warning: "
"""An assumption of the config's translation that is also a warning (it goes to `warnings` too)."""

ANALYTIC_EFFICIENCY = (0.5, 1.0, 1.5)
"""(low, typical, high) speed of real training relative to the kernel model's step time when no
learned model (and so no calibrated interval) is available: the kernel model's own estimate, with
an uncalibrated x0.67-x2 range around it (an assumption, stated in the output)."""

@dataclass(frozen=True, kw_only=True)
class PredictedRun:
    """A prediction. Never a measurement: see collectors for `Measured*` rows."""

    throughput_tokens_per_s: Interval | None
    throughput_samples_per_s: Interval
    step_time_s: Interval
    total_time_s: Interval
    gpu_hours: Interval
    peak_memory_gb: Interval
    """The allocated peak per GPU (what torch.cuda.max_memory_allocated reports)."""
    confidence_level: float
    total_steps: int
    fits_in_memory: bool
    memory_capacity_gb: float
    memory_margin_gb: float
    bottleneck: str
    mfu: Interval | None
    model_kind: str
    model_version: str
    trained_rows: int
    workload: Workload
    analytic: AnalyticEstimate
    plan: RunPlan
    warnings: tuple[str, ...] = field(default_factory=tuple)
    peak_memory_reserved_gb: Interval | None = None
    """What PyTorch's caching allocator reserves at the peak (max_memory_reserved)."""
    device_memory_gb: Interval | None = None
    """The device total: reserved + CUDA context and communication buffers (what must fit)."""
    memory_verdict: FitVerdict | None = None
    """fits / tight / does not fit (perfmodel.analytic.fit_verdict), on the device total."""
    cost_usd: Interval | None = None
    """Cost of the run in USD: gpu_hours x price per GPU-hour; None when no price is known."""
    price: PriceQuote | None = None
    """The price per GPU-hour used, or None."""
    calibration: Adjustment | None = None
    """What a calibration of the hardware did to the step time (perfmodel.calibration), or None."""
    memory_breakdown: MemoryBreakdown | None = None
    """The memory estimate the memory numbers come from (None: `analytic.memory`)."""
    memory_exact: ExactMemory | None = None
    """The FakeTensor oracle's count (`predict(..., memory="exact")`), or None: analytic."""

    @property
    def memory_method(self) -> str:
        """Where the memory numbers come from: 'exact' (the FakeTensor oracle) or 'analytic'."""
        return "exact" if self.memory_exact is not None else "analytic"

    def to_json(self) -> dict[str, Any]:
        """The stable `predict --json` contract of DESIGN.md (extended with extra keys;
        `memory_method` and `memory_oracle` only with --memory exact: absent means analytic)."""
        w = self.workload
        a = self.analytic
        m = self.memory_breakdown or a.memory
        return {
            "throughput_tokens_per_s": self.throughput_tokens_per_s.as_dict()
            if self.throughput_tokens_per_s
            else None,
            "throughput_samples_per_s": self.throughput_samples_per_s.as_dict(),
            "step_time_s": self.step_time_s.as_dict(),
            "total_time_s": self.total_time_s.as_dict(),
            "gpu_hours": self.gpu_hours.as_dict(),
            "peak_memory_gb": self.peak_memory_gb.as_dict(),
            "confidence_level": self.confidence_level,
            "total_steps": self.total_steps,
            "fits_in_memory": self.fits_in_memory,
            "model": {
                "kind": self.model_kind,
                "version": self.model_version,
                "trained_rows": self.trained_rows,
            },
            "workload": _workload_json(w),
            "hardware": {
                **dataclasses.asdict(w.gpu),
                "num_gpus": w.parallel.num_gpus,
                "num_nodes": w.parallel.num_nodes,
            },
            "warnings": list(self.warnings),
            "assumptions": list(w.assumptions),
            "memory_capacity_gb": self.memory_capacity_gb,
            "memory_margin_gb": self.memory_margin_gb,
            "peak_memory_kind": PEAK_MEMORY_KIND,
            "peak_memory_reserved_gb": self.peak_memory_reserved_gb.as_dict() if self.peak_memory_reserved_gb else None,
            "device_memory_gb": self.device_memory_gb.as_dict() if self.device_memory_gb else None,
            "memory_verdict": self.memory_verdict.to_json() if self.memory_verdict else None,
            "memory_peak_phase": m.phase,
            "memory_paged_gb": m.paged_gb,
            "memory_offloaded_gb": m.offloaded_gb,
            "activations_by_kernel_gb": dict(m.activations_by_kernel_gb),
            "memory_breakdown_gb": {
                "weights": m.weights_gb,
                "gradients": m.gradients_gb,
                "optimizer": m.optimizer_gb,
                "activations": m.activations_gb,
                "temporary": m.temporary_gb,
                "overhead": m.overhead_gb,
            },
            "bottleneck": self.bottleneck,
            "mfu": self.mfu.as_dict() if self.mfu else None,
            "analytic": {
                "params_total": a.params.total,
                "params_trainable": a.params.trainable,
                "model_flops_per_token": a.flops.model_flops_per_token,
                "hardware_flops_per_step": a.flops.hardware_flops_per_step,
                "tokens_per_step": self.plan.tokens_per_step,
                "samples_per_step": self.plan.samples_per_step,
                "t_bound_s": a.t_bound_s,
                "t_compute_s": a.t_compute_s,
                "t_memory_s": a.t_memory_s,
                "t_comm_exposed_s": a.t_comm_exposed_s,
                "kernel_seconds_by_kind": dict(a.kernel_seconds),
                "l2_saved_s": a.t_l2_saved_s,
                "peak_tflops": a.peak_tflops,
                "peak_source": a.peak_source,
                "startup_s": self.plan.startup_s,
                "startup_low_s": self.plan.startup_low_s,
                "startup_high_s": self.plan.startup_high_s,
                "checkpoint_s": self.plan.checkpoint_s,
            },
            "perfmodel_version": __version__,
            "cost_usd": self.cost_usd.as_dict() if self.cost_usd else None,
            "price_per_gpu_hour": self.price.to_json() if self.price is not None else None,
            **({"calibration": self.calibration.to_json()} if self.calibration is not None else {}),
            **(
                {"memory_method": self.memory_method, "memory_oracle": self.memory_exact.to_json()}
                if self.memory_exact is not None
                else {}
            ),
        }


PEAK_MEMORY_KIND = "allocated"
"""What `peak_memory_gb` is: the allocated peak (torch.cuda.max_memory_allocated); the reserved
peak and the device total are `peak_memory_reserved_gb` and `device_memory_gb`, the verdict
compares the device total."""


def memory_intervals(m: MemoryBreakdown) -> dict[str, Interval]:
    """The three memory numbers of an estimate, each an Interval: allocated, reserved, device."""
    return {k: Interval(estimate=e, low=lo, high=hi) for k, (lo, e, hi) in m.ranges().items()}


def memory_remedies(w: Workload, *, small: bool = False) -> list[str]:
    """What would lower the memory of `w`, leaving out what it already does (a LoRA config is not
    told to use LoRA, a checkpointed one not to checkpoint); `small`: only the batch-level ones."""
    t, par = w.training, w.parallel
    out = []
    if t.micro_batch_size > 1:
        out.append("a smaller micro_batch_size")
    if not t.activation_checkpointing:
        out.append("activation checkpointing")
    if small:
        return out
    if t.lora_r is None:
        out.append("LoRA")
    elif not t.quantization_bits:
        out.append("a 4-bit base (QLoRA)")
    if t.lora_r is None and (t.optimizer_state or "") not in ("8bit", "paged-8bit") and t.optimizer not in ("sgd", "none"):
        out.append("an 8-bit optimizer")
    if par.strategy not in ("fsdp", "zero3"):
        out.append("sharding (fsdp/zero3)" + (" over more GPUs" if par.num_gpus == 1 else ""))
    elif par.num_gpus == 1 or par.num_gpus < 8:
        out.append("more GPUs to shard over")
    return out


def _or(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + ", or " + items[-1]


def memory_warnings(v: FitVerdict, w: Workload) -> list[str]:
    """What a prediction says about its memory verdict; the remedies it names are ones the run
    does not use yet (`memory_remedies`)."""
    if not v.capacity_gb or v.verdict == "fits":
        return []
    if v.verdict == "tight":
        hint = memory_remedies(w, small=True)
        return [
            f"memory is tight: {v.device_gb:.1f} GB of {v.capacity_gb:.0f} GB per GPU, up to {v.device_high_gb:.1f} GB"
            + (f"; consider {_or(hint)}" if hint else "")
        ]
    hint = memory_remedies(w)
    return [
        f"does not fit: needs ~{v.device_gb:.1f} GB per GPU, {w.gpu.name} has {v.capacity_gb:.0f} GB"
        + (f"; try {_or(hint)}" if hint else "")
    ]


def _workload_json(w: Workload) -> dict[str, Any]:
    """`dataclasses.asdict(w)` with the accelerator by name (its full record is under "hardware";
    converting it twice was a sixth of a served prediction)."""
    data: dict[str, Any] = {}
    for f in dataclasses.fields(w):
        value = getattr(w, f.name)
        nested = dataclasses.is_dataclass(value) and not isinstance(value, type) and f.name != "gpu"
        data[f.name] = dataclasses.asdict(value) if nested else value
    data["gpu"] = w.gpu.name
    data["assumptions"] = list(w.assumptions)
    if not w.model.part_layers:  # model.part_*: only for a model with a transformer part (issue 24)
        data["model"] = {k: v for k, v in data["model"].items() if not k.startswith("part_")}
    return data


def predict(
    workload: Workload,
    *,
    confidence: float = 0.9,
    model_dir: str | Path | None = None,
    use_learned: bool = True,
    use_calibration: bool = True,
    memory: str = "analytic",
    progress: Progress | None = None,
) -> PredictedRun:
    """Predict one training run. `model_dir` defaults to the shipped models/ folder;
    `use_calibration=False` ignores calibrations of the hardware (perfmodel.calibration).
    `memory="exact"`: the allocated peak counted by the FakeTensor oracle (perfmodel.measure.
    memory_exact; seconds of CPU, `progress` gets a line now and then), reserved, device total and
    verdict from it; an UnsupportedError when the oracle cannot run the workload."""
    if memory not in MEMORY_METHODS:
        raise ConfigError(f"--memory must be one of {', '.join(MEMORY_METHODS)}, got {quote(memory)}")
    exact = exact_memory(workload, peak_memory(workload), progress) if memory == "exact" else None
    return predict_many(
        [workload], confidence=confidence, model_dir=model_dir, use_learned=use_learned,
        use_calibration=use_calibration, exact=[exact] if exact is not None else None,
    )[0]  # fmt: skip


def predictor_options(request: RunRequest, *, memory_ok: bool = False) -> dict[str, Any]:
    """The predictor's keywords for a request: `confidence`, `model_dir` (a `model_uri` looked up
    in the registry, `perfmodel.learn.registry`), `use_learned` and `use_calibration`. A request
    for exact memory is a ConfigError unless `memory_ok` (`predict` takes it; sweeps, comparisons
    and advice predict many runs with the analytic memory model)."""
    if request.memory != "analytic" and not memory_ok:
        raise ConfigError(f"memory={request.memory} (--memory) is for predict only; this command uses the analytic memory model")
    model_dir = request.model_dir
    if request.model_uri is not None:
        if model_dir is not None:
            raise ConfigError("give --model-dir or --model-uri, not both")
        model_dir = registered_model_dir(request.model_uri)
    return {
        "confidence": request.confidence,
        "model_dir": model_dir,
        "use_learned": request.use_learned,
        "use_calibration": not request.no_calibration,
    }


def predict_request(request: RunRequest) -> PredictedRun:
    """Predict a run request: its Workload (`perfmodel.config.resolve_workload`) with its
    predictor options and memory method."""
    return predict(resolve_workload(request), **predictor_options(request, memory_ok=True), memory=request.memory)


def predict_many(
    workloads: Sequence[Workload],
    *,
    confidence: float = 0.9,
    model_dir: str | Path | None = None,
    use_learned: bool = True,
    use_calibration: bool = True,
    memory_scale: float = 1.0,
    exact: Sequence[ExactMemory | None] | None = None,
) -> list[PredictedRun]:
    """Predict many runs with one call of the learned model (sweeps, advice, planners): the same
    answers as `predict` on each, at a fraction of the cost. A calibration of a workload's hardware
    (`perfmodel.calibration`; this host's first, then its accelerator kind's) is applied unless
    `use_calibration` is False. `memory_scale` multiplies every analytic allocated peak (the fit
    suggestions of `predict --memory exact`: perfmodel.decide.fit); `exact`, one per workload, the
    oracle's memory in place of the analytic (`predict(..., memory="exact")` passes it)."""
    if not 0.5 <= confidence < 1.0:
        raise ConfigError(f"--confidence must be in [0.5, 1), got {confidence}")
    cals = _calibrations_for(workloads, model_dir, use_learned) if use_calibration and workloads else {}
    workloads = [cals[i].workload(w) if i in cals else w for i, w in enumerate(workloads)]
    estimates = [estimate(w) for w in workloads]
    learned, missing = _load_learned(model_dir) if use_learned else (None, "")
    corrections: list[Correction | None] = [None] * len(workloads)
    if learned is not None and workloads:
        corrections = [*learned.correct(list(zip(workloads, estimates, strict=True)), confidence=confidence)]
    adjustments: list[Adjustment | None] = [None] * len(workloads)
    for i, cal in cals.items():
        corrections[i], adjustments[i] = cal.correct(workloads[i], estimates[i], corrections[i], confidence, missing)
        workloads[i] = dataclasses.replace(
            workloads[i], assumptions=(*workloads[i].assumptions, adjustments[i].assumption())  # type: ignore[union-attr]
        )
    exacts = list(exact) if exact is not None else [None] * len(workloads)
    return [
        _assemble(w, est, corr, learned, confidence, missing, adj, memory_scale=memory_scale, exact=ex)
        for w, est, corr, adj, ex in zip(workloads, estimates, corrections, adjustments, exacts, strict=True)
    ]


@dataclass(frozen=True)
class _Calibrated:
    """The calibrations that match one accelerator, fitted to the model that predicts now."""

    host: FittedCalibration | None
    kind: tuple[FittedCalibration, ...]
    gpu: GPUSpec
    """The accelerator with the calibration's measured ceilings."""
    ceilings: dict[str, float]

    def workload(self, w: Workload) -> Workload:
        return dataclasses.replace(w, gpu=self.gpu)

    def correct(
        self, w: Workload, est: AnalyticEstimate, corr: Correction | None, confidence: float, missing: str
    ) -> tuple[Correction, Adjustment]:
        if corr is None:  # the analytic efficiency range, in the learned correction's log form
            lo, mid, hi = ANALYTIC_EFFICIENCY
            corr = Correction(
                log_ratio=math.log(1 / mid),
                log_low=math.log(1 / hi),
                log_high=math.log(1 / lo),
                warnings=(analytic_warning(missing),),
            )
        adj = adjust(
            log_ratio=corr.log_ratio,
            log_low=corr.log_low,
            log_high=corr.log_high,
            host=self.host,
            kind=self.kind,
            workload=w,
            est=est,
            confidence=confidence,
            ceilings=self.ceilings,
        )
        return Correction(log_ratio=adj.log_ratio, log_low=adj.log_low, log_high=adj.log_high, warnings=corr.warnings), adj


def _calibrations_for(
    workloads: Sequence[Workload], model_dir: str | Path | None, use_learned: bool
) -> dict[int, _Calibrated]:
    """Workload index -> the calibrations of its hardware (none: not in the mapping)."""
    store = load_store()
    if not store.calibrations:
        return {}
    out: dict[int, _Calibrated] = {}
    memo: dict[tuple[Any, ...], _Calibrated | None] = {}
    for i, w in enumerate(workloads):
        gkey = (w.gpu.name, w.gpu.vendor, w.gpu.generation, w.gpu.sm_count, tuple(sorted(w.gpu.measured.items())))
        if gkey not in memo:
            memo[gkey] = _calibrated(store.matching(w.gpu), w.gpu, model_dir, use_learned)
        found = memo[gkey]
        if found is not None:
            out[i] = found
    return out


def _calibrated(
    matched: tuple[Calibration | None, tuple[Calibration, ...]],
    gpu: GPUSpec,
    model_dir: str | Path | None,
    use_learned: bool,
) -> _Calibrated | None:
    own, others = matched
    if own is None and not others:
        return None
    with_ceilings = [c for c in (own, *sorted(others, key=lambda c: -len(c.runs))) if c is not None and c.ceilings]
    ceilings = dict(with_ceilings[0].ceilings) if with_ceilings else {}
    calibrated_gpu = apply_ceilings(gpu, ceilings)
    learned = _load_learned(model_dir)[0] if use_learned else None
    model_key = (str(model_dir), use_learned, getattr(learned, "version", None))
    fitted = [_fitted(c, calibrated_gpu, model_dir, use_learned, model_key) for c in (own, *others) if c is not None]
    host = fitted[0] if own is not None else None
    kind = tuple(fitted[1:] if own is not None else fitted)
    if (host is None or not host.n) and not any(f.n for f in kind) and not ceilings:
        return None
    return _Calibrated(host=host, kind=kind, gpu=calibrated_gpu, ceilings=ceilings)


_FITTED: dict[tuple[Any, ...], FittedCalibration] = {}


def _fitted(
    cal: Calibration, gpu: GPUSpec, model_dir: str | Path | None, use_learned: bool, model_key: tuple[Any, ...]
) -> FittedCalibration:
    """The calibration's runs predicted uncalibrated on `gpu` (cached per calibration version,
    accelerator and model): their residuals."""
    factors = tuple(sorted((g, f.factor) for g, f in cal.kernel_factors.items()))
    key = (cal.hardware_id, cal.updated_at, runs_digest(cal), factors, gpu.name, tuple(sorted(gpu.measured.items())), model_key)
    if key in _FITTED:
        return _FITTED[key]
    kept, works = [], []
    for run in cal.runs:
        try:
            works.append(workload_from_row(run.row, gpu=gpu))
            kept.append(run)
        except Exception as exc:  # noqa: BLE001 - one unreadable run must not stop every prediction
            warn_once(f"calibration {cal.hardware_id}: a measured run ({run.label}) cannot be read and is left out: {exc}")
    preds = predict_many(works, model_dir=model_dir, use_learned=use_learned, use_calibration=False) if works else []
    points = [
        point_of(w, p.analytic, math.log(run.measured_s / p.step_time_s.estimate), cal.kernel_factors,
                 label=run.label, measured_s=run.measured_s, predicted_s=p.step_time_s.estimate)  # fmt: skip
        for run, w, p in zip(kept, works, preds, strict=True)
    ]
    if len(_FITTED) > 256:
        _FITTED.clear()
    _FITTED[key] = fitted = FittedCalibration.of(cal, points)
    return fitted


def fitted_calibration(
    cal: Calibration, gpu: GPUSpec, *, model_dir: str | Path | None = None, use_learned: bool = True
) -> FittedCalibration:
    """`cal`'s runs against the model that predicts now, on `gpu` with its ceilings (what
    `perfmodel calibrate --show` reports)."""
    calibrated_gpu = apply_ceilings(gpu, cal.ceilings)
    learned = _load_learned(model_dir)[0] if use_learned else None
    return _fitted(cal, calibrated_gpu, model_dir, use_learned, (str(model_dir), use_learned, getattr(learned, "version", None)))


def analytic_warning(missing: str) -> str:
    """The warning of a prediction without a learned model."""
    lo, _, hi = ANALYTIC_EFFICIENCY
    return (
        f"analytic model only ({missing}): the kernel model's step time, with an uncalibrated "
        f"interval of x{1 / hi:.2g}-x{1 / lo:.2g}"
    )


def _step_interval(est: AnalyticEstimate, corr: Correction | None, missing: str) -> tuple[Interval, list[str]]:
    """Step time with its interval: the learned correction of the analytic step time (or the
    analytic efficiency range), never faster than the roofline floor."""
    warnings: list[str] = []
    if corr is not None:
        step, moved = learned_step_interval(est, corr.log_ratio, corr.log_low, corr.log_high)
        warnings.extend(corr.warnings)
    else:
        lo, mid, hi = ANALYTIC_EFFICIENCY
        step = Interval(estimate=est.t_bound_s / mid, low=est.t_bound_s / hi, high=est.t_bound_s / lo)
        step, moved = floored(step, est.t_roofline_s)
        warnings.append(analytic_warning(missing))
    if moved:
        warnings.append(
            f"the estimate was faster than the hardware's roofline floor ({est.t_roofline_s:.3g} s per "
            "step); it is raised to the floor"
        )
    return step, warnings


def _assemble(
    workload: Workload,
    est: AnalyticEstimate,
    corr: Correction | None,
    learned: Corrector | None,
    confidence: float,
    missing: str,
    calibration: Adjustment | None = None,
    *,
    memory_scale: float = 1.0,
    exact: ExactMemory | None = None,
) -> PredictedRun:
    if exact is not None:
        workload = dataclasses.replace(workload, assumptions=(*workload.assumptions, exact.assumption()))
    plan = plan_run(workload, est)
    step, step_warnings = _step_interval(est, corr, missing)
    per = plan.batches_per_optimizer_step  # > 1: steps are batches (Ludwig), a step is 1/per optimizer step
    step = step.scaled(1.0 / per) if per > 1 else step
    config_warnings = [a.removeprefix(WARNING_PREFIX) for a in workload.assumptions if a.startswith(WARNING_PREFIX)]
    warnings: list[str] = [*config_warnings, *plan.notes, *est.notes, *step_warnings]
    if learned is not None:
        kind, version, rows = "learned", str(learned.version), int(learned.trained_rows)
    else:
        kind, version, rows = "analytic", __version__, 0
    samples_rate = step.inverted(plan.samples_per_step)
    tokens_rate = step.inverted(plan.tokens_per_step) if plan.tokens_per_step else None
    total_low, total_estimate, total_high = total_time_interval_s(plan, step.low, step.estimate, step.high)
    total = Interval(estimate=total_estimate, low=total_low, high=total_high)  # with the start-up's interval
    gpus = workload.parallel.num_gpus
    gpu_hours = total.scaled(gpus / 3600.0)
    price = price_for(workload)
    if price is None:
        warnings.append(no_price_warning(workload))
    breakdown = exact.breakdown if exact is not None else scaled(workload, est.memory, memory_scale)
    memory = memory_intervals(breakdown)
    verdict = fit_verdict(breakdown, float(workload.gpu.memory_gb))
    warnings.extend(memory_warnings(verdict, workload))
    mfu = None
    if est.flops.model_flops_per_step and est.peak_tflops:
        peak_total = est.peak_tflops * 1e12 * gpus
        mfu = step.inverted(est.flops.model_flops_per_step / per / peak_total)
        if est.peak_source == "measured":
            datasheet = workload.gpu.peak_for(workload.training.compute_dtype)
            mfu = mfu.scaled(est.peak_tflops / datasheet)
    return PredictedRun(
        throughput_tokens_per_s=tokens_rate,
        throughput_samples_per_s=samples_rate,
        step_time_s=step,
        total_time_s=total,
        gpu_hours=gpu_hours,
        peak_memory_gb=memory["allocated"],
        peak_memory_reserved_gb=memory["reserved"],
        device_memory_gb=memory["device"],
        memory_verdict=verdict,
        confidence_level=confidence,
        total_steps=plan.total_steps,
        fits_in_memory=verdict.fits,
        memory_capacity_gb=verdict.capacity_gb,
        memory_margin_gb=verdict.margin_gb,
        bottleneck=est.bottleneck,
        mfu=mfu,
        model_kind=kind,
        model_version=version,
        trained_rows=rows,
        workload=workload,
        analytic=est,
        plan=plan,
        warnings=tuple(warnings),
        cost_usd=gpu_hours.scaled(price.usd_per_gpu_hour) if price is not None else None,
        price=price,
        calibration=calibration,
        memory_breakdown=breakdown if breakdown is not est.memory else None,
        memory_exact=exact,
    )


def _load_learned(model_dir: str | Path | None) -> tuple[Corrector | None, str]:
    """(the learned model in `model_dir` (default: the shipped models/), or None, and why not),
    loaded once per process while its files are unchanged (planners and services predict many
    workloads in a row)."""
    path = Path(model_dir) if model_dir is not None else default_model_dir()
    stamps = tuple(
        f.stat().st_mtime_ns if f.is_file() else None for f in (path / MODEL_FILE, path / METADATA_FILE)
    )
    learned = _learned_cached(str(path.resolve()), stamps)
    if learned is not None:
        return learned, ""
    if any(stamp is not None for stamp in stamps):
        return (
            None,
            f"the learned model in {path} is damaged or of another version: see the warning on stderr",
        )
    return None, "no learned model found"


@functools.lru_cache(maxsize=4)
def _learned_cached(path: str, stamps: tuple[int | None, ...]) -> Corrector | None:
    return load_shipped_model(path)
