"""How much of a kernel-level held-out error is the fit, not the model: `perfmodel kernels evaluate`
again with the efficiency of each held-out fold fitted without a few kernel-table rows more.

Each perturbation drops every `--every`-th row of the kernel table (a different offset each time)
before the folds are fitted, then predicts every row of each held-out accelerator as
`perfmodel.kernels.evaluate` does (the same table, measured ceilings removed). Per kernel kind: the
median error of the unperturbed folds and the lowest and highest over the perturbations. A
kind whose range spans several points cannot show a change smaller than that (docs/accuracy-history.md:
changes tried and not kept). A diagnostic: it changes no model.

    python bench/kernel_eval_spread.py [--perturbations 3] [--every 50]

~1.5 min per perturbation on 2 cores (a kernel fit per held-out accelerator).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def perturbed(table: pd.DataFrame, every: int, offset: int) -> pd.DataFrame:
    """The table without every `every`-th row, starting at `offset`."""
    keep = (np.arange(len(table)) % every) != offset % every
    return table[keep].reset_index(drop=True)


def medians_by_kind(rows: pd.DataFrame) -> pd.Series:
    """Median held-out error per kernel kind (the 'all' rows of docs/kernels.md)."""
    return rows.groupby("kernel_kind")["ape"].median()


def spread(
    table: pd.DataFrame, *, perturbations: int, every: int, gpus: list[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> pd.DataFrame:
    """Per kind: rows, the unperturbed median error and the min / max over the perturbations
    (`gpus`: the held-out accelerators, default every one but the CPU)."""
    from perfmodel.kernels import fitting
    from perfmodel.kernels.evaluate import held_out_accelerators, held_out_predictions

    gpus = held_out_accelerators(table) if gpus is None else list(gpus)
    base = held_out_predictions(table, gpus=gpus)
    runs = []
    for p in range(perturbations):
        smaller = perturbed(table, every, 7 + 13 * p)
        fitted = {g: fitting.fit_efficiency(smaller, exclude_gpus=(g,)) for g in gpus}
        runs.append(medians_by_kind(held_out_predictions(table, gpus=gpus, fitted=fitted)))
        if progress is not None:
            progress(p + 1)
    by_run = pd.concat(runs, axis=1)
    return pd.DataFrame(
        {
            "rows": base.groupby("kernel_kind").size(),
            "median_error": medians_by_kind(base),
            "perturbed_low": by_run.min(axis=1),
            "perturbed_high": by_run.max(axis=1),
        }
    ).reset_index()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--perturbations", type=int, default=3)
    ap.add_argument("--every", type=int, default=50, help="drop every N-th kernel-table row per perturbation")
    ap.add_argument("--gpu", action="append", help="hold out only this accelerator (repeatable; default every one)")
    args = ap.parse_args(argv)
    if args.perturbations < 1 or args.every < 2:
        ap.error("--perturbations must be >= 1 and --every >= 2")
    sys.path.insert(0, str(ROOT))
    from perfmodel.kernels.table import load_kernel_table

    start = time.monotonic()
    table = load_kernel_table()
    out = spread(table, perturbations=args.perturbations, every=args.every, gpus=args.gpu,
                 progress=lambda p: print(f"perturbation {p}/{args.perturbations} done", file=sys.stderr))  # fmt: skip
    print(f"Held-out median error per kernel kind, and over {args.perturbations} fits without every "
          f"{args.every}th kernel-table row ({time.monotonic() - start:.0f} s):\n")  # fmt: skip
    print("| kind | rows | median error | without a few rows |\n|---|---:|---:|---:|")
    for _, r in out.iterrows():
        print(f"| {r['kernel_kind']} | {r['rows']} | {r['median_error']:.1%} | "
              f"{r['perturbed_low']:.1%}-{r['perturbed_high']:.1%} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
