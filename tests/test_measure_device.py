"""Device objects: the CUDA device with torch.cuda faked, the CPU device for real, OOM detection."""

from __future__ import annotations

import types

import pytest
import torch

from perfmodel.errors import ConfigError
from perfmodel.measure import device as devmod
from perfmodel.measure.device import CpuDevice, CudaDevice, fp32_matmul_mode, is_oom, make_device


@pytest.fixture
def fake_cuda(monkeypatch):
    calls: list[str] = []
    props = types.SimpleNamespace(total_memory=143771 * 2**20, major=9, minor=0, name="NVIDIA H200", multi_processor_count=132)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: calls.append(f"set_device {i}"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda i=None: calls.append(f"synchronize {i}"))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda i=None: calls.append(f"reset {i}"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda i=None: 42 * 10**9)
    return calls


def test_cuda_device_with_faked_torch_cuda(fake_cuda):
    dev = make_device("cuda:1", "cuda")
    assert isinstance(dev, CudaDevice) and dev.torch_device == "cuda:1" and dev.kind == "cuda"
    assert dev.total_memory_gb == pytest.approx(150.75, abs=0.01)
    assert all(dev.supports(p) for p in ("fp32", "tf32", "bf16", "amp_bf16", "fp16", "amp_fp16"))
    dev.begin_memory()
    dev.reset_peak_memory()
    dev.synchronize()
    assert dev.peak_memory_gb() == 42.0
    assert fake_cuda == ["set_device 1", "empty_cache", "reset 1", "synchronize 1"]
    assert make_device(None, "cuda").torch_device == "cuda:0"


def test_pre_ampere_gpu_has_no_bf16_or_tf32(fake_cuda, monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: types.SimpleNamespace(total_memory=16e9, major=7, minor=0))
    dev = CudaDevice(0)
    assert dev.supports("fp16") and dev.supports("amp_fp16") and dev.supports("fp32")
    assert not dev.supports("bf16") and not dev.supports("tf32") and not dev.supports("amp_bf16")


def test_device_choice_errors():
    assert isinstance(make_device(None, "cpu"), CpuDevice)
    with pytest.raises(ConfigError, match="device must be 'cpu'"):
        make_device("tpu", "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA device"):
            make_device("cuda", "cpu")


def test_cpu_device_measures_resident_memory_growth():
    dev = CpuDevice()
    assert dev.supports("fp32") and dev.supports("amp_bf16") and not dev.supports("fp16") and not dev.supports("tf32")
    dev.begin_memory()
    dev.reset_peak_memory()
    block = torch.ones(64 * 2**20 // 4)  # 64 MiB, touched
    peak = dev.peak_memory_gb()
    del block
    if peak is not None:  # None where /proc/self/clear_refs is not writable
        assert peak >= 0.06


def test_oom_detection():
    assert is_oom(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB"))
    assert is_oom(RuntimeError("CUDA error: out of memory")) and is_oom(MemoryError())
    assert not is_oom(RuntimeError("shape mismatch")) and not is_oom(ValueError("out of memory"))


def test_fp32_matmul_mode_restores_the_tf32_setting():
    matmul = torch.backends.cuda.matmul
    before = matmul.fp32_precision if hasattr(matmul, "fp32_precision") else matmul.allow_tf32
    with fp32_matmul_mode("tf32"):
        assert (matmul.fp32_precision == "tf32") if hasattr(matmul, "fp32_precision") else matmul.allow_tf32
    with fp32_matmul_mode("fp32"):
        assert (matmul.fp32_precision == "ieee") if hasattr(matmul, "fp32_precision") else not matmul.allow_tf32
    after = matmul.fp32_precision if hasattr(matmul, "fp32_precision") else matmul.allow_tf32
    assert after == before
    assert devmod.PRECISION_DTYPES["amp_bf16"] == "bf16"
