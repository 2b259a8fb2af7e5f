"""XLA's measured H100 GEMMs against the kernel model: tf32's share of its peak against bf16's on
the same shapes, and how near the shipped kernel model comes to each GEMM, by dtype and size. A
reference check: the table is not in the kernel fit (collectors/public/kernels_xla.py says why and
where the header is).

    pip download tensorflow==2.20.0 --no-deps -d /tmp/tf && unzip -o /tmp/tf/tensorflow-2.20.0-*.whl \\
        'tensorflow/include/tensorflow/compiler/xla/service/gpu/model/matmul_interpolator_data.h' -d /tmp/tf
    python bench/xla_gemm_check.py /tmp/tf/tensorflow/include/tensorflow/compiler/xla/service/gpu/model/matmul_interpolator_data.h

Prints the ratio's 10th / 50th / 90th percentile over the GEMMs of 2^33 FLOP or more, and the
median predicted / measured FLOP/s per dtype and FLOP band (a ratio under 1: the model prices the
GEMM slower than XLA ran it). Under a second.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
BIG_FLOP = 2.0**33
"""GEMMs at least this large: compute-bound on an H100, where a dtype's share of its peak is the
matmul ceiling's (smaller ones are latency- and wave-bound)."""
PEAKS_TFLOPS = {"bf16": 989.0, "tf32": 494.5}
"""The catalog's H100-SXM dense peaks."""


def gemm_frame(header: Path) -> pd.DataFrame:
    """One row per (b, m, n, k) of the table's sm_90 entries: FLOP and each dtype's measured FLOP/s."""
    from collectors.public.kernels_xla import DTYPES, read_matmul_table

    rows = [r for r in read_matmul_table(header.read_text()) if r["sm"] == "sm_90" and r["types"] in DTYPES]
    frame = pd.DataFrame(rows).assign(dtype=lambda f: f["types"].map(DTYPES))
    wide = frame.pivot_table(index=["b", "m", "n", "k"], columns="dtype", values="flops_per_s").reset_index()
    return wide.assign(flop=2.0 * wide["b"] * wide["m"] * wide["n"] * wide["k"])


def tf32_share_ratio(wide: pd.DataFrame) -> np.ndarray:
    """tf32's share of its peak over bf16's share of its peak, per GEMM of BIG_FLOP or more."""
    big = wide[wide["flop"] >= BIG_FLOP]
    return ((big["tf32"] / PEAKS_TFLOPS["tf32"]) / (big["bf16"] / PEAKS_TFLOPS["bf16"])).to_numpy()


def model_ratios(wide: pd.DataFrame) -> pd.DataFrame:
    """Predicted / measured FLOP/s of the shipped kernel model on each GEMM and dtype."""
    from perfmodel.catalog import get_gpu
    from perfmodel.kernels import work as W
    from perfmodel.kernels.efficiency import kernel_times

    h100 = get_gpu("H100-SXM")
    out = []
    for dtype in PEAKS_TFLOPS:
        works = [W.matmul_work(int(r.m), int(r.n), int(r.k), dtype, batch=int(r.b)) for r in wide.itertuples()]
        seconds = np.array([t.seconds for t in kernel_times(works, h100)])
        out.append(pd.DataFrame({"dtype": dtype, "flop": wide["flop"], "ratio": wide["flop"] / seconds / wide[dtype]}))
    frame = pd.concat(out, ignore_index=True)
    bands = [0, 2**30, 2**33, 2**36, np.inf]
    labels = ["< 2^30", "2^30-2^33", "2^33-2^36", ">= 2^36"]
    return frame.assign(flop_band=pd.cut(frame["flop"], bands, labels=labels, right=False))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("header", type=Path, help="a copy of xla/service/gpu/model/matmul_interpolator_data.h")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    wide = gemm_frame(args.header)
    ratio = tf32_share_ratio(wide)
    p10, p50, p90 = np.percentile(ratio, [10, 50, 90])
    print(f"{len(wide)} GEMMs on sm_90; tf32 share / bf16 share over the {len(ratio)} of 2^33 FLOP or more: "
          f"p10 {p10:.2f}, median {p50:.2f}, p90 {p90:.2f}")  # fmt: skip
    table = model_ratios(wide).groupby(["dtype", "flop_band"], observed=True)["ratio"].agg(["size", "median"])
    print("\nshipped kernel model, predicted / measured FLOP/s (median):\n")
    print("| dtype | FLOP | GEMMs | predicted / measured |\n|---|---|---:|---:|")
    for (dtype, band), r in table.iterrows():
        print(f"| {dtype} | {band} | {int(r['size'])} | {r['median']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
