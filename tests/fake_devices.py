"""A CUDA device as the collectors see it, computing on the CPU (GPU code paths tested without one)."""

from __future__ import annotations


class FakeGpu:
    """A GPU that computes on the CPU: says 'cuda', puts tensors on 'cpu'."""

    kind = "cuda"
    torch_device = "cpu"
    autocast_device_type = "cpu"
    peak_memory_method = "fake"

    def __init__(self, memory_gb: float = 141.0) -> None:
        self.total_memory_gb = memory_gb
        self.syncs = 0
        self.begins = 0
        self.resets = 0

    def synchronize(self) -> None:
        self.syncs += 1

    def begin_memory(self) -> None:
        self.begins += 1

    def reset_peak_memory(self) -> None:
        self.resets += 1

    def peak_memory_gb(self) -> float:
        return 1.5

    def release(self) -> None:
        pass

    def supports(self, dtype: str) -> bool:
        return True
