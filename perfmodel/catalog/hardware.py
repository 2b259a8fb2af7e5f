"""Accelerator lookup over the catalog data: catalog accelerators by key or alias, extra
accelerators made resolvable for a `with` block (`use_extra_gpus`), this machine's CPU, and the
hosts the collectors measured (their fingerprints and micro-benchmark shards under
`perfmodel.paths.raw_dir()`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import platform
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from perfmodel import paths
from perfmodel.catalog.data import gpu_entries, gpu_index, norm, unknown_name
from perfmodel.errors import CatalogError
from perfmodel.measure.storage import MeasuredHost, measured_hosts
from perfmodel.workload import GPUSpec

_GPU_FIELDS = {f.name for f in dataclasses.fields(GPUSpec)}
_HINT = "(`perfmodel gpus` lists them all)"

_EXTRA_GPUS: list[dict[str, GPUSpec]] = []
"""Layers of extra accelerators made resolvable by `use_extra_gpus` (innermost last)."""


def _extra_gpus() -> dict[str, GPUSpec]:
    """Normalised name or alias -> spec of every extra accelerator active now."""
    out: dict[str, GPUSpec] = {}
    for layer in _EXTRA_GPUS:
        out.update(layer)
    return out


@contextlib.contextmanager
def use_extra_gpus(specs: Iterable[GPUSpec]) -> Iterator[None]:
    """Make extra accelerators resolvable by `get_gpu` (by name or alias) and listed by
    `gpu_names` inside the `with` block, in this process (for synthetic tests). An extra spec whose
    name equals a catalog key shadows that entry inside the block. Blocks nest."""
    layer: dict[str, GPUSpec] = {}
    for spec in specs:
        if not isinstance(spec, GPUSpec):
            raise TypeError(f"use_extra_gpus takes GPUSpec objects, got {type(spec).__name__}")
        for alias in (spec.name, *spec.aliases):
            layer[norm(alias)] = spec
    _EXTRA_GPUS.append(layer)
    try:
        yield
    finally:
        _EXTRA_GPUS.remove(layer)


def gpu_names() -> list[str]:
    """Catalog keys of every accelerator, then extras from `use_extra_gpus`, then 'cpu'."""
    catalog = gpu_entries()
    extras = [s.name for s in _extra_gpus().values() if s.name not in catalog]
    return [*catalog, *dict.fromkeys(extras), "cpu"]


def resolve_gpu_key(name: str) -> str | None:
    """The key for a name or alias (an extra's name inside `use_extra_gpus`), or None (no error).
    'cpu' resolves to 'cpu'."""
    if norm(name) == "cpu":
        return "cpu"
    extra = _extra_gpus().get(norm(name))
    if extra is not None:
        return extra.name
    return gpu_index().get(norm(name))


def get_gpu(name: str) -> GPUSpec:
    """The accelerator called `name`: a catalog key or alias, a host the collectors measured (its
    hardware id, e.g. 'cpu-2c-cba6f5': the same spec on every machine), or 'cpu' (this machine)."""
    if norm(name) == "cpu":
        return describe_local_cpu()
    extra = _extra_gpus().get(norm(name))
    if extra is not None:
        return extra
    key = gpu_index().get(norm(name))
    if key is None:
        if _measured_host_ids().get(norm(name)):
            return get_measured_host(_measured_host_ids()[norm(name)])
        raise unknown_name("GPU", name, [*gpu_names(), *_measured_host_ids().values()], _HINT)
    return gpu_from_entry(gpu_entries()[key])


def _measured_host_ids() -> dict[str, str]:
    """Normalised hardware id -> hardware id of every host with a fingerprint in the raw folder."""
    return {norm(h.hardware_id): h.hardware_id for h in _hosts(str(_raw_dir())) if h.hardware_id}


def local_cpu_note(spec: GPUSpec | None = None) -> str:
    """What `hardware.gpu: cpu` resolved to: this machine's CPU, and whether its ceilings were
    measured here (a prediction for `cpu` follows the machine it runs on; a measured host's id is
    the same everywhere)."""
    spec = spec or describe_local_cpu()
    cores = spec.sm_count
    if spec.measured:
        how = "ceilings measured on this CPU model by the collectors"
    else:
        how = f"no measurement of this CPU: ceilings estimated from its {cores} cores (run `perfmodel collect` or calibrate it)"
    hosts = ", ".join(sorted(_measured_host_ids().values())[:3])
    fixed = f"; name a measured host ({hosts}) for a prediction that does not depend on the machine" if hosts else ""
    return f"hardware.gpu cpu: this machine's CPU ({spec.generation}, {cores} cores; {how}){fixed}"


def gpu_resolution_note(name: str) -> str | None:
    """A line saying which accelerator an alias resolved to ('H100' -> H100-SXM, naming the
    other variants), what 'cpu' is on this machine, or None when `name` is the key itself (any
    case) or unknown."""
    if norm(name) == "cpu":
        return local_cpu_note()
    key = resolve_gpu_key(name)
    if key is None or norm(name) == norm(key):
        return None
    typed = norm(name)
    others = [k for k in gpu_entries() if k != key and typed in norm(k)]
    also = f"; other variants: {', '.join(others)}" if others else ""
    return f"hardware.gpu {name} resolved to {key}{also}"


def gpu_from_entry(entry: dict[str, Any]) -> GPUSpec:
    """A GPUSpec from a catalog mapping (keys that are not GPUSpec fields, like sources, skipped)."""
    data = {k: v for k, v in entry.items() if k in _GPU_FIELDS}
    data["aliases"] = tuple(str(a).lower() for a in data.get("aliases", ()))
    data["peak_tflops"] = {k: float(v) for k, v in (data.get("peak_tflops") or {}).items() if v}
    return GPUSpec(**data)


def gpu_entry(name: str) -> dict[str, Any]:
    """The raw catalog mapping (with sources) for display."""
    key = gpu_index().get(norm(name))
    if key is None:
        raise unknown_name("GPU", name, list(gpu_entries()), _HINT)
    return dict(gpu_entries()[key])


# --- CPUs (this machine and measured hosts) --------------------------------------------------


def local_cpu_facts() -> tuple[str, int, float]:
    """(CPU model name, usable cores, host memory in GB) of this machine."""
    model = platform.processor() or platform.machine()
    mem_gb = 0.0
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal"):
                    mem_gb = int(line.split()[1]) * 1024 / 1e9
                    break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return model, cores, round(mem_gb, 1)


def cpu_spec(model: str, cores: int, memory_gb: float, measured: dict[str, float]) -> GPUSpec:
    """A CPU as an accelerator entry. Peaks are rough (cores x clock x SIMD width); measured
    ceilings from the collectors' micro-benchmarks take precedence in the roofline."""
    # AVX2 FMA: 2 FMA units x 8 fp32 lanes x 2 FLOPs at ~2.5 GHz = 80 GFLOP/s per core.
    fp32 = cores * 0.08
    return GPUSpec(
        name="cpu",
        vendor="cpu",
        generation=model,
        memory_gb=memory_gb,
        hbm_bandwidth_gb_per_s=measured.get("hbm_copy_gb_per_s", 20.0),
        peak_tflops={"fp32": fp32, "tf32": fp32, "bf16": fp32, "fp16": fp32 / 2},
        intra_node_bandwidth_gb_per_s=10.0,
        inter_node_bandwidth_gb_per_s=1.25,
        sm_count=cores,
        sources={"peak_tflops": f"estimate: {cores} cores x 80 GFLOP/s (AVX2 FMA at ~2.5 GHz)"},
        measured=measured,
    )


def _raw_dir() -> Path:
    return paths.raw_dir()


def describe_local_cpu() -> GPUSpec:
    """This machine's CPU, with the measured ceilings of a host with the same CPU model and core
    count if the collectors have measured one (fingerprints in `perfmodel.paths.raw_dir()`)."""
    return _describe_local_cpu(str(_raw_dir()))


@functools.cache
def _describe_local_cpu(raw: str) -> GPUSpec:
    model, cores, mem_gb = local_cpu_facts()
    measured: dict[str, float] = {}
    for host in _hosts(raw):
        fp = host.fingerprint
        if fp.get("kind") == "cpu" and fp.get("cpu_model") == model and int(fp.get("cpu_cores", 0)) == cores:
            measured = _ceilings(raw, host.hardware_id)
            break
    return cpu_spec(model, cores, mem_gb, measured)


@functools.cache
def _hosts(raw: str) -> tuple[MeasuredHost, ...]:
    return measured_hosts(raw)


def forget_measured_hosts() -> None:
    """Read the collectors' folder again on the next lookup (hosts and their ceilings are
    remembered per folder for the life of the process)."""
    for cached in (_hosts, _ceilings, _describe_local_cpu):
        cached.cache_clear()


def measured_ceilings(hardware_id: str) -> dict[str, float]:
    """Best achieved matmul TFLOP/s per dtype and memory-copy GB/s of one measured host, from its
    micro-benchmark shards (keys 'matmul_<dtype>_tflops', 'hbm_copy_gb_per_s')."""
    return _ceilings(str(_raw_dir()), hardware_id)


@functools.cache
def _ceilings(raw: str, hardware_id: str) -> dict[str, float]:
    return MeasuredHost(fingerprint={"hardware_id": hardware_id}, out_dir=Path(raw)).ceilings()


def get_measured_host(hardware_id: str) -> GPUSpec:
    """The accelerator a measured host had, with that host's measured ceilings (own rows are
    rebuilt with the host that measured them, not with the machine reading them)."""
    raw = str(_raw_dir())
    host = next((h for h in _hosts(raw) if h.hardware_id == hardware_id), None)
    if host is None:
        raise CatalogError(f"no fingerprint for host {hardware_id!r} in {raw}")
    fp, measured = host.fingerprint, _ceilings(raw, hardware_id)
    if fp.get("kind") != "cpu":
        base = get_gpu(str(fp.get("gpu")))
        return dataclasses.replace(base, measured={**base.measured, **measured})
    return cpu_spec(
        str(fp.get("cpu_model", "")),
        int(fp.get("cpu_cores") or 1),
        float(fp.get("host_memory_gb") or 0.0),
        measured,
    )
