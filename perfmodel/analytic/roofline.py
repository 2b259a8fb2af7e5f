"""The analytic step time and the roofline floor under it, from the step's kernels.

Every kernel of one optimizer step (`perfmodel.analytic.step.plan_step`: the layers' matmuls,
attention, norms, activations, rotary, residual adds, casts, LoRA adapters, dequantization, the
loss over the vocabulary, the embedding, the optimizer, by the framework's recipe) costs
`work / (ceiling x efficiency)` on the accelerator (`perfmodel.kernels.efficiency`), never less
than its roofline floor. They run one after another on the device, so:

    device per micro-batch = sum of its kernels' times
    micro-batch            = max(device, host launches)     (GPU: the host runs ahead)
                           = device + host launches          (CPU: the same cores do both)
    busy                   = micro-batches x micro-batch + optimizer step
    t_bound                = busy x pipeline bubble + exposed communication

`t_bound` is the baseline the learned residual corrects (y = log(t_measured / t_bound)): the step
as its kernels cost at the efficiency the kernel measurements predict for this accelerator's specs.
The floor is `t_roofline_s`: max(FLOPs / datasheet peak, (weights read by the matmuls + optimizer
bytes) / datasheet bandwidth) times the bubble, plus exposed communication; no prediction is ever
faster than it (and no kernel of the plan is priced below its own floor)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfmodel.analytic.comm import CommCost, estimate_comm
from perfmodel.analytic.flops import StepFlops, compute_step_flops, samples_per_step, tokens_per_sample
from perfmodel.analytic.memory import MemoryBreakdown, estimate_memory
from perfmodel.analytic.params import ParamCounts, count_params
from perfmodel.analytic.step import StepPlan, StepTime, plan_step, price_step
from perfmodel.analytic.traffic import StepTraffic, step_traffic
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
    """The analytic step time (s): the baseline the learned correction multiplies."""
    t_roofline_s: float
    """The physical floor of one optimizer step (s): no real step is faster."""
    bottleneck: str
    """'compute', 'memory', 'host overhead' or 'communication': the largest term of the step."""
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
    traffic: StepTraffic | None = None
    """Bytes by kind of kernel (None for cost models without them)."""
    t_matmul_s: float = 0.0
    """Matmul kernels per step: compute- or weight-read-bound, whichever is slower (s)."""
    t_nonmatmul_s: float = 0.0
    """Elementwise kernels per step (s)."""
    t_dequant_s: float = 0.0
    """Dequantization of 4/8-bit bases per step (s)."""
    t_optimizer_s: float = 0.0
    """The optimizer step (s)."""
    t_host_s: float = 0.0
    """Host time launching the step's kernels (s); hidden behind the device on a GPU while shorter."""
    kernel_seconds: tuple[tuple[str, float], ...] = ()
    """(kernel kind, device seconds per optimizer step) from the step plan (perfmodel.analytic.step)."""
    launches_per_micro_batch: float = 0.0
    """Kernels one micro-batch launches on one GPU."""
    t_l2_saved_s: float = 0.0
    """Device seconds per optimizer step the kernel model's L2 term saves (included in kernel_seconds)."""

    def kernel_share(self, kind: str) -> float:
        """A kernel kind's share of the analytic step time."""
        return dict(self.kernel_seconds).get(kind, 0.0) / self.t_bound_s if self.t_bound_s else 0.0

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


TF32_NOTE = (
    "tf32 matmuls are extrapolated: the kernel model has no tf32 kernel timings and prices a big tf32 "
    "GEMM near 0.94 of peak on an H100, where XLA's measured H100 GEMMs of 2^36 FLOP or more reach 0.54-0.82 "
    "(bench/xla_gemm_check.py); the learned part corrects it only near tf32 runs it was trained on"
)
"""The note of a step whose matmuls run in tf32 on tensor cores (docs/accuracy-history.md, model 29)."""


def estimate_neural(
    w: Workload, efficiency: Any = None, *, plan: StepPlan | None = None, priced: StepTime | None = None
) -> AnalyticEstimate:
    """The analytic step time of a neural network (transformer, CNN, MLP) from its kernels, and
    its floor: every kernel of the step plan (perfmodel.analytic.step) priced on the accelerator
    (`plan` and `priced`: already computed, e.g. by `perfmodel.analytic.estimate_many`)."""
    params = count_params(w.model, w.training)
    flops = compute_step_flops(w, params)
    comm = estimate_comm(w, params)
    memory = estimate_memory(w, params)
    plan = plan or plan_step(w, params)
    st = priced or price_step(w, plan, efficiency)
    t, par = w.training, w.parallel
    accum = t.grad_accum_steps
    peak, source = compute_ceiling(w)
    bw = memory_ceiling(w)
    on_cpu = w.gpu.vendor == "cpu"
    device_micro, host_micro = st.device_micro_s, st.host_micro_s
    micro = device_micro + host_micro if on_cpu else max(device_micro, host_micro)
    t_optimizer = st.device_step_s + st.host_step_s if on_cpu else max(st.device_step_s, st.host_step_s)
    busy = micro * accum + t_optimizer
    pp = par.pipeline_parallel
    bubble = 1.0 + (pp - 1) / accum if pp > 1 else 1.0
    if par.strategy in ("fsdp", "zero3"):
        window = busy  # prefetched gathers overlap forward and backward of every micro-batch
    elif par.strategy == "zero2":
        window = micro * (1.0 - flops.forward_share) * accum  # each micro-batch's reduce behind its backward
    else:
        window = micro * (1.0 - flops.forward_share)  # the last micro-batch's backward
    exposed_dp = max(0.0, comm.dp_time_s - window)
    exposed_cp = max(0.0, comm.cp_time_s - busy)  # ring attention hides it behind the step's compute
    exposed = exposed_dp + exposed_cp + comm.tp_time_s + comm.pp_time_s
    t_bound = busy * bubble + exposed
    traffic = step_traffic(w, params)
    datasheet_peak = w.gpu.peak_for(t.compute_dtype) if w.gpu.peak_tflops else peak
    datasheet_bw = float(w.gpu.hbm_bandwidth_gb_per_s or bw)
    floor_busy = max(  # the whole step's roofline: every kernel's own floor is in the step plan's pricing
        flops.hardware_flops_per_gpu / (max(datasheet_peak, peak) * 1e12),
        (traffic.matmul_weight_bytes + traffic.optimizer_bytes) / (max(datasheet_bw, bw) * 1e9),
    )
    t_roofline = floor_busy * bubble + exposed
    kinds = st.by_kind_s
    t_matmul = kinds.get("matmul", 0.0) + kinds.get("conv", 0.0)
    t_compute = t_matmul + kinds.get("attention", 0.0)
    t_dequant = kinds.get("dequant", 0.0)
    t_nonmatmul = sum(v for k, v in kinds.items() if k not in ("matmul", "conv", "attention", "dequant", "optimizer"))
    t_memory = t_nonmatmul + t_dequant + kinds.get("optimizer", 0.0)
    t_host = host_micro * accum + st.host_step_s
    moved = sum(k.work.bytes_moved * k.calls * (1 if k.per_step else accum) for k in plan.kernels)
    terms = {
        "compute": t_compute,
        "memory": t_memory,
        "host overhead": t_host if (on_cpu or t_host > device_micro * accum + st.device_step_s) else 0.0,
        "communication": exposed,
    }
    bottleneck = max(terms, key=lambda k: terms[k])
    notes: list[str] = []
    if t.compute_dtype == "tf32" and w.gpu.tensor_cores("tf32"):
        notes.append(TF32_NOTE)
    if par.strategy == "fsdp" and accum > 1 and par.shard_group > 1:
        notes.append(
            "fsdp with gradient accumulation is modelled as full sharding that re-gathers parameters "
            "for every micro-batch (FULL_SHARD / reshard_after_forward=True); for sharding that keeps "
            "them gathered (SHARD_GRAD_OP, ZeRO-2) set hardware.strategy: zero2"
        )
    return AnalyticEstimate(
        params=params,
        flops=flops,
        bytes_per_gpu=moved,
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
        t_roofline_s=max(min(t_roofline, t_bound), 1e-9),
        bottleneck=bottleneck,
        samples_per_step=samples_per_step(w),
        tokens_per_step=samples_per_step(w) * tokens_per_sample(w) if w.model.is_transformer else None,
        shape=batch_shape(w),
        notes=tuple(notes) + plan.notes,
        traffic=traffic,
        t_matmul_s=t_matmul,
        t_nonmatmul_s=t_nonmatmul,
        t_dequant_s=t_dequant,
        t_optimizer_s=t_optimizer,
        t_host_s=t_host,
        kernel_seconds=tuple(sorted(kinds.items())),
        launches_per_micro_batch=st.launches_micro,
        t_l2_saved_s=st.l2_saved_s,
    )
