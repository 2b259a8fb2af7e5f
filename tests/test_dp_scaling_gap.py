"""bench/dp_scaling_gap.py: one-node multi-GPU rows paired with their one-GPU rows."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.bench_scripts import load_bench


def _rows() -> pd.DataFrame:
    base = {"source": "s", "model_name": "m", "gpu": "A100-80GB", "precision": "bf16", "micro_batch_size": 8,
            "seq_len": 512, "optimizer": None, "intra_gb_per_s": 300.0}  # fmt: skip
    return pd.DataFrame([
        {**base, "num_gpus": 1, "num_nodes": 1, "step_time_s": 1.00, "model_s": 0.90, "dp_comm_s": 0.0},
        {**base, "num_gpus": 8, "num_nodes": 1, "step_time_s": 1.20, "model_s": 0.95, "dp_comm_s": 0.05},
        {**base, "num_gpus": 16, "num_nodes": 2, "step_time_s": 1.50, "model_s": 1.00, "dp_comm_s": 0.10},
        {**base, "micro_batch_size": 4, "num_gpus": 8, "num_nodes": 1, "step_time_s": 0.7, "model_s": 0.6,
         "dp_comm_s": 0.05},
    ])  # fmt: skip


def test_a_multi_gpu_row_on_one_node_pairs_with_its_one_gpu_row_only() -> None:
    bench = load_bench("dp_scaling_gap")
    pairs = bench.scaling_pairs(_rows())
    # the 2-node row and the micro-batch 4 row (no one-GPU row of its own) are not paired
    assert len(pairs) == 1
    p = pairs.iloc[0]
    assert p["num_gpus"] == 8
    assert p["measured"] == pytest.approx(1.2) and p["modelled"] == pytest.approx(0.95 / 0.90)
    assert p["extra_over_comm"] == pytest.approx((1.2 - 1.0) / 0.05)
    table = bench.gap_table(pairs, ["gpu"], min_pairs=1)
    assert table.loc["A100-80GB", "pairs"] == 1 and table.loc["A100-80GB", "extra_over_comm"] == pytest.approx(4.0)
    assert bench.gap_table(pairs, ["gpu"], min_pairs=2).empty
