"""XLA's measured NCCL all-reduces on 8 H100s against the communication model: a reference check.

XLA's GPU cost model interpolates collective times from a table measured with
`//xla/tools:collective_perf_table_gen` (xla/service/gpu/model/collective_interpolator_data.h; the
tensorflow 2.20.0 wheel ships it beside the GEMM table that collectors/public/kernels_xla.py reads,
the same bytes as tensorflow/tensorflow@9bebee8e third_party/xla/xla/service/gpu/model/): per
compute capability (sm_90 only), collective, f32 buffer of 2^8-2^29 elements and replica groups of
2, 4 or 8 of the 8 devices, a `network_throughput_bytes_per_sec`. Read here as the buffer's bytes
over the call's time (the header does not say which bytes the tool divides; the all-reduce's
buffer is its input and its output alike, so only all-reduces are compared).

    python bench/xla_collective_check.py HEADER

For each group size and a few buffer sizes: XLA's time, the time `perfmodel.analytic.comm` gives
the same all-reduce on one node of H100-SXM (a reduce-scatter and an all-gather over the datasheet
NVLink bandwidth, 450 GB/s each way) and their ratio; then, per group size, the latency and bus
bandwidth of a latency + bandwidth fit to XLA's times. Under a second.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
_ENTRY = re.compile(
    r'opcode: "([a-z-]+)".*?element_type: (\w+)\s+dimensions: (\d+).*?num_replica_groups: (\d+)\s+'
    r"num_devices_per_group: (\d+).*?network_throughput_bytes_per_sec: (\d+)",
    re.S,
)
ELEMENT_BYTES = {"F32": 4, "BF16": 2, "F16": 2}
SHOWN_MIB = (1, 25, 256, 2048)
"""Buffer sizes printed (MiB): DDP's default 25 MB bucket among them."""


def read_collectives(text: str) -> pd.DataFrame:
    """Every entry of the header's table: collective, bytes, group size, throughput (bytes/s)."""
    rows = [
        {"op": op, "bytes": int(n) * ELEMENT_BYTES[et], "group": int(per), "groups": int(ng), "bytes_per_s": float(thr)}
        for op, et, n, ng, per, thr in _ENTRY.findall(text)
        if et in ELEMENT_BYTES
    ]
    if not rows:
        raise SystemExit("no collective entries with a throughput in the header")
    return pd.DataFrame(rows)


@functools.cache
def _one_node() -> Any:
    """A workload on one node of 8 H100-SXM (the model does not enter a collective's time)."""
    from perfmodel.config import load_workload

    return load_workload({"model": {"name": "llama2-7b"}, "training": {"tokens": 1e9},
                          "hardware": {"gpu": "H100-SXM", "num_gpus": 8}})  # fmt: skip


def model_seconds(buffer_bytes: float, group: int) -> float:
    """The communication model's all-reduce of `buffer_bytes` over `group` of 8 H100-SXM on one node."""
    from perfmodel.analytic.comm import collective_time_s

    return 2.0 * collective_time_s(_one_node(), buffer_bytes, group, 1)  # reduce-scatter + all-gather


def compare(table: pd.DataFrame) -> pd.DataFrame:
    """The all-reduces: XLA's seconds, the model's, and model / XLA."""
    ar = table[table["op"] == "all-reduce"].copy()
    ar["xla_s"] = ar["bytes"] / ar["bytes_per_s"]
    ar["model_s"] = [model_seconds(b, g) for b, g in zip(ar["bytes"], ar["group"], strict=True)]
    return ar.assign(ratio=ar["model_s"] / ar["xla_s"]).sort_values(["group", "bytes"]).reset_index(drop=True)


def alpha_beta(rows: pd.DataFrame) -> pd.DataFrame:
    """Per group size, XLA's all-reduces fitted as t = alpha + bytes x 2 (n-1)/n / busbw (least
    squares in log time over every buffer size): the per-call latency and the bus bandwidth a
    latency + bandwidth communication model would take, and the largest relative miss of that fit."""
    from scipy.optimize import least_squares

    out = []
    for group, g in rows.groupby("group"):
        x, t = g["bytes"].to_numpy(dtype=float), g["xla_s"].to_numpy(dtype=float)
        wire = 2.0 * (group - 1) / group
        fit = least_squares(
            lambda p, x=x, t=t, wire=wire: np.log(p[0] + x * wire / p[1]) - np.log(t), [2e-5, 2e11],
            bounds=([0.0, 1e9], [1.0, 1e13]), x_scale=[1e-5, 1e11],
        )  # fmt: skip
        alpha, busbw = fit.x
        out.append({"group": int(group), "alpha_s": alpha, "busbw_bytes_per_s": busbw,
                    "max_miss": float(np.max(np.abs(np.expm1(fit.fun))))})  # fmt: skip
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("header", type=Path, help="a copy of xla/service/gpu/model/collective_interpolator_data.h")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    rows = compare(read_collectives(args.header.read_text()))
    print(f"{len(rows)} all-reduces on sm_90 (f32 buffers, groups of 2, 4, 8 of 8 devices)\n")
    print("| group | buffer | XLA | model | model / XLA |\n|---:|---:|---:|---:|---:|")
    for group, g in rows.groupby("group"):
        for mib in SHOWN_MIB:  # the measured size nearest each shown size
            r = g.iloc[(g["bytes"] - mib * 2**20).abs().argmin()]
            print(f"| {group} | {r['bytes'] / 2**20:.0f} MiB | {r['xla_s'] * 1e3:.3f} ms | {r['model_s'] * 1e3:.3f} ms | {r['ratio']:.2f} |")
    big = rows[rows["bytes"] >= 2**24]
    print(f"\nmodel / XLA over the all-reduces of 16 MiB or more: median {big['ratio'].median():.2f} "
          f"({big['ratio'].min():.2f}-{big['ratio'].max():.2f})")  # fmt: skip
    print("\nlatency + bandwidth fit of XLA's all-reduces (t = alpha + bytes x 2 (n-1)/n / busbw, log least squares):\n")
    print("| group | alpha | bus bandwidth | largest miss |\n|---:|---:|---:|---:|")
    for _, r in alpha_beta(rows).iterrows():
        print(f"| {r['group']:.0f} | {r['alpha_s'] * 1e6:.1f} us | {r['busbw_bytes_per_s'] / 1e9:.0f} GB/s | {r['max_miss']:.0%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
