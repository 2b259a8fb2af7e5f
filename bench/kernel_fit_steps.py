"""What a kernel fit does to the training steps: the kernel model alone (the `bound` method of
`perfmodel train`, no learned part) over every trainable row of the feature table, per source, for
one or more kernel-efficiency files side by side.

A kernel-level refit (`perfmodel kernels fit`) can improve the held-out kernel errors of
`docs/kernels.md` and still price the training steps worse: its shared terms (streaming, matmul,
L2) move together. This prints, in seconds (two files: 8.9 s on the 2-core host), what `perfmodel train` would show only after
three minutes, in sample (no folds): the median |kernel-model step / measured step - 1| per source
and over all rows.

    python bench/kernel_fit_steps.py [EFFICIENCY.json ...] [--features datasets/features.parquet]
    python bench/kernel_fit_steps.py --source peft_method_comparison    # each of its rows

Without a file: the shipped `perfmodel/kernels/efficiency.json`. `--source NAME` prints that source's
rows one by one instead: what the row is and the kernel model's step over the measured one per file
(the ratio that a step term moves: it is how a missing term shows). A diagnostic: it changes no model."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def scored_rows(table: pd.DataFrame, efficiency: Any) -> pd.DataFrame:
    """The trainable rows of the feature table with `ratio`, the kernel-model step over the measured
    one with `efficiency` (an EfficiencyParams)."""
    from perfmodel.features import rows_to_training_data

    _, y, kept, _ = rows_to_training_data(table, efficiency=efficiency)
    # y = log(measured / kernel-model step)
    return kept.reset_index(drop=True).assign(ratio=np.exp(-np.asarray(y)))


def step_errors(table: pd.DataFrame, efficiency: Any) -> pd.DataFrame:
    """One row per trainable row of the feature table: its source and the kernel model's absolute
    step-time error with `efficiency`."""
    rows = scored_rows(table, efficiency)
    return pd.DataFrame({"source": rows["source"].astype(str).to_numpy(), "ape": np.abs(rows["ratio"].to_numpy() - 1.0)})


ROW_COLUMNS = ("model_name", "gpu", "num_gpus", "framework", "torch_compile", "attention_kernel", "precision",
               "micro_batch_size", "seq_len", "activation_checkpointing", "lora_r", "trainable_fraction",
               "step_time_s")  # fmt: skip
"""What `--source` shows of each row (feature-table columns)."""


def row_ratios(table: pd.DataFrame, efficiency: Any, source: str) -> pd.DataFrame:
    """The rows of `source`: ROW_COLUMNS and `ratio`, the kernel-model step over the measured one."""
    rows = scored_rows(table, efficiency)
    mine = rows[rows["source"].astype(str) == source]
    return mine[[c for c in ROW_COLUMNS if c in rows.columns] + ["ratio"]].reset_index(drop=True)


def summary(errors: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Median error (%) per source and over all rows ('all'), one column per efficiency file, after
    a 'rows' column (every file scores the same rows)."""
    first = next(iter(errors.values()))
    counts = pd.concat([pd.Series({"all": len(first)}), first.groupby("source").size()])
    columns = {"rows": counts}
    for name, frame in errors.items():
        columns[name] = pd.concat([pd.Series({"all": frame["ape"].median()}), frame.groupby("source")["ape"].median()]) * 100.0
    return pd.DataFrame(columns)


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT))
    from perfmodel.kernels.efficiency import PARAMS_PATH, load_efficiency
    from perfmodel.paths import features_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("efficiency", nargs="*", help="kernel-efficiency JSON files (default: the shipped one)")
    parser.add_argument("--features", default=str(features_path()))
    parser.add_argument("--source", help="print this source's rows one by one (kernel-model / measured step)")
    args = parser.parse_args(argv)
    files = [Path(f) for f in args.efficiency] or [PARAMS_PATH]
    for f in files:
        if not f.is_file():
            print(f"error: no efficiency file {f}", file=sys.stderr)
            return 2
    table = pd.read_parquet(args.features)
    short = len({f.name for f in files}) == len(files)
    if args.source:
        return _print_rows(table, files, args.source, short)
    errors = {(f.name if short else str(f)): step_errors(table, load_efficiency(f)) for f in files}
    out = summary(errors)
    print("kernel model alone over the training rows, in sample: median |predicted / measured step - 1|, %")
    print()
    print("| source | rows | " + " | ".join(out.columns[1:]) + " |")
    print("|---|---:|" + "---:|" * (len(out.columns) - 1))
    for source, r in out.iterrows():
        print(f"| {source} | {int(r['rows'])} | " + " | ".join(f"{r[c]:.1f}" for c in out.columns[1:]) + " |")
    return 0


def _print_rows(table: pd.DataFrame, files: list[Path], source: str, short: bool) -> int:
    from perfmodel.kernels.efficiency import load_efficiency

    if source not in set(table["source"].astype(str)):
        print(f"error: no source {source!r} in the feature table", file=sys.stderr)
        return 2
    frames = {(f.name if short else str(f)): row_ratios(table, load_efficiency(f), source) for f in files}
    first = next(iter(frames.values()))
    cols = list(first.columns[:-1])
    print(f"{source}: kernel-model step / measured step per row, in sample")
    print()
    print("| " + " | ".join(cols + list(frames)) + " |")
    print("|" + "---|" * len(cols) + "---:|" * len(frames))
    for i, r in first.iterrows():
        cells = ["" if pd.isna(r[c]) else (f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c])) for c in cols]
        print("| " + " | ".join(cells + [f"{f.loc[i, 'ratio']:.2f}" for f in frames.values()]) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
