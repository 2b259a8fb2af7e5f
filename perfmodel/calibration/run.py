"""`perfmodel calibrate`: measure this machine once, within a budget, and keep a calibration that
every prediction for its hardware uses at once (perfmodel.calibration.apply).

    result = calibrate(budget_s=180)          # -> CalibrateResult (.calibration, .path)

1. Fingerprint the host; the device is CUDA when it has a GPU, else the CPU.
2. The collectors' standardized micro-benchmarks (collectors.microbench, a calibration-sized plan:
   matmul per dtype, device copy, causal attention), stopped at MICROBENCH_FRACTION of the budget,
   and a launch latency (a one-element add, timed like the others). Ceilings: the best matmul
   TFLOP/s per dtype, the copy GB/s, the launch latency. Kernel factors: measured / modelled time
   of each benchmark's kernel (perfmodel.kernels.efficiency, with the new ceilings), per group.
3. 3-5 small training slices chosen to pin the kernel terms (`calibration_slices`: a wide MLP for
   the matmuls, a decoder for attention, norms, rotary, embedding and the loss, an encoder for
   layer norm and GELU, a CNN for convolutions and batch norm, a 16-bit decoder where the device
   runs 16-bit), each the collectors' protocol (perfmodel.measure.slices.run_slice: warm-up, then
   >= 10 timed steps), until the budget ends: a slice that would pass it is not started.
4. The calibration file (perfmodel.calibration.record), written into the calibration folder.

Fleet: `calibration_from_rows` builds the same record from a collection's micro-benchmark and slice
rows (what `perfmodel collect --ray` measured on each node).
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.microbench import MicrobenchPlan, run_microbench
from collectors.progress import Reporter
from perfmodel.analytic import conventions
from perfmodel.calibration.apply import SHRINK_RUNS, FittedCalibration, shrink_runs, shrink_weight
from perfmodel.calibration.record import (
    MAX_EVIDENCE,
    Calibration,
    KernelFactor,
    apply_ceilings,
    is_missing,
    kind_of_fingerprint,
    measured_run,
    save_calibration,
    utc_now,
)
from perfmodel.catalog import get_gpu
from perfmodel.catalog.hardware import cpu_spec
from perfmodel.errors import ConfigError
from perfmodel.kernels.efficiency import kernel_times
from perfmodel.kernels.work import attention_work, elementwise_work, matmul_work
from perfmodel.measure import slices
from perfmodel.measure.configs import SliceConfig
from perfmodel.measure.device import Device, make_device
from perfmodel.measure.fingerprint import Fingerprint, GpuQuery, collect_fingerprint
from perfmodel.measure.storage import list_shards, measured_hosts
from perfmodel.prediction import fitted_calibration
from perfmodel.workload import GPUSpec

DEFAULT_BUDGET_S = {"cuda": 120.0, "cpu": 180.0}
"""Default --budget-s per device (the issue's limits: 2 minutes on a GPU, 3 on a 2-core CPU)."""
MICROBENCH_FRACTION = 0.25
"""The micro-benchmarks stop after this share of the budget; the rest is for the slices."""
MIN_BUDGET_S = 10.0
LAUNCH_ITERS = 5


@dataclass(frozen=True, kw_only=True)
class CalibrateResult:
    """What `calibrate` did."""

    calibration: Calibration
    path: Path | None
    """The file written (None with save=False)."""
    elapsed_s: float
    stopped: str
    """'complete' or 'budget' (slices left out)."""
    skipped: tuple[str, ...] = ()
    """Slices not run or not usable, each with why."""

    def to_json(self) -> dict[str, Any]:
        return {
            "path": None if self.path is None else str(self.path),
            "elapsed_s": self.elapsed_s,
            "stopped": self.stopped,
            "skipped": list(self.skipped),
            "calibration": self.calibration.to_json(),
        }


def microbench_plan(device_kind: str) -> MicrobenchPlan:
    """The calibration's micro-benchmarks: the collectors' benchmarks, sized for seconds."""
    if device_kind == "cuda":
        return MicrobenchPlan(matmul_sizes=(2048, 8192), matmul_dtypes=("fp32", "tf32", "bf16", "fp16"),
                              copy_mb=(512,), attention_shapes=((4, 16, 2048, 128),), attention_dtypes=("bf16",),
                              iters=5, sample_target_s=0.01)  # fmt: skip
    return MicrobenchPlan(matmul_sizes=(256, 512), matmul_dtypes=("fp32", "bf16"), copy_mb=(32,),
                          attention_shapes=((1, 4, 256, 64),), attention_dtypes=("fp32",), iters=5,
                          sample_target_s=0.02)  # fmt: skip


def calibration_slices(device_kind: str) -> list[SliceConfig]:
    """3-5 small training slices that pin the kernel terms (module docstring), most informative first."""
    w = 2
    if device_kind == "cuda":
        return [
            SliceConfig(kind="llama", hidden_size=1024, num_layers=8, num_heads=16, num_kv_heads=8, ffn_hidden_size=2816,
                        vocab_size=32000, seq_len=1024, micro_batch_size=8, precision="amp_bf16", warmup_steps=w),
            SliceConfig(kind="mlp", in_features=1024, hidden_size=8192, num_layers=4, num_classes=2,
                        micro_batch_size=8192, precision="amp_bf16", warmup_steps=w),
            SliceConfig(kind="bert", hidden_size=768, num_layers=6, num_heads=12, ffn_hidden_size=3072,
                        vocab_size=30522, num_classes=2, seq_len=512, micro_batch_size=16, precision="amp_bf16",
                        warmup_steps=w),
            SliceConfig(kind="resnet", cnn_width=64, cnn_blocks=(2, 2, 2, 2), cnn_bottleneck=False, image_size=224,
                        num_classes=1000, micro_batch_size=64, precision="amp_bf16", warmup_steps=w),
            SliceConfig(kind="llama", hidden_size=1024, num_layers=8, num_heads=16, num_kv_heads=8, ffn_hidden_size=2816,
                        vocab_size=32000, seq_len=2048, micro_batch_size=4, precision="fp32", warmup_steps=w),
        ]  # fmt: skip
    return [
        SliceConfig(kind="mlp", in_features=64, hidden_size=512, num_layers=4, num_classes=2,
                    micro_batch_size=256, warmup_steps=w),
        SliceConfig(kind="llama", hidden_size=128, num_layers=2, num_heads=4, num_kv_heads=2, ffn_hidden_size=344,
                    vocab_size=4000, seq_len=128, micro_batch_size=2, warmup_steps=w),
        SliceConfig(kind="bert", hidden_size=128, num_layers=2, num_heads=4, ffn_hidden_size=512, vocab_size=4000,
                    num_classes=2, seq_len=128, micro_batch_size=4, warmup_steps=w),
        SliceConfig(kind="resnet", cnn_width=16, cnn_blocks=(1, 1, 1, 1), cnn_bottleneck=False, image_size=32,
                    num_classes=10, micro_batch_size=8, warmup_steps=w),
        SliceConfig(kind="llama", hidden_size=128, num_layers=2, num_heads=4, num_kv_heads=2, ffn_hidden_size=344,
                    vocab_size=4000, seq_len=256, micro_batch_size=4, warmup_steps=w),
    ]  # fmt: skip


def base_spec(fingerprint: Fingerprint | Mapping[str, Any]) -> GPUSpec:
    """The catalog's entry for the measured hardware (before any calibration)."""
    fp = fingerprint.to_dict() if isinstance(fingerprint, Fingerprint) else dict(fingerprint)
    if fp.get("kind") == "cuda":
        return get_gpu(str(fp.get("gpu")))

    return cpu_spec(str(fp.get("cpu_model", "")), int(fp.get("cpu_cores") or 1), float(fp.get("host_memory_gb") or 0.0), {})


# --- from measured rows to a calibration ---------------------------------------------------------


def ceilings_of(rows: Iterable[Mapping[str, Any]], launch_latency_s: float | None = None) -> dict[str, float]:
    """Best matmul TFLOP/s per dtype and copy GB/s of micro-benchmark rows (+ the launch latency)."""
    out: dict[str, float] = {}
    for r in rows:
        if r.get("status") != "ok":
            continue
        if r.get("bench") == "matmul" and _pos(r.get("achieved_tflops")):
            key = f"matmul_{r['dtype']}_tflops"
            out[key] = max(out.get(key, 0.0), float(r["achieved_tflops"]))
        elif r.get("bench") == "hbm_copy" and _pos(r.get("achieved_gb_per_s")):
            out["hbm_copy_gb_per_s"] = max(out.get("hbm_copy_gb_per_s", 0.0), float(r["achieved_gb_per_s"]))
    if launch_latency_s:
        out["launch_latency_s"] = float(launch_latency_s)
    return out


def _pos(value: Any) -> bool:
    try:
        return value is not None and math.isfinite(float(value)) and float(value) > 0
    except (TypeError, ValueError):
        return False


def _bench_work(row: Mapping[str, Any], on_cpu: bool) -> Any:
    """The kernel work a micro-benchmark row timed (None for benchmarks without one)."""
    bench, dtype, shape = row.get("bench"), str(row.get("dtype")), str(row.get("shape"))
    if bench == "matmul":
        n = int(shape.split("x")[0])
        return "matmul", [matmul_work(n, n, n, dtype)]
    if bench == "hbm_copy":
        nbytes = int(shape.removesuffix("MB")) * 10**6
        return "memory", [elementwise_work(nbytes // 4, "fp32", variant="copy", inputs=1, outputs=1)]
    if bench == "attention":
        b, h, s, d = (int(x) for x in shape.split("x"))
        variant = ("math" if dtype == "fp32" else "flash") if on_cpu else ("efficient" if dtype == "fp32" else "flash")
        return "attention", [attention_work(b, h, s, s, d, dtype, causal=True, variant=variant, phase="forward"),
                             attention_work(b, h, s, s, d, dtype, causal=True, variant=variant, phase="backward")]  # fmt: skip
    return None


def kernel_factors_of(
    rows: Sequence[dict[str, Any]], gpu: GPUSpec, launch_latency_s: float | None = None
) -> tuple[dict[str, KernelFactor], list[dict[str, Any]]]:
    """Per kernel group: measured / modelled seconds of the benchmarks (geometric mean), and the
    rows with their modelled time ('modelled_s') added. The host factor: the measured launch
    latency over the host time the step composer assumes per eager op."""

    on_cpu = gpu.vendor == "cpu"
    logs: dict[str, list[float]] = {}
    what: dict[str, list[str]] = {}
    out_rows = []
    for r in rows:
        row = dict(r)
        found = _bench_work(r, on_cpu) if r.get("status") == "ok" and _pos(r.get("median_time_s")) else None
        if found is not None:
            group, works = found
            try:
                modelled = sum(t.seconds for t in kernel_times(works, gpu))
            except (ValueError, KeyError):
                modelled = 0.0
            if modelled > 0:
                row["modelled_s"] = modelled
                logs.setdefault(group, []).append(math.log(float(r["median_time_s"]) / modelled))
                what.setdefault(group, []).append(f"{r['bench']} {r['dtype']} {r['shape']}")
        out_rows.append(row)
    factors = {
        g: KernelFactor(
            factor=math.exp(statistics.fmean(v)),
            log_sd=statistics.stdev(v) if len(v) > 1 else 0.0,
            n=len(v),
            source="; ".join(what[g]),
        )
        for g, v in logs.items()
    }
    if launch_latency_s:
        assumed = conventions.host_seconds_per_kernel(gpu.vendor)
        factors["host"] = KernelFactor(
            factor=float(launch_latency_s) / assumed,
            log_sd=0.0,
            n=1,
            source=f"launch latency {launch_latency_s * 1e6:.1f} us against the {assumed * 1e6:.1f} us per op assumed",
        )
    return factors, out_rows


def calibration_from_rows(
    fingerprint: Fingerprint | Mapping[str, Any],
    microbench_rows: Sequence[dict[str, Any]],
    slice_rows: Sequence[Mapping[str, Any]],
    *,
    origin: str = "calibrate",
    launch_latency_s: float | None = None,
    measurement: Mapping[str, Any] | None = None,
    source: str = "calibrate",
) -> Calibration:
    """A calibration from what was measured on one host (this one, or a fleet's node)."""
    fp = fingerprint.to_dict() if isinstance(fingerprint, Fingerprint) else dict(fingerprint)
    base = base_spec(fp)
    ceilings = ceilings_of(microbench_rows, launch_latency_s)
    gpu = apply_ceilings(base, ceilings)
    factors, rows = kernel_factors_of(microbench_rows, gpu, launch_latency_s)
    runs = [r for r in (measured_run(s, source, str(s.get("label") or "")) for s in slice_rows) if r is not None]
    now = utc_now()
    cal = Calibration(
        hardware_id=str(fp["hardware_id"]),
        accelerator_kind=kind_of_fingerprint(fp),
        device=str(fp.get("kind", "cpu")),
        fingerprint=fp,
        created_at=now,
        updated_at=now,
        origin=origin,
        ceilings=ceilings,
        kernel_factors=factors,
        microbench=[_trim_bench(r) for r in rows],
        runs=tuple(runs),
        measurement=dict(measurement or {}),
    )
    return with_snapshot(cal)


def calibrations_from_collection(
    out_dir: str | Path, hardware_ids: Iterable[str] | None = None, *, folder: str | Path | None = None
) -> list[Path]:
    """One calibration per measured host of a collectors' folder (what `perfmodel collect --ray`
    measured on each node or accelerator type): its micro-benchmark rows and its training-slice
    rows on its own device; kept in the calibration folder (`folder`, default
    perfmodel.paths.calibration_dir()) with origin 'collect'. Returns the files written."""
    # pyarrow: parquet shards, only a collection's calibration reads them
    import pyarrow.parquet as pq

    wanted = None if hardware_ids is None else set(hardware_ids)
    written = []
    for host in measured_hosts(out_dir):
        hw = host.hardware_id
        if wanted is not None and hw not in wanted:
            continue
        fp = host.fingerprint
        bench = [r for p in list_shards(out_dir, hardware_id=hw, microbench=True) for r in _rows(pq, p)]
        on = str(fp.get("gpu")) if fp.get("kind") == "cuda" else "cpu"
        runs = [r for p in list_shards(out_dir, hardware_id=hw) for r in _rows(pq, p)
                if r.get("status") == "ok" and str(r.get("gpu")) == on]  # fmt: skip
        if not bench and not runs:
            continue
        cal = calibration_from_rows(fp, bench, runs[-MAX_EVIDENCE:], origin="collect", source="collect",
                                    measurement={"from": str(out_dir)})  # fmt: skip
        written.append(save_calibration(cal, folder))
    return written


def _rows(pq: Any, path: Path) -> list[dict[str, Any]]:
    try:
        return list(pq.read_table(path).to_pylist())
    except (OSError, ValueError):  # a damaged shard is the collector's to set aside
        return []


def _trim_bench(row: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("bench", "dtype", "shape", "status", "median_time_s", "achieved_tflops", "achieved_gb_per_s", "modelled_s")
    return {k: row.get(k) for k in keys if not is_missing(row.get(k))}


def with_snapshot(cal: Calibration, *, model_dir: str | Path | None = None) -> Calibration:
    """`cal` with its offset snapshot (and each run's uncalibrated prediction) from the model that
    predicts now."""

    if not cal.runs:
        return dataclasses.replace(cal, offset={"n": 0.0, "k": SHRINK_RUNS, "weight": 0.0})
    fitted = fitted_calibration(cal, base_spec(cal.fingerprint), model_dir=model_dir)
    by_label = {p.label: p.predicted_s for p in fitted.points}
    runs = tuple(dataclasses.replace(r, predicted_s=by_label.get(r.label, r.predicted_s)) for r in cal.runs)
    n = float(fitted.n)
    k = shrink_runs(fitted.pooled_sd()[0], fitted.offset())
    offset = {
        "log_offset": fitted.offset(),
        "log_sd": fitted.spread,
        "log_sd_without_kernel_factors": fitted.spread_without_factors,
        "kernel_factors_used": 1.0 if fitted.use_factors else 0.0,
        "host_factor": math.exp(fitted.theta),
        "n": n,
        "k": k,
        "weight": shrink_weight(n, k),
    }
    return dataclasses.replace(cal, runs=runs, offset=offset)


# --- measuring -----------------------------------------------------------------------------------


LAUNCH_ELEMENTS = {"cpu": 1 << 16, "cuda": 1}
"""Elements of the launch-latency op: on a CPU the smallest add ATen splits across its threads
(grain size 32768), so the time includes waking the thread pool, which is what every parallel op
of a training step pays (milliseconds on a loaded host); on a GPU one element (the launch)."""


def launch_latency_s(device: Device, clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds one small op costs from launch to completion (an add over LAUNCH_ELEMENTS), median
    of LAUNCH_ITERS samples of back-to-back calls: the per-kernel host and launch time."""
    # torch: seconds to import, only measuring needs it
    import torch

    x = torch.ones(LAUNCH_ELEMENTS.get(device.kind, 1), device=device.torch_device)
    for _ in range(20):
        x = x + 1
    device.synchronize()
    samples = []
    for _ in range(LAUNCH_ITERS):
        t0 = clock()
        for _ in range(200):
            x = x + 1
        device.synchronize()
        samples.append((clock() - t0) / 200)
    return statistics.median(samples)


def calibrate(
    *,
    device: str | None = None,
    budget_s: float | None = None,
    folder: str | Path | None = None,
    save: bool = True,
    progress: bool = False,
    clock: Callable[[], float] = time.perf_counter,
    prepare: slices.Prepare | None = None,
    gpu_query: GpuQuery | None = None,
    configs: Sequence[SliceConfig] | None = None,
    plan: MicrobenchPlan | None = None,
    measure_launch: Callable[[Device], float] | None = None,
) -> CalibrateResult:
    """Measure this machine (module docstring) and keep its calibration. `prepare`, `gpu_query`,
    `configs`, `plan` and `measure_launch` replace the real ones in tests."""
    t0 = clock()
    fingerprint = collect_fingerprint(gpu_query)
    dev = make_device(device, fingerprint.kind)
    budget = float(budget_s if budget_s is not None else DEFAULT_BUDGET_S.get(dev.kind, 180.0))
    if not math.isfinite(budget) or budget < MIN_BUDGET_S:
        raise ConfigError(f"--budget-s must be at least {MIN_BUDGET_S:.0f} seconds, got {budget_s}")
    deadline = t0 + budget
    todo = list(configs if configs is not None else calibration_slices(dev.kind))
    reporter = Reporter(progress, len(todo) + 1, f"calibrate {fingerprint.hardware_id}")
    load_start = _loadavg()
    bench_rows: list[dict[str, Any]] = []
    slice_rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    stopped = "complete"
    with reporter.running():
        reporter.describe("micro-benchmarks")
        mb_deadline = t0 + MICROBENCH_FRACTION * budget
        for row in run_microbench(plan or microbench_plan(dev.kind), device=dev, fingerprint=fingerprint,
                                  clock=clock, deadline=mb_deadline):  # fmt: skip
            bench_rows.append(row)
            value = row.get("achieved_tflops") or row.get("achieved_gb_per_s")
            unit = "TFLOP/s" if row.get("achieved_tflops") else "GB/s"
            reporter.log(f"{row['bench']} {row['dtype']} {row['shape']}: {row['status']}" + (f" {value:.3g} {unit}" if value else ""))
        latency = (measure_launch or launch_latency_s)(dev)
        reporter.log(f"launch latency: {latency * 1e6:.1f} us")
        reporter.advance()
        for config in todo:
            if clock() >= deadline:
                stopped = "budget"
                skipped.append(f"{config.describe()}: the budget ended")
                continue
            reporter.describe(config.describe())
            try:
                measurement, facts = slices.run_slice(
                    config, device=dev, prepare=prepare or slices.prepare_slice, clock=clock, deadline=deadline
                )
            except (slices.BudgetExhausted, slices.TooSlow) as exc:
                stopped = "budget"
                skipped.append(f"{config.describe()}: would pass the budget ({exc or 'projected'})")
                reporter.advance()
                continue
            row = slices.slice_row(config, measurement, facts, fingerprint=fingerprint, device_kind=dev.kind,
                                   peak_memory_method=dev.peak_memory_method)  # fmt: skip
            if row["status"] != "ok":
                skipped.append(f"{config.describe()}: {row['status']} ({row.get('notes') or ''})")
            else:
                slice_rows.append({**row, "label": config.describe()})
                reporter.log(f"{config.describe()}: {row['step_time_s']:.4g} s/step")
            reporter.advance()
    elapsed = clock() - t0
    measurement_info = {
        "budget_s": budget,
        "elapsed_s": elapsed,
        "stopped": stopped,
        "device": dev.kind,
        "load_avg_1m_start": load_start,
        "load_avg_1m_end": _loadavg(),
        "cpu_count": os.cpu_count(),
        "slices_planned": len(todo),
        "slices_measured": len(slice_rows),
    }
    cal = calibration_from_rows(fingerprint, bench_rows, slice_rows, launch_latency_s=latency,
                                measurement=measurement_info)  # fmt: skip
    path = save_calibration(cal, folder) if save else None
    return CalibrateResult(calibration=cal, path=path, elapsed_s=elapsed, stopped=stopped, skipped=tuple(skipped))


def _loadavg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


# --- showing -------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class CalibrationReport:
    """What `perfmodel calibrate --show` prints: what was measured, when, on what, and how each
    figure moved the model."""

    calibration: Calibration
    ceilings: list[dict[str, Any]] = field(default_factory=list)
    """Each ceiling beside the catalog's value it replaces."""
    factors: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    """Each run: measured, uncalibrated, calibrated (leave-one-out and in-sample) step time."""
    offset: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        c = self.calibration
        return {
            "hardware_id": c.hardware_id,
            "accelerator_kind": c.accelerator_kind,
            "device": c.device,
            "origin": c.origin,
            "created_at": c.created_at,
            "updated_at": c.updated_at,
            "measurement": c.measurement,
            "ceilings": self.ceilings,
            "kernel_factors": self.factors,
            "offset": self.offset,
            "runs": self.runs,
        }


def report(cal: Calibration, *, model_dir: str | Path | None = None) -> CalibrationReport:
    """How each figure of `cal` moves the model (for --show): the ceilings against the catalog,
    the kernel factors, and each run predicted uncalibrated and calibrated on the others
    (leave-one-out: what a configuration the calibration did not measure would get)."""

    base = base_spec(cal.fingerprint)
    ceilings = []
    for key, value in sorted(cal.ceilings.items()):
        before: float | None
        if key.startswith("matmul_"):
            dtype = key.removeprefix("matmul_").removesuffix("_tflops")
            before = base.measured.get(key) or (base.peak_for(dtype) if base.supports(dtype) else None)
        elif key == "hbm_copy_gb_per_s":
            before = base.measured.get(key) or base.hbm_bandwidth_gb_per_s
        else:

            before = conventions.host_seconds_per_kernel(base.vendor)
        ceilings.append({"name": key, "measured": value, "model_before": before})
    fitted = fitted_calibration(cal, base, model_dir=model_dir)
    runs = []
    for i, p in enumerate(fitted.points):
        others = FittedCalibration.of(cal, [q for j, q in enumerate(fitted.points) if j != i])
        lo = others.local(p.key, p.log_flops, p.log_bytes, p.log_ratio(others.theta, others.use_factors))
        loo = p.predicted_s * math.exp(shrink_weight(lo.n, shrink_runs(lo.sd, lo.c)) * lo.c)
        la = fitted.local(p.key, p.log_flops, p.log_bytes, p.log_ratio(fitted.theta, fitted.use_factors))
        runs.append({
            "label": p.label,
            "measured_s": p.measured_s,
            "uncalibrated_s": p.predicted_s,
            "calibrated_s": p.predicted_s * math.exp(shrink_weight(la.n, shrink_runs(la.sd, la.c)) * la.c),
            "calibrated_leave_one_out_s": loo,
        })  # fmt: skip
    n = float(fitted.n)
    k = shrink_runs(fitted.pooled_sd()[0], fitted.offset())
    offset = {
        "log_offset": fitted.offset(),
        "factor": math.exp(fitted.offset()),
        "log_sd": fitted.spread,
        "log_sd_without_kernel_factors": fitted.spread_without_factors,
        "kernel_factors_used": fitted.use_factors,
        "host_factor": math.exp(fitted.theta),
        "n": n,
        "k": k,
        "weight": shrink_weight(n, k),
    }
    factors = [{"group": g, **f.to_json()} for g, f in sorted(cal.kernel_factors.items())]
    return CalibrationReport(calibration=cal, ceilings=ceilings, factors=factors, runs=runs, offset=offset)


def plot_report(rep: CalibrationReport, path: str | Path) -> Path:
    """Predicted against measured step time of the calibration's own runs: uncalibrated, and
    calibrated on the other runs (leave-one-out), on log axes with the y = x line."""
    # matplotlib: seconds to import, only --plot needs it (perfmodel.learn.plots sets the Agg backend)
    from perfmodel.learn.plots import _plt

    plt = _plt()

    fig, ax = plt.subplots(figsize=(5.5, 5))
    meas = [r["measured_s"] for r in rep.runs]
    ax.scatter(meas, [r["uncalibrated_s"] for r in rep.runs], marker="o", label="uncalibrated")
    ax.scatter(meas, [r["calibrated_leave_one_out_s"] for r in rep.runs], marker="^", label="calibrated (leave one out)")
    values = meas + [r["uncalibrated_s"] for r in rep.runs] + [r["calibrated_leave_one_out_s"] for r in rep.runs]
    if values:
        lo, hi = min(values) / 1.5, max(values) * 1.5
        ax.plot([lo, hi], [lo, hi], color="grey", linewidth=1, label="predicted = measured")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured step time (s)")
    ax.set_ylabel("predicted step time (s)")
    ax.set_title(f"calibration {rep.calibration.hardware_id}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
