"""stas00/ml-engineering: the Llama-3.1-8B H200-vs-B200 study and the MAMF matmul table.

Llama-3.1-8B study: every row is skipped. It publishes model TFLOPS/GPU (causal attention,
recompute excluded) and peak memory, but neither the step time, the tokens/s nor the gradient
accumulation; turning TFLOPS into a step time would need the study's exact FLOP formula and the
global batch, which the text does not give. (Its peak-memory numbers would be useful once the
schema accepts rows without a step time.)

MAMF (Maximum Achievable Matmul FLOPS) is a measured ceiling, not training: it is exported by
`export_mamf_matmul` to datasets/public/mamf_matmul.parquet (gpu, dtype, mamf_tflops,
theoretical_tflops, citation, plus accelerator_raw, shape and torch version). The source CSV
labels every row "FP8", but the file holds two tables in order (efficiency descending in each,
each accelerator once per table):
the first is BF16 (its peaks are the BF16 dense peaks, e.g. A100 312, H100 989, and the A100 has
no FP8), the second FP8 (H100 1979, B200 4500). dtype is set from that table order.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from collectors.public._common import ImportResult, RowSink, parse_number, read_csv

MAMF_GPU_KEYS: dict[str, str | None] = {
    "Intel Gaudi 2": "Gaudi2",
    "Intel Gaudi 3": "Gaudi3",
    "NVIDIA A100 SXM": "A100-80GB",  # SXM A100 40GB and 80GB share clocks and peaks (400 W)
    "NVIDIA A100 PCIe": None,  # 40GB (250 W) or 80GB (300 W) not stated
    "NVIDIA GH200 SXM": "GH200",
    "NVIDIA H100 SXM": "H100-SXM",
    "NVIDIA H200 SXM": "H200",
    "NVIDIA B200 SXM": "B200",
    "NVIDIA B300 SXM": "B300",
    "NVIDIA GB200 SXM": "GB200",
    "AMD MI300X": "MI300X",
    "AMD MI325X": "MI325X",
    "AMD MI355X": None,
}
MAMF_COLUMNS = (
    "gpu",
    "dtype",
    "mamf_tflops",
    "theoretical_tflops",
    "citation",
    "accelerator_raw",
    "best_shape_mxnxk",
    "torch_version",
    "notes",
)


def import_ml_engineering_llama31_8b_h200_vs_b200(path: str | Path) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    sink.skip("TFLOPS/GPU and memory only: no step time, tokens/s or global batch", len(read_csv(path)))
    return sink.result()


def import_ml_engineering_mamf_matmul(path: str | Path) -> ImportResult:
    """Matmul ceilings are not training rows (see export_mamf_matmul)."""
    path = Path(path)
    sink = RowSink(path.stem)
    sink.skip("matmul ceiling, not training (exported to mamf_matmul.parquet)", len(read_csv(path)))
    return sink.result()


def read_mamf_matmul(path: str | Path) -> pd.DataFrame:
    """The MAMF table as measured ceilings with catalog GPU keys."""
    frame = read_csv(path)
    efficiency = [parse_number(v) for v in frame["efficiency"]]
    table = 0
    seen: set[str] = set()
    rows = []
    for i, r in frame.iterrows():
        rises = (
            i
            and efficiency[i] is not None
            and efficiency[i - 1] is not None
            and efficiency[i] > efficiency[i - 1]
        )  # type: ignore[operator]
        if (
            rises or r["accelerator"] in seen
        ):  # a new table starts: efficiency resets or an accelerator repeats
            table, seen = table + 1, set()
        seen.add(r["accelerator"])
        mamf = parse_number(r["mamf_tflops"])
        if mamf is None:
            continue
        rows.append(
            {
                "gpu": MAMF_GPU_KEYS.get(r["accelerator"]),
                "dtype": ("bf16", "fp8")[min(table, 1)],
                "mamf_tflops": mamf,
                "theoretical_tflops": parse_number(r["theoretical_tflops"]),
                "citation": r["source"],
                "accelerator_raw": r["accelerator"],
                "best_shape_mxnxk": r["best_shape_MxNxK"],
                "torch_version": r["torch_version"],
                "notes": r["notes"],
            }
        )
    out = pd.DataFrame(rows, columns=list(MAMF_COLUMNS))
    for col in ("gpu", "dtype", "citation", "accelerator_raw", "best_shape_mxnxk", "torch_version", "notes"):
        out[col] = out[col].astype("string")
    return out


def export_mamf_matmul(path: str | Path, out_dir: str | Path) -> Path:
    """Write datasets/public/mamf_matmul.parquet; returns its path."""
    out = Path(out_dir) / "mamf_matmul.parquet"
    read_mamf_matmul(path).to_parquet(out, index=False, compression="zstd")
    return out
