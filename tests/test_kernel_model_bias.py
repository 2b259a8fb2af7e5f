"""bench/kernel_model_bias.py: the kernel model alone's median step ratio by slices across sources."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.bench_scripts import load_bench

ROOT = Path(__file__).resolve().parents[1]


def _bench():  # type: ignore[no-untyped-def]
    return load_bench("kernel_model_bias")


def test_rows_fall_in_their_device_and_micro_batch_slices_and_the_ratio_is_the_median() -> None:
    bench = _bench()
    rows = pd.DataFrame({
        "source": ["a", "b", "a", "c", "a"],
        "gpu": ["A100-80GB", "A100-80GB", "H100-SXM", "H100-SXM", "cpu"],
        "num_gpus": [1, 1, 8, 16, 1],
        "num_nodes": [1, 1, pd.NA, 2, 1],
        "micro_batch_size": [1, 2, 4, 128, 1],
        "ratio": [0.5, 2.0, 0.8, 1.1, 9.0],
    })  # fmt: skip
    out = bench.slices(rows)
    assert "cpu" not in set(out["gpu"])  # a CPU's rows are not an accelerator's
    assert list(out["devices"]) == ["1 GPU", "1 GPU", "1 node", "multi-node"]
    assert [str(m) for m in out["micro_batch"]] == ["0-2", "0-2", "2-4", ">64"]
    table = bench.bias_table(out, ["devices"], min_rows=2)
    assert list(table.index) == ["1 GPU"]  # slices under min_rows are left out
    # the median of log ratios 0.5 and 2.0 is 0: ratio 1, two sources
    assert table.loc["1 GPU", "ratio"] == pytest.approx(1.0) and table.loc["1 GPU", "sources"] == 2
    assert np.isclose(out["log_ratio"].iloc[0], np.log(0.5))
