"""What a kernel call costs on an accelerator: `work / (ceiling x efficiency)`, never below its
roofline floor, with an efficiency that is a small fitted function of the work and of the
accelerator's specs (never its name), so it transfers to accelerators the fit never saw.

The model, per call (seconds):

    memory-bound kinds (norm, activation, rotary, elementwise, loss, embedding, optimizer, dequant):
        t = launches * t_launch[vendor]
            + bytes_moved * F(kind, variant, impl) * (1 / (bw * eta_bw[vendor]) + 1 / (sm_count * r_sm))
    GEMM-like kinds (matmul, conv, attention), summed over the GEMMs the call runs (forward; the
    data and weight gradients in backward):
        t = launches * t_launch_gemm[vendor] + sum_parts max(t_compute, t_memory) (+ extra traffic)
        t_compute = flops / (peak[dtype] * eta_max * tile * k / (k + k0[class]) * A[kind, phase])
        t_memory  = bytes * (1 / (bw * eta_bw[vendor]) + 1 / (sm_count * r_sm))
    seconds = max(t, floor),  floor = max(flops / datasheet peak[dtype], bytes / datasheet bandwidth)
    (a launch small enough to stay in L2: its bytes up to the L2's size at 10x that bandwidth)

- `h`, the share of a memory-bound launch served from L2: 1 / (1 + (bytes per launch / (share x L2))^p),
  and streaming then runs at max(`sm_count * r_l2`, the HBM's `bw * eta_bw`): a small eager
  kernel reads the tensor its neighbour has just written, still in L2 (`l2.*`; an optimizer step's
  parameters and states are not). Sources that flush the L2 before each timed call are fitted
  with h = 0 (perfmodel.kernels.fitting.L2_FLUSHING_SOURCES).

- `1 / (sm_count * r_sm)`: a memory-bound kernel keeps only so many bytes in flight per SM, so its
  bandwidth is capped at sm_count * r_sm besides the HBM's (Little's law); it is what makes eager
  kernels reach a smaller share of a B200's 8 TB/s than of an A100's 2 TB/s.
- `eta_max`: the matmul ceiling over the datasheet peak: `measured['matmul_<dtype>_tflops'] / peak`
  where the accelerator has a measured ceiling, else `sigmoid(c[vendor] + c_tensor[vendor] [tensor
  cores] + s * log(tdp_w / peak_tflops) + s_w * log(tdp_w / 300 W))`: power-limited parts (70 W
  L4, T4, P4) do not hold their boost clock under a long matmul. The fit learns this function from every matmul row, measured ceilings ignored.
  On SIMT dtypes (fp32) eta_max is also divided by (1 + peak per SM / r_c): an SM feeds its lanes
  at most r_c FLOP/s from shared memory and registers, so the doubled fp32 lanes of Ampere GA10x,
  Ada and Hopper count for less than the datasheet says (tensor-core dtypes are left alone). The
  power and board-W slopes of tensor-core dtypes are fitted apart from the SIMT ones.
- `tile`: the best of a few output tiles (128 x 128 down to 32 x 32) for the GEMM's M, N and batch:
  padding x (wave utilisation)^gamma x the tile's own speed (1 + c/64) / (1 + c (1/tm + 1/tn))
  (c = `tile_feed`: a small tile loads more operands per FLOP). A skinny GEMM (N = 32) takes a
  narrow tile instead of computing a 128-wide one that is three quarters padding. Parameter files
  without `tile_feed` keep the single 128 x 128 tile, util^gamma. `k / (k + k0)`: the
  prologue/epilogue of each tile against its inner loop.
- `F` = exp(f[kind] + f[kind, variant] + f[impl] + f[impl, phase]): how much slower than streaming
  `bytes_moved` a kind's kernels run (reductions, random numbers, index sorts; a backward re-reads
  what its ideal byte count does not include, and a fused backward reduces its weight gradient
  across blocks); unseen combinations fall back to the kind's, the implementation's and the
  phase's terms.
- `t_launch`: the per-launch time a single timed call shows (launch, ramp-up, tail) on the device;
  host dispatch time is the step composer's (per recipe).

The parameters are fitted by `perfmodel.kernels.fitting.fit_efficiency` on the kernel table (log-time least squares, scipy)
and shipped as JSON beside this module (`load_efficiency`); `perfmodel kernels show` prints them.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from perfmodel.errors import DataError
from perfmodel.kernels.work import KERNEL_KINDS, KernelWork, gemm_parts, math_elementwise_bytes
from perfmodel.workload import GPUSpec

PARAMS_PATH = Path(__file__).with_name("efficiency.json")
"""The shipped fitted parameters (`perfmodel kernels fit` writes them)."""

VENDORS = ("nvidia", "amd", "intel", "cpu")
GEMM_KINDS = ("matmul", "conv", "attention")
MEMORY_KINDS = tuple(k for k in KERNEL_KINDS if k not in GEMM_KINDS)
TILE = 128
"""Output tile edge (elements) of the wave-quantisation term."""


@dataclass(frozen=True, kw_only=True)
class EfficiencyParams:
    """Fitted parameters of the kernel-time model (named values; see the module docstring)."""

    values: dict[str, float]
    """Parameter name -> value (times in s, bandwidths in bytes/s, the rest dimensionless)."""
    fitted_on: tuple[str, ...] = ()
    """Accelerators whose kernel rows the fit used."""
    rows: int = 0
    """Kernel-table rows the fit used."""
    notes: str = ""
    """How the parameters were fitted (command, table, date)."""

    def get(self, name: str, default: float) -> float:
        return float(self.values.get(name, default))

    @functools.cached_property
    def key(self) -> tuple[tuple[str, float], ...]:
        """The values as a hashable key (kernel times are cached by it)."""
        return tuple(sorted(self.values.items()))

    def to_dict(self) -> dict[str, Any]:
        return {"values": dict(sorted(self.values.items())), "fitted_on": list(self.fitted_on), "rows": self.rows,
                "notes": self.notes}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EfficiencyParams:
        return cls(
            values={str(k): float(v) for k, v in data["values"].items()},
            fitted_on=tuple(data.get("fitted_on", ())),
            rows=int(data.get("rows", 0)),
            notes=str(data.get("notes", "")),
        )


@dataclass(frozen=True, kw_only=True)
class KernelTime:
    """The predicted device time of one kernel call."""

    seconds: float
    """Predicted device time of one call (s)."""
    floor_s: float
    """Roofline floor: max(flops / datasheet peak(dtype), bytes / datasheet bandwidth) (s)."""
    efficiency: float
    """floor_s / seconds, in (0, 1]."""
    l2_saved_s: float = 0.0
    """Device seconds the L2 term saves this call against streaming every byte at the HBM's rate
    (0 where the call does not fit in L2, or the L2 is no faster there)."""


DEFAULTS: dict[str, float] = {
    **{f"t_launch_s.{v}": 2.5e-6 for v in VENDORS},
    **{f"t_launch_gemm_s.{v}": 5e-6 for v in VENDORS},
    **{f"eta_bw.{v}": 0.85 for v in VENDORS},
    "r_sm_bytes_per_s": 20e9,
    **{f"eta_c.{v}": 1.5 for v in VENDORS},
    "eta_c.tensor": 0.0,
    "eta_c.power_slope": 0.3,
    "k0.simt": 32.0,
    "k0.tensor": 64.0,
    "wave_exponent": 1.0,
}
"""Starting values (and the values of parameters a fit has no data for)."""


@functools.cache
def _load(path: str) -> EfficiencyParams:
    try:
        return EfficiencyParams.from_dict(json.loads(Path(path).read_text()))
    except (OSError, ValueError, KeyError) as exc:
        raise DataError(
            f"cannot read the kernel efficiency parameters {path}: {exc}; refit with `perfmodel kernels fit`"
        ) from exc


def load_efficiency(path: str | Path | None = None) -> EfficiencyParams:
    """The shipped fitted parameters (read once, cached); `path` reads another file."""
    return _load(str(path or PARAMS_PATH))


def save_efficiency(params: EfficiencyParams, path: str | Path | None = None) -> Path:
    target = Path(path or PARAMS_PATH)
    target.write_text(json.dumps(params.to_dict(), indent=1) + "\n")
    _load.cache_clear()
    return target


_GROUPS = (
    ("streaming (memory-bound kinds)", ("eta_bw.", "r_sm_", "t_launch_s.")),
    ("kind factors F = exp(f) on streaming time", ("f.",)),
    ("matmul efficiency (GEMM-like kinds)", ("eta_c.", "r_c_", "k0.", "wave_", "tile_", "t_launch_gemm_s.")),
    ("GEMM-kind factors A = exp(a) on compute time", ("a.",)),
    ("L2 (memory-bound launches small enough to stay in it)", ("l2.",)),
    ("timing protocol of each source (fitting only, never in kernel_time)", ("meas.",)),
)
_MEANINGS = {
    "eta_bw.": "share of the datasheet HBM bandwidth a streaming kernel reaches",
    "r_sm_": "bytes/s one SM keeps in flight (the per-SM cap on streaming bandwidth)",
    "t_launch_s.": "device time per launch of a memory-bound kernel",
    "t_launch_gemm_s.": "device time per launch of a GEMM-like kernel",
    "f.": "multiplier on streaming time",
    "eta_c.tensor": "logit offset of tensor/matrix-core dtypes",
    "eta_c.power_slope": "logit slope per log(W per peak TFLOP/s)",
    "eta_c.tdp_slope": "logit slope per log(board W / 300 W)",
    "r_c_": "SIMT FLOP/s one SM can feed (the per-SM cap on an fp32 GEMM's peak)",
    "eta_c.": "logit intercept of the large-matmul efficiency",
    "k0.": "inner dimension at which a tile's loop reaches half its speed",
    "wave_": "exponent on the wave-quantisation utilisation",
    "tile_": "operand-feed cost of a tile (elements): a tm x tn tile runs at (1 + c/64) / (1 + c (1/tm + 1/tn))",
    "a.": "divisor of the matmul efficiency",
    "l2.r_bytes_per_s_per_sm": "bytes/s one SM streams from L2 (the L2 share's bandwidth)",
    "l2.share": "share of the L2 a launch's bytes may fill and still be served from it",
    "l2.sharpness": "how sharply the L2 share falls off past that size",
    "meas.host": "host seconds per launch the benchmark's dispatch costs",
    "meas.overhead": "fixed latency per timed call",
}


def _format(name: str, value: float) -> str:
    if name.startswith(("t_launch", "meas.")):
        return f"{value * 1e6:.2f} us"
    if name.startswith(("r_sm", "l2.r_")):
        return f"{value / 1e9:.1f} GB/s"
    if name.startswith(("f.", "a.")):
        return f"x{math.exp(value):.3f}"
    return f"{value:.4g}"


def describe_params(params: EfficiencyParams) -> dict[str, list[dict[str, str]]]:
    """The parameters in groups, with readable values (s -> us, factors as multipliers) and meaning."""
    out: dict[str, list[dict[str, str]]] = {}
    for title, prefixes in _GROUPS:
        rows = []
        for name in sorted(n for n in params.values if n.startswith(prefixes)):
            meaning = next((m for p, m in _MEANINGS.items() if name.startswith(p)), "")
            rows.append({"name": name, "value": _format(name, params.values[name]), "meaning": meaning})
        out[title] = rows
    return out


# --- accelerator features ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuFeatures:
    """What the model reads of an accelerator (from its specs only)."""

    vendor: str
    bw: float  # datasheet bandwidth, bytes/s
    sm: float
    tdp_w: float
    l2: float  # last-level cache, bytes (0: unknown, a CPU, or no SM count to rate it by)


def gpu_features(gpu: GPUSpec) -> GpuFeatures:
    vendor = gpu.vendor if gpu.vendor in VENDORS else "nvidia"
    bw = float(gpu.hbm_bandwidth_gb_per_s or gpu.measured.get("hbm_copy_gb_per_s") or 1.0) * 1e9
    sm = float(gpu.sm_count) if gpu.sm_count > 0 else 1e6  # unknown: no wave quantisation, no per-SM cap
    # the L2's rate is per SM: without an SM count (a user's accelerator) the L2 is taken as unknown
    l2 = float(gpu.l2_cache_mb) * 1e6 if vendor != "cpu" and gpu.sm_count > 0 else 0.0
    return GpuFeatures(vendor, bw, sm, float(gpu.tdp_w or 0.0), l2)


def _peak(gpu: GPUSpec, dtype: str) -> float:
    """Datasheet peak FLOP/s; a CPU's peak is an estimate (cores x clock x SIMD width), so a measured
    ceiling above it replaces it."""
    peak = gpu.peak_for(dtype) * 1e12
    if gpu.vendor == "cpu":
        peak = max(peak, float(gpu.measured.get(f"matmul_{dtype}_tflops") or 0.0) * 1e12)
    return peak


def _measured_eta(gpu: GPUSpec, dtype: str) -> float | None:
    for key in (dtype, {"fp16": "bf16", "bf16": "fp16"}.get(dtype, dtype)):
        value = gpu.measured.get(f"matmul_{key}_tflops")
        if value:
            return min(0.99, float(value) * 1e12 / _peak(gpu, dtype))
    return None


def _get(v: dict[str, float], name: str) -> float:
    return v.get(name, DEFAULTS.get(name, 0.0))


MAX_PARTS = 6
"""GEMMs one work can run (the math attention path, forward + backward)."""


def _gemm_parts(work: KernelWork) -> list[tuple[int, int, int, int]]:
    """(M, N, K, batch) of each GEMM the work runs."""
    if work.kind == "matmul":
        m, n, k, b = work.shape
        return [(pm, pn, pk, b) for pm, pn, pk in gemm_parts(m, n, k, work.phase, work.variant)]
    if work.kind == "conv":
        m, n, k = work.shape
        return [(pm, pn, pk, 1) for pm, pn, pk in gemm_parts(m, n, k, work.phase, "gemm")]
    b, h, s_q, s_kv, d = work.shape[:5]
    if work.variant == "math":  # QK^T and PV as batched GEMMs; backward: dV, dP, dQ, dK
        fwd = [(s_q, s_kv, d, b * h), (s_q, d, s_kv, b * h)]
        bwd = [(s_kv, d, s_q, b * h), (s_q, s_kv, d, b * h), (s_q, d, s_kv, b * h), (s_kv, d, s_q, b * h)]
        return fwd if work.phase == "forward" else bwd if work.phase == "backward" else fwd + bwd
    return [(s_q, d, s_kv, b * h)]  # fused attention: the query blocks over the keys, in one kernel


@dataclass
class Design:
    """Arrays the model reads for a batch of (work, accelerator) pairs (one row per work)."""

    vendor: np.ndarray  # int index into VENDORS
    bw: np.ndarray
    sm: np.ndarray
    log_w_per_tflop: np.ndarray  # log(tdp / peak TFLOP/s); 0 where the tdp is unknown
    log_tdp: np.ndarray  # log(tdp / 300 W); 0 where unknown
    peak_per_sm: np.ndarray  # datasheet peak FLOP/s per SM (dtype); 0 where the SM count is unknown
    has_tdp: np.ndarray
    peak: np.ndarray
    eta_measured: np.ndarray  # nan where the accelerator has no measured ceiling for the dtype
    tensor: np.ndarray
    gemm: np.ndarray  # 1.0 for GEMM-like kinds
    launches: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    bytes_moved: np.ndarray
    gemm_bytes: np.ndarray  # bytes the GEMM parts stream (a math attention: its GEMMs' own, not its elementwise kernels')
    l2: np.ndarray  # the accelerator's L2 (bytes) the call's tensors may stay in; 0 = none (a flushed benchmark)
    floor: np.ndarray
    floor_hbm: np.ndarray  # the floor with every byte from HBM (the floor where l2 = 0)
    pm: np.ndarray  # (rows, MAX_PARTS) GEMM dims, 0 = no part
    pn: np.ndarray
    pk: np.ndarray
    pb: np.ndarray
    pflops: np.ndarray  # (rows, MAX_PARTS) FLOPs of each part
    codes: dict[str, np.ndarray]  # categorical -> int code per row: kind, kind_variant, impl, phase_key, stream_kind...
    levels: dict[str, list[str]]  # categorical -> its distinct values (code i = levels[i])

    def subset(self, mask: np.ndarray) -> Design:
        """The rows where `mask` is true (categorical levels kept)."""
        values = {
            k: getattr(self, k)[mask] for k in self.__dataclass_fields__ if k not in ("codes", "levels")
        }
        return Design(**values, codes={k: c[mask] for k, c in self.codes.items()}, levels=self.levels)

    def without_l2(self, mask: np.ndarray) -> Design:
        """The same rows, those where `mask` is true measured with the L2 flushed before each call
        (nothing of theirs stays in it: their floor is the HBM one)."""
        return replace(self, l2=np.where(mask, 0.0, self.l2), floor=np.where(mask, self.floor_hbm, self.floor))

    def l2_share(self, v: dict[str, float]) -> np.ndarray:
        """`l2_hit_share` of each row's bytes per launch."""
        return l2_hit_share(self.bytes_moved / np.maximum(self.launches, 1.0), self.l2, v)

    def table_of(
        self, prefix: str, categorical: str, v: dict[str, float], default: float = 0.0
    ) -> np.ndarray:
        """v[prefix + level] for each row's level of `categorical` (default where absent)."""
        per_level = np.array(
            [v.get(prefix + level, default) for level in self.levels[categorical]] or [default]
        )
        return per_level[self.codes[categorical]]


L2_OVER_HBM_MAX = 10.0
"""The floor's L2 bandwidth, as a multiple of the HBM's: published L2 bandwidths are 2-6x the HBM's
(A100 about 2.7x, RTX 4090 about 5x), so no call streams from L2 faster than 10x."""


def memory_floor_seconds(work: KernelWork, l2: float, bw: float) -> float:
    """The memory side of a call's roofline floor (s): where each of its launches moves no more than
    the L2 holds (the tensor its neighbour just wrote, or the same tensors timed again without a
    flush), its bytes may come from L2 at up to `L2_OVER_HBM_MAX` x the HBM bandwidth; a larger
    launch streams every byte from HBM."""
    if l2 <= 0 or work.bytes_moved > max(float(work.launches), 1.0) * l2:
        return work.bytes / bw
    return work.bytes / (L2_OVER_HBM_MAX * bw)  # bytes <= bytes_moved: every byte fits


def l2_hit_share(bytes_per_launch: np.ndarray, l2: np.ndarray, v: dict[str, float]) -> np.ndarray:
    """The share of a memory-bound launch's traffic served from L2: 1 / (1 + (bytes per launch /
    (share x L2))^sharpness); 0 where the L2 is unknown or flushed, and 0 without fitted L2 terms."""
    if "l2.r_bytes_per_s_per_sm" not in v:
        return np.zeros(np.shape(bytes_per_launch))
    usable = np.maximum(l2, 1.0) * v.get("l2.share", 0.5)
    log_ratio = np.log(np.maximum(bytes_per_launch, 1.0) / usable)
    h = 1.0 / (1.0 + np.exp(np.minimum(v.get("l2.sharpness", 2.0) * log_ratio, 700.0)))
    return np.where(l2 > 0, h, 0.0)


def _codes(values: list[str]) -> tuple[np.ndarray, list[str]]:
    levels = sorted(set(values))
    index = {x: i for i, x in enumerate(levels)}
    return np.array([index[x] for x in values], dtype=int), levels


def impl_phase_key(w: KernelWork) -> str:
    """The level of a work's phase factor (`f.phase/<key>`): its implementation and phase. A fused
    normalization has its own: its backward reduces the weight's gradient over the rows, one program
    per SM looping over them (linkedin/Liger-Kernel ops/rms_norm.py, layer_norm.py: grid =
    sm_count), where the other fused kernels (rotary, activation, cross-entropy) stream every
    phase like a forward."""
    impl = f"{w.impl}-norm" if w.kind == "norm" and w.impl != "eager" else w.impl
    return f"{impl}/{w.phase}"


def build_design(pairs: list[tuple[KernelWork, GPUSpec]]) -> Design:
    """The model's arrays for each (work, accelerator) pair."""
    n = len(pairs)
    cols: dict[str, np.ndarray] = {
        name: np.zeros(n)
        for name in ("vendor", "bw", "sm", "log_w_per_tflop", "log_tdp", "peak_per_sm", "has_tdp", "peak", "eta_measured", "tensor", "gemm",
                     "launches", "flops", "bytes", "bytes_moved", "gemm_bytes", "l2", "floor", "floor_hbm")
    }  # fmt: skip
    parts = {name: np.zeros((n, MAX_PARTS)) for name in ("pm", "pn", "pk", "pb", "pflops")}
    cats: dict[str, list[str]] = {
        "kind": [], "kind_variant": [], "impl": [], "phase_key": [], "impl_phase": [],
        "stream_kind": [], "stream_kind_variant": [],
    }  # fmt: skip
    feats: dict[int, GpuFeatures] = {}
    for i, (w, gpu) in enumerate(pairs):
        f = feats.get(id(gpu)) or feats.setdefault(id(gpu), gpu_features(gpu))
        if w.flops or gpu.supports(w.dtype):
            peak = _peak(gpu, w.dtype)
        else:  # a memory-bound kernel in a dtype the accelerator has no compute peak for (fp32 on Gaudi)
            peak = max(gpu.peak_tflops.values(), default=1.0) * 1e12
        measured = _measured_eta(gpu, w.dtype) if gpu.supports(w.dtype) else None
        cols["vendor"][i] = VENDORS.index(f.vendor)
        cols["bw"][i], cols["sm"][i], cols["peak"][i] = f.bw, f.sm, peak
        cols["has_tdp"][i] = 1.0 if f.tdp_w > 0 else 0.0
        cols["log_w_per_tflop"][i] = math.log(f.tdp_w / (peak / 1e12)) if f.tdp_w > 0 else 0.0
        cols["log_tdp"][i] = math.log(f.tdp_w / 300.0) if f.tdp_w > 0 else 0.0
        if gpu.sm_count > 0 and f.vendor != "cpu":  # a CPU core is not an SM: no feed cap
            cols["peak_per_sm"][i] = peak / gpu.sm_count
        cols["eta_measured"][i] = np.nan if measured is None else measured
        cols["tensor"][i] = 1.0 if gpu.tensor_cores(w.dtype) else 0.0
        cols["launches"][i], cols["flops"][i] = w.launches, w.flops
        cols["bytes"][i], cols["bytes_moved"][i] = w.bytes, w.bytes_moved
        compute_floor = w.flops / peak if w.flops else 0.0
        # an optimizer step reads parameters and states no kernel has just written: nothing of them is in L2
        cols["l2"][i] = 0.0 if w.kind == "optimizer" else f.l2
        cols["floor_hbm"][i] = max(compute_floor, w.bytes / f.bw)
        cols["floor"][i] = max(compute_floor, memory_floor_seconds(w, cols["l2"][i], f.bw))
        cats["kind"].append(w.kind)
        cats["kind_variant"].append(f"{w.kind}/{w.variant}")
        cats["impl"].append(w.impl)
        cats["phase_key"].append(f"{w.kind}/{w.variant}/{w.phase}")
        cats["impl_phase"].append(impl_phase_key(w))
        # the streaming factor's kind: a math attention's traffic beyond its GEMMs is elementwise kernels
        math_attention = w.kind == "attention" and w.variant == "math"
        cats["stream_kind"].append("elementwise" if math_attention else w.kind)
        cats["stream_kind_variant"].append("elementwise/softmax" if math_attention else f"{w.kind}/{w.variant}")
        if w.kind in GEMM_KINDS:
            cols["gemm"][i] = 1.0
            cols["gemm_bytes"][i] = w.bytes_moved - math_elementwise_bytes(w) if math_attention else w.bytes
            gp = _gemm_parts(w)
            raw = [2.0 * m * nn * k * b for m, nn, k, b in gp]
            total = sum(raw) or 1.0
            for j, ((m, nn, k, b), r) in enumerate(zip(gp, raw, strict=True)):
                parts["pm"][i, j], parts["pn"][i, j], parts["pk"][i, j], parts["pb"][i, j] = m, nn, k, b
                parts["pflops"][i, j] = w.flops * r / total
    coded = {k: _codes(x) for k, x in cats.items()}
    return Design(
        **cols,
        **parts,
        codes={k: c for k, (c, _) in coded.items()},
        levels={k: lv for k, (_, lv) in coded.items()},
    )


TILES = ((128, 128), (128, 64), (64, 128), (64, 64), (128, 32), (32, 128), (64, 32), (32, 64), (32, 32))
"""Output tiles (rows x columns) a GEMM library chooses among."""


def tile_efficiency(
    m: np.ndarray, n: np.ndarray, b: np.ndarray, sm: np.ndarray, v: dict[str, float]
) -> np.ndarray:
    """The best tile's share of the 128 x 128 tile's speed on each (M, N, batch) GEMM: wave
    utilisation (work / (waves x sm_count x tile)) ^ wave_exponent, times the tile's own speed
    (1 + c / 64) / (1 + c (1 / tm + 1 / tn)): per FLOP, a tm x tn tile loads (tm + tn) / (tm tn)
    operands, so small tiles feed their lanes worse (c = `tile_feed`, in elements; 0: any tile runs
    at full speed). A 128 x 128 tile always takes part, so without `tile_feed` it is the old term."""
    gamma = _get(v, "wave_exponent")
    c = v.get("tile_feed", None)
    tiles = TILES if c is not None else TILES[:1]
    best = np.zeros(np.broadcast(m, n, b, sm).shape)
    for tm, tn in tiles:
        if c is None:  # the single-tile term: padding and waves together, softened by gamma
            waves = np.ceil(np.ceil(m / tm) * np.ceil(n / tn) * b / sm)
            best = np.minimum(1.0, m * n * b / (waves * sm * tm * tn)) ** gamma
            continue
        count = np.ceil(m / tm) * np.ceil(n / tn)
        pad = m * n / (count * tm * tn)  # a tile's padded rows and columns are computed in full
        wave = count * b / (np.ceil(count * b / sm) * sm)  # the last wave's idle SMs
        own = (1.0 + c / 64.0) / (1.0 + c * (1.0 / tm + 1.0 / tn))
        best = np.maximum(best, own * pad * wave**gamma)
    return best


def predict_design(d: Design, v: dict[str, float]) -> np.ndarray:
    """Predicted device seconds of every row of `d` with parameter values `v` (before the floor)."""
    vendor = d.vendor.astype(int)
    per_vendor = {name: np.array([_get(v, f"{name}.{x}") for x in VENDORS])[vendor]
                  for name in ("t_launch_s", "t_launch_gemm_s", "eta_bw", "eta_c")}  # fmt: skip
    # streaming: HBM at eta_bw, or (the share h that stays in L2) the L2's per-SM rate, each under the per-SM cap
    h = d.l2_share(v)
    # (an L2 hit is never slower than the HBM: the L2's rate is the larger of the two)
    inv_hbm = 1.0 / (d.bw * per_vendor["eta_bw"])
    inv_l2 = np.minimum(1.0 / (d.sm * v.get("l2.r_bytes_per_s_per_sm", 1.0)), inv_hbm)
    inv_bw = (1.0 - h) * inv_hbm + h * inv_l2 + 1.0 / (d.sm * _get(v, "r_sm_bytes_per_s"))
    factor = np.exp(
        d.table_of("f.", "stream_kind", v)
        + d.table_of("f.", "stream_kind_variant", v)
        + d.table_of("f.impl/", "impl", v)
        + d.table_of("f.phase/", "impl_phase", v)
    )
    out = d.launches * per_vendor["t_launch_s"] + d.bytes_moved * factor * inv_bw
    g = np.flatnonzero(d.gemm > 0)
    if not len(g):
        return out
    # GEMM-like rows: the parts at the matmul efficiency, plus any traffic beyond the GEMMs' own
    tensor_offset = np.array([v.get(f"eta_c.tensor.{x}", v.get("eta_c.tensor", 0.0)) for x in VENDORS])[
        vendor
    ]
    logit = per_vendor["eta_c"][g] + tensor_offset[g] * d.tensor[g]
    # power and board-W slopes: tensor-core dtypes have their own (absent: the SIMT ones)
    power, tdp = _get(v, "eta_c.power_slope"), _get(v, "eta_c.tdp_slope")
    tensor = d.tensor[g] > 0
    power_slope = np.where(tensor, v.get("eta_c.power_slope.tensor", power), power)
    tdp_slope = np.where(tensor, v.get("eta_c.tdp_slope.tensor", tdp), tdp)
    logit = logit + power_slope * d.log_w_per_tflop[g] + tdp_slope * d.log_tdp[g]
    measured = d.eta_measured[g]
    # SIMT GEMMs: an SM feeds at most r_c FLOP/s from its shared memory and registers, however many
    # fp32 lanes its datasheet counts (the doubled fp32 lanes of Ampere GA10x, Ada, Hopper)
    r_c = v.get("r_c_flop_per_s_per_sm")
    feed = 1.0 if r_c is None else 1.0 / (1.0 + d.peak_per_sm[g] * (1.0 - d.tensor[g]) / r_c)
    eta = np.where(np.isnan(measured), feed / (1.0 + np.exp(-logit)), measured)
    a = np.exp(d.table_of("a.", "kind_variant", v)[g] + d.table_of("a.", "phase_key", v)[g])
    k0 = np.where(d.tensor[g] > 0, _get(v, "k0.tensor"), _get(v, "k0.simt"))
    has = d.pm[g] > 0
    m, n, k, b = (np.where(has, x[g], 1.0) for x in (d.pm, d.pn, d.pk, d.pb))
    sm = d.sm[g][:, None]
    eff = (eta / a)[:, None] * tile_efficiency(m, n, b, sm, v) * k / (k + k0[:, None])
    t_c = d.pflops[g] / (d.peak[g][:, None] * eff)
    share = d.pflops[g] / np.maximum(d.flops[g], 1.0)[:, None]
    t_m = (d.gemm_bytes[g] * inv_bw[g])[:, None] * share
    parts = np.where(has, np.maximum(t_c, t_m), 0.0).sum(axis=1)
    extra = np.maximum(d.bytes_moved[g] - d.gemm_bytes[g], 0.0) * factor[g] * inv_bw[g]
    out[g] = d.launches[g] * per_vendor["t_launch_gemm_s"][g] + parts + extra
    return out


def kernel_time(work: KernelWork, gpu: GPUSpec, params: EfficiencyParams | None = None) -> KernelTime:
    """Predicted device time of one kernel call on `gpu` (seconds >= the roofline floor)."""
    return kernel_times([work], gpu, params)[0]


_CACHE: dict[tuple[Any, ...], dict[KernelWork, KernelTime]] = {}
_CACHE_MAX = 200_000
"""Kernel times already computed, per (accelerator specs, parameters) and work: a sweep or a service
prices the same kernels again and again, and the rows of the training data share most of theirs."""


def _gpu_key(gpu: GPUSpec) -> tuple[Any, ...]:
    return (gpu.name, gpu.vendor, gpu.hbm_bandwidth_gb_per_s, gpu.sm_count, gpu.tdp_w,
            tuple(sorted(gpu.peak_tflops.items())), tuple(sorted(gpu.measured.items())))  # fmt: skip


def kernel_times(
    works: list[KernelWork], gpu: GPUSpec, params: EfficiencyParams | None = None
) -> list[KernelTime]:
    """`kernel_time` of each work on one accelerator; each distinct work not computed before, in one
    vectorised pass (a row's time depends on that row alone, so pricing each distinct work once
    changes no number)."""
    p = params or load_efficiency()
    base = (_gpu_key(gpu), p.key)
    known = _CACHE.get(base, {})
    todo = [w for w in dict.fromkeys(works) if w not in known]
    if todo:
        d = build_design([(w, gpu) for w in todo])
        raw = predict_design(d, p.values)
        seconds = np.maximum(np.maximum(raw, d.floor), 1e-12)
        saved = np.zeros(len(todo))
        cached = d.l2_share(p.values) > 1e-6
        if cached.any():  # the calls that stay in L2, priced again as if streamed from HBM
            dram = predict_design(d.subset(cached), {k: x for k, x in p.values.items() if not k.startswith("l2.")})
            gain = np.maximum(dram, d.floor_hbm[cached]) - seconds[cached]
            # where the L2 is no faster than the HBM (A100, H100, H200) the two prices differ only by
            # rounding: nothing is saved
            saved[cached] = np.where(gain > 1e-9 * seconds[cached], gain, 0.0)
        if sum(len(c) for c in _CACHE.values()) + len(todo) > _CACHE_MAX:
            _CACHE.clear()
        known = _CACHE.setdefault(base, known)
        for w, s_, fl, sv in zip(todo, seconds, d.floor, saved, strict=True):
            known[w] = KernelTime(seconds=float(s_), floor_s=float(fl), efficiency=float(fl / s_), l2_saved_s=float(sv))
    return [known[w] for w in works]


def floor_seconds(work: KernelWork, gpu: GPUSpec) -> float:
    """max(flops / datasheet peak(dtype), bytes / datasheet bandwidth)."""
    return kernel_times([work], gpu, EfficiencyParams(values={}))[0].floor_s


@dataclass(frozen=True, kw_only=True)
class FitReport:
    """What a fit did (for `perfmodel kernels fit`)."""

    params: EfficiencyParams
    rows_used: int
    """Kernel-table rows the fit used."""
    rows_below_floor: int
    """Rows left out because the measurement is faster than its HBM roofline floor (L2-resident)."""
    seconds: float
    """Wall time of the fit (s)."""
    median_ape: float
    """In-sample median absolute percentage error of the fitted rows (fraction)."""
    by_group: dict[str, int] = field(default_factory=dict)
    """Rows used per kernel kind."""
