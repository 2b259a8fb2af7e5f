"""Plan a collection before running it: what each configuration of a profile will cost on a
given device, which ones will be skipped, and whether the profile fits its budget.

Each configuration becomes the same feature-table row the collector would write
(perfmodel.measure.configs.row_fields), and perfmodel predicts its step time and peak memory exactly as
for a user's workload (the shipped learned model when there is one, else the analytic bound). The
projection then mirrors the harness (collectors.harness.run_profile, perfmodel.measure.slices.run_slice):

- a transformer whose analytic peak memory exceeds 1.25 x the device memory is not run (status
  'oom', no time spent); one predicted not to fit costs a setup and ends in an OOM row;
- the micro-benchmarks run first: each costs its warm-up (>= 3 calls, ~10 samples) and `iters`
  samples, a call's time taken from the roofline of the device's datasheet (matmul and attention
  at 80 % / 40 % of peak, copies at 80 % of memory bandwidth, host copies at HOST_LINK_GB_PER_S),
  and they stop at MICROBENCH_BUDGET_FRACTION of the budget;
- every other configuration costs setup + (warm-up + measured steps) x its predicted step time,
  unless its measured steps alone exceed the profile's per-configuration cap (then it costs setup +
  warm-up and is skipped as too slow);
- configurations that would start after the budget is spent are not measured.

Setup (model build, optimizer, synthetic batch, row bookkeeping) is not predicted by the model:
it is a per-configuration constant, SETUP_S (measured on the CPU from the quick profile's row
timestamps; assumed on a GPU, where no run has been recorded yet).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from collectors.harness import MICROBENCH_BUDGET_FRACTION, validate_budget_s
from collectors.kernel_bench import BENCH_PREFIX
from collectors.kernel_bench import work_of as kernel_work_of
from collectors.microbench import MicrobenchPlan, plan_items
from collectors.profiles import build_profile
from perfmodel.catalog import get_gpu
from perfmodel.errors import ConfigError
from perfmodel.features import workload_from_row
from perfmodel.measure.configs import (
    SliceConfig,
    lora_params,
    make_row_id,
    predicted_oom,
    row_fields,
    transformer_params,
)
from perfmodel.measure.device import PRECISION_DTYPES, CpuDevice
from perfmodel.measure.fingerprint import collect_fingerprint
from perfmodel.measure.storage import measured_microbench_keys, measured_row_ids
from perfmodel.prediction import predict

if TYPE_CHECKING:
    from perfmodel.workload import GPUSpec

SETUP_S = {"cpu": 0.4, "cuda": 2.0}
"""Seconds per configuration outside its timed and warm-up steps. CPU: the quick profile on
cpu-2c-cba6f5 spent 52 s between its first and last row on 40.6 s of steps over 29 gaps (0.4 s
each; datasets/raw row timestamps). CUDA: an assumption (model init on the device, CUDA caching
allocator growth, Python overhead), to be replaced by a measured value after a GPU run."""
HOST_LINK_GB_PER_S = 25.0
"""Assumed host<->device copy bandwidth in GB/s (PCIe 4.0/5.0 x16 with pinned memory)."""
CALL_FLOOR_S = 1e-5
"""Shortest call in s: Python dispatch and a kernel launch (assumed)."""
MICROBENCH_ITEM_S = 0.05
"""Assumed per-benchmark allocation and bookkeeping in s."""
STARTUP_S = {"cpu": 3.0, "cuda": 10.0}
"""Seconds before the first configuration: imports, fingerprint, CUDA context (assumed)."""


@dataclass(frozen=True, kw_only=True)
class PlannedSlice:
    """One configuration's predicted fate."""

    label: str
    """perfmodel.measure.configs.SliceConfig.describe()."""
    fate: str
    """measure | measured (already in the shards: skipped on resume) | oom-predicted | oom-likely |
    too-slow | after-budget."""
    step_time_s: float | None = None
    """Predicted median step time in s (None when not predicted: a predicted OOM)."""
    step_time_high_s: float | None = None
    """High end of the predicted step-time interval in s."""
    peak_memory_gb: float | None = None
    """Predicted peak memory in GB (analytic)."""
    cost_s: float = 0.0
    """Wall time the collector is projected to spend on it in s."""
    start_s: float
    """Projected start, seconds after the collection starts."""
    note: str = ""
    """Why it is skipped, or a prediction warning."""


@dataclass(frozen=True, kw_only=True)
class ProfilePlan:
    """A whole profile on one device."""

    profile: str
    """quick | gpu | full."""
    device: str
    """Catalog accelerator name, or 'cpu'."""
    device_kind: str
    """'cpu' or 'cuda'."""
    budget_s: float
    """The budget the plan assumes in s."""
    startup_s: float
    """Assumed start-up before the micro-benchmarks in s."""
    microbench_s: float
    """Projected micro-benchmark time in s (at most their share of the budget)."""
    setup_s: float
    """Assumed per-configuration setup in s."""
    model_kind: str
    """'learned' or 'analytic': what predicted the step times."""
    slices: list[PlannedSlice] = field(default_factory=list)
    """Every configuration, in run order."""

    @property
    def projected_s(self) -> float:
        """Projected wall time of the whole collection (capped by the budget) in s."""
        return min(
            self.startup_s
            + self.microbench_s
            + sum(s.cost_s for s in self.slices if s.fate != "after-budget"),
            self.startup_s + self.budget_s,
        )

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.slices:
            out[s.fate] = out.get(s.fate, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self),
            "projected_s": round(self.projected_s, 3),
            "counts": self.counts(),
        }


def slice_facts(config: SliceConfig) -> dict[str, Any]:
    """Parameters, per-sample forward FLOPs and (CNN/MLP) what the model saves for backward, without
    a device: transformers analytically (perfmodel.measure.configs), CNN/MLP built once per model on
    this CPU (`_network_facts`)."""
    if config.kind == "lightgbm":
        return {"params_total": None}
    if config.is_transformer:
        return {"params_total": float(transformer_params(config) + lora_params(config))}
    model_only = dataclasses.replace(
        config, micro_batch_size=2, precision="fp32", optimizer="adamw", activation_checkpointing=False,
        lora_r=None, warmup_steps=2, measured_steps=10,
    )  # fmt: skip
    return dict(_network_facts(model_only))


@functools.lru_cache(maxsize=64)
def _network_facts(config: SliceConfig) -> tuple[tuple[str, float], ...]:
    """A CNN/MLP slice's parameters, forward FLOPs and the MB per sample autograd saves for backward,
    measured on this CPU in fp32 as perfmodel.measure.slices measures them on the device (the same
    functions: forward_gflops_per_sample, activation_mb_per_sample); without the last, a plan row
    costed a CNN's batch norms and ReLUs as nothing (a ResNet-50 slice at 4x speed)."""
    # torch: seconds to import, only measuring needs it; perfmodel.measure.models imports torch: only this path needs it
    import torch

    from perfmodel.measure import models

    model = models.build_model(config, "cpu")
    return (
        ("params_total", float(sum(p.numel() for p in model.parameters()))),
        ("forward_gflops_per_sample", models.forward_gflops_per_sample(model, "cpu", torch.float32)),
        ("activation_mb_per_sample", models.activation_mb_per_sample(model, "cpu", torch.float32)),
    )


def _row(config: SliceConfig, device: str) -> dict[str, Any]:
    # LightGBM slices run on the host CPU whatever the device; 'cpu' is this machine, with its
    # measured ceilings when datasets/raw has them (perfmodel.catalog.describe_local_cpu).
    on_gpu = device != "cpu" and config.kind != "lightgbm"
    return {**row_fields(config), **slice_facts(config), "gpu": device if on_gpu else "cpu"}


def plan_profile(
    profile: str,
    device: str = "cpu",
    *,
    budget_s: float | None = None,
    setup_s: float | None = None,
    model_dir: str | None = None,
    out_dir: str | Path | None = None,
    measured: tuple[str, set[str], set[tuple[str, str, str]]] | None = None,
) -> ProfilePlan:
    """Project `profile` on `device` (a catalog accelerator name or alias, or 'cpu': this
    machine). `setup_s` overrides the per-configuration setup (SETUP_S). For 'cpu' with `out_dir`,
    configurations this host has already measured there are marked 'measured' and cost nothing,
    as a resumed collection skips them. `measured` (hardware id, row ids, micro-benchmark keys)
    says the same for another host, e.g. a fleet node (collectors.fleet), in place of `out_dir`."""
    kind = "cpu" if device == "cpu" else "cuda"
    if profile == "gpu" and kind == "cpu":
        raise ConfigError(
            "profile 'gpu' runs on a GPU: plan it for one with --gpu NAME (e.g. --gpu h200; `perfmodel gpus` lists them)"
        )
    gpu_name = "cpu" if kind == "cpu" else get_gpu(device).name
    gpu = get_gpu(gpu_name)
    prof = build_profile(profile, kind, _supports(kind, gpu))
    budget = prof.budget_s if budget_s is None else validate_budget_s(budget_s)
    setup = SETUP_S[kind] if setup_s is None else float(setup_s)
    done = _measured_here(out_dir) if kind == "cpu" and out_dir is not None else (None, set(), set())
    if measured is not None:
        done = measured
    microbench = 0.0
    if prof.microbench is not None:
        estimate = estimate_microbench_s(prof.microbench, gpu, skip=done[2])
        microbench = min(estimate, MICROBENCH_BUDGET_FRACTION * budget)
    t = microbench
    model_kind = "analytic"
    memory_gb = float(gpu.memory_gb) if kind == "cuda" else 0.0
    planned: list[PlannedSlice] = []
    for config in prof.configs:
        label = config.describe()
        if done[0] is not None and make_row_id(done[0], config, kind) in done[1]:
            planned.append(
                PlannedSlice(label=label, fate="measured", start_s=t, note="already measured on this host")
            )
            continue
        if t >= budget:
            planned.append(PlannedSlice(label=label, fate="after-budget", start_s=t))
            continue
        workload = workload_from_row(_row(config, gpu_name))
        reason = predicted_oom(config, memory_gb) if kind == "cuda" else None
        if reason:
            planned.append(PlannedSlice(label=label, fate="oom-predicted", start_s=t, note=reason))
            continue
        run = predict(workload, model_dir=model_dir)
        model_kind = run.model_kind
        step, high = run.step_time_s.estimate, run.step_time_s.high
        peak = run.peak_memory_gb.estimate
        fate, note = "measure", ""
        if kind == "cuda" and config.kind != "lightgbm" and not run.fits_in_memory:
            fate, cost = "oom-likely", setup + step
            note = f"predicted peak {peak:.1f} GB > {memory_gb:.0f} GB: expect an OOM row"
        elif prof.max_config_s is not None and step * config.measured_steps > prof.max_config_s:
            fate, cost = "too-slow", setup + step * config.warmup_steps
            note = f"measured steps projected {step * config.measured_steps:.0f} s > cap {prof.max_config_s:.0f} s"
        else:
            cost = setup + step * (config.warmup_steps + config.measured_steps)
        if t + cost > budget and fate == "measure":
            fate, note = "after-budget", "would pass the budget: stopped before or after its warm-up"
            cost = max(budget - t, 0.0)
        planned.append(
            PlannedSlice(
                label=label,
                fate=fate,
                step_time_s=step,
                step_time_high_s=high,
                peak_memory_gb=peak,
                cost_s=cost,
                start_s=t,
                note=note,
            )
        )
        t += cost
    return ProfilePlan(
        profile=prof.name,
        device=gpu_name,
        device_kind=kind,
        budget_s=budget,
        startup_s=STARTUP_S[kind],
        microbench_s=microbench,
        setup_s=setup,
        model_kind=model_kind,
        slices=planned,
    )


def _measured_here(out_dir: str | Path) -> tuple[str, set[str], set[tuple[str, str, str]]]:
    """This host's hardware id, and the training-slice row ids and micro-benchmark keys its shards
    in `out_dir` already hold."""
    hardware_id = collect_fingerprint(lambda: []).hardware_id  # the CPU host: no GPU query
    return hardware_id, measured_row_ids(out_dir, hardware_id), measured_microbench_keys(out_dir, hardware_id)


def _supports(kind: str, gpu: GPUSpec) -> Callable[[str], bool]:
    """Which precisions the device runs: the collectors' CPU rule, or a datasheet peak."""
    if kind == "cpu":
        return CpuDevice().supports
    return lambda precision: PRECISION_DTYPES.get(precision, precision) in gpu.peak_tflops


def estimate_microbench_s(
    plan: MicrobenchPlan, gpu: GPUSpec, skip: set[tuple[str, str, str]] | None = None
) -> float:
    """Projected wall time of the micro-benchmark `plan` on `gpu` in s (see the module docstring);
    `skip` holds (bench, dtype, shape) keys already measured."""
    kind = "cpu" if gpu.vendor == "cpu" else "cuda"
    supports = _supports(kind, gpu)
    total = 0.0
    for bench, dtype, shape in plan_items(plan, SimpleNamespace(kind=kind), num_gpus=1):
        if not supports(dtype) or (skip and (bench, dtype, shape) in skip):
            continue  # an 'unsupported' row, or measured before: no timing
        if bench == "matmul":
            n = int(shape.split("x")[0])
            call = 2 * n**3 / (0.8 * gpu.peak_for(dtype) * 1e12)
        elif bench == "attention":
            b, h, s, d = (int(x) for x in shape.split("x"))
            call = 3.5 * 4 * b * h * s * s * d / 2 / (0.4 * gpu.peak_for(dtype) * 1e12)
        elif bench == "hbm_copy":
            call = 2 * int(shape[:-2]) * 1e6 / (0.8 * gpu.hbm_bandwidth_gb_per_s * 1e9)
        elif bench.startswith(BENCH_PREFIX):  # an eager module: memory-bound, at half the bandwidth
            call = kernel_work_of(bench, dtype, shape).bytes_moved / (0.5 * gpu.hbm_bandwidth_gb_per_s * 1e9)
        else:  # host copies
            call = int(shape[:-2]) * 1e6 / (HOST_LINK_GB_PER_S * 1e9)
        call = max(call, CALL_FLOOR_S)
        warmup = min(max(3 * call, 10 * plan.sample_target_s), 50 * call)
        total += MICROBENCH_ITEM_S + warmup + plan.iters * max(call, min(plan.sample_target_s, 200 * call))
    return total


def plan_table(plan: ProfilePlan) -> Any:
    """The plan as a Rich table (one row per configuration; why a configuration is skipped in
    its fate cell) with the totals in its caption."""
    # rich: only output needs it (the CLI's cold start)
    from rich.table import Table

    counts = ", ".join(f"{n} {fate}" for fate, n in plan.counts().items())
    setup = "measured on a 2-core CPU" if plan.device_kind == "cpu" else "assumed"
    table = Table(
        title=f"profile {plan.profile} on {plan.device}: projected {plan.projected_s / 60:.1f} min "
        f"(budget {plan.budget_s / 60:.1f} min + start-up)",
        caption=f"{counts}. Start-up {plan.startup_s:.0f} s, then micro-benchmarks {plan.microbench_s:.0f} s; "
        f"setup {plan.setup_s:g} s per configuration ({setup}); step times (90% interval) from the "
        f"{plan.model_kind} model.",
    )
    for name, justify in (
        ("start s", "right"),
        ("configuration", "left"),
        ("fate", "left"),
        ("step ms", "right"),
        ("peak GB", "right"),
        ("cost s", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for s in plan.slices:
        step = "" if s.step_time_s is None else f"{s.step_time_s * 1e3:.4g}"
        if s.step_time_high_s is not None:
            step += f" (≤{s.step_time_high_s * 1e3:.4g})"
        peak = "" if s.peak_memory_gb is None else f"{s.peak_memory_gb:.1f}"
        fate = s.fate if not s.note else f"{s.fate}: {s.note}"
        table.add_row(f"{s.start_s:.0f}", s.label, fate, step, peak, f"{s.cost_s:.1f}")
    return table
