"""The kernel table: the committed parquet conforms to the schema and cites every row; the importers
read shapes and dtypes the way their sources state them, and skip what they cannot place."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from collectors.public.kernels_liger import import_liger_kernel_benchmarks
from perfmodel.catalog import resolve_gpu_key
from perfmodel.errors import DataError
from perfmodel.kernels.table import load_kernel_table, work_of_row
from perfmodel.schema import KERNEL_COLUMN_NAMES

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return load_kernel_table(ROOT / "datasets" / "kernels")


def test_the_committed_table_conforms_and_cites_every_row(table: pd.DataFrame) -> None:
    assert tuple(table.columns) == KERNEL_COLUMN_NAMES
    assert table["row_id"].is_unique
    assert (table["time_s"] > 0).all() and (table["bytes_moved"] >= table["bytes"] * (1 - 1e-9)).all()
    public = table[table["source"] != "perfmodel-collector"]
    assert public["citation"].str.match(r"^[\w.-]+/[\w.-]+@[0-9a-f]{7,40}:\S+").all()
    assert all(g == "cpu" or resolve_gpu_key(g) == g for g in table["gpu"].unique())
    for row in table.sample(300, random_state=0).to_dict("records"):
        work_of_row(row)  # every row is a valid KernelWork


def test_the_table_spans_the_accelerators_and_kinds_the_issue_names(table: pd.DataFrame) -> None:
    gpus = set(table["gpu"])
    assert {"B200", "H100-SXM", "H100-PCIe", "H100-NVL", "A100-40GB", "A100-80GB", "RTX-3090"} <= gpus | {
        "H100-PCIe"
    }
    assert {"V100-PCIe-32GB", "T4", "L4", "P100", "MI250"} <= gpus  # NeuSight
    kinds = set(table["kernel_kind"])
    assert {
        "matmul",
        "attention",
        "norm",
        "activation",
        "rotary",
        "elementwise",
        "loss",
        "embedding",
    } <= kinds
    neusight = table[table["source"].str.startswith("neusight_op")]
    assert set(neusight["dtype"]) == {"fp32"}  # TF32 off (PyTorch >= 1.12 default; sgemm kernel names)


def test_mamf_rows_are_bf16_then_fp8_by_the_readme_tables(table: pd.DataFrame) -> None:
    mamf = table[table["source"] == "ml_engineering_mamf_matmul"]
    a100 = mamf[mamf["gpu"] == "A100-80GB"]
    assert list(a100["dtype"]) == ["bf16"]  # the A100 has no FP8: its row labelled FP8 is the BF16 table's
    # "NVIDIA A100 SXM | 271.2 | 312 | 86.9% | 1024x10240x5120": 2*1024*10240*5120 FLOP / 271.2 TFLOP/s
    assert float(a100["time_s"].iloc[0]) == pytest.approx(2 * 1024 * 10240 * 5120 / 271.2e12)
    assert set(mamf[mamf["gpu"] == "B200"]["dtype"]) == {"bf16", "fp8"}


def _liger_csv(path: Path, rows: list[dict[str, object]]) -> Path:
    base = {"metric_name": "speed", "metric_unit": "ms", "x_label": "", "gpu_name": "NVIDIA A100-SXM4-80GB",
            "timestamp": "2024-09-03 15:31:39", "liger_version": "0.2.1", "source_file": "benchmark/data/all_benchmark_data.csv",
            "first_commit": "b5672a153b7b", "first_commit_date": "2024-09-03", "last_commit": "2120862ba532"}  # fmt: skip
    frame = pd.DataFrame([{**base, **r} for r in rows])
    frame.to_csv(path, index=False)
    return path


def _liger_row(
    kernel: str, provider: str, mode: str, x: object, cfg: dict[str, object], ms: float = 1.0, x_name: str = "V"
) -> dict[str, object]:
    return {"kernel_name": kernel, "kernel_provider": provider, "kernel_operation_mode": mode, "x_name": x_name,
            "x_value": x, "extra_benchmark_config_str": json.dumps(cfg), "y_value_50": ms, "y_value_20": ms,
            "y_value_80": ms}  # fmt: skip


def test_liger_rows_take_the_scripts_shapes_and_dtypes(tmp_path: Path) -> None:
    rows = [
        _liger_row(
            "cross_entropy", "huggingface", "forward", 4096, {"B": 8, "T": 2048}, 0.53
        ),  # no dtype: the script's fp32
        _liger_row("cross_entropy", "liger", "full", 4096, {"B": 8, "T": 2048}, 0.9),
        _liger_row(
            "rms_norm",
            "huggingface",
            "backward",
            4096,
            {"M": 2048, "dtype": "torch.bfloat16", "eps": 1e-6},
            0.74,
            "H",
        ),
        _liger_row(
            "swiglu",
            "huggingface",
            "forward",
            1024,
            {"B": 4, "hidden_size": 4096, "dtype": "torch.bfloat16"},
            1.0,
            "T",
        ),
        _liger_row("cross_entropy", "huggingface", "no-grad-forward", 4096, {"B": 8, "T": 2048}, 0.5),
    ]
    got = import_liger_kernel_benchmarks(_liger_csv(tmp_path / "liger.csv", rows))
    frame = got.frame()
    assert len(frame) == 3
    ce = frame[(frame["kernel_kind"] == "loss") & (frame["impl"] == "eager")].iloc[0]
    assert (ce["dtype"], ce["phase"], ce["shape"], ce["time_s"]) == ("fp32", "forward", "16384x4096", 0.53e-3)
    assert (
        "dtype from the script" in ce["notes"] and "benchmark_cross_entropy.py@b5672a153b7b" in ce["citation"]
    )
    fused = frame[frame["impl"] == "fused"].iloc[0]
    assert fused["bytes_moved"] == fused["bytes"]  # a fused kernel moves the ideal bytes
    norm = frame[frame["kernel_kind"] == "norm"].iloc[0]
    assert (norm["variant"], norm["dtype"], norm["launches"]) == (
        "rms",
        "bf16",
        16,
    )  # the census's HF backward
    assert any("whole MLP module" in k for k in got.skipped) and any("inference" in k for k in got.skipped)


def test_a_liger_sweep_flat_in_size_is_left_out(tmp_path: Path) -> None:
    cfg = json.dumps({"M": 2048, "dtype": "torch.bfloat16", "eps": 1e-6})
    rows = [{"kernel_name": "rms_norm", "kernel_provider": "liger", "kernel_operation_mode": "backward", "x_name": "H",
             "x_value": h, "extra_benchmark_config_str": cfg, "y_value_50": 0.5, "y_value_20": 0.5, "y_value_80": 0.5}
            for h in (1024, 2048, 4096, 8192)]  # fmt: skip
    got = import_liger_kernel_benchmarks(_liger_csv(tmp_path / "flat.csv", rows))
    assert got.rows == [] and sum(got.skipped.values()) == 4


EAGER_ATTENTION_README = """Some prose.

## Forward benchmark

|bs|seqlen|headdim|nheads|PT eager (ms/forward)|PT native (ms/forward)|Hazy (ms/forward)|speedup|
|---|---|---|---|---|---|---|---|
|8  |512 |64 |12 |0.400 |0.200 |0.100 |2.0 |

## Benchmark forward + backward

|bs|seqlen|headdim|nheads|PT eager (ms/forward)|PT native (ms/forward)|PT Native speedup|
|---|---|---|---|---|---|---|
|16 |1024 |128 |24 |6.000 |5.000 |1.2 |
|16 |256 |32 |12 |0.600 |0.300 |2.0 |
"""


def test_the_eager_attention_tables_become_math_attention_rows_with_their_own_kernels() -> None:
    from collectors.public.kernels_misc import eager_attention_imports
    from perfmodel.kernels import work as W

    forward, training = eager_attention_imports(EAGER_ATTENTION_README)
    assert (forward.source, len(forward.rows), training.source, len(training.rows)) == (
        "fxmarty_eager_attention_forward_a100", 1, "fxmarty_eager_attention_training_a100", 2,
    )  # fmt: skip
    row = forward.rows[0]
    assert (row["gpu"], row["kernel_kind"], row["variant"], row["dtype"], row["phase"]) == (
        "A100-80GB", "attention", "math", "fp16", "forward",
    )  # fmt: skip
    assert row["time_s"] == pytest.approx(0.400e-3)  # the eager column, not SDPA's
    assert row["shape"] == f"8x12x512x512x64x0x{W.SCORES_NATIVE_SOFTMAX}"
    big = training.rows[0]
    assert big["phase"] == "full" and big["time_s"] == pytest.approx(6.0e-3)
    work = work_of_row(big)  # the stored row reads back as the work it measured, dropout included
    flags = W.SCORES_NATIVE_SOFTMAX | W.SCORES_DROPOUT
    assert work == W.attention_work(
        16, 24, 1024, 1024, 128, "fp16", causal=False, variant="math", phase="full", scores=flags
    )


def test_neusight_keeps_the_kernels_that_ran_from_l2_but_not_the_index_bound_embedding_backwards(
    table: pd.DataFrame,
) -> None:
    from collectors.public.kernels_neusight import _feature_kernel_bound
    from perfmodel.kernels import work as W

    # GPT-2 large's learned positions (1024 x 1280 fp32 = 5.2 MB) on 1,024 tokens: the feature
    # kernel's loop over the indices sets the time; its word table (257 MB) is a dense write
    assert _feature_kernel_bound(W.embedding_work(1024, 1024, 1280, "fp32", phase="backward"), "H100-SXM")
    assert not _feature_kernel_bound(W.embedding_work(1024, 50257, 1280, "fp32", phase="backward"), "H100-SXM")
    assert not _feature_kernel_bound(W.embedding_work(4096, 1024, 1280, "fp32", phase="backward"), "H100-SXM")
    assert not _feature_kernel_bound(W.embedding_work(1024, 1024, 1280, "fp32", phase="forward"), "H100-SXM")
    # the L4 traces' LayerNorms over 4,096 x 1,024 fp32 (33.6 MB < its 48 MB L2) are in the table
    ln = table[(table["source"] == "neusight_op_traces") & (table["gpu"] == "L4") & (table["kernel_kind"] == "norm")
               & (table["shape"] == "4096x1024") & (table["phase"] == "forward")]  # fmt: skip
    assert len(ln) >= 1 and (ln["bytes_moved"] < 48e6).all()
    small_embedding_backward = table[(table["kernel_kind"] == "embedding") & (table["phase"] == "backward")
                                     & table["source"].str.startswith("neusight")]  # fmt: skip
    assert not any(_feature_kernel_bound(work_of_row(r), r["gpu"]) for r in small_embedding_backward.to_dict("records"))



def test_the_embedding_harness_writes_a_random_gradient_and_accumulates_the_table(tmp_path: Path) -> None:
    """benchmark_embedding.py's full call: output.backward(torch.randn_like(output)) writes the random
    gradient (tokens x dim x e) and, `.grad` never reset, adds the dense (vocab x dim) gradient to it
    (3 x vocab x dim x e) on top of the embedding's own forward and backward."""
    from perfmodel.kernels import work as W

    cfg = {"B": 8, "T": 512, "D": 768, "dtype": "torch.float32"}
    rows = [_liger_row("embedding", "huggingface", mode, 32768, cfg) for mode in ("forward", "full")]
    frame = import_liger_kernel_benchmarks(_liger_csv(tmp_path / "emb.csv", rows)).frame().set_index("phase")
    own = W.embedding_work(4096, 32768, 768, "fp32", phase="full")
    assert frame.loc["forward", "bytes_moved"] == W.embedding_work(4096, 32768, 768, "fp32").bytes_moved
    assert frame.loc["full", "bytes_moved"] == own.bytes_moved + 4096 * 768 * 4 + 3 * 32768 * 768 * 4
    assert frame.loc["full", "launches"] == own.launches + 2


XLA_HEADER = '''constexpr char kDefaultMatmulPTable[] = R"pb(
  entries {
    key: "sm_90"
    value {
      entries {
        b: 2
        m: 512
        n: 1024
        k: 256
        flops { key: "BF16xBF16->BF16" value: 100000000000000 }
        flops { key: "F32xF32->F32" value: 50000000000000 }
        flops { key: "F8E4M3FNxF8E4M3FN->BF16" value: 150000000000000 }
      }
    }
  }
  entries {
    key: "sm_120"
    value {
      entries {
        b: 1
        m: 256
        n: 256
        k: 256
        flops { key: "BF16xBF16->BF16" value: 10000000000000 }
      }
    }
  }
)pb";
'''


def test_xlas_gemm_table_is_read_per_compute_capability_and_operand_types() -> None:
    from collectors.public.kernels_xla import DTYPES, read_matmul_table

    rows = read_matmul_table(XLA_HEADER)
    assert [(r["sm"], r["b"], r["m"], r["n"], r["k"], r["types"]) for r in rows] == [
        ("sm_90", 2, 512, 1024, 256, "BF16xBF16->BF16"),
        ("sm_90", 2, 512, 1024, 256, "F32xF32->F32"),
        ("sm_90", 2, 512, 1024, 256, "F8E4M3FNxF8E4M3FN->BF16"),
        ("sm_120", 1, 256, 256, 256, "BF16xBF16->BF16"),
    ]
    assert [r["flops_per_s"] for r in rows[:2]] == [1e14, 5e13]
    assert {DTYPES.get(r["types"]) for r in rows} == {"bf16", "tf32", None}  # f32 operands run as TF32
    with pytest.raises(DataError):
        read_matmul_table("no table here")
