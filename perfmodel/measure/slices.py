"""Training slices: build a real model, run warm-up steps, then time >= 10 optimizer steps.

Protocol (nanoGPT bench.py / torchtitan style): `warmup_steps` steps run untimed; then each
measured step is timed between device synchronisations, every step time is kept, and the row
reports the median and standard deviation. Peak memory tracking restarts once the model is built
(weights allocated, build transients gone), so it covers weights, gradients, optimizer state and
activations of the training steps. An out-of-memory failure, while
building or stepping, becomes a row with status 'oom'; any other failure a row with status
'error' (KeyboardInterrupt always propagates).

Achieved TFLOP/s come from perfmodel's one FLOP convention, perfmodel.analytic.flops
(`compute_step_flops(...).model_flops_per_step` on the Workload the slice ran, rebuilt from its
row; see perfmodel/analytic/conventions.py): 6 * N + 12 * L * d * s per token (PaLM appendix B),
N the matmul weights (blocks + LM head), attention non-causal; a frozen (LoRA) base gets no
weight-gradient matmuls (4 * N); recomputation is not counted (model FLOPs, as MFU is defined).
CNN and MLP slices count 3 x the forward FLOPs torch.utils.flop_counter.FlopCounterMode measured
on the built model. MFU (`reported_mfu`) = achieved TFLOP/s / the dense datasheet peak of the
compute dtype (perfmodel.catalog) on a GPU; a CPU has no datasheet peak, so CPU rows have none.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import perfmodel
from perfmodel.analytic.flops import compute_step_flops
from perfmodel.catalog import get_gpu
from perfmodel.codec import workload_from_row
from perfmodel.errors import PerfModelError
from perfmodel.measure.configs import (
    LUDWIG_GBM_PARAMS,
    SliceConfig,
    make_row_id,
    make_run_group,
    predicted_oom,
    row_fields,
)
from perfmodel.measure.device import CpuDevice, Device, fp32_matmul_mode, is_oom
from perfmodel.measure.fingerprint import Fingerprint
from perfmodel.workload import GPUSpec

Clock = Callable[[], float]
NOISY_CV = 0.25
"""Step times whose standard deviation exceeds this fraction of the median are flagged 'noisy'
in the notes (a quiet device gives a few percent; a busy host far more)."""


class BudgetExhausted(Exception):
    """The configuration would end after the collection's deadline; it is not recorded."""


class TooSlow(Exception):
    """The configuration's projected time exceeds the per-configuration cap; it is not recorded."""


class UnsupportedPrecision(Exception):
    """The device cannot run the configuration's precision."""


@dataclass
class PreparedSlice:
    """A built model ready to step."""

    step: Callable[[], None]
    """Runs one optimizer step (forward, backward, optimizer); does not synchronise."""
    device: Device
    """Where it runs (the CPU for LightGBM slices, whatever the collection device)."""
    facts: dict[str, Any] = field(default_factory=dict)
    """Row fields known from the built model: params_total, trainable_params, tokens_per_step,
    samples_per_step, forward_gflops_per_sample (CNN/MLP), activation_mb_per_sample, notes. FLOPs
    are not here: slice_row derives them from the configuration (perfmodel.analytic.flops)."""


Prepare = Callable[[SliceConfig, Device], PreparedSlice]


# --- building ----------------------------------------------------------------------------------


def prepare_slice(config: SliceConfig, device: Device) -> PreparedSlice:
    """Build the model, optimizer and synthetic batch of a configuration on `device`."""
    if config.kind == "lightgbm":
        return _prepare_lightgbm(config, device)
    return _prepare_torch(config, device)


def _prepare_torch(config: SliceConfig, device: Device) -> PreparedSlice:
    # torch: seconds to import, only measuring needs it; perfmodel.measure.models imports torch: only this path needs it
    import torch

    from perfmodel.measure import models

    if not device.supports(config.precision):
        raise UnsupportedPrecision(f"{config.precision} is not supported on this {device.kind} device")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(config.precision, torch.float32)
    model = models.build_model(config, device.torch_device)
    facts: dict[str, Any] = {}
    if config.kind in ("resnet", "mlp"):  # measured before any cast or adapter, in fp32
        facts["forward_gflops_per_sample"] = models.forward_gflops_per_sample(
            model, device.torch_device, torch.float32
        )
        facts["activation_mb_per_sample"] = models.activation_mb_per_sample(
            model, device.torch_device, torch.float32
        )
    if dtype != torch.float32:
        model.to(dtype)
    if config.channels_last:
        model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    if config.lora_r:
        models.apply_lora(model, config.lora_r)
    model.activation_checkpointing = config.activation_checkpointing  # type: ignore[assignment]
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    if config.optimizer == "adamw":
        opt: Any = torch.optim.AdamW(trainable, lr=1e-4, weight_decay=0.0)
    else:
        opt = torch.optim.SGD(trainable, lr=1e-3)
    batch = model.synthetic_batch(config.micro_batch_size, device.torch_device, dtype)  # type: ignore[operator]
    if config.channels_last:
        batch["images"] = batch["images"].contiguous(memory_format=torch.channels_last)
    amp_dtype = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}.get(config.precision)
    scaler = torch.amp.GradScaler(device.autocast_device_type) if config.precision == "amp_fp16" else None

    def autocast() -> Any:
        if amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device.autocast_device_type, dtype=amp_dtype)

    def step() -> None:
        with autocast():
            loss = model.loss(batch)  # type: ignore[operator]
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)

    n_total = sum(p.numel() for p in model.parameters())
    n_trainable = sum(p.numel() for p in trainable)
    facts.update(
        params_total=float(n_total), trainable_params=n_trainable, samples_per_step=config.micro_batch_size
    )
    if config.is_transformer:
        facts["tokens_per_step"] = (config.seq_len or 0) * config.micro_batch_size
    return PreparedSlice(step=step, device=device, facts=facts)


def _prepare_lightgbm(config: SliceConfig, device: Device) -> PreparedSlice:
    # LightGBM: only when a model is fitted or loaded; numpy: kept out of import time (the CLI's cold start)
    import lightgbm as lgb
    import numpy as np

    rows, features = config.micro_batch_size, config.in_features or 16
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, features), dtype=np.float32)
    logits = x[:, : min(8, features)].sum(axis=1) + 0.5 * rng.standard_normal(rows).astype(np.float32)
    y = (logits > 0).astype(np.float32)
    threads = config.cpu_threads or (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )
    params = {**LUDWIG_GBM_PARAMS, "num_threads": threads, "seed": 0}
    t0 = time.perf_counter()
    booster = lgb.Booster(
        params=params, train_set=lgb.Dataset(x, y, params={"max_bin": params["max_bin"], "verbose": -1})
    )
    construct_s = time.perf_counter() - t0

    def step() -> None:
        booster.update()

    return PreparedSlice(
        step=step,
        device=device if device.kind == "cpu" else CpuDevice(),
        facts={
            "params_total": None,
            "samples_per_step": rows,
            "notes": f"LightGBM {lgb.__version__} on {threads} CPU threads with Ludwig's GBM defaults; "
            f"one step = one boosting round; Dataset construction (binning) {construct_s:.3f} s not in step time",
        },
    )


# --- measuring ---------------------------------------------------------------------------------


@dataclass
class Measurement:
    status: str
    step_times_s: list[float] = field(default_factory=list)
    peak_memory_gb: float | None = None
    notes: str = ""
    load_avg_1m: float | None = None


def measure(
    prepared: PreparedSlice,
    config: SliceConfig,
    *,
    clock: Clock = time.perf_counter,
    deadline: float | None = None,
    max_config_s: float | None = None,
) -> list[float]:
    """Warm up, then time `config.measured_steps` steps (synchronised). After warm-up the
    measured phase is projected from the last warm-up step: beyond `deadline` raises
    BudgetExhausted, beyond `max_config_s` raises TooSlow."""
    dev = prepared.device
    last = 0.0
    for _ in range(config.warmup_steps):
        t0 = clock()
        prepared.step()
        dev.synchronize()
        last = clock() - t0
    projected = last * config.measured_steps
    if deadline is not None and clock() + projected > deadline:
        raise BudgetExhausted(f"projected {projected:.1f} s would pass the budget")
    if max_config_s is not None and projected > max_config_s:
        raise TooSlow(f"projected {projected:.1f} s > cap {max_config_s:.0f} s")
    times = []
    for _ in range(config.measured_steps):
        t0 = clock()
        prepared.step()
        dev.synchronize()
        times.append(clock() - t0)
    return times


def run_slice(
    config: SliceConfig,
    *,
    device: Device,
    prepare: Prepare = prepare_slice,
    clock: Clock = time.perf_counter,
    deadline: float | None = None,
    max_config_s: float | None = None,
) -> tuple[Measurement, dict[str, Any]]:
    """Prepare and measure one configuration. Returns the measurement and the model facts.
    OOM -> status 'oom'; other failures -> status 'error'; BudgetExhausted, TooSlow and
    KeyboardInterrupt propagate."""
    reason = predicted_oom(config, device.total_memory_gb) if device.kind == "cuda" else None
    if reason:
        return Measurement(status="oom", notes=reason), {}
    slice_device = CpuDevice() if config.kind == "lightgbm" else device
    slice_device.begin_memory()
    prepared: PreparedSlice | None = None
    facts: dict[str, Any] = {}
    built = False
    result: Measurement
    try:
        with fp32_matmul_mode(config.precision):
            prepared = prepare(config, slice_device)
            facts = prepared.facts
            slice_device.reset_peak_memory()
            built = True
            times = measure(prepared, config, clock=clock, deadline=deadline, max_config_s=max_config_s)
        result = Measurement(
            status="ok",
            step_times_s=times,
            peak_memory_gb=prepared.device.peak_memory_gb(),
            load_avg_1m=_load_avg(),
        )
    except (BudgetExhausted, TooSlow, KeyboardInterrupt):
        raise
    except UnsupportedPrecision as exc:
        result = Measurement(status="error", notes=f"unsupported: {exc}")
    except Exception as exc:  # noqa: BLE001 - any failure of one slice is a data row
        if is_oom(exc):
            where = "in the training steps" if built else "while building the model"
            peak = slice_device.peak_memory_gb() if built else None
            result = Measurement(
                status="oom", peak_memory_gb=peak, notes=f"out of memory {where}: {_one_line(exc)}"
            )
        else:
            result = Measurement(status="error", notes=f"{type(exc).__name__}: {_one_line(exc)}")
    finally:
        prepared = None
        slice_device.release()  # after the exception (and its frames) are gone
    return result, facts


def _load_avg() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


# --- rows --------------------------------------------------------------------------------------


def model_flops_per_step(config: SliceConfig, facts: dict[str, Any]) -> tuple[float | None, str | None]:
    """(model FLOPs of one optimizer step, compute dtype) of a slice by perfmodel's convention:
    perfmodel.analytic.flops.compute_step_flops on the Workload its row describes (read by
    perfmodel.codec). (None, None) for LightGBM, or when the row cannot be costed (a CNN/MLP
    without its measured forward FLOPs)."""
    if config.kind == "lightgbm":
        return None, None
    row = {
        **row_fields(config),
        "params_total": facts.get("params_total"),
        "forward_gflops_per_sample": facts.get("forward_gflops_per_sample"),
        "gpu": "device",
    }
    # FLOPs do not depend on the device; this one only lets every slice precision validate.
    device = GPUSpec(name="device", peak_tflops=dict.fromkeys(("fp32", "tf32", "bf16", "fp16", "fp8"), 1.0))
    try:
        workload = workload_from_row(row, gpu=device)
    except PerfModelError:
        return None, None
    flops = compute_step_flops(workload).model_flops_per_step
    return (flops or None), workload.training.compute_dtype


def _datasheet_peak_tflops(gpu: str, compute_dtype: str | None) -> float | None:
    """Dense datasheet peak TFLOP/s of `gpu` (catalog key) for `compute_dtype`, None if unknown."""
    if not compute_dtype:
        return None
    try:
        return get_gpu(gpu).peak_for(compute_dtype)
    except PerfModelError:
        return None


def slice_row(
    config: SliceConfig,
    measurement: Measurement,
    facts: dict[str, Any],
    *,
    fingerprint: Fingerprint,
    device_kind: str,
    peak_memory_method: str,
    collected_at: str | None = None,
) -> dict[str, Any]:
    """One feature-table row (perfmodel.schema.COLUMNS) for a measured configuration."""
    times = measurement.step_times_s
    ok = measurement.status == "ok" and bool(times)
    # A configuration that did not complete (oom/error) has no step time: empty, as the schema allows.
    median = statistics.median(times) if ok else None
    std = statistics.stdev(times) if ok and len(times) > 1 else None
    samples = facts.get("samples_per_step") or config.micro_batch_size
    tokens = facts.get("tokens_per_step")
    is_gbm = config.kind == "lightgbm"
    on_gpu = device_kind == "cuda" and not is_gbm
    flops, compute_dtype = model_flops_per_step(config, facts) if ok else (None, None)
    achieved_tflops = flops / median / 1e12 if median and flops else None
    peak = _datasheet_peak_tflops(fingerprint.gpu, compute_dtype) if on_gpu and achieved_tflops else None
    notes = [n for n in (measurement.notes, facts.get("notes")) if n]
    if ok and std is not None and median and std / median > NOISY_CV:
        notes.append(f"noisy: step-time coefficient of variation {std / median:.2f} > {NOISY_CV}")
    if measurement.load_avg_1m is not None:  # other processes on the host perturb CPU timings
        notes.append(
            f"host load average (1 min) {measurement.load_avg_1m:.2f} on {fingerprint.cpu_cores} cores"
        )
    if ok and measurement.peak_memory_gb is not None:
        notes.append(f"peak memory: {CpuDevice.peak_memory_method if is_gbm else peak_memory_method}")
    if config.kind == "resnet":
        notes.append(f"image 3x{config.image_size}x{config.image_size}, {config.num_classes} classes")
    if config.kind == "mlp":
        notes.append(
            f"{config.in_features} input features, {config.num_layers} x {config.hidden_size} hidden"
        )
    row: dict[str, Any] = {
        "row_id": make_row_id(fingerprint.hardware_id, config, device_kind),
        "run_group": make_run_group(fingerprint.hardware_id, config, device_kind),
        "source": "perfmodel-collector",
        "citation": f"perfmodel collectors v{perfmodel.__version__} on {fingerprint.hardware_id}",
        "source_kind": "own",
        "collected_at": collected_at or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "collector_version": perfmodel.__version__,
        "hardware_id": fingerprint.hardware_id,
        "status": measurement.status,
        "benchmark_kind": "training_slice",
        "notes": "; ".join(notes) or None,
        **row_fields(config),
        "params_total": facts.get("params_total"),
        "forward_gflops_per_sample": facts.get("forward_gflops_per_sample"),
        "activation_mb_per_sample": facts.get("activation_mb_per_sample"),
        "gpu": fingerprint.gpu if on_gpu else "cpu",
        "gpu_name_raw": fingerprint.gpu_name if on_gpu else fingerprint.cpu_model,
        "torch_version": fingerprint.torch_version or None,
        "step_time_s": median,
        "step_time_std_s": std,
        "step_times_s": list(times) if ok else None,
        "warmup_steps": config.warmup_steps,
        "measured_steps": len(times) if ok else 0,
        "tokens_per_s": tokens / median if median and tokens else None,
        "samples_per_s": samples / median if median else None,
        "peak_memory_gb": measurement.peak_memory_gb,
        "achieved_tflops_per_gpu": achieved_tflops,
        "reported_mfu": achieved_tflops / peak if achieved_tflops and peak else None,
        "repeat_index": config.repeat_index,
    }
    return row
