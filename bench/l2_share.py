"""How much of the kernel model's step time is memory-bound kernels small enough to stay in the L2
cache, and how the measured step compares with the kernel model there: the evidence for (or
against) the kernel efficiency's L2 term (`l2.*` in perfmodel/kernels/efficiency.json; README,
"How it works").

For every trainable row of the feature table: the step plan (perfmodel.analytic.step), each
memory-bound kernel's bytes per launch against the accelerator's L2 (`GPUSpec.l2_cache_mb`; 0 where
the catalog has none), and the share of the device time those kernels take (the *L2-sized share*).
Printed per source (eager single-GPU rows apart): rows, the median L2-sized share, and the median
log(measured / kernel-model step) of the rows with an L2-sized share above and below `--split`.
A kernel model that prices L2-sized kernels too slow shows a lower log ratio above the split.

    python bench/l2_share.py [--features datasets/features.parquet] [--fraction 0.5] [--split 0.2]

`--fraction`: a kernel is L2-sized when its bytes per launch are below this share of the L2.
A diagnostic, not a target: it changes no model."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from perfmodel.analytic.step import StepPlan
    from perfmodel.workload import Workload

ROOT = Path(__file__).resolve().parents[1]


def l2_sized_share(w: Workload, plan: StepPlan, fraction: float) -> float:
    """The share of the plan's device time (per optimizer step) in memory-bound kernels whose bytes
    per launch are below `fraction` of the accelerator's L2."""
    from perfmodel.kernels.efficiency import MEMORY_KINDS, kernel_times

    l2_bytes = float(getattr(w.gpu, "l2_cache_mb", 0.0) or 0.0) * 1e6
    accum = float(w.training.grad_accum_steps)
    times = kernel_times([k.work for k in plan.kernels], w.gpu)
    total = small = 0.0
    for k, kt in zip(plan.kernels, times, strict=True):
        seconds = kt.seconds * k.calls * (1.0 if k.per_step else accum)
        total += seconds
        per_launch = k.work.bytes_moved / max(float(k.work.launches), 1.0)
        if k.work.kind in MEMORY_KINDS and l2_bytes > 0 and per_launch < fraction * l2_bytes:
            small += seconds
    return small / total if total > 0 else 0.0


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    from perfmodel.analytic.step import plan_step
    from perfmodel.features import workload_from_row
    from perfmodel.learn.data import load_training_data
    from perfmodel.learn.evaluate import eager_single_gpu_mask
    from perfmodel.paths import features_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", default=str(features_path()))
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--split", type=float, default=0.2)
    args = parser.parse_args(argv)
    data = load_training_data(Path(args.features))
    kept = data.kept.reset_index(drop=True)
    eager = np.asarray(eager_single_gpu_mask(data.X), dtype=bool)
    shares, plans = [], {}
    for row in kept.to_dict("records"):
        w = workload_from_row(row)
        if w.model.arch == "gbm":
            shares.append(np.nan)
            continue
        key = repr(w)
        if key not in plans:
            plans[key] = l2_sized_share(w, plan_step(w), args.fraction)
        shares.append(plans[key])
    frame = pd.DataFrame(
        {
            "source": kept["source"].astype(str),
            "eager_1gpu": eager,
            "share": shares,
            "log_ratio": np.asarray(data.y, dtype=float),  # log(measured / kernel-model step)
        }
    ).dropna(subset=["share"])
    print(f"L2-sized: memory-bound kernels under {args.fraction:g} of the L2 a launch; split at a share of {args.split:g}")
    print()
    print("| source | eager 1 GPU | rows | median L2-sized share | median log ratio, share > split (rows) "
          "| median log ratio, share <= split (rows) |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|")
    for (source, eager_rows), g in frame.groupby(["source", "eager_1gpu"], sort=True):
        high, low = g[g["share"] > args.split], g[g["share"] <= args.split]

        def med(part: pd.DataFrame) -> str:
            return f"{part['log_ratio'].median():+.3f} ({len(part)})" if len(part) else "-"

        print(f"| {source} | {'yes' if eager_rows else 'no'} | {len(g)} | {g['share'].median():.2f} "
              f"| {med(high)} | {med(low)} |")  # fmt: skip
    both = frame[frame["eager_1gpu"]]
    rho = both["share"].corr(both["log_ratio"], method="spearman")
    print()
    print(f"eager single-GPU rows: {len(both)}; Spearman correlation of L2-sized share and log ratio: {rho:+.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
