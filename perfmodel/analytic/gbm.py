"""The cost model of gradient-boosted trees (LightGBM, Ludwig's `gbm`): one step is one boosting
round over every training row, run on the host CPU whatever accelerator is present.

A round builds per-leaf histograms over the binned feature matrix (one byte per cell, each cell
visited ~log2(leaves)/2 times) and reads and writes each row's gradient and hessian: it is bound
by the gathers of histogram construction, at a cost per cell visit measured by LightGBM's own
benchmark, never faster than its host-memory traffic.
Constants are pinned and sourced in `conventions.py`.
"""

from __future__ import annotations

from perfmodel.analytic import conventions as cv
from perfmodel.analytic.comm import CommCost
from perfmodel.analytic.flops import StepFlops
from perfmodel.analytic.memory import GB, MemoryBreakdown
from perfmodel.analytic.params import ParamCounts
from perfmodel.analytic.roofline import AnalyticEstimate
from perfmodel.workload import Workload

HOST_CPU_NOTE = "gradient-boosted trees train on the host CPU: the GPU choice does not change this estimate"


def round_bytes(w: Workload) -> float:
    """Host-memory bytes one boosting round moves: the binned matrix and the gradient pairs."""
    t = w.training
    rows = float(t.gbm_rows or 0)
    feats = float(t.gbm_features or 0)
    return rows * (feats * cv.GBM_BYTES_PER_CELL + cv.GBM_GRADIENT_BYTES_PER_ROW)


def host_memory(w: Workload) -> MemoryBreakdown:
    """Resident host memory: binned matrix + gradient pairs + per-leaf histograms."""
    t = w.training
    rows = float(t.gbm_rows or 0)
    feats = float(t.gbm_features or 0)
    histograms = feats * cv.GBM_HISTOGRAM_BINS * cv.GBM_HISTOGRAM_BYTES_PER_BIN * cv.GBM_NUM_LEAVES
    data = rows * feats * cv.GBM_BYTES_PER_CELL + rows * cv.GBM_GRADIENT_BYTES_PER_ROW + histograms
    return MemoryBreakdown(
        weights_gb=0.0,
        gradients_gb=0.0,
        optimizer_gb=0.0,
        activations_gb=data / GB,
        temporary_gb=0.0,
        overhead_gb=cv.GBM_HOST_OVERHEAD_GB,
    )


def estimate_gbm(w: Workload) -> AnalyticEstimate:
    """One boosting round: histogram construction over every cell at LightGBM's measured cost per
cell visit (its own Higgs benchmark), or its host-memory traffic at the host bandwidth if slower;
the floor is the traffic alone."""
    t = w.training
    rows = float(t.gbm_rows or 0)
    nothing = ParamCounts(
        total=0.0, embedding=0.0, blocks=0.0, lm_head=0.0, matmul_active=0.0, lora=0.0, trainable=0.0
    )
    flops = StepFlops(
        model_flops_per_token=0.0,
        hardware_flops_per_token=0.0,
        tokens_per_step=rows,
        model_flops_per_step=0.0,
        hardware_flops_per_step=0.0,
        hardware_flops_per_gpu=0.0,
        forward_share=1.0,
    )
    comm = CommCost(
        dp_bytes=0.0,
        tp_bytes=0.0,
        pp_bytes=0.0,
        cp_bytes=0.0,
        dp_time_s=0.0,
        tp_time_s=0.0,
        pp_time_s=0.0,
        cp_time_s=0.0,
    )
    traffic = round_bytes(w)
    t_memory = traffic / (cv.GBM_HOST_BANDWIDTH_GB_PER_S * 1e9)
    threads = float(w.gpu.sm_count) if w.gpu.vendor == "cpu" and w.gpu.sm_count else cv.GBM_DEFAULT_HOST_THREADS
    cells = rows * float(t.gbm_features or 0)
    t_histograms = cells * cv.gbm_visits_per_round() * cv.GBM_SECONDS_PER_CELL_VISIT / threads
    t_round = max(t_memory, t_histograms)
    return AnalyticEstimate(
        params=nothing,
        flops=flops,
        bytes_per_gpu=traffic,
        comm=comm,
        memory=host_memory(w),
        peak_tflops=0.0,
        peak_source="datasheet",
        mem_bw_gb_per_s=cv.GBM_HOST_BANDWIDTH_GB_PER_S,
        t_compute_s=0.0,
        t_memory_s=t_memory,
        t_comm_s=0.0,
        t_comm_exposed_s=0.0,
        pipeline_bubble=1.0,
        t_bound_s=max(t_round, 1e-9),
        t_roofline_s=max(t_memory, 1e-9),
        bottleneck="compute" if t_histograms > t_memory else "memory",
        samples_per_step=rows,
        tokens_per_step=None,
        fixed_steps=int(t.gbm_rounds or 0),
        step_unit="boosting round",
        shape=f"{int(rows):,} rows x {t.gbm_features} features per round",
        notes=(HOST_CPU_NOTE,),
    )
