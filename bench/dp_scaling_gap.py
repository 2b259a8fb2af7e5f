"""What one node adds to a step, measured against what the plan prices: each multi-GPU row on one
node that has a one-GPU row of the same source, model, accelerator, precision, micro-batch, sequence
and optimizer (weak scaling: the per-GPU work is the same) is paired with it. A diagnostic: it
changes no model.

    python bench/dp_scaling_gap.py [--features datasets/features.parquet] [--min-pairs 3]

Per accelerator and GPU count: the measured step at N GPUs over the step at 1 (median), the kernel
model's same ratio, and the measured extra time (step at N minus step at 1) over the data-parallel
communication the plan prices (`comm.dp_time_s`, before any overlap with the backward). Where that
last ratio is well above 1, one node costs more than its collectives at the link's datasheet
bandwidth; where the measured ratio is near the kernel model's, the plan has it. ~15 s on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
PAIR_KEY = ("source", "model_name", "gpu", "precision", "micro_batch_size", "seq_len", "optimizer")
"""Columns a multi-GPU row and its one-GPU row share (weak scaling: the same work per GPU)."""


def planned(table: pd.DataFrame) -> pd.DataFrame:
    """The trainable rows with the kernel model's step (`model_s`), its data-parallel communication
    time (`dp_comm_s`) and the link bandwidth (`intra_gb_per_s`)."""
    from perfmodel.features import planned_rows, rows_to_training_data

    _, _, kept, _ = rows_to_training_data(table)
    plans = planned_rows(table)
    return kept.assign(
        model_s=[e.t_bound_s for _, e in plans],
        dp_comm_s=[e.comm.dp_time_s for _, e in plans],
        intra_gb_per_s=[w.gpu.intra_node_bandwidth_gb_per_s for w, _ in plans],
    )


def scaling_pairs(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (configuration, GPU count > 1) on one node with a one-GPU row of the same
    configuration: measured and modelled step ratios, and the extra time over the priced
    communication."""
    key = list(PAIR_KEY)
    one_node = rows[rows["num_nodes"].fillna(1).astype(int) <= 1]
    # a missing optimizer or sequence length is a value of its own (dropna=False; merge matches it)
    single = one_node[one_node["num_gpus"] == 1].groupby(key, dropna=False).agg(step_1=("step_time_s", "median"), model_1=("model_s", "median"))
    multi = (
        one_node[one_node["num_gpus"] > 1]
        .groupby([*key, "num_gpus"], dropna=False)
        .agg(step_n=("step_time_s", "median"), model_n=("model_s", "median"), dp_comm_s=("dp_comm_s", "median"),
             intra_gb_per_s=("intra_gb_per_s", "first"))  # fmt: skip
        .reset_index()
    )
    pairs = multi.merge(single.reset_index(), on=key)
    return pairs.assign(
        measured=pairs["step_n"] / pairs["step_1"],
        modelled=pairs["model_n"] / pairs["model_1"],
        extra_over_comm=(pairs["step_n"] - pairs["step_1"]) / pairs["dp_comm_s"].where(pairs["dp_comm_s"] > 0),
    )


def gap_table(pairs: pd.DataFrame, by: list[str], min_pairs: int) -> pd.DataFrame:
    """Medians per group (groups of at least `min_pairs` pairs)."""
    links = {"link_gb_per_s": ("intra_gb_per_s", "first")} if "gpu" in by else {}  # one accelerator's link
    g = pairs.groupby(by).agg(
        pairs=("measured", "size"),
        **links,
        measured=("measured", "median"),
        modelled=("modelled", "median"),
        extra_over_comm=("extra_over_comm", "median"),
    )
    return g[g["pairs"] >= min_pairs].round({"measured": 2, "modelled": 2, "extra_over_comm": 1})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--features", type=Path, default=ROOT / "datasets/features.parquet")
    ap.add_argument("--min-pairs", type=int, default=3)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "bench"))
    from interval_diagnostics import markdown

    pairs = scaling_pairs(planned(pd.read_parquet(args.features)))
    print(f"{len(pairs)} weak-scaling pairs on one node; medians of step(N) / step(1), measured and kernel model,")
    print("and of (step(N) - step(1)) / the data-parallel communication the plan prices\n")
    print(markdown(gap_table(pairs, ["source", "num_gpus"], args.min_pairs).reset_index()))
    print()
    print(markdown(gap_table(pairs, ["gpu"], args.min_pairs).reset_index()))
    overall = pairs["extra_over_comm"].replace([np.inf, -np.inf], np.nan).dropna()
    print(f"\nall pairs: measured {pairs['measured'].median():.2f}, kernel model {pairs['modelled'].median():.2f}; "
          f"extra over priced communication {overall.median():.1f} (quartiles {overall.quantile(0.25):.1f}-"
          f"{overall.quantile(0.75):.1f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
