"""Micro-benchmarks on the CPU at toy sizes, and the distributed/unsupported paths."""

from __future__ import annotations

import pandas as pd
import pytest

from collectors.microbench import MicrobenchPlan, plan_items, run_microbench
from perfmodel.measure.device import CpuDevice
from perfmodel.measure.fingerprint import GpuInfo, collect_fingerprint
from perfmodel.schema import MICROBENCH_COLUMNS, conform
from tests.fake_devices import FakeGpu

PLAN = MicrobenchPlan(matmul_sizes=(64,), matmul_dtypes=("fp32", "bf16", "fp16"), copy_mb=(1,),
                      attention_shapes=((1, 2, 64, 16),), attention_dtypes=("fp32",), iters=3, sample_target_s=0.001)


@pytest.mark.slow
def test_cpu_microbench_rows_conform():
    fp = collect_fingerprint(lambda: [])
    rows = list(run_microbench(PLAN, device=CpuDevice(), fingerprint=fp))
    frame = conform(pd.DataFrame(rows), MICROBENCH_COLUMNS)
    by = {(r["bench"], r["dtype"]): r for r in rows}
    assert set(frame["bench"]) == {"matmul", "hbm_copy", "attention"}  # no host copies or all-reduce on a CPU
    assert by[("matmul", "fp32")]["status"] == "ok" and by[("matmul", "fp32")]["achieved_tflops"] > 0
    assert by[("matmul", "fp32")]["achieved_tflops"] == 2 * 64**3 / by[("matmul", "fp32")]["median_time_s"] / 1e12
    assert by[("matmul", "fp16")]["status"] == "unsupported"
    assert by[("hbm_copy", "fp32")]["achieved_gb_per_s"] > 0 and by[("attention", "fp32")]["achieved_tflops"] > 0
    assert set(frame["gpu"]) == {"cpu"} and set(frame["hardware_id"]) == {fp.hardware_id}


@pytest.mark.slow
def test_skip_and_deadline():
    fp = collect_fingerprint(lambda: [])
    skip = {("matmul", "fp32", "64x64x64")}
    rows = list(run_microbench(PLAN, device=CpuDevice(), fingerprint=fp, skip=skip))
    assert ("matmul", "fp32") not in {(r["bench"], r["dtype"]) for r in rows}
    assert list(run_microbench(PLAN, device=CpuDevice(), fingerprint=fp, clock=lambda: 10.0, deadline=5.0)) == []


def test_all_reduce_without_a_distributed_launch_is_reported_unsupported():
    fp = collect_fingerprint(lambda: [GpuInfo(name="NVIDIA H200", memory_total_mib=143771)] * 2)
    plan = MicrobenchPlan(matmul_sizes=(), copy_mb=(), attention_shapes=(), all_reduce_mb=(8,))
    assert plan_items(plan, FakeGpu(), 2) == [("all_reduce", "fp32", "8MB")]
    assert plan_items(plan, FakeGpu(), 1) == []
    rows = list(run_microbench(plan, device=FakeGpu(), fingerprint=fp))
    assert [(r["bench"], r["status"]) for r in rows] == [("all_reduce", "unsupported")]
    assert "not launched distributed" in rows[0]["shape"] and rows[0]["gpu"] == "H200"
