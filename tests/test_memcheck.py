"""The analytic memory model against the committed published peak-memory measurements."""

from __future__ import annotations

from collections import Counter

import pytest

from collectors.public.memory import import_ml_engineering_memory
from perfmodel.memcheck import DEFAULT_PATH, check_memory


def test_memory_model_error_on_published_peaks_stays_within_stated_bounds():
    result = check_memory(DEFAULT_PATH)
    table = result.table
    assert len(table) >= 20
    assert (table["citation"].str.len() > 10).all()
    assert table["error_pct"].to_numpy() == pytest.approx(
        (table["predicted_gb"] / table["peak_memory_gb"] - 1).to_numpy() * 100
    )
    # README states ~29% median / ~46% p90; a change that makes it much worse must be noticed.
    assert result.median_abs_error_pct < 40
    assert result.p90_abs_error_pct < 60


def test_memory_grows_with_sequence_length_like_the_measurements():
    table = check_memory(DEFAULT_PATH).table
    h200 = table[(table["gpu"] == "H200")].sort_values("seq_len")
    assert h200["predicted_gb"].is_monotonic_increasing
    assert h200["peak_memory_gb"].is_monotonic_increasing


def test_ml_engineering_memory_rows_parse_units(tmp_path):
    csv = tmp_path / "ml.csv"
    csv.write_text(
        "source,table,model,gpu,n_gpus,precision,framework,attention_kernel,config,micro_batch_size,seq_len,bucket,"
        "full_attn_share_of_step,tflops_per_gpu,mfu,peak_mem_gib,published_speedup_b200_over_h200,notes\n"
        "repo@abc:README.md,Peak memory,meta-llama/Llama-3.1-8B,H200,8,bf16,DS,FA3,ZeRO-3,1,32K,,,,,25.8,,\n"
        "repo@abc:README.md,Results,meta-llama/Llama-3.1-8B,H200,8,bf16,DS,FA3,ZeRO-3,1,8K,,,141,14%,,,\n"
    )
    skipped: Counter[str] = Counter()
    rows = import_ml_engineering_memory(csv, skipped)
    assert len(rows) == 1
    assert rows[0]["seq_len"] == 32768
    assert rows[0]["peak_memory_gb"] == pytest.approx(25.8 * 1.073741824)
    assert rows[0]["fused_cross_entropy"] is True
