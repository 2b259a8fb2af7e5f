"""The device a collection runs on: synchronisation, peak memory, precision support, OOM tests.

`CpuDevice` and `CudaDevice` are the real ones; tests pass their own object with the same
attributes (a fake GPU that computes on the CPU), which is why the harness only ever talks to a
device through this small surface.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
from collections.abc import Iterator
from typing import Any, Protocol

from perfmodel.errors import ConfigError

PRECISION_DTYPES = {"fp32": "fp32", "tf32": "tf32", "amp_bf16": "bf16", "amp_fp16": "fp16", "bf16": "bf16", "fp16": "fp16"}
"""Training precision -> the compute dtype its matmuls run in."""


class Device(Protocol):
    """What the harness needs from a device."""

    kind: str
    """'cpu' or 'cuda' (a fake GPU says 'cuda')."""
    torch_device: str
    """Where tensors go: 'cpu' or 'cuda:0'."""
    autocast_device_type: str
    """device_type for torch.autocast."""
    total_memory_gb: float
    """Memory available to one model (device memory; host RAM on CPU)."""
    peak_memory_method: str
    """How peak_memory_gb() measures, recorded in each row's notes."""

    def synchronize(self) -> None: ...
    def begin_memory(self) -> None:
        """Before a model is built: free what earlier slices left, take the baseline."""
    def reset_peak_memory(self) -> None:
        """After the model is built: peak tracking restarts from what is allocated now (the
        weights), so transients of building (an fp32 copy before a bf16 cast) are not counted."""
    def peak_memory_gb(self) -> float | None: ...
    def release(self) -> None: ...
    def supports(self, dtype: str) -> bool: ...


def is_oom(exc: BaseException) -> bool:
    """True for an out-of-memory failure (CUDA OOM, allocator RuntimeError, host MemoryError)."""
    if isinstance(exc, MemoryError):
        return True
    try:
        import torch

        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return True
    except ImportError:
        pass
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def _proc_status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _malloc_trim() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class CpuDevice:
    """The host CPU. Peak memory is the growth of the process's resident set: before the model
    is built the heap is trimmed and VmRSS is read as the baseline; after it is built the
    high-water mark VmHWM is reset by writing 5 to /proc/self/clear_refs (Linux); after the
    measured steps peak = VmHWM - baseline. It counts
    every allocation of the slice (weights, gradients, optimizer state, activations, allocator
    slack), which is close to, but not the same as, torch.cuda.max_memory_allocated."""

    kind = "cpu"
    torch_device = "cpu"
    autocast_device_type = "cpu"
    peak_memory_method = "cpu: resident-set high-water mark (reset after build) - resident set before build"

    def __init__(self) -> None:
        total_kb = 0
        with contextlib.suppress(OSError), open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable"):
                    total_kb = int(line.split()[1])
                    break
        self.total_memory_gb = total_kb * 1024 / 1e9
        self._baseline_kb: int | None = None
        self._hwm_resettable = True

    def synchronize(self) -> None:
        return None

    def begin_memory(self) -> None:
        gc.collect()
        _malloc_trim()
        self._baseline_kb = _proc_status_kb("VmRSS")

    def reset_peak_memory(self) -> None:
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
        except OSError:
            self._hwm_resettable = False

    def peak_memory_gb(self) -> float | None:
        hwm = _proc_status_kb("VmHWM")
        if hwm is None or self._baseline_kb is None or not self._hwm_resettable:
            return None
        return max(hwm - self._baseline_kb, 0) * 1024 / 1e9

    def release(self) -> None:
        gc.collect()
        _malloc_trim()

    def supports(self, dtype: str) -> bool:
        # fp16 matmuls on CPU are emulated or missing on most hosts: not measured there.
        return PRECISION_DTYPES.get(dtype, dtype) in ("fp32", "bf16")


class CudaDevice:
    """One CUDA device. Peak memory is torch.cuda.max_memory_allocated (tensors only, excluding
    the caching allocator's reserve and the CUDA context)."""

    kind = "cuda"
    autocast_device_type = "cuda"
    peak_memory_method = "cuda: torch.cuda.max_memory_allocated (reset after build)"

    def __init__(self, index: int = 0) -> None:
        # torch: seconds to import, only measuring needs it
        import torch

        self.index = index
        self.torch_device = f"cuda:{index}"
        props = torch.cuda.get_device_properties(index)
        self.total_memory_gb = props.total_memory / 1e9
        self.capability = (props.major, props.minor)
        torch.cuda.set_device(index)

    def synchronize(self) -> None:
        # torch: seconds to import, only measuring needs it
        import torch

        torch.cuda.synchronize(self.index)

    def begin_memory(self) -> None:
        self.release()

    def reset_peak_memory(self) -> None:
        # torch: seconds to import, only measuring needs it
        import torch

        torch.cuda.reset_peak_memory_stats(self.index)

    def peak_memory_gb(self) -> float | None:
        # torch: seconds to import, only measuring needs it
        import torch

        return torch.cuda.max_memory_allocated(self.index) / 1e9

    def release(self) -> None:
        # torch: seconds to import, only measuring needs it
        import torch

        gc.collect()
        torch.cuda.empty_cache()

    def supports(self, dtype: str) -> bool:
        dtype = PRECISION_DTYPES.get(dtype, dtype)
        if dtype in ("tf32", "bf16"):
            return self.capability >= (8, 0)
        return dtype in ("fp32", "fp16")


def make_device(name: str | None, fingerprint_kind: str) -> Device:
    """'cpu', 'cuda' or 'cuda:N'; None picks CUDA when the fingerprint found a GPU."""
    if name is None:
        name = "cuda" if fingerprint_kind == "cuda" else "cpu"
    if name == "cpu":
        return CpuDevice()
    if name.startswith("cuda"):
        # torch: seconds to import, only measuring needs it
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(f"device {name!r} requested but torch sees no CUDA device; use --device cpu")
        index = int(name.split(":", 1)[1]) if ":" in name else 0
        return CudaDevice(index)
    raise ConfigError(f"device must be 'cpu', 'cuda' or 'cuda:N'; got {name!r}")


def _set_tf32(enabled: bool) -> None:
    # torch: seconds to import, only measuring needs it
    import torch

    value = "tf32" if enabled else "ieee"
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):  # torch >= 2.9: the new API; never mix with the legacy one
        matmul.fp32_precision = value
        torch.backends.cudnn.conv.fp32_precision = value  # type: ignore[attr-defined]
    else:  # pragma: no cover - older torch
        matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled


@contextlib.contextmanager
def fp32_matmul_mode(precision: str) -> Iterator[None]:
    """TF32 on for 'tf32', off (IEEE fp32) for everything else; restored afterwards."""
    # torch: seconds to import, only measuring needs it
    import torch

    matmul = torch.backends.cuda.matmul
    new_api = hasattr(matmul, "fp32_precision")
    before: Any = (
        (matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision)  # type: ignore[attr-defined]
        if new_api
        else (matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    )
    _set_tf32(precision == "tf32")
    try:
        yield
    finally:
        if new_api:
            matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision = before  # type: ignore[attr-defined]
        else:  # pragma: no cover
            matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
