"""bench/kernel_fit_steps.py: the kernel model alone over the training rows, per kernel-efficiency file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.bench_scripts import load_bench

ROOT = Path(__file__).resolve().parents[1]


def _bench():  # type: ignore[no-untyped-def]
    return load_bench("kernel_fit_steps")


def test_the_summary_is_the_median_per_source_and_over_all_rows() -> None:
    bench = _bench()
    a = pd.DataFrame({"source": ["x", "x", "y"], "ape": [0.1, 0.3, 0.5]})
    b = pd.DataFrame({"source": ["x", "x", "y"], "ape": [0.2, 0.2, 0.1]})
    out = bench.summary({"a.json": a, "b.json": b})
    assert list(out.index) == ["all", "x", "y"] and list(out["rows"]) == [3, 2, 1]
    assert out.loc["all", "a.json"] == pytest.approx(30.0) and out.loc["x", "a.json"] == pytest.approx(20.0)
    assert out.loc["all", "b.json"] == pytest.approx(20.0) and out.loc["y", "b.json"] == pytest.approx(10.0)


@pytest.mark.slow
def test_the_shipped_fit_scores_what_the_training_data_says_and_a_slower_fit_scores_otherwise(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """With the shipped file the overall median is the kernel model's error as the training data
    (perfmodel.learn.data, y = log(measured / kernel-model step)) has it; halving the NVIDIA
    streaming efficiency prices the steps differently."""
    from perfmodel.kernels.efficiency import PARAMS_PATH
    from perfmodel.learn.data import load_training_data

    doc = json.loads(PARAMS_PATH.read_text())
    doc["values"]["eta_bw.nvidia"] *= 0.5
    slower = tmp_path / "slower.json"
    slower.write_text(json.dumps(doc))
    bench = _bench()
    assert bench.main([str(PARAMS_PATH), str(slower)]) == 0
    lines = capsys.readouterr().out.splitlines()
    overall = next(line for line in lines if line.startswith("| all |")).strip("| ").split(" | ")
    data = load_training_data()
    expected = float(np.median(np.abs(np.exp(-np.asarray(data.y)) - 1.0))) * 100
    assert int(overall[1]) == len(data.y)
    assert float(overall[2]) == pytest.approx(expected, abs=0.05)
    assert abs(float(overall[3]) - float(overall[2])) > 0.5
    assert bench.main([str(tmp_path / "missing.json")]) == 2


@pytest.mark.slow
def test_a_sources_rows_print_one_by_one_with_the_kernel_model_over_the_measured_step(capsys) -> None:  # type: ignore[no-untyped-def]
    """PEFT's 18 runs on an L40S, each with the ratio the training data's y gives it (exp(-y)); a
    source the table does not have exits 2."""
    from perfmodel.kernels.efficiency import PARAMS_PATH, load_efficiency

    bench = _bench()
    table = pd.read_parquet(ROOT / "datasets" / "features.parquet")
    rows = bench.row_ratios(table, load_efficiency(PARAMS_PATH), "peft_method_comparison")
    assert len(rows) == 18 and set(rows["gpu"]) == {"L40S"}
    ln = rows[rows["trainable_fraction"].notna()]  # LN tuning: 175,104 of 3.2 B weights trainable
    assert len(ln) == 3 and (ln["ratio"] < 1.1).all()  # priced with every weight gradient it was 1.2x
    assert bench.main(["--source", "peft_method_comparison"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| llama3.2-3b")]
    assert len(lines) == 18
    assert bench.main(["--source", "no-such-source"]) == 2
