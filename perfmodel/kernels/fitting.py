"""Fitting the kernel-time model (perfmodel/kernels/efficiency.py) on the kernel table.

Log-time least squares with scipy: residual = w * (log predicted - log measured) per row, w =
1 / sqrt(rows of its (source, accelerator, kind) group) so that no source or accelerator outweighs
the others by its row count alone (and at most FIT_ROWS_PER_GROUP rows of each finer group); ridge terms pull the kind / variant / implementation factors toward 0 (= "moves
`bytes_moved` at the accelerator's streaming bandwidth") where the data says little. The Jacobian is
sparse (a kind's factor touches only that kind's rows), which scipy's finite differences exploit.

What a benchmark measures is not only device time: a call timed alone between CUDA events pays a
fixed latency (launch, event, synchronisation), and a chain of small eager kernels is dispatched by
the host no faster than its per-op cost. The fit therefore compares each row with

    measured ~ max(device seconds, launches * h[source]) + c[source]

where h (host seconds per launch) and c (fixed per-call latency) belong to the source's timing
protocol, not to the accelerator: they are fitted per source (names `meas.*`), shown by `perfmodel
kernels show`, and never part of `kernel_time` (the step composer adds host time per recipe).

Where a source times the same tensors again without flushing the L2 (NeuSight), a call small
enough to stay in L2 runs faster than streaming from HBM: the L2 terms (`l2.*`) learn how much
faster, from the accelerator's L2 size and SM count. Rows of sources that flush the L2 before each
call (`L2_FLUSHING_SOURCES`) are priced with nothing in L2. Rows faster than their roofline floor
are left out, and so are parameters with no row to inform them (they keep `DEFAULTS`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.kernels.efficiency import (
    DEFAULTS,
    GEMM_KINDS,
    VENDORS,
    Design,
    EfficiencyParams,
    FitReport,
    build_design,
    predict_design,
)
from perfmodel.kernels.table import pairs_of_table

RIDGE = 0.1
"""Weight of the ridge residual of each kind / variant / implementation factor (log units)."""
FIT_ROWS_PER_GROUP = 40
"""Rows per (source, accelerator, kind, variant, impl, dtype, phase) group the fit uses (an even
spread over the group's sizes): the big sweeps say no more with 250 rows than with 40, and the
fit stays fast."""
MAX_EVALUATIONS = 60
"""Jacobian evaluations the least-squares fit may take (it converges in 15-40 on the shipped table)."""
BELOW_FLOOR_TOLERANCE = 0.97
"""Rows measured faster than this fraction of their roofline floor are left out."""
PROTOCOL_MIN_ROWS = 30
"""Sources with at least this many rows get their own timing-protocol terms (h, c); smaller ones
are taken as device time."""
DEVICE_TIME_SOURCES = (
    "ml_engineering_mamf_matmul",
    "flash_attention2_a100_gpu_travel",
    "perfmodel-collector",
)
"""Sources whose times are device time already: MAMF's time is 2MNK / its TFLOP/s (back-to-back
calls), the FA2 table publishes kernel ms, the collectors time back-to-back calls between syncs."""
L2_FLUSHING_SOURCES = ("liger_kernel_benchmarks",)
"""Sources whose timing flushes the L2 before each call (triton.testing.do_bench clears a 256 MB
buffer between repetitions): their calls find nothing in L2. The others time the same tensors
again and again (NeuSight, the collectors) or time kernels inside a step, as a training step runs
them, where a small call's tensors are still in L2."""
PROTOCOL_DEFAULTS = {"meas.host_s_per_launch": 5e-6, "meas.overhead_s": 10e-6}
FIT_STARTS = {"tile_feed": 32.0, "r_c_flop_per_s_per_sm": 1e12, "l2.r_bytes_per_s_per_sm": 40e9, "l2.share": 0.5,
              "l2.sharpness": 2.0}  # fmt: skip
"""Starting values of parameters that are absent from `DEFAULTS` (absent = the term is off)."""


@dataclass(frozen=True)
class _Param:
    name: str
    transform: str  # "log" | "logit" | "id"
    rows: np.ndarray  # bool mask of the rows it touches
    ridge: bool = False


def _to_x(p: _Param, value: float) -> float:
    if p.transform == "log":
        return math.log(value)
    if p.transform == "logit":
        return math.log(value / (1 - value))
    return value


def _from_x(p: _Param, x: np.ndarray | float) -> Any:
    if p.transform == "log":
        return np.exp(x)
    if p.transform == "logit":
        return 1.0 / (1.0 + np.exp(-x))
    return x


def _params_for(d: Design) -> list[_Param]:
    vendor = d.vendor.astype(int)
    gemm = d.gemm > 0
    extra = gemm & (d.bytes_moved > d.gemm_bytes * 1.0001)
    memory_like = ~gemm | extra
    no_meas = gemm & np.isnan(d.eta_measured)
    out: list[_Param] = []
    for i, v in enumerate(VENDORS):
        rows = vendor == i
        if not rows.any():
            continue
        out.append(_Param(f"eta_bw.{v}", "logit", rows))
        if (rows & ~gemm).any():
            out.append(_Param(f"t_launch_s.{v}", "log", rows & ~gemm))
        if (rows & gemm).any():
            out.append(_Param(f"t_launch_gemm_s.{v}", "log", rows & gemm))
        if (rows & no_meas).any():
            out.append(_Param(f"eta_c.{v}", "id", rows & no_meas))
    out.append(_Param("r_sm_bytes_per_s", "log", np.ones_like(gemm)))
    in_l2 = memory_like & (d.l2 > 0) & (d.bytes_moved < d.l2 * np.maximum(d.launches, 1.0))
    if in_l2.any():  # calls small enough to stay in L2, timed without a flush
        cached = memory_like & (d.l2 > 0)
        out.append(_Param("l2.r_bytes_per_s_per_sm", "log", cached))
        out.append(_Param("l2.share", "log", cached))
        out.append(_Param("l2.sharpness", "log", cached))
    reference = {"impl": "eager", "impl_phase": "eager/forward"}
    factors = (("stream_kind", "f."), ("stream_kind_variant", "f."), ("impl", "f.impl/"), ("impl_phase", "f.phase/"))
    for cat, prefix in factors:
        for code, level in enumerate(d.levels[cat]):
            rows = (d.codes[cat] == code) & memory_like
            if rows.any() and level != reference.get(cat):
                out.append(_Param(f"{prefix}{level}", "id", rows, ridge=True))
    for i, v in enumerate(VENDORS):
        tensor, simt = no_meas & (vendor == i) & (d.tensor > 0), no_meas & (vendor == i) & (d.tensor == 0)
        if tensor.any() and simt.any():  # a vendor with only tensor rows: its intercept covers them
            out.append(_Param(f"eta_c.tensor.{v}", "id", tensor))
    if (no_meas & (d.log_w_per_tflop != 0)).any():
        out.append(_Param("eta_c.power_slope", "id", no_meas & (d.log_w_per_tflop != 0)))
        out.append(_Param("eta_c.tdp_slope", "id", no_meas & (d.log_w_per_tflop != 0)))
    tensor_power = no_meas & (d.log_w_per_tflop != 0) & (d.tensor > 0)
    if tensor_power.any() and (no_meas & (d.log_w_per_tflop != 0) & (d.tensor == 0)).any():
        out.append(_Param("eta_c.power_slope.tensor", "id", tensor_power))
        out.append(_Param("eta_c.tdp_slope.tensor", "id", tensor_power))
    simt_rows = no_meas & (d.tensor == 0) & (d.peak_per_sm > 0)
    if simt_rows.any():
        out.append(_Param("r_c_flop_per_s_per_sm", "log", simt_rows))
    for cls, mask in (("simt", gemm & (d.tensor == 0)), ("tensor", gemm & (d.tensor > 0))):
        if mask.any():
            out.append(_Param(f"k0.{cls}", "log", mask))
    if gemm.any():
        out.append(_Param("wave_exponent", "log", gemm))
        out.append(_Param("tile_feed", "log", gemm))
    for cat in ("kind_variant", "phase_key"):
        for code, level in enumerate(d.levels[cat]):
            rows = (d.codes[cat] == code) & gemm
            if rows.any() and not level.startswith("matmul/"):
                out.append(_Param(f"a.{level}", "id", rows, ridge=True))
    return out


def _protocol_params(sources: np.ndarray) -> list[_Param]:
    out = []
    names, counts = np.unique(sources, return_counts=True)
    for name, n in zip(names, counts, strict=True):
        if n >= PROTOCOL_MIN_ROWS and not str(name).startswith(DEVICE_TIME_SOURCES):
            rows = sources == name
            out.append(_Param(f"meas.host_s_per_launch.{name}", "log", rows))
            out.append(_Param(f"meas.overhead_s.{name}", "log", rows))
    return out


def as_timed(d: Design, sources: np.ndarray) -> Design:
    """The rows as their benchmarks timed them: those of L2-flushing sources with nothing in L2."""
    return d.without_l2(np.isin(sources, L2_FLUSHING_SOURCES))


def measured_seconds(d: Design, sources: np.ndarray, values: dict[str, float]) -> np.ndarray:
    """What each row's benchmark measures: max(device, launches * h[source]) + c[source]."""
    d = as_timed(d, sources)
    device = predict_design(d, values)
    host = np.array([values.get(f"meas.host_s_per_launch.{s}", 0.0) for s in sources])
    fixed = np.array([values.get(f"meas.overhead_s.{s}", 0.0) for s in sources])
    return np.maximum(np.maximum(device, d.floor), d.launches * host) + fixed


def fit_design(
    d: Design,
    seconds: np.ndarray,
    groups: np.ndarray,
    sources: np.ndarray,
    *,
    start: dict[str, float] | None = None,
) -> tuple[dict[str, float], float]:
    """Fitted parameter values for the rows of `d` measured at `seconds` (groups: one label per row
    for the weights; sources: each row's source, for its timing protocol); returns (values,
    in-sample median APE of the measured quantity)."""
    from scipy.optimize import least_squares  # the fit only; predictions never load scipy
    from scipy.sparse import lil_matrix

    params = _params_for(d) + _protocol_params(sources)
    src_levels, src_codes = np.unique(sources, return_inverse=True)
    _, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    weight = 1.0 / np.sqrt(counts[inverse])
    log_t = np.log(seconds)
    base = {**DEFAULTS, **FIT_STARTS, **(start or {})}
    x0 = np.array(
        [_to_x(p, base.get(p.name, PROTOCOL_DEFAULTS.get(p.name.rsplit(".", 1)[0], 0.0))) for p in params]
    )
    ridge_idx = [i for i, p in enumerate(params) if p.ridge]
    n_rows = len(seconds)

    def values_of(x: np.ndarray) -> dict[str, float]:
        return {**base, **{p.name: float(_from_x(p, xi)) for p, xi in zip(params, x, strict=True)}}

    def residuals(x: np.ndarray) -> np.ndarray:
        values = values_of(x)
        device = predict_design(d, values)
        host = np.array([values.get(f"meas.host_s_per_launch.{s}", 0.0) for s in src_levels])[src_codes]
        fixed = np.array([values.get(f"meas.overhead_s.{s}", 0.0) for s in src_levels])[src_codes]
        pred = np.maximum(device, d.launches * host) + fixed
        r = weight * (np.log(np.maximum(pred, 1e-15)) - log_t)
        return np.concatenate([r, RIDGE * x[ridge_idx]])

    sparsity = lil_matrix((n_rows + len(ridge_idx), len(params)), dtype=int)
    for j, p in enumerate(params):
        sparsity[np.flatnonzero(p.rows), j] = 1
    for r, j in enumerate(ridge_idx):
        sparsity[n_rows + r, j] = 1
    result = least_squares(
        residuals,
        x0,
        jac_sparsity=sparsity,
        method="trf",
        x_scale="jac",
        ftol=1e-6,
        xtol=1e-6,
        max_nfev=MAX_EVALUATIONS,
    )
    values = values_of(result.x)
    ape = float(np.median(np.abs(measured_seconds(d, sources, values) / seconds - 1.0)))
    return {p.name: values[p.name] for p in params}, ape


_DESIGNS: dict[tuple[int, int], Design] = {}
"""Designs of recently fitted tables by content (a refit per fold reuses them)."""


def table_design(table: Any) -> Design:
    """The design of every row of a kernel table (cached per table content)."""
    import pandas as pd  # the kernel table is a DataFrame

    key = (len(table), int(pd.util.hash_pandas_object(table["row_id"], index=False).sum()))
    if key not in _DESIGNS:
        if len(_DESIGNS) >= 4:
            _DESIGNS.pop(next(iter(_DESIGNS)))
        _DESIGNS[key] = build_design(pairs_of_table(table))
    return _DESIGNS[key]


def _spread(table: Any, cap: int) -> np.ndarray:
    """At most `cap` rows of each fine group, evenly spread over the group sorted by bytes."""
    keys = ["source", "gpu", "kernel_kind", "variant", "impl", "dtype", "phase"]
    order = table.sort_values([*keys, "bytes_moved", "row_id"]).index
    rank = table.loc[order].groupby(keys, sort=False).cumcount()
    size = table.loc[order].groupby(keys, sort=False)["row_id"].transform("size")
    step = np.maximum(size / cap, 1.0)
    chosen = np.floor(rank / step) != np.floor((rank - 1) / step)
    out = np.zeros(len(table), dtype=bool)
    out[table.index.get_indexer(order[chosen.to_numpy()])] = True
    return out


def fit_efficiency_table(table: Any, *, exclude_gpus: tuple[str, ...] = ()) -> FitReport:
    """Fit on every row of `table` whose accelerator is not in `exclude_gpus`."""
    started = time.perf_counter()
    design = as_timed(table_design(table), table["source"].to_numpy(dtype=str))
    seconds = table["time_s"].to_numpy(dtype=float)
    keep = ~table["gpu"].isin(list(exclude_gpus)).to_numpy()
    below = seconds < design.floor * BELOW_FLOOR_TOLERANCE
    mask = keep & ~below & (seconds > 0) & _spread(table, FIT_ROWS_PER_GROUP)
    groups = (table["source"] + "|" + table["gpu"] + "|" + table["kernel_kind"]).to_numpy()[mask]
    sources = table["source"].to_numpy(dtype=str)[mask]
    fit_rows = design.subset(mask)
    fit_rows.eta_measured = np.full(
        len(fit_rows.eta_measured), np.nan
    )  # learn the spec function from every matmul row
    values, ape = fit_design(fit_rows, seconds[mask], groups, sources)
    fitted_on = tuple(sorted(set(table["gpu"][mask])))
    params = EfficiencyParams(values=values, fitted_on=fitted_on, rows=int(mask.sum()))
    kinds = table["kernel_kind"][mask].value_counts().to_dict()
    return FitReport(
        params=params,
        rows_used=int(mask.sum()),
        rows_below_floor=int((keep & below).sum()),
        seconds=time.perf_counter() - started,
        median_ape=ape,
        by_group={str(k): int(v) for k, v in kinds.items()},
    )


def fit_efficiency(table: Any, *, exclude_gpus: tuple[str, ...] | list[str] = ()) -> EfficiencyParams:
    """Parameters fitted on the kernel table's rows, leaving out every row of `exclude_gpus`
    (deterministic; well under 2 s on 2 cores for the shipped table)."""
    return fit_efficiency_table(table, exclude_gpus=tuple(exclude_gpus)).params


__all__ = ["GEMM_KINDS", "fit_design", "fit_efficiency", "fit_efficiency_table", "table_design"]
