"""Where the kernel model alone is biased: its step over the measured one (the `bound` method of
`perfmodel train`, no learned part), in sample over every trainable row of the feature table, by
slices that cut across sources. A slice whose median ratio sits off 1 in several sources at once is
a step term the plan is missing (or prices wrong) rather than one lab's setup; a slice off in one
source is that source's. A diagnostic: it changes no model.

    python bench/kernel_model_bias.py [--features datasets/features.parquet] [--min-rows 20]

Tables (median of predicted / measured step, rows, sources):
- devices (1 GPU / 1 node / multi-node) x micro-batch size;
- precision x accelerator, for fp32 and tf32 (no measured ceiling: the matmul efficiency is the
  spec function's);
- source x devices.
~10 s on the 2-core host.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
MICRO_BATCH_EDGES = (0, 2, 4, 8, 16, 64, np.inf)


def slices(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows (scored: `ratio` = kernel-model step / measured) with their slice columns."""
    out = rows[rows["gpu"] != "cpu"].copy()
    nodes = out["num_nodes"].fillna(1).astype(int)
    out["devices"] = np.where(out["num_gpus"] <= 1, "1 GPU", np.where(nodes > 1, "multi-node", "1 node"))
    edges = list(MICRO_BATCH_EDGES)
    labels = [f"{lo:g}-{hi:g}" if hi < np.inf else f">{lo:g}" for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    out["micro_batch"] = pd.cut(out["micro_batch_size"].astype(float), edges, labels=labels)
    out["log_ratio"] = np.log(out["ratio"].astype(float))
    return out


def bias_table(rows: pd.DataFrame, by: list[str], min_rows: int) -> pd.DataFrame:
    g = rows.groupby(by, observed=True).agg(
        rows=("log_ratio", "size"), sources=("source", "nunique"), ratio=("log_ratio", lambda v: float(np.exp(np.median(v))))
    )
    return g[g["rows"] >= min_rows].round({"ratio": 3})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--features", type=Path, default=ROOT / "datasets/features.parquet")
    ap.add_argument("--min-rows", type=int, default=20)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "bench"))
    from interval_diagnostics import markdown
    from kernel_fit_steps import scored_rows

    from perfmodel.kernels.efficiency import load_efficiency

    rows = slices(scored_rows(pd.read_parquet(args.features), load_efficiency()))
    print("kernel model alone over the training rows, in sample: median predicted / measured step\n")
    fp = rows[rows["precision"].isin(["fp32", "tf32"])]
    tables = (
        bias_table(rows, ["devices", "micro_batch"], args.min_rows),
        bias_table(fp, ["precision", "gpu"], max(3, args.min_rows // 4)),
        bias_table(rows, ["source", "devices"], args.min_rows),
    )
    print("\n\n".join(markdown(t.reset_index()) for t in tables))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
