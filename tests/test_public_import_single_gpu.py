"""The single-GPU / single-node importers of issue 9 (PEFT, unsloth, torchao, ml-engineering
torch.compile, FlashAttention) on the real tables in shared/data/public: rows kept and skipped
by reason, values checked by hand against the CSVs, citations, run groups and weights."""

from __future__ import annotations

import pandas as pd
import pytest

from collectors.public import IMPORTERS
from perfmodel.paths import shared_public_data_dir
from perfmodel.schema import COLUMN_NAMES, fill_run_defaults

PUBLIC = shared_public_data_dir()
# source stem -> (rows in the CSV as the data README lists them, citation repository)
SOURCES = {
    "peft_method_comparison": (4648, "huggingface/peft@"),
    "unsloth_readme_benchmarks": (175, None),
    "torchao_readme_benchmarks": (46, "pytorch/ao@"),
    "ml_engineering_torch_compile_b200": (24, "stas00/ml-engineering@"),
    "flash_attention_training_speed": (5, "Dao-AILab/flash-attention@"),
}
_cache: dict[str, object] = {}


def _imported(stem: str):
    path = PUBLIC / f"{stem}.csv"
    if not path.is_file():
        pytest.skip(f"{path} absent")
    if stem not in _cache:
        _cache[stem] = IMPORTERS[stem](path)
    return _cache[stem]


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(SOURCES))
def test_rows_conform_cite_and_cost(stem: str) -> None:
    from perfmodel.analytic import estimate
    from perfmodel.catalog import resolve_gpu_key
    from perfmodel.codec import workload_from_row
    from perfmodel.dataset import _fill_from_catalog

    result = _imported(stem)
    source_rows, repo = SOURCES[stem]
    assert len(result.rows) + sum(result.skipped.values()) == source_rows
    rows = result.rows
    if repo is None:
        assert rows.empty
        return
    assert list(rows.columns) == list(COLUMN_NAMES)
    assert rows["citation"].str.startswith(repo).all()
    assert rows["row_id"].is_unique and (rows["source"] == stem).all()
    assert {g for g in rows["gpu"] if resolve_gpu_key(g) != g} == set()
    filled, _ = _fill_from_catalog(rows)
    for _, row in filled.iterrows():  # every kept row can be costed (no dimension missing)
        bound = estimate(workload_from_row(row.to_dict())).t_roofline_s
        assert 0 < bound < row["step_time_s"]  # measured steps are slower than the roofline


@pytest.mark.parametrize("stem", sorted(s for s, (_, repo) in SOURCES.items() if repo))
def test_weights_make_one_group_one_vote(stem: str) -> None:
    rows = fill_run_defaults(_imported(stem).rows)
    assert rows["sample_weight"].sum() == pytest.approx(rows["run_group"].nunique())
    per_group = rows.groupby("run_group")["sample_weight"].sum()
    assert per_group.to_numpy() == pytest.approx([1.0] * len(per_group))


def _by_note(rows: pd.DataFrame, text: str) -> pd.DataFrame:
    return rows[rows["notes"].str.contains(text, regex=False)]


def test_unsloth_rows_all_skipped_with_reasons() -> None:
    result = _imported("unsloth_readme_benchmarks")
    # row_kind counts in the CSV: 96 notebook runs, 28 + 28 one-epoch time / memory, 18 context
    # lengths, 5 LLaMA-Factory throughput rows (lines 154-158)
    counts = sorted(result.skipped.values())
    assert counts == [5, 18, 28, 28, 96]
    assert any("A100 variant" in reason for reason in result.skipped)


def test_ml_engineering_compile_rows() -> None:
    rows = _imported("ml_engineering_torch_compile_b200").rows
    assert len(rows) == 16  # 2 models x 2 backward workloads x 4 modes; 8 forward-only rows skipped
    assert (rows["gpu"] == "B200").all() and rows["activation_checkpointing"].all()
    # CSV line 6: Llama 3.2 1B, forward+backward, eager: 48.8 ms, no optimizer step
    eager = rows[
        (rows["model_name"] == "llama3.2-1b") & (rows["optimizer"] == "none") & ~rows["torch_compile"]
    ]
    assert len(eager) == 1
    assert eager.iloc[0]["step_time_s"] == pytest.approx(0.0488)
    assert not eager.iloc[0]["includes_optimizer_step"] and eager.iloc[0]["seq_len"] == 512
    # CSV line 22: Llama 3.1 8B, + AdamW step, eager: 637.3 ms at 8192 tokens
    adamw = rows[
        (rows["model_name"] == "llama3.1-8b") & (rows["optimizer"] == "adamw") & ~rows["torch_compile"]
    ]
    assert adamw.iloc[0]["step_time_s"] == pytest.approx(0.6373)
    assert adamw.iloc[0]["tokens_per_s"] == pytest.approx(8192 / 0.6373)
    # the three compile modes of one workload are one vote; eager is its own
    compiled = rows[rows["torch_compile"]]
    assert compiled.groupby(["model_name", "optimizer"])["run_group"].nunique().eq(1).all()
    assert rows["run_group"].nunique() == 8


def test_flash_attention_rows() -> None:
    rows = _imported("flash_attention_training_speed").rows.set_index("model_name")
    assert (rows["attention_kernel"] == "flash").all() and (rows["num_gpus"] == 8).all()
    # CSV line 2: GPT3-125M, 0.5M-token batch, 1310k tokens/s over 8 GPUs; the config's global
    # batch of 256 x 2048 tokens
    small = rows.loc["gpt3-125m"]
    assert small["step_time_s"] == pytest.approx(256 * 2048 / 1_310_000)
    assert (small["hidden_size"], small["num_layers"], small["num_heads"]) == (768, 12, 12)
    # CSV line 6: GPT3-2.7B, 1M-token batch, 85k tokens/s; head dim 128 (20 heads of 128 = 2560)
    big = rows.loc["gpt3-2.7b-hdim128"]
    assert big["step_time_s"] == pytest.approx(512 * 2048 / 85_000)
    assert big["num_heads"] * 128 == big["hidden_size"] == 2560
    assert big["micro_batch_size"] * big["grad_accum_steps"] * 8 == big["global_batch_size"] == 512
    assert set(rows["strategy"]) == {"ddp", "zero1"}


def test_torchao_rows() -> None:
    result = _imported("torchao_readme_benchmarks")
    rows = result.rows
    assert (rows["gpu"] == "MI300X").all() and len(rows) == 3
    # CSV line 30: MI300X bf16 baseline, 5376.5 tokens/s per GPU at batch 1 x 8192
    base = rows[rows["precision"] == "amp_bf16"].iloc[0]
    assert base["step_time_s"] == pytest.approx(8192 / 5376.5)
    assert base["peak_memory_gb"] == pytest.approx(39.09)
    # CSV lines 31 and 33: tensorwise (6166.0) and rowwise (5891.0) are both fp8: one group
    fp8 = rows[rows["precision"] == "fp8"].sort_values("step_time_s")
    assert fp8["step_time_s"].tolist() == pytest.approx([8192 / 6166.0, 8192 / 5891.0])
    assert fp8["run_group"].nunique() == 1
    # line 32 (rowwise_with_gw_hp) keeps bf16 weight-gradient matmuls
    assert sum(n for reason, n in result.skipped.items() if "gw_hp" in reason) == 1
    assert result.skipped["8x H100: variant not stated (SXM 80GB 700 W or 96GB HBM2e 500 W)"] == 12
    assert base["tokens_per_s"] == pytest.approx(5376.5 * 8)  # total over the 8 GPUs
