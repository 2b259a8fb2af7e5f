"""Hardware fingerprint of the measuring host: accelerators, CPU, memory and software stack.

The accelerator query is one injectable function (`GpuQuery`), so tests fake a GPU on a CPU-only
machine. `hardware_id` identifies the hardware *configuration* (device model and count, memory,
SMs, CPU model and cores, host memory), not the physical machine: two identical hosts share it.
Software versions (driver, CUDA, torch) are recorded but kept out of the id, so a driver upgrade
does not orphan earlier rows; rows carry `torch_version` themselves.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import perfmodel
from perfmodel.catalog import local_cpu_facts, resolve_gpu_key


@dataclass(frozen=True, kw_only=True)
class GpuInfo:
    """One accelerator as the driver reports it."""

    name: str
    """Device name, e.g. 'NVIDIA H200'."""
    memory_total_mib: int
    """Device memory in MiB."""
    sm_count: int = 0
    """Streaming multiprocessors."""
    compute_capability: str = ""
    """CUDA compute capability, e.g. '9.0'."""
    max_sm_clock_mhz: int = 0
    """Maximum SM clock in MHz."""
    max_mem_clock_mhz: int = 0
    """Maximum memory clock in MHz."""
    power_limit_w: float = 0.0
    """Enforced board power limit in W."""
    driver_version: str = ""
    """NVIDIA driver version."""
    cuda_driver_version: str = ""
    """Highest CUDA version the driver supports, e.g. '12.4'."""


GpuQuery = Callable[[], list[GpuInfo]]
"""Returns the visible accelerators ([] on a CPU-only host); may raise, which means 'none'."""


@dataclass(frozen=True, kw_only=True)
class Fingerprint:
    """Identity and software stack of the measuring host."""

    hardware_id: str
    """Stable short id: readable prefix + hash of the identity fields, e.g. 'h200-1x-3fa2c1'."""
    kind: str
    """'cuda' when accelerators were found, else 'cpu'."""
    gpu: str
    """Catalog key of the accelerator ('cpu' on CPU hosts; the raw name if the catalog lacks it)."""
    gpu_name: str
    """Accelerator name as the driver reports it ('' on CPU hosts)."""
    gpu_count: int
    """Visible accelerators."""
    gpu_memory_gb: float
    """Memory of one accelerator in GB (1e9 bytes)."""
    sm_count: int
    """Streaming multiprocessors per accelerator."""
    compute_capability: str
    """CUDA compute capability."""
    max_sm_clock_mhz: int
    """Maximum SM clock in MHz."""
    max_mem_clock_mhz: int
    """Maximum memory clock in MHz."""
    power_limit_w: float
    """Enforced power limit per accelerator in W."""
    driver_version: str
    """NVIDIA driver version."""
    cuda_driver_version: str
    """CUDA version supported by the driver."""
    cuda_runtime_version: str
    """CUDA version torch was built with ('' for CPU builds)."""
    cpu_model: str
    """CPU model name from /proc/cpuinfo."""
    cpu_cores: int
    """Logical CPU cores this process may use."""
    host_memory_gb: float
    """Host RAM in GB."""
    torch_version: str
    """PyTorch version ('' when torch is not installed)."""
    python_version: str
    """Python version."""
    platform: str
    """OS and machine."""
    collector_version: str
    """perfmodel version that collected."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def query_gpus_nvml() -> list[GpuInfo]:
    """The default accelerator query: NVML (nvidia-ml-py) for identity, clocks and power; torch
    for SM count and compute capability. Raises when NVML is missing or fails.

    NVML lists every GPU of the host, whatever CUDA_VISIBLE_DEVICES says, while torch sees only
    those it leaves, renumbered (Ray sets it for a task holding one GPU of a multi-GPU node). So
    each GPU takes torch's properties from the visible device of the same name, never by index:
    the hardware id is then the same with and without hidden GPUs. A model of which no device is
    visible gets sm_count 0 and no compute capability."""
    # nvidia-ml-py: optional, only a GPU query needs it
    import pynvml

    pynvml.nvmlInit()
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        try:
            cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
            cuda_driver = f"{cuda // 1000}.{cuda % 1000 // 10}"
        except pynvml.NVMLError:
            cuda_driver = ""
        visible = _torch_visible_by_name()
        infos = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = _text(pynvml.nvmlDeviceGetName(h))
            seen = visible.get(name)
            infos.append(
                GpuInfo(
                    name=name,
                    memory_total_mib=int(pynvml.nvmlDeviceGetMemoryInfo(h).total // 2**20),
                    sm_count=seen.sm_count if seen else 0,
                    compute_capability=seen.compute_capability if seen else "",
                    max_sm_clock_mhz=_nvml_or(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_SM),
                    max_mem_clock_mhz=_nvml_or(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_MEM),
                    power_limit_w=_nvml_or(pynvml.nvmlDeviceGetEnforcedPowerLimit, h) / 1000.0,
                    driver_version=driver,
                    cuda_driver_version=cuda_driver,
                )
            )
        return infos
    finally:
        pynvml.nvmlShutdown()


def query_gpus_torch() -> list[GpuInfo]:
    """Fallback when NVML fails but torch sees CUDA devices (no clocks or power then)."""
    # torch: seconds to import, only measuring needs it
    import torch

    if not torch.cuda.is_available():
        return []
    out = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        out.append(
            GpuInfo(
                name=p.name,
                memory_total_mib=int(p.total_memory // 2**20),
                sm_count=p.multi_processor_count,
                compute_capability=f"{p.major}.{p.minor}",
            )
        )
    return out


def _torch_visible_by_name() -> dict[str, GpuInfo]:
    """The devices torch sees (those CUDA_VISIBLE_DEVICES leaves), by name; {} when it sees none
    or fails."""
    try:
        return {g.name: g for g in query_gpus_torch()}
    except Exception:  # noqa: BLE001 - a fingerprint must never fail on a missing field
        return {}


def _nvml_or(fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args), or 0 when the board does not report it (e.g. NVMLError_NotSupported)."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001
        return 0


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _default_query() -> list[GpuInfo]:
    try:
        return query_gpus_nvml()
    except Exception:  # noqa: BLE001 - pynvml missing, no driver, or NVML failure
        try:
            return query_gpus_torch()
        except Exception:  # noqa: BLE001
            return []


def _cpu_facts() -> tuple[str, int, float]:
    return local_cpu_facts()


def _slug(text: str) -> str:
    text = re.sub(r"^nvidia\s+", "", text.strip(), flags=re.IGNORECASE).lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "gpu"


def gpu_catalog_key(name: str) -> str:
    """The catalog key for a driver-reported device name; the name itself if the catalog lacks it."""
    for candidate in (name, re.sub(r"^nvidia\s+", "", name, flags=re.IGNORECASE)):
        key = resolve_gpu_key(candidate)
        if key:
            return key
    return name


def make_hardware_id(identity: dict[str, Any], prefix: str) -> str:
    """`prefix` + 6 hex digits of SHA-256 over the identity fields (sorted JSON)."""
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:6]
    return f"{prefix}-{digest}"


def collect_fingerprint(query: GpuQuery | None = None) -> Fingerprint:
    """Fingerprint this host. `query` lists accelerators (default: NVML, then torch.cuda); when
    it returns nothing or raises, the fingerprint describes the CPU."""
    try:
        gpus = (query or _default_query)()
    except Exception:  # noqa: BLE001 - a failing query means no usable accelerator
        gpus = []
    cpu_model, cpu_cores, host_mem = _cpu_facts()
    try:
        import torch

        torch_version = str(torch.__version__)
        cuda_runtime = str(torch.version.cuda or "")
    except ImportError:
        torch_version, cuda_runtime = "", ""
    common: dict[str, Any] = {
        "cpu_model": cpu_model,
        "cpu_cores": cpu_cores,
        "host_memory_gb": host_mem,
        "torch_version": torch_version,
        "python_version": platform.python_version(),
        "platform": f"{platform.system()}-{platform.machine()}",
        "collector_version": perfmodel.__version__,
        "cuda_runtime_version": cuda_runtime,
    }
    host_identity = {"cpu_model": cpu_model, "cpu_cores": cpu_cores, "host_memory_gb": round(host_mem)}
    if not gpus:
        return Fingerprint(
            hardware_id=make_hardware_id(host_identity, f"cpu-{cpu_cores}c"),
            kind="cpu",
            gpu="cpu",
            gpu_name="",
            gpu_count=0,
            gpu_memory_gb=0.0,
            sm_count=0,
            compute_capability="",
            max_sm_clock_mhz=0,
            max_mem_clock_mhz=0,
            power_limit_w=0.0,
            driver_version="",
            cuda_driver_version="",
            **common,
        )
    first = gpus[0]
    identity = {
        **host_identity,
        "gpus": sorted((g.name, round(g.memory_total_mib / 1024), g.sm_count) for g in gpus),
    }
    return Fingerprint(
        hardware_id=make_hardware_id(identity, f"{_slug(first.name)}-{len(gpus)}x"),
        kind="cuda",
        gpu=gpu_catalog_key(first.name),
        gpu_name=first.name,
        gpu_count=len(gpus),
        gpu_memory_gb=round(first.memory_total_mib * 2**20 / 1e9, 1),
        sm_count=first.sm_count,
        compute_capability=first.compute_capability,
        max_sm_clock_mhz=int(first.max_sm_clock_mhz),
        max_mem_clock_mhz=int(first.max_mem_clock_mhz),
        power_limit_w=float(first.power_limit_w),
        driver_version=first.driver_version,
        cuda_driver_version=first.cuda_driver_version,
        **common,
    )
