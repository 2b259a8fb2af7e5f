"""Micro-benchmarks: the ceilings a device actually reaches (rows of perfmodel.schema.MICROBENCH_COLUMNS).

- matmul: C = A @ B with square n x n operands, 2*n^3 FLOPs, per supported dtype (fp32, tf32,
  bf16, fp16; tf32 = fp32 tensors with TF32 tensor cores allowed).
- hbm_copy: device-to-device tensor copy; bandwidth counts bytes read + bytes written (2 x size),
  as STREAM 'copy' does.
- attention: causal F.scaled_dot_product_attention forward + backward; FLOPs as in
  flash-attention's benchmarks (benchmarks/benchmark_flash_attention.py): forward
  4*b*h*s^2*d / 2 for a causal mask, backward 2.5 x forward, so forward+backward 3.5 x forward.
- h2d_copy / d2h_copy (CUDA only): pinned host memory <-> device, bytes / time.
- kernel <kind/variant> <phase>: one eager module of a training step (RMSNorm, LayerNorm, SwiGLU,
  rotary, cross-entropy, embedding) forward or forward + backward, its bandwidth counted from the
  work the step plan prices (collectors/kernel_bench.py); the kernel table takes these rows.
- all_reduce (only with > 1 GPU): torch.distributed all-reduce when the process was launched
  distributed (torchrun); 'bus' bandwidth 2*(n-1)/n * bytes / time as in nccl-tests. Without a
  distributed launch a row with status 'unsupported' says so.

Each benchmark warms up (>= 3 calls and ~10 samples' time), then takes `iters` samples (each the mean of enough back-to-back calls
to last a few milliseconds, between device synchronisations) and records the median.
"""

from __future__ import annotations

import datetime as dt
import functools
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import perfmodel
from collectors.kernel_bench import BENCH_PREFIX, timed_call, work_of
from perfmodel.measure.device import Device, fp32_matmul_mode, is_oom
from perfmodel.measure.fingerprint import Fingerprint

Clock = Callable[[], float]


@dataclass(frozen=True, kw_only=True)
class MicrobenchPlan:
    """What to measure, sized for the device and the profile's budget."""

    matmul_sizes: tuple[int, ...] = (256, 512, 1024)
    """Square matmul sizes n (n x n x n)."""
    matmul_dtypes: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16")
    """Dtypes to try; unsupported ones get a row with status 'unsupported'."""
    copy_mb: tuple[int, ...] = (64,)
    """Device copy sizes in MB."""
    attention_shapes: tuple[tuple[int, int, int, int], ...] = ((1, 8, 512, 64),)
    """(batch, heads, seq_len, head_dim) for causal attention forward+backward."""
    attention_dtypes: tuple[str, ...] = ("fp32",)
    """Dtypes for attention."""
    host_copy_mb: tuple[int, ...] = ()
    """Host<->device copy sizes in MB (CUDA only)."""
    all_reduce_mb: tuple[int, ...] = (256,)
    """All-reduce sizes in MB (only with > 1 GPU)."""
    kernels: tuple[tuple[str, str, str], ...] = ()
    """(bench, dtype, shape) of the kernel benchmarks (collectors.kernel_bench.plan_entries)."""
    iters: int = 10
    """Timed samples per benchmark (median recorded)."""
    sample_target_s: float = 0.005
    """Each sample repeats the call until it lasts about this long."""


_TORCH_DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def _time_call(fn: Callable[[], Any], device: Device, clock: Clock, iters: int, target_s: float) -> float:
    # Warm up: at least 3 calls and about 10 samples' worth of time (thread pools, kernel
    # selection, allocator), at most 50 calls.
    start = clock()
    calls = 0
    while calls < 50:
        fn()
        device.synchronize()
        calls += 1
        if calls >= 3 and clock() - start >= 10 * target_s:
            break
    # Back-to-back calls per sample, from the mean warm-up call: a lone call also times the
    # wake-up of idle worker threads (milliseconds on some virtual machines).
    once = max((clock() - start) / calls, 1e-9)
    inner = max(1, min(200, int(target_s / once)))
    samples = []
    for _ in range(iters):
        t0 = clock()
        for _ in range(inner):
            fn()
        device.synchronize()
        samples.append((clock() - t0) / inner)
    return statistics.median(samples)


def _row(fp: Fingerprint, device: Device, bench: str, dtype: str, shape: str, status: str, **values: Any) -> dict[str, Any]:
    on_gpu = device.kind == "cuda"
    return {
        "hardware_id": fp.hardware_id,
        "gpu": fp.gpu if on_gpu else "cpu",
        "device_name": fp.gpu_name if on_gpu else fp.cpu_model,
        "bench": bench,
        "dtype": dtype,
        "shape": shape,
        "status": status,
        "median_time_s": values.get("median_time_s"),
        "achieved_tflops": values.get("achieved_tflops"),
        "achieved_gb_per_s": values.get("achieved_gb_per_s"),
        "collected_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "collector_version": perfmodel.__version__,
    }


def _guarded(
    fp: Fingerprint, device: Device, bench: str, dtype: str, shape: str, body: Callable[[], dict[str, float]]
) -> dict[str, Any]:
    try:
        return _row(fp, device, bench, dtype, shape, "ok", **body())
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - one failed benchmark is a row, not a crash
        return _row(fp, device, bench, dtype, shape, "oom" if is_oom(exc) else "error")
    finally:
        device.release()


def plan_items(plan: MicrobenchPlan, device: Device, num_gpus: int) -> list[tuple[str, str, str]]:
    """(bench, dtype, shape) of every benchmark the plan runs on this device."""
    items = [("matmul", d, f"{n}x{n}x{n}") for d in plan.matmul_dtypes for n in plan.matmul_sizes]
    items += [("hbm_copy", "fp32", f"{mb}MB") for mb in plan.copy_mb]
    items += [("attention", d, "x".join(map(str, s))) for d in plan.attention_dtypes for s in plan.attention_shapes]
    items += list(plan.kernels)
    if device.kind == "cuda":
        items += [(b, "fp32", f"{mb}MB") for mb in plan.host_copy_mb for b in ("h2d_copy", "d2h_copy")]
        if num_gpus > 1:
            items += [("all_reduce", "fp32", f"{mb}MB") for mb in plan.all_reduce_mb]
    return items


def _matmul(plan: MicrobenchPlan, device: Device, clock: Clock, dtype: str, shape: str) -> dict[str, float]:
    # torch: seconds to import, only measuring needs it
    import torch

    n = int(shape.split("x")[0])
    tdtype = getattr(torch, _TORCH_DTYPES[dtype])
    a = torch.randn(n, n, device=device.torch_device, dtype=tdtype)
    b = torch.randn(n, n, device=device.torch_device, dtype=tdtype)
    with fp32_matmul_mode(dtype):
        t = _time_call(lambda: torch.mm(a, b), device, clock, plan.iters, plan.sample_target_s)
    return {"median_time_s": t, "achieved_tflops": 2 * n**3 / t / 1e12}


def _hbm_copy(plan: MicrobenchPlan, device: Device, clock: Clock, dtype: str, shape: str) -> dict[str, float]:
    # torch: seconds to import, only measuring needs it
    import torch

    nbytes = int(shape[:-2]) * 10**6
    src = torch.empty(nbytes // 4, device=device.torch_device, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    t = _time_call(lambda: dst.copy_(src), device, clock, plan.iters, plan.sample_target_s)
    return {"median_time_s": t, "achieved_gb_per_s": 2 * nbytes / t / 1e9}


def _attention(plan: MicrobenchPlan, device: Device, clock: Clock, dtype: str, shape: str) -> dict[str, float]:
    # torch: seconds to import, only measuring needs it
    import torch
    import torch.nn.functional as F

    b, h, s, d = (int(x) for x in shape.split("x"))
    tdtype = getattr(torch, _TORCH_DTYPES[dtype])
    q, k, v = (torch.randn(b, h, s, d, device=device.torch_device, dtype=tdtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(b, h, s, d, device=device.torch_device, dtype=tdtype)

    def fwd_bwd() -> None:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(grad)

    with fp32_matmul_mode("fp32"):
        t = _time_call(fwd_bwd, device, clock, plan.iters, plan.sample_target_s)
    flops = 3.5 * 4 * b * h * s * s * d / 2  # causal forward = half of 4*b*h*s^2*d; backward 2.5x
    return {"median_time_s": t, "achieved_tflops": flops / t / 1e12}


def _kernel(plan: MicrobenchPlan, device: Device, clock: Clock, bench: str, dtype: str, shape: str) -> dict[str, float]:
    # torch: seconds to import, only measuring needs it
    import torch

    call = timed_call(bench, shape, getattr(torch, _TORCH_DTYPES[dtype]), device.torch_device)
    t = _time_call(call, device, clock, plan.iters, plan.sample_target_s)
    return {"median_time_s": t, "achieved_gb_per_s": work_of(bench, dtype, shape).bytes_moved / t / 1e9}


def _host_copy(plan: MicrobenchPlan, device: Device, clock: Clock, bench: str, shape: str) -> dict[str, float]:
    # torch: seconds to import, only measuring needs it
    import torch

    nbytes = int(shape[:-2]) * 10**6
    host = torch.empty(nbytes // 4, dtype=torch.float32, pin_memory=True).fill_(1.0)
    gpu = torch.empty(nbytes // 4, dtype=torch.float32, device=device.torch_device)
    fn = (lambda: gpu.copy_(host)) if bench == "h2d_copy" else (lambda: host.copy_(gpu))
    t = _time_call(fn, device, clock, plan.iters, plan.sample_target_s)
    return {"median_time_s": t, "achieved_gb_per_s": nbytes / t / 1e9}


def _all_reduce(plan: MicrobenchPlan, device: Device, clock: Clock, dtype: str, shape: str) -> dict[str, float]:
    # torch: seconds to import, only measuring needs it
    import torch
    import torch.distributed as tdist

    nbytes = int(shape[:-2]) * 10**6
    world = tdist.get_world_size()
    buf = torch.ones(nbytes // 4, device=device.torch_device, dtype=torch.float32)
    t = _time_call(lambda: tdist.all_reduce(buf), device, clock, plan.iters, plan.sample_target_s)
    return {"median_time_s": t, "achieved_gb_per_s": 2 * (world - 1) / world * nbytes / t / 1e9}


def _distributed() -> bool:
    # torch: seconds to import, only measuring needs it
    import torch.distributed as tdist

    return bool(tdist.is_available() and tdist.is_initialized() and tdist.get_world_size() > 1)


def run_microbench(
    plan: MicrobenchPlan,
    *,
    device: Device,
    fingerprint: Fingerprint,
    skip: set[tuple[str, str, str]] | None = None,
    clock: Clock = time.perf_counter,
    deadline: float | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield one row per benchmark, in plan order; stop early at `deadline`."""
    for bench, dtype, shape in plan_items(plan, device, fingerprint.gpu_count):
        if skip and (bench, dtype, shape) in skip:
            continue
        if deadline is not None and clock() > deadline:
            return
        kernel = bench.startswith(BENCH_PREFIX)
        if (bench in ("matmul", "attention") or kernel) and not device.supports(dtype):
            yield _row(fingerprint, device, bench, dtype, shape, "unsupported")
            continue
        if bench == "all_reduce" and not _distributed():
            yield _row(fingerprint, device, bench, dtype, shape + " (not launched distributed)", "unsupported")
            continue
        if bench == "matmul":
            body = functools.partial(_matmul, plan, device, clock, dtype, shape)
        elif bench == "hbm_copy":
            body = functools.partial(_hbm_copy, plan, device, clock, dtype, shape)
        elif bench == "attention":
            body = functools.partial(_attention, plan, device, clock, dtype, shape)
        elif kernel:
            body = functools.partial(_kernel, plan, device, clock, bench, dtype, shape)
        elif bench in ("h2d_copy", "d2h_copy"):
            body = functools.partial(_host_copy, plan, device, clock, bench, shape)
        else:
            body = functools.partial(_all_reduce, plan, device, clock, dtype, shape)
        yield _guarded(fingerprint, device, bench, dtype, shape, body)
