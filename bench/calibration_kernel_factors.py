"""Do a calibration's per-kernel factors help? Leave-one-out on the committed CPU slice data.

    PYTHONPATH=. python bench/calibration_kernel_factors.py [--hardware-id cpu-2c-cba6f5] [--json]

The calibration `perfmodel collect --ray` would write for the committed collection of this
project's 2-core host (datasets/raw: its micro-benchmarks give the ceilings and the kernel
factors, its ok slice rows are the measured runs). Each run is predicted by a calibration fitted
on the *other* runs only (never on what is scored), and the held-out error is compared across
four ways of using the kernel factors (perfmodel.calibration.apply):

    off     the end-to-end offset alone (kernel factors never used)
    on      the factors always used: the correction at a query is log r(query) + the runs' mean
            residual after their own log r, so they move a query only as far as its kernel mix
            differs from the runs'
    shrunk  as 'on', each factor shrunk toward 1 like the offset (apply.shrunk_factors)
    auto    the rule before this measurement: used when they lower the runs' in-sample spread

Two splits: leave-one-run-out, and leave-one-architecture-out (every decoder, MLP, CNN, encoder,
GBM... held out at once: a configuration whose kernel mix the calibration slices do not have,
where kernel factors should matter most). Two uncalibrated bases: the shipped learned model
(which was trained on these very rows, so its residuals are small and in-sample for it) and the
analytic kernel model alone (`use_learned=False`, which has not seen them). The metric is the
median |log(predicted / measured)| over the held-out runs (lower is better).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import tempfile
import time
from collections import defaultdict

from perfmodel import paths, prediction
from perfmodel.calibration import record
from perfmodel.calibration.apply import FittedCalibration, shrink_runs, shrink_weight, shrunk_factors
from perfmodel.calibration.run import base_spec, calibrations_from_collection

MODES = ("off", "on", "shrunk", "auto")


def held_out_error(fc: FittedCalibration, p) -> float:
    """|log error| of point p predicted by fc (the shrunk correction, as `calibrate --show` computes it)."""
    lo = fc.local(p.key, p.log_flops, p.log_bytes, p.log_ratio(fc.theta, fc.use_factors))
    pred = p.predicted_s * math.exp(shrink_weight(lo.n, shrink_runs(lo.sd, lo.c)) * lo.c)
    return abs(math.log(pred / p.measured_s))


def evaluate(cal: record.Calibration, mode: str, use_learned: bool, *, leave_one_run_out: bool = True) -> dict:
    """The held-out errors of one way of using the factors (module docstring); without
    `leave_one_run_out` only the architecture split (a few fits instead of one per run)."""
    used = dataclasses.replace(cal, kernel_factors=shrunk_factors(cal.kernel_factors)) if mode == "shrunk" else cal
    fitted = prediction.fitted_calibration(used, base_spec(cal.fingerprint), use_learned=use_learned)
    pts = list(fitted.points)
    arch_of = {r.label: str(r.row.get("arch") or "?") for r in cal.runs}
    archs = [arch_of.get(p.label, "?") for p in pts]
    how = "auto" if mode == "auto" else ("off" if mode == "off" else "on")
    loro = [held_out_error(FittedCalibration.of(used, pts[:i] + pts[i + 1 :], factors=how), p)
            for i, p in enumerate(pts)] if leave_one_run_out else [math.nan]  # fmt: skip
    loao: dict[str, list[float]] = defaultdict(list)
    used_in: dict[str, bool] = {}
    for arch in sorted(set(archs)):
        others = [p for p, a in zip(pts, archs, strict=True) if a != arch]
        fc = FittedCalibration.of(used, others, factors=how)
        used_in[arch] = fc.use_factors
        loao[arch] = [held_out_error(fc, p) for p, a in zip(pts, archs, strict=True) if a == arch]
    every = [e for v in loao.values() for e in v]
    return {
        "runs": len(pts),
        "leave_one_run_out_median_abs_log_error": statistics.median(loro),
        "leave_one_arch_out_median_abs_log_error": statistics.median(every),
        "leave_one_arch_out_by_arch": {a: {"n": len(v), "median": statistics.median(v), "factors_used": used_in[a]}
                                       for a, v in loao.items()},  # fmt: skip
        "uncalibrated_median_abs_log_error": statistics.median(abs(math.log(p.predicted_s / p.measured_s)) for p in pts),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--hardware-id", default="cpu-2c-cba6f5")
    ap.add_argument("--calibration", help="Score this calibration file's own runs instead (e.g. one `perfmodel calibrate` wrote).")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.calibration:
        cal = record.read_calibration(args.calibration)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            written = calibrations_from_collection(paths.raw_dir(), [args.hardware_id], folder=tmp)
            if not written:
                print(f"no collection of {args.hardware_id} in {paths.raw_dir()}", file=sys.stderr)
                return 1
            cal = record.read_calibration(written[0])
    out: dict = {"hardware_id": cal.hardware_id,
                 "kernel_factors": {g: dataclasses.asdict(f) for g, f in cal.kernel_factors.items()},
                 "shrunk": {g: f.factor for g, f in shrunk_factors(cal.kernel_factors).items()}}  # fmt: skip
    for base, learned in (("learned", True), ("analytic", False)):
        out[base] = {mode: evaluate(cal, mode, learned) for mode in MODES}
    out["elapsed_s"] = time.perf_counter() - t0
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"{cal.hardware_id}: {out[base]['off']['runs']} runs; factors "
          + ", ".join(f"{g} x{f['factor']:.3g} (n {f['n']}, sd {f['log_sd']:.2f}; shrunk x{out['shrunk'][g]:.3g})"
                      for g, f in out["kernel_factors"].items()))  # fmt: skip
    print("| base | factors | uncalibrated | leave-one-run-out | leave-one-architecture-out | by architecture |")
    print("|---|---|---|---|---|---|")
    for base in ("learned", "analytic"):
        for mode in MODES:
            r = out[base][mode]
            by = ", ".join(f"{a} {v['median']:.3f}" for a, v in r["leave_one_arch_out_by_arch"].items())
            print(f"| {base} | {mode} | {r['uncalibrated_median_abs_log_error']:.3f} | "
                  f"{r['leave_one_run_out_median_abs_log_error']:.3f} | {r['leave_one_arch_out_median_abs_log_error']:.3f} | {by} |")  # fmt: skip
    print(f"({out['elapsed_s']:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
