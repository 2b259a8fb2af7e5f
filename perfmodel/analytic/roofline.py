"""The roofline step-time bound:
    t_bound = max(flops / peak_flops, bytes / mem_bw) * pipeline_bubble + t_comm_exposed
Measured ceilings (from the hardware fingerprint) replace datasheet peaks where they exist."""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.analytic.comm import CommCost, estimate_comm
from perfmodel.analytic.flops import StepFlops, compute_step_flops, samples_per_step, tokens_per_sample
from perfmodel.analytic.memory import MemoryBreakdown, estimate_memory
from perfmodel.analytic.params import ParamCounts, count_params
from perfmodel.analytic.traffic import bytes_per_step_per_gpu
from perfmodel.workload import Workload


@dataclass(frozen=True, kw_only=True)
class AnalyticEstimate:
    """Everything the analytic model knows about one workload."""

    params: ParamCounts
    flops: StepFlops
    bytes_per_gpu: float
    """HBM bytes moved per step per GPU."""
    comm: CommCost
    memory: MemoryBreakdown
    peak_tflops: float
    """Compute ceiling used (TFLOP/s per GPU)."""
    peak_source: str
    """'measured' (collector ceiling) or 'datasheet'."""
    mem_bw_gb_per_s: float
    t_compute_s: float
    t_memory_s: float
    t_comm_s: float
    """All communication time if nothing overlapped."""
    t_comm_exposed_s: float
    pipeline_bubble: float
    """Multiplier >= 1 from pipeline fill and drain (1F1B: 1 + (pp - 1) / micro-batches)."""
    t_bound_s: float
    """The roofline lower bound on one optimizer step (s)."""
    bottleneck: str
    """'compute', 'memory' or 'communication': the largest term of the bound."""
    samples_per_step: float
    """Samples one optimizer step processes over all GPUs (rows per round for boosted trees)."""
    tokens_per_step: float | None
    """Tokens per optimizer step over all GPUs; None where tokens do not apply."""
    fixed_steps: int | None = None
    """Steps the workload itself fixes (boosting rounds); None: steps follow from the data."""
    step_unit: str = "step"
    """What one step is, for display: 'step' or 'boosting round'."""
    shape: str = ""
    """One line describing what one step processes (for display)."""
    notes: tuple[str, ...] = ()
    """Caveats of the cost model for this workload, shown as warnings."""

    @property
    def arithmetic_intensity(self) -> float:
        """Hardware FLOPs per HBM byte."""
        return self.flops.hardware_flops_per_gpu / self.bytes_per_gpu if self.bytes_per_gpu else 0.0


def compute_ceiling(w: Workload) -> tuple[float, str]:
    """(TFLOP/s, 'measured'|'datasheet') for the workload's compute dtype."""
    dtype = w.training.compute_dtype
    measured = w.gpu.measured.get(f"matmul_{dtype}_tflops")
    if measured:
        return float(measured), "measured"
    return w.gpu.peak_for(dtype), "datasheet"


def memory_ceiling(w: Workload) -> float:
    return float(w.gpu.measured.get("hbm_copy_gb_per_s") or w.gpu.hbm_bandwidth_gb_per_s or 1.0)


def batch_shape(w: Workload) -> str:
    """One line describing a step: sequence, micro-batch, accumulation, recomputation."""
    t = w.training
    shape = f"micro-batch {t.micro_batch_size}"
    if w.model.is_transformer:
        shape = f"seq {t.seq_len}, " + shape
    if t.grad_accum_steps > 1:
        shape += f", grad-accum {t.grad_accum_steps}"
    if t.activation_checkpointing:
        shape += ", activation checkpointing"
    return shape


def estimate_neural(w: Workload) -> AnalyticEstimate:
    """The roofline bound of one optimizer step of a neural network (transformer, CNN, MLP)."""
    params = count_params(w.model, w.training)
    flops = compute_step_flops(w, params)
    traffic = bytes_per_step_per_gpu(w, params)
    comm = estimate_comm(w, params)
    memory = estimate_memory(w, params)
    peak, source = compute_ceiling(w)
    t_compute = flops.hardware_flops_per_gpu / (peak * 1e12)
    bw = memory_ceiling(w)
    t_memory = traffic / (bw * 1e9)
    pp = w.parallel.pipeline_parallel
    bubble = 1.0 + (pp - 1) / w.training.grad_accum_steps if pp > 1 else 1.0
    busy = max(t_compute, t_memory)
    if w.parallel.strategy in ("fsdp", "zero3"):
        window = busy  # prefetched gathers overlap forward and backward of every micro-batch
    else:
        window = busy / w.training.grad_accum_steps * (1.0 - flops.forward_share)
    exposed_dp = max(0.0, comm.dp_time_s - window)
    exposed_cp = max(0.0, comm.cp_time_s - busy)  # ring attention hides it behind the step's compute
    exposed = exposed_dp + exposed_cp + comm.tp_time_s + comm.pp_time_s
    t_bound = busy * bubble + exposed
    terms = {"compute": t_compute, "memory": t_memory, "communication": exposed}
    bottleneck = max(terms, key=lambda k: terms[k])
    return AnalyticEstimate(
        params=params,
        flops=flops,
        bytes_per_gpu=traffic,
        comm=comm,
        memory=memory,
        peak_tflops=peak,
        peak_source=source,
        mem_bw_gb_per_s=bw,
        t_compute_s=t_compute,
        t_memory_s=t_memory,
        t_comm_s=comm.dp_time_s + comm.tp_time_s + comm.pp_time_s + comm.cp_time_s,
        t_comm_exposed_s=exposed,
        pipeline_bubble=bubble,
        t_bound_s=max(t_bound, 1e-9),
        bottleneck=bottleneck,
        samples_per_step=samples_per_step(w),
        tokens_per_step=samples_per_step(w) * tokens_per_sample(w) if w.model.is_transformer else None,
        shape=batch_shape(w),
    )
