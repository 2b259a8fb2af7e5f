"""How a calibration moves a prediction: hierarchical shrinkage toward the uncalibrated model, with
an interval that narrows with evidence and widens back far from what was measured.

Per measured run i of a calibration (its workload predicted by the uncalibrated model with the
calibration's ceilings applied: step estimate p_i, analytic estimate est_i):

    e_i = log(measured_i / p_i)              what the model missed on this hardware
    u_i = e_i - log r(est_i)                 what the kernel factors do not explain
    r(est) = (sum_g f_g T_g + f_host H) / (sum_g T_g + H)      on a CPU (host and device add up)
           = max(sum_g f_g T_g, f_host H) / max(sum_g T_g, H)  on an accelerator (the host runs ahead)

T_g: the kernel model's seconds of kernel group g (matmul+conv, attention, the memory-bound kinds),
H its host launch time, f_g the calibration's kernel factors (measured / modelled micro-benchmark
time). The factors are used only where they explain the runs: when they lower the spread of the
residuals (u against e), otherwise r = 1 and the offset carries it all.

For a query x, run i counts ρ_i(x) = exp(-max(0, d_i - WINDOW_DECADES) / SCALE_DECADES) runs, with
d_i the distance of the two configurations in the spirit of `perfmodel.learn.evidence`: the larger
of |Δ log10 FLOPs per step| and |Δ log10 bytes per step| (per device), plus KEY_PENALTY_DECADES
when scale (1 device / 1 node / multi-node), kind of stack (eager / fused-compiled) or kind of model
(transformer / CNN / other / boosted trees) differ. Then, per calibration, n(x) = Σ ρ_i and

    C(x) = log r(est_x) + Σ ρ_i u_i / n(x)      the calibration's correction at x (log units)

and the levels combine as a normal-normal model (accelerator kind, then host), each shrunk toward
the level above with weight w(n) = n / (n + SHRINK_RUNS):

    μ_kind = w(n_kind) C_kind                   (C_kind: the n-weighted mean of the other
                                                 calibrations of the accelerator kind)
    μ      = μ_kind + w(n_host) (C_host - μ_kind)
    log step = log step_uncalibrated + μ

n = 0 gives the uncalibrated model, n → ∞ the measured value. The interval's half-widths (log)
are (1 - W) h_uncalibrated + W h_measured, W = 1 - (1 - w(n_kind)) (1 - w(n_host)) the total trust,
h_measured = t(dof) s sqrt(1 + 1/n) the predictive spread of the residuals (s pooled with a prior
SIGMA_PRIOR of PRIOR_DOF degrees of freedom, so two runs that happen to agree do not give a
zero-width interval). Far from every measured run n(x) → 0 and the interval widens back to the
uncalibrated one.

SHRINK_RUNS = 2 (k, stated): in the normal-normal model w = n / (n + σ²/τ²), σ the spread of one
run's residual around its hardware's offset and τ the spread of hardware offsets the model has not
seen. On the collectors' CPU slices σ is about 0.2-0.3 (log; configuration-to-configuration), and
the shipped model's error on hardware it has not seen is τ ≈ 0.4 or more (its 90% interval spans
x4-x9): σ²/τ² ≈ 0.25-0.6. k = 2 is the conservative end (a single run is trusted a third, three
runs 60%, ten 83%), fixed before any evaluation, not tuned on one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from perfmodel.calibration.record import Calibration, KernelFactor
from perfmodel.catalog.frameworks import recipe_of
from perfmodel.workload import Workload

SHRINK_RUNS = 2.0
"""k of w = n / (n + k): measured runs at which a calibration is trusted half (module docstring)."""
WINDOW_DECADES = 0.5
"""Configurations within this many decades (x3.2) of FLOPs and bytes per step count fully."""
SCALE_DECADES = 1.0
"""Beyond the window, a run's weight falls by e per decade."""
KEY_PENALTY_DECADES = 1.0
"""Distance added when scale, kind of stack or kind of model differ."""
SIGMA_PRIOR = 0.25
"""Prior spread (log) of one run's residual around its hardware's offset."""
PRIOR_DOF = 4.0
"""Degrees of freedom of that prior (worth four runs: with one or two runs the interval is not
wider than the prior's t quantile allows)."""
GROUPS = ("matmul", "attention", "memory")
"""Kernel groups with a factor (plus 'host': the launch latency)."""
_GROUP_OF = {"matmul": "matmul", "conv": "matmul", "attention": "attention"}


def shrink_weight(n: float, k: float = SHRINK_RUNS) -> float:
    """w = n / (n + k): 0 without evidence, -> 1 as evidence grows."""
    return n / (n + k) if n > 0 else 0.0


def config_key(w: Workload) -> str:
    """scale | kind of stack | kind of model of a workload (the exact-match part of the distance)."""
    par = w.parallel
    scale = "1 device" if par.num_gpus <= 1 else ("1 node" if par.num_nodes <= 1 else "multi-node")
    recipe = recipe_of(w)
    eager = not recipe.fused and not recipe.compile and not w.training.torch_compile
    arch = w.model.arch
    kind = "gbm" if arch == "gbm" else "transformer" if w.model.is_transformer else ("cnn" if arch == "cnn" else "other")
    return f"{scale}|{'eager' if eager else 'fused'}|{kind}"


def coords(est: Any) -> tuple[float, float]:
    """(log10 FLOPs, log10 bytes) of one step on one device."""
    flops = float(getattr(est.flops, "hardware_flops_per_gpu", 0.0) or 0.0)
    moved = float(est.bytes_per_gpu or 0.0)
    return math.log10(max(flops, 1.0)), math.log10(max(moved, 1.0))


def distance(a: tuple[str, float, float], b: tuple[str, float, float]) -> float:
    """Decades between two configurations (key, log10 FLOPs, log10 bytes)."""
    d = max(abs(a[1] - b[1]), abs(a[2] - b[2]))
    return d + (0.0 if a[0] == b[0] else KEY_PENALTY_DECADES)


def locality(d: float) -> float:
    """How many runs one run at distance `d` counts for (1 within the window)."""
    return math.exp(-max(0.0, d - WINDOW_DECADES) / SCALE_DECADES)


def step_terms(est: Any, factors: Mapping[str, KernelFactor] | None = None) -> tuple[float, float]:
    """(device seconds, host seconds) of one analytic step: its kernels (each group x its factor
    when `factors` are given) and its host launch time."""
    device = 0.0
    for kind, seconds in est.kernel_seconds or ():
        f = (factors or {}).get(_GROUP_OF.get(kind, "memory"))
        device += seconds * (f.factor if f is not None else 1.0)
    return device, float(est.t_host_s or 0.0)


def terms_log_ratio(device: float, host: float, base: tuple[float, float], theta: float, on_cpu: bool) -> float:
    """log r: the step with its host time x e^theta (and its device time as given) over the step
    as the kernel model composed it (`base`: its own device and host seconds)."""
    d0, h0 = base
    h = host * math.exp(theta)
    num, den = (device + h, d0 + h0) if on_cpu else (max(device, h), max(d0, h0))
    if num <= 0 or den <= 0:
        return 0.0
    return math.log(num / den)


def kernel_log_ratio(est: Any, fc: FittedCalibration, on_cpu: bool) -> float:
    """log r(est) of a fitted calibration (module docstring); 0 without terms."""
    base = step_terms(est)
    device = step_terms(est, fc.calibration.kernel_factors)[0] if fc.use_factors else base[0]
    return terms_log_ratio(device, base[1], base, fc.theta, on_cpu)


def student_t_quantile(p: float, dof: float) -> float:
    """The p-quantile of Student's t (Cornish-Fisher expansion around the normal's; within 1% for
    dof >= 2 at the usual levels), without scipy."""
    z = NormalDist().inv_cdf(p)
    v = max(dof, 1.0)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / v + g2 / v**2 + g3 / v**3 + g4 / v**4


@dataclass(frozen=True, kw_only=True)
class Point:
    """One measured run, as the calibration uses it."""

    key: str
    log_flops: float
    log_bytes: float
    residual: float
    """e_i: log(measured / uncalibrated prediction)."""
    device_s: float = 0.0
    """The kernel model's device seconds of the run's step."""
    device_factored_s: float = 0.0
    """The same with the kernel factors applied."""
    host_s: float = 0.0
    """Its host launch seconds."""
    on_cpu: bool = True
    label: str = ""
    measured_s: float = 0.0
    predicted_s: float = 0.0

    def log_ratio(self, theta: float, factored: bool) -> float:
        device = self.device_factored_s if factored else self.device_s
        return terms_log_ratio(device, self.host_s, (self.device_s, self.host_s), theta, self.on_cpu)


THETA_PRIOR_SD = 1.5
"""Prior spread (log) of the host factor around the launch-latency benchmark's."""
_THETA_GRID = [i * 0.02 for i in range(-200, 501)]
"""log host factors tried (x0.02 to x22000)."""


def fit_theta(points: Sequence[Point], prior: float, factored: bool) -> tuple[float, float]:
    """(theta, residual spread): the log host factor that best explains the runs (least squares
    in log space with the offset free, plus a normal prior around `prior`); the prior alone
    with fewer than 2 runs."""
    if len(points) < 2:
        return prior, 0.0
    best, best_loss = prior, math.inf
    for theta in _THETA_GRID:
        res = [p.residual - p.log_ratio(theta, factored) for p in points]
        m = sum(res) / len(res)
        loss = sum((r - m) ** 2 for r in res) / SIGMA_PRIOR**2 + ((theta - prior) / THETA_PRIOR_SD) ** 2
        if loss < best_loss:
            best, best_loss = theta, loss
    return best, _sd([p.residual - p.log_ratio(best, factored) for p in points])


@dataclass(frozen=True, kw_only=True)
class FittedCalibration:
    """A calibration with the residuals of its runs against the model that predicts now, and its
    kernel terms fitted to them."""

    calibration: Calibration
    points: tuple[Point, ...]
    theta: float
    """log of the host factor (host launch time x e^theta), fitted on the runs."""
    use_factors: bool
    """Whether the micro-benchmarks' kernel factors lowered the spread of the residuals (then used)."""
    spread: float
    """Sample spread (log) of the runs' residuals after the kernel terms (0 with < 2 runs)."""
    spread_without_factors: float
    """The spread of the raw residuals (no kernel terms)."""

    @classmethod
    def of(cls, cal: Calibration, points: Sequence[Point]) -> FittedCalibration:
        pts = tuple(points)
        host = cal.kernel_factors.get("host")
        prior = math.log(host.factor) if host is not None and host.factor > 0 else 0.0
        theta, spread = fit_theta(pts, prior, False)
        use = False
        if cal.kernel_factors and len(pts) >= 2:
            theta_f, spread_f = fit_theta(pts, prior, True)
            if spread_f < spread:
                theta, spread, use = theta_f, spread_f, True
        return cls(calibration=cal, points=pts, theta=theta, use_factors=use, spread=spread,
                   spread_without_factors=_sd([p.residual for p in pts]))  # fmt: skip

    @property
    def n(self) -> int:
        return len(self.points)

    def residuals(self) -> list[float]:
        return [p.residual - p.log_ratio(self.theta, self.use_factors) for p in self.points]

    def offset(self) -> float:
        """The mean residual (log) over all runs after the kernel terms: the snapshot's log offset."""
        r = self.residuals()
        return sum(r) / len(r) if r else 0.0

    def at(self, key: str, log_flops: float, log_bytes: float, kernel: float) -> tuple[float, float, float]:
        """(n(x), C(x), nearest distance) for a query whose log r is `kernel` (module docstring)."""
        q = (key, log_flops, log_bytes)
        n = acc = 0.0
        nearest = math.inf
        for p, u in zip(self.points, self.residuals(), strict=True):
            d = distance(q, (p.key, p.log_flops, p.log_bytes))
            nearest = min(nearest, d)
            rho = locality(d)
            n += rho
            acc += rho * u
        if n <= 0:
            return 0.0, 0.0, nearest
        return n, kernel + acc / n, nearest

    def pooled_sd(self) -> tuple[float, float]:
        """(spread pooled with the prior, its degrees of freedom)."""
        dof_data = max(self.n - 2, 0)  # the offset and the host factor are fitted
        var = (dof_data * self.spread**2 + PRIOR_DOF * SIGMA_PRIOR**2) / (dof_data + PRIOR_DOF)
        return math.sqrt(var), dof_data + PRIOR_DOF


def _sd(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = sum(values) / len(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


@dataclass(frozen=True, kw_only=True)
class Adjustment:
    """What the calibration did to one prediction (log space, relative to the analytic bound)."""

    log_ratio: float
    log_low: float
    log_high: float
    shift: float
    """μ: how far the estimate moved (log)."""
    weight: float
    """W: total trust in the calibration here (0..1)."""
    n_host: float
    n_kind: float
    nearest_decades: float
    """Distance to the nearest measured run (decades; inf without runs)."""
    host: str | None
    """This host's calibration used (hardware id), or None."""
    kind: tuple[str, ...]
    """Other calibrations of the accelerator kind used (hardware ids)."""
    accelerator_kind: str
    kernel_factors_used: bool
    ceilings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "applied": True,
            "accelerator_kind": self.accelerator_kind,
            "host": self.host,
            "kind_level": list(self.kind),
            "weight": self.weight,
            "evidence_host_runs": self.n_host,
            "evidence_kind_runs": self.n_kind,
            "shrink_runs": SHRINK_RUNS,
            "log_shift": self.shift,
            "factor": math.exp(self.shift),
            "nearest_measured_decades": None if math.isinf(self.nearest_decades) else self.nearest_decades,
            "kernel_factors_used": self.kernel_factors_used,
            "ceilings": dict(self.ceilings),
        }

    def assumption(self) -> str:
        who = f"this host's calibration ({self.host})" if self.host else f"an imported calibration of {self.accelerator_kind} ({', '.join(self.kind)})"
        near = "" if math.isinf(self.nearest_decades) else f", nearest measured run {self.nearest_decades:.1f} decades away"
        return (
            f"calibrated on {who}: step time x{math.exp(self.shift):.3g}, trusted {self.weight:.0%} "
            f"({self.n_host + self.n_kind:.1f} measured runs near this configuration{near}; "
            f"w = n/(n+{SHRINK_RUNS:g})); --no-calibration for the uncalibrated prediction"
        )


def adjust(
    *,
    log_ratio: float,
    log_low: float,
    log_high: float,
    host: FittedCalibration | None,
    kind: Sequence[FittedCalibration],
    workload: Workload,
    est: Any,
    confidence: float,
    ceilings: Mapping[str, float] | None = None,
) -> Adjustment:
    """The calibrated log ratio and interval of one prediction (module docstring)."""
    key = config_key(workload)
    lf, lb = coords(est)
    on_cpu = workload.gpu.vendor == "cpu"

    def level(fc: FittedCalibration) -> tuple[float, float, float]:
        return fc.at(key, lf, lb, kernel_log_ratio(est, fc, on_cpu))

    n_kind = c_kind_acc = 0.0
    nearest = math.inf
    for fc in kind:
        n, c, d = level(fc)
        n_kind += n
        c_kind_acc += n * c
        nearest = min(nearest, d)
    c_kind = c_kind_acc / n_kind if n_kind > 0 else 0.0
    w_kind = shrink_weight(n_kind)
    mu = w_kind * c_kind
    n_host, w_host = 0.0, 0.0
    if host is not None:
        n_host, c_host, d = level(host)
        nearest = min(nearest, d)
        w_host = shrink_weight(n_host)
        mu = mu + w_host * (c_host - mu)
    trust = 1.0 - (1.0 - w_kind) * (1.0 - w_host)
    source = host if host is not None and host.n else max(kind, key=lambda f: f.n, default=None)
    if source is not None and trust > 0:
        sd, dof = source.pooled_sd()
        n_eff = max(n_host + n_kind, 1e-9)
        h_meas = student_t_quantile(0.5 + confidence / 2.0, dof) * sd * math.sqrt(1.0 + 1.0 / n_eff)
    else:
        h_meas = 0.0
    h_lo = (1.0 - trust) * (log_ratio - log_low) + trust * h_meas
    h_hi = (1.0 - trust) * (log_high - log_ratio) + trust * h_meas
    centre = log_ratio + mu
    used = [f for f in ([host] if host is not None else []) + list(kind)]
    return Adjustment(
        log_ratio=centre,
        log_low=centre - h_lo,
        log_high=centre + h_hi,
        shift=mu,
        weight=trust,
        n_host=n_host,
        n_kind=n_kind,
        nearest_decades=nearest,
        host=host.calibration.hardware_id if host is not None else None,
        kind=tuple(f.calibration.hardware_id for f in kind),
        accelerator_kind=(used[0].calibration.accelerator_kind if used else ""),
        kernel_factors_used=any(f.use_factors for f in used),
        ceilings=dict(ceilings or {}),
    )
