"""The PEFT method-comparison importer on the real table (shared/data/public): rows kept and
skipped by reason, values checked by hand against the CSV, and one configuration = one group."""

from __future__ import annotations

import pandas as pd
import pytest

from collectors.public.peft import import_peft_method_comparison
from perfmodel.paths import shared_public_data_dir

CSV = shared_public_data_dir() / "peft_method_comparison.csv"
pytestmark = pytest.mark.skipif(
    not CSV.is_file(), reason="shared/data/public/peft_method_comparison.csv absent"
)


@pytest.fixture(scope="module")
def result():
    return import_peft_method_comparison(CSV)


def _row(rows: pd.DataFrame, blob_prefix: str) -> pd.Series:
    match = rows[rows["citation"].str.contains(f"blob {blob_prefix}")]
    assert len(match) == 1, blob_prefix
    return match.iloc[0]


def test_every_source_row_is_kept_or_counted(result) -> None:
    # README: 4648 rows = 4406 eval windows + 242 run summaries; image-gen has 252 rows (32 runs).
    assert len(result.rows) + sum(result.skipped.values()) == 4648
    assert (
        result.skipped[
            "image-gen (FLUX.2-klein DreamBooth: diffusion transformer + text encoder + VAE) not expressible"
        ]
        == 252
    )
    # the 4406 windows less the 220 image-gen windows (100-step windows)
    assert result.skipped["eval window (the run is imported as its run_summary row)"] == 4186
    # full, LN tuning, LoRA r32, r64, rsLoRA r64 on torch 2.7.1 / 2.9.0 / 2.13.0 (5 x 3), and
    # LoRA r10 on the MLP on 2.9.0 (two peft versions) and 2.13.0
    assert len(result.rows) == 18
    assert result.skipped["PEFT method not expressible by the workload: lora (DoRA)"] == 3
    assert result.skipped["LoRA-FA (A frozen, own optimizer): not plain LoRA"] == 3
    assert not any("ia3" in r for r in result.rows["notes"])


def test_values_match_the_csv(result) -> None:
    rows = result.rows
    # CSV line 3901: lora/llama-3.2-3B-rank32, torch 2.13.0, step 0.11704 s, 7173.82 tok/s, 34.177 samples/s
    lora = _row(rows, "890903c564")
    assert lora["step_time_s"] == pytest.approx(0.11704)
    assert lora["tokens_per_s"] == pytest.approx(7173.82)
    assert lora["seq_len"] == 210  # 7173.82 / 34.177 = 209.9 tokens per sample
    assert (lora["lora_r"], lora["lora_target_modules"], lora["micro_batch_size"]) == (32, 2, 4)
    assert (lora["gpu"], lora["precision"], lora["framework"], lora["attention_kernel"]) == (
        "L40S",
        "bf16",
        "hf-eager",
        "sdpa",
    )
    assert not lora["activation_checkpointing"] and not lora["torch_compile"]
    assert lora["citation"].startswith("huggingface/peft@b8bf4075a0")
    assert "lora--llama-3.2-3B-rank32.json" in lora["citation"]
    # CSV line 3523: full fine-tuning, 0.36259 s, no LoRA
    full = _row(rows, "cc762418b6")
    assert full["step_time_s"] == pytest.approx(0.36259) and pd.isna(full["lora_r"])
    # CSV line 3733: LN tuning, 175104 trainable of Llama-3.2-3B's 3,212,749,824 parameters
    ln = _row(rows, "eea4f61b6b")
    assert ln["trainable_fraction"] == pytest.approx(175104 / 3212749824)
    # CSV line 3796: LoRA r10 on gate/up/down
    mlp = _row(rows, "99ac2908bb")
    assert (mlp["lora_r"], mlp["lora_target_modules"]) == (10, 3)
    # CSV line 296: the 2025-06-17 run of rank32 (0.16725 s) was re-run on the same versions two days later
    assert not rows["citation"].str.contains("blob 8d4f641693").any()
    assert rows["peak_memory_gb"].isna().all()  # includes the generation eval: not a training peak


def test_library_versions_of_one_configuration_share_a_group(result) -> None:
    from sklearn.model_selection import GroupKFold

    rows = result.rows
    lora32 = rows[(rows["lora_r"] == 32)]
    assert sorted(lora32["torch_version"]) == ["2.13.0+cu130", "2.7.1+cu126", "2.9.0+cu128"]
    assert lora32["run_group"].nunique() == 1
    # LoRA r64 and rsLoRA r64 are one workload: one group of 6 runs
    assert rows.loc[rows["lora_r"] == 64, "run_group"].nunique() == 1
    assert rows["run_group"].nunique() == 5
    for train, test in GroupKFold(n_splits=5).split(rows, groups=rows["run_group"]):
        assert not set(rows["run_group"].iloc[train]) & set(rows["run_group"].iloc[test])
        assert set(lora32.index) <= set(train) or set(lora32.index) <= set(test)
