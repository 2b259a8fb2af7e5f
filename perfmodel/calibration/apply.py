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
time). The factors are recorded but not applied (KERNEL_FACTORS = "off": r = 1 but for the fitted
host factor, and the offset carries the rest): applied, always or shrunk toward 1 like the offset
(`shrunk_factors`), or when they lowered the runs' in-sample spread (the rule before), they raised
the leave-one-out error on the committed CPU slices (bench/calibration_kernel_factors.py; numbers
in docs/run.md, "Calibration"). `FittedCalibration.of(..., factors="on")` still applies them.

For a query x, run i counts ρ_i(x) = exp(-max(0, d_i - WINDOW_DECADES) / SCALE_DECADES) runs, with
d_i the distance of the two configurations in the spirit of `perfmodel.learn.evidence`: the larger
of |Δ log10 FLOPs per step| and |Δ log10 bytes per step| (per device), plus KEY_PENALTY_DECADES
when scale (1 device / 1 node / multi-node), kind of stack (eager / fused-compiled) or kind of model
(transformer / CNN / other / boosted trees) differ. Then, per calibration, n(x) = Σ ρ_i and

    C(x) = log r(est_x) + Σ ρ_i u_i / n(x)      the calibration's correction at x (log units)

and the levels combine as a normal-normal model (accelerator kind, then host), each shrunk toward
the level above with weight w = n / (n + k):

    μ_kind = w_kind C_kind                      (C_kind: the n-weighted mean of the other
                                                 calibrations of the accelerator kind)
    μ      = μ_kind + w_host (C_host - μ_kind)
    log step = log step_uncalibrated + μ

n = 0 gives the uncalibrated model, n → ∞ the measured value.

k (stated): in the normal-normal model w = n / (n + σ²/τ²), σ the spread of one run's residual
around its hardware's offset, τ the spread of hardware offsets around the model. `shrink_runs`
takes σ from the runs near the query (their locality-weighted spread, pooled with a prior
SIGMA_PRIOR = 0.25 worth PRIOR_DOF = 4 runs, so two runs that happen to agree do not claim a tiny
spread) and τ = max(TAU_PRIOR, |C|): TAU_PRIOR = 0.4 is the order of the shipped model's error on
accelerators it has not seen, and a hardware whose runs sit |C| off the model is itself evidence
that τ is at least that (an empirical-Bayes estimate from one group). k is never below K_MIN = 0.25
(one run is trusted at most 80%). A machine 3x off the model with a 0.25 spread gets k = 0.25; a
machine 10% off with a 0.3 spread k = 0.56. These constants were fixed on the synthetic tests and
the reasoning above, before the held-out CPU check of docs/run.md, and not tuned on it.

The interval's half-widths (log) are (1 - W) h_uncalibrated + W h_measured, W = 1 - (1 - w_kind)
(1 - w_host) the total trust, h_measured = t(dof) σ sqrt(1 + 1/n) the runs' predictive spread.
It is never narrower than the fully calibrated value C ± h_measured (the shrunk estimate's own
error: what is not trusted is still possible), so it narrows as evidence accrues near the query
and widens back far from every measured run, where n(x) → 0 and W → 0. And it is never wider,
on either side of its centre, than the uncalibrated interval's side, unless the runs' own spread
(t(n - 1) s sqrt(1 + 1/n), the prior taken out; two runs or more) asks for more, and it always
holds the fully calibrated value. The prior spread alone (σ = 0.25 worth four runs, t at four
degrees of freedom) had widened it: one probe run moved the 90% interval of held-out public
sources from x2.66 to x4.51 (median) while the uncalibrated half-width around the calibrated
centre already covered 91% of their other runs, 93% with three probes (bench/after_probe.py,
model 10's leave-one-source-out predictions; the rule was chosen after that measurement, and it
has no constant to tune).
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
"""k of w = n / (n + k) for the snapshot in a calibration file and a run without a spread yet: the
value of σ²/τ² at σ = τ / 1.4 (module docstring); predictions use `shrink_runs`."""
TAU_PRIOR = 0.4
"""Spread (log) of the offsets of hardware the model has not seen: when it was set (model 1), the
shipped model's held-out error on unseen accelerators was of this order (its 90% interval spanned
x4-x9). Not re-tuned since: bench/after_probe.py measures what it gives on held-out public setups
(docs/run.md, "Calibration"), and one run trusted up to 80% is too much where each network has its
own error (timm's CNNs), enough where a whole setup is off (MosaicML's GPTs)."""
K_MIN = 0.25
"""k is never below this: one run is never trusted more than 80%."""
WINDOW_DECADES = 0.5
"""Configurations within this many decades (x3.2) of FLOPs and bytes per step count fully."""
SCALE_DECADES = 0.5
"""Beyond the window, a run's weight falls by e per half decade (x0.14 per decade): twenty runs
three decades beyond the window still count as less than one."""
KEY_PENALTY_DECADES = 1.0
"""Distance added when scale, kind of stack or kind of model differ."""
SIGMA_PRIOR = 0.25
"""Prior spread (log) of one run's residual around its hardware's offset."""
PRIOR_DOF = 4.0
"""Degrees of freedom of that prior (worth four runs: with one or two runs the interval is not
wider than the prior's t quantile allows)."""
KERNEL_FACTORS = "off"
"""How predictions use a calibration's kernel factors: 'off' (measured: applying them raised the
held-out error, module docstring), 'on', 'auto' (when they lower the runs' in-sample spread)."""
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


def point_of(
    w: Workload,
    est: Any,
    residual: float,
    factors: Mapping[str, KernelFactor] | None = None,
    *,
    label: str = "",
    measured_s: float = 0.0,
    predicted_s: float = 0.0,
) -> Point:
    """A measured run of workload `w` (its analytic estimate `est`, `residual` = log(measured /
    uncalibrated prediction)) as a calibration uses it: its configuration's key and coordinates, its
    device and host terms (the device term with `factors` applied as well)."""
    lf, lb = coords(est)
    device, host = step_terms(est)
    return Point(
        key=config_key(w), log_flops=lf, log_bytes=lb, residual=residual, device_s=device,
        device_factored_s=step_terms(est, factors)[0], host_s=host, on_cpu=w.gpu.vendor == "cpu",
        label=label, measured_s=measured_s, predicted_s=predicted_s,
    )  # fmt: skip


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
    """Whether the micro-benchmarks' kernel factors are applied (never with the default 'off')."""
    spread: float
    """Sample spread (log) of the runs' residuals after the kernel terms (0 with < 2 runs)."""
    spread_without_factors: float
    """The spread of the raw residuals (no kernel terms)."""

    @classmethod
    def of(cls, cal: Calibration, points: Sequence[Point], factors: str = KERNEL_FACTORS) -> FittedCalibration:
        """Fit the host factor; `factors`: 'off' never uses the kernel factors (the default,
        KERNEL_FACTORS), 'on' always (with two runs or more), 'auto' when they lower the runs'
        in-sample spread (bench/calibration_kernel_factors.py compares them)."""
        if factors not in ("auto", "on", "off"):
            raise ValueError(f"factors must be 'auto', 'on' or 'off', got {factors!r}")
        pts = tuple(points)
        host = cal.kernel_factors.get("host")
        prior = math.log(host.factor) if host is not None and host.factor > 0 else 0.0
        theta, spread = fit_theta(pts, prior, False)
        use = False
        if cal.kernel_factors and len(pts) >= 2 and factors != "off":
            theta_f, spread_f = fit_theta(pts, prior, True)
            if spread_f < spread or factors == "on":
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

    def local(self, key: str, log_flops: float, log_bytes: float, kernel: float) -> Local:
        """The runs near a query: n(x), C(x), the nearest distance, and their local spread pooled
        with the prior (weighted by locality; degrees of freedom n(x) - 1 + PRIOR_DOF)."""
        n, c, nearest = self.at(key, log_flops, log_bytes, kernel)
        if n <= 0:
            return Local(n=0.0, c=0.0, nearest=nearest, sd=SIGMA_PRIOR, dof=PRIOR_DOF)
        mean = c - kernel
        q = (key, log_flops, log_bytes)
        ss = sum(
            locality(distance(q, (p.key, p.log_flops, p.log_bytes))) * (u - mean) ** 2
            for p, u in zip(self.points, self.residuals(), strict=True)
        )
        dof_data = max(n - 1.0, 0.0)
        var = (ss + PRIOR_DOF * SIGMA_PRIOR**2) / (dof_data + PRIOR_DOF)
        return Local(n=n, c=c, nearest=nearest, sd=math.sqrt(var), dof=dof_data + PRIOR_DOF)

    def pooled_sd(self) -> tuple[float, float]:
        """(spread pooled with the prior, its degrees of freedom)."""
        dof_data = max(self.n - 2, 0)  # the offset and the host factor are fitted
        var = (dof_data * self.spread**2 + PRIOR_DOF * SIGMA_PRIOR**2) / (dof_data + PRIOR_DOF)
        return math.sqrt(var), dof_data + PRIOR_DOF


@dataclass(frozen=True, kw_only=True)
class Local:
    """What a calibration's runs say near one query."""

    n: float
    """n(x): locality-weighted runs."""
    c: float
    """C(x): the correction (log)."""
    nearest: float
    """Decades to the nearest run."""
    sd: float
    """Spread of the runs' residuals there, pooled with SIGMA_PRIOR."""
    dof: float


def shrunk_factors(factors: Mapping[str, KernelFactor]) -> dict[str, KernelFactor]:
    """Each kernel group's factor shrunk toward 1 like the end-to-end offset: log f x n/(n+k), k =
    `shrink_runs` of the benchmarks' spread (pooled with SIGMA_PRIOR worth PRIOR_DOF) and log f.
    The host factor (a prior of the fit, not a kernel) is kept as it is."""
    out = {}
    for group, f in factors.items():
        if group == "host" or f.factor <= 0:
            out[group] = f
            continue
        dof = max(f.n - 1, 0)
        sd = math.sqrt((dof * f.log_sd**2 + PRIOR_DOF * SIGMA_PRIOR**2) / (dof + PRIOR_DOF))
        log_f = math.log(f.factor)
        w = shrink_weight(float(f.n), shrink_runs(sd, log_f))
        out[group] = KernelFactor(factor=math.exp(w * log_f), log_sd=f.log_sd, n=f.n, source=f"{f.source} (shrunk, w {w:.2f})")
    return out


def shrink_runs(sd: float, correction: float) -> float:
    """k = σ² / τ² (module docstring): σ the runs' spread around their offset, τ the spread of
    hardware offsets, at least TAU_PRIOR and at least the offset these runs show; never below K_MIN."""
    tau = max(TAU_PRIOR, abs(correction))
    return max(K_MIN, sd**2 / tau**2)


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
    k_host: float | None
    """k of the host level (module docstring), None without one."""
    k_kind: float | None
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
            "shrink_runs_host": self.k_host,
            "shrink_runs_kind": self.k_kind,
            "log_shift": self.shift,
            "factor": math.exp(self.shift),
            "nearest_measured_decades": None if math.isinf(self.nearest_decades) else self.nearest_decades,
            "kernel_factors_used": self.kernel_factors_used,
            "ceilings": dict(self.ceilings),
        }

    def k_text(self) -> str:
        ks = [f"k {name} {k:.2g}" for name, k in (("host", self.k_host), ("kind", self.k_kind)) if k is not None]
        return ", ".join(ks)

    def assumption(self) -> str:
        who = f"this host's calibration ({self.host})" if self.host else f"an imported calibration of {self.accelerator_kind} ({', '.join(self.kind)})"
        near = "" if math.isinf(self.nearest_decades) else f", nearest measured run {self.nearest_decades:.1f} decades away"
        ceilings = "its measured ceilings in the kernel model, " if self.ceilings else ""
        return (
            f"calibrated on {who}: {ceilings}step time x{math.exp(self.shift):.3g}, trusted {self.weight:.0%} "
            f"({self.n_host + self.n_kind:.1f} measured runs near this configuration{near}; "
            f"w = n/(n+k), {self.k_text()}); --no-calibration for the uncalibrated prediction"
        )


def _data_half_width(sd: float, dof: float, n: float, confidence: float) -> float:
    """t(dof_data) s sqrt(1 + 1/n) from the runs' own spread s (the prior taken back out of the
    pooled `sd`, which has `dof` = dof_data + PRIOR_DOF); 0 with fewer than two runs."""
    dof_data = dof - PRIOR_DOF
    if dof_data < 1.0:
        return 0.0
    ss = max(0.0, sd**2 * dof - PRIOR_DOF * SIGMA_PRIOR**2)
    t = student_t_quantile(0.5 + confidence / 2.0, dof_data)
    return t * math.sqrt(ss / dof_data) * math.sqrt(1.0 + 1.0 / max(n, 1.0))


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

    def level(fc: FittedCalibration) -> Local:
        return fc.local(key, lf, lb, kernel_log_ratio(est, fc, on_cpu))

    kinds = [level(fc) for fc in kind]
    n_kind = sum(lv.n for lv in kinds)
    nearest = min((lv.nearest for lv in kinds), default=math.inf)
    c_kind = sum(lv.n * lv.c for lv in kinds) / n_kind if n_kind > 0 else 0.0
    var_kind = sum(lv.n * lv.sd**2 for lv in kinds) / n_kind if n_kind > 0 else SIGMA_PRIOR**2
    dof_kind = sum(lv.dof for lv in kinds) if kinds else PRIOR_DOF
    k_kind = shrink_runs(math.sqrt(var_kind), c_kind)
    w_kind = shrink_weight(n_kind, k_kind)
    mu = w_kind * c_kind
    n_host = w_host = 0.0
    k_host = None
    full, sd, dof = c_kind, math.sqrt(var_kind), dof_kind
    if host is not None:
        lh = level(host)
        nearest = min(nearest, lh.nearest)
        n_host = lh.n
        k_host = shrink_runs(lh.sd, lh.c - mu)
        w_host = shrink_weight(n_host, k_host)
        mu = mu + w_host * (lh.c - mu)
        if n_host > 0:
            full, sd, dof = lh.c, lh.sd, lh.dof
    trust = 1.0 - (1.0 - w_kind) * (1.0 - w_host)
    n_eff = n_host + n_kind
    t = student_t_quantile(0.5 + confidence / 2.0, dof)
    h_meas = t * sd * math.sqrt(1.0 + 1.0 / max(n_eff, 1.0)) if n_eff > 0 else 0.0
    centre = log_ratio + mu
    low = centre - ((1.0 - trust) * (log_ratio - log_low) + trust * h_meas)
    high = centre + ((1.0 - trust) * (log_high - log_ratio) + trust * h_meas)
    if n_eff > 0:  # never narrower than what the measured runs alone say (shrinkage's own error)
        low, high = min(low, log_ratio + full - h_meas), max(high, log_ratio + full + h_meas)
        # ... and never wider than the uncalibrated interval unless the runs' own spread says so
        # (the prior spread alone widened it: module docstring, bench/after_probe.py)
        h_data = _data_half_width(sd, dof, n_eff, confidence)
        low = max(low, min(centre - max(log_ratio - log_low, h_data), log_ratio + full))
        high = min(high, max(centre + max(log_high - log_ratio, h_data), log_ratio + full))
    used = [f for f in ([host] if host is not None else []) + list(kind)]
    return Adjustment(
        log_ratio=centre,
        log_low=low,
        log_high=high,
        shift=mu,
        weight=trust,
        n_host=n_host,
        n_kind=n_kind,
        k_host=k_host,
        k_kind=k_kind if kinds else None,
        nearest_decades=nearest,
        host=host.calibration.hardware_id if host is not None else None,
        kind=tuple(f.calibration.hardware_id for f in kind),
        accelerator_kind=(used[0].calibration.accelerator_kind if used else ""),
        kernel_factors_used=any(f.use_factors for f in used),
        ceilings=dict(ceilings or {}),
    )
