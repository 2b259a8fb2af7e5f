"""The `ludwig` collector: its grid, records -> rows, the committed rows against Ludwig's own counts,
and the evaluation's arithmetic."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pandas as pd
import pytest

from collectors.ludwig_eval import RunComparison, evaluate_runs, evaluation_table, summary, summary_by_kind
from collectors.ludwig_profile import data_sizes, heldout_transformer_runs, ludwig_runs
from collectors.ludwig_rows import records_to_rows

ROOT = Path(__file__).resolve().parents[1]
RAW = ROOT / "datasets" / "raw"


def test_the_grid_differs_from_the_held_out_lab_runs():
    runs = ludwig_runs()
    assert len({r.name for r in runs}) == len(runs)
    # the lab's 18 held-out runs: batch 64 or auto on 2,000 / 2,012 / 4,000 rows, LLM batch 8 on 500 / 1,000 rows
    lab = {(64, 2000), (64, 4000), (64, 2012), ("auto", 2000), ("auto", 4000), (8, 500), (8, 1000)}
    assert not {(r.config["trainer"]["batch_size"], r.rows) for r in runs} & lab
    assert {r.data for r in runs} == {"tabular", "text", "images", "llm", "wide16", "wide32", "longtext"}
    held = heldout_transformer_runs()  # issue 24: other tables, texts, sizes and row counts
    assert not {r.data for r in held} & {r.data for r in runs}
    assert not {(r.data, r.rows) for r in held} & {(r.data, r.rows) for r in runs}
    assert data_sizes(runs)["tabular"] == sorted(
        set(data_sizes(runs)["tabular"]), key=data_sizes(runs)["tabular"].index
    )


def record(tmp_path: Path, steps: list[float]) -> dict:
    rows = 100
    pd.DataFrame({"a": [float(i) for i in range(rows)], "y": [i % 2 for i in range(rows)]}).to_csv(
        tmp_path / "d.csv", index=False
    )
    return {
        "name": "tiny",
        "dataset": str(tmp_path / "d.csv"),
        "ludwig_version": "0.17.10",
        "torch_version": "2.11.0",
        "config_used": {
            "input_features": [{"name": "a", "type": "number"}],
            "output_features": [{"name": "y", "type": "binary"}],
            "trainer": {"batch_size": "auto", "epochs": 1},
        },
        "total_wall_s": 15.0,
        "import_total_s": 9.0,
        "ludwig_model_ctor_s": 2.4,
        "phases_s": {
            "preprocess": 0.1,
            "create_model": 0.01,
            "tune_batch_size_total": 3.0,
            "train_call_to_first_batch": 3.5,
            "steps_sum": sum(steps),
            "evals_sum": 0.1,
            "after_loop_to_return": 0.2,
        },
        "steps": {
            "count": len(steps),
            "optimizer_steps": len(steps),
            "median_s": statistics.median(steps),
            "all_s": steps,
        },
        "progress": {"batch_size": 16, "total_steps": len(steps)},
        "rows": {"train": 70, "validation": 10, "test": 20},
        "tune": [{"for_training": True, "chosen": 16, "s": 1.0}],
        "model_params": 2,
        "runq_wait_s": {"train_call_fraction_of_wall": 0.01},
    }


def test_a_record_becomes_a_row_at_the_batch_size_ludwig_used(tmp_path):
    steps = [0.02, 0.004, 0.005, 0.006, 0.004]
    row = records_to_rows([record(tmp_path, steps)], hardware_id="cpu-test")[0]
    assert (
        row["framework"] == "ludwig" and row["micro_batch_size"] == 16
    )  # the tuner's choice, not auto's assumption
    assert row["step_time_s"] == pytest.approx(statistics.median(steps[1:]))  # the first batch warms up
    assert (
        row["measured_steps"] == 4
        and row["warmup_steps"] == 1
        and row["samples_per_s"] == pytest.approx(16 / 0.0045)
    )
    # 70 training rows in batches of 16: each epoch's fifth batch holds 6 rows, another batch size: left out
    two_epochs = record(tmp_path, [0.02, 0.004, 0.005, 0.006, 0.001, 0.004, 0.005, 0.006, 0.004, 0.001])
    two_epochs["progress"]["steps_per_epoch"] = 5
    again = records_to_rows([two_epochs], hardware_id="cpu-test")[0]
    assert list(again["step_times_s"]) == [0.004, 0.005, 0.006, 0.004, 0.005, 0.006, 0.004]
    notes = json.loads(row["notes"])
    assert notes["total_wall_s"] == 15.0 and notes["tuned"] == [[True, 16]] and notes["steps"] == 5
    from perfmodel.catalog import get_gpu
    from perfmodel.codec import workload_from_row
    from perfmodel.schema import COLUMN_NAMES

    assert set(row) <= set(COLUMN_NAMES)
    assert workload_from_row(row, gpu=get_gpu("cpu")).framework == "ludwig"


def test_committed_rows_cost_the_model_ludwig_built():
    shards = sorted(RAW.glob("ludwig__*.parquet"))
    if not shards:
        pytest.skip("no ludwig shards committed")
    frame = pd.concat([pd.read_parquet(p) for p in shards])
    assert len(frame) >= 15 and set(frame.framework) == {"ludwig"}
    for _, row in frame.iterrows():
        notes = json.loads(row["notes"])
        assert notes["contention"] <= 0.3  # runs suffering CPU contention were re-run
        if (
            row["arch"] != "decoder"
        ):  # ECD: perfmodel's parameter count from the config and data is Ludwig's own
            assert row["params_total"] == notes["model_params_ludwig"], notes["ludwig_run"]


def test_the_evaluation_table_and_its_numbers():
    rows = [
        RunComparison(
            name="a",
            measured_s=10.0,
            predicted_s=11.0,
            low_s=9.0,
            high_s=12.0,
            steps_ludwig=5,
            steps_perfmodel=5,
            step_measured_s=0.1,
            step_predicted_s=0.1,
            contention=0.0,
        ),
        RunComparison(
            name="b",
            measured_s=20.0,
            predicted_s=10.0,
            low_s=9.0,
            high_s=12.0,
            steps_ludwig=5,
            steps_perfmodel=6,
            step_measured_s=0.1,
            step_predicted_s=0.1,
            contention=0.0,
        ),
    ]
    s = summary(rows)
    assert (
        s["median_ape"] == pytest.approx((0.1 + 0.5) / 2) and s["coverage"] == 0.5 and s["steps_equal"] == 0.5
    )
    assert "| a | 10.0 | 11.0 [9.0, 12.0] | 10% | yes | 5 / 5 |" in evaluation_table(rows)
    assert s["median_width"] == pytest.approx(12.0 / 9.0) and "median width x1.33" in evaluation_table(rows)


def test_evaluating_a_record_predicts_it_as_a_user_would(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "tiny.json").write_text(json.dumps(record(tmp_path, [0.02, 0.004, 0.005])))
    [cmp] = evaluate_runs(runs, use_learned=False)
    # auto, as the user wrote it: the tuner's largest try is 8 (a power of two <= 0.2 x 70 training rows): ceil(70 / 8)
    assert (cmp.steps_perfmodel, cmp.steps_ludwig, cmp.measured_s) == (9, 3, 15.0)
    assert cmp.low_s <= cmp.predicted_s <= cmp.high_s


@pytest.mark.slow
def test_the_held_out_lab_runs_meet_the_target_with_the_analytic_model():
    """The real Ludwig 0.17.10 runs committed under datasets/heldout/ludwig-lab/runs (never in the
    feature table, never fitted on), predicted as a user would with the analytic model: issue 24's
    target is a total-time median APE <= 15% and >= 85% inside the 90% interval, over the set and
    per model type (issue 16's was 25% / 80%). The set is issue 16's 18 lab runs and issue 24's four
    held-out transformer runs (`heldout_*`: the FT-Transformer combiner on 24- and 48-feature
    tables, the transformer encoder on 30-120-word texts; tables, texts, sizes and row counts no
    fitting run used), timed on a quiet host on 2026-12-05. Measured: 22 runs, 5%, 22 of 22 inside;
    the four transformer runs 4%, 12%, 15% and 8%, all inside. Step counts equal except the two
    `batch_size: auto` runs whose tuner stopped at batch size 1."""
    rows = evaluate_runs(ROOT / "datasets" / "heldout" / "ludwig-lab" / "runs", use_learned=False)
    s = summary(rows)
    assert s["runs"] == 22
    assert s["median_ape"] <= 0.15
    assert s["coverage"] >= 0.85
    by_kind = summary_by_kind(rows)
    assert set(by_kind) == {"ECD tabular", "ECD text", "ECD image", "LLM"}
    assert all(k["coverage"] >= 0.85 for k in by_kind.values()), by_kind
    transformer = summary([r for r in rows if r.name.startswith("heldout_")])
    assert transformer["runs"] == 4
    assert transformer["median_ape"] <= 0.15 and transformer["coverage"] >= 0.85
    unequal = {r.name for r in rows if r.steps_ludwig != r.steps_perfmodel}
    assert unequal == {"ecd_tab_concat_2000", "ecd_tab_concat_4000"}


@pytest.mark.slow
def test_the_held_out_evaluation_does_not_depend_on_the_machines_cpu(monkeypatch):
    """The lab's runs are predicted for the host they ran on (by its hardware id), so another CPU
    model or core count running the evaluation (an AMD EPYC CI host) gets the same numbers."""
    from perfmodel.catalog import hardware

    runs = ROOT / "datasets" / "heldout" / "ludwig-lab" / "runs"
    here = [(r.name, r.predicted_s, r.low_s, r.high_s) for r in evaluate_runs(runs, use_learned=False)]
    monkeypatch.setattr(hardware, "local_cpu_facts", lambda: ("AMD EPYC 7B13", 8, 64.0))
    hardware._describe_local_cpu.cache_clear()
    elsewhere = [(r.name, r.predicted_s, r.low_s, r.high_s) for r in evaluate_runs(runs, use_learned=False)]
    assert here == elsewhere


def test_held_out_transformer_runs_step_times():
    """Issue 24's held-out runs (collectors/ludwig_profile.py heldout_transformer_runs: FT-Transformer
    on 24- and 48-feature tables, the transformer encoder on 30-120-word texts; tables, texts, sizes
    and row counts no fitting run used), measured on the 2-core host under a 1-minute load of 10-14
    (committed in datasets/heldout/ludwig-lab/under-load/): their wall times are 5-20x a quiet
    host's, so each batch's on-CPU time of Ludwig's main thread stands in. Two fitting configs timed
    both quiet and under that load ran 1.5x (text_transformer_bs128_3000) and 1.9x
    (tab_nocombiner_bs128_8000) their quiet step in main-thread CPU, so the quiet step lies near
    CPU / 1.5 .. CPU / 1.9: the prediction must fall in CPU / 2.5 .. CPU (the generic-matmul costing
    before issue 24 predicted 63 ms for the 24-feature table: below 210 / 2.5 = 84)."""
    runs = ROOT / "datasets" / "heldout" / "ludwig-lab" / "under-load"
    rows = [r for r in evaluate_runs(runs, use_learned=False) if r.step_cpu_s is not None]
    assert len(rows) >= 3 and all(r.under_load for r in rows)
    for r in rows:
        assert r.step_cpu_s / 2.5 <= r.step_predicted_s <= r.step_cpu_s, r
