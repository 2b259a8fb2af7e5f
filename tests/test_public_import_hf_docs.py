"""Hugging Face transformers performance-docs importer on the real shared CSV (skipped when
shared/data is absent): kept rows and skip reasons, hand-checked rows against the docs' printed
numbers (CSV line numbers and the EXCERPTS.md quotes in comments), citations, one vote per run."""

from __future__ import annotations

import pandas as pd
import pytest

from collectors.public import IMPORTERS, default_public_dir
from collectors.public.hf_docs import import_hf_transformers_perf_docs
from perfmodel.schema import COLUMN_NAMES, fill_run_defaults

CSV = default_public_dir() / "hf_transformers_perf_docs.csv"
pytestmark = pytest.mark.skipif(not CSV.is_file(), reason=f"{CSV} not present (shared data)")


@pytest.fixture(scope="module")
def result():
    return import_hf_transformers_perf_docs(CSV)


def test_registered() -> None:
    assert IMPORTERS["hf_transformers_perf_docs"] is import_hf_transformers_perf_docs


def test_kept_rows_and_skip_reasons(result) -> None:
    source = pd.read_csv(CSV, dtype=str, keep_default_na=False)
    assert len(source) == 12
    assert result.skipped == {
        "optimizer not expressible (state precision): bnb.optim.Adam8bit": (
            source["optimizer"] == "bnb.optim.Adam8bit"
        ).sum(),
        "torch.nn.DataParallel: not a strategy the workload can state": 1,
        "NCCL_P2P_DISABLE=1 (GPU traffic through host memory): interconnect not expressible": 1,
    }
    assert len(result.rows) == 8
    assert list(result.rows.columns) == list(COLUMN_NAMES)
    assert result.rows["framework"].eq("hf-eager").all()


def test_hand_checked_rows(result) -> None:
    rows = result.rows.set_index(result.rows["citation"].str.extract(r"\((.*)\)$")[0])
    # CSV line 2 / EXCERPTS "per_device_train_batch_size=4 ... Time: 57.82 / Samples/second: 8.86 /
    # GPU memory occupied: 14949 MB" on a Tesla V100-SXM2 16GB
    r = rows.loc["section 'Vanilla Training'"]
    assert (r["model_name"], r["seq_len"], r["micro_batch_size"], r["grad_accum_steps"]) == (
        "bert-large",
        512,
        4,
        1,
    )
    assert r["step_time_s"] == pytest.approx(4 / 8.86)
    assert (r["gpu"], r["precision"], r["optimizer"], r["peak_memory_gb"]) == (
        "V100-16GB",
        "fp32",
        "adamw",
        14.949,
    )
    # CSV line 6: "batch_size=1, gradient_accumulation_steps=4, gradient_checkpointing=True, fp16=True ...
    # Samples/second: 10.09"
    r = rows.loc["section 'FP16 + GA + GC'"]
    assert (r["micro_batch_size"], r["grad_accum_steps"], r["global_batch_size"]) == (1, 4, 4)
    assert (r["precision"], bool(r["activation_checkpointing"])) == ("amp_fp16", True)
    assert r["step_time_s"] == pytest.approx(4 / 10.09)
    # CSV line 7: optim="adafactor", 7.96 samples/s
    assert rows.loc["section 'Adafactor'", "optimizer"] == "adafactor"
    # CSV line 12 / EXCERPTS "DDP w/ NVlink {'train_runtime': 101.9003 ...}" over --max_steps 200,
    # per-device batch 4 on 2x TITAN RTX
    r = rows.loc["DDP NVLink=Y"]
    assert (r["model_name"], r["gpu"], r["num_gpus"], r["num_nodes"], r["strategy"]) == (
        "gpt2",
        "Titan-RTX",
        2,
        1,
        "ddp",
    )
    assert (r["micro_batch_size"], r["global_batch_size"], r["seq_len"]) == (4, 8, 1024)
    assert r["step_time_s"] == pytest.approx(101.9003 / 200)


def test_citations_and_one_vote_per_run(result) -> None:
    citations = result.rows["citation"]
    assert citations.str.match(
        r"^huggingface/transformers@[0-9a-f]{40}:docs/source/en/perf_train_gpu_(one\.mdx|many\.md) \("
    ).all()
    filled = fill_run_defaults(result.rows)
    assert filled["run_group"].is_unique  # eight different configurations
    assert filled["sample_weight"].sum() == pytest.approx(8)


def test_every_row_is_costable(result) -> None:
    from perfmodel.analytic import estimate
    from perfmodel.codec import workload_from_row
    from perfmodel.dataset import _fill_from_catalog

    filled, _ = _fill_from_catalog(result.rows)
    for _, row in filled.iterrows():
        assert 0 < estimate(workload_from_row(row.to_dict())).t_roofline_s < row["step_time_s"]
