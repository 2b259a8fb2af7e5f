"""The kernel plan's NCHW <-> NHWC transpositions against timm's own NCHW / NHWC pairs: for every
model of timm's training sweep (one RTX 3090, fp16 autocast, PyTorch 1.10-1.12) measured in both
memory formats, the kernel model's step-time ratio NCHW / channels_last beside the measured one.

    python bench/channels_last.py [--csv ../shared/data/public/timm_benchmark_train.csv]

The NHWC rows are not training rows (collectors.public.timm keeps NCHW): this is a check of the
plan's transposition term (perfmodel.analytic.step.layout_transposed) on data the model never fits.
The rows are the committed NCHW rows of datasets/public/timm_benchmark_train.parquet; a torchvision
ResNet is given its exact parameter count (timm's CSV rounds it to 10 k) so that it is planned layer
by layer. Every other network keeps its representative-convolution plan, which has no transposition
term (planned ratio 1): the table shows by family what the layout does to them (grouped and
depthwise convolutions of RegNets and NFNets ran 2-2.5x slower in NHWC on these PyTorch versions).
~1 min on 2 cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from collectors.public import default_public_dir
from perfmodel.analytic.activations import RESNET_STAGES, ResNetLayout
from perfmodel.analytic.roofline import estimate_neural
from perfmodel.codec import workload_from_row
from perfmodel.paths import project_root


def torchvision_params(depth: int, classes: int = 1000) -> int:
    """Parameters of torchvision's ResNet of this depth, which timm's resnetNN builds: its layout's
    convolutions and BatchNorms plus the classifier (perfmodel.analytic.activations)."""
    stages, bottleneck = RESNET_STAGES[depth]
    layout = ResNetLayout(stages=stages, bottleneck=bottleneck, classes=classes)
    return layout.params_without_classifier() + (layout.features + 1) * classes


TORCHVISION_PARAMS = {f"resnet{depth}": torchvision_params(depth) for depth in RESNET_STAGES}
"""timm model name -> exact parameter count (resnet50: 25,557,032, torchvision's model table)."""


def measured_pairs(csv: Path) -> pd.DataFrame:
    """NCHW / NHWC step-time ratio per (model, torch version) of the sweep's latest files."""
    raw = pd.read_csv(csv, low_memory=False)
    raw = raw[raw["in_latest_version"].astype(str) == "True"]
    key = ["model", "torch_version_tag"]
    pairs = raw[raw["memory_layout"] == "nchw"].merge(raw[raw["memory_layout"] == "nhwc"], on=key, suffixes=("_c", "_h"))
    pairs["measured"] = pairs["step_time_s_c"] / pairs["step_time_s_h"]
    pairs["torch_version"] = pairs["torch_version_tag"].str.replace("pt1", "1.", regex=False)
    return pairs[["model", "torch_version", "measured"]]


def planned_ratios(rows: pd.DataFrame) -> pd.DataFrame:
    out = []
    for row in rows.to_dict("records"):
        if row["model_name"] in TORCHVISION_PARAMS:
            row["params_total"] = TORCHVISION_PARAMS[row["model_name"]]
        w = workload_from_row(row)
        nhwc = dataclasses.replace(w, training=dataclasses.replace(w.training, channels_last=True))
        out.append({
            "model": row["model_name"], "family": row["model_family"], "torch_version": str(row["torch_version"]),
            "planned": estimate_neural(w).t_bound_s / estimate_neural(nhwc).t_bound_s,
        })  # fmt: skip
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=default_public_dir() / "timm_benchmark_train.csv")
    args = parser.parse_args(argv)
    if not args.csv.is_file():
        print(f"error: {args.csv} not found (the shared public data)", file=sys.stderr)
        return 2
    rows = pd.read_parquet(project_root() / "datasets" / "public" / "timm_benchmark_train.parquet")
    both = planned_ratios(rows).merge(measured_pairs(args.csv), on=["model", "torch_version"])
    both["log_error"] = np.log(both["planned"] / both["measured"])
    table = both.groupby("family").agg(
        pairs=("model", "size"), measured=("measured", "median"), planned=("planned", "median"),
        median_abs_log_error=("log_error", lambda s: s.abs().median()),
    )  # fmt: skip
    print(table.round(3).to_string())
    resnets = both[both["model"].isin(list(TORCHVISION_PARAMS))]
    print("\ntorchvision ResNets (planned layer by layer, with the transpositions):")
    print(resnets.groupby("model")[["measured", "planned"]].median().round(3).to_string())
    print(
        f"{len(resnets)} pairs: median |log(planned / measured)| {resnets['log_error'].abs().median():.3f} "
        f"(median log error {resnets['log_error'].median():+.3f}); taking the layout to change nothing: "
        f"{np.log(resnets['measured']).abs().median():.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
