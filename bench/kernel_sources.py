"""How the shipped kernel efficiency meets each kernel source it was fitted on (in sample): per source,
kind and variant, the median and 10th / 90th percentiles of predicted / measured time, the prediction
being what the source's benchmark measures (device time plus its fitted timing protocol,
perfmodel.kernels.fitting.measured_seconds). The held-out errors are `perfmodel kernels evaluate`'s.

    python bench/kernel_sources.py [--source PREFIX]

About a second on 2 cores.
"""

from __future__ import annotations

import argparse

import numpy as np

from perfmodel.kernels.efficiency import build_design, load_efficiency
from perfmodel.kernels.fitting import measured_seconds
from perfmodel.kernels.table import load_kernel_table, pairs_of_table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="", help="only sources whose name starts with this")
    args = parser.parse_args(argv)
    table = load_kernel_table()
    table = table[table["source"].str.startswith(args.source)].reset_index(drop=True)
    if table.empty:
        print(f"error: no kernel rows from a source starting with {args.source!r}")
        return 2
    design = build_design(pairs_of_table(table))
    predicted = measured_seconds(design, table["source"].to_numpy(), dict(load_efficiency().values))
    table = table.assign(ratio=predicted / table["time_s"].to_numpy())
    print("| source | kind | variant | rows | predicted / measured: median | p10 | p90 |")
    print("|---|---|---|---:|---:|---:|---:|")
    for (source, kind, variant), g in table.groupby(["source", "kernel_kind", "variant"]):
        q = np.quantile(g["ratio"].to_numpy(), [0.5, 0.1, 0.9])
        print(f"| {source} | {kind} | {variant} | {len(g):,} | {q[0]:.2f}x | {q[1]:.2f}x | {q[2]:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
