"""The timm model table perfmodel resolves `timm/<name>` from (perfmodel/catalog/timm_models.csv).

One row per timm model of the RTX 3090 training sweep that the feature table costs as a CNN, MLP or
hybrid transformer (the rows of datasets/public/timm_benchmark_train.parquet that
collectors.public.timm normalised: arch cnn / mlp / other; the plain ViTs and DeiTs, arch encoder,
are costed from their dims and left out), at the image size the sweep trained it at, with what the
plan reads: parameters, forward GFLOPs and what it saves for backward per image, and the kernel
census's layer counts (gemm_layers; attention, depthwise and grouped convolutions). A model the
sweep trained at two sizes keeps the smaller. The numbers are the feature table's, so a prediction
for `timm/<name>` is costed exactly as the model was when it was trained on.

    make timm-catalog    # python -m collectors.public.timm_catalog, after `perfmodel dataset import-public`
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ROWS = ROOT / "datasets" / "public" / "timm_benchmark_train.parquet"
TABLE = ROOT / "perfmodel" / "catalog" / "timm_models.csv"
COLUMNS = (
    "model",
    "img_size",
    "family",
    "arch",
    "params_total",
    "forward_gflops_per_sample",
    "activation_mb_per_sample",
    "gemm_layers",
    "attention_layers",
    "attention_gflops_per_sample",
    "attention_mscores_per_sample",
    "depthwise_layers",
    "depthwise_gflops_per_sample",
    "depthwise_melements_per_sample",
    "grouped_layers",
    "grouped_gflops_per_sample",
    "grouped_melements_per_sample",
)
_IMAGE = re.compile(r"timm \S+ at (\d+) px")


def catalog_frame(rows: Any) -> Any:
    """The table (a DataFrame in COLUMNS order, sorted by model) from the timm feature rows."""
    # pandas: an opt-in collector step, never on the prediction path
    import pandas as pd

    rows = rows[rows["arch"].isin(["cnn", "mlp", "other"])].copy()
    rows["img_size"] = [int(m.group(1)) if (m := _IMAGE.search(str(n))) else 0 for n in rows["notes"]]
    rows = rows[rows["img_size"] > 0].rename(columns={"model_name": "model", "model_family": "family"})
    rows = rows.sort_values(["model", "img_size"]).drop_duplicates("model", keep="first")
    out = pd.DataFrame({c: rows[c] if c in rows else 0 for c in COLUMNS})
    counts = [c for c in COLUMNS if c.endswith("_layers")] + ["params_total"]
    out[counts] = out[counts].fillna(0).astype("int64")
    for c in COLUMNS[4:]:
        if c not in counts:
            out[c] = out[c].astype("float64").fillna(0.0)
    return out.reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=str(ROWS))
    parser.add_argument("--out", default=str(TABLE))
    args = parser.parse_args(argv)
    # pandas: an opt-in collector step, never on the prediction path
    import pandas as pd

    table = catalog_frame(pd.read_parquet(args.rows))
    table.to_csv(args.out, index=False, float_format="%.6g")
    print(f"{len(table)} timm models -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
