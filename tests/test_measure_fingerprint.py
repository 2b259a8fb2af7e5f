"""Hardware fingerprint with a faked accelerator query and a faked pynvml."""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import types
from pathlib import Path

import pytest

import perfmodel
from perfmodel.measure import fingerprint as fpm
from perfmodel.measure.fingerprint import GpuInfo, collect_fingerprint
from perfmodel.measure.storage import parse_shard_name, write_fingerprint


def h200(**kw) -> GpuInfo:
    return GpuInfo(
        **{
            "name": "NVIDIA H200",
            "memory_total_mib": 143771,
            "sm_count": 132,
            "compute_capability": "9.0",
            "power_limit_w": 700.0,
            "driver_version": "550.54.15",
            "cuda_driver_version": "12.4",
            **kw,
        }
    )


def test_gpu_fingerprint_from_a_fake_query():
    fp = collect_fingerprint(lambda: [h200()])
    assert fp.kind == "cuda" and fp.gpu_count == 1 and fp.gpu_name == "NVIDIA H200"
    assert re.fullmatch(r"h200-1x-[0-9a-f]{6}", fp.hardware_id)
    assert fp.gpu == "H200"  # catalog key
    assert (
        fp.gpu_memory_gb == pytest.approx(150.8, abs=0.1) and fp.sm_count == 132 and fp.power_limit_w == 700
    )
    assert fp.cpu_cores >= 1 and fp.torch_version and fp.to_dict()["hardware_id"] == fp.hardware_id


def test_hardware_id_is_stable_and_tracks_identity_not_software():
    base = collect_fingerprint(lambda: [h200()]).hardware_id
    assert collect_fingerprint(lambda: [h200()]).hardware_id == base
    assert collect_fingerprint(lambda: [h200(driver_version="560.1", power_limit_w=600)]).hardware_id == base
    two = collect_fingerprint(lambda: [h200(), h200()]).hardware_id
    assert two.startswith("h200-2x-") and two[-6:] != base[-6:]
    other = collect_fingerprint(
        lambda: [h200(name="NVIDIA H100 80GB HBM3", memory_total_mib=81559, sm_count=132)]
    )
    assert other.hardware_id.startswith("h100-80gb-hbm3-1x-") and other.gpu == "H100-SXM"


def test_no_gpu_or_failing_query_gives_a_cpu_fingerprint():
    def broken():
        raise RuntimeError("NVML Shared Library Not Found")

    for query in (lambda: [], broken):
        fp = collect_fingerprint(query)
        assert fp.kind == "cpu" and fp.gpu == "cpu" and fp.gpu_count == 0
        assert re.fullmatch(rf"cpu-{fp.cpu_cores}c-[0-9a-f]{{6}}", fp.hardware_id)


def test_the_cpu_part_describes_this_host():
    # Independent readings of this machine: the cores this process may use and /proc/meminfo.
    fp = collect_fingerprint(lambda: [])
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert fp.cpu_cores == cores and fp.hardware_id.startswith(f"cpu-{cores}c-")
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        total_kb = int(
            next(x for x in meminfo.read_text().splitlines() if x.startswith("MemTotal")).split()[1]
        )
        assert fp.host_memory_gb == pytest.approx(total_kb * 1024 / 1e9, abs=0.06)
    assert fp.python_version == platform.python_version() and fp.collector_version == perfmodel.__version__
    assert fp.gpu_memory_gb == 0 and fp.sm_count == 0 and fp.driver_version == ""


def test_identical_hosts_share_an_id_and_a_different_cpu_does_not(monkeypatch):
    monkeypatch.setattr(fpm, "_cpu_facts", lambda: ("AMD EPYC 9654 96-Core Processor", 192, 1511.6))
    a = collect_fingerprint(lambda: [h200()])
    monkeypatch.setattr(
        fpm, "_cpu_facts", lambda: ("AMD EPYC 9654 96-Core Processor", 192, 1511.9)
    )  # same, rounded
    assert collect_fingerprint(lambda: [h200()]).hardware_id == a.hardware_id
    monkeypatch.setattr(fpm, "_cpu_facts", lambda: ("Intel(R) Xeon(R) Platinum 8480+", 224, 2063.7))
    b = collect_fingerprint(lambda: [h200()])
    assert b.hardware_id != a.hardware_id and b.hardware_id.startswith("h200-1x-")
    assert collect_fingerprint(lambda: []).hardware_id.startswith("cpu-224c-")


def test_any_device_name_gives_an_id_that_names_a_shard(tmp_path):
    # Shard file names carry the id (perfmodel.measure.storage): odd driver names must still parse.
    for name in (
        "NVIDIA GeForce RTX 4090 D",
        "NVIDIA A100-SXM4-80GB",
        "Tesla V100-PCIE-32GB (rev a1)",
        "GPU_X/1",
    ):
        fp = collect_fingerprint(lambda name=name: [h200(name=name)])
        assert re.fullmatch(r"[a-z0-9-]+", fp.hardware_id), fp.hardware_id
        info = parse_shard_name(Path(f"quick__{fp.hardware_id}__20260101__001-42.parquet"))
        assert info is not None and info["hw"] == fp.hardware_id
        path = write_fingerprint(tmp_path, fp)
        assert json.loads(path.read_text()) == fp.to_dict()


def fake_host(monkeypatch, gpus: list[GpuInfo]) -> None:
    """A host whose physical GPUs are `gpus`, as its two device libraries report them: a fake
    pynvml lists every one (NVML ignores CUDA_VISIBLE_DEVICES), a fake torch only those that
    $CUDA_VISIBLE_DEVICES leaves, in its order and renumbered from 0. A GPU whose power_limit_w
    is 0 does not report its power limit (NVMLError_NotSupported)."""
    pynvml = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    def power(h):
        if not h.power_limit_w:
            raise NVMLError("Not Supported")
        return int(h.power_limit_w * 1000)

    pynvml.NVMLError = NVMLError
    pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM = 1, 2
    pynvml.nvmlInit = lambda: None
    pynvml.nvmlShutdown = lambda: None
    pynvml.nvmlSystemGetDriverVersion = lambda: b"550.54.15"
    pynvml.nvmlSystemGetCudaDriverVersion_v2 = lambda: 12040
    pynvml.nvmlDeviceGetCount = lambda: len(gpus)
    pynvml.nvmlDeviceGetHandleByIndex = lambda i: gpus[i]
    pynvml.nvmlDeviceGetName = lambda h: h.name.encode()
    pynvml.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=h.memory_total_mib * 2**20)
    pynvml.nvmlDeviceGetMaxClockInfo = lambda h, kind: {1: h.max_sm_clock_mhz, 2: h.max_mem_clock_mhz}[kind]
    pynvml.nvmlDeviceGetEnforcedPowerLimit = power

    def visible() -> list[GpuInfo]:
        env = os.environ.get("CUDA_VISIBLE_DEVICES")
        return list(gpus) if env is None else [gpus[int(i)] for i in env.split(",") if i.strip()]

    def properties(i: int):
        g = visible()[i]
        major, minor = g.compute_capability.split(".")
        return types.SimpleNamespace(
            name=g.name,
            total_memory=g.memory_total_mib * 2**20,
            multi_processor_count=g.sm_count,
            major=int(major),
            minor=int(minor),
        )

    torch = types.ModuleType("torch")
    torch.__version__ = "2.5.1"
    torch.version = types.SimpleNamespace(cuda="12.4")
    torch.cuda = types.SimpleNamespace(
        is_available=lambda: bool(visible()),
        device_count=lambda: len(visible()),
        get_device_properties=properties,
    )
    monkeypatch.setitem(sys.modules, "pynvml", pynvml)
    monkeypatch.setitem(sys.modules, "torch", torch)


def test_nvml_query_reads_a_faked_pynvml(monkeypatch):
    fake_host(monkeypatch, [h200(power_limit_w=0.0, max_sm_clock_mhz=1980, max_mem_clock_mhz=3201)] * 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    infos = fpm.query_gpus_nvml()
    assert len(infos) == 2
    assert infos[0] == GpuInfo(
        name="NVIDIA H200",
        memory_total_mib=143771,
        sm_count=132,
        compute_capability="9.0",
        max_sm_clock_mhz=1980,
        max_mem_clock_mhz=3201,
        power_limit_w=0.0,
        driver_version="550.54.15",
        cuda_driver_version="12.4",
    )
    fp = collect_fingerprint()  # the default query goes through the faked pynvml
    assert fp.kind == "cuda" and fp.gpu_count == 2 and fp.hardware_id.startswith("h200-2x-")


def test_gpus_hidden_from_torch_as_under_ray_give_the_same_hardware_id(monkeypatch):
    node = [h200()] * 4
    described = collect_fingerprint(lambda: node)  # the four GPUs, fully described
    fake_host(monkeypatch, node)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    alone = collect_fingerprint()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")  # what Ray sets for a task holding one GPU
    under_ray = collect_fingerprint()
    assert under_ray.hardware_id == alone.hardware_id == described.hardware_id
    assert under_ray.hardware_id.startswith("h200-4x-") and under_ray.gpu_count == 4
    assert (under_ray.sm_count, under_ray.compute_capability) == (132, "9.0")


def test_each_gpu_takes_the_sm_count_of_its_own_model_whatever_torch_numbers_it(monkeypatch):
    a100 = h200(name="NVIDIA A100-SXM4-80GB", memory_total_mib=81920, sm_count=108, compute_capability="8.0")
    fake_host(monkeypatch, [a100, h200()])  # NVML order: A100, then H200
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")  # torch's device 0 is the H200
    assert [(g.sm_count, g.compute_capability) for g in fpm.query_gpus_nvml()] == [(108, "8.0"), (132, "9.0")]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # the A100 hidden: torch cannot describe it
    assert [(g.sm_count, g.compute_capability) for g in fpm.query_gpus_nvml()] == [(0, ""), (132, "9.0")]
